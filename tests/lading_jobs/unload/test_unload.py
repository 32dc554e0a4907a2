"""The unload end to end: local Spark, the moto S3 server over HTTP, files read back independently."""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.unload import job_doc, parquet_input, s3_keys, s3_pending

from lading_jobs.main import execute, run_job
from lading_jobs.result import Cancellation
from lading_jobs.unload.commit import DestinationNotEmpty

pytestmark = [pytest.mark.spark, pytest.mark.s3]
MB = 1024 * 1024


ORDERS: dict[str, Any] = {}


@pytest.fixture(scope="module")
def orders(spark: Any, tmp_path_factory: Any) -> str:
    """A small input with the column kinds users export (ints, decimals, timestamps, strings,
    nulls), in three Parquet files, also kept as a view of the session for the assertions."""
    df = spark.range(0, 5000, numPartitions=3).selectExpr(
        "id",
        "CASE WHEN id % 3 = 0 THEN 'eu' WHEN id % 3 = 1 THEN 'us' ELSE NULL END AS region",
        "CAST(id * 1.25 AS DECIMAL(12,2)) AS total",
        "TIMESTAMP '2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS created",
        "CASE WHEN id % 7 = 0 THEN NULL ELSE concat('note ', CAST(id AS STRING)) END AS note",
    )
    df.createOrReplaceTempView("orders_unload")
    ORDERS.update(parquet_input(df, tmp_path_factory.mktemp("orders"), "orders_unload", files=3))
    return "orders_unload"


def spec(dest: str, fmt: str = "parquet", **to: Any) -> dict[str, Any]:
    return {"from": {"query": "SELECT * FROM orders_unload ORDER BY id DESC", "inputs": [dict(ORDERS)]},
            "to": {"files": dest, "format": fmt, **to}}


def _read_parquet(s3: Any, bucket: str, keys: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for k in keys:
        rows += pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=k)["Body"].read())).to_pylist()
    return rows


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_unload_returns_the_query_count_and_a_manifest(spark: Any, orders: str, s3_client: Any, bucket: str,
                                                       fmt: str) -> None:
    doc = job_doc(spec(f"s3://{bucket}/exports/{{run_time:%Y%m%d}}/", fmt, maxFileSize="5MB"))
    result = run_job(spark, doc)
    assert result["rows"] == spark.sql("SELECT count(*) FROM orders_unload").first()[0] == 5000
    assert result["destination"] == f"s3://{bucket}/exports/20260102/"
    keys = s3_keys(s3_client, bucket)
    manifest_key = "exports/20260102/_lading_manifest.json"
    assert result["manifest"] == f"s3://{bucket}/{manifest_key}"
    manifest = json.loads(s3_client.get_object(Bucket=bucket, Key=manifest_key)["Body"].read())
    assert sorted(keys) == sorted([manifest_key] + [f"exports/20260102/{f['path']}" for f in manifest["files"]])
    assert manifest["totals"]["rows"] == 5000 and manifest["totals"]["files"] == result["files"]
    assert manifest["source"]["query"].startswith("SELECT")
    assert manifest["runId"] == doc.run_id
    for f in manifest["files"]:
        stored = s3_client.get_object(Bucket=bucket, Key=f"exports/20260102/{f['path']}")["Body"].read()
        assert len(stored) == f["bytes"]
        assert f["crc32"] == f"{zlib.crc32(stored):08x}"  # the checksum is of the bytes as stored
    assert s3_pending(s3_client, bucket) == []
    if fmt == "parquet":
        data_keys = sorted(k for k in keys if k.endswith(".parquet"))
        rows = _read_parquet(s3_client, bucket, data_keys)
        # ORDER BY holds across files in name order
        assert [r["id"] for r in rows] == list(range(4999, -1, -1))
        assert str(rows[0]["total"]) == "6248.75"
        stats = manifest["files"][0]["columns"]
        assert stats["id"]["max"] == 4999 and stats["note"]["nullCount"] >= 1


def test_partition_by_writes_hive_directories(spark: Any, orders: str, s3_client: Any, bucket: str) -> None:
    result = run_job(spark, job_doc(spec(f"s3://{bucket}/p/", "parquet", partitionBy=["region"])))
    assert result["rows"] == 5000
    keys = [k for k in s3_keys(s3_client, bucket) if k.endswith(".parquet")]
    dirs = {k.split("/")[1] for k in keys}
    assert dirs == {"region=eu", "region=us", "region=__HIVE_DEFAULT_PARTITION__"}
    eu = _read_parquet(s3_client, bucket, sorted(k for k in keys if "region=eu/" in k))
    assert "region" not in eu[0]
    assert sorted(r["id"] for r in eu) == [i for i in range(5000) if i % 3 == 0]
    # the query's order is kept within each partition directory, across files in name order
    assert [r["id"] for r in eu] == sorted((r["id"] for r in eu), reverse=True)


def test_non_empty_destination_fails_before_any_write(spark: Any, orders: str, s3_client: Any, bucket: str) -> None:
    s3_client.put_object(Bucket=bucket, Key="out/old.csv", Body=b"x")
    with pytest.raises(DestinationNotEmpty, match=rf"s3://{bucket}/out/.*s3://{bucket}/out/old.csv"):
        run_job(spark, job_doc(spec(f"s3://{bucket}/out/", "csv")))
    assert s3_keys(s3_client, bucket) == ["out/old.csv"]
    assert s3_pending(s3_client, bucket) == []


def test_replace_leaves_exactly_the_new_files(spark: Any, orders: str, s3_client: Any, bucket: str) -> None:
    s3_client.put_object(Bucket=bucket, Key="r/stale.csv", Body=b"old")
    s3_client.put_object(Bucket=bucket, Key="r/sub/older.csv", Body=b"old")
    result = run_job(spark, job_doc(spec(f"s3://{bucket}/r/", "csv", ifExists="replace")))
    manifest = json.loads(s3_client.get_object(Bucket=bucket, Key="r/_lading_manifest.json")["Body"].read())
    assert sorted(s3_keys(s3_client, bucket)) == sorted(
        ["r/_lading_manifest.json"] + [f"r/{f['path']}" for f in manifest["files"]])
    assert result["rows"] == 5000


def test_append_adds_non_colliding_files_and_a_manifest_per_run(spark: Any, orders: str, s3_client: Any,
                                                                bucket: str) -> None:
    first = run_job(spark, job_doc(spec(f"s3://{bucket}/a/", "json", ifExists="append"), run_id="run-a1"))
    before = set(s3_keys(s3_client, bucket))
    second = run_job(spark, job_doc(spec(f"s3://{bucket}/a/", "json", ifExists="append"), run_id="run-a2"))
    after = set(s3_keys(s3_client, bucket))
    assert before < after
    assert first["manifest"] != second["manifest"]
    m2 = json.loads(s3_client.get_object(Bucket=bucket, Key=second["manifest"].split("/", 3)[3])["Body"].read())
    assert {f"a/{f['path']}" for f in m2["files"]} == after - before - {second["manifest"].split("/", 3)[3]}


def test_size_ceiling_over_sixty_megabytes(spark: Any, s3_client: Any, bucket: str) -> None:
    query = ("SELECT id, sha2(CAST(id AS STRING), 256) AS a, sha2(CAST(id + 1 AS STRING), 256) AS b, "
             "sha2(CAST(id + 2 AS STRING), 512) AS c FROM range(0, 280000, 1, 2)")
    limit = 6 * MB
    result = run_job(spark, job_doc({"from": {"query": query},
                                     "to": {"files": f"s3://{bucket}/big/", "format": "csv", "maxFileSize": "6MB"}}))
    assert result["bytes"] >= 60 * 1000 * 1000
    manifest = json.loads(s3_client.get_object(Bucket=bucket, Key="big/_lading_manifest.json")["Body"].read())
    by_task: dict[int, list[dict[str, Any]]] = {}
    for f in manifest["files"]:
        size = s3_client.head_object(Bucket=bucket, Key=f"big/{f['path']}")["ContentLength"]
        assert size == f["bytes"] <= limit
        by_task.setdefault(f["task"], []).append(f)
    assert len(by_task) == 2
    for files in by_task.values():
        assert all(f["bytes"] >= 0.9 * limit for f in files[:-1]), [f["bytes"] for f in files]
    assert result["rows"] == 280000


@contextmanager
def small_batches(spark: Any, rows: int) -> Iterator[None]:
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, str(rows))
    try:
        yield
    finally:
        spark.conf.set(key, old)


def test_a_task_failing_midway_leaves_nothing_and_the_rerun_succeeds(spark: Any, s3_client: Any,
                                                                     bucket: str) -> None:
    # 2 tasks of 15000 rows of ~1 KB; partition 1 fails on its last row, after >5 MiB went up as parts.
    body = "SELECT id, repeat(CAST(id AS STRING), 200) AS pad FROM range(0, 30000, 1, 2)"
    failing = f"SELECT id, CASE WHEN id = 29999 THEN raise_error('boom at 29999') ELSE pad END AS pad FROM ({body})"
    dest = f"s3://{bucket}/fail/"
    doc = job_doc({"from": {"query": failing}, "to": {"files": dest, "format": "csv", "bufferSize": "5MB"}})
    with small_batches(spark, 1000):
        result = execute(doc, lambda: spark, Cancellation())
    assert "boom at 29999" in result["error"]
    assert "rows" not in result
    assert s3_keys(s3_client, bucket) == []
    assert s3_pending(s3_client, bucket) == []
    ok = execute(job_doc({"from": {"query": body}, "to": {"files": dest, "format": "csv"}}), lambda: spark,
                 Cancellation())
    assert ok["rows"] == 30000
    assert s3_pending(s3_client, bucket) == []
