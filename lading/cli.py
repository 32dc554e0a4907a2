"""The ``lading`` command: ``lading run FILE.yaml`` and ``lading render FILE.yaml``.

``run`` takes the same CopyJob, StreamCopy or Compaction manifest a user would ``kubectl
apply`` and runs it on local Spark (operator-only fields such as ``schedule`` are
ignored), with a progress bar on a terminal, ending as PostgreSQL does with
``COPY <rows>`` and where the manifest is (a Compaction: ``COMPACT`` and a
summary line; a StreamCopy: its stream until Ctrl-C, or with ``--once`` until the
source holds nothing new, one line per batch). S3 is found through the standard ``AWS_*``
environment (``AWS_ENDPOINT_URL_S3`` for the endpoint: the global
``AWS_ENDPOINT_URL`` would send STS calls there too). ``render`` prints the
SparkApplication the operator would create (``lading_operator.render_cli``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import importlib
import json
import os
import signal
import sys
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from lading_spec import compaction_result, manifests
from lading_spec.errors import SpecError
from lading_spec.job import API_VERSION, KINDS, JobDocument, check_run_id
from lading_spec.sizes import human_size


def load_manifest(path: str) -> dict[str, Any]:
    """The first lading resource in a YAML file (``-`` reads stdin), read as kubectl reads it."""
    try:
        text = sys.stdin.read() if path == "-" else open(path).read()  # noqa: SIM115
    except OSError as e:
        raise SpecError("FILE", f"cannot read {path}: {e.strerror}") from e
    try:
        docs = manifests.load_all(text)
    except SpecError as e:
        raise SpecError("FILE", f"{path}: {e.message}") from e
    for d in docs:
        if isinstance(d, dict) and d.get("kind") in KINDS:
            if d.get("apiVersion") != API_VERSION:  # as kubectl and `lading render` would refuse it
                raise SpecError("apiVersion", f"{path}: {d.get('kind')} has apiVersion {d.get('apiVersion')!r}; "
                                              f"this release reads {API_VERSION}")
            return d
    raise SpecError("kind", f"{path} holds no {', '.join(KINDS)} resource")


def job_document(manifest: dict[str, Any], run_id: str | None = None,
                 run_time: dt.datetime | None = None) -> JobDocument:
    meta = manifest.get("metadata") or {}
    name = str(meta.get("name") or "local")
    spec = manifest.get("spec")
    if not isinstance(spec, dict):
        raise SpecError("spec", "missing or not a mapping")
    run_time = run_time or dt.datetime.now(dt.UTC)
    generation = meta.get("generation") or 1
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
        raise SpecError("metadata.generation", f"expected a positive integer, got {generation!r}")
    if run_id is not None:
        check_run_id(run_id, "--run-id")
    else:  # derived from the name, which must then be able to name a run too
        run_id = check_run_id(f"{name}-local-{run_time:%Y%m%d%H%M%S}-{uuid.uuid4().hex[:6]}", "metadata.name")
    return JobDocument(kind=manifest["kind"], namespace=str(meta.get("namespace") or "default"), name=name,
                       uid="", generation=generation, run_id=run_id, run_time=run_time, spec=spec)


class ProgressBar:
    """Tasks done / total from Spark's status tracker; rows, bytes, files from task accumulators."""

    def __init__(self, spark: Any, stream: Any = None) -> None:
        from lading_jobs.engine import Progress

        self.spark, self.stream = spark, stream or sys.stderr
        self.counters = Progress(spark)
        self._stop = None
        self._thread = None
        import threading

        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lading-progress", daemon=True)
        self._thread.start()

    def _line(self) -> str:
        tracker = self.spark.sparkContext.statusTracker()
        done = total = 0
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        width = 24
        filled = int(width * done / total) if total else 0
        bar = "#" * filled + "-" * (width - filled)
        c = self.counters
        return (f"\r[{bar}] {done}/{total} tasks  {c.rows.value:,} rows  {human_size(c.bytes.value)}  "
                f"{c.files.value} files ")

    def _loop(self) -> None:
        assert self._stop is not None
        while not self._stop.wait(0.5):
            try:
                self.stream.write(self._line())
                self.stream.flush()
            except Exception:  # noqa: BLE001 - a progress bar never fails a run
                return

    def close(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.stream.write("\r" + " " * 90 + "\r")
        self.stream.flush()


def cmd_run(args: argparse.Namespace) -> int:
    from lading_jobs import result as results
    from lading_jobs.main import execute

    try:
        doc = job_document(load_manifest(args.file), run_id=args.run_id)
    except SpecError as e:
        print(f"lading: {e}", file=sys.stderr)
        return 1
    cancellation = results.Cancellation(report=lambda out: _report_cut_short(out, args.json))
    cancellation.install((signal.SIGTERM, signal.SIGINT))
    show_progress = not args.no_progress and sys.stderr.isatty()
    bars: list[ProgressBar] = []

    def spark_factory() -> Any:
        from lading_jobs.session import build_session

        spark = build_session(master=args.master, app_name=f"lading-run-{doc.name}", kind=doc.kind)
        # PySpark's SparkContext takes SIGINT for its own handler (cancel every job over py4j, then
        # KeyboardInterrupt wherever the main thread is): Ctrl-C must cancel as SIGTERM does.
        cancellation.install((signal.SIGINT,))
        return spark

    def progress_factory(spark: Any) -> Any:
        if not show_progress:
            return None
        bars.append(ProgressBar(spark))
        return bars[-1].counters

    options = None
    listener = None
    if doc.kind == "StreamCopy":
        show_progress = False  # one line per batch instead of a bar
        options = {"once": args.once, "progress_port": args.progress_port, "progress_host": "127.0.0.1"}
        listener = _batch_line
    try:
        out = execute(doc, spark_factory, cancellation, progress_factory, listener=listener, options=options)
    finally:
        for bar in bars:
            bar.close()
    if doc.kind == "StreamCopy":
        return _stream_outcome(out, args)
    if args.json:
        print(json.dumps(out, sort_keys=True))
    if "rows" in out and "error" not in out:
        if not args.json and doc.kind == "Compaction":
            print(compaction_summary(out))
        elif not args.json:
            print(f"COPY {out['rows']}")
            if out.get("manifest"):
                print(f"manifest: {out['manifest']}")
                print(f"{out.get('files', 0)} files, {human_size(out.get('bytes', 0))} in {out.get('durationSeconds')} s "
                      f"under {out.get('destination')}")
        return 0
    if out.get("cancelled"):
        print("lading: cancelled; nothing was left under the destination", file=sys.stderr)
        return results.EXIT_CANCELLED
    print(f"lading: ERROR: {out.get('error')}", file=sys.stderr)
    return 1


def _report_cut_short(out: dict[str, Any], as_json: bool) -> None:
    """What ``lading run`` prints when a cancellation's clean-up outlives the grace period (the
    watchdog then exits 143): the run's other outcomes' words, not the operator's result line."""
    if as_json:
        print(json.dumps(out, sort_keys=True), flush=True)
    print(f"lading: {out.get('error') or 'cancelled'} (on S3 the bucket's AbortIncompleteMultipartUpload "
          "lifecycle rule removes them: docs/copyjob.md); no object of the run is visible",
          file=sys.stderr, flush=True)


def compaction_summary(out: dict[str, Any]) -> str:
    """One line for a Compaction run (the words the operator's Event uses too)."""
    return "COMPACT " + compaction_result.describe(out)


def _batch_line(reported: Mapping[str, Any]) -> None:
    """The live line of ``lading run`` for one committed stream batch, or for a new lag the
    watcher found between or during batches (``event: lag``), from the engine's report."""
    batch, progress = reported.get("batch") or {}, reported.get("progress") or {}
    lag = (progress.get("lag") or {}).get("total", 0)
    at_least = "≥" if (progress.get("lag") or {}).get("atLeast") else ""
    if reported.get("event") == "lag":
        version = progress.get("tableVersion")
        where = "no table yet" if version is None else f"table v{version}"
        print(f"lag {at_least}{lag:,} ({where}, {progress.get('rowsTotal', 0):,} rows in all)",
              file=sys.stderr, flush=True)
        return
    print(f"batch {progress.get('batches')}: {batch.get('rows', 0):,} rows in {batch.get('seconds', 0):.2f} s, "
          f"lag {at_least}{lag:,}, {batch.get('rejected', 0):,} rejected, "
          + (f"{batch['filtered']:,} filtered, " if batch.get("filtered") else "")
          + f"table v{batch.get('version')}, "
          f"{progress.get('rowsTotal', 0):,} rows in all", file=sys.stderr, flush=True)


def _stream_outcome(out: dict[str, Any], args: argparse.Namespace) -> int:
    from lading_jobs import result as results

    if args.json:
        print(json.dumps(out, sort_keys=True))
    if "error" in out:
        print(f"lading: ERROR: {out['error']}", file=sys.stderr)
        return 1
    if not args.json:
        offsets = ", ".join(f"{k}={v}" for k, v in sorted((out.get("offsets") or {}).items()))
        if "rows" in out:
            print(f"STREAM {out['rows']}")
        else:
            print("lading: stopped; the next run resumes from the committed position", file=sys.stderr)
        print(f"{out.get('rowsTotal', 0)} rows in {out.get('batches', 0)} batches in all, table "
              f"v{out.get('tableVersion')} at {out.get('destination')}; position {offsets or '-'}")
    return results.EXIT_OK if "rows" in out or out.get("cancelled") else 1


def write_sample_orders(prefix: str, rows: int, files: int = 4, seed: int = 42) -> list[str]:
    """Write a sample ``orders`` dataset as Parquet under ``prefix`` (the demo's and examples' input)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lading_jobs.storage import join, open_storage

    storage = open_storage(prefix)
    rng = np.random.default_rng(seed)
    regions = np.array(["eu", "us", "apac", None], dtype=object)
    out = []
    per_file = -(-rows // files)
    for i in range(files):
        start, stop = i * per_file, min(rows, (i + 1) * per_file)
        if start >= stop:
            break
        n = stop - start
        ids = np.arange(start, stop, dtype=np.int64)
        cents = rng.integers(-500, 2_000_000, n)
        table = pa.table({
            "id": ids,
            "region": pa.array(regions[rng.integers(0, 4, n)], pa.string()),
            "customer": pa.array([f"customer-{c}" for c in rng.integers(0, 50_000, n)]),
            "total": pa.array([None if c % 50 == 0 else decimal.Decimal(int(c)).scaleb(-2) for c in cents],
                              pa.decimal128(12, 2)),
            "created_at": pa.array(np.datetime64("2026-01-01T00:00:00", "us")
                                   + (ids * 37_000_000).astype("timedelta64[us]"), pa.timestamp("us", tz="UTC")),
            "note": pa.array([None if k % 5 == 0 else f'note "{k}", with a comma' for k in ids], pa.string()),
        })
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="snappy")
        uri = join(prefix, f"orders-{i:03d}.parquet")
        storage.put(uri, sink.getvalue().to_pybytes())
        out.append(uri)
    return out


def _at_least(low: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def cmd_sample_data(args: argparse.Namespace) -> int:
    from lading_jobs.storage import StorageError

    try:
        written = write_sample_orders(args.prefix, args.rows, args.files, args.seed)
    except (SpecError, StorageError, OSError, ValueError) as e:
        print(f"lading: ERROR: {args.prefix}: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.rows} sample orders in {len(written)} Parquet files under {args.prefix}")
    return 0


def cmd_table_sync(args: argparse.Namespace) -> int:
    """``lading table sync URI``: publish the Iceberg metadata of every version the mirror lacks
    (a writer killed between its commit and the mirror), in version order; idempotent."""
    from lading_jobs.storage import StorageError
    from lading_jobs.table.iceberg import catalog_binding, mirror
    from lading_jobs.table.log.commits import TableError

    try:
        published = mirror.sync(args.uri)
        state = mirror.describe(args.uri)
        pointer = catalog_binding.sync(args.uri)  # a bound table: its catalog's pointer to the newest file
    except (TableError, StorageError, OSError, ValueError) as e:
        print(f"lading: ERROR: {args.uri}: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"published": [p.version for p in published], **state,
                          **({"catalogMetadata": pointer} if pointer else {})}))
        return 0
    if pointer:
        print(f"the catalog points at {pointer}")
    if state["metadata"] is None:
        print(f"{args.uri}: the Iceberg mirror is switched off for this table (icebergMirror: false)")
        return 0
    print(f"published {len(published)} version(s); metadata: {state['metadata']}")
    if "reason" in state:
        print(f"the mirror's current snapshot is version {state.get('snapshotVersion', 'none')}; versions from "
              f"{state['behindSince']} are not mirrored: {state['reason']}")
    return 0


def cmd_table_register(args: argparse.Namespace) -> int:
    """``lading table register URI --catalog NAME --as ns.name``: bind the table to a catalog entry
    (created, or moved from an older file of this table); every later mirror publish moves it."""
    from lading_jobs.storage import StorageError
    from lading_jobs.table.iceberg import catalog_binding
    from lading_jobs.table.log.commits import TableError
    from lading_spec import catalogs

    why = catalogs.identifier_error(args.as_table)
    if why:
        print(f"lading: ERROR: --as: {why}", file=sys.stderr)
        return 1
    try:
        pointer = catalog_binding.register(args.uri, args.catalog, args.as_table)
    except (TableError, StorageError, OSError, ValueError) as e:
        print(f"lading: ERROR: {args.uri}: {e}", file=sys.stderr)
        return 1
    print(f"{args.uri}: registered as {args.as_table} in catalog {args.catalog!r}, at {pointer}")
    return 0


def cmd_table_mirror(args: argparse.Namespace) -> int:
    """``lading table mirror URI --on|--off``: switch the table's Iceberg mirror (one commit)."""
    from lading_jobs.storage import StorageError
    from lading_jobs.table.iceberg import switch as mirror_switch
    from lading_jobs.table.log.commits import TableError, TableLog

    try:
        snap = mirror_switch.switch(TableLog.open_existing(args.uri), args.on)
        if snap is None:
            print(f"{args.uri}: the Iceberg mirror is already {'on' if args.on else 'off'}")
            return 0
    except (TableError, StorageError, OSError, ValueError) as e:
        print(f"lading: ERROR: {args.uri}: {e}", file=sys.stderr)
        return 1
    print(f"{args.uri}: the Iceberg mirror is {'on' if args.on else 'off'} from version {snap.version}"
          + (" (the mirror caught up with every version)" if args.on else ""))
    return 0


def cmd_render(argv: list[str]) -> int:
    try:
        module = importlib.import_module("lading_operator.render_cli")
    except ModuleNotFoundError as e:
        print(f"lading render needs the operator package (lading_operator.render_cli), which is not "
              f"installed here: {e}", file=sys.stderr)
        return 2
    return int(module.main(argv))


RUN_HELP = """\
Runs the resource in FILE on local Spark, as the operator would run it on a
cluster, and prints its outcome: COPY <rows> for a CopyJob, COMPACT ... for a
Compaction, a line per batch and STREAM <rows> for a StreamCopy (--json: the
result as JSON). Operator-only fields (schedule, spark, backoffLimit, ...) are
ignored, except that a spark.sparkConf no cluster would accept is refused. The
file is read as kubectl reads it.

kinds it runs:
  {kinds}

environment it reads:
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
                        S3 credentials (or AWS_PROFILE, AWS_ROLE_ARN +
                        AWS_WEB_IDENTITY_TOKEN_FILE: boto3's usual chain)
  AWS_REGION, AWS_DEFAULT_REGION
                        the region, unless connection.region is set
                        (default us-east-1)
  AWS_ENDPOINT_URL_S3   the S3 endpoint (MinIO, Ceph ...), unless
                        connection.endpoint is set; AWS_ENDPOINT_URL is read
                        when it is absent, but it also redirects STS
  LADING_SPARK_MASTER   the default of --master

needs:
  Java 17 (Spark 4 runs on it; java on PATH or JAVA_HOME)

exit codes:
  0    the rows are committed (a StreamCopy also when stopped by Ctrl-C:
       the next run resumes from the committed position)
  1    an error: the spec, the query, storage; nothing partial is left
  2    usage: unknown option or missing FILE
  143  a CopyJob or Compaction cancelled (SIGTERM or Ctrl-C); nothing is
       left under the destination
"""

SAMPLE_HELP = """\
Writes a sample "orders" table (id, region, customer, total, created_at, note;
nulls, quotes and commas included) as Parquet files under PREFIX: the input of
examples/quickstart.yaml and the other examples. The same --seed gives the
same data. S3 is found as for lading run (AWS_* environment).
"""


def _kinds_text() -> str:
    """The kinds this installation runs: an engine module that is present (not imported)."""
    import importlib.util

    from lading_jobs.engine import ENGINES

    def present(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            return False

    runs = [k for k, m in ENGINES.items() if present(m)]
    later = [k for k in ENGINES if k not in runs]
    what = {"CopyJob": "CopyJob: unload (from.query or from.table to to.files), load (from.files into to.table)",
            "StreamCopy": "StreamCopy: Kafka or arriving files into a table, until Ctrl-C (--once: until "
                          "nothing is new)",
            "Compaction": "Compaction: rewrites a table's small parts into large ones"}
    lines = [what.get(k, k) for k in runs]
    if later:
        lines.append(f"not in this installation: {', '.join(later)}")
    return "\n  ".join(lines)


def _version() -> str:
    from lading_spec.version import VERSION

    return f"lading {VERSION}"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "render":
        return cmd_render(argv[1:])
    p = argparse.ArgumentParser(prog="lading", description="Move data with Spark: COPY to and from S3.")
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a CopyJob, StreamCopy or Compaction manifest on local Spark",
                         description=RUN_HELP.format(kinds=_kinds_text()),
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("file", help="a YAML manifest (the file you would kubectl apply); - for stdin")
    run.add_argument("--master", default=os.environ.get("LADING_SPARK_MASTER", "local[*]"),
                     help="Spark master (default: $LADING_SPARK_MASTER, else local[*])")
    run.add_argument("--run-id", default=None, help="run id (default: derived from the name and time)")
    run.add_argument("--json", action="store_true", help="print the result as JSON instead of COPY <rows>")
    run.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    run.add_argument("--once", action="store_true",
                     help="StreamCopy: load what the source holds now, then exit (default: run until Ctrl-C)")
    run.add_argument("--progress-port", type=int, default=None,
                     help="StreamCopy: serve the progress JSON on this port of 127.0.0.1 (default: none)")
    sub.add_parser("render", help="print the SparkApplication the operator would create (lading render -h)",
                   add_help=False)
    sample = sub.add_parser("sample-data", help="write the sample orders dataset (Parquet) the examples read",
                            description=SAMPLE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    sample.add_argument("prefix", help="where, e.g. s3://lading-demo/raw/orders/ or file:///tmp/orders/")
    sample.add_argument("--rows", type=_at_least(0), default=200_000, help="how many orders (default 200000)")
    sample.add_argument("--files", type=_at_least(1), default=4,
                        help="how many Parquet files to spread them over (default 4)")
    sample.add_argument("--seed", type=int, default=42, help="random seed; the same seed writes the same data "
                                                              "(default 42)")
    table = sub.add_parser("table", help="maintain a lading table (table sync: catch its Iceberg mirror up)")
    table_sub = table.add_subparsers(dest="table_command", required=True)
    sync = table_sub.add_parser("sync", help="publish the Iceberg metadata of every version the mirror lacks")
    sync.add_argument("uri", help="the table, e.g. s3://lake/tables/orders/ or file:///tmp/orders/")
    sync.add_argument("--json", action="store_true", help="print the outcome as JSON")
    switch = table_sub.add_parser("mirror", help="switch the table's Iceberg mirror on or off (one commit)")
    switch.add_argument("uri", help="the table")
    onoff = switch.add_mutually_exclusive_group(required=True)
    onoff.add_argument("--on", dest="on", action="store_true", help="mirror every version (catching up first)")
    onoff.add_argument("--off", dest="on", action="store_false", help="stop mirroring; the metadata says so")
    register = table_sub.add_parser("register", help="register the table in an Iceberg catalog; each mirror "
                                    "publish then moves the catalog's pointer (compare-and-swap)")
    register.add_argument("uri", help="the table")
    register.add_argument("--catalog", required=True, help="a declared catalog's name (LADING_CATALOGS_FILE)")
    register.add_argument("--as", dest="as_table", required=True, help="the catalog's table, namespace.name")
    args = p.parse_args(argv)
    if args.command == "table":
        commands = {"sync": cmd_table_sync, "register": cmd_table_register, "mirror": cmd_table_mirror}
        return commands[args.table_command](args)
    if args.command == "run":
        return cmd_run(args)
    if args.command == "sample-data":
        return cmd_sample_data(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
