"""Unload benchmark: lading vs Spark's native writer vs DuckDB COPY TO, same data, same cores.

  python bench/unload.py [--rows 5000000] [--repeat 5] [--warmup 3] [--formats parquet,csv] [--dir /tmp/lading-bench]
                        [--dataset classic|types]

Generates the dataset once as Parquet (``classic``, the default: ints, a decimal(12,2),
timestamps, strings with nulls; ``types``: whole and fractional doubles with NaN, ±inf
and -0.0, decimal(12,2) and decimal(38,10), timestamps, strings with quotes and line
breaks, NULLs in every column; see ``DATASETS``), then exports it to local files with: lading on the Spark SQL path
(``from.query``, run_job), lading on the Arrow-only path (``from.files`` over the
same Parquet files: a format conversion, issue 13), Spark ``df.write.parquet`` /
``df.write.csv`` on the same local[2] session, and DuckDB ``COPY ... TO`` (2
threads). After ``--warmup`` untimed rounds per format (the JVM's JIT compiler
is still busy after one: see "of which JIT" below), the four writers run
``--repeat`` times, interleaved (Spark, lading, lading Arrow, DuckDB, Spark, ...),
so a burst of load from elsewhere hits all of them alike.

Two measures, both as medians over the repeats, with ratios against the anchors
measured in the same run, Spark native and DuckDB (targets of the Arrow path on
CPU: Parquet ≥ 1.2× DuckDB, CSV ≥ 1.0× DuckDB, ≥ 2× Spark native for both);
beside them the ratio of the least CPU each writer took over its repeats
(noise from elsewhere only ever adds CPU, so the least is the steadiest figure):

* wall-clock seconds;
* CPU seconds of this process tree (the JVM, Spark's Python workers, DuckDB
  in-process), read from /proc: the work each writer does, which other jobs on a
  shared machine disturb much less than they disturb wall-clock time; beside
  it, the JVM's share and, of that, its JIT compiler threads' (from
  /proc/PID/task), which tells how near steady state a run was. The JVM is
  shared, and its compiler threads go on compiling what a writer made hot after
  that writer returned: each CPU reading waits until they are idle
  (``settle_jit``), so a writer's window, from settled to settled, holds the
  compiling it caused and none of the writer's before it (with a fixed order,
  the Spark writers' compiling used to land in the window of the writer after
  them: lading Arrow's, 0.1–0.3 CPU s of its 0.9 on the types data).

Last, one Arrow-only export per format in a new process (``--fresh``): a new JVM
and new Python workers, as every SparkApplication starts, with what starting
them cost; the medians above are warm figures, this is what one CopyJob pays.
Twice: with the JVM's default compilers, and with the first-tier compiler only
(``render.FIRST_TIER_JVM``), which the operator renders for this kind of CopyJob.

Then one more, untimed, lading export per format measures the peak RSS of Spark's
Python workers (VmHWM, reset first through /proc/PID/clear_refs), with an export
≥ 20× bufferSize. A script, not a test: numbers depend on the machine; record
them in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import benchjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT / "operator"), str(ROOT)]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

BUFFER = "8MB"
FORMATS = ("parquet", "csv", "csv.gz")
CLK = os.sysconf("SC_CLK_TCK")


def _descendants() -> list[int]:
    """This process and every process below it (the JVM, its Python daemon and workers)."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            parent[int(name)] = int(stat[stat.rfind(")") + 2:].split()[1])
    me, out = os.getpid(), []
    for pid in parent:
        p = pid
        while p and p != me:
            p = parent.get(p, 0)
        if p == me:
            out.append(pid)
    return out


def tree_cpu_seconds() -> float:
    """User + system CPU of the process tree, reaped children included.

    A process reaped while the tree is read (a reused Python worker leaving, with all the
    CPU it used in earlier runs) is counted twice or not at all: its own times, then its
    parent's children's times, may both or neither be read. A reading during which the
    tree's processes changed is therefore taken again."""
    total = 0
    for _ in range(50):
        pids = _descendants()
        total = 0
        for pid in pids:
            try:
                total += _cpu_ticks(Path(f"/proc/{pid}/stat").read_text(), children=True)
            except OSError:
                continue
        if _descendants() == pids:
            break
    return total / CLK


def _cpu_ticks(stat: str, children: bool) -> int:
    f = stat[stat.rfind(")") + 2:].split()
    return int(f[11]) + int(f[12]) + (int(f[13]) + int(f[14]) if children else 0)


def jvm_cpu_seconds() -> tuple[float, float]:
    """(CPU of the JVM, of which its JIT compiler threads): how far from steady state a run is.

    The bench's JVM keeps its compiler threads for its whole life
    (``-XX:-UseDynamicNumberOfCompilerThreads``), so no compiler thread's CPU leaves
    with an exited thread between two readings."""
    total = jit = 0
    for pid in _descendants():
        try:
            if b"java" not in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                continue
            total += _cpu_ticks(Path(f"/proc/{pid}/stat").read_text(), children=True)
            for task in Path(f"/proc/{pid}/task").iterdir():
                if (task / "comm").read_text().startswith(("C1 CompilerThre", "C2 CompilerThre")):
                    jit += _cpu_ticks((task / "stat").read_text(), children=False)
        except OSError:
            continue
    return total / CLK, jit / CLK


def _python_workers() -> list[int]:
    out = []
    for pid in _descendants():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"pyspark" in b" ".join(argv) and b"java" not in argv[0]:
            out.append(pid)
    return out


class WorkerRss:
    """Peak resident memory (VmHWM) of Spark's Python workers during the block."""

    def __init__(self) -> None:
        self.peak_kb = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> WorkerRss:
        for pid in _python_workers():  # workers are reused: forget the peaks of earlier runs
            with contextlib.suppress(OSError):
                Path(f"/proc/{pid}/clear_refs").write_text("5")
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()
        self._sample()

    def _sample(self) -> None:
        for pid in _python_workers():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            except OSError:
                continue

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._sample()


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))


DATASETS = {
    # ints, a decimal(12,2), timestamps, strings with NULLs: the figures of docs/benchmarks.md until issue 44
    "classic": [
        "id",
        "CAST(id % 1000 AS INT) AS qty",
        "CAST((id * 7919) % 10000000 AS DECIMAL(12,2)) / 100 AS price",
        "TIMESTAMP '2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS created_at",
        "CASE WHEN id % 10 = 0 THEN NULL ELSE concat('customer-', CAST(id % 50000 AS STRING)) END AS customer",
        "CASE WHEN id % 7 = 0 THEN NULL ELSE sha2(CAST(id AS STRING), 224) END AS note",
    ],
    # the column types users have (issue 44): whole and fractional doubles with NaN, ±inf and -0.0,
    # decimals of scale 2 and 10, timestamps, strings with quotes and line breaks; NULLs in every column
    "types": [
        "CASE WHEN id % 13 = 0 THEN NULL ELSE id END AS id",
        "CASE WHEN id % 11 = 0 THEN NULL WHEN id % 1000 = 1 THEN CAST('NaN' AS DOUBLE) "
        "WHEN id % 1000 = 2 THEN CAST('Infinity' AS DOUBLE) WHEN id % 1000 = 3 THEN CAST('-Infinity' AS DOUBLE) "
        "WHEN id % 1000 = 4 THEN CAST('-0.0' AS DOUBLE) ELSE CAST((id * 7919) % 200001 - 100000 AS DOUBLE) END AS amount",
        "CASE WHEN id % 12 = 0 THEN NULL ELSE CAST(id AS DOUBLE) / 7 END AS ratio",
        "CASE WHEN id % 9 = 0 THEN NULL ELSE CAST(CAST((id * 7919) % 10000000 - 5000000 AS DECIMAL(12,0)) / 100 "
        "AS DECIMAL(12,2)) END AS price",
        "CASE WHEN id % 8 = 0 THEN NULL ELSE CAST(CAST((id * 104729) % 1000000000000000 - 500000000000000 AS "
        "DECIMAL(38,0)) / 10000000000 AS DECIMAL(38,10)) END AS balance",
        "CASE WHEN id % 10 = 0 THEN NULL ELSE TIMESTAMP '2024-01-01 00:00:00' + "
        "make_interval(0, 0, 0, 0, 0, 0, id * 1.000003) END AS created_at",
        "CASE WHEN id % 7 = 0 THEN NULL WHEN id % 5 = 1 THEN concat('say \"hi\" to ', CAST(id AS STRING)) "
        "WHEN id % 5 = 2 THEN concat('line one\nline ', CAST(id AS STRING)) "
        "ELSE concat('customer-', CAST(id % 50000 AS STRING)) END AS note",
    ],
}


def generate(spark: Any, rows: int, src: Path, dataset: str = "classic") -> None:
    stamp = str(rows) if dataset == "classic" else f"{rows} {dataset}"
    if (src / "_SUCCESS").exists() and (src / "_ROWS").exists() and (src / "_ROWS").read_text() == stamp:
        return
    spark.range(0, rows, 1, 8).selectExpr(*DATASETS[dataset]).write.mode("overwrite").parquet(str(src))
    (src / "_ROWS").write_text(stamp)


@dataclasses.dataclass
class Run:
    """One measured call: wall seconds; CPU seconds of the process tree, of the JVM, of its JIT."""

    wall: float
    cpu: float
    jvm: float
    jit: float

    def line(self) -> str:
        return (f"{self.wall:.1f} s wall, {self.cpu:.1f} s CPU (JVM {self.jvm:.2f}, of which JIT compiling "
                f"{self.jit:.2f})")


SETTLE_WINDOW = 0.3   # seconds: the JIT is idle when its threads took at most one clock tick in this long
SETTLE_LIMIT = 20.0   # seconds: give up waiting (a JVM that keeps compiling is reported by its JIT share)


def settle_jit() -> float:
    """Wait until the JVM's compiler threads are idle (at most one tick of CPU in a
    ``SETTLE_WINDOW``), at most ``SETTLE_LIMIT`` seconds; the seconds waited."""
    started = time.monotonic()
    _, last = jvm_cpu_seconds()
    while time.monotonic() - started < SETTLE_LIMIT:
        time.sleep(SETTLE_WINDOW)
        _, now = jvm_cpu_seconds()
        if now - last <= 1.5 / CLK:
            break
        last = now
    return time.monotonic() - started


def measured(fn: Callable[[], Any]) -> Run:
    """Wall seconds of one call; CPU seconds (the process tree's, and the JVM's) from a JVM
    whose compiler threads are idle to the same again after the call (``settle_jit``)."""
    settle_jit()
    (jvm, jit), cpu, t = jvm_cpu_seconds(), tree_cpu_seconds(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    settle_jit()
    cpu = tree_cpu_seconds() - cpu
    jvm_after, jit_after = jvm_cpu_seconds()
    return Run(wall, cpu, jvm_after - jvm, jit_after - jit)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed rounds of the three Spark writers per format, before the timed ones")
    p.add_argument("--dir", default="/tmp/lading-bench")
    p.add_argument("--dataset", choices=sorted(DATASETS), default="classic",
                   help="classic: ints, a decimal(12,2), timestamps, strings; types: doubles (NaN, ±inf, -0.0), "
                        "decimal(12,2) and decimal(38,10), timestamps, strings with quotes and line breaks, "
                        "NULLs in every column")
    p.add_argument("--formats", default="parquet,csv",
                   help=f"comma-separated, of {', '.join(FORMATS)} (csv.gz: CSV in gzip members)")
    p.add_argument("--fresh", choices=FORMATS, help=argparse.SUPPRESS)  # one export in a new JVM
    p.add_argument("--java", default="", help=argparse.SUPPRESS)  # the new JVM's further options (--fresh)
    benchjson.add_argument(p)
    args = p.parse_args()
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats or any(f not in FORMATS for f in formats):
        p.error(f"--formats: {args.formats!r}; each one of {', '.join(FORMATS)}")
    base = Path(args.dir)
    src = base / ("source" if args.dataset == "classic" else f"source-{args.dataset}")
    base.mkdir(parents=True, exist_ok=True)

    import duckdb

    from lading_jobs.main import run_job
    from lading_jobs.session import build_session
    from lading_jobs.unload import arrowpath
    from lading_spec.job import JobDocument

    spark = build_session(master="local[2]", app_name="lading-bench", kind="CopyJob",
                          conf={"spark.sql.files.maxPartitionBytes": str(32 * 1024 * 1024),
                                "spark.driver.extraJavaOptions": " ".join(
                                    ["-XX:-UseDynamicNumberOfCompilerThreads", args.java]).strip()})
    started_cpu = tree_cpu_seconds()  # this interpreter, the JVM, the SparkContext
    if not args.fresh:
        generate(spark, args.rows, src, args.dataset)
        df = spark.read.parquet(str(src))
        df.createOrReplaceTempView("bench_source")
        df.count()  # warm the file listing and the JVM
        print(f"source ({args.dataset}): {args.rows:,} rows, {du(src) / 1e6:.0f} MB Parquet, {df.rdd.getNumPartitions()} partitions; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)

    def lading(fmt: str, out: Path, path: str = arrowpath.SPARK) -> None:
        shutil.rmtree(out, ignore_errors=True)
        files = {"files": f"file://{src}/", "format": "parquet"}
        # a tenant's query reads only the views its from.inputs name (lading_jobs.sandbox)
        source = ({"query": "SELECT * FROM bench_source", "inputs": [{"name": "bench_source", **files}]}
                  if path == arrowpath.SPARK else files)
        doc = JobDocument(kind="CopyJob", namespace="bench", name="bench", uid="", generation=1,
                          run_id=f"bench-{fmt}-{time.time_ns()}", run_time=dt.datetime.now(dt.UTC),
                          spec={"from": source,
                                "to": {"files": f"file://{out}/", "format": fmt.split(".")[0], "bufferSize": BUFFER,
                                       **({"options": {"compression": "gzip"}} if fmt.endswith(".gz") else {})}})
        spark.conf.set(arrowpath.CONF, path)  # the path is forced: a silent fallback would skew the figures
        try:
            result = run_job(spark, doc)
        finally:
            spark.conf.unset(arrowpath.CONF)
        if result.get("rows") != args.rows:
            raise SystemExit(f"lading {fmt} export failed: {result}")

    def lading_arrow(fmt: str, out: Path) -> None:
        lading(fmt, out, arrowpath.ARROW)

    def spark_native(fmt: str, out: Path) -> None:
        shutil.rmtree(out, ignore_errors=True)
        writer = df.write.mode("overwrite")
        if fmt == "parquet":
            writer.parquet(str(out))
        else:
            writer.csv(str(out), compression="gzip" if fmt.endswith(".gz") else None)

    def duck(fmt: str, out: Path) -> None:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        con = duckdb.connect()
        con.execute("SET threads TO 2")
        target = out / f"out.{fmt}"
        opts = ("(FORMAT parquet, COMPRESSION snappy)" if fmt == "parquet" else
                f"(FORMAT csv, HEADER false{', COMPRESSION gzip' if fmt.endswith('.gz') else ''})")
        con.execute(f"COPY (SELECT * FROM read_parquet('{src}/*.parquet')) TO '{target}' {opts}")
        con.close()

    if args.fresh:  # what one SparkApplication pays: a new JVM, new Python workers, one export
        run = measured(functools.partial(lading_arrow, args.fresh, base / f"fresh-{args.fresh}"))
        shutil.rmtree(base / f"fresh-{args.fresh}", ignore_errors=True)
        print("FRESH " + json.dumps({"started": started_cpu, **dataclasses.asdict(run)}), flush=True)
        spark.stop()
        return

    writers: list[tuple[str, Callable[[str, Path], None]]] = [
        ("Spark native", spark_native), ("lading", lading), ("lading Arrow", lading_arrow),
        ("DuckDB COPY TO", duck)]
    table: list[tuple[str, str, Run, int, list[float]]] = []
    peaks: dict[str, tuple[int, int]] = {}
    for fmt in formats:
        # Untimed rounds until the JVM has compiled what these jobs run: its JIT compiler otherwise
        # lands on whichever writer runs while it catches up. The first round's figures are what a
        # fresh JVM pays (every SparkApplication starts one); they are printed, not ranked.
        for warm in range(args.warmup):
            for name, fn in writers[:3]:
                run = measured(functools.partial(fn, fmt, base / f"warm-{fmt}"))
                print(f"  {fmt} {name} warm-up {warm + 1}: {run.line()}", flush=True)
        shutil.rmtree(base / f"warm-{fmt}", ignore_errors=True)
        runs: dict[str, list[Run]] = {n: [] for n, _ in writers}
        for rep in range(args.repeat):
            for name, fn in writers:
                out = base / f"{name.replace(' ', '-').lower()}-{fmt}"
                run = measured(functools.partial(fn, fmt, out))
                runs[name].append(run)
                print(f"  {fmt} {name} run {rep + 1}: {run.line()}, load {os.getloadavg()[0]:.1f}", flush=True)
        for name, _ in writers:
            out = base / f"{name.replace(' ', '-').lower()}-{fmt}"
            rs = runs[name]
            median = Run(*(statistics.median(getattr(r, k) for r in rs) for k in ("wall", "cpu", "jvm", "jit")))
            table.append((fmt, name, median, du(out), [r.cpu for r in rs]))
        for name, fn in writers[1:3]:
            with WorkerRss() as rss:
                fn(fmt, base / f"rss-{fmt}")
            peaks[f"{name} {fmt}"] = (rss.peak_kb, du(base / f"rss-{fmt}"))
            shutil.rmtree(base / f"rss-{fmt}", ignore_errors=True)

    print()
    print(f"medians of {args.repeat} interleaved runs; load average at the end {os.getloadavg()[0]:.1f}")
    print("| format | writer | wall s | CPU s | of which JVM (JIT) | output MB | rows/s (wall) "
          "| × Spark native (wall) | × Spark native (CPU) | × DuckDB (wall) | × DuckDB (CPU) "
          "| × DuckDB (least CPU) | CPU s of each run |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    spark_anchor = {fmt: m for fmt, name, m, _, _ in table if name == "Spark native"}
    duck_anchor = {fmt: m for fmt, name, m, _, _ in table if name == "DuckDB COPY TO"}
    duck_least = {fmt: min(cpus) for fmt, name, _, _, cpus in table if name == "DuckDB COPY TO"}
    for fmt, name, m, b, cpus in table:
        s, d = spark_anchor[fmt], duck_anchor[fmt]
        print(f"| {fmt} | {name} | {m.wall:.1f} | {m.cpu:.1f} | {m.jvm:.2f} ({m.jit:.2f}) | {b / 1e6:.0f} "
              f"| {args.rows / m.wall / 1e3:.0f} k | {s.wall / m.wall:.2f} | {s.cpu / m.cpu:.2f} "
              f"| {d.wall / m.wall:.2f} | {d.cpu / m.cpu:.2f} | {duck_least[fmt] / min(cpus):.2f} "
              f"| {', '.join(f'{c:.1f}' for c in cpus)} |")
    print()
    steady = {fmt: m for fmt, name, m, _, _ in table if name == "lading Arrow"}
    from lading_operator.render import FIRST_TIER_JVM

    for fmt in formats:  # after the table: nothing else runs meanwhile
        for jvm, java in (("default compilers", ""), (f"{FIRST_TIER_JVM}, as the operator renders it", FIRST_TIER_JVM)):
            fresh = fresh_export(fmt, args, java)
            print(f"lading Arrow {fmt} in a fresh JVM (one SparkApplication; {jvm}): starting Python, the JVM and "
                  f"Spark {fresh['started']:.1f} CPU-s, then the export {fresh['cpu']:.1f} CPU-s (JVM "
                  f"{fresh['jvm']:.2f}, of which JIT {fresh['jit']:.2f}; {fresh['wall']:.1f} s wall) against "
                  f"{steady[fmt].cpu:.1f} CPU-s warm; DuckDB {duck_anchor[fmt].cpu:.1f}", flush=True)
    print()
    for what, (peak, out_bytes) in peaks.items():
        print(f"peak Python worker RSS, {what}: {peak / 1024:.0f} MiB "
              f"(bufferSize {BUFFER}; output {out_bytes / 1e6:.0f} MB = {out_bytes / (8 * 1024 * 1024):.0f}× bufferSize)")
    benchjson.write(args.json_out, __file__, figures(args, table, peaks),
                    "" if formats == ["parquet", "csv"] else "+".join(formats))
    spark.stop()


def figures(args: argparse.Namespace, table: list[tuple[str, str, Run, int, list[float]]],
            peaks: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """The printed table as JSON (bench/benchjson.py): medians per format and writer, ratios to both anchors."""
    spark = {fmt: m for fmt, name, m, _, _ in table if name == "Spark native"}
    duck = {fmt: (m, min(cpus)) for fmt, name, m, _, cpus in table if name == "DuckDB COPY TO"}
    return {"rows": args.rows, "repeat": args.repeat, "warmup": args.warmup, "writers": [
        {"format": fmt, "writer": name, "wall_s": m.wall, "cpu_s": m.cpu, "jvm_cpu_s": m.jvm, "jit_cpu_s": m.jit,
         "output_mb": b / 1e6, "cpu_s_each": cpus,
         "x_spark_native_wall": spark[fmt].wall / m.wall, "x_spark_native_cpu": spark[fmt].cpu / m.cpu,
         "x_duckdb_wall": duck[fmt][0].wall / m.wall, "x_duckdb_cpu": duck[fmt][0].cpu / m.cpu,
         "x_duckdb_least_cpu": duck[fmt][1] / min(cpus)}
        for fmt, name, m, b, cpus in table],
        "peak_worker_rss_mib": {what: peak / 1024 for what, (peak, _) in peaks.items()}}


def fresh_export(fmt: str, args: argparse.Namespace, java: str) -> dict[str, float]:
    """One Arrow-only export in a new process (new JVM with ``java`` options, new Python workers): its figures."""
    out = subprocess.run([sys.executable, __file__, "--fresh", fmt, "--rows", str(args.rows), "--dir", args.dir,
                          "--dataset", args.dataset,
                          f"--java={java}"], capture_output=True, text=True, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("FRESH "))
    return json.loads(line.removeprefix("FRESH "))  # type: ignore[no-any-return]


if __name__ == "__main__":
    main()
