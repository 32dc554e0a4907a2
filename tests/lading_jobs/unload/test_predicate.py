"""Filters that take the Arrow-only path select exactly the rows Spark SQL selects.

One input (NaN, -0.0, infinities, NULL in every column, decimals, strings with
non-ASCII text, timestamps with and without time zone, dates, binary), registered
as a query input like an unload's. For each condition: Spark's answer is
``SELECT id FROM t WHERE <condition>`` run by Spark; the Arrow answer is the same
query's analysed plan read by ``sparkplan``, recognised by ``sqlshape`` and
evaluated by ``predicate`` on the rows as the Arrow path reads them. Conditions
that need Spark must be refused (and are listed as such).
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

from lading_jobs import sqlshape
from lading_jobs.formats import types
from lading_jobs.sources import files as sources_files
from lading_jobs.storage import open_storage
from lading_jobs.unload import predicate, sparkplan
from lading_spec.copyjob import Input
from lading_spec.formats import FileSet, ParquetOptions

pytestmark = [pytest.mark.spark]

UTC = dt.UTC
SCHEMA = T.StructType([
    T.StructField("id", T.IntegerType()), T.StructField("x", T.DoubleType()), T.StructField("f", T.FloatType()),
    T.StructField("dec", T.DecimalType(10, 2)), T.StructField("s", T.StringType()),
    T.StructField("ts", T.TimestampType()), T.StructField("ntz", T.TimestampNTZType()),
    T.StructField("d", T.DateType()), T.StructField("i8", T.ByteType()), T.StructField("i64", T.LongType()),
    T.StructField("bo", T.BooleanType()), T.StructField("bin", T.BinaryType()),
])
NAN, INF = float("nan"), float("inf")
VALUES: dict[str, list[Any]] = {
    "x": [NAN, -0.0, 0.0, 1.5, -1.5, INF, -INF, None, 2.0],
    "f": [1.5, NAN, None, -0.0, 0.0, 3.25, -INF],
    "dec": [decimal.Decimal(v) if v else None for v in ("1.00", "1.50", "-0.01", None, "99999999.99", "0.00")],
    "s": ["a", "b", "", None, "é", "ab", "B", "a\u0000"],
    "ts": [dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2024, 1, 1, 10, 0, 0, 1, tzinfo=UTC), None,
           dt.datetime(2024, 1, 1, 4, 59, 59, 999999, tzinfo=UTC), dt.datetime(1900, 3, 1, 12, tzinfo=UTC)],
    "ntz": [dt.datetime(2023, 12, 31, 23, 59, 59), None, dt.datetime(2024, 1, 1), dt.datetime(1, 1, 1)],
    "d": [dt.date(2024, 2, 29), dt.date(2024, 1, 1), None, dt.date(9999, 12, 31)],
    "i8": [127, -128, 1, None, 2, 101],
    "i64": [9223372036854775807, -9223372036854775808, 0, None, -1],
    "bo": [True, False, None],
    "bin": [b"\x00\xff", b"\x00", b"", None, b"\xff"],
}
ROWS = 9 * 8 * 7  # every value of x, s and f meets every other


def _rows() -> list[dict[str, Any]]:
    cycles = {k: itertools.cycle(v) for k, v in VALUES.items()}
    return [{"id": i, **{k: next(c) for k, c in cycles.items()}} for i in range(ROWS)]


@pytest.fixture(scope="module")
def table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> pa.Table:
    """Registers the input ``t``; returns its rows as the Arrow path reads them."""
    root = f"file://{tmp_path_factory.mktemp('predicate')}/"
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(_rows(), schema=types.arrow_schema(SCHEMA)), sink)
    open_storage(root).put(root + "t.parquet", sink.getvalue().to_pybytes())
    fs = FileSet(uri=root, format="parquet", options=ParquetOptions())
    sources_files.register_inputs(spark, [Input(name="t", files=fs)])
    files = sources_files.list_files(fs)
    schema = sources_files.infer_schema(fs, files)
    batches = [b for s in sources_files.plan_splits(fs, files, 1 << 30) for b in sources_files.read_split(s, fs, schema)]
    return pa.Table.from_batches(batches)


ACCEPTED = [
    "x = 'NaN'", "x > 1", "x >= 'NaN'", "x > 'NaN'", "x < 'NaN'", "x <= 'NaN'", "x = 0", "x = -0.0", "x > -0.0",
    "x < 0", "x <=> NULL", "x <=> 'NaN'", "x <=> 1.5", "x IN (0.0, 'NaN')", "x IN (1.5, NULL)",
    "NOT x IN (1.5, NULL)", "NOT x IN (1.5, 2)", "x > 'Infinity'", "x >= 'Infinity'", "x < '-Infinity'",
    "x = NULL", "NOT (x = NULL)", "f > 1", "f = 'NaN'", "f IN (1.5, 'NaN')", "f < 3.25",
    "dec > 1.5", "dec = 1", "dec IN (1.5, 2)", "dec < -0.001", "dec >= 99999999.99", "dec = 0",
    "s > 'a'", "s IN ('a', NULL)", "s IN ('a', 'é')", "s = ''", "s < 'é'", "s >= 'B'", "NOT (s = 'a')",
    "s IS NULL OR x > 0", "NOT (s IS NULL) AND (x < 0 OR bo)", "s <=> NULL", "NOT s <=> 'a'", "s > 'a\u0000'",
    "bo", "NOT bo", "bo = false", "bo > false", "bo IS NOT NULL AND NOT bo",
    "ts > '2024-01-01 10:00:00'", "ts > '2024-01-01 10:00:00+05:00'", "ts = TIMESTAMP'2024-01-01 00:00:00 UTC'",
    "ts < DATE'2000-01-01'", "ts IN (TIMESTAMP'2024-01-01 00:00:00', NULL)",
    "ntz < '2024-01-01'", "ntz >= TIMESTAMP_NTZ'0001-01-01 00:00:00'",
    "d >= '2024-02-29'", "d = DATE'2024-01-01'", "d < '2024-01-01'",
    "i8 > 100", "i8 IN (1, 2.5)", "i8 = 1.0", "i8 < -127", "i64 = 9223372036854775807", "i64 > -1",
    "i64 IN (0, -9223372036854775808)", "i64 > 1.5", "i64 < -0.5", "bin = X'00FF'", "bin > X'00'", "bin < X'FF'",
    "(x > 0 OR s = 'b') AND NOT (i8 IN (1, 2) OR d IS NULL)", "TRUE", "CAST(NULL AS BOOLEAN)",
]
REFUSED = {
    "id BETWEEN 2 AND 5": "uses Between", "f = x": "column against a constant",
    "x > i64": "casts i64 from bigint to double", "s > 1": "casts s from string", "x + 1 > 2": "computes Add",
    "upper(s) = 'A'": "computes Upper", "ts > d": "casts d from date to timestamp", "x > rand()": "computes Rand",
    "ts > current_timestamp()": "computes CurrentTimestamp", "s LIKE 'a%'": "uses Like",
    "d > '2024-13-01'": "computes Unevaluable",
}


def _spark_ids(spark: Any, condition: str) -> list[int]:
    return sorted(r.id for r in spark.sql(f"SELECT id FROM t WHERE {condition}").collect())


def _shape(spark: Any, condition: str) -> sqlshape.Shape | sqlshape.Refusal:
    plan = sparkplan.describe(spark.sql(f"SELECT * FROM t WHERE {condition}"))
    assert plan is not None
    return sqlshape.recognise(plan, {"t"})


@pytest.mark.slow
@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles"])  # literals' time zone: the session's
def test_accepted_filters_select_what_spark_selects(spark: Any, table: pa.Table, zone: str,
                                                    keep_zone: Callable[[str], None]) -> None:
    keep_zone(zone)
    mismatches = []
    temporal = ("ts", "ntz", "d ", "d=")
    for condition in ACCEPTED if zone == "UTC" else [c for c in ACCEPTED if any(t in c for t in temporal)]:
        shape = _shape(spark, condition)
        assert isinstance(shape, sqlshape.Shape), (condition, shape)
        got = sorted(predicate.apply(shape.condition, table).column("id").to_pylist())
        expected = _spark_ids(spark, condition)
        if got != expected:
            mismatches.append((condition, len(got), len(expected)))
    assert mismatches == []


@pytest.mark.parametrize(("condition", "why"), sorted(REFUSED.items()))
def test_filters_that_need_spark_are_refused(spark: Any, table: pa.Table, condition: str, why: str) -> None:
    shape = _shape(spark, condition)
    assert isinstance(shape, sqlshape.Refusal) and why in shape.reason, (condition, shape)


@pytest.fixture
def keep_zone(spark: Any) -> Any:
    key = "spark.sql.session.timeZone"
    old = spark.conf.get(key)
    yield lambda zone: spark.conf.set(key, zone)
    spark.conf.set(key, old)
