"""A Kafka task's memory follows its byte budget, not its offset range (``kafka.read_chunks``,
``batch.run_range``, ``stream.memory``).

Measured in this process, without Spark: the task function a Spark task runs, over a
range four times its budget (32 chunks) on the tests' tansu broker, with tracemalloc (Python
objects: the messages, the joined chunk, numpy arrays) and an Arrow proxy memory pool
(decoding, conforming, the part writer's buffers). Peaks, not times.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pyarrow as pa
from support.kafka import produce

from lading_jobs import storage as st
from lading_jobs.stream import batch as bt
from lading_jobs.stream import memory
from lading_jobs.stream.positions import Range
from lading_jobs.table import writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.reader import scan
from lading_jobs.table.schema import TableSchema

MIB = 1024 * 1024


def test_the_budget_is_a_share_of_the_executors_python_memory() -> None:
    assert memory.task_bytes() == 48 * MIB  # 1g executor, 1 core: the 384 MiB overhead / 8
    assert memory.task_bytes(executor_mib=8192, cores=4) == 819 * MIB // 4 // 8  # 10 % of 8g
    assert memory.task_bytes(cores=4, overhead_mib=1024) == 32 * MIB
    assert memory.task_bytes(cores=2, pyspark_mib=512, overhead_mib=4096) == 32 * MIB  # Python's own memory first
    assert memory.task_bytes(cores=64) == memory.MIN_TASK_BYTES
    assert memory.task_bytes(pyspark_mib=65536) == memory.MAX_TASK_BYTES


def test_a_task_reads_its_range_in_chunks_of_its_budget_and_holds_far_less_than_the_range(
        kafka: str, make_topic: Any, file_uri: Any) -> None:
    topic = make_topic(partitions=1)
    n, keys, budget = 1024, 100, 1 * MIB
    pad = "x" * 4000  # a field the table does not take: big records, small rows (the part stays small)
    values = [json.dumps({"id": i % keys, "seq": i, "note": f"n{i}", "pad": pad}).encode() for i in range(n)]
    payload = sum(len(v) + len(str(i % keys)) for i, v in enumerate(values))  # 4 budgets, 32 chunks
    produce(kafka, topic, [(0, str(i % keys).encode(), v) for i, v in enumerate(values)])
    uri = file_uri("t/")
    schema = TableSchema.of([("id", "bigint", False), ("seq", "bigint"), ("note", "string")])
    log = TableLog.create(uri, schema, "upsert", ("id",))
    snap = log.snapshot()
    target = bt.Target(uri, snap.schema.to_json(), snap.table_id, "upsert", ("id",), (), 1, "w-memory", None,
                       st.S3Settings.from_env())
    source = bt.KafkaRead((kafka,), (), "lading.memory", "json", budget)
    bt.run_range(target, source, 0, Range(topic, 0, 0, n))  # modules imported once, as in a reused worker

    previous = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)
    pa.set_memory_pool(pool)
    tracemalloc.start()
    try:
        out = bt.run_range(target, source, 0, Range(topic, 0, 0, n))
        python_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(previous)
    arrow_peak = pool.max_memory()

    assert (out.read, out.good, out.rejected, out.bytes) == (n, n, 0, payload)
    chunk = memory.chunk_bytes(budget)
    assert chunk == budget // 8 and out.chunks >= payload // chunk and 0 < out.peak_bytes <= chunk
    # a task holding its whole range holds far more than the range (before: the values, their join,
    # an int64 per byte for the blank-line check: 87 MiB here); a chunked one, less than its budget
    # (about 6 chunks' worth, whatever the range's length)
    assert python_peak + arrow_peak < budget, (python_peak, arrow_peak, payload)

    # exactly what one read of the range loads: a key's message in a later chunk wins
    writer.commit_parts(uri, out.written, log=log, operation="stream", upper=2)
    rows = scan(uri).to_pylist()
    assert sorted((r["id"], r["seq"]) for r in rows) == [(k, max(range(k, n, keys))) for k in range(keys)]
