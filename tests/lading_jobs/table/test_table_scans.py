"""A table input read by several scans of one query: each scan gets the rows of its own filters.

This Spark plans one read per Python data source relation, and every reference to a view
(a self-join, both sides of a UNION, an IN subquery, a CTE used twice) shares it: before
``reader.shared_scans`` every scan read with the filters the last scan pushed. The answers
are compared with DuckDB over the same rows; the table has two parts, so skipping matters.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest

from lading_jobs import storage as st
from lading_jobs.sources import files as sources_files
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.copyjob import Input

ROWS = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "i": pa.array([None, 5, None, 6], pa.int32()),
                 "s": pa.array(["a", None, None, "b"], pa.string())})

QUERIES = [
    "SELECT id FROM t WHERE i IS NULL UNION ALL SELECT id FROM t WHERE s IS NULL",
    "SELECT id FROM t WHERE i IS NULL AND id IN (SELECT id FROM t WHERE s IS NOT NULL)",
    "SELECT a.id, b.id FROM t a JOIN t b ON a.id <= b.id WHERE a.i IS NULL OR b.s IS NULL",
    "SELECT a.id, b.id FROM t a, t b WHERE a.i = 5 AND b.s = 'b'",
    "WITH x AS (SELECT * FROM t) SELECT id FROM x WHERE id < 2 UNION ALL SELECT id FROM x WHERE id > 2",
    "SELECT id, (SELECT max(id) FROM t WHERE s IS NULL) FROM t WHERE id >= 3",
    "SELECT id FROM t WHERE id = 4",
]


@pytest.fixture(scope="module")
def table_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = f"file://{tmp_path_factory.mktemp('scans')}/t/"
    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("i", "int"), ("s", "string")]))
    stamped = ROWS.append_column(fmt.TIME_COLUMN, pa.array([1] * 4, pa.int64()))
    written = writer.write_parts(uri, [stamped.slice(0, 2), stamped.slice(2)], log.snapshot().schema,
                                 write_id=fmt.new_write_id(), one_part_per_table=True, storage=st.open_storage(uri))
    assert len(writer.commit_parts(uri, written, log=log).parts) == 2
    return uri


def duck(query: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    con.register("t", ROWS)
    return sorted(con.execute(query).fetchall())


@pytest.mark.spark
@pytest.mark.parametrize("query", QUERIES)
def test_each_scan_of_a_table_input_reads_its_own_rows(spark: Any, table_uri: str, query: str) -> None:
    df = sources_files.query_frame(spark, query, [Input(name="t", table=table_uri)])
    assert sorted(tuple(r) for r in df.collect()) == duck(query)


@pytest.mark.spark
def test_a_table_scanned_once_keeps_its_pushed_filters(spark: Any, table_uri: str) -> None:
    df = sources_files.query_frame(spark, "SELECT id FROM t WHERE id = 4", [Input(name="t", table=table_uri)])
    assert reader.shared_scans(df) == set()
    plan = df._jdf.queryExecution().executedPlan().toString()  # noqa: SLF001
    assert "BatchScan lading" in plan and "Filter (" not in plan  # the source applied it: still pushed
    twice = sources_files.query_frame(spark, QUERIES[0], [Input(name="t", table=table_uri)])
    assert reader.shared_scans(twice) == {"t"}
