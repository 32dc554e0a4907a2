"""The compaction planner: which parts to rewrite, in which groups. A pure function of a snapshot.

Candidates are parts *smaller than half of* ``targetFileSize`` whose statistics
say they may hold rows of ``scope.filter``. A run happens only when at least
``minInputFiles`` of them are *fresh* (not written by a compaction: parts under
``data/c-<id>/``); parts a compaction wrote never trigger a run on their own, but
ride along in a triggered run so they keep growing towards the target. When a
run triggers, every candidate is packed (next-fit, in part order) into groups
of at most ``targetFileSize`` input bytes; a last group of one part joins the
group before it; then the same number of groups is cut again, in the same order,
at even shares of the bytes (each still within the target), so a run's tasks
take about equally long; groups of one part are never rewritten. So a triggered run
consumes every fresh candidate it can pair, and the run after it, on an
unchanged table, finds no fresh candidate left: no re-compaction loop
(apache/iceberg#1661).

Upsert tables break ties between versions of a key with the same time by part
order, so a group there is a *run of consecutive parts* in part order (a part
that is not a candidate ends the run), and its outputs take the order of the
group's last part: relative to every other part they sort where the group's
parts did. Outputs of one group share that order; the rewrite keeps one row per
(key, time) inside a group so no tie between them can arise. Parts that already
share an order (the outputs of one earlier group) are one *unit*: a group takes
all of them or none, and the unit is a candidate only when every one of them is.
Otherwise a later run could end a group at one sibling and give its outputs,
which also hold rows of earlier parts, the order of a sibling it left alone: a tie
on (key, time) between them would fall to row positions in unrelated files.

Append and diff tables with ``sortBy`` pack candidates ordered by their first
sort column's lower bound, so a group holds nearby values when the data arrives
roughly ordered; their rewrite then sorts all groups as one and cuts the rows
into key ranges anyway (``compact.rangesort``), so the outputs are range-disjoint
however the values were spread.

``maxBytesPerRun`` takes whole groups, in order, while their input bytes fit.
A group may *drop deleted keys* (upsert) only when no part outside it may hold
rows older than ``since``: otherwise a delete marker is kept, or an older
version elsewhere would come back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lading_jobs.table import format as fmt
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.filters import interp
from lading_jobs.table.log.commits import Part, Snapshot

SMALL_FRACTION = 0.5
"""A part is a candidate below this share of ``targetFileSize`` (any two candidates fit one output)."""
WRITE_ID_PREFIX = "c-"
"""Parts a compaction writes live under ``data/c-<hex>/``."""


def written_by_compaction(part: Part) -> bool:
    return part.path.startswith(f"{fmt.DATA_DIR}/{WRITE_ID_PREFIX}")


@dataclass(frozen=True)
class Options:
    target_file_size: int
    min_input_files: int
    since: int
    max_bytes_per_run: int | None = None
    scope: ex.Expr | None = None  # bound to the table's schema
    cluster_column: int | None = None  # id of sortBy's first column: packs parts of nearby values together
    scope_tree: tuple[ex.Node, interp.Env] | None = None  # scope's filter again, for table.filters.interp


@dataclass(frozen=True)
class Group:
    """Parts rewritten together (in part order) into parts of about the target size."""

    parts: tuple[Part, ...]
    drop_deletes: bool = False
    keep_order: tuple[int, int] | None = None  # (seq, index) the outputs inherit (upsert)

    @property
    def bytes(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.parts)


@dataclass(frozen=True)
class Plan:
    groups: tuple[Group, ...]
    since: int
    candidates: int = 0
    fresh: int = 0
    reason: str = ""  # why nothing is rewritten, when nothing is

    @property
    def parts(self) -> tuple[Part, ...]:
        return tuple(p for g in self.groups for p in g.parts)


def is_candidate(part: Part, options: Options) -> bool:
    if part.size >= SMALL_FRACTION * options.target_file_size:
        return False
    if options.scope is not None and not interp.might_match(options.scope, part.stats):
        return False
    if options.scope_tree is None:
        return True
    tree, env = options.scope_tree
    return interp.might_match(tree, part.stats, env)


def _cluster_key(part: Part, column: int | None) -> tuple[bool, Any]:
    stats = part.stats.columns.get(column) if column is not None else None
    low = stats.min if stats is not None else None
    return (low is None, low if low is not None else 0)


Unit = tuple[Part, ...]
"""Parts a group takes together: one part, or (upsert) every part sharing one order."""


def _size(unit: Unit) -> int:
    return sum(p.size for p in unit)


def _units(by_order: list[Part], ordered: bool) -> list[Unit]:
    """``by_order`` cut into units: parts of one order together when ``ordered`` (upsert)."""
    if not ordered:
        return [(p,) for p in by_order]
    units: list[list[Part]] = []
    for p in by_order:
        if units and units[-1][-1].order == p.order:
            units[-1].append(p)
        else:
            units.append([p])
    return [tuple(u) for u in units]


def _runs(parts: Sequence[Part], candidate: set[str], ordered: bool,
          cluster: int | None = None) -> list[list[Unit]]:
    """Candidate units in part order: runs of consecutive candidate units (``ordered``), else one
    run, ordered by the ``cluster`` column's lower bound when given (so a group's values are close).
    A unit is a candidate when all its parts are."""
    by_order = sorted(parts, key=lambda p: (p.order, p.path))
    units = _units(by_order, ordered)
    if not ordered:
        chosen = [u for u in units if u[0].path in candidate]
        if cluster is not None:
            chosen.sort(key=lambda u: _cluster_key(u[0], cluster))
        return [chosen]
    runs: list[list[Unit]] = [[]]
    for u in units:
        if all(p.path in candidate for p in u):
            runs[-1].append(u)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def _pack(run: list[Unit], target: int) -> list[list[Part]]:
    """Next-fit into bins of ≤ ``target`` input bytes (a unit larger than the target is a bin of its
    own); a lone last unit joins the bin before. Bins of one part are dropped."""
    bins: list[list[Unit]] = []
    size = 0
    for u in run:
        if bins and size + _size(u) <= target:
            bins[-1].append(u)
            size += _size(u)
        else:
            bins.append([u])
            size = _size(u)
    if len(bins) >= 2 and len(bins[-1]) == 1:
        bins[-2].extend(bins.pop())
    flat = [[p for u in b for p in u] for b in _balanced(run, bins, target)]
    return [b for b in flat if len(b) >= 2]


def _balanced(run: list[Unit], bins: list[list[Unit]], target: int) -> list[list[Unit]]:
    """``run`` cut, in order, into as many bins as next-fit made, of about equal input bytes.

    Next-fit fills every bin but the last: 944 MB at a 256 MB target made bins of 268, 268,
    268 and 139 MB, and on two cores the run waited for two 268 MB tasks back to back while
    a core idled. Each cut goes where the running total is nearest its share (``i × total
    / n``); unless that makes the largest bin smaller, keeps every bin within ``target`` and
    at two parts or more, next-fit's bins stand (the largest bin is the run's slowest task).
    Cuts fall between units, never inside one.
    """
    n = len(bins)
    if n < 2:
        return bins
    total = sum(_size(u) for u in run)
    cuts, running, j = [], 0, 0
    for i in range(1, n):
        share = i * total / n
        while j < len(run) and abs(running + _size(run[j]) - share) <= abs(running - share):
            running += _size(run[j])
            j += 1
        cuts.append(j)
    edges = [0, *cuts, len(run)]
    out = [run[a:b] for a, b in zip(edges, edges[1:], strict=False)]

    def parts(b: list[Unit]) -> int:
        return sum(len(u) for u in b)

    def size(b: list[Unit]) -> int:
        return sum(_size(u) for u in b)

    largest = max(size(b) for b in out)
    if all(parts(b) >= 2 for b in out) and largest <= target and largest < max(size(b) for b in bins):
        return out
    return bins


def may_hold_rows_below(part: Part, since: int) -> bool:
    return part.stats.min_time is None or part.stats.min_time < since


def plan(snapshot: Snapshot, options: Options) -> Plan:
    """The groups one run rewrites (see the module doc)."""
    since = options.since
    candidates = [p for p in snapshot.parts if is_candidate(p, options)]
    fresh = sum(1 for p in candidates if not written_by_compaction(p))
    if fresh < options.min_input_files:
        return Plan((), since, len(candidates), fresh,
                    f"{fresh} part(s) not yet compacted are smaller than half of targetFileSize"
                    f"{' and in scope' if options.scope is not None else ''}; minInputFiles is "
                    f"{options.min_input_files}")
    upsert = snapshot.envelope == "upsert"
    names = {p.path for p in candidates}
    bins = [b for run in _runs(snapshot.parts, names, upsert, options.cluster_column)
            for b in _pack(run, options.target_file_size)]
    chosen: list[list[Part]] = []
    budget = options.max_bytes_per_run
    spent = 0
    for b in bins:
        size = sum(p.size for p in b)
        if budget is not None and spent + size > budget:
            continue
        chosen.append(b)
        spent += size
    groups = []
    for b in chosen:
        members = {p.path for p in b}
        others_old = any(may_hold_rows_below(p, since) for p in snapshot.parts if p.path not in members)
        last = b[-1]
        groups.append(Group(tuple(b), drop_deletes=upsert and not others_old,
                            keep_order=(last.seq, last.index) if upsert else None))
    reason = "" if groups else (
        "no two candidate parts can be rewritten together" if bins else
        "no two candidate parts are adjacent in part order (upsert)" if upsert else
        "no two candidate parts fit together")
    if bins and not groups:
        reason = f"maxBytesPerRun {budget} is smaller than the smallest group"
    return Plan(tuple(groups), since, len(candidates), fresh, reason)
