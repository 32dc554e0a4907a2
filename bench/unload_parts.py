"""Where the Spark SQL path's CPU goes: its input's crossings, part by part, per column.

  python bench/unload_parts.py [--rows 2000000] [--repeat 3] [--dataset classic|types] [--dir /tmp/lading-bench]

The Spark SQL path of an unload (``from.query`` over ``from.inputs``) reads its input
with the ``lading-files`` Python data source (pyarrow decodes in a Python worker, the
JVM turns the Arrow batches into rows), runs the query, and hands the rows back to
Python as Arrow batches (``mapInArrow``) where the task writes files. Spark's own
writer reads Parquet in the JVM and never crosses. This script times the crossings
alone, with no file written, on bench/unload.py's source (same ``--dir``/``--dataset``):

* ``native > noop``: Spark's Parquet reader into the ``noop`` sink (the JVM reading rows);
* ``lading-files > noop``: the Python data source into ``noop`` (decode in Python, Arrow to rows);
* ``native > mapInArrow``, ``lading-files > mapInArrow``: the same rows handed to a Python
  function that only counts them (rows back to Arrow, the Python side receiving them);
* ``lading-files - COLUMN > mapInArrow``: with one column left out of the rows (Spark
  reads it but never converts it): the difference to the whole is that column's share.

CPU seconds of the JVM and of the Python processes (workers, planners) per part, medians
over ``--repeat`` passes after one untimed pass; read from /proc as bench/unload.py does.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import benchjson
import unload  # the source datasets, /proc readings, sys.path and Spark's environment


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds of the process tree by kind: the JVM, Python processes, this driver."""
    out = {"jvm": 0.0, "python": 0.0, "driver": 0.0}
    me = os.getpid()
    for pid in unload._descendants():
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            ticks = unload._cpu_ticks(Path(f"/proc/{pid}/stat").read_text(), children=True)
        except OSError:
            continue
        kind = "driver" if pid == me else "jvm" if b"java" in argv0 else "python"
        out[kind] += ticks / unload.CLK
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", default="/tmp/lading-bench")
    p.add_argument("--dataset", choices=sorted(unload.DATASETS), default="classic")
    benchjson.add_argument(p)
    args = p.parse_args()
    base = Path(args.dir)
    src = base / ("source" if args.dataset == "classic" else f"source-{args.dataset}")
    base.mkdir(parents=True, exist_ok=True)

    import pyarrow as pa

    from lading_jobs.session import build_session
    from lading_jobs.sources import files as sources_files
    from lading_spec.formats import FileSet, ParquetOptions

    spark = build_session(master="local[2]", app_name="lading-bench-parts", kind="CopyJob",
                          conf={"spark.sql.files.maxPartitionBytes": str(32 * 1024 * 1024)})
    unload.generate(spark, args.rows, src, args.dataset)
    native = spark.read.parquet(str(src))
    fileset = FileSet(uri=f"file://{src}/", format="parquet", options=ParquetOptions())

    def lading() -> Any:
        return sources_files.read_fileset(spark, fileset)

    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        n = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_arrays([pa.array([n], pa.int64())], names=["n"])

    def to_python(make: Callable[[], Any], drop: str | None = None) -> Callable[[], None]:
        def run() -> None:
            df = make()
            (df.drop(drop) if drop else df).mapInArrow(count, "n long").collect()
        return run

    parts: dict[str, Callable[[], None]] = {
        "native > noop": lambda: native.write.format("noop").mode("overwrite").save(),
        "lading-files > noop": lambda: lading().write.format("noop").mode("overwrite").save(),
        "native > mapInArrow": to_python(lambda: native),
        "lading-files > mapInArrow": to_python(lading),
    }
    for field in native.schema.fields:
        parts[f"lading-files - {field.name} ({field.dataType.simpleString()}) > mapInArrow"] = \
            to_python(lading, field.name)
    for fn in parts.values():  # untimed: the JVM compiles, the workers start
        fn()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in parts}
    for rep in range(args.repeat):
        for name, fn in parts.items():
            before = cpu_by_kind()
            fn()
            after = cpu_by_kind()
            runs[name].append({k: after[k] - before[k] for k in after})
            print(f"  {name} run {rep + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in runs[name][-1].items())
                  + f", load {os.getloadavg()[0]:.1f}", flush=True)
    whole = statistics.median(sum(r.values()) for r in runs["lading-files > mapInArrow"])
    print()
    print(f"{args.rows:,} rows ({args.dataset}); medians of {args.repeat}; load average at the end "
          f"{os.getloadavg()[0]:.1f}")
    print("| part | JVM CPU s | Python CPU s | total CPU s | × lading-files > mapInArrow |")
    print("|---|---|---|---|---|")
    figures = {}
    for name, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("jvm", "python", "driver")}
        total = statistics.median(sum(r.values()) for r in rs)
        figures[name] = {"jvm_cpu_s": med["jvm"], "python_cpu_s": med["python"], "cpu_s": total}
        print(f"| {name} | {med['jvm']:.2f} | {med['python']:.2f} | {total:.2f} | {total / whole:.2f} |")
    benchjson.write(args.json_out, __file__, {"rows": args.rows, "dataset": args.dataset, "repeat": args.repeat,
                                              "parts": figures})
    spark.stop()


if __name__ == "__main__":
    main()
