"""A Kafka task's byte budget, from the executor's memory (docs/streamcopy.md, "Memory budget").

A task reads its offset range in chunks of ``chunk_bytes`` (an eighth of its budget) of
message keys and values, decoding each and streaming its rows into the part writer (a
row group per chunk's worth of Arrow data) before it reads the next (``kafka.read_chunks``),
so its memory follows the budget, not the range. The budget is a share of the memory Python
workers get on an executor:

    python    = spark.executor.pyspark.memory, else spark.executor.memoryOverhead,
                else max(384 MiB, spark.executor.memoryOverheadFactor (0.1) x spark.executor.memory)
    taskBytes = clamp(python / spark.executor.cores / SHARE, 1 MiB, 64 MiB)

``SHARE`` is 8: a task's data (its chunk, the chunk's decode, the rows the writer holds,
librdkafka's queue) takes up to about its budget (``bench/stream.py`` measures the peak RSS),
which leaves most of a task's share to the interpreter and the libraries (about 170 MiB of
RSS in a Python worker before any data). The default executor (1g, 1 core) gives 48 MiB.
"""

from __future__ import annotations

from typing import Any

MIB = 1024 * 1024
SHARE = 8
CHUNKS = 8
"""A task's budget holds a chunk of messages about this many times over (decode, conform, write)."""
MIN_TASK_BYTES = 1 * MIB
MAX_TASK_BYTES = 64 * MIB
MIN_OVERHEAD_MIB = 384
DEFAULT_OVERHEAD_FACTOR = 0.1


def task_bytes(executor_mib: int = 1024, cores: int = 1, overhead_mib: int | None = None,
               overhead_factor: float = DEFAULT_OVERHEAD_FACTOR, pyspark_mib: int | None = None) -> int:
    """The byte budget of one Kafka task (see the module doc); arguments as Spark's settings say."""
    if pyspark_mib:
        python = pyspark_mib
    elif overhead_mib:
        python = overhead_mib
    else:
        python = max(MIN_OVERHEAD_MIB, int(executor_mib * overhead_factor))
    budget = python * MIB // max(1, cores) // SHARE
    return max(MIN_TASK_BYTES, min(MAX_TASK_BYTES, budget))


DEFAULT_TASK_BYTES = task_bytes()


def chunk_bytes(budget: int) -> int:
    """Bytes of message keys and values a task with ``budget`` reads and decodes at a time."""
    return max(64 * 1024, budget // CHUNKS)


def task_bytes_of(spark: Any) -> int:
    """``task_bytes`` of the session's executor settings, read by Spark's own size parser (no
    session: the default executor's)."""
    if spark is None:
        return DEFAULT_TASK_BYTES
    conf = spark.sparkContext._jsc.sc().conf()

    def mib(key: str) -> int | None:
        return int(conf.getSizeAsMb(key)) if conf.contains(key) else None

    factor = conf.get("spark.executor.memoryOverheadFactor",
                      conf.get("spark.kubernetes.memoryOverheadFactor", str(DEFAULT_OVERHEAD_FACTOR)))
    try:
        overhead_factor = float(factor)
    except ValueError:
        overhead_factor = DEFAULT_OVERHEAD_FACTOR
    return task_bytes(executor_mib=mib("spark.executor.memory") or 1024,
                      cores=int(conf.getInt("spark.executor.cores", 1)),
                      overhead_mib=mib("spark.executor.memoryOverhead"),
                      overhead_factor=overhead_factor, pyspark_mib=mib("spark.executor.pyspark.memory"))
