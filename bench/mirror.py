"""Iceberg mirror benchmark: the mirror's cost per commit as a share of the commit's time.

  python bench/mirror.py [--parts 1000] [--commits 30] [--dir /tmp/lading-bench-mirror] [--s3]

Two tables, identical but for the switch (``iceberg_mirror`` off / on), each given ``--parts``
parts in commits of 100 (synthetic parts: statistics for six columns, no data is read by either
the log or the mirror); then, interleaved (off, on, off, on, ...), ``--commits`` commits to each of

* an *append* of one part to the ``--parts``-part table;
* a *stream batch*: two parts plus a ``sourceProgress`` entry, as a StreamCopy micro-batch commits.

Prints the median seconds per commit with the mirror off and on, and the mirror's share
``(on - off) / on`` (target ≤ 10 %). ``--s3`` runs against a moto S3 server on 127.0.0.1 instead
of local disk (more realistic request costs). A script, not a test: record the output in
docs/benchmarks.md ("Iceberg mirror").
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "spark_apps")]

from lading_jobs import storage as st  # noqa: E402
from lading_jobs.table.log import Change, Part, TableLog  # noqa: E402
from lading_jobs.table.schema import TableSchema  # noqa: E402
from lading_jobs.table.stats import ColumnStats, PartStats  # noqa: E402

SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string"), ("amount", "decimal(12,2)"),
                         ("at", "timestamp"), ("day", "date"), ("score", "double")])


def part(n: int) -> Part:
    cols = {1: ColumnStats(0, n * 1000, n * 1000 + 999), 2: ColumnStats(3, f"name-{n:06d}", f"name-{n:06d}-zz"),
            3: ColumnStats(0, "-10.50", "99999.99"), 4: ColumnStats(0, 1_700_000_000_000_000 + n,
                                                                     1_700_000_000_000_000 + n + 10**9),
            5: ColumnStats(0, 19000 + n, 19010 + n), 6: ColumnStats(1, -1.5, 2.5)}
    return Part(f"data/w-{uuid.uuid4().hex}/part-00000-00000.parquet", 1_000_000,
                PartStats(1000, 1_000_000, n, n, 1, 1, cols))


def build(uri: str, storage: st.Storage, parts: int, mirror: bool) -> TableLog:
    log = TableLog.create(uri, SCHEMA, storage=storage, iceberg_mirror=mirror)
    done = 0
    while done < parts:
        batch = min(100, parts - done)
        log.commit(Change(add=tuple(part(done + i) for i in range(batch))))
        done += batch
    return log


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", type=int, default=1000)
    ap.add_argument("--commits", type=int, default=30)
    ap.add_argument("--dir", default="/tmp/lading-bench-mirror")
    ap.add_argument("--s3", action="store_true")
    args = ap.parse_args()
    server = None
    if args.s3:
        import os

        import boto3
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        os.environ.update({"AWS_ENDPOINT_URL_S3": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "x",
                           "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"})
        boto3.client("s3", endpoint_url=f"http://{host}:{port}").create_bucket(Bucket="bench")
        base = "s3://bench/"
        storage: st.Storage = st.S3Storage()
    else:
        shutil.rmtree(args.dir, ignore_errors=True)
        Path(args.dir).mkdir(parents=True)
        base = f"file://{args.dir}/"
        storage = st.LocalStorage()
    try:
        for kind in ("append", "stream"):
            logs = {m: build(f"{base}{kind}-{'on' if m else 'off'}/", storage, args.parts, m) for m in (False, True)}
            times: dict[bool, list[float]] = {False: [], True: []}
            for i in range(args.commits):
                for m in (False, True):
                    if kind == "append":
                        change = Change(add=(part(args.parts + i),))
                    else:
                        change = Change(operation="stream", add=(part(args.parts + i), part(args.parts + i)),
                                        source_progress={"kafka:t": {"0": i}})
                    t0 = time.perf_counter()
                    logs[m].commit(change)
                    times[m].append(time.perf_counter() - t0)
            off, on = statistics.median(times[False]), statistics.median(times[True])
            print(f"{kind:6s} ({args.parts} parts, {'S3 (moto)' if args.s3 else 'local disk'}): "
                  f"commit {off * 1000:.1f} ms without the mirror, {on * 1000:.1f} ms with it; "
                  f"the mirror's share {(on - off) / on:.0%} (target <= 10 %)")
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
