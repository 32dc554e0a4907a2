"""Statistics gathered row group by row group (``stats.Accumulator``) equal ``table_stats`` of the whole part.

A compaction part's statistics are gathered as its row groups are written, so the writer
no longer holds a part's rows until it closes; they must be the same statistics, type by
type: a NaN in a later row group drops a float column's bounds, an all-NULL row group does
not widen them, a string bound is truncated once, for the whole part (a value longer than
``STRING_STATS_LENGTH`` whose prefix is another row group's minimum is not flagged ``minTruncated``).
"""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from lading_jobs.table import format as fmt
from lading_jobs.table.stats import part as stx

LONG = "a" * (fmt.STRING_STATS_LENGTH + 8)
SHORT = "a" * fmt.STRING_STATS_LENGTH
UTC = dt.UTC

COLUMNS: dict[str, tuple[pa.DataType, list[object]]] = {
    "i": (pa.int64(), [5, None, -3, 2**62, 7, None]),
    "f": (pa.float64(), [1.5, 2.5, None, float("nan"), -4.0, 3.0]),  # NaN in the second group
    "g": (pa.float32(), [1.5, 2.5, None, 0.5, -4.0, 3.0]),
    "s": (pa.string(), [LONG, "b", SHORT, None, "\U0010ffff" * (fmt.STRING_STATS_LENGTH + 1), "c"]),
    "n": (pa.string(), [None, None, None, None, None, None]),
    "m": (pa.string(), [None, None, None, "x", "y", None]),  # NULLs only in the first group
    "d": (pa.decimal128(12, 3), [decimal.Decimal("1.500"), None, decimal.Decimal("-2.250"),
                                 decimal.Decimal("9.999"), None, decimal.Decimal("0.001")]),
    "t": (pa.timestamp("us", tz="UTC"), [dt.datetime(2024, 1, 1, tzinfo=UTC), None,
                                         dt.datetime(1969, 12, 31, 23, 59, tzinfo=UTC),
                                         dt.datetime(2030, 5, 5, tzinfo=UTC), None, None]),
    "u": (pa.timestamp("ns"), [1, 2, 3, None, 10**18, 5]),
    "day": (pa.date32(), [dt.date(2024, 1, 1), dt.date(1900, 1, 1), None, None, dt.date(2100, 1, 1), None]),
    "b": (pa.bool_(), [True, None, True, True, True, False]),
    "bin": (pa.binary(), [b"x", None, b"y", b"z", b"", None]),
    "l": (pa.list_(pa.int64()), [[1], None, [], [2, 3], None, [4]]),
}


def _table() -> pa.Table:
    cols = {name: pa.array(values, t) for name, (t, values) in COLUMNS.items()}
    cols[fmt.TIME_COLUMN] = pa.array([4, 2, 9, 1, 1, 3], pa.int64())
    cols[fmt.DIFF_COLUMN] = pa.array([1, 1, -1, 2, 1, 1], pa.int64())
    return pa.table(cols)


IDS = {name: i + 1 for i, name in enumerate(COLUMNS)}


@pytest.mark.parametrize("cuts", [(6,), (2, 4, 6), (1, 2, 3, 4, 5, 6), (3, 3, 6), (0, 5, 6)])
def test_row_groups_give_the_statistics_of_the_whole_part(cuts: tuple[int, ...]) -> None:
    table = _table()
    acc = stx.Accumulator(table.schema, IDS)
    start = 0
    for end in cuts:
        acc.add(table.slice(start, end - start))
        start = end
    assert acc.result() == stx.table_stats(table, IDS)


def test_byte_array_bounds_given_by_the_writer_are_used_as_computed() -> None:
    import pyarrow.compute as pc

    table = _table()
    s = table.schema.get_field_index("s")
    acc = stx.Accumulator(table.schema, IDS)
    for start in (0, 3):
        group = table.slice(start, 3)
        mm = pc.min_max(group.column("s"))
        acc.add(group, {s: (mm["min"], mm["max"])})
    whole = stx.table_stats(table, IDS)
    assert acc.result() == whole
    col = whole.columns[IDS["s"]]
    # the minimum is the value of the bound's length itself (not the longer one's prefix, flagged truncated);
    # no string of that length is above the U+10FFFF run
    assert (col.min, col.min_truncated, col.max, col.max_truncated) == (SHORT, False, None, True)
    # merging two parts' statistics (a compaction copying their row groups, compact.groupcopy) says the same
    halves = (stx.table_stats(table.slice(0, 3), IDS), stx.table_stats(table.slice(3, 3), IDS))
    assert stx.merge(*halves).columns[IDS["s"]] == col
    assert stx.merge(*reversed(halves)).columns[IDS["s"]] == col


def test_an_empty_part_and_a_part_of_nulls() -> None:
    table = _table()
    acc = stx.Accumulator(table.schema, IDS)
    assert acc.result() == stx.table_stats(table.slice(0, 0), IDS)
    acc.add(table.slice(0, 0))
    assert acc.result() == stx.table_stats(table.slice(0, 0), IDS)
