"""Lake inputs benchmark: an export of one week from a year of daily partitions, read as an
Iceberg table and as a Delta table, beside DuckDB reading the same query.

  python bench/inputs.py [--days 365] [--rows-per-day 20000] [--week-start 2026-03-02]
                         [--repeat 3] [--dir /tmp/lading-bench-inputs]

The same rows (``--days`` days from 2026-01-01, ``--rows-per-day`` each: id, day, amount
decimal(12,2), name, ts) written once as an Iceberg table partitioned by ``day`` (pyiceberg,
one data file per day) and once as a Delta table partitioned by ``day`` (deltalake, one file
per day), on local disk. Then, ``--repeat`` times, interleaved (lading Iceberg, DuckDB
Iceberg, lading Delta, DuckDB Delta, ...), the export
``SELECT * FROM t WHERE day >= week_start AND day < week_start + 7`` to Parquet:

* lading: a whole CopyJob (``run_job``: ``from.inputs[]`` ``iceberg`` / ``delta``, ``to.files``
  Parquet) on one local[2] Spark session;
* DuckDB 1.5.5: ``COPY (SELECT * FROM iceberg_scan(...) / delta_scan(...) WHERE ...) TO
  ... (FORMAT parquet)`` in the reader venv (scripts/bootstrap's ``.tools/iceberg-reader``),
  timed inside DuckDB.

Prints, per format, the data files the filtered read opens against the table's total (lading's
planning: the Spark partitions of the query, one file each), the rows exported (equal for both
engines), the median seconds of each engine and the ratio DuckDB ÷ lading as throughput (> 1:
lading is faster). A script, not a test: record the output in docs/benchmarks.md ("Lake inputs").
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT / "tests"), str(ROOT)]

import benchjson  # noqa: E402
import pyarrow as pa  # noqa: E402


def rows(days: int, per_day: int) -> pa.Table:
    first = dt.date(2026, 1, 1)
    n = days * per_day
    ids = pa.array(range(n), pa.int64())
    day = [first + dt.timedelta(days=i // per_day) for i in range(n)]
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return pa.table({
        "id": ids,
        "day": pa.array(day, pa.date32()),
        "amount": pa.array([decimal.Decimal(i % 100_000) / 100 for i in range(n)], pa.decimal128(12, 2)),
        "name": [f"customer-{i % 997}" for i in range(n)],
        "ts": pa.array([base + dt.timedelta(seconds=i * 86_400 // per_day) for i in range(n)],
                       pa.timestamp("us", tz="UTC")),
    })


def write_iceberg(data: pa.Table, directory: Path) -> str:
    """The table in Iceberg (pyiceberg, identity partitions by day); its metadata file's URI."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        DateType,
        DecimalType,
        LongType,
        NestedField,
        StringType,
        TimestamptzType,
    )
    from support.iceberg_writer import FileCatalog

    catalog = FileCatalog(f"file://{directory}/wh")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "day", DateType()),
                    NestedField(3, "amount", DecimalType(12, 2)), NestedField(4, "name", StringType()),
                    NestedField(5, "ts", TimestamptzType()))
    table = catalog.create_table("db.orders", schema)
    with table.update_spec() as spec:
        spec.add_identity("day")
    table = catalog.load_table("db.orders")
    table.append(data)
    return str(catalog.load_table("db.orders").metadata_location)


def write_delta(data: pa.Table, directory: Path) -> str:
    from deltalake import write_deltalake

    write_deltalake(str(directory / "delta"), data, partition_by=["day"])
    return f"file://{directory}/delta/"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--rows-per-day", type=int, default=20_000)
    parser.add_argument("--week-start", default="2026-03-02")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default="/tmp/lading-bench-inputs")
    benchjson.add_argument(parser)
    args = parser.parse_args()

    from support.iceberg_readers import duckdb_timed_jobs
    from support.unload import job_doc

    from lading_jobs.main import run_job
    from lading_jobs.session import build_session
    from lading_jobs.sources.files import query_frame
    from lading_spec.copyjob import parse_copyjob

    base = Path(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    t0 = time.perf_counter()
    data = rows(args.days, args.rows_per_day)
    metadata = write_iceberg(data, base)
    delta_uri = write_delta(data, base)
    print(f"table: {args.days} daily partitions, {data.num_rows:,} rows, written as Iceberg and Delta in "
          f"{time.perf_counter() - t0:.1f}s")

    start = dt.date.fromisoformat(args.week_start)
    end = start + dt.timedelta(days=7)
    where = f"day >= DATE'{start}' AND day < DATE'{end}'"
    inputs = {"iceberg": {"iceberg": {"metadata": metadata}}, "delta": {"delta": {"table": delta_uri}}}
    duck_scan = {"iceberg": {"table": metadata.removeprefix("file://")},  # iceberg_scan of the metadata file
                 "delta": {"table": delta_uri.removeprefix("file://").rstrip("/"), "delta": True}}
    spark = build_session(master="local[2]", app_name="bench-inputs")
    seconds: dict[tuple[str, str], list[float]] = {}
    exported: dict[tuple[str, str], int] = {}
    counts: dict[str, tuple[int, int]] = {}
    for kind, source in inputs.items():
        spec = {"from": {"query": f"SELECT * FROM t WHERE {where}", "inputs": [{"name": "t", **source}]},
                "to": {"files": f"file://{base}/out/", "format": "parquet"}}
        parsed = parse_copyjob(spec).source.inputs
        opened = query_frame(spark, f"SELECT * FROM t WHERE {where}", parsed).rdd.getNumPartitions()
        total = query_frame(spark, "SELECT * FROM t", parsed).rdd.getNumPartitions()
        counts[kind] = (opened, total)
    for _ in range(args.repeat):
        for kind, source in inputs.items():
            out = base / "out"
            shutil.rmtree(out, ignore_errors=True)
            doc = job_doc({"from": {"query": f"SELECT * FROM t WHERE {where}", "inputs": [{"name": "t", **source}]},
                           "to": {"files": f"file://{out}/", "format": "parquet"}})
            started = time.perf_counter()
            result: dict[str, Any] = run_job(spark, doc)
            seconds.setdefault((kind, "lading"), []).append(time.perf_counter() - started)
            exported[(kind, "lading")] = int(result["rows"])
            [table], [duck] = duckdb_timed_jobs([{**duck_scan[kind], "where": where}])
            seconds.setdefault((kind, "duckdb"), []).append(duck)
            exported[(kind, "duckdb")] = table.num_rows
    spark.stop()

    print(f"export: SELECT * WHERE {where} ({args.repeat} runs each, interleaved)")
    print("| input | files read / total | rows (lading, DuckDB) | lading s | DuckDB s | DuckDB ÷ lading (throughput) |")
    print("|---|---|---|---|---|---|")
    for kind in inputs:
        lading, duck = statistics.median(seconds[(kind, "lading")]), statistics.median(seconds[(kind, "duckdb")])
        opened, total = counts[kind]
        print(f"| {kind} | {opened} / {total} | {exported[(kind, 'lading')]:,}, {exported[(kind, 'duckdb')]:,} | "
              f"{lading:.2f} | {duck:.2f} | {duck / lading:.2f} |")
        assert exported[(kind, "lading")] == exported[(kind, "duckdb")], "the engines exported different row counts"
    benchjson.write(args.json_out, __file__, {
        "days": args.days, "rows_per_day": args.rows_per_day, "repeat": args.repeat, "where": where,
        "inputs": {kind: {"files_read": counts[kind][0], "files_total": counts[kind][1],
                          "rows_lading": exported[(kind, "lading")], "rows_duckdb": exported[(kind, "duckdb")],
                          "lading_s": statistics.median(seconds[(kind, "lading")]),
                          "duckdb_s": statistics.median(seconds[(kind, "duckdb")])} for kind in inputs}})


if __name__ == "__main__":
    main()
