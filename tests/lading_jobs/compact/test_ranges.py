"""Key ranges of a sorted compaction (pure, ``compact.ranges``): every row falls in exactly one
range whatever its value (NaN and NULL in the last), boundaries cut sampled rows evenly and
never split a value, and a range reads only the sorted batches that may hold its keys."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lading_jobs.compact import ranges


def owners(keys: pa.Array, cuts: pa.Array | None) -> list[int]:
    """How many ranges each key falls in."""
    n = ranges.count(cuts)
    masks = [ranges.in_range(keys, *ranges.bounds(cuts, r)).to_numpy(zero_copy_only=False) for r in range(n)]
    return np.sum(masks, axis=0).tolist()


@pytest.mark.parametrize("keys", [
    pa.array([3.0, float("nan"), None, -0.0, 0.0, 1e300, -np.inf, np.inf, 2.5], pa.float64()),
    pa.array(["b", None, "a", "", "zz", "b"]),
    pa.array([5, None, -3, 5, 9], pa.int64()),
    pa.array([decimal.Decimal("1.50"), None, decimal.Decimal("-2.25")], pa.decimal128(6, 2)),
    pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.UTC), None], pa.timestamp("us", "UTC")),
    pa.array([True, None, False]),
])
def test_every_key_falls_in_exactly_one_range(keys: pa.Array) -> None:
    cuts = ranges.boundaries([(keys, len(keys))], 3)
    assert owners(keys, cuts) == [1] * len(keys)
    assert owners(keys, None) == [1] * len(keys)
    last = ranges.in_range(keys, *ranges.bounds(cuts, ranges.count(cuts) - 1))
    assert pc.all(pc.or_(last, pc.invert(pc.is_null(keys)))).as_py(), "NULL goes to the last range"


def test_boundaries_cut_rows_evenly_and_weigh_each_group_by_its_rows() -> None:
    keys = pa.array(np.arange(1000, dtype=np.int64))
    cuts = ranges.boundaries([(ranges.sample(keys, 100), 1000)], 4)
    assert cuts is not None and cuts.to_pylist() == pytest.approx([250, 500, 750], abs=12)
    # a group of 9,000 rows sampled as thinly as one of 1,000 counts nine times as much
    small, big = pa.array(np.arange(0, 100, dtype=np.int64)), pa.array(np.arange(100, 200, dtype=np.int64))
    cuts = ranges.boundaries([(small, 1000), (big, 9000)], 2)
    assert cuts is not None and 140 <= cuts[0].as_py() <= 160


def test_a_value_is_never_split_and_special_keys_are_no_boundary() -> None:
    keys = pa.array([1.0] * 40 + [2.0] * 40 + [3.0] * 15 + [float("nan")] * 50 + [None] * 50)
    cuts = ranges.boundaries([(keys, len(keys))], 4)  # quartiles of the ordinary keys: 1, 2, 2
    assert cuts is not None and cuts.to_pylist() == [2.0]  # 1.0 is the smallest: no empty first range
    assert owners(keys, cuts) == [1] * len(keys)
    assert ranges.boundaries([(pa.array([7] * 100), 100)], 4) is None, "one value: one range"
    assert ranges.boundaries([(pa.array([None, float("nan")], pa.float64()), 2)], 4) is None
    assert ranges.boundaries([(keys, len(keys))], 1) is None


def test_a_range_reads_only_the_batches_that_may_hold_its_keys() -> None:
    firsts = pa.array([0.0, 10.0, 20.0, float("nan"), None])
    lasts = pa.array([9.0, 20.0, float("nan"), None, None])
    cuts = pa.array([10.0, 20.0])
    assert ranges.overlapping(firsts, lasts, *ranges.bounds(cuts, 0)) == [0]
    assert ranges.overlapping(firsts, lasts, *ranges.bounds(cuts, 1)) == [1]
    assert ranges.overlapping(firsts, lasts, *ranges.bounds(cuts, 2)) == [1, 2, 3, 4]


def test_arrays_travel_exactly_through_a_json_line() -> None:
    for array in (pa.array([decimal.Decimal("1.25"), None], pa.decimal128(5, 2)), pa.array(["x", None]),
                  pa.array([float("nan"), -0.0]), pa.array([], pa.int64())):
        back = ranges.unpack(ranges.pack(array))
        assert back.type == array.type and back.to_pylist().__repr__() == array.to_pylist().__repr__()
