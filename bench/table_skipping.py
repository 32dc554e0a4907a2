"""Table skipping benchmark: bytes and parts fetched by a selective query, with and without skipping.

  python bench/table_skipping.py [--parts 200] [--rows-per-part 20000] [--spark]
  python bench/table_skipping.py --temporal [--rows-per-part 2000]
  python bench/table_skipping.py --json [--rows-per-part 2000]

Starts moto's S3 server in process behind a middleware that counts GET requests
and response bytes per object, writes a table of ``--parts`` parts whose event
times grow with the part (time-correlated, as an append-only log is), then runs
``ts >= cut`` selecting the newest 1 % / 2 % / 10 % of rows two ways: with
statistics skipping (the lading reader's plan) and without (every part fetched,
filter applied after). Prints parts fetched, GETs, MB fetched and seconds per
query, and checks both give the same rows. ``--spark`` also runs the query
through Spark's ``lading`` data source. A script, not a test: record the output
in docs/benchmarks.md ("Tables").

``--temporal``: an append table of 365 daily parts ending today, queried through a
CopyJob's ``from.query`` path (``sources.files.query_frame``: the plan's filter on the
scan, ``table.filters.interp``) with ``ts > now() - INTERVAL 30 DAYS`` and
``date_trunc('DAY', ts) = <a day>``, beside the same query over the same Parquet
objects read as plain files (a ``files`` input), which opens every part.

``--json``: an append table of 100 parts with a ``json`` column whose ``$.device`` has
locality (each part holds a few devices of its own), queried the same two ways with
``get_json_object(payload, '$.device') = <a device>`` (the JSON statistics per key path,
``table.stats.jsonstats``); also prints the time the writer spent on JSON statistics.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import benchjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT)]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


class Counting:
    """WSGI middleware: GETs of ``.parquet`` objects, and the bytes served for them."""

    def __init__(self, app: Any) -> None:
        self.app, self.lock = app, threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.gets, self.bytes, self.objects = 0, 0, set()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        body = self.app(environ, start_response)
        if environ["REQUEST_METHOD"] != "GET" or not path.endswith(".parquet"):
            return body
        chunks = list(body)
        with self.lock:
            self.gets += 1
            self.bytes += sum(len(c) for c in chunks)
            self.objects.add(path)
        return chunks


def start_server() -> tuple[str, Counting]:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    counting = Counting(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, counting, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_port}"
    os.environ.update({"AWS_ENDPOINT_URL_S3": endpoint, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"})
    return endpoint, counting


def build(uri: str, parts: int, rows_per_part: int) -> None:
    import numpy as np
    import pyarrow as pa

    from lading_jobs.table import format as fmt
    from lading_jobs.table import writer
    from lading_jobs.table.log.commits import TableLog
    from lading_jobs.table.schema import TableSchema

    log = TableLog.create(uri, TableSchema.of([("ts", "bigint"), ("device", "string"), ("value", "double")]),
                          sort_by=["ts"])
    schema = log.snapshot().schema
    rng = np.random.default_rng(7)

    def tables() -> Any:
        for i in range(parts):
            ts = np.arange(i * rows_per_part, (i + 1) * rows_per_part, dtype=np.int64)
            yield pa.table({"ts": ts, "device": pa.array([f"dev-{d}" for d in rng.integers(0, 500, len(ts))]),
                            "value": rng.random(len(ts)), fmt.TIME_COLUMN: np.full(len(ts), i, dtype=np.int64)})

    written = writer.write_parts(uri, tables(), schema, write_id=fmt.new_write_id(), one_part_per_table=True)
    writer.commit_parts(uri, written, log=log)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", type=int, default=200)
    ap.add_argument("--rows-per-part", type=int, default=20_000)
    ap.add_argument("--spark", action="store_true")
    benchjson.add_argument(ap)
    args = ap.parse_args()
    endpoint, counting = start_server()
    import boto3
    import pyarrow.compute as pc

    from lading_jobs import storage as st
    from lading_jobs.table import reader
    from lading_jobs.table.filters import expr as ex

    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
    uri = "s3://bench/events/"
    t0 = time.perf_counter()
    build(uri, args.parts, args.rows_per_part)
    total_rows = args.parts * args.rows_per_part
    print(f"table: {args.parts} parts, {total_rows:,} rows, built in {time.perf_counter() - t0:.1f}s")
    storage = st.S3Storage()
    print("| selectivity | path | parts fetched | GETs | MB fetched | seconds | rows |")
    print("|---|---|---|---|---|---|---|")
    for pct in (1, 2, 10):
        cut = total_rows - total_rows * pct // 100
        results = {}
        for label, predicate in (("with skipping", ex.Pred("ge", "ts", cut)), ("without skipping", None)):
            counting.reset()
            t = time.perf_counter()
            out = reader.scan(uri, predicate=predicate, storage=storage)
            if predicate is None:
                out = out.filter(pc.greater_equal(out.column("ts"), cut))
            seconds = time.perf_counter() - t
            results[label] = out.sort_by("ts")
            print(f"| {pct} % | {label} | {len(counting.objects)} / {args.parts} | {counting.gets} | "
                  f"{counting.bytes / 1e6:.2f} | {seconds:.2f} | {out.num_rows:,} |")
            READS.append(read_row(f"{pct} %", label, counting, args.parts, seconds, out.num_rows))
        assert results["with skipping"].equals(results["without skipping"]), "skipping changed the answer"
    if args.spark:
        from lading_jobs.session import build_session

        spark = build_session(master="local[2]", app_name="lading-bench")
        cut = total_rows - total_rows * 2 // 100
        counting.reset()
        t = time.perf_counter()
        n = reader.read_table(spark, uri).where(f"ts >= {cut}").count()
        print(f"| 2 % | Spark format('lading') | {len(counting.objects)} / {args.parts} | {counting.gets} | "
              f"{counting.bytes / 1e6:.2f} | {time.perf_counter() - t:.2f} | {n:,} |")
        READS.append(read_row("2 %", "Spark format('lading')", counting, args.parts, time.perf_counter() - t, n))
        spark.stop()
    benchjson.write(args.json_out, __file__, {"parts": args.parts, "rows": total_rows, "reads": READS})


READS: list[dict[str, Any]] = []  # the printed table's rows, for the JSON (bench/benchjson.py)


def read_row(query: str, read: str, counting: Any, parts: int, seconds: float, rows: int) -> dict[str, Any]:
    """One printed table row, for the JSON."""
    return {"query": query, "read": read, "parts_fetched": len(counting.objects), "parts": parts,
            "gets": counting.gets, "mb_fetched": counting.bytes / 1e6, "seconds": seconds, "rows": rows}


def build_daily(uri: str, days: int, rows_per_part: int) -> Any:
    """One part per day, the last one today (UTC); rows spread over each day. Returns day 0."""
    import datetime as dt

    import numpy as np
    import pyarrow as pa

    from lading_jobs.table import format as fmt
    from lading_jobs.table import writer
    from lading_jobs.table.log.commits import TableLog
    from lading_jobs.table.schema import TableSchema

    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("ts", "timestamp"), ("value", "double")]))
    schema = log.snapshot().schema
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    first = today - dt.timedelta(days=days - 1)
    rng = np.random.default_rng(7)
    day_us = 86_400_000_000
    first_us = int(first.timestamp()) * 1_000_000

    def tables() -> Any:
        for d in range(days):
            ts = np.sort(rng.integers(0, day_us, rows_per_part)) + first_us + d * day_us
            yield pa.table({"id": np.arange(d * rows_per_part, (d + 1) * rows_per_part, dtype=np.int64),
                            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")), "value": rng.random(rows_per_part),
                            fmt.TIME_COLUMN: np.full(rows_per_part, d, dtype=np.int64)})

    written = writer.write_parts(uri, tables(), schema, write_id=fmt.new_write_id(), one_part_per_table=True)
    writer.commit_parts(uri, written, log=log)
    return first


def compare_reads(spark: Any, counting: Counting, inputs: dict[str, Any], where: str, limit: int,
                  parts: int) -> dict[str, int]:
    """Count ``events`` rows matching ``where`` through each input, printing a table row per read
    (parts fetched out of ``parts``, GETs, MB, seconds); the lading table may fetch at most ``limit``."""
    from lading_jobs.sources import files as sources_files

    counts = {}
    for label, input_ in inputs.items():
        df = sources_files.query_frame(spark, f"SELECT count(*) AS n FROM events WHERE {where}", input_)
        counting.reset()
        t = time.perf_counter()
        counts[label] = df.collect()[0].n
        print(f"| `{where}` | {label} | {len(counting.objects)} / {parts} | {counting.gets} | "
              f"{counting.bytes / 1e6:.2f} | {time.perf_counter() - t:.2f} | {counts[label]:,} |")
        READS.append(read_row(where, label, counting, parts, time.perf_counter() - t, counts[label]))
        if label == "lading table":
            assert len(counting.objects) <= limit, f"{where}: {len(counting.objects)} parts fetched, over {limit}"
    return counts


def temporal(rows_per_part: int) -> None:
    import datetime as dt

    import boto3

    from lading_jobs.session import build_session
    from lading_spec.copyjob import Input
    from lading_spec.formats import FileSet

    endpoint, counting = start_server()
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
    uri, days = "s3://bench/daily/", 365
    t0 = time.perf_counter()
    first = build_daily(uri, days, rows_per_part)
    print(f"table: {days} daily parts, {days * rows_per_part:,} rows, built in {time.perf_counter() - t0:.1f}s")
    spark = build_session(master="local[2]", app_name="lading-bench")
    day = (first + dt.timedelta(days=200)).date().isoformat()
    filters = [("ts > now() - INTERVAL 30 DAYS", 31), (f"date_trunc('DAY', ts) = DATE'{day}'", 2)]
    inputs = {"lading table": [Input(name="events", table=uri)],
              "plain Parquet (files input)": [Input(name="events", files=FileSet(uri=uri + "data/"))]}
    print("| filter | read | parts fetched | GETs | MB fetched | seconds | rows |")
    print("|---|---|---|---|---|---|---|")
    for where, limit in filters:
        counts = compare_reads(spark, counting, inputs, where, limit, days)
        # now() is each query's own instant: rows may cross the cut between the two queries
        if "now()" not in where:
            assert len(set(counts.values())) == 1, f"{where}: the reads disagree: {counts}"
    spark.stop()


def build_json(uri: str, parts: int, rows_per_part: int) -> tuple[float, float]:
    """``parts`` parts of ``{"device": "dev-<part>-<0..4>", "n": <row>, "tags": {...}}`` documents;
    returns the seconds spent computing the JSON statistics of every part and, the anchor, the
    seconds ``json.loads`` alone takes over the same documents (second passes, timed on their
    own, alternating, best of 3)."""
    import json

    import numpy as np
    import pyarrow as pa

    from lading_jobs.table import format as fmt
    from lading_jobs.table import writer
    from lading_jobs.table.log.commits import TableLog
    from lading_jobs.table.schema import TableSchema
    from lading_jobs.table.stats import jsonengine

    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("payload", "json")]))
    schema = log.snapshot().schema
    tables = []
    for p in range(parts):
        ids = np.arange(p * rows_per_part, (p + 1) * rows_per_part, dtype=np.int64)
        docs = [json.dumps({"device": f"dev-{p:03d}-{i % 5}", "n": int(i), "tags": {"site": f"s{i % 7}", "ok": True}})
                for i in ids]
        tables.append(pa.table({"id": ids, "payload": pa.array(docs, pa.string()),
                                fmt.TIME_COLUMN: np.full(len(ids), p, dtype=np.int64)}))
    written = writer.write_parts(uri, tables, schema, write_id=fmt.new_write_id(), one_part_per_table=True)
    writer.commit_parts(uri, written, log=log)
    texts = [t.column("payload").to_pylist() for t in tables]
    best = [float("inf"), float("inf")]
    for _ in range(3):
        t = time.perf_counter()
        for table in tables:
            jsonengine.summarize(table.column("payload"))
        best[0] = min(best[0], time.perf_counter() - t)
        t = time.perf_counter()
        for docs in texts:
            for doc in docs:
                json.loads(doc)
        best[1] = min(best[1], time.perf_counter() - t)
    return best[0], best[1]


def json_paths(rows_per_part: int) -> None:
    import boto3

    from lading_jobs.session import build_session
    from lading_spec.copyjob import Input
    from lading_spec.formats import FileSet

    endpoint, counting = start_server()
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
    uri, parts = "s3://bench/json/", 100
    t0 = time.perf_counter()
    stats_seconds, loads_seconds = build_json(uri, parts, rows_per_part)
    rows = parts * rows_per_part
    print(f"table: {parts} parts, {rows:,} rows, built in {time.perf_counter() - t0:.1f}s; JSON statistics "
          f"of every part: {stats_seconds:.2f}s ({rows / stats_seconds / 1e3:.0f} k documents/s), "
          f"{stats_seconds / loads_seconds:.2f} x json.loads alone ({loads_seconds:.2f}s)")
    STATS.update(json_stats_s=stats_seconds, json_loads_s=loads_seconds, documents=rows)
    spark = build_session(master="local[2]", app_name="lading-bench")
    where, limit = "get_json_object(payload, '$.device') = 'dev-042-3'", 3
    inputs = {"lading table": [Input(name="events", table=uri)],
              "plain Parquet (files input)": [Input(name="events", files=FileSet(uri=uri + "data/"))]}
    print("| filter | read | parts fetched | GETs | MB fetched | seconds | rows |")
    print("|---|---|---|---|---|---|---|")
    counts = compare_reads(spark, counting, inputs, where, limit, parts)
    assert len(set(counts.values())) == 1, f"the reads disagree: {counts}"
    spark.stop()


STATS: dict[str, Any] = {}  # --json: the writer's JSON statistics cost, for the JSON result


def write_mode_result(mode: str) -> None:
    """--temporal, --json: their reads (and statistics cost) to bench/results/table_skipping-<mode>.json."""
    out = sys.argv[sys.argv.index("--json-out") + 1] if "--json-out" in sys.argv else None
    benchjson.write(out, __file__, {"reads": READS, **({"write_stats": STATS} if STATS else {})}, mode)


if __name__ == "__main__":
    if "--json" in sys.argv:
        rows = sys.argv[sys.argv.index("--rows-per-part") + 1] if "--rows-per-part" in sys.argv else "2000"
        json_paths(int(rows))
        write_mode_result("json")
    elif "--temporal" in sys.argv:
        rows = sys.argv[sys.argv.index("--rows-per-part") + 1] if "--rows-per-part" in sys.argv else "2000"
        temporal(int(rows))
        write_mode_result("temporal")
    else:
        main()
