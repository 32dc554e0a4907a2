"""Where one bin-pack run's wall time goes outside the groups' rewriting.

  python bench/compaction_outside.py --source DIR [--dir /tmp/lading-bench-outside] [--repeat 1]
                                     [--target 256MB]

``--source`` is a small-part lading table (e.g. ``bench/compaction.py``'s ``lading-small``
under its ``--dir``); each pass copies it afresh and runs one bin-pack ``Compaction`` of it
(engine ``compact``, the benchmark's spec) on one local[2] Spark session, timing from the
driver: opening the log, planning, the Spark stage (from the driver: submitted → collected;
per task: when its body started and ended after the submission, its rewrite, the part's
close, the bytes handed to the file system and the pickled plan each task unpickles), the
commit (completing the outputs: their ``fsync`` and the rest; the log's commit) and what
follows (the Iceberg mirror's pointer). A script, not a test: it patches the driver's and
the tasks' functions with timers and changes nothing they do.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import benchjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT)]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

SPENT: dict[str, float] = defaultdict(float)


def timer(name: str, fn: Any, spent: dict[str, float] = SPENT) -> Any:
    """``fn``, adding the seconds each call takes to ``spent[name]`` (the driver's ``SPENT`` by default)."""
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - t

    return timed


def traced_body(body: Any) -> Any:
    """A stage's task body that also reports, in its JSON line, its start and end (epoch
    seconds) and the seconds its writer spent closing parts and writing bytes."""

    def run(index: int, storage: Any) -> str:
        import resource

        from lading_jobs import storage as st
        from lading_jobs.compact import parts

        started = time.time()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        spent: dict[str, float] = defaultdict(float)

        def patch(owner: Any, name: str, label: str) -> Any:
            original = getattr(owner, name)
            setattr(owner, name, timer(label, original, spent))
            return original

        undo = [(parts.CeilingPartWriter, "_close", patch(parts.CeilingPartWriter, "_close", "close")),
                (st.LocalStorage, "upload_part", patch(st.LocalStorage, "upload_part", "upload_part"))]
        try:
            line = body(index, storage)
        finally:
            for owner, name, original in undo:
                setattr(owner, name, original)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        out = json.loads(line)
        out["trace"] = {"start": started, "end": time.time(), "pid": os.getpid(), "user": r1.ru_utime - r0.ru_utime,
                        "system": r1.ru_stime - r0.ru_stime, "faults": r1.ru_minflt - r0.ru_minflt, **spent}
        return json.dumps(out)

    return run


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True, help="a small-part lading table directory")
    p.add_argument("--dir", default="/tmp/lading-bench-outside")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--target", default="256MB")
    benchjson.add_argument(p)
    args = p.parse_args()

    from pyspark import cloudpickle

    from lading_jobs import storage as st
    from lading_jobs.compact import commit as landing
    from lading_jobs.compact import engine
    from lading_jobs.compact import plan as planner
    from lading_jobs.compact import task as compact_task
    from lading_jobs.engine import RunContext
    from lading_jobs.session import build_session
    from lading_jobs.table.iceberg import mirror
    from lading_jobs.table.log.commits import TableLog
    from lading_spec.compaction import parse_compaction

    spark = build_session(master="local[2]", app_name="lading-bench-outside", kind="Compaction")
    spark.sparkContext.parallelize(range(1000), 2).mapPartitions(lambda it: it).count()  # start the Python workers (the RDD route)

    # the driver's steps, timed where they are called from
    TableLog.open_existing = timer("open log", TableLog.open_existing)  # type: ignore[method-assign]
    TableLog.snapshot = timer("snapshot", TableLog.snapshot)  # type: ignore[method-assign]
    planner.plan = timer("plan", planner.plan)
    landing.land = timer("commit: land (all)", landing.land)
    st.LocalStorage.complete_upload = timer("commit: complete uploads",  # type: ignore[method-assign]
                                            st.LocalStorage.complete_upload)
    TableLog.commit = timer("commit: log commit", TableLog.commit)  # type: ignore[method-assign]
    mirror.current_metadata = timer("after: mirror pointer", mirror.current_metadata)
    real_fsync = os.fsync
    os.fsync = timer("fsync (driver, all)", real_fsync)

    tasks: list[dict[str, Any]] = []
    stage_times: list[tuple[float, float]] = []
    plan_bytes: list[int] = []

    def runner_for(ctx: Any) -> Any:
        run = engine._spark_runner(spark, ctx)

        def traced(stage: Any) -> list[str]:
            plan_bytes.append(len(cloudpickle.dumps(stage.body)))
            wrapped = compact_task.Stage(stage.plan, stage.name, stage.count, traced_body(stage.body),
                                         stage.writes_parts)
            t0 = time.time()
            lines = run(wrapped)
            stage_times.append((t0, time.time()))
            for line in lines:
                d = json.loads(line)
                tasks.append({"group": d["group"], "seconds": d["seconds"], **d["trace"]})
            return lines

        return traced

    root = Path(args.dir)
    passes: list[dict[str, Any]] = []  # for the JSON (bench/benchjson.py)
    for n in range(args.repeat):
        SPENT.clear()
        tasks.clear()
        stage_times.clear()
        plan_bytes.clear()
        dst = root / "lading-packed"
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(args.source, dst)
        os.sync()  # the copy's dirty pages are not this run's
        uri = f"file://{dst}/"
        spec = parse_compaction({"table": uri, "targetFileSize": args.target, "since": {"version": 0}})
        load = os.getloadavg()[0]
        ctx = RunContext()
        t0 = time.perf_counter()
        totals = engine.compact(spark, spec, ctx, runner=runner_for(ctx))
        total = time.perf_counter() - t0
        (s0, s1), = stage_times
        print(f"pass {n + 1}: {total:.2f} s, {totals.parts_before} → {totals.parts_after} parts, load {load:.2f}")
        for name in sorted(SPENT):
            print(f"  {name:28} {SPENT[name]:6.2f} s")
        print(f"  {'Spark stage (driver)':28} {s1 - s0:6.2f} s; plan pickled {plan_bytes[0] / 1e3:.0f} kB")
        for t in sorted(tasks, key=lambda t: t["start"]):
            print(f"    group {t['group']} pid {t['pid']}: body {t['start'] - s0:5.2f} → {t['end'] - s0:5.2f} s "
                  f"(rewrite {t['seconds']:.2f}, closing parts {t.get('close', 0):.2f}, "
                  f"bytes to the file system {t.get('upload_part', 0):.2f}; CPU {t['user']:.2f} user "
                  f"{t['system']:.2f} system, {t['faults']:,} page faults)")
        last = max(t["end"] for t in tasks)
        print(f"    stage end after the last body: {s1 - last:5.2f} s")
        print(f"  {'outside the stage':28} {total - (s1 - s0):6.2f} s")
        passes.append({"seconds": total, "load": load, "parts_before": totals.parts_before,
                       "parts_after": totals.parts_after, "spark_stage_s": s1 - s0,
                       "outside_stage_s": total - (s1 - s0), "steps_s": dict(SPENT), "plan_bytes": plan_bytes[0],
                       "tasks": sorted(({**t, "start": t["start"] - s0, "end": t["end"] - s0} for t in tasks),
                                       key=lambda t: t["start"])})
    benchjson.write(args.json_out, __file__, {"target": args.target, "passes": passes})
    spark.stop()


if __name__ == "__main__":
    main()
