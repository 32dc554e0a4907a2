"""Readers no one here wrote, for the Iceberg mirror's and the Iceberg and Delta inputs' tests:
pyiceberg's ``StaticTable`` and DuckDB's own ``iceberg_scan`` and ``delta_scan`` (run in its own
venv, tests/support/duckdb_iceberg.py), plus the multiset comparison of their rows with lading's."""

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
    return duckdb_jobs([{"table": table_dir, "snapshot": s} for s in snapshots])


def duckdb_s3_rows(table_uri: str, endpoint: str, key: str, secret: str, region: str = "us-east-1") -> pa.Table:
    """The rows DuckDB's iceberg_scan reads from the table at ``table_uri`` (``s3://…``) on the S3
    server at ``endpoint`` (``http://host:port``), through DuckDB's own ``httpfs``: the current snapshot."""
    s3 = {"endpoint": endpoint.split("://", 1)[-1].rstrip("/"), "key": key, "secret": secret, "region": region}
    return duckdb_jobs([{"table": table_uri.rstrip("/"), "s3": s3}])[0]


def duckdb_delta_rows(table_dir: str, versions: list[int | None]) -> list[pa.Table]:
    """The rows DuckDB's delta_scan reads from ``table_dir`` at each version (None: the newest)."""
    return duckdb_jobs([{"table": table_dir, "delta": True, "version": v} for v in versions])


def duckdb_jobs(jobs: list[dict[str, Any]]) -> list[pa.Table]:
    """Runs ``jobs`` (tests/support/duckdb_iceberg.py's form, without ``out``) in the reader venv."""
    return duckdb_timed_jobs(jobs)[0]


def duckdb_timed_jobs(jobs: list[dict[str, Any]]) -> tuple[list[pa.Table], list[float]]:
    """``duckdb_jobs``, with the seconds each job's query took inside DuckDB (bench/inputs.py)."""
    site = next(READER.glob("lib/python3*/site-packages"))
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [{**j, "out": f"{tmp}/{i}.parquet"} for i, j in enumerate(jobs)]
        done = subprocess.run([str(READER / "bin" / "python"), str(SCRIPT), str(site), json.dumps(jobs)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return [pq.read_table(j["out"]) for j in jobs], json.loads(done.stdout.strip().splitlines()[-1])


def query_answer(spark: Any, query: str, inputs: list[Any]) -> tuple[pa.Table, int]:
    """``query``'s rows over ``inputs`` (``files.query_frame``) as Arrow (timestamps with their
    zone) and its Spark partitions: the data files a lake input's read opens, one per task."""
    from lading_jobs.sources.files import query_frame

    df = query_frame(spark, query, inputs)
    return df.toArrow(), df.rdd.getNumPartitions()


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


SPEC_RESERVED_MIN = 2_147_483_447
"""Iceberg's spec: tables must not use field ids from ``Integer.MAX_VALUE - 200`` up; those are its
metadata columns'."""
POSITION_DELETE_IDS = {2_147_483_546: "file_path", 2_147_483_545: "pos"}
"""The spec's reserved ids of a position delete file's columns, with their spec names."""


def _parquet_ids(t: pa.DataType, path: str, out: list[tuple[str, int | None]]) -> None:
    children: list[pa.Field] = []
    if pa.types.is_struct(t):
        children = [t.field(i) for i in range(t.num_fields)]
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        children = [t.value_field]
    elif pa.types.is_map(t):
        children = [t.key_field, t.item_field]
    for f in children:
        _field_ids(f, f"{path}.{f.name}", out)


def _field_ids(f: pa.Field, path: str, out: list[tuple[str, int | None]]) -> None:
    raw = (f.metadata or {}).get(b"PARQUET:field_id")
    out.append((path, int(raw) if raw is not None else None))
    _parquet_ids(f.type, path, out)


def strict_field_id_problems(metadata: str, footers: dict[str, pa.Schema] | None = None) -> list[str]:
    """What a reader that checks Parquet field ids strictly refuses in the files the snapshots of the
    metadata file ``metadata`` list (data files, copy files, delete files): a field without an id, or
    an id the metadata did not assign — one above ``last-column-id``, in none of its ``schemas``, or
    in the spec's reserved range (2147483447 and up) other than a position delete file's
    ``file_path`` and ``pos`` under their spec names. Empty when every file passes. ``footers``: the
    files' schemas already read (by path; filled in)."""
    from pyiceberg.manifest import DataFileContent
    from pyiceberg.schema import index_by_id
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(metadata)
    meta = table.metadata
    assigned = {fid for s in meta.schemas for fid in index_by_id(s)}
    problems: list[str] = []
    seen: set[str] = set()
    footers = {} if footers is None else footers
    for snap in meta.snapshots:
        for manifest in snap.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io):
                df = entry.data_file
                if df.file_path in seen:
                    continue
                seen.add(df.file_path)
                if df.file_path not in footers:
                    with table.io.new_input(df.file_path).open() as stream:
                        footers[df.file_path] = pq.read_schema(stream)
                schema = footers[df.file_path]
                ids: list[tuple[str, int | None]] = []
                for f in schema:
                    _field_ids(f, f.name, ids)
                for path, fid in ids:
                    where = f"{df.file_path} ({df.content.name}) field {path!r}"
                    if fid is None:
                        problems.append(f"{where}: no field id")
                    elif fid >= SPEC_RESERVED_MIN:
                        if not (df.content == DataFileContent.POSITION_DELETES
                                and POSITION_DELETE_IDS.get(fid) == path):
                            problems.append(f"{where}: id {fid} is reserved by the spec for another column")
                    elif fid > meta.last_column_id or fid not in assigned:
                        problems.append(f"{where}: id {fid} was never assigned (last-column-id "
                                        f"{meta.last_column_id}, schemas {[s.schema_id for s in meta.schemas]})")
    return problems


def assert_strict_field_ids(table_dir: str | Path, first: int = 0) -> None:
    """Every metadata file of the mirror at ``table_dir`` (``v<n>.metadata.json``, n >= ``first``)
    passes ``strict_field_id_problems``."""
    footers: dict[str, pa.Schema] = {}
    files = [p for p in Path(table_dir, "metadata").glob("v*.metadata.json") if int(p.name[1:].split(".")[0]) >= first]
    files.sort(key=lambda p: int(p.name[1:].split(".")[0]))
    assert files, table_dir
    for f in files:
        problems = strict_field_id_problems(str(f), footers)
        assert not problems, (f.name, problems[:5])
