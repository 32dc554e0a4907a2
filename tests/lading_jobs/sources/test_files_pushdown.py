"""No filter Spark pushes to the file source fails the query.

pyspark's filter-pushdown worker turns each pushed literal into a Python value before the
source sees it; a timestamp or date outside years 1 … 9999 (``TIMESTAMP'0001-01-01
00:00:00+01:00'`` is year 0 in UTC) raised ``OverflowError`` there and failed a query over a
file input, while the same query over a table input answered. Spark's own Parquet reader
over the same files is the oracle.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs.sources.files import register_inputs
from lading_spec.copyjob import Input
from lading_spec.formats import FileSet, ParquetOptions

UTC = dt.UTC
ROWS = pa.table({
    "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
    "ts": pa.array([dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                    dt.datetime(2024, 1, 1, tzinfo=UTC), None, dt.datetime(1, 1, 1, 0, 30, tzinfo=UTC)],
                   pa.timestamp("us", tz="UTC")),
    "ntz": pa.array([dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31), dt.datetime(2024, 1, 1), None,
                     dt.datetime(1, 1, 1, 0, 30)], pa.timestamp("us")),
    "dd": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(2024, 1, 1), None, dt.date(1, 1, 2)],
                   pa.date32()),
})

CONDITIONS = [
    "ts IN (TIMESTAMP'0001-01-01 00:00:00+01:00', TIMESTAMP'2024-01-01 00:00:00Z')",
    "ts = TIMESTAMP'0001-01-01 00:00:00+01:00'",
    "ts < TIMESTAMP'0001-01-01 00:30:00+01:00'",
    "ts >= TIMESTAMP'0001-01-01 00:30:00+01:00'",
    "NOT ts <=> TIMESTAMP'0001-01-01 00:00:00+01:00'",
    "ts > TIMESTAMP'9999-12-31 23:30:00-01:00'",
    "ts <= TIMESTAMP'9999-12-31 23:30:00-01:00' AND id > 1",
    "ntz > TIMESTAMP_NTZ'0001-01-01 00:00:00' - INTERVAL 1 DAY",
    "dd > date_add(DATE'0001-01-01', -2)",
    "dd IN (DATE'0001-01-02', date_add(DATE'9999-12-31', 1))",
    "dd < date_add(DATE'9999-12-31', 1)",
]


@pytest.mark.spark
@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati"])
def test_literals_python_cannot_hold_do_not_fail_a_query_over_files(spark: Any, file_uri: Callable[[str], str],
                                                                    tmp_path: Any, zone: str) -> None:
    root = file_uri("edges/")
    (tmp_path / "edges").mkdir()
    pq.write_table(ROWS.slice(0, 2), tmp_path / "edges" / "a.parquet")
    pq.write_table(ROWS.slice(2), tmp_path / "edges" / "b.parquet")
    register_inputs(spark, [Input(name="t", files=FileSet(uri=root, format="parquet", options=ParquetOptions()))])
    spark.read.parquet(str(tmp_path / "edges")).createOrReplaceTempView("oracle")
    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        for condition in CONDITIONS:
            got = sorted(r.id for r in spark.sql(f"SELECT id FROM t WHERE {condition}").collect())
            truth = sorted(r.id for r in spark.sql(f"SELECT id FROM oracle WHERE {condition}").collect())
            assert (condition, got) == (condition, truth)
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)
