"""Helpers for load tests: the storage of a URI, a load's job document, a table's rows."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lading_jobs import storage as st
from lading_jobs.ingest.stores import storage_for
from lading_jobs.table.log.commits import TableLog
from lading_spec.job import JobDocument


def store(uri: str) -> st.Storage:
    return storage_for(uri, st.S3Settings.from_env())


def job(spec: dict[str, Any], run_id: str = "run-1") -> JobDocument:
    return JobDocument("CopyJob", "ns", "load", "uid", 1, run_id, dt.datetime(2025, 1, 1, tzinfo=dt.UTC), spec)


def table_rows(table: str) -> list[dict[str, Any]]:
    """The latest version's rows in part order, without lading's own columns (_lading_*)."""
    log = TableLog.open(table, store(table))
    assert log is not None, f"no table at {table}"
    snap = log.snapshot()
    parts = [pq.read_table(pa.BufferReader(store(table).read(snap.part_uri(p)))) for p in snap.parts]
    rows = pa.concat_tables(parts).to_pylist() if parts else []
    return [{k: v for k, v in r.items() if not k.startswith("_lading_")} for r in rows]
