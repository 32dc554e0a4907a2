"""Compaction benchmark: lading's Compaction vs delta-rs OPTIMIZE vs Spark rewriting the parts itself.

  python bench/compaction.py [--parts 2000] [--rows-per-part 12500] [--target 256MB] [--repeat 3]
                            [--dir /tmp/lading-bench-compact] [--only binpack|sorted] [--no-spark] [--reuse]

Writes one lading table of ``--parts`` small parts (random 64-bit columns, so ~1 GB at the
defaults: 25 M rows), on local disk, and the same rows as a Delta table of as many files
(``deltalake``, one append per part). Then, on one local[2] Spark session and the same
machine:

* bin-pack to ``--target`` parts: lading ``Compaction`` (engine ``compact``, no sortBy);
  delta-rs ``optimize.compact(target_size)``; Spark ``read.parquet(parts).coalesce(n)
  .write.parquet`` (zstd) of the same part files;
* sorted by ``k``: lading with ``sortBy: [k]``; delta-rs ``optimize.z_order(["k"])``; Spark
  ``repartitionByRange(n, k).sortWithinPartitions(k)`` then write;
* a filtered read (``k`` in a 1 % range) of the lading table before and after the sorted
  compaction: parts fetched (statistics skipping) and seconds (pure-Arrow ``reader.scan``).

Each timed step starts from a fresh copy of the small-part table. The three rewrites of
each kind run ``--repeat`` times, interleaved (lading, Spark, delta-rs, lading, ...), so a
burst of load from elsewhere hits all of them alike. Prints each run's seconds and the
ratios of the medians, lading ÷ Spark and lading ÷ delta-rs, as throughput (> 1: lading is
faster; targets ≥ 1.0 and ≥ 0.5). Needs ``deltalake`` (in requirements.lock). A script, not a test:
record the output in docs/benchmarks.md ("Compaction").

``--only binpack`` or ``--only sorted`` runs one kind of rewrite (the filtered read after a
sorted compaction needs ``sorted``); ``--no-spark`` leaves out the Spark anchor (most of a
run's time), and ``--reuse`` keeps the small-part tables an earlier run built in ``--dir``
(same ``--parts`` and ``--rows-per-part``; building the Delta table takes about two
minutes), so three runs of lading against delta-rs take a few minutes each.

Before timing, the Python workers are started and import the modules lading's compaction
tasks import (``import_task_modules``), through the route the compaction's stages take (an
RDD stage, ``parallelize(...).mapPartitions``, as engine ``_spark_runner``), as delta-rs is
imported before its timings: the first lading task would otherwise pay that import (0.4-0.6 s
idle, seconds under load) in the first pass only. The run prints that cold start on its own line (the warm-up stage
with the imports, then the same stage again); a SparkApplication on a cluster is a fresh
process and pays it once per run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import benchjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT)]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

K_RANGE = 1_000_000_000


def timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def import_task_modules(batches: Any) -> Any:
    """A warm-up stage's function: imports what a compaction task imports (a worker's first task
    would otherwise), then passes its batches through."""
    import pyarrow.parquet  # noqa: F401

    from lading_jobs.compact import rangesort, task  # noqa: F401

    yield from batches


def dir_mb(d: Path, suffix: str = ".parquet") -> float:
    return sum(f.stat().st_size for f in d.rglob(f"*{suffix}")) / 1e6


def part_tables(parts: int, rows: int):  # type: ignore[no-untyped-def]
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(3)
    regions = pa.array(["eu", "us", "apac", "latam"])
    for i in range(parts):
        yield pa.table({
            "id": pa.array(np.arange(i * rows, (i + 1) * rows, dtype=np.int64)),
            "k": pa.array(rng.integers(0, K_RANGE, rows)),
            "a": pa.array(rng.integers(-2**62, 2**62, rows)),
            "b": pa.array(rng.integers(-2**62, 2**62, rows)),
            "amount": pa.array(rng.random(rows) * 1000),
            "region": regions.take(pa.array(rng.integers(0, 4, rows))),
        })


def build_lading(uri: str, parts: int, rows: int) -> None:
    from lading_jobs.table import format as fmt
    from lading_jobs.table import writer
    from lading_jobs.table.log.commits import TableLog
    from lading_jobs.table.schema import TableSchema

    schema = TableSchema.of([("id", "bigint"), ("k", "bigint"), ("a", "bigint"), ("b", "bigint"),
                             ("amount", "double"), ("region", "string")])
    log = TableLog.create(uri, schema, "append")
    batch: list[Any] = []
    for n, t in enumerate(part_tables(parts, rows)):
        batch.append(t)
        if len(batch) == 100 or n == parts - 1:  # 100 parts per commit, as a busy stream would
            written = writer.write_parts(uri, batch, schema, write_id=fmt.new_write_id(), logical_time=n,
                                         one_part_per_table=True)
            writer.commit_parts(uri, written, log=log)
            batch = []


def build_delta(path: Path, parts: int, rows: int) -> None:
    from deltalake import WriterProperties, write_deltalake

    props = WriterProperties(compression="ZSTD")
    for t in part_tables(parts, rows):
        write_deltalake(str(path), t, mode="append", writer_properties=props)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--parts", type=int, default=2000)
    p.add_argument("--rows-per-part", type=int, default=12_500)
    p.add_argument("--target", default="256MB")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", default="/tmp/lading-bench-compact")
    p.add_argument("--only", choices=("binpack", "sorted"), help="run one kind of rewrite (default: both)")
    p.add_argument("--no-spark", action="store_true", help="leave out the Spark anchor (Spark's own rewrite)")
    p.add_argument("--reuse", action="store_true", help="keep the small-part tables an earlier run built in --dir")
    benchjson.add_argument(p)
    args = p.parse_args()
    root = Path(args.dir)
    built = root / "built.json"  # the small-part tables of an earlier run, for --reuse
    shape = json.dumps({"parts": args.parts, "rowsPerPart": args.rows_per_part})
    reuse = args.reuse and built.exists() and built.read_text() == shape
    if not reuse:
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)

    from deltalake import DeltaTable, WriterProperties

    from lading_jobs.compact.engine import compact
    from lading_jobs.engine import RunContext
    from lading_jobs.session import build_session
    from lading_jobs.table import reader
    from lading_jobs.table.filters import expr as ex
    from lading_jobs.table.log.commits import TableLog
    from lading_spec.compaction import parse_compaction
    from lading_spec.sizes import parse_size

    target = parse_size(args.target, "--target")
    small = root / "lading-small"
    delta_small = root / "delta-small"
    t = td = 0.0
    if not reuse:
        t, _ = timed(lambda: build_lading(f"file://{small}/", args.parts, args.rows_per_part))
        td, _ = timed(lambda: build_delta(delta_small, args.parts, args.rows_per_part))
        built.write_text(shape)
    total_rows = args.parts * args.rows_per_part
    mb = dir_mb(small / "data")
    print(f"{args.parts} parts, {total_rows:,} rows, {mb:.0f} MB lading parts ({dir_mb(delta_small):.0f} MB Delta "
          f"files); {'reused' if reuse else f'built in {t:.0f} s / {td:.0f} s'}; target {args.target}; local[2]")

    spark = build_session(master="local[2]", app_name="lading-bench-compaction", kind="Compaction")
    sc = spark.sparkContext
    sc.parallelize(range(1000), 2).mapPartitions(lambda it: it).count()  # start the Python workers

    def warm() -> float:  # both workers (local[2]): one task each, the compaction stages' RDD route
        return timed(lambda: sc.parallelize(range(2), 2).mapPartitions(import_task_modules).count())[0]

    cold, again = warm(), warm()
    print(f"workers' cold start, not in the timings below: importing lading's task modules {cold:.2f} s, "
          f"the same stage again {again:.2f} s")
    part_files = sorted(str(f) for f in (small / "data").rglob("*.parquet"))
    outputs = max(1, round(mb * 1e6 / target))

    def fresh(name: str) -> str:
        dst = root / name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(small, dst)
        return f"file://{dst}/"

    def fresh_delta(name: str) -> DeltaTable:
        dst = root / name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(delta_small, dst)
        return DeltaTable(str(dst))

    def lading(sort: bool) -> tuple[float, Any]:
        uri = fresh("lading-sorted" if sort else "lading-packed")
        spec = parse_compaction({"table": uri, "targetFileSize": args.target, "since": {"version": 0},
                                 "sortBy": ["k"] if sort else []})
        seconds, totals = timed(lambda: compact(spark, spec, RunContext()))
        assert totals.rows_written == total_rows, totals
        return seconds, (totals, uri)

    def delta(sort: bool) -> tuple[float, Any]:
        dt = fresh_delta("delta-sorted" if sort else "delta-packed")
        props = WriterProperties(compression="ZSTD")
        if sort:
            return timed(lambda: dt.optimize.z_order(["k"], target_size=target, writer_properties=props))
        return timed(lambda: dt.optimize.compact(target_size=target, writer_properties=props))

    def native(sort: bool) -> float:
        out = str(root / ("spark-sorted" if sort else "spark-packed"))

        def go() -> None:
            df = spark.read.parquet(*part_files)
            df = df.repartitionByRange(outputs, "k").sortWithinPartitions("k") if sort else df.coalesce(outputs)
            df.write.mode("overwrite").option("compression", "zstd").parquet(out)

        return timed(go)[0]

    print(f"{'rewrite':8} {'lading s':>9} {'spark s':>8} {'delta-rs s':>10} {'parts':>11} {'÷spark':>7} "
          f"{'÷delta-rs':>9}   (medians of {args.repeat} interleaved runs)")
    results = {}
    runs: dict[str, list[str]] = {}
    kept: dict[str, tuple[dict[str, list[float]], int, int]] = {}  # for the JSON (bench/benchjson.py)
    read_figures: list[dict[str, Any]] = []
    kinds = {"binpack": (False,), "sorted": (True,)}.get(args.only or "", (False, True))
    for sort in kinds:
        name = "sorted" if sort else "bin-pack"
        times: dict[str, list[float]] = {"lading": [], "spark": [], "delta-rs": []}
        for _ in range(args.repeat):
            ls, (totals, uri) = lading(sort)
            times["lading"].append(ls)
            if not args.no_spark:
                times["spark"].append(native(sort))
            times["delta-rs"].append(delta(sort)[0])
        results[name] = uri
        kept[name] = (times, totals.parts_before, totals.parts_after)
        ls, ds = statistics.median(times["lading"]), statistics.median(times["delta-rs"])
        ns = statistics.median(times["spark"]) if times["spark"] else float("nan")
        runs[name] = [f"{k} " + ", ".join(f"{t:.2f}" for t in v) for k, v in times.items() if v]
        print(f"{name:8} {ls:9.2f} {ns:8.2f} {ds:10.2f} {totals.parts_before:>5} → {totals.parts_after:<3} "
              f"{ns / ls:7.2f} {ds / ls:9.2f}")
    for name, lines in runs.items():
        print(f"  {name} seconds of each run: " + "; ".join(lines))

    # a filtered read: 1 % of k, before (small parts) and after the sorted compaction
    lo = K_RANGE // 2
    predicate = ex.And(ex.Pred("ge", "k", lo), ex.Pred("lt", "k", lo + K_RANGE // 100))
    reads = [("before", f"file://{small}/")] + ([("after", results["sorted"])] if "sorted" in results else [])
    for label, uri in reads:
        snap = TableLog.open_existing(uri).snapshot()
        fetched = reader.plan_scan(snap, ex.bind(predicate, snap.schema))
        seconds, out = timed(lambda u=uri: reader.scan(u, predicate=predicate))
        print(f"filtered read {label:6}: {len(fetched)} of {len(snap.parts)} parts fetched, "
              f"{sum(p.size for p in fetched) / 1e6:.0f} MB, {out.num_rows:,} rows, {seconds:.2f} s")
        read_figures.append({"read": label, "parts_fetched": len(fetched), "parts": len(snap.parts),
                             "mb_fetched": sum(p.size for p in fetched) / 1e6, "rows": out.num_rows,
                             "seconds": seconds})
    benchjson.write(args.json_out, __file__, figures(args, mb, cold, kept, read_figures), args.only or "")
    spark.stop()


def figures(args: argparse.Namespace, mb: float, cold: float,
            kept: dict[str, tuple[dict[str, list[float]], int, int]],
            reads: list[dict[str, Any]]) -> dict[str, Any]:
    """The printed figures as JSON (bench/benchjson.py): each rewrite's seconds per engine and pass, medians, ratios."""
    rewrites = []
    for name, (times, before, after) in kept.items():
        med = {k: statistics.median(v) for k, v in times.items() if v}
        rewrites.append({"rewrite": name, "seconds_each": {k: v for k, v in times.items() if v},
                         "lading_s": med["lading"], "spark_s": med.get("spark"), "delta_rs_s": med["delta-rs"],
                         "parts_before": before, "parts_after": after,
                         "x_spark": med["spark"] / med["lading"] if "spark" in med else None,
                         "x_delta_rs": med["delta-rs"] / med["lading"]})
    return {"parts": args.parts, "rows": args.parts * args.rows_per_part, "mb": mb, "target": args.target,
            "repeat": args.repeat, "cold_start_s": cold, "rewrites": rewrites, "filtered_read": reads}


if __name__ == "__main__":
    main()
