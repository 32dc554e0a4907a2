"""Unload benchmark: lading vs Spark's native writer vs DuckDB COPY TO, same data, same cores.

  python bench/unload.py [--rows 5000000] [--dir /tmp/lading-bench]

Generates the dataset once (ints, decimals, timestamps, strings with nulls) as
Parquet, then exports it to local files with: lading (run_job, Parquet and CSV),
Spark ``df.write.parquet`` / ``df.write.csv`` on the same local[2] session, and
DuckDB ``COPY ... TO`` (2 threads). Prints seconds, MB/s and ratios against
Spark native, and the peak RSS of Spark's Python workers during lading's
exports (from /proc VmHWM), with an export ≥ 20× bufferSize. A script, not a
test: numbers depend on the machine; record them in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT)]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

BUFFER = "8MB"


class WorkerRss:
    """Peak resident memory (VmHWM) of any pyspark Python worker seen while running."""

    def __init__(self) -> None:
        self.peak_kb = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> WorkerRss:
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()

    def _loop(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.1):
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or int(pid) == me:
                    continue
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                    if b"pyspark" not in cmd or b"java" in cmd.split(b"\0")[0]:
                        continue
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmHWM:"):
                            self.peak_kb = max(self.peak_kb, int(line.split()[1]))
                except OSError:
                    continue


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))


def generate(spark: Any, rows: int, src: Path) -> None:
    if (src / "_SUCCESS").exists():
        return
    spark.range(0, rows, 1, 8).selectExpr(
        "id",
        "CAST(id % 1000 AS INT) AS qty",
        "CAST((id * 7919) % 10000000 AS DECIMAL(12,2)) / 100 AS price",
        "TIMESTAMP '2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS created_at",
        "CASE WHEN id % 10 = 0 THEN NULL ELSE concat('customer-', CAST(id % 50000 AS STRING)) END AS customer",
        "CASE WHEN id % 7 = 0 THEN NULL ELSE sha2(CAST(id AS STRING), 224) END AS note",
    ).write.mode("overwrite").parquet(str(src))


def timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--dir", default="/tmp/lading-bench")
    args = p.parse_args()
    base = Path(args.dir)
    src = base / "source"
    base.mkdir(parents=True, exist_ok=True)

    import duckdb

    from lading_jobs.main import run_job
    from lading_jobs.session import build_session
    from lading_spec.job import JobDocument

    spark = build_session(master="local[2]", app_name="lading-bench",
                          conf={"spark.sql.files.maxPartitionBytes": str(32 * 1024 * 1024)})
    generate(spark, args.rows, src)
    df = spark.read.parquet(str(src))
    df.createOrReplaceTempView("bench_source")
    df.count()  # warm the file listing and the JVM
    src_bytes = du(src)
    print(f"source: {args.rows:,} rows, {src_bytes / 1e6:.0f} MB Parquet, {df.rdd.getNumPartitions()} partitions")

    def lading(fmt: str, out: Path) -> tuple[float, int]:
        shutil.rmtree(out, ignore_errors=True)
        doc = JobDocument(kind="CopyJob", namespace="bench", name="bench", uid="", generation=1,
                          run_id=f"bench-{fmt}-{time.time_ns()}", run_time=dt.datetime.now(dt.UTC),
                          spec={"from": {"query": "SELECT * FROM bench_source"},
                                "to": {"files": f"file://{out}/", "format": fmt, "bufferSize": BUFFER}})
        with WorkerRss() as rss:
            seconds = timed(lambda: run_job(spark, doc))
        return seconds, rss.peak_kb

    def spark_native(fmt: str, out: Path) -> float:
        shutil.rmtree(out, ignore_errors=True)
        writer = df.write.mode("overwrite")
        return timed(lambda: writer.parquet(str(out)) if fmt == "parquet" else writer.csv(str(out)))

    def duck(fmt: str, out: Path) -> float:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        con = duckdb.connect()
        con.execute("SET threads TO 2")
        target = out / ("out.parquet" if fmt == "parquet" else "out.csv")
        opts = "(FORMAT parquet, COMPRESSION snappy)" if fmt == "parquet" else "(FORMAT csv, HEADER false)"
        return timed(lambda: con.execute(f"COPY (SELECT * FROM read_parquet('{src}/*.parquet')) TO '{target}' {opts}"))

    rows = []
    for fmt in ("parquet", "csv"):
        spark_native(fmt, base / f"warm-{fmt}")  # one warm-up per format, not timed
        lading(fmt, base / f"warm-lading-{fmt}")
        s = spark_native(fmt, base / f"spark-{fmt}")
        s_bytes = du(base / f"spark-{fmt}")
        lt, peak = lading(fmt, base / f"lading-{fmt}")
        l_bytes = du(base / f"lading-{fmt}")
        d = duck(fmt, base / f"duckdb-{fmt}")
        d_bytes = du(base / f"duckdb-{fmt}")
        rows.append((fmt, s, s_bytes, lt, l_bytes, d, d_bytes, peak))
        for p_ in ("warm-" + fmt, "warm-lading-" + fmt):
            shutil.rmtree(base / p_, ignore_errors=True)

    print()
    print("| format | writer | seconds | output MB | rows/s | × Spark native |")
    print("|---|---|---|---|---|---|")
    for fmt, s, sb, lt, lb, d, db, _ in rows:
        for name, t, b in (("Spark native", s, sb), ("lading", lt, lb), ("DuckDB COPY TO", d, db)):
            print(f"| {fmt} | {name} | {t:.1f} | {b / 1e6:.0f} | {args.rows / t / 1e3:.0f} k | {s / t:.2f} |")
    print()
    for fmt, _, _, _, lb, _, _, peak in rows:
        print(f"peak Python worker RSS, lading {fmt}: {peak / 1024:.0f} MiB "
              f"(bufferSize {BUFFER}; output {lb / 1e6:.0f} MB = {lb / (8 * 1024 * 1024):.0f}× bufferSize)")
    spark.stop()


if __name__ == "__main__":
    main()
