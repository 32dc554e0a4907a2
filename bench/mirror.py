"""Iceberg mirror benchmark: the mirror's cost per commit as a share of the commit's time.

  python bench/mirror.py [--parts 1000] [--commits 30] [--rows 20000] [--dir /tmp/lading-bench-mirror] [--s3]
                         [--profile] [--streamcopy [--stream-messages 24000] [--stream-batch 1000]
                         [--stream-rounds 2]] [--cases append,stream,write] [--background [--block 5]]
                         [--load [--load-rows 200000] [--load-rounds 5]] [--compaction [--compaction-rounds 2]]

Two tables, identical but for the switch (``iceberg_mirror`` off / on), each given ``--parts``
parts in commits of 100 (synthetic parts: statistics for six columns, no data is read by either
the log or the mirror); then, interleaved (off, on, off, on, ...), ``--commits`` commits to each of

* an *append* of one part to the ``--parts``-part table;
* a *stream batch*: two parts plus a ``sourceProgress`` entry, as a StreamCopy micro-batch commits;
* a *write*: ``--rows`` rows written as a part (``writer.write_parts``: pyarrow encodes Parquet
  into a pending upload, as a Spark task does) and committed (``writer.commit_parts``: the upload
  completed, the log committed, the mirror published): the whole write of a small load or
  stream batch, minus Spark's own scheduling (so its share is an upper bound).

With ``--streamcopy``, a fourth case, a real *StreamCopy batch*: bench/stream.py's StreamCopy
(``run_stream`` on local[2] Spark, Kafka from a tansu broker on 127.0.0.1, JSON decoded into a
``file://`` table, one commit per batch) drains one topic of ``--stream-messages`` into a new
table in batches of ``--stream-batch`` rows, the target's ``icebergMirror`` false then true,
``--stream-rounds`` times interleaved; the time of a batch is the time between two consecutive
batch commits (planning, reading Kafka, Spark's job, the commit and its mirror), the median over
the batches of each setting. Beside that A/B (two medians of a noisy machine), the time spent
inside ``mirror.after_commit`` in the driver, timed directly per mirrored batch, as a share of
the median batch with the mirror.

With ``--load`` and ``--compaction``, the commits lading makes on a large table, in real jobs on
local[2] Spark (local disk, or moto with ``--s3``): a CopyJob load (``run_load``) of
``--load-rows`` rows into the ``--parts``-part table, and a Compaction (the engine's ``compact``,
bin-pack) of a table of ``--parts`` real parts; each job's driver starting as a new process would
(``mirror.forget()``), off and on interleaved; beside the A/B, the publish on the job's path
(inside ``mirror.after_commit``) timed directly, as a share of that job.

Prints the median seconds per commit with the mirror off and on, and the mirror's share
``(on - off) / on`` (target ≤ 10 %). ``--s3`` runs against a moto S3 server on 127.0.0.1 instead
of local disk (more realistic request costs), in a process of its own (``--moto-in-process``: a
thread of the benchmark's, whose request handling then competes with the commit for the GIL). ``--profile`` prints, per case, cProfile's view of
the mirrored commits: the functions under ``mirror.after_commit`` by cumulative time. A script,
not a test: record the output in docs/benchmarks.md ("Iceberg mirror").
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import benchjson

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "spark_apps")]

import pyarrow as pa  # noqa: E402

from lading_jobs import storage as st  # noqa: E402
from lading_jobs.table import format as fmt  # noqa: E402
from lading_jobs.table import writer  # noqa: E402
from lading_jobs.table.log.commits import Change, Part, TableLog  # noqa: E402
from lading_jobs.table.schema import TableSchema  # noqa: E402
from lading_jobs.table.stats.part import ColumnStats, PartStats  # noqa: E402

SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string"), ("amount", "decimal(12,2)"),
                         ("at", "timestamp"), ("day", "date"), ("score", "double")])


def part(n: int) -> Part:
    cols = {1: ColumnStats(0, n * 1000, n * 1000 + 999), 2: ColumnStats(3, f"name-{n:06d}", f"name-{n:06d}-zz"),
            3: ColumnStats(0, "-10.50", "99999.99"), 4: ColumnStats(0, 1_700_000_000_000_000 + n,
                                                                     1_700_000_000_000_000 + n + 10**9),
            5: ColumnStats(0, 19000 + n, 19010 + n), 6: ColumnStats(1, -1.5, 2.5)}
    return Part(f"data/w-{uuid.uuid4().hex}/part-00000-00000.parquet", 1_000_000,
                PartStats(1000, 1_000_000, n, n, 1, 1, cols))


def build(uri: str, storage: st.Storage, parts: int, mirror: bool) -> TableLog:
    log = TableLog.create(uri, SCHEMA, storage=storage, iceberg_mirror=mirror)
    done = 0
    while done < parts:
        batch = min(100, parts - done)
        log.commit(Change(add=tuple(part(done + i) for i in range(batch))))
        done += batch
    return log


def rows(first: int, n: int) -> pa.Table:
    """``n`` rows of the benchmark's schema (ids from ``first``)."""
    import datetime as dt
    import decimal

    ids = range(first, first + n)
    return pa.table({
        "id": pa.array(ids, pa.int64()), "name": [f"name-{i:08d}" for i in ids],
        "amount": pa.array([decimal.Decimal(i % 100000) / 100 for i in ids], pa.decimal128(12, 2)),
        "at": pa.array([1_700_000_000_000_000 + i for i in ids], pa.timestamp("us", tz="UTC")),
        "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 1000) for i in ids]),
        "score": pa.array([i / 7 for i in ids], pa.float64())})


def commit_one(kind: str, log: TableLog, i: int, args: argparse.Namespace, storage: st.Storage) -> None:
    if kind == "append":
        log.commit(Change(add=(part(args.parts + i),)))
    elif kind == "stream":
        log.commit(Change(operation="stream", add=(part(args.parts + i), part(args.parts + i)),
                          source_progress={"kafka:t": {"0": i}}))
    else:
        written = writer.write_parts(log.uri, [rows(i * args.rows, args.rows)], SCHEMA, write_id=fmt.new_write_id(),
                                     storage=storage)
        writer.commit_parts(log.uri, written, log=log, storage=storage)


def report(kind: str, what: str, off: float, on: float, where: str, extra: str = "") -> None:
    print(f"{kind:6s} ({where}): {what} {off * 1000:.1f} ms without the mirror, {on * 1000:.1f} ms with it; "
          f"the mirror's share {(on - off) / on:.0%} (target <= 10 %){extra}")
    CASES.append({"case": kind, "what": what, "where": where, "off_ms": off * 1000, "on_ms": on * 1000,
                  "share_ab": (on - off) / on, "extra": extra.removeprefix("; ")})


CASES: list[dict[str, Any]] = []  # what report() printed, for the JSON (bench/benchjson.py)


def streamcopy(args: argparse.Namespace) -> None:
    """The real StreamCopy batch (``--streamcopy``): see the module's docstring."""
    with publishes_timed() as inside:  # seconds in mirror.after_commit per mirrored batch (the driver commits)
        _streamcopy(args, inside)


def _streamcopy(args: argparse.Namespace, inside: list[float]) -> None:
    import os

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import stream as sb  # bench/stream.py

    from lading_jobs.session import build_session
    from lading_jobs.table.iceberg import mirror

    behind: list[tuple[float, float]] = []  # (wall, thread CPU) of each publish, on the publisher's thread
    publish_after = mirror._publish_after  # noqa: SLF001 - the benchmark times the mirror's own step

    def timed_publish(log: Any, entry: Any, snapshot: Any, switched_off: bool, *more: Any) -> None:
        t0, c0 = time.perf_counter(), time.thread_time()
        publish_after(log, entry, snapshot, switched_off, *more)
        behind.append((time.perf_counter() - t0, time.thread_time() - c0))

    mirror._publish_after = timed_publish  # type: ignore[assignment]  # noqa: SLF001

    root = Path(args.dir) / "streamcopy"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    broker, bootstrap = sb.start_tansu()
    spark = None
    try:
        spark = build_session(master="local[2]", app_name="lading-bench-mirror", kind="StreamCopy")
        topic = f"mirror-{os.getpid()}"
        sb.create_topic(bootstrap, topic, 2)
        sb.produce(bootstrap, topic, 2, 0, args.stream_messages, batched=True)
        sb.lading_run(spark, bootstrap, topic, f"file://{root}/warm/", once=True,  # Spark's workers up, untimed
                      max_batch_rows=args.stream_batch)
        batches: dict[bool, list[float]] = {False: [], True: []}
        inside.clear()  # the warm-up's
        behind.clear()
        for r in range(args.stream_rounds):
            for m in (False, True):
                times: list[float] = []
                _, _, rows = sb.lading_run(spark, bootstrap, topic, f"file://{root}/t-{r}-{'on' if m else 'off'}/",
                                           once=True, max_batch_rows=args.stream_batch, iceberg_mirror=m,
                                           commit_times=times)
                took = [b - a for a, b in zip(times, times[1:], strict=False)]
                batches[m].extend(took)
                print(f"  round {r}, mirror {'on ' if m else 'off'}: {rows} rows in {len(times)} batches, "
                      f"median {statistics.median(took) * 1000:.1f} ms")
        off, on = statistics.median(batches[False]), statistics.median(batches[True])
        report("streamcopy", f"a batch of {args.stream_batch} rows (median of {len(batches[True])})", off, on,
               "StreamCopy on local[2] Spark, Kafka (tansu), local disk")
        mirrored = inside
        print(f"streamcopy: inside mirror.after_commit {statistics.median(mirrored) * 1000:.1f} ms per mirrored batch "
              f"(median of {len(mirrored)}): {statistics.median(mirrored) / on:.0%} of the median batch with the mirror")
        CASES[-1].update(direct_ms=statistics.median(mirrored) * 1000, share_direct=statistics.median(mirrored) / on)
        if behind:  # the publishes themselves (background: on the publisher's thread, beside the next batch)
            pw, pc = statistics.median(b[0] for b in behind), statistics.median(b[1] for b in behind)
            print(f"streamcopy: each publish {pw * 1000:.1f} ms wall, {pc * 1000:.1f} ms CPU of its thread "
                  f"(median of {len(behind)}): {pc / on:.0%} of the median batch with the mirror in CPU")
    finally:
        if spark is not None:
            spark.stop()
        broker.terminate()
        broker.wait()


def report_job(kind: str, what: str, times: dict[bool, list[float]], inside: list[float], where: str) -> None:
    """A job case's A/B (``times`` by the mirror's setting) and its publish timed directly (``inside``,
    one per job with the mirror), as a share of each of those jobs."""
    off, on = statistics.median(times[False]), statistics.median(times[True])
    report(kind, f"{what} (median of {len(times[True])})", off, on, where)
    shares = [a / b for a, b in zip(inside, times[True], strict=True)]
    print(f"{kind}: inside mirror.after_commit {statistics.median(inside) * 1000:.1f} ms per job (median of "
          f"{len(inside)}; max {max(inside) * 1000:.1f} ms): {statistics.median(shares):.1%} of its job "
          f"(median; max {max(shares):.1%})")
    CASES[-1].update(direct_ms=statistics.median(inside) * 1000, share_direct=statistics.median(shares))


@contextlib.contextmanager
def publishes_timed(counted: Callable[[dict[str, Any]], bool] = lambda entry: True) -> Iterator[list[float]]:
    """Within: the seconds each mirrored commit whose entry ``counted`` accepts spends inside
    ``mirror.after_commit`` (its publish, on the commit's path), appended to the list yielded; and
    the environment a local Spark session of this interpreter needs."""
    import os

    from lading_jobs.table.iceberg import mirror

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    inside: list[float] = []
    publish = mirror.after_commit

    def timed(log: Any, entry: Any, snapshot: Any, *more: Any) -> None:
        t0 = time.perf_counter()
        publish(log, entry, snapshot, *more)
        if snapshot.meta.iceberg_mirror and counted(entry):
            inside.append(time.perf_counter() - t0)

    mirror.after_commit = timed  # type: ignore[assignment]
    try:
        yield inside
    finally:
        mirror.after_commit = publish  # type: ignore[assignment]


def load_case(args: argparse.Namespace, base: str, storage: st.Storage) -> None:
    """``--load``: a real CopyJob load (``run_load`` on local[2] Spark: Parquet files listed, read,
    checked and written as parts, one commit) of ``--load-rows`` rows into a table of ``--parts``
    synthetic parts under ``base`` (local disk, or moto with ``--s3``), the table's mirror off and
    on, ``--load-rounds`` times interleaved (off first in even rounds, on first in odd ones); each load in a "new process" for the mirror
    (``mirror.forget()``: it reads the previous metadata and manifest list back, as a CopyJob's driver
    pod does). The job's time, and the time inside ``mirror.after_commit`` (the publish, inline: a
    load publishes before its result names the metadata file) timed directly, as a share of the job
    with the mirror."""
    with publishes_timed() as inside:
        _load_case(args, base, storage, inside)


def _load_case(args: argparse.Namespace, base: str, storage: st.Storage, inside: list[float]) -> None:
    import datetime as dt

    import pyarrow.parquet as pq

    from lading_jobs.load.job import run_load
    from lading_jobs.session import build_session
    from lading_jobs.table.iceberg import mirror
    from lading_spec.job import JobDocument

    root = f"{base}load/"
    files = 2
    per = args.load_rows // files
    sources = []
    for f in range(files):
        out = pa.BufferOutputStream()
        pq.write_table(rows(f * per, per), out)
        sources.append(out.getvalue().to_pybytes())
    tables = {m: f"{root}t-{'on' if m else 'off'}/" for m in (False, True)}
    for m, uri in tables.items():
        build(uri, storage, args.parts, m)
    where = "S3 (moto)" if base.startswith("s3://") else "local disk"
    spark = build_session(master="local[2]", app_name="lading-bench-mirror-load", kind="CopyJob")
    try:
        spark.range(1000).mapInArrow(lambda it: it, "id bigint").count()  # start the Python workers

        def load(uri: str, n: int) -> float:
            src = f"{root}src-{n}/"  # new names each time: the table's ledger would skip loaded files
            for f, data in enumerate(sources):
                storage.put(f"{src}f-{f}.parquet", data)
            doc = JobDocument("CopyJob", "bench", "load", "uid", 1, f"bench-load-{n}", dt.datetime.now(dt.UTC),
                              {"from": {"files": src, "format": "parquet"}, "to": {"table": uri}})
            mirror.forget()
            t0 = time.perf_counter()
            result = run_load(spark, doc)
            took = time.perf_counter() - t0
            assert result.get("rows") == per * files, result
            return took

        build(f"{root}warm/", storage, 0, False)
        load(f"{root}warm/", 0)  # Spark's first job, untimed
        inside.clear()
        jobs: dict[bool, list[float]] = {False: [], True: []}
        n = 1
        for r in range(args.load_rounds):
            for m in ((False, True) if r % 2 == 0 else (True, False)):  # neither setting always goes second
                jobs[m].append(load(tables[m], n))
                n += 1
        report_job("load", f"a CopyJob load of {per * files:,} rows", jobs, inside,
                   f"{args.parts} parts, run_load on local[2] Spark, {where}")
    finally:
        spark.stop()


def compaction_case(args: argparse.Namespace, base: str, storage: st.Storage) -> None:
    """``--compaction``: a real Compaction (the engine's ``compact`` on local[2] Spark, bin-pack) of a
    table of ``--parts`` real parts of 200 rows (written by lading's writer, committed 100 at a time),
    the table's mirror off then on, ``--compaction-rounds`` times (a new table each time: a compaction
    consumes its input); each in a "new process" for the mirror (``mirror.forget()``). The run's time,
    and the time inside ``mirror.after_commit`` (its publish: a manifest of every live part, as after
    any commit that removes parts) timed directly, as a share of the run with the mirror."""
    with publishes_timed(lambda entry: entry.get("operation") == "compact") as inside:
        _compaction_case(args, base, storage, inside)


def _compaction_case(args: argparse.Namespace, base: str, storage: st.Storage, inside: list[float]) -> None:
    from lading_jobs.compact.engine import compact
    from lading_jobs.engine import RunContext
    from lading_jobs.session import build_session
    from lading_jobs.table.iceberg import mirror
    from lading_spec.compaction import parse_compaction

    def table(uri: str, on: bool) -> None:
        log = TableLog.create(uri, SCHEMA, storage=storage, iceberg_mirror=on)
        for c in range(0, args.parts, 100):
            written = []
            for i in range(c, min(c + 100, args.parts)):
                written += writer.write_parts(uri, [rows(i * 200, 200)], SCHEMA, write_id=fmt.new_write_id(),
                                              storage=storage)
            writer.commit_parts(uri, written, log=log, storage=storage)

    where = "S3 (moto)" if base.startswith("s3://") else "local disk"
    spark = build_session(master="local[2]", app_name="lading-bench-mirror-compaction", kind="Compaction")
    try:
        runs: dict[bool, list[float]] = {False: [], True: []}
        for r in range(-1, args.compaction_rounds):  # round -1: Spark's first jobs, untimed
            for m in (False, True):
                uri = f"{base}compaction/t-{r + 1}-{'on' if m else 'off'}/"
                table(uri, m)
                spec = parse_compaction({"table": uri, "targetFileSize": "64MB", "since": {"version": 0}})
                mirror.forget()
                if r < 0:
                    inside.clear()
                t0 = time.perf_counter()
                compact(spark, spec, RunContext())
                if r >= 0:
                    runs[m].append(time.perf_counter() - t0)
            if r < 0:
                inside.clear()
        report_job("compaction", f"a bin-pack of {args.parts} parts", runs, inside,
                   f"{args.parts} parts, the engine on local[2] Spark, {where}")
    finally:
        spark.stop()


def background_case(kind: str, logs: dict[bool, TableLog], args: argparse.Namespace, storage: st.Storage) -> None:
    """``--background``: the mirror published off the commit path (``mirror_publisher.background()``),
    in blocks of ``--block`` commits, off then on, alternated; the on block settles at its end (every
    publish done). Per commit: the time on the caller's path (the median commit call: what the next
    batch waits), the block's wall time (settling included) and the whole process's CPU (the
    publisher thread's included) divided by its commits."""

    from lading_jobs.table.iceberg import publisher as mirror_publisher

    times: dict[bool, list[float]] = {False: [], True: []}
    wall: dict[bool, float] = {False: 0.0, True: 0.0}
    cpu: dict[bool, float] = {False: 0.0, True: 0.0}
    i = 0
    while i < args.commits:
        n = min(args.block, args.commits - i)
        for m in (False, True):
            w0, c0 = time.perf_counter(), time.process_time()
            with mirror_publisher.background() if m else contextlib.nullcontext():
                for j in range(i, i + n):
                    t0 = time.perf_counter()
                    commit_one(kind, logs[m], j, args, storage)
                    times[m].append(time.perf_counter() - t0)
            wall[m] += time.perf_counter() - w0
            cpu[m] += time.process_time() - c0
        i += n
    off, on = statistics.median(times[False]), statistics.median(times[True])
    what = f"{args.rows} rows written and committed" if kind == "write" else "commit"
    k = args.commits
    report(kind, f"{what}, publish in the background, on the caller's path", off, on,
           f"{args.parts} parts, {'S3 (moto)' if args.s3 else 'local disk'}",
           f"; per commit with settling: wall {wall[False] / k * 1000:.1f} / {wall[True] / k * 1000:.1f} ms "
           f"({(wall[True] - wall[False]) / wall[True]:.0%}), this process's CPU {cpu[False] / k * 1000:.1f} / "
           f"{cpu[True] / k * 1000:.1f} ms ({(cpu[True] - cpu[False]) / cpu[True]:.0%})")


def start_moto_process() -> tuple[str, int, Any]:
    """moto's S3 server in a process of its own on 127.0.0.1 (a free port); (host, port, process)."""
    import socket
    import subprocess
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    moto = Path(sys.executable).with_name("moto_server")
    process = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
            return "127.0.0.1", port, process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("moto_server did not start")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", type=int, default=1000)
    ap.add_argument("--commits", type=int, default=30)
    ap.add_argument("--dir", default="/tmp/lading-bench-mirror")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--s3", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--cases", default="append,stream,write", help="which synthetic cases to run (comma-separated)")
    ap.add_argument("--streamcopy", action="store_true", help="also the real StreamCopy batch (Spark, tansu)")
    ap.add_argument("--stream-messages", type=int, default=24000)
    ap.add_argument("--stream-batch", type=int, default=1000)
    ap.add_argument("--stream-rounds", type=int, default=2)
    ap.add_argument("--background", action="store_true",
                    help="synthetic cases with the mirror published in the background (mirror_publisher)")
    ap.add_argument("--block", type=int, default=5, help="--background: commits per block")
    ap.add_argument("--moto-in-process", action="store_true",
                    help="--s3: moto's server as a thread of this process (its CPU counted as the benchmark's)")
    ap.add_argument("--compaction", action="store_true", help="also a real Compaction (local[2] Spark)")
    ap.add_argument("--compaction-rounds", type=int, default=2)
    ap.add_argument("--load", action="store_true", help="also a real CopyJob load (run_load on local[2] Spark)")
    ap.add_argument("--load-rows", type=int, default=200_000)
    ap.add_argument("--load-rounds", type=int, default=5)
    benchjson.add_argument(ap)
    args = ap.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    server = None
    moto_process = None
    if args.s3:
        import os

        import boto3
        from moto.server import ThreadedMotoServer

        if args.moto_in_process:
            server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            server.start()
            host, port = server.get_host_and_port()
        else:  # its own process, as a real S3 is not in ours: its request handling is not this process's CPU
            host, port, moto_process = start_moto_process()
        os.environ.update({"AWS_ENDPOINT_URL_S3": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "x",
                           "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"})
        boto3.client("s3", endpoint_url=f"http://{host}:{port}").create_bucket(Bucket="bench")
        base = "s3://bench/"
        storage: st.Storage = st.S3Storage()
    else:
        shutil.rmtree(args.dir, ignore_errors=True)
        Path(args.dir).mkdir(parents=True)
        base = f"file://{args.dir}/"
        storage = st.LocalStorage()
    try:
        for kind in cases:
            logs = {m: build(f"{base}{kind}-{'on' if m else 'off'}/", storage, args.parts, m) for m in (False, True)}
            if args.background:
                background_case(kind, logs, args, storage)
                continue
            times: dict[bool, list[float]] = {False: [], True: []}
            cpu: dict[bool, list[float]] = {False: [], True: []}
            profile = cProfile.Profile() if args.profile else None
            for i in range(args.commits):
                for m in (False, True):
                    t0, c0 = time.perf_counter(), time.process_time()
                    if profile is not None and m:
                        profile.enable()
                    commit_one(kind, logs[m], i, args, storage)
                    if profile is not None and m:
                        profile.disable()
                    times[m].append(time.perf_counter() - t0)
                    cpu[m].append(time.process_time() - c0)
            off, on = statistics.median(times[False]), statistics.median(times[True])
            cpu_off, cpu_on = statistics.median(cpu[False]), statistics.median(cpu[True])
            what = f"{args.rows} rows written and committed" if kind == "write" else "commit"
            report(kind, what, off, on, f"{args.parts} parts, {'S3 (moto)' if args.s3 else 'local disk'}",
                   f"; this process's CPU {cpu_off * 1000:.1f} / {cpu_on * 1000:.1f} ms "
                   "(the S3 server is another thread of it)")
            if profile is not None:
                out = io.StringIO()
                stats = pstats.Stats(profile, stream=out)
                stats.sort_stats("cumulative").print_stats(45)
                print(out.getvalue())
        if args.load:
            load_case(args, base, storage)
        if args.compaction:
            compaction_case(args, base, storage)
    finally:
        if server is not None:
            server.stop()
        if moto_process is not None:
            moto_process.terminate()
            moto_process.wait()
    if args.streamcopy:
        streamcopy(args)
    benchjson.write(args.json_out, __file__, {"parts": args.parts, "store": "S3 (moto)" if args.s3 else "local disk",
                                          "background": args.background, "cases": CASES}, variant(args, cases))
    return 0


def variant(args: argparse.Namespace, cases: list[str]) -> str:
    """The run's mode, naming its JSON file (bench/benchjson.py): the cases run, the store, background."""
    ran = [] if cases == ["append", "stream", "write"] else ["+".join(cases)]
    ran += [k for k in ("load", "compaction", "streamcopy", "background", "s3") if getattr(args, k)]
    return "-".join(r for r in ran if r)


if __name__ == "__main__":
    sys.exit(main())
