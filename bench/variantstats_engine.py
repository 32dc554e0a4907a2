"""Variant statistics in documents per second, beside the JSON statistics of the same documents.

  python bench/variantstats_engine.py [--docs 100000] [--rounds 3]

The documents of bench/jsonstats_engines.py's *plain* and *ragged* columns, as a ``json`` column
(their text) and as a ``variant`` column (Spark's ``parse_json`` of the same text, local[1]; the
Spark run is not timed): ``variantstats.summarize`` (DuckDB decoding Spark's variant binary)
beside ``jsonengine.summarize`` (the writer's JSON statistics). Best of ``--rounds``, alternating.
A script, not a test: record the output in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import benchjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT / "tests"), str(ROOT), str(ROOT / "bench")]

import pyarrow as pa  # noqa: E402
from jsonstats_engines import plain, ragged  # noqa: E402

from lading_jobs.table.stats import jsonengine, variantstats  # noqa: E402


def as_variants(spark: Any, texts: pa.Array) -> pa.Array:
    """Spark's ``parse_json`` of each text: the Arrow column a lading writer receives."""
    df = spark.createDataFrame(pa.table({"i": pa.array(range(len(texts)), pa.int64()), "t": texts}))
    batches = df.selectExpr("i", "parse_json(t) AS v").orderBy("i")._collect_as_arrow()
    return pa.Table.from_batches(batches).column("v").combine_chunks()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    benchjson.add_argument(parser)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from lading_jobs.session import build_session

    spark = build_session(master="local[1]", app_name="bench-variantstats")
    try:
        columns = [(label, texts, as_variants(spark, texts))
                   for label, texts in (("plain", plain(args.docs)), ("ragged", ragged(args.docs)))]
    finally:
        spark.stop()
    results: list[dict[str, Any]] = []  # for the JSON (bench/benchjson.py)
    for label, texts, variants in columns:
        found = variantstats.summarize(variants)
        assert found is not None and found["docs"] == args.docs, found
        engines: list[tuple[str, Callable[[], Any]]] = [
            ("variantstats.summarize", lambda v=variants: variantstats.summarize(v)),
            ("jsonengine.summarize", lambda t=texts: jsonengine.summarize(t))]
        best: dict[str, float] = {}
        for _ in range(args.rounds):
            for name, fn in engines:
                start = time.perf_counter()
                fn()
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
        for name, seconds in best.items():
            print(f"{label:7s} {name:24s} {seconds:6.2f} s {args.docs / seconds:12,.0f} docs/s")
            results.append({"column": label, "engine": name, "seconds": seconds, "docs_per_s": args.docs / seconds})
    benchjson.write(args.json_out, __file__, {"docs": args.docs, "rounds": args.rounds, "engines": results})


if __name__ == "__main__":
    main()
