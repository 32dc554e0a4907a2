"""One group's rows, consolidated up to ``since`` and sorted, in pure Arrow (no row-at-a-time Python).

Input: the group's part rows (``reader.read_part``: user columns in the current
schema, ``_lading_time``, ``_lading_diff``, ``_lading_seq`` = part order,
``_lading_pos`` = row in its part). Output: part rows (user columns, time, diff).

- ``upsert``: rows are ranked by (time, part order, position); per key the
  greatest row with time < ``since`` is kept (all older versions can never win
  a read as of T ≥ since), and per (key, time) ≥ since the greatest row (the
  others lose every tie they could take part in). A kept delete marker below
  ``since`` is dropped when the plan says no older row of the key can exist
  outside the group. Times are kept, so versions outside the group compare as
  before.
- ``diff``: rows with time < ``since`` and identical columns become one row
  whose diff is their sum (at their greatest time); zero sums vanish.
- ``append``: the same for identical rows (diffs are positive counts). Tables
  with columns Arrow cannot group (nested types, intervals) keep their rows, and so do
  tables with an Iceberg mirror (``merge_identical=False``): Iceberg readers count a row
  once whatever its diff, so a merged row would stop the mirror (table/iceberg/mirror.py).

Grouping tells rows apart exactly as the reader does (``consolidate.grouping_view``):
upsert keys by SQL's equality (-0.0 with 0.0, every NaN as one), so a delete marker
dropped here drops the rows the reader would have let it delete, and no more;
identical rows of diff and append tables bit for bit. ``sort_by`` orders the output;
otherwise rows keep their rank order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.table import consolidate as cons
from lading_jobs.table import format as fmt

_RANK = "_lading_rank"
_BUCKET = "_lading_bucket"
_MIN_TIME = np.iinfo(np.int64).min


@dataclass(frozen=True)
class Consolidated:
    rows: pa.Table  # user columns, _lading_time, _lading_diff
    rows_in: int
    rows_out: int


def groupable(schema: pa.Schema, names: Sequence[str]) -> bool:
    return all(cons.grouping_view(pa.array([], schema.field(n).type), sql=False) is not None for n in names)


def _ranked(table: pa.Table) -> pa.Table:
    """Rows sorted by (time, part order, position), numbered 0.. in that order."""
    order = [(fmt.TIME_COLUMN, "ascending"), (cons.SEQ_COLUMN, "ascending"), (cons.POS_COLUMN, "ascending")]
    present = [o for o in order if o[0] in table.column_names]
    ranked = table.sort_by(present) if table.num_rows else table
    return ranked.append_column(_RANK, pa.array(np.arange(ranked.num_rows, dtype=np.int64)))


def _upsert(table: pa.Table, keys: Sequence[str], since: int, drop_deletes: bool) -> pa.Table:
    ranked = _ranked(table)
    times = ranked.column(fmt.TIME_COLUMN)
    bucket = pc.if_else(pc.less(times, since), pa.scalar(_MIN_TIME, pa.int64()), times)
    winners = cons.rank_per_key(ranked, keys, ranked.column(_RANK), "max", also={_BUCKET: bucket})
    out = ranked.take(pc.take(winners, pc.sort_indices(winners)))
    if drop_deletes:
        deleted_old = pc.and_(pc.less(out.column(fmt.DIFF_COLUMN), 0), pc.less(out.column(fmt.TIME_COLUMN), since))
        out = out.filter(pc.invert(deleted_old))
    return out


def _sum_identical(table: pa.Table, names: Sequence[str], since: int) -> pa.Table:
    """Rows below ``since`` with identical user columns → one row, diffs summed, greatest time."""
    if table.num_rows == 0 or pc.min(table.column(fmt.TIME_COLUMN)).as_py() >= since:
        return table  # nothing to consolidate: no copy
    old_mask = pc.less(table.column(fmt.TIME_COLUMN), since)
    old = table.filter(old_mask).combine_chunks()  # taken from below: one chunk per column
    new = table.filter(pc.invert(old_mask))
    if old.num_rows == 0:
        return table
    old = old.append_column(_RANK, pa.array(np.arange(old.num_rows, dtype=np.int64)))
    views = {f"c{i}": cons.grouping_view(old.column(n), sql=False) for i, n in enumerate(names)}
    keyed = pa.table({**views, fmt.DIFF_COLUMN: old.column(fmt.DIFF_COLUMN),
                      fmt.TIME_COLUMN: old.column(fmt.TIME_COLUMN), _RANK: old.column(_RANK)})
    agg = keyed.group_by(list(views), use_threads=False).aggregate(
        [(_RANK, "min"), (fmt.DIFF_COLUMN, "sum"), (fmt.TIME_COLUMN, "max")])
    agg = agg.filter(pc.not_equal(agg.column(f"{fmt.DIFF_COLUMN}_sum"), 0))
    agg = agg.sort_by([(f"{_RANK}_min", "ascending")])
    merged = old.take(agg.column(f"{_RANK}_min")).drop_columns([_RANK])
    for name, agg_name in ((fmt.DIFF_COLUMN, f"{fmt.DIFF_COLUMN}_sum"), (fmt.TIME_COLUMN, f"{fmt.TIME_COLUMN}_max")):
        i = merged.schema.get_field_index(name)
        merged = merged.set_column(i, merged.schema.field(i), agg.column(agg_name).cast(pa.int64()))
    return pa.concat_tables([merged, new.select(merged.column_names)])


def consolidate(table: pa.Table, envelope: str, key_columns: Sequence[str], since: int, *,
                drop_deletes: bool = False, sort_by: Sequence[str] = (), merge_identical: bool = True) -> Consolidated:
    """The group's rows consolidated up to ``since`` (see the module doc), sorted by ``sort_by``."""
    rows_in = table.num_rows
    names = cons.user_columns(table)
    # Sorting and taking across a chunk per part is many times slower than over one chunk per
    # column, so the paths that sort or take combine first; a group with nothing to consolidate
    # and nothing to sort is not copied at all (the writer takes its chunks as they are).
    if envelope == "upsert":
        out = _upsert(table.combine_chunks(), key_columns, since, drop_deletes)
    elif envelope in ("diff", "append"):
        # row order carries no meaning here (every row counts): no ranking sort
        merge = groupable(table.schema, names) and (merge_identical or envelope == "diff")
        out = _sum_identical(table, names, since) if merge else table
    else:
        raise ValueError(f"unknown envelope {envelope!r}")
    out = out.select([*names, fmt.TIME_COLUMN, fmt.DIFF_COLUMN])
    if sort_by and out.num_rows:
        out = out.combine_chunks().sort_by([(c, "ascending") for c in sort_by])
    return Consolidated(out, rows_in, out.num_rows)
