"""Filters whose answer Spark defines differently from Arrow or Python.

A NaN literal compares as Spark orders floats (NaN above every number, NaN = NaN): the Arrow
row filter once built ``f < NaN`` as IEEE does, false for every row, and ``f < NaN``,
``f <= NaN`` and ``NOT (f >= NaN)`` lost every non-NaN row. Date and timestamp literals up to
the 1582 calendar switch reach Python through Spark's hybrid calendar (1582-10-05 … 14 arrive
as 1582-10-15): they are left to Spark, never marked exact and never skip a part; once, ``d =
date'1582-10-10'`` found nothing. Compared with Spark SQL over the same rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import datasource as ds

from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.filters import interp
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats.part import ColumnStats, PartStats

NAN = float("nan")
UTC = dt.UTC
FLOATS = [1.0, NAN, None, -2.0, float("inf"), float("-inf"), 0.0]


# -- NaN literals ---------------------------------------------------------------------------
def spark_nan_rule(op: str, x: float | None) -> bool:
    """``x op NaN`` in Spark (NaN above every number, equal to itself); NULL → not kept."""
    if x is None:
        return False
    nan = x != x
    return {"lt": not nan, "le": True, "gt": False, "ge": nan, "eq": nan, "ne": not nan}[op]


@pytest.mark.parametrize("type_", ["double", "float"])
@pytest.mark.parametrize("op", ["lt", "le", "gt", "ge", "eq", "ne"])
@pytest.mark.parametrize("negated", [False, True])
def test_the_row_filter_compares_with_nan_as_spark_does(type_: str, op: str, negated: bool) -> None:
    arrow = pa.float64() if type_ == "double" else pa.float32()
    data = pa.table({"f": pa.array(FLOATS, arrow)})
    pred = ex.Pred(op, "f", NAN, 1, type_)
    e: ex.Expr = ex.Not(ex.Pred(ex._NEGATED[op], "f", NAN, 1, type_)) if negated else pred
    kept = data.filter(ex.to_arrow(e)).column("f").to_pylist()
    want = [x for x in FLOATS if spark_nan_rule(op, x)]
    assert [repr(x) for x in kept] == [repr(x) for x in want]


def test_nan_under_and_or_keeps_three_valued_logic() -> None:
    data = pa.table({"f": pa.array(FLOATS), "i": pa.array(range(len(FLOATS)), pa.int64())})
    lt = ex.Pred("lt", "f", NAN, 1, "double")
    either = ex.Or(lt, ex.Pred("eq", "i", 2, 2, "bigint"))  # the NULL row kept by the other side
    assert data.filter(ex.to_arrow(either)).column("i").to_pylist() == [0, 2, 3, 4, 5, 6]
    neither = ex.Not(ex.Or(ex.Pred("ge", "f", NAN, 1, "double"), ex.Pred("eq", "i", 0, 2, "bigint")))
    assert data.filter(ex.to_arrow(neither)).column("i").to_pylist() == [3, 4, 5, 6]


@pytest.mark.parametrize(("op", "might"), [("lt", True), ("le", True), ("ne", True), ("eq", True), ("ge", True),
                                           ("gt", False)])
def test_statistics_never_skip_a_part_a_nan_comparison_might_match(op: str, might: bool) -> None:
    stats = PartStats(rows=3, columns={1: ColumnStats(0, -2.0, 1.0)})  # bounds: no NaN in the part
    assert interp.might_match(ex.Pred(op, "f", NAN, 1, "double"), stats) is might
    assert interp.might_match(ex.Not(ex.Pred(ex._NEGATED[op], "f", NAN, 1, "double")), stats) is might
    assert not interp.might_match(ex.Pred(op, "f", NAN, 1, "double"),
                              PartStats(rows=3, columns={1: ColumnStats(3, None, None)}))  # all NULL


# -- dates and timestamps up to the calendar switch -----------------------------------------
@pytest.mark.parametrize("value", [
    dt.date(1582, 10, 15), dt.date(1582, 10, 5), dt.date(1582, 10, 4), dt.date(1, 1, 1), dt.date(1000, 1, 1),
    dt.datetime(1582, 10, 15, tzinfo=UTC), dt.datetime(1582, 10, 16, 23, 59, tzinfo=UTC),
    dt.datetime(1582, 10, 15, 7, 52, 58, tzinfo=UTC), dt.datetime(1000, 1, 1), dt.datetime(1582, 10, 10),
])
def test_spark_date_and_timestamp_literals_up_to_the_calendar_switch_are_left_to_spark(value: Any) -> None:
    for f in (ds.EqualTo(("d",), value), ds.LessThan(("d",), value), ds.GreaterThanOrEqual(("d",), value),
              ds.In(("d",), (dt.date(2024, 1, 1), value)), ds.Not(ds.EqualTo(("d",), value))):
        assert ex.from_spark(f) is None, f


@pytest.mark.parametrize("value", [dt.date(1582, 10, 16), dt.date(2024, 2, 29),
                                   dt.datetime(1582, 10, 17, tzinfo=UTC), dt.datetime(2024, 1, 1)])
def test_later_date_and_timestamp_literals_are_pushed(value: Any) -> None:
    assert ex.from_spark(ds.EqualTo(("d",), value)) == ex.Pred("eq", "d", value)
    assert ex.from_spark(ds.In(("d",), (value,))) == ex.Pred("in", "d", (value,))


# -- against Spark SQL -------------------------------------------------------------------------
SCHEMA = TableSchema.of([("i", "int"), ("f", "double"), ("g", "float"), ("d", "date"), ("ts", "timestamp"),
                         ("tsn", "timestamp_ntz")])
ROWS = [
    (1, 1.0, 1.0, dt.date(1582, 10, 10), dt.datetime(1582, 10, 10, tzinfo=UTC), dt.datetime(1582, 10, 10)),
    (2, NAN, NAN, dt.date(1582, 10, 20), dt.datetime(1582, 10, 20, tzinfo=UTC), dt.datetime(1582, 10, 20)),
    (3, None, None, dt.date(2000, 1, 1), dt.datetime(2000, 1, 1, tzinfo=UTC), dt.datetime(2000, 1, 1)),
    (4, -2.0, -2.0, None, None, None),
    (5, float("inf"), float("inf"), dt.date(1582, 10, 15), dt.datetime(1582, 10, 15, tzinfo=UTC),
     dt.datetime(1582, 10, 15)),
    (6, 0.5, 0.5, dt.date(1582, 10, 4), dt.datetime(1582, 10, 4, 12, tzinfo=UTC), dt.datetime(1582, 10, 4, 12)),
    (7, -0.0, -0.0, dt.date(1582, 10, 16), dt.datetime(1582, 10, 16, 12, tzinfo=UTC), dt.datetime(1582, 10, 16, 12)),
]
CONDITIONS = [
    "f < double('NaN')", "f <= double('NaN')", "f > double('NaN')", "f >= double('NaN')", "f = double('NaN')",
    "f <> double('NaN')", "not (f >= double('NaN'))", "not (f < double('NaN'))", "not (f > double('NaN'))",
    "f < double('NaN') or i = 3", "g < float('NaN')", "g <= float('NaN')", "not (g = float('NaN'))",
    "f in (double('NaN'), 1.0)", "f not in (double('NaN'))",
    "d = date'1582-10-10'", "d = date'1582-10-14'", "d = date'1582-10-15'", "d = date'1582-10-16'",
    "d < date'1582-10-12'", "d > date'1582-10-05'", "d >= date'1582-10-10'", "d <= date'1582-10-15'",
    "d in (date'1582-10-10')", "d in (date'1582-10-10', date'2000-01-01')", "not (d = date'1582-10-10')",
    "d <> date'1582-10-10'", "d < date'1000-01-01'", "d = date'1582-10-04'",
    "ts = timestamp'1582-10-10 00:00:00'", "ts < timestamp'1582-10-12 00:00:00'",
    "ts >= timestamp'1582-10-10 00:00:00'", "ts = timestamp'1582-10-09 16:07:02'",
    "ts in (timestamp'1582-10-10 00:00:00')", "ts > timestamp'1582-10-16 00:00:00'",
    "tsn = timestamp_ntz'1582-10-10 00:00:00'", "tsn < timestamp_ntz'1582-10-12 00:00:00'",
]


@pytest.fixture(scope="module")
def spark_table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Every row in its own part, so statistics decide per row."""
    uri = "file://" + str(tmp_path_factory.mktemp("expr")) + "/t/"
    log = TableLog.create(uri, SCHEMA)
    arrow = SCHEMA.arrow_schema(internal=False)
    tables = [pa.table({n: pa.array([v], arrow.field(n).type) for n, v in zip(SCHEMA.names, r, strict=True)})
              for r in ROWS]
    written = writer.write_parts(uri, tables, SCHEMA, write_id=fmt.new_write_id(), one_part_per_table=True,
                                 logical_time=1)
    writer.commit_parts(uri, written, log=log)
    return uri


@pytest.mark.spark
@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles"])
def test_reads_with_nan_and_calendar_switch_literals_answer_as_spark_sql(spark: Any, spark_table: str,
                                                                         zone: str) -> None:
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        full = reader.read_table(spark, spark_table)
        plain = spark.createDataFrame(full.collect(), full.schema)  # the same rows, no lading source
        assert plain.count() == len(ROWS)
        wrong = []
        for c in CONDITIONS:
            got = sorted(r.i for r in reader.read_table(spark, spark_table).where(c).collect())
            want = sorted(r.i for r in plain.where(c).collect())
            if got != want:
                wrong.append(f"{c}: lading {got}, Spark SQL {want}")
        assert not wrong, "\n".join(wrong)
    finally:
        spark.conf.unset("spark.sql.session.timeZone")


def test_a_pure_arrow_scan_filters_nan_and_proleptic_dates_exactly(file_uri: Callable[[str], str]) -> None:
    # the pure-Arrow read of the same rows: NaN literals filter exactly, proleptic dates as written
    uri = file_uri("arrow/")
    log = TableLog.create(uri, SCHEMA)
    arrow = SCHEMA.arrow_schema(internal=False)
    data = pa.table({n: pa.array([r[k] for r in ROWS], arrow.field(n).type) for k, n in enumerate(SCHEMA.names)})
    writer.commit_parts(uri, writer.write_parts(uri, [data], SCHEMA, write_id=fmt.new_write_id()), log=log)
    lt = reader.scan(uri, predicate=ex.Pred("lt", "f", NAN))
    assert sorted(lt.column("i").to_pylist()) == [1, 4, 5, 6, 7]
    day = reader.scan(uri, predicate=ex.Pred("eq", "d", dt.date(1582, 10, 10)))
    assert day.column("i").to_pylist() == [1]
