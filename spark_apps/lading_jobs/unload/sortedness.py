"""Whether rows read in order are already in an ORDER BY's order: proven from Parquet
footers before the run, checked while reading.

A top-level ORDER BY over one Parquet input takes the Arrow-only path only if the
rows, read as that path reads them (files in listing order, row groups in file
order, each task a consecutive run of them, tasks in order), are already sorted.
Two steps, so that neither a writer's claims nor a partial proof decide alone:

* before the run (``footer_groups``, ``unproven``): every row group's footer has
  bounds for every sort key and counts no NULL in them, and each row group's rows
  all sort at or before the next group's (``before`` over the groups' bounds: on the
  first key the earlier group's maximum is below the later one's minimum, or equal
  to it and the same holds on the next key; reversed for DESC). That says nothing of
  the order inside a row group, and footers may be wrong;
* while reading (``Check``): each task compares every row with the next (vectorised,
  in Arrow) and reports its first and last keys; the driver compares each task's
  last keys with the next task's first (``across_tasks``). A row out of order, or a
  NULL key, ends the run on this path: its uploads are aborted and Spark sorts the
  rows instead (``unload.job``). A wrong order is never published.

Sort keys are of types Spark, Arrow's comparison kernels, Python and Parquet
statistics all order alike (``lading_jobs.sqlshape.ORDERABLE`` and decimals): integers,
decimals, booleans, dates, timestamps and UTF-8 strings (their byte order is their
code point order). NULL placement never matters: a NULL key leaves the path.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

Key = tuple[Any, ...]


class NotSorted(Exception):
    """The rows are not in the ORDER BY's order (or that cannot be shown); ``files``: the
    pending uploads the run wrote before finding out (the caller aborts them)."""

    def __init__(self, reason: str, files: list[dict[str, Any]] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.files = files or []


def before(a: Key, b: Key, descending: Sequence[bool]) -> bool:
    """Whether key ``a`` sorts at or before key ``b`` (lexicographically, per-key direction)."""
    for x, y, desc in zip(a, b, descending, strict=True):
        if x != y:
            return bool(x > y) if desc else bool(x < y)
    return True


# -- before the run: footers ---------------------------------------------------------------
def footer_groups(metadata: Any, keys: Sequence[str], descending: Sequence[bool],
                  label: str) -> list[tuple[str, Key, Key]] | str:
    """``(where, first, last)`` per non-empty row group of a file's footer (``pyarrow.parquet
    .FileMetaData``): the bounds its rows start at and end at in the sort's direction; or why
    the footer cannot show the order (no bounds, NULLs)."""
    leaves = {metadata.schema.column(i).path: i for i in range(len(metadata.schema))}
    out = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        if group.num_rows == 0:
            continue
        first, last = [], []
        for name, desc in zip(keys, descending, strict=True):
            leaf = leaves.get(name)
            if leaf is None:
                return f"{label} has no top-level column {name!r}"
            s = group.column(leaf).statistics
            if s is None or not s.has_min_max or not s.has_null_count:
                return f"{label} row group {g} has no bounds for {name!r}"
            if s.null_count:
                return f"{label} row group {g} has NULLs in {name!r}"
            try:
                lo, hi = s.min, s.max
            except (ValueError, TypeError, pa.ArrowException) as e:
                return f"{label} row group {g}: unreadable bounds for {name!r} ({e})"
            first.append(hi if desc else lo)
            last.append(lo if desc else hi)
        out.append((f"{label} row group {g}", tuple(first), tuple(last)))
    return out


def unproven(groups: Sequence[tuple[str, Key, Key]], descending: Sequence[bool]) -> str | None:
    """None when every group's rows sort at or before the next group's, else where not."""
    for (where, _, last), (after, first, _) in zip(groups, groups[1:], strict=False):
        try:
            ok = before(last, first, descending)
        except TypeError:
            ok = False
        if not ok:
            return f"the bounds of {where} and {after} overlap or are out of order"
    return None


# -- while reading -------------------------------------------------------------------------
class Check:
    """One task's check of its rows (the input columns at ``positions``, in reading order)."""

    def __init__(self, positions: Sequence[int], descending: Sequence[bool]) -> None:
        self.positions, self.descending = tuple(positions), tuple(descending)
        self.first: Key | None = None
        self.last: Key | None = None

    def __call__(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if n == 0:
            return
        keys = [batch.column(i) for i in self.positions]
        if any(k.null_count for k in keys):
            raise NotSorted("a sort key is NULL")
        head = tuple(k[0].as_py() for k in keys)
        if self.last is not None and not before(self.last, head, self.descending):
            raise NotSorted("the rows are not in order (between two batches)")
        if n > 1:
            ok: Any = None
            for k, desc in reversed(list(zip(keys, self.descending, strict=True))):
                a, b = k.slice(0, n - 1), k.slice(1)
                if ok is None:
                    ok = pc.greater_equal(a, b) if desc else pc.less_equal(a, b)
                else:
                    ok = pc.or_(pc.greater(a, b) if desc else pc.less(a, b), pc.and_(pc.equal(a, b), ok))
            if not pc.all(ok).as_py():
                raise NotSorted("the rows are not in order (within a row group)")
        if self.first is None:
            self.first = head
        self.last = tuple(k[n - 1].as_py() for k in keys)

    def report(self) -> str | None:
        """The task's first and last keys for the driver (None: the task read no rows)."""
        if self.first is None:
            return None
        return base64.b64encode(pickle.dumps((self.first, self.last))).decode()


def across_tasks(reports: Sequence[str], descending: Sequence[bool]) -> str | None:
    """Given the tasks' ``Check.report``s in task order, None when each task's last key sorts
    at or before the next one's first, else why not."""
    bounds = [pickle.loads(base64.b64decode(r)) for r in reports]  # noqa: S301 - our own tasks' output
    for n in range(1, len(bounds)):
        try:
            ok = before(bounds[n - 1][1], bounds[n][0], descending)
        except TypeError:
            ok = False
        if not ok:
            return "the rows are not in order (between two tasks)"
    return None
