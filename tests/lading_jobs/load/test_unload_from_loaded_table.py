"""COPY TO from a loaded table: a selective filter fetches only the parts that can match.

The table is filled by a load (one part per input file, ids correlated with the
file), then unloaded through the unload engine with a query over the table as an
input. GETs of part objects are counted at the S3 server (moto runs in this
process; its request log names every object fetched).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs import storage as st
from lading_jobs.ingest.stores import storage_for
from lading_jobs.load.job import run_load
from lading_jobs.table.log.commits import TableLog
from lading_spec.copyjob import parse_copyjob
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark, pytest.mark.s3]

FILES = 10
ROWS_PER_FILE = 20


def job(spec: dict[str, Any], run_id: str) -> JobDocument:
    return JobDocument("CopyJob", "ns", "t", "uid", 1, run_id, dt.datetime(2025, 1, 1, tzinfo=dt.UTC), spec)


def test_unload_with_a_selective_filter_skips_parts(spark: Any, bucket: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    unload = pytest.importorskip("lading_jobs.unload.job")
    store = storage_for(f"s3://{bucket}/", st.S3Settings.from_env())
    for f in range(FILES):
        lines = "".join(f"{f * ROWS_PER_FILE + i},name-{f}-{i}\n" for i in range(ROWS_PER_FILE))
        store.put(f"s3://{bucket}/in/f{f:02d}.csv", lines.encode())
    table = f"s3://{bucket}/t/"
    loaded = run_load(spark, job({"from": {"files": f"s3://{bucket}/in/", "format": "csv"},
                                  "to": {"table": table, "schema": [{"name": "id", "type": "bigint"},
                                                                    {"name": "name", "type": "string"}]}}, "load"))
    assert loaded["rows"] == FILES * ROWS_PER_FILE
    snapshot = TableLog.open(table, store).snapshot()  # type: ignore[union-attr]
    assert len(snapshot.parts) == FILES
    part_keys = {snapshot.part_uri(p).split(f"{bucket}/", 1)[1] for p in snapshot.parts}

    low = (FILES - 1) * ROWS_PER_FILE + 5  # only the last file's part can hold ids ≥ low
    spec = {"from": {"query": f"SELECT id, name FROM t WHERE id >= {low}", "inputs": [{"name": "t", "table": table}]},
            "to": {"files": f"s3://{bucket}/out/", "format": "parquet"}}
    caplog.set_level(logging.INFO, logger="werkzeug")
    caplog.clear()
    result = unload.run_unload(spark, job(spec, "unload"), parse_copyjob(spec))
    fetched = {key for key in part_keys for rec in caplog.records
               if f"GET /{bucket}/{key}" in rec.getMessage()}
    assert result["rows"] == FILES * ROWS_PER_FILE - low
    outputs = [o.uri for o in store.list_objects(f"s3://{bucket}/out/") if o.uri.endswith(".parquet")]
    rows = pa.concat_tables([pq.read_table(pa.BufferReader(store.read(u))) for u in outputs]).to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(low, FILES * ROWS_PER_FILE))
    assert {r["name"] for r in rows if r["id"] == low} == {f"name-{FILES - 1}-5"}
    assert len(fetched) == 1, f"fetched {len(fetched)} of {len(part_keys)} parts: {sorted(fetched)}"
