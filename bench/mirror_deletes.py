"""The Iceberg mirror's delete files: what they add to a commit of an upsert table.

  python bench/mirror_deletes.py [--parts 200] [--rows 500] [--commits 15] [--dir /tmp/lading-bench-deletes]

Two tables of ``--parts`` real Parquet parts (``--rows`` rows each, disjoint key ranges), identical
but for the envelope: ``append`` (the mirror writes no delete file) and ``upsert`` keyed on ``k``.
Then, interleaved, ``--commits`` stream-like commits to each: one part of 100 rows updating keys
of one existing part (so the statistics leave one candidate part; keys spread over the whole key
space make every part a candidate: that costs what deciding in full costs). Prints the median seconds of the commit (which includes
the mirror's publish) for both, the difference (the delete-file step: statistics, reading the key
columns of the candidate parts, the rule, one delete file and one delete manifest), and the time
of deciding in full over every live part (what a compaction's version costs). A script, not a
test: record the output in docs/benchmarks.md ("Iceberg mirror: delete files").
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

import benchjson
import pyarrow as pa

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "spark_apps")]

from lading_jobs.table import format as fmt  # noqa: E402
from lading_jobs.table import writer  # noqa: E402
from lading_jobs.table.iceberg import deletes  # noqa: E402
from lading_jobs.table.log.commits import TableLog  # noqa: E402
from lading_jobs.table.schema import TableSchema  # noqa: E402

SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string"), ("amount", "double"), ("at", "timestamp")])


def rows(keys: list[int], time_: int) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"value-{k}-{time_}" for k in keys],
                     "amount": pa.array([k * 0.5 for k in keys]),
                     "at": pa.array([1_700_000_000_000_000 + k for k in keys], pa.timestamp("us", tz="UTC")),
                     fmt.TIME_COLUMN: pa.array([time_] * len(keys), pa.int64())})


def build(uri: str, envelope: str, parts: int, n: int) -> None:
    tables = [rows(list(range(i * n, (i + 1) * n)), 1) for i in range(parts)]
    written = writer.write_parts(uri, tables, SCHEMA, write_id=fmt.new_write_id(), one_part_per_table=True)
    keys = ("k",) if envelope == "upsert" else ()
    writer.commit_parts(uri, written, create=writer.NewTable(SCHEMA, envelope, keys))


def commit(uri: str, keys: list[int], time_: int) -> float:
    written = writer.write_parts(uri, [rows(keys, time_)], SCHEMA, write_id=fmt.new_write_id())
    log = TableLog.open_existing(uri)
    start = time.perf_counter()
    writer.commit_parts(uri, written, log=log)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", type=int, default=200)
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--commits", type=int, default=15)
    ap.add_argument("--dir", default="/tmp/lading-bench-deletes")
    benchjson.add_argument(ap)
    args = ap.parse_args()
    base = Path(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    uris = {e: f"file://{base}/{e}/" for e in ("append", "upsert")}
    for envelope, uri in uris.items():
        build(uri, envelope, args.parts, args.rows)
    rnd = random.Random(7)
    times: dict[str, list[float]] = {e: [] for e in uris}
    for c in range(args.commits):
        target = rnd.randrange(args.parts) * args.rows
        keys = [target + rnd.randrange(args.rows) for _ in range(100)]
        for envelope, uri in uris.items():
            times[envelope].append(commit(uri, keys, c + 2))
    off, on = statistics.median(times["append"]), statistics.median(times["upsert"])
    print(f"{args.parts} parts x {args.rows} rows; {args.commits} commits of 100 updates of one part's keys")
    print(f"commit, append table (no delete file):   {off * 1000:8.1f} ms (median)")
    print(f"commit, upsert table (delete file):      {on * 1000:8.1f} ms (median)")
    print(f"the delete-file step:                    {(on - off) * 1000:8.1f} ms")
    snap = TableLog.open_existing(uris["upsert"]).snapshot()
    start = time.perf_counter()
    named = deletes.plan(TableLog.open_existing(uris["upsert"]).storage, snap, None)
    full = time.perf_counter() - start
    print(f"deciding in full over {len(snap.parts)} parts ({snap.rows} rows, {sum(len(v) for v in named.values())} "
          f"named): {full * 1000:.1f} ms")
    shutil.rmtree(base, ignore_errors=True)
    benchjson.write(args.json_out, __file__, {
        "parts": args.parts, "rows_per_part": args.rows, "commits": args.commits,
        "commit_append_ms": off * 1000, "commit_upsert_ms": on * 1000, "delete_file_step_ms": (on - off) * 1000,
        "decide_in_full": {"parts": len(snap.parts), "rows": snap.rows, "ms": full * 1000}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
