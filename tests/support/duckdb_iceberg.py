"""Runs in .tools/iceberg-reader (duckdb 1.5.5 + its iceberg, avro and delta extensions,
scripts/bootstrap), not in the project's venv: ``python duckdb_iceberg.py SITE_PACKAGES JOBS_JSON``.

Each job ``{"table": dir, "out": parquet path, "snapshot": id or null}`` reads the Iceberg table with
DuckDB's own ``iceberg_scan`` (through ``version-hint.text``; ``snapshot_from_id`` for time travel)
and writes the rows to ``out`` as Parquet; a job with ``"delta": true`` reads the Delta table with
``delta_scan`` (``"version"``: that version, else the newest). ``"where"``: a filter DuckDB applies;
``"columns"``: what it selects (default ``*``); ``"s3"``: ``{"endpoint": "host:port", "key", "secret",
"region"}``, the table is on S3 at that endpoint (plain HTTP, path style) and DuckDB reads it there
with its ``httpfs`` extension, as a user's DuckDB reads a table on S3. Extensions load by file path,
autoinstall and autoload off. Prints each job's seconds (its ``COPY`` alone) as one JSON list.
"""

import json
import sys
import time

import duckdb


def main() -> int:
    site, jobs = sys.argv[1], json.loads(sys.argv[2])
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions=false; SET autoload_known_extensions=false")
    names = ["avro", "iceberg"] + (["delta"] if any(j.get("delta") for j in jobs) else []) \
        + (["httpfs"] if any(j.get("s3") for j in jobs) else [])
    for name in names:
        con.execute(f"LOAD '{site}/duckdb_extension_{name}/extensions/v1.5.5/{name}.duckdb_extension'")
    s3 = next((j["s3"] for j in jobs if j.get("s3")), None)
    if s3:  # one endpoint per run (the tests' moto)
        def lit(v: str) -> str:
            return "'" + str(v).replace("'", "''") + "'"

        con.execute(f"CREATE SECRET s3 (TYPE s3, KEY_ID {lit(s3['key'])}, SECRET {lit(s3['secret'])}, "
                    f"REGION {lit(s3.get('region') or 'us-east-1')}, ENDPOINT {lit(s3['endpoint'])}, "
                    "URL_STYLE 'path', USE_SSL false)")
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
