"""Consolidation on read, per envelope, in pure Arrow (no Spark, no row-at-a-time Python).

Input: part rows already mapped to the current schema, with ``_lading_time``,
``_lading_diff`` and, for upsert, ``_lading_seq`` (the part's order: adding commit's
version, then place in that commit) and ``_lading_pos`` (row index inside its part). Output: the user columns of
the table as of logical time ``as_of`` (None: everything):

- ``append``: every row with time ≤ as_of (a row with diff n > 1 counts n times);
- ``upsert``: per key, the row with the greatest (time, seq, pos) ≤ as_of; the key
  is absent when that row is a delete marker (diff < 0);
- ``diff``: per distinct row, the sum of diffs with time ≤ as_of; rows with a
  positive sum appear that many times.

The answer depends only on the rows, never on how they are split into parts,
so compaction changes cost, not answers.

Upsert keys are equal as SQL finds them (Spark's GROUP BY and ``=``): a float's
-0.0 is the key 0.0, and every NaN is one key (``grouping_view``). Arrow's own
grouping compares floats bit by bit, so an upsert of key -0.0 over key 0.0 would
otherwise leave both rows. The winning row keeps the value it was written with.
Rows of a diff or append table are identical only when every value is, bit for
bit (a row read back is the row written; -0.0 is not shown as 0.0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.table import format as fmt

SEQ_COLUMN = "_lading_seq"
POS_COLUMN = "_lading_pos"
_INTERNAL = (fmt.TIME_COLUMN, fmt.DIFF_COLUMN, SEQ_COLUMN, POS_COLUMN)


_CANONICAL_NAN = {16: np.float16("nan"), 32: np.float32("nan"), 64: np.float64("nan")}


def grouping_view(column: pa.ChunkedArray | pa.Array, *, sql: bool = True) -> pa.Array | None:
    """A column Arrow can group by; None if Arrow cannot group its type.

    Floats are numbered by their bits: with ``sql`` (keys) after -0.0 → 0.0 and every
    NaN → one NaN, SQL's equality; without, as they are (identical rows). Dictionaries
    are decoded; other groupable types are returned as they are."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_floating(t):
        width = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[t.bit_width]
        if sql:
            zero, nan = pa.scalar(0, t), pa.scalar(_CANONICAL_NAN[t.bit_width], t)
            arr = pc.if_else(pc.equal(arr, zero), zero, arr)  # -0.0 == 0.0
            arr = pc.if_else(pc.is_nan(arr), nan, arr)
        # Numbered by dictionary_encode (equal bits, equal number): Arrow's group-by hashes some
        # floats' bits badly (2 M doubles k/7: 16 CPU-s, against 0.4 for as many integers),
        # dictionary_encode's hash does not (0.2 s).
        return pc.dictionary_encode(arr.view(width)).indices
    if (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)
            or pa.types.is_fixed_size_binary(t) or pa.types.is_decimal(t) or pa.types.is_date(t)
            or pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_duration(t)
            or pa.types.is_null(t)):
        return arr
    return None


def rank_per_key(table: pa.Table, keys: Sequence[str], ranks: pa.Array | pa.ChunkedArray, how: str,
                 also: dict[str, pa.Array | pa.ChunkedArray] | None = None) -> pa.ChunkedArray:
    """Per distinct key of ``table`` (SQL's equality, ``grouping_view``; and per value of the
    ``also`` columns), the ``how`` ("min" or "max") of ``ranks`` over its rows."""
    views: dict[str, pa.Array | pa.ChunkedArray] = {}
    for i, name in enumerate(keys):
        view = grouping_view(table.column(name))
        views[f"k{i}"] = table.column(name) if view is None else view
    views.update(also or {})
    keyed = pa.table({**views, "_lading_rank": ranks})
    return keyed.group_by(list(views), use_threads=False).aggregate([("_lading_rank", how)]).column(
        f"_lading_rank_{how}")


def user_columns(table: pa.Table) -> list[str]:
    return [n for n in table.column_names if n not in _INTERNAL]


def up_to(table: pa.Table, as_of: int | None) -> pa.Table:
    if as_of is None or table.num_rows == 0:
        return table
    return table.filter(pc.less_equal(table.column(fmt.TIME_COLUMN), as_of))


def repeat_by(table: pa.Table, counts: pa.Array | pa.ChunkedArray) -> pa.Table:
    """Each row repeated ``max(count, 0)`` times."""
    n = np.asarray(pc.max_element_wise(counts, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    if table.num_rows and n.min(initial=1) == 1 and n.max(initial=1) == 1:
        return table
    return table.take(pa.array(np.repeat(np.arange(table.num_rows, dtype=np.int64), n)))


def consolidate(table: pa.Table, envelope: str, key_columns: Sequence[str] = (),
                as_of: int | None = None) -> pa.Table:
    table = up_to(table, as_of)
    names = user_columns(table)
    if envelope == "append":
        return repeat_by(table.select(names), table.column(fmt.DIFF_COLUMN))
    if envelope == "upsert":
        return _latest_per_key(table, list(key_columns), names)
    if envelope == "diff":
        return _sum_diffs(table, names)
    raise ValueError(f"unknown envelope {envelope!r}")


def latest_per_key(table: pa.Table, keys: Sequence[str]) -> pa.Array:
    """Upsert's rule: the index (into ``table``) of each key's winning row, the one with the
    greatest (time, seq, pos); rows equal in all three are decided by their place in ``table``
    (the first wins). The winner may be a delete marker (diff < 0). The reader and the Iceberg
    mirror's delete files (``table.iceberg.deletes``) both decide with this."""
    for needed in (SEQ_COLUMN, POS_COLUMN):
        if needed not in table.column_names:
            table = table.append_column(needed, pa.array(np.zeros(table.num_rows, dtype=np.int64)))
    order = pc.sort_indices(table, sort_keys=[(fmt.TIME_COLUMN, "descending"), (SEQ_COLUMN, "descending"),
                                              (POS_COLUMN, "descending")])  # stable: ties keep table order
    ranked = table.take(order)
    firsts = rank_per_key(ranked, keys, pa.array(np.arange(ranked.num_rows, dtype=np.int64)), "min")
    return order.take(firsts)


def _latest_per_key(table: pa.Table, keys: list[str], names: list[str]) -> pa.Table:
    if table.num_rows == 0:
        return table.select(names)
    winners = table.take(latest_per_key(table, keys))
    winners = winners.filter(pc.greater(winners.column(fmt.DIFF_COLUMN), 0))
    return winners.select(names)


def group_of(table: pa.Table, columns: Sequence[str], *, sql: bool) -> np.ndarray:
    """Per row of ``table``, a number naming its group of equal ``columns``: upsert keys with
    ``sql`` (SQL's equality, as ``rank_per_key`` groups them), a diff table's rows without (as
    ``_sum_diffs`` groups them: bit for bit)."""
    n = table.num_rows
    cols: dict[str, pa.Array | pa.ChunkedArray] = {}
    for i, name in enumerate(columns):
        view = grouping_view(table.column(name)) if sql else None
        cols[f"k{i}"] = table.column(name) if view is None else view
    cols["_lading_idx"] = pa.array(np.arange(n, dtype=np.int64))
    grouped = pa.table(cols).group_by([f"k{i}" for i in range(len(columns))], use_threads=False).aggregate(
        [("_lading_idx", "list")])
    lists = grouped.column("_lading_idx_list").combine_chunks()
    out = np.empty(n, dtype=np.int64)
    out[np.asarray(pc.list_flatten(lists).to_numpy(zero_copy_only=False), dtype=np.int64)] = np.asarray(
        pc.list_parent_indices(lists).to_numpy(zero_copy_only=False), dtype=np.int64)
    return out


def _int_column(table: pa.Table, name: str) -> np.ndarray:
    if name not in table.column_names:
        return np.zeros(table.num_rows, dtype=np.int64)
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.int64)


def diff_survivors(table: pa.Table, names: Sequence[str]) -> np.ndarray:
    """Diff's rule as a choice of rows, for a reader that counts each row once (the Iceberg mirror's
    delete files, ``table.iceberg.deletes``): per distinct row (``names``, grouped as ``_sum_diffs`` groups
    them) whose diffs sum to s > 0, the s latest rows (by seq, pos) whose diff is exactly 1 survive;
    no other row does. The same multiset as ``consolidate`` when no row has a diff above 1. Adding
    rows of a later seq never revives a row: the survivors of the old rows only shrink. A mask."""
    n = table.num_rows
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    group = group_of(table, names, sql=False)
    diffs = _int_column(table, fmt.DIFF_COLUMN)
    sums = np.zeros(int(group.max()) + 1, dtype=np.int64)
    np.add.at(sums, group, diffs)
    seq, pos = _int_column(table, SEQ_COLUMN), _int_column(table, POS_COLUMN)
    ones = np.flatnonzero(diffs == 1)
    ones = ones[np.lexsort((-pos[ones], -seq[ones], group[ones]))]  # by group, the latest first
    g = group[ones]
    rank = np.arange(len(ones)) - np.searchsorted(g, g, side="left")
    keep[ones[rank < np.maximum(sums[g], 0)]] = True
    return keep


def _sum_diffs(table: pa.Table, names: list[str]) -> pa.Table:
    if table.num_rows == 0:
        return table.select(names)
    sums = table.select([*names, fmt.DIFF_COLUMN]).group_by(names, use_threads=False).aggregate(
        [(fmt.DIFF_COLUMN, "sum")])
    counts = sums.column(f"{fmt.DIFF_COLUMN}_sum")
    positive = sums.filter(pc.greater(counts, 0))
    return repeat_by(positive.select(names), positive.column(f"{fmt.DIFF_COLUMN}_sum"))
