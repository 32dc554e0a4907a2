"""Readers no one here wrote, for the Iceberg mirror's tests: pyiceberg's ``StaticTable`` and
DuckDB's own ``iceberg_scan`` (run in its own venv, tests/support/duckdb_iceberg.py), plus the
multiset comparison of their rows with lading's."""

from __future__ import annotations

import collections
import datetime as dt
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
READER = ROOT / ".tools" / "iceberg-reader"
SCRIPT = Path(__file__).with_name("duckdb_iceberg.py")


def pyiceberg_rows(metadata: str, snapshot_id: int | None = None) -> pa.Table:
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(metadata)
    return table.scan(snapshot_id=snapshot_id).to_arrow()


def duckdb_rows(table_dir: str, snapshots: list[int | None]) -> list[pa.Table]:
    """The rows DuckDB's iceberg_scan reads from ``table_dir`` at each snapshot (None: current)."""
    site = next(READER.glob("lib/python3*/site-packages"))
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [{"table": table_dir, "out": f"{tmp}/{i}.parquet", "snapshot": s} for i, s in enumerate(snapshots)]
        done = subprocess.run([str(READER / "bin" / "python"), str(SCRIPT), str(site), json.dumps(jobs)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return [pq.read_table(j["out"]) for j in jobs]


def _value(v: Any) -> Any:
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC)
    if isinstance(v, float) and v != v:
        return "NaN"
    return v


def multiset(table: pa.Table, columns: list[str] | None = None) -> collections.Counter[tuple[Any, ...]]:
    """The rows of ``table`` (its ``columns``, in that order) as a multiset of value tuples."""
    names = columns if columns is not None else table.column_names
    cols = [table.column(n).to_pylist() for n in names]
    return collections.Counter(tuple(_value(c[i]) for c in cols) for i in range(table.num_rows))
