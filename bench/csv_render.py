"""CSV renderer micro-benchmark: CPU ms per million values of each column type.

  python bench/csv_render.py [--values 1000000] [--repeat 5]

Encodes one-column batches (``lading_jobs.formats.csv.CsvEncoder``, the Arrow-only
path's CSV encoder: value text, quoting, lines) of each type of ``bench/unload.py
--dataset types``, with a NULL in every 10th row, and prints the least CPU time
(``time.process_time``) over the repeats: noise from other processes only ever adds
CPU. To compare two revisions on a loaded machine, run this alternately against each
(``PYTHONPATH=<checkout>/spark_apps``) and compare CPU, not wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):
    sys.path[:0] = [str(ROOT / "spark_apps")]

import benchjson  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402


def columns(n: int) -> dict[str, pa.Array]:
    """One column per rendered type, NULL in every 10th row."""
    i = np.arange(n, dtype=np.int64)
    null = i % 10 == 0
    whole = (i * 7919 % 200_001 - 100_000).astype(np.float64)
    special = np.array([np.nan, np.inf, -np.inf, -0.0])
    whole_special = np.where(i % 1000 < 4, special[i % 4], whole)
    unscaled2 = i * 7919 % 10_000_000 - 5_000_000
    unscaled10 = (i * 104_729 % 10**15 - 5 * 10**14) * 997
    ts = np.datetime64("2024-01-01T00:00:00", "us") + i * 1_000_003
    strings = np.where(i % 3 == 0, "say \"hi\" " + i.astype(str), np.where(i % 3 == 1, "line one\nline " + i.astype(str),
                                                                         "customer-" + (i % 50_000).astype(str)))
    return {
        "double whole": pa.array(whole, mask=null),
        "double whole + NaN/inf/-0.0": pa.array(whole_special, mask=null),
        "double fractional": pa.array(i / 7.0, mask=null),
        "double price": pa.array(unscaled2 / 100.0, mask=null),
        "decimal(12,2)": pa.array(unscaled2, mask=null).cast(pa.decimal128(19, 0)).view(pa.decimal128(12, 2)),
        "decimal(38,10)": pa.array(unscaled10, mask=null).cast(pa.decimal128(38, 0)).view(pa.decimal128(38, 10)),
        "timestamp": pa.array(ts, mask=null),
        "string (quotes, newlines)": pa.array(strings, mask=null),
        "bigint": pa.array(i * 7919, mask=null),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--values", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--only", default="", help="|-separated column names (default: all)")
    benchjson.add_argument(p)
    args = p.parse_args()
    from lading_jobs.formats.csv import CsvEncoder

    print(f"load average {os.getloadavg()[0]:.1f}; {args.values:,} values per column, least CPU of {args.repeat}")
    figures: dict[str, float] = {}
    for name, arr in columns(args.values).items():
        if args.only and name not in args.only.split("|"):
            continue
        batch = pa.RecordBatch.from_arrays([arr], names=["c"])
        encoder = CsvEncoder(batch.schema)
        best = float("inf")
        for _ in range(args.repeat):
            t = time.process_time()
            encoder.encode_buffer(batch)
            best = min(best, time.process_time() - t)
        figures[name] = best * 1e3 * 1_000_000 / args.values
        print(f"{name:28s} {figures[name]:7.1f} CPU ms per million", flush=True)
    benchjson.write(args.json_out, __file__, {"values": args.values, "repeat": args.repeat,
                                              "cpu_ms_per_million": figures})


if __name__ == "__main__":
    main()
