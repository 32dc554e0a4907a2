"""Pushed literals lading cannot trust are left to Spark, on both paths, and nothing raises.

pyspark hands a pushed decimal over rounded to 28 significant digits, and cannot hold a date
or timestamp outside years 1 … 9999 (its pushdown worker raised ``OverflowError``). A table
input (two parts, so skipping matters) holds the values at those edges; each condition runs
through the Spark SQL path (the source's pushed filters) and through the Arrow-only path
(``sparkplan`` → ``sqlshape`` → ``arrowpath.table_filter`` → ``reader`` → ``predicate``).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from lading_jobs import sqlshape
from lading_jobs import storage as st
from lading_jobs.sources import files as sources_files
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_jobs.unload import arrowpath, predicate, sparkplan
from lading_spec.copyjob import Input

UTC = dt.UTC
BIG = decimal.Decimal("9999999999999999999999999999.9999999999")
BELOW = decimal.Decimal("9999999999999999999999999999.9999999998")  # (BIG - 1e-10 would round: 28 digits)
ROWS = pa.table({
    "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
    "d": pa.array([BIG, decimal.Decimal("1"), BELOW, decimal.Decimal("-0.0000000001"),
                   None], pa.decimal128(38, 10)),
    "ts": pa.array([dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                    dt.datetime(2024, 1, 1, tzinfo=UTC), None, dt.datetime(1, 1, 1, 0, 30, tzinfo=UTC)],
                   pa.timestamp("us", tz="UTC")),
    "dd": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(2024, 1, 1), None, dt.date(1, 1, 2)], pa.date32()),
})

CASES = [  # (condition, ids)
    (f"d = {BIG}", [1]),
    (f"d IN ({BIG}, 1)", [1, 2]),
    (f"d > {BELOW}", [1]),
    (f"d >= {BELOW}", [1, 3]),
    (f"NOT d = {BIG}", [2, 3, 4]),
    ("ts IN (TIMESTAMP'0001-01-01 00:00:00+01:00', TIMESTAMP'0001-01-01 00:00:00Z')", [1]),
    ("ts < TIMESTAMP'0001-01-01 00:30:00+01:00'", []),
    ("ts >= TIMESTAMP'0001-01-01 00:30:00+01:00'", [1, 2, 3, 5]),
    ("ts > TIMESTAMP'9999-12-31 23:30:00-01:00'", []),
    ("ts <= TIMESTAMP'9999-12-31 23:30:00-01:00'", [1, 2, 3, 5]),
    ("ts = TIMESTAMP'9999-12-31 23:30:00-01:00' OR id = 3", [3]),
    ("dd > date_add(DATE'0001-01-01', -2)", [1, 2, 3, 5]),
    ("dd IN (DATE'0001-01-02', date_add(DATE'9999-12-31', 1))", [5]),
]


@pytest.fixture(scope="module")
def table_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = f"file://{tmp_path_factory.mktemp('literals')}/t/"
    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("d", "decimal(38,10)"), ("ts", "timestamp"),
                                               ("dd", "date")]))
    stamped = ROWS.append_column(fmt.TIME_COLUMN, pa.array([1] * ROWS.num_rows, pa.int64()))
    written = writer.write_parts(uri, [stamped.slice(0, 2), stamped.slice(2)], log.snapshot().schema,
                                 write_id=fmt.new_write_id(), one_part_per_table=True, storage=st.open_storage(uri))
    writer.commit_parts(uri, written, log=log)
    return uri


@pytest.fixture
def view(spark: Any, table_uri: str) -> Iterator[None]:
    old = spark.conf.get("spark.sql.session.timeZone")
    sources_files.register_inputs(spark, [Input(name="t", table=table_uri)])
    yield
    spark.conf.set("spark.sql.session.timeZone", old)


@pytest.mark.spark
@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati"])
def test_untrusted_literals_stay_with_spark_on_the_spark_path(spark: Any, view: None, zone: str) -> None:
    spark.conf.set("spark.sql.session.timeZone", zone)
    got = {c: sorted(r.id for r in spark.sql(f"SELECT id FROM t WHERE {c}").collect()) for c, _ in CASES}
    assert got == dict(CASES)


@pytest.mark.spark
def test_untrusted_literals_on_the_arrow_path(spark: Any, view: None, table_uri: str) -> None:
    snapshot = TableLog.open_existing(table_uri).snapshot()
    got, accepted = {}, 0
    for condition, _ in CASES:
        plan = sparkplan.describe(spark.sql(f"SELECT * FROM t WHERE {condition}"))
        assert plan is not None
        shape = sqlshape.recognise(plan, {"t"})
        if isinstance(shape, sqlshape.Refusal):  # a function (date_add): the Spark SQL path's, tested above
            got[condition] = [i for c, i in CASES if c == condition][0]
            continue
        accepted += 1
        assert shape.condition is not None
        skip = arrowpath.table_filter(shape.condition, snapshot.schema)
        rows = [reader.read_parts(st.open_storage(table_uri), snapshot, task.parts, skip, bucket=task.bucket,
                                  buckets=task.buckets) for task in reader.plan_tasks(snapshot, skip)]
        kept = predicate.apply(shape.condition, pa.concat_tables(rows))
        got[condition] = sorted(kept.column("id").to_pylist())
    assert accepted >= 10
    assert got == dict(CASES)


@pytest.mark.parametrize(("value", "exact"), [
    (decimal.Decimal("1.000000000000000000000000000E+28"), False),  # 28 digits: may be a rounded literal
    (decimal.Decimal("123456789012345678901234567.8"), False),
    (decimal.Decimal("1234567890123456789012345.67"), True),  # 27 digits
    (decimal.Decimal("-0.0000000001"), True), (ex.OUT_OF_RANGE, False), (decimal.Decimal("NaN"), False),
])
def test_which_pushed_literals_are_trusted(value: Any, exact: bool) -> None:
    assert ex.spark_literal_is_exact(value) is exact
