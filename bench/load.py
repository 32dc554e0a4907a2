"""Load benchmark: lading's COPY INTO a table vs Spark's native read + local Parquet write.

  python bench/load.py [--rows 2000000] [--files 8] [--dir /tmp/lading-bench-load]

Generates the same rows (ints, decimals, timestamps, strings with NULLs) as CSV
(with a header) and as Parquet, ``--files`` files each, on local disk. Then, on
one local[2] Spark session:

* lading: ``run_load`` from the CSV files and from the Parquet files into a new
  lading table (file://), with the column types declared (casts checked row by
  row, rejects found, statistics computed, one commit);
* anchors: ``spark.read.csv(schema=...)`` and ``spark.read.parquet`` followed by
  ``df.write.parquet`` to local disk, the same data, the same cores.

Prints seconds, input MB/s, rows/s and the ratio lading ÷ Spark (throughput; > 1
means lading is faster). A script, not a test: numbers depend on the machine;
record them in docs/benchmarks.md ("Loads").
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT)]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "region", "type": "string"},
          {"name": "customer", "type": "string"}, {"name": "total", "type": "decimal(12,2)"},
          {"name": "created_at", "type": "timestamp"}, {"name": "note", "type": "string"}]
SPARK_DDL = ("id BIGINT, region STRING, customer STRING, total DECIMAL(12,2), created_at TIMESTAMP, "
             "note STRING")


def generate(root: Path, rows: int, files: int) -> tuple[Path, Path]:
    """The dataset as CSV and as Parquet, ``files`` files each."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    csv_dir, pq_dir = root / "csv", root / "parquet"
    for d in (csv_dir, pq_dir):
        d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    per = -(-rows // files)
    regions = pa.array(["eu", "us", "apac", None])
    for i in range(files):
        ids = np.arange(i * per, min(rows, (i + 1) * per), dtype=np.int64)
        n = len(ids)
        cents = rng.integers(-500, 2_000_000, n)
        table = pa.table({
            "id": ids,
            "region": regions.take(pa.array(rng.integers(0, 4, n))),
            "customer": pc.binary_join_element_wise("customer-", pa.array(rng.integers(0, 50_000, n)).cast(pa.string()), ""),
            "total": pa.array(cents / 100.0).cast(pa.decimal128(12, 2)),
            "created_at": pa.array(np.datetime64("2026-01-01T00:00:00", "us")
                                   + (ids * 37_000_000).astype("timedelta64[us]"), pa.timestamp("us", tz="UTC")),
            "note": pc.if_else(pa.array(ids % 5 != 0),
                               pc.binary_join_element_wise("note ", pa.array(ids).cast(pa.string()), ""),
                               pa.scalar(None, pa.string())),
        })
        pq.write_table(table, pq_dir / f"part-{i:03d}.parquet")
        csv_table = table.set_column(4, "created_at", table.column("created_at").cast(pa.timestamp("us")))
        pacsv.write_csv(csv_table, csv_dir / f"part-{i:03d}.csv",
                        pacsv.WriteOptions(include_header=True, quoting_style="needed"))
    return csv_dir, pq_dir


def size_mb(d: Path) -> float:
    return sum(f.stat().st_size for f in d.iterdir()) / 1e6


def timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--dir", default="/tmp/lading-bench-load")
    args = p.parse_args()
    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    csv_dir, pq_dir = generate(root, args.rows, args.files)

    from lading_jobs.load.job import run_load
    from lading_jobs.session import build_session
    from lading_spec.job import JobDocument

    spark = build_session(master="local[2]", app_name="lading-bench-load")
    spark.range(1000).mapInArrow(lambda it: it, "id bigint").count()  # start the Python workers

    def lading(fmt: str, src: Path, n: int) -> float:
        spec = {"from": {"files": f"file://{src}/", "format": fmt,
                         **({"options": {"header": True}} if fmt == "csv" else {})},
                "to": {"table": f"file://{root}/table-{fmt}-{n}/", "schema": SCHEMA}}
        doc = JobDocument("CopyJob", "bench", "load", "uid", 1, f"bench-{fmt}-{n}", dt.datetime.now(dt.UTC), spec)
        seconds, result = timed(lambda: run_load(spark, doc))
        assert result.get("rows") == args.rows, result
        return seconds

    def native(fmt: str, src: Path, n: int) -> float:
        out = str(root / f"native-{fmt}-{n}")

        def go() -> None:
            reader = spark.read.schema(SPARK_DDL)
            df = reader.option("header", "true").csv(str(src)) if fmt == "csv" else reader.parquet(str(src))
            df.write.mode("overwrite").parquet(out)

        return timed(go)[0]

    print(f"{args.rows:,} rows in {args.files} files; CSV {size_mb(csv_dir):.0f} MB, "
          f"Parquet {size_mb(pq_dir):.0f} MB; local[2]")
    print(f"{'input':8} {'lading s':>9} {'spark s':>8} {'lading MB/s':>11} {'spark MB/s':>10} "
          f"{'lading rows/s':>13} {'ratio':>6}")
    for fmt, src in (("csv", csv_dir), ("parquet", pq_dir)):
        best_l = min(lading(fmt, src, n) for n in range(2))
        best_n = min(native(fmt, src, n) for n in range(2))
        mb = size_mb(src)
        print(f"{fmt:8} {best_l:9.2f} {best_n:8.2f} {mb / best_l:11.1f} {mb / best_n:10.1f} "
              f"{args.rows / best_l:13,.0f} {best_n / best_l:6.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
