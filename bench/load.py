"""Load benchmark: lading's COPY INTO a table vs Spark's native read + local Parquet write.

  python bench/load.py [--rows 2000000] [--files 8] [--ledger 100000] [--ledger-scale 1000000]
                       [--only-ledger-scale] [--dir /tmp/lading-bench-load]

Generates the same rows (ints, decimals, timestamps, strings with NULLs) as CSV
(with a header) and as Parquet, ``--files`` files each, on local disk. Then, on
one local[2] Spark session:

* lading: ``run_load`` from the CSV files and from the Parquet files into a new
  lading table (file://), with the column types declared (casts checked row by
  row, rejects found, statistics computed, one commit);
* anchors: ``spark.read.csv(schema=...)`` and ``spark.read.parquet`` followed by
  ``df.write.parquet`` to local disk, the same data, the same cores.

Prints seconds, input MB/s, rows/s and the ratio lading ÷ Spark (throughput; > 1
means lading is faster).

Then the transform case (``--no-transform`` skips it): the CSV files loaded with a
``transform`` (casts, an ``upper``, a product, a WHERE dropping a tenth of the rows)
against its anchor, ``spark.read.csv`` (strings, as the transform sees them) running
the same SELECT and writing Parquet.

Then the ledger case (``--ledger N``, 0 to skip): N one-line CSV files that the
table's ledger already lists (one commit of N entries), and

* a rerun over them (every file skipped by the ledger: list, check, manifest)
  against its anchor, listing the same N files through lading's storage layer;
* loading the ``--files`` CSV files into a table whose ledger holds the N entries
  against loading them into a fresh table.

Then the ledger at scale (``--ledger-scale N``, 0 to skip; ``--only-ledger-scale`` runs it
alone, without Spark): a table whose ledger holds N files, its log built through the
product's own commit and checkpoint (one load commit of N entries, then empty commits up
to checkpoint 10; no N real loads). It prints the checkpoint's size, the time to open
the table (``TableLog.open_existing`` + ``snapshot``, median of five), and what a load of
100 new files does with the ledger: its lookups (``split_loaded``) and its commit (the
"loaded concurrently" check), bytes of ledger read and seconds; then the same at a commit
that writes a checkpoint (the shards it changes and a new index, bytes written).

A script, not a test: numbers depend on the machine; record them in
docs/benchmarks.md ("Loads").
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

import benchjson

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
    p.add_argument("--ledger", type=int, default=100_000, help="ledger entries for the ledger case (0: skip it)")
    p.add_argument("--ledger-scale", type=int, default=1_000_000,
                   help="ledger entries for the ledger-at-scale case (0: skip it)")
    p.add_argument("--only-ledger-scale", action="store_true", help="run only the ledger-at-scale case (no Spark)")
    p.add_argument("--dir", default="/tmp/lading-bench-load")
    p.add_argument("--no-transform", action="store_true", help="skip the transform case")
    benchjson.add_argument(p)
    args = p.parse_args()
    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    FIGURES.update(rows=args.rows, files=args.files)
    if args.only_ledger_scale:
        ledger_scale_case(root, args.ledger_scale)
        benchjson.write(args.json_out, __file__, FIGURES, "ledger-scale")
        return
    csv_dir, pq_dir = generate(root, args.rows, args.files)

    from lading_jobs.load.job import run_load
    from lading_jobs.session import build_session
    from lading_spec.job import JobDocument

    spark = build_session(master="local[2]", app_name="lading-bench-load", kind="CopyJob")
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
        FIGURES["loads"].append(load_row(fmt, best_l, best_n, mb, args.rows))
    if not args.no_transform:
        transform_case(spark, root, csv_dir, args.rows)
    if args.ledger:
        ledger_case(spark, root, csv_dir, args.ledger)
    spark.stop()
    if args.ledger_scale:
        ledger_scale_case(root, args.ledger_scale)
    benchjson.write(args.json_out, __file__, FIGURES)


FIGURES: dict[str, Any] = {"loads": []}  # what the run printed, for the JSON (bench/benchjson.py)


def load_row(case: str, lading_s: float, spark_s: float, mb: float, rows: int) -> dict[str, Any]:
    """One printed row of the loads' table, for the JSON."""
    return {"input": case, "lading_s": lading_s, "spark_s": spark_s, "lading_mb_per_s": mb / lading_s,
            "spark_mb_per_s": mb / spark_s, "lading_rows_per_s": rows / lading_s, "ratio": spark_s / lading_s}


TRANSFORM_ITEMS = ("id::bigint", "upper(region)", "customer", "total::decimal(12,2) * 2", "to_timestamp(created_at)",
                   "note")
TRANSFORM_WHERE = "id::bigint % 10 <> 0"


def transform_case(spark: Any, root: Path, csv_dir: Path, rows: int) -> None:
    """A load with a transform vs Spark reading the CSV and running the same SELECT."""
    from lading_jobs.load.job import run_load
    from lading_spec.job import JobDocument

    select = f"SELECT {', '.join(TRANSFORM_ITEMS)} FROM source WHERE {TRANSFORM_WHERE}"
    schema = [dict(c, type="decimal(14,2)") if c["name"] == "total" else c for c in SCHEMA]
    kept = rows - -(-rows // 10)

    def lading(n: int) -> float:
        spec = {"from": {"files": f"file://{csv_dir}/", "format": "csv", "options": {"header": True}},
                "to": {"table": f"file://{root}/table-transform-{n}/", "schema": schema},
                "transform": {"select": select}}
        doc = JobDocument("CopyJob", "bench", "load", "uid", 1, f"bench-transform-{n}", dt.datetime.now(dt.UTC), spec)
        seconds, result = timed(lambda: run_load(spark, doc))
        assert result.get("rows") == kept and result.get("rowsFiltered") == rows - kept, result
        return seconds

    def native(n: int) -> float:
        def go() -> None:
            spark.read.option("header", "true").csv(str(csv_dir)).createOrReplaceTempView("source")
            spark.sql(select).write.mode("overwrite").parquet(str(root / f"native-transform-{n}"))

        return timed(go)[0]

    best_l = min(lading(n) for n in range(2))
    best_n = min(native(n) for n in range(2))
    mb = size_mb(csv_dir)
    print(f"{'csv+sql':8} {best_l:9.2f} {best_n:8.2f} {mb / best_l:11.1f} {mb / best_n:10.1f} "
          f"{rows / best_l:13,.0f} {best_n / best_l:6.2f}")
    FIGURES["loads"].append(load_row("csv+sql", best_l, best_n, mb, rows))


def ledger_case(spark: Any, root: Path, csv_dir: Path, entries: int) -> None:
    """A ledger of ``entries`` files: a rerun that skips them all, and a load beside them."""
    from lading_jobs import storage as st
    from lading_jobs.load.job import run_load
    from lading_jobs.table.log.commits import Change, LedgerEntry, TableLog
    from lading_jobs.table.schema import TableSchema
    from lading_spec.job import JobDocument

    small = root / "ledger-files"
    for i in range(entries):
        d = small / f"{i // 1000:04d}"
        if i % 1000 == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:06d}.csv").write_bytes(b"1,eu,c,1.00,2026-01-01 00:00:00,n\n")
    storage = st.LocalStorage()
    listed = list(storage.list_objects(f"file://{small}/"))
    schema = TableSchema.of([(c["name"], c["type"], c.get("nullable", True)) for c in SCHEMA])

    def table_with_ledger(name: str) -> str:
        uri = f"file://{root}/{name}/"
        log = TableLog.create(uri, schema, storage=storage)
        log.commit(Change(operation="load", ledger={o.uri: LedgerEntry(o.etag, o.size, 1) for o in listed}))
        return uri

    def load(src: Path, table: str, n: int, header: bool) -> tuple[float, Any]:
        spec = {"from": {"files": f"file://{src}/", "format": "csv", "options": {"header": header}},
                "to": {"table": table, "schema": SCHEMA}}
        doc = JobDocument("CopyJob", "bench", "load", "uid", 1, f"bench-ledger-{n}", dt.datetime.now(dt.UTC), spec)
        return timed(lambda: run_load(spark, doc))

    full = table_with_ledger("ledger-table")
    rerun, result = load(small, full, 0, False)
    assert result.get("filesAlreadyLoaded") == entries, result
    listing = timed(lambda: storage.list_matching(f"file://{small}/"))[0]
    beside, result = load(csv_dir, full, 1, True)
    assert result.get("rows"), result
    fresh, result = load(csv_dir, f"file://{root}/ledger-fresh/", 2, True)
    assert result.get("rows"), result
    print(f"ledger of {entries:,} entries")
    print(f"  rerun over {entries:,} loaded files {rerun:8.2f} s; listing them {listing:6.2f} s; "
          f"ratio {rerun / listing:6.2f} (rerun ÷ listing)")
    print(f"  load beside the ledger {beside:8.2f} s; into a fresh table {fresh:6.2f} s; "
          f"ratio {beside / fresh:6.2f} (with ÷ without)")
    FIGURES["ledger"] = {"entries": entries, "rerun_s": rerun, "listing_s": listing, "load_beside_s": beside,
                         "load_fresh_s": fresh}


def ledger_scale_case(root: Path, entries: int) -> None:
    """A table whose ledger holds ``entries`` files: open time, and the ledger a load of 100 reads."""
    import json
    import statistics

    from lading_jobs import storage as st
    from lading_jobs.load.job import split_loaded
    from lading_jobs.table import format as fmt
    from lading_jobs.table.log.commits import Change, LedgerEntry, TableLog
    from lading_jobs.table.schema import TableSchema

    def files(day: int, n: int, start: int = 0) -> dict[str, LedgerEntry]:
        return {f"s3://landing/events/dt=2026-{day // 31 + 1:02d}-{day % 31 + 1:02d}/part-{i:07d}.csv":
                LedgerEntry(f'"{i:032x}"', 1_000 + i % 5_000, 10, -1, 1_764_000_000_000) for i in range(start, start + n)}

    uri = f"file://{root}/ledger-scale/"
    schema = TableSchema.of([(c["name"], c["type"], c.get("nullable", True)) for c in SCHEMA])
    old = {}
    for day in range(-(-entries // 100_000)):
        old.update(files(day, min(100_000, entries - len(old)), len(old)))
    inline = len(json.dumps({u: e.to_dict() for u, e in old.items()}, separators=(",", ":")))
    built, log = timed(lambda: TableLog.create(uri, schema))
    t = time.perf_counter()
    log.commit(Change(operation="load", ledger=old))
    del old
    while log.version < fmt.CHECKPOINT_INTERVAL:
        log.commit(Change())  # commit 10 writes checkpoint 10: the ledger's shards and index
    built = time.perf_counter() - t
    ledger_dir = root / "ledger-scale" / fmt.LEDGER_DIR
    objects = list(ledger_dir.glob("*.json.gz"))
    checkpoint = Path(fmt.checkpoint_uri(uri, fmt.CHECKPOINT_INTERVAL).removeprefix("file://")).stat().st_size
    print(f"ledger at scale: {entries:,} loaded files (built in {built:.1f} s: one commit, checkpoint 10)")
    print(f"  checkpoint {checkpoint:,} bytes (the ledger inline, as before: {inline / 1e6:,.1f} MB); "
          f"{len(objects):,} ledger objects, {sum(o.stat().st_size for o in objects) / 1e6:,.1f} MB")

    opens = []
    for _ in range(5):
        seconds, snap = timed(lambda: TableLog.open_existing(uri).snapshot())
        opens.append(seconds)
    print(f"  open (open_existing + snapshot): median {statistics.median(opens):.3f} s, "
          f"max {max(opens):.3f} s (target < 1 s); ledger bytes read {snap.ledger.bytes_read}")
    scale: dict[str, Any] = {"entries": entries, "built_s": built, "checkpoint_bytes": checkpoint,
                             "inline_ledger_bytes": inline, "ledger_objects": len(objects),
                             "open_median_s": statistics.median(opens), "open_max_s": max(opens), "loads": []}
    FIGURES["ledger_scale"] = scale

    def load_100(log: TableLog, day: int) -> None:
        snap = log.snapshot()
        new = files(day, 100)
        listed = [st.ObjectInfo(u, e.size, e.etag) for u, e in new.items()]
        looked, (todo, _) = timed(lambda: split_loaded(listed, snap))
        assert len(todo) == 100
        read_lookups = snap.ledger.bytes_read
        before = {o.name for o in ledger_dir.glob("*.json.gz")}
        committed, after = timed(lambda: log.commit(Change(operation="load", ledger=new)))
        written = sum(o.stat().st_size for o in ledger_dir.glob("*.json.gz") if o.name not in before)
        print(f"  load of 100 new files at commit {after.version}: lookups {looked:.3f} s, ledger bytes read "
              f"{read_lookups:,} (target < 1 MB); commit {committed:.3f} s, ledger bytes read in all "
              f"{after.ledger.bytes_read:,}, written {written:,}")
        scale["loads"].append({"commit": after.version, "lookups_s": looked, "lookup_bytes_read": read_lookups,
                               "commit_s": committed, "bytes_read": after.ledger.bytes_read, "bytes_written": written})

    log = TableLog.open_existing(uri)
    load_100(log, 400)  # commit 11: no checkpoint
    while log.version < 2 * fmt.CHECKPOINT_INTERVAL - 1:
        log.commit(Change())
    log = TableLog.open_existing(uri)
    load_100(log, 401)  # commit 20: writes checkpoint 20


if __name__ == "__main__":
    main()
