"""What lading unloads, lading loads back unchanged: CSV and JSON lines, on the S3 server.

Sample orders (NULLs, quotes and commas in strings, decimals, UTC timestamps) are
unloaded by the unload engine and loaded by the load into a table with the same
column types; the table's rows equal the source rows, value for value.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading import cli
from lading_jobs import storage as st
from lading_jobs.ingest.stores import storage_for
from lading_jobs.load.job import run_load
from lading_jobs.table.log.commits import TableLog
from lading_spec.copyjob import parse_copyjob
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark, pytest.mark.s3]
SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "region", "type": "string"},
          {"name": "customer", "type": "string"}, {"name": "total", "type": "decimal(12,2)"},
          {"name": "created_at", "type": "timestamp"}, {"name": "note", "type": "string"}]


def job(spec: dict[str, Any], run_id: str) -> JobDocument:
    return JobDocument("CopyJob", "ns", "rt", "uid", 1, run_id, dt.datetime(2025, 1, 1, tzinfo=dt.UTC), spec)


@pytest.mark.parametrize("fmt_name", ["csv", "json"])
def test_unloaded_files_load_back_unchanged(spark: Any, bucket: str, fmt_name: str) -> None:
    unload = pytest.importorskip("lading_jobs.unload.job")
    store = storage_for(f"s3://{bucket}/", st.S3Settings.from_env())
    cli.write_sample_orders(f"s3://{bucket}/raw/", rows=3000, files=2)
    source = pa.concat_tables([pq.read_table(pa.BufferReader(store.read(o.uri)))
                               for o in store.list_objects(f"s3://{bucket}/raw/")])
    options = {"header": True} if fmt_name == "csv" else {}
    spec = {"from": {"query": "SELECT * FROM orders",
                     "inputs": [{"name": "orders", "files": f"s3://{bucket}/raw/", "format": "parquet"}]},
            "to": {"files": f"s3://{bucket}/out/", "format": fmt_name, "options": options}}
    unloaded = unload.run_unload(spark, job(spec, "unload"), parse_copyjob(spec))
    assert unloaded["rows"] == 3000
    table = f"s3://{bucket}/t/"
    load = {"from": {"files": f"s3://{bucket}/out/", "pattern": f"*.{'csv' if fmt_name == 'csv' else 'json*'}",
                     "format": fmt_name, "options": options},
            "to": {"table": table, "schema": SCHEMA}}
    loaded = run_load(spark, job(load, "load"))
    assert loaded.get("rows") == 3000, loaded
    assert loaded["rowsRejected"] == 0
    snap = TableLog.open(table, store).snapshot()  # type: ignore[union-attr]
    got = pa.concat_tables([pq.read_table(pa.BufferReader(store.read(snap.part_uri(p)))) for p in snap.parts])
    names = [c["name"] for c in SCHEMA]
    expected = sorted(source.select(names).to_pylist(), key=lambda r: r["id"])
    assert sorted(got.select(names).to_pylist(), key=lambda r: r["id"]) == expected
    assert any(r["note"] is None for r in expected) and any("," in (r["note"] or "") for r in expected)
