"""Runs in .tools/iceberg-reader (duckdb 1.5.5 + its iceberg, avro and delta extensions,
scripts/bootstrap), not in the project's venv: ``python duckdb_iceberg.py SITE_PACKAGES JOBS_JSON``.

Each job ``{"table": dir, "out": parquet path, "snapshot": id or null}`` reads the Iceberg table with
DuckDB's own ``iceberg_scan`` (through ``version-hint.text``; ``snapshot_from_id`` for time travel)
and writes the rows to ``out`` as Parquet; a job with ``"delta": true`` reads the Delta table with
``delta_scan`` (``"version"``: that version, else the newest). ``"where"``: a filter DuckDB applies;
``"columns"``: what it selects (default ``*``). Extensions load by file path, autoinstall and autoload off.
Prints each job's seconds (its ``COPY`` alone) as one JSON list.
"""

import json
import sys
import time

import duckdb


def main() -> int:
    site, jobs = sys.argv[1], json.loads(sys.argv[2])
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions=false; SET autoload_known_extensions=false")
    names = ("avro", "iceberg", "delta") if any(j.get("delta") for j in jobs) else ("avro", "iceberg")
    for name in names:
        con.execute(f"LOAD '{site}/duckdb_extension_{name}/extensions/v1.5.5/{name}.duckdb_extension'")
    seconds = []
    for job in jobs:
        table = job["table"].replace("'", "''")
        if job.get("delta"):
            args = f", version := {int(job['version'])}" if job.get("version") is not None else ""
            scan = f"delta_scan('{table}'{args})"
        else:
            args = f", snapshot_from_id={int(job['snapshot'])}" if job.get("snapshot") is not None else ""
            scan = f"iceberg_scan('{table}'{args})"
        where = f" WHERE {job['where']}" if job.get("where") else ""
        out = job["out"].replace("'", "''")
        started = time.perf_counter()
        con.execute(f"COPY (SELECT {job.get('columns') or '*'} FROM {scan}{where}) TO '{out}' (FORMAT parquet)")
        seconds.append(time.perf_counter() - started)
    print(json.dumps(seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
