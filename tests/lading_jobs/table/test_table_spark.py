"""Writing and reading tables through Spark: one commit per DataFrame, the ``lading`` data
source, consolidation per envelope, filter pushdown, deletes, the seed's schema evolution
and aborts that leave nothing behind."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import Change, TableLog
from lading_jobs.table.schema import TableSchema

pytestmark = [pytest.mark.spark]


@pytest.fixture(params=["s3", "file"])
def table_uri(request: pytest.FixtureRequest, file_uri: Callable[[str], str]) -> str:
    if request.param == "s3":
        bucket = request.getfixturevalue("bucket")
        return f"s3://{bucket}/tables/t/"
    return file_uri("tables/t/")


def rows(df) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted(tuple(r) for r in df.collect())


def test_append_dataframe_is_one_commit_and_reads_back(spark, table_uri: str) -> None:  # type: ignore[no-untyped-def]
    df = spark.createDataFrame([(i, f"name-{i}", i * 1.5) for i in range(200)], "id bigint, name string, score double")
    snap = writer.append(spark, df.repartition(3), table_uri, logical_time=10)
    assert snap.version == 0  # commit 0 creates the table with every part (a failed first write leaves none)
    assert len(snap.parts) == 3 and sum(p.rows for p in snap.parts) == 200
    assert all(p.stats.min_time == 10 and p.stats.max_time == 10 for p in snap.parts)
    ids = {c.name: c.id for c in snap.schema.columns}
    lo = min(p.stats.columns[ids["id"]].min for p in snap.parts)
    hi = max(p.stats.columns[ids["id"]].max for p in snap.parts)
    assert (lo, hi) == (0, 199)
    out = reader.read_table(spark, table_uri)
    assert rows(out) == [(i, f"name-{i}", i * 1.5) for i in range(200)]
    assert rows(out.where("id >= 195 and name like 'name-19%'")) == [(i, f"name-{i}", i * 1.5) for i in range(195, 200)]
    assert reader.read_table(spark, table_uri, as_of=9).count() == 0
    storage = st.open_storage(table_uri)
    assert storage.list_pending_uploads(table_uri) == []


def test_upsert_and_diff_consolidate_through_spark(spark, table_uri: str) -> None:  # type: ignore[no-untyped-def]
    schema = TableSchema.of([("k", "string"), ("v", "int")])
    TableLog.create(table_uri, schema, "upsert", ["k"])
    writer.append(spark, spark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], "k string, v int"), table_uri,
                  logical_time=1)
    writer.append(spark, spark.createDataFrame([("a", 10), ("d", 4)], "k string, v int"), table_uri, logical_time=2)
    deletes = spark.createDataFrame([("b", None, -1)], "k string, v int, _lading_diff bigint")
    writer.append(spark, deletes, table_uri, logical_time=3)
    assert rows(reader.read_table(spark, table_uri)) == [("a", 10), ("c", 3), ("d", 4)]
    assert rows(reader.read_table(spark, table_uri, as_of=1)) == [("a", 1), ("b", 2), ("c", 3)]
    assert rows(reader.read_table(spark, table_uri, as_of=2)) == [("a", 10), ("b", 2), ("c", 3), ("d", 4)]
    # A filter on a value column must not let an older version of a key win.
    assert rows(reader.read_table(spark, table_uri).where("v < 5")) == [("c", 3), ("d", 4)]
    assert rows(reader.read_table(spark, table_uri).where("k = 'a'")) == [("a", 10)]

    diff_uri = table_uri.rstrip("/") + "-diff/"
    TableLog.create(diff_uri, schema, "diff")
    writer.append(spark, spark.createDataFrame([("x", 1, 2), ("y", 2, 1)], "k string, v int, _lading_diff bigint"),
                  diff_uri, logical_time=5)
    writer.append(spark, spark.createDataFrame([("x", 1, -1), ("y", 2, -1)], "k string, v int, _lading_diff bigint"),
                  diff_uri, logical_time=6)
    assert rows(reader.read_table(spark, diff_uri, as_of=5)) == [("x", 1), ("x", 1), ("y", 2)]
    assert rows(reader.read_table(spark, diff_uri)) == [("x", 1)]


def test_seed_schema_evolution_delete_does_not_touch_the_old_column(spark, table_uri: str) -> None:  # type: ignore[no-untyped-def]
    # CREATE TABLE t1 (a text, b int); INSERT ('hello', 5); DROP b; ADD b int DEFAULT 50; DELETE WHERE b = 5
    log = TableLog.create(table_uri, TableSchema.of([("a", "text"), ("b", "int")]), "diff")
    writer.append(spark, spark.createDataFrame([("hello", 5)], "a string, b int"), table_uri, logical_time=1)
    old_b = log.snapshot().schema.column("b").id
    log.commit(Change(operation="schema", schema=log.snapshot().schema.drop_column("b")))
    log.commit(Change(operation="schema", schema=log.snapshot().schema.add_column("b", "int", default=50)))
    new_b = log.snapshot().schema.column("b").id
    assert new_b != old_b
    writer.delete_where(spark, table_uri, "b = 5", logical_time=2)
    assert rows(reader.read_table(spark, table_uri)) == [("hello", 50)]
    assert rows(reader.read_table(spark, table_uri).where("b = 50")) == [("hello", 50)]
    # The part still holds the old b = 5 under the old column id; any Parquet reader sees it.
    snap = log.snapshot()
    first = min(snap.parts, key=lambda p: p.seq)
    raw = reader.read_part(st.open_storage(table_uri), snap, first)
    assert raw.column("b").to_pylist() == [50]  # mapped by id: the new b reads its default
    # Deleting by the new column's value does delete it, and renames keep the data.
    writer.delete_where(spark, table_uri, "b = 50", logical_time=3)
    assert rows(reader.read_table(spark, table_uri)) == []
    assert rows(reader.read_table(spark, table_uri, as_of=2)) == [("hello", 50)]
    log.commit(Change(operation="schema", schema=log.snapshot().schema.rename_column("a", "greeting")))
    assert reader.read_table(spark, table_uri, as_of=2).columns == ["greeting", "b"]
    assert rows(reader.read_table(spark, table_uri, as_of=2)) == [("hello", 50)]


def test_failed_write_aborts_every_pending_upload_and_commits_nothing(spark, table_uri: str) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    TableLog.create(table_uri, TableSchema.of([("x", "int")]))
    df = spark.range(0, 40, numPartitions=4).select(
        F.when(F.col("id") == 37, F.raise_error(F.lit("boom"))).otherwise(F.col("id")).cast("int").alias("x"))
    with pytest.raises(Exception, match="boom"):
        writer.append(spark, df, table_uri, logical_time=1)
    storage = st.open_storage(table_uri)
    assert storage.list_pending_uploads(table_uri) == []
    assert [o.uri for o in storage.list_objects(table_uri + fmt.DATA_DIR + "/")] == []
    assert TableLog.open_existing(table_uri).snapshot().version == 0


def test_register_table_view_for_sql(spark, file_uri: Callable[[str], str]) -> None:  # type: ignore[no-untyped-def]
    uri = file_uri("sql/t/")
    log = TableLog.create(uri, TableSchema.of([("d", "date"), ("n", "decimal(10,2)")]))
    import datetime as dt
    import decimal

    data = pa.table({"d": pa.array([dt.date(2024, 1, i) for i in range(1, 11)]),
                     "n": pa.array([decimal.Decimal(f"{i}.25") for i in range(10)], pa.decimal128(10, 2))})
    written = writer.write_parts(uri, [data], log.snapshot().schema, write_id=fmt.new_write_id(), logical_time=1)
    writer.commit_parts(uri, written, log=log)
    reader.register_table_view(spark, "lading_sql_t", uri)
    got = spark.sql("select count(*), sum(n) from lading_sql_t where d >= date'2024-01-06'").collect()[0]
    assert got[0] == 5 and str(got[1]) == "36.25"


def test_read_table_reads_one_snapshot_however_late_it_is_evaluated(spark, table_uri: str) -> None:  # type: ignore[no-untyped-def]
    """Fails on 1b6c3cc: the DataFrame's schema came from one open of the log and its scan from
    another, so a commit in between showed up in a DataFrame made before it."""
    schema = TableSchema.of([("id", "bigint")])
    log = TableLog.create(table_uri, schema)
    first = writer.write_parts(table_uri, [pa.table({"id": pa.array([1, 2], pa.int64())})], schema,
                               write_id=fmt.new_write_id(), storage=st.open_storage(table_uri))
    writer.commit_parts(table_uri, first, log=log)
    df = reader.read_table(spark, table_uri)
    more = writer.write_parts(table_uri, [pa.table({"id": pa.array([3], pa.int64())})], schema,
                              write_id=fmt.new_write_id(), storage=st.open_storage(table_uri))
    writer.commit_parts(table_uri, more, log=TableLog.open_existing(table_uri))
    assert rows(df) == [(1,), (2,)]
    assert rows(reader.read_table(spark, table_uri)) == [(1,), (2,), (3,)]


def test_a_dotted_column_name_is_written_and_sorted_by(spark, file_uri: Callable[[str], str]) -> None:  # type: ignore[no-untyped-def]
    # 'a.b' is one column: mapInArrow and sortWithinPartitions resolved the names as SQL text
    # and failed with [UNRESOLVED_COLUMN] (a field b of a column a).
    uri = file_uri("dotted/")
    df = spark.createDataFrame([(2, "x"), (1, "y"), (3, "z")], "`a.b` bigint, `c d` string")
    snap = writer.append(spark, df.coalesce(1), uri, logical_time=1, sort_by=["a.b"])
    assert [c.name for c in snap.schema.columns] == ["a.b", "c d"]
    assert rows(reader.read_table(spark, uri)) == [(1, "y"), (2, "x"), (3, "z")]
    (part,) = snap.parts
    ids = {c.name: c.id for c in snap.schema.columns}
    assert (part.stats.columns[ids["a.b"]].min, part.stats.columns[ids["a.b"]].max) == (1, 3)
