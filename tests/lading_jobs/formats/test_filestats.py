"""Per-file column statistics of the unload (pure pyarrow, no Spark)."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa

from lading_jobs.formats.filestats import FileStats


def test_durations_have_bounds_in_seconds() -> None:
    # INTERVAL DAY TO SECOND columns are Arrow durations; pyarrow has no min_max kernel for them
    batch = pa.RecordBatch.from_pydict({"dti": pa.array(
        [dt.timedelta(days=1, microseconds=5), None, dt.timedelta(microseconds=-1)], pa.duration("us"))})
    stats = FileStats(batch.schema)
    stats.update(batch)
    stats.update(batch.slice(0, 1))
    assert stats.to_dict() == {"dti": {"nullCount": 1, "min": -1e-06, "max": 86400.000005}}


NAN, INF = float("nan"), float("inf")


def test_a_float_column_holding_nan_has_no_bounds() -> None:
    # Spark orders NaN above every number: a max that leaves NaN out hides those rows from a reader
    # pruning by it. Before, [1.0, NaN, 2.0] said max 2.0. The table's statistics drop them too.
    clean = pa.RecordBatch.from_pydict({"x": pa.array([1.0, 2.0]), "y": pa.array([1.0, 2.0], pa.float32())})
    nan = pa.RecordBatch.from_pydict({"x": pa.array([0.5, NAN]), "y": pa.array([NAN, NAN], pa.float32())})
    for batches in ([clean, nan], [nan, clean], [nan]):
        stats = FileStats(clean.schema)
        for b in batches:
            stats.update(b)
        assert stats.to_dict() == {"x": {"nullCount": 0}, "y": {"nullCount": 0}}
    # the Parquet writer hands over bounds it computed (``given``): NaN still counts
    given = FileStats(clean.schema)
    given.update(nan, given={0: (0.5, 0.5), 1: (NAN, NAN)})
    assert given.to_dict() == {"x": {"nullCount": 0}, "y": {"nullCount": 0}}
    stats = FileStats(clean.schema)
    stats.update(clean)
    assert stats.to_dict()["x"] == {"nullCount": 0, "min": 1.0, "max": 2.0}


def test_an_infinite_bound_is_left_out_never_null() -> None:
    # JSON has no infinity; before, the keys were written with null values.
    stats = FileStats(pa.schema([("x", pa.float64())]))
    stats.update(pa.RecordBatch.from_pydict({"x": pa.array([-INF, 1.0, None, INF])}))
    assert stats.to_dict() == {"x": {"nullCount": 1}}
    stats = FileStats(pa.schema([("x", pa.float64())]))
    stats.update(pa.RecordBatch.from_pydict({"x": pa.array([1.0, INF])}))
    assert stats.to_dict() == {"x": {"nullCount": 0, "min": 1.0}}


def test_decimal_bounds_are_plain_digits_at_the_scale() -> None:
    t = pa.decimal128(20, 10)
    stats = FileStats(pa.schema([("d", t)]))
    stats.update(pa.RecordBatch.from_pydict({"d": pa.array([decimal.Decimal("0E-10"), decimal.Decimal("1E-7")], t)}))
    assert stats.to_dict() == {"d": {"nullCount": 0, "min": "0.0000000000", "max": "0.0000001000"}}
