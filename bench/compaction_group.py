"""One compaction group in-process: the CPU seconds lading and delta-rs spend on the same parts.

  python bench/compaction_group.py [--parts 500] [--rows-per-part 12500] [--dir /tmp/lading-bench-group]
                                   [--engine lading|delta-rs] [--check] [--sorted [--groups 2]] [--profile N]

The first ``--parts`` parts of ``bench/compaction.py``'s data (the same generator: one
of its four bin-pack groups at the defaults), as a lading table and as a Delta table
(built once under ``--dir`` and reused). ``--engine lading`` rewrites them as one
group with ``compact.task.rewrite_group`` (what one Spark task of a bin-pack runs;
jemalloc, as Compaction's workers use) and discards the pending outputs; ``--engine
delta-rs`` runs ``optimize.compact`` over a fresh copy of the Delta files with one
concurrent task and the benchmark's writer properties. Prints one line: CPU seconds
(user + system, all threads of this process), of which system, and wall seconds.

The machine is shared, so wall seconds say little: compare CPU seconds, in
alternating processes (A, B, A, B, ...), e.g. two checkouts' copies of this script.
``--check`` (lading only) also reads the outputs back and compares them with the
input rows, order included (not timed).

``--sorted`` times a sorted rewrite by ``k`` instead: lading splits the parts into
``--groups`` groups and runs both stages of ``compact.rangesort`` (each group sorted and
staged, then each key range merged and written as parts) in this process, one task after
another, as local[1] would; delta-rs runs ``optimize.z_order(["k"])`` with one concurrent
task. ``--profile N`` (lading) prints the N functions with the most own time (cProfile).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import benchjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")  # lading_jobs.session: Compaction's pool


def cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_stime


def build(root: Path, parts: int, rows: int, delta_too: bool) -> None:
    import compaction as bench

    lading = root / "lading"
    if not lading.exists():
        bench.build_lading(f"file://{lading}/", parts, rows)
    delta = root / "delta"
    if delta_too and not delta.exists():
        bench.build_delta(delta, parts, rows)


def run_lading_sorted(root: Path, groups: int, check: bool, profile: int) -> tuple[float, float, float]:
    """One sorted rewrite by ``k`` of the parts split into ``groups`` groups (both stages of
    ``rangesort``, in-process); its CPU seconds, of which system, and wall seconds."""
    from dataclasses import replace

    from lading_jobs import storage as st
    from lading_jobs import workerheap
    from lading_jobs.compact import plan as planner
    from lading_jobs.compact import rangesort, task
    from lading_jobs.table.log.commits import TableLog

    uri = f"file://{root / 'lading'}/"
    storage = st.open_storage(uri)
    snap = TableLog.open_existing(uri, storage).snapshot()
    parts = list(snap.parts)
    per = -(-len(parts) // groups)
    chosen = tuple(planner.Group(tuple(parts[i:i + per])) for i in range(0, len(parts), per))
    write_id = planner.WRITE_ID_PREFIX + "bench" + str(os.getpid())
    plan = task.RewritePlan(replace(snap, parts=(), ledger={}, source_progress={}, removed={}), chosen, 0, ("k",),
                            write_id, 256 * 1024**2, st.S3Settings.from_env())
    assert rangesort.applies(plan)
    workerheap.settle()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
    c0, s0 = cpu()
    t0 = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    try:
        outcome = rangesort.run(plan, task.in_process(storage), storage)
    except BaseException:
        rangesort.discard_staging(uri, write_id, storage)
        raise
    if profiler is not None:
        profiler.disable()
    wall = time.perf_counter() - t0
    c1, s1 = cpu()
    if profiler is not None:
        import pstats

        pstats.Stats(profiler).sort_stats("tottime").print_stats(profile)
    _check_and_drop(storage, snap, parts, outcome, uri, write_id, check, sort_key="k")
    return c1 - c0, s1 - s0, wall


def run_lading(root: Path, check: bool) -> tuple[float, float, float]:
    """One rewrite of the group; its CPU seconds, of which system, and wall seconds."""

    from lading_jobs import storage as st
    from lading_jobs import workerheap
    from lading_jobs.compact import plan as planner
    from lading_jobs.compact import task
    from lading_jobs.table.log.commits import TableLog

    uri = f"file://{root / 'lading'}/"
    storage = st.open_storage(uri)
    snap = TableLog.open_existing(uri, storage).snapshot()
    target = 1 << 40  # every part in one group
    group = planner.Group(tuple(snap.parts))
    write_id = planner.WRITE_ID_PREFIX + "bench" + str(os.getpid())
    from dataclasses import replace

    plan = task.RewritePlan(replace(snap, parts=(), ledger={}, source_progress={}, removed={}), (group,), 0, (),
                            write_id, min(target, 256 * 1024**2), st.S3Settings.from_env())
    workerheap.settle()  # as every Spark task body does (stage_body)
    c0, s0 = cpu()
    t0 = time.perf_counter()
    outcome = task.rewrite_group(plan, 0, storage)
    wall = time.perf_counter() - t0
    c1, s1 = cpu()
    _check_and_drop(storage, snap, snap.parts, outcome, uri, write_id, check, sort_key=None)
    return c1 - c0, s1 - s0, wall


def _read_pending(storage, snap, written):  # type: ignore[no-untyped-def]
    """A pending file:// output's rows (its temporary file, before any commit)."""
    import pyarrow.parquet as pq

    from lading_jobs.table.schema import conform

    return conform(pq.read_table(written.upload["upload_id"]), snap.schema)  # file://: the staging file


def run_delta(root: Path, target: int, sort: bool = False) -> tuple[float, float, float]:
    from deltalake import DeltaTable, WriterProperties

    copy = root / "delta-run"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root / "delta", copy)
    dt = DeltaTable(str(copy))
    props = WriterProperties(compression="ZSTD")
    c0, s0 = cpu()
    t0 = time.perf_counter()
    if sort:
        dt.optimize.z_order(["k"], target_size=target, writer_properties=props, max_concurrent_tasks=1)
    else:
        dt.optimize.compact(target_size=target, writer_properties=props, max_concurrent_tasks=1)
    wall = time.perf_counter() - t0
    c1, s1 = cpu()
    shutil.rmtree(copy, ignore_errors=True)
    return c1 - c0, s1 - s0, wall



def _check_and_drop(storage: Any, snap: Any, parts: Any, outcome: Any, uri: str, write_id: str, check: bool,
                    sort_key: str | None) -> None:
    """With ``check``: the rewritten rows are the input's (sorted stably by ``sort_key``: ties keep
    part order, as both range-sort stages do), in order. Then the pending outputs are dropped."""
    import pyarrow as pa

    from lading_jobs.table import reader
    from lading_jobs.table import writer as table_writer

    try:
        if check:
            expected = pa.concat_tables([reader.read_part(storage, snap, p, order=False) for p in parts])
            if sort_key is not None:
                expected = expected.sort_by(sort_key)
            got = pa.concat_tables([_read_pending(storage, snap, w) for w in outcome.written])
            assert got.num_rows == expected.num_rows == outcome.rows_out, (got.num_rows, expected.num_rows)
            assert got.equals(expected.select(got.column_names)), "the rewritten rows differ from the input's"
            how = f"sorted by {sort_key}" if sort_key else "as they were"
            print(f"check: {got.num_rows:,} rows in {len(outcome.written)} part(s), the input's {how}, in order")
    finally:
        table_writer.abort_parts(uri, outcome.written, [write_id], storage=storage)

def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--parts", type=int, default=500)
    p.add_argument("--rows-per-part", type=int, default=12_500)
    p.add_argument("--dir", default="/tmp/lading-bench-group")
    p.add_argument("--engine", choices=("lading", "delta-rs"), default="lading")
    p.add_argument("--check", action="store_true")
    p.add_argument("--repeat", type=int, default=1, help="rewrites in this process (each reported)")
    p.add_argument("--sorted", action="store_true", help="a sorted rewrite by k (rangesort; delta-rs z_order)")
    p.add_argument("--groups", type=int, default=2, help="--sorted: groups the parts are split into")
    p.add_argument("--profile", type=int, default=0, help="--sorted, lading: print the top N functions")
    benchjson.add_argument(p)
    args = p.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    build(root, args.parts, args.rows_per_part, args.engine == "delta-rs")
    rewrites: list[dict[str, float]] = []  # for the JSON (bench/benchjson.py)
    for _ in range(args.repeat):
        if args.engine == "lading" and args.sorted:
            total, system, wall = run_lading_sorted(root, args.groups, args.check, args.profile)
        elif args.engine == "lading":
            total, system, wall = run_lading(root, args.check)
        else:
            total, system, wall = run_delta(root, 256 * 1024**2, args.sorted)
        print(f"{args.engine} {ROOT.name}: {total:.2f} CPU-s ({system:.2f} system), {wall:.2f} s wall, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        rewrites.append({"cpu_s": total, "system_s": system, "wall_s": wall, "load": os.getloadavg()[0]})
    benchjson.write(args.json_out, __file__, {"engine": args.engine, "rewrite": "sorted" if args.sorted else "bin-pack",
                                          "parts": args.parts, "rows": args.parts * args.rows_per_part,
                                          "groups": args.groups if args.sorted else 1, "rewrites": rewrites},
                    f"{args.engine}-sorted" if args.sorted else "" if args.engine == "lading" else args.engine)


if __name__ == "__main__":
    main()
