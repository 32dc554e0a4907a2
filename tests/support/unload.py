"""Helpers for unload tests: job documents and S3 listings."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from lading_jobs.storage import S3Storage
from lading_jobs.unload import formatting, naming
from lading_jobs.unload.manifest import build_manifest
from lading_jobs.unload.task import TaskPlan, TaskWriter
from lading_spec.formats import CsvOptions
from lading_spec.job import JobDocument


def parquet_input(df: Any, directory: Any, name: str, files: int = 1) -> dict[str, Any]:
    """``df`` written as ``files`` Parquet files (rows in order, pyarrow's types) under
    ``directory``, and the ``from.inputs`` entry that reads them as ``name``: a tenant's query
    reads only the views its inputs name (lading_jobs.sandbox)."""
    import pyarrow.parquet as pq

    table = df.toArrow()
    step = -(-table.num_rows // files)
    for i in range(files):
        pq.write_table(table.slice(i * step, step), f"{directory}/part-{i:05d}.parquet")
    return {"name": name, "files": f"file://{directory}/", "format": "parquet"}


def job_doc(spec: dict[str, Any], run_id: str | None = None, name: str = "export") -> JobDocument:
    return JobDocument(kind="CopyJob", namespace="test", name=name, uid="uid-1", generation=1,
                       run_id=run_id or f"run-{uuid.uuid4().hex[:8]}",
                       run_time=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), spec=spec)


@contextmanager
def spark_conf(spark: Any, **settings: str) -> Iterator[None]:
    """Session settings for the block, restored (or unset) after it."""
    old = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def s3_keys(s3_client: Any, bucket: str, prefix: str = "") -> list[str]:
    out: list[str] = []
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return out


def s3_pending(s3_client: Any, bucket: str, prefix: str = "") -> list[str]:
    r = s3_client.list_multipart_uploads(Bucket=bucket, Prefix=prefix)
    return [u["Key"] for u in r.get("Uploads", [])]


def pending_run(dest: str, mode: str, run_id: str, query: str, rows: int, tasks: int
                ) -> tuple[list[dict[str, Any]], dict[str, Any], str | None]:
    """An unload run's CSV files (ids 0..rows-1 over ``tasks`` tasks) as pending uploads on S3, as its
    tasks would return them, and its manifest: what the driver publishes (no Spark needed)."""
    token = naming.run_token(run_id) if mode != "error" else None
    spark_schema = json.dumps({"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "s", "type": "string", "nullable": True, "metadata": {}}]})
    arrow_schema, conform = formatting.arrow_target(spark_schema)
    plan = TaskPlan(destination=dest, format="csv", options=CsvOptions(), max_file_size=64 * 1024 * 1024,
                    buffer_size=5 * 1024 * 1024, partition_by=(), keep_partition_columns=False, token=token,
                    spark_schema_json=spark_schema)
    files: list[dict[str, Any]] = []
    per = rows // tasks
    for task in range(tasks):
        ids = pa.array(range(task * per, (task + 1) * per), pa.int64())
        batch = pa.RecordBatch.from_arrays([ids, ids.cast(pa.string())], names=["id", "s"])
        w = TaskWriter(plan, task, S3Storage(), conform, arrow_schema, formatting.encoder_factory("csv", CsvOptions()))
        w.write(batch)
        files += w.finish()
    now = dt.datetime.now(dt.UTC)
    manifest = build_manifest(run_id=run_id, job={"kind": "CopyJob"}, destination=dest, source={"query": query},
                              output={"ifExists": mode}, spark_schema=json.loads(spark_schema),
                              arrow_schema=arrow_schema, type_mapping=formatting.type_mapping_version(),
                              files=files, start=now, end=now)
    return files, manifest, token
