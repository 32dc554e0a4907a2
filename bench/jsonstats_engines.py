"""JSON statistics engines in documents per second: the per-document reference beside the writer's.

  python bench/jsonstats_engines.py [--docs 200000] [--rounds 3]

Times, over the same synthetic ``json`` column (bench/table_skipping.py --json's documents:
``device``, ``n``, ``tags.site``, ``tags.ok``) and over a column every document of which differs
in shape (keys missing or ``null``, an array of objects, a pretty-printed document: the general
path), three ways of computing a row group's JSON statistics after checking they agree:

- the reference: one document at a time with Python's ``json`` (``tests/support/jsonstats_oracle``,
  the writer's code until issue 32's vectorised statistics);
- ``jsonengine.summarize``: the writer's (``table.stats.jsonengine``: pyarrow's JSON reader, DuckDB for
  what it cannot tell);
- ``jsonengine.general_stats``: the DuckDB path alone (what a column pyarrow refuses takes).

Best of ``--rounds``, alternating. A script, not a test: record the output in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import benchjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT / "tests"), str(ROOT)]

import pyarrow as pa  # noqa: E402
from support.jsonstats_oracle import reference_summarize  # noqa: E402

from lading_jobs.table.stats import jsonengine  # noqa: E402


def plain(n: int) -> pa.Array:
    return pa.array([json.dumps({"device": f"dev-{i % 100:03d}-{i % 5}", "n": i,
                                 "tags": {"site": f"s{i % 7}", "ok": True}}) for i in range(n)], pa.string())


def ragged(n: int) -> pa.Array:
    def doc(i: int) -> str:
        d: dict[str, Any] = {"device": f"dev-{i % 100:03d}", "n": i if i % 3 else i + 0.5}
        if i % 4:
            d["tags"] = {"site": f"s{i % 7}", "ok": None if i % 5 == 0 else True}
        if i % 6 == 0:
            d["items"] = [{"sku": i % 13}]
        return json.dumps(d, indent=1 if i % 50 == 0 else None)
    return pa.array([doc(i) for i in range(n)], pa.string())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    benchjson.add_argument(parser)
    args = parser.parse_args()
    engines: list[tuple[str, Callable[[pa.Array], Any]]] = [
        ("reference (Python json per document)", reference_summarize),
        ("jsonengine.summarize", jsonengine.summarize),
        ("jsonengine.general_stats (DuckDB)", jsonengine.general_stats)]
    results: list[dict[str, Any]] = []  # for the JSON (bench/benchjson.py)
    for label, column in (("plain", plain(args.docs)), ("ragged", ragged(args.docs))):
        expected = reference_summarize(column)
        assert jsonengine.summarize(column) == expected and jsonengine.general_stats(column) == expected
        best: dict[str, float] = {}
        for _ in range(args.rounds):
            for name, fn in engines:
                start = time.perf_counter()
                fn(column)
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
        for name, seconds in best.items():
            print(f"{label:7s} {name:38s} {seconds:6.2f} s {args.docs / seconds:12,.0f} docs/s")
            results.append({"column": label, "engine": name, "seconds": seconds, "docs_per_s": args.docs / seconds})
    benchjson.write(args.json_out, __file__, {"docs": args.docs, "rounds": args.rounds, "engines": results})


if __name__ == "__main__":
    main()
