"""The Kafka side, through confluent-kafka (librdkafka): properties, metadata, reading one range.

Consumer properties are the spec's ``consumer`` map plus the credentials Secret,
which reaches the pods as files (one file per property, the file name is the
property) in the directory ``$LADING_KAFKA_PROPERTIES_DIR`` (default
``/etc/lading/kafka``); the values never pass through the spec, a log or an
error message. A Java-style ``sasl.jaas.config`` is translated into librdkafka's
``sasl.username`` / ``sasl.password``.

Nothing here commits offsets that anybody trusts: the driver's consumer only
answers metadata and watermark questions and, after each table commit, records
the group's offsets for monitoring tools. Tasks ``assign`` their one partition at
an exact offset and read until the range's end; ``auto.offset.reset=error``
turns offsets the broker no longer has into an error instead of a silent jump.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lading_jobs import pinning
from lading_jobs.stream import memory
from lading_jobs.stream.positions import Range, Watermarks
from lading_spec import kafkacreds
from lading_spec.streamcopy import (
    KAFKA_PROPERTIES_DIR,
    KAFKA_PROPERTIES_DIR_ENV,
    escape_property_error,
)

PROPERTIES_DIR_ENV = KAFKA_PROPERTIES_DIR_ENV
DEFAULT_PROPERTIES_DIR = KAFKA_PROPERTIES_DIR
METADATA_TIMEOUT = 30.0
READ_STALL_SECONDS = 120.0
"""A task that receives nothing for this long while its range is unfinished fails the batch."""
_JAAS = re.compile(r"""(username|password)\s*=\s*"((?:[^"\\]|\\.)*)\"""")

RAW_COLUMNS = (("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
               ("offset", "bigint"), ("timestamp", "timestamp"),
               ("headers", "array<struct<key:string,value:binary>>"))
"""The columns of ``valueFormat: raw`` (and of a new raw table without ``target.schema``)."""
HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


class KafkaError(RuntimeError):
    """The broker or the client refused; the message names what to check (never a secret)."""


def secret_properties(directory: str | None = None) -> dict[str, str]:
    """Properties from the mounted credentials Secret (absent directory: none)."""
    root = Path(directory or os.environ.get(PROPERTIES_DIR_ENV) or DEFAULT_PROPERTIES_DIR)
    if not root.is_dir():
        return {}
    out = {}
    for f in sorted(root.iterdir()):
        if f.is_file() and not f.name.startswith("."):
            out[f.name] = f.read_text().strip()
    return out


def translate(props: Mapping[str, str]) -> dict[str, str]:
    """Java client properties librdkafka lacks, mapped to its own (``sasl.jaas.config``)."""
    out = dict(props)
    jaas = out.pop("sasl.jaas.config", None)
    if jaas is not None:
        found = dict(_JAAS.findall(jaas))
        if "username" not in found or "password" not in found:
            raise KafkaError("sasl.jaas.config (from the credentials Secret) has no username=\"...\" "
                             "password=\"...\"; give sasl.username and sasl.password instead")
        out.setdefault("sasl.username", found["username"])
        out.setdefault("sasl.password", found["password"])
    return out


def consumer_config(bootstrap: tuple[str, ...], consumer: Mapping[str, str], group: str,
                    secret: Mapping[str, str] | None = None) -> dict[str, str]:
    """The properties every consumer of this stream uses (driver and tasks).

    The spec's ``consumer`` map and the Secret's properties come first, lading's own
    last, so they always win: the brokers are ``source.kafka.bootstrapServers``, the
    group is ``group`` and offsets are never committed or reset behind the table's
    back. A property from either side that would run a program, load a library, reach
    an address lading does not validate or replace the brokers
    (:func:`lading_spec.streamcopy.escape_property_error`) is refused, naming the key
    and where it came from, never its value. A Secret's credentials go only where the
    Secret says (its ``bootstrap.servers``, ``security.protocol`` and ``sasl.mechanism``,
    :func:`lading_spec.kafkacreds.binding_error`); its ``bootstrap.servers`` is that
    binding, never a connection setting.
    """
    from_secret = translate(secret if secret is not None else secret_properties())
    bound = from_secret.pop(kafkacreds.BOUND_BROKERS, None)
    for where, props in (("source.kafka.consumer", consumer), (kafkacreds.SECRET_FIELD, from_secret)):
        for key in props:
            why = escape_property_error(key)
            if why:
                raise KafkaError(f"{where}: property {key!r}: {why}")
    why = kafkacreds.binding_error(bootstrap, consumer, {**from_secret, kafkacreds.BOUND_BROKERS: bound or ""})
    if why:
        raise KafkaError(why)
    lading = {"bootstrap.servers": ",".join(bootstrap), "group.id": group,
              "enable.auto.commit": "false", "enable.auto.offset.store": "false", "auto.offset.reset": "error",
              "enable.partition.eof": "true"}
    return {**kafkacreds.secret_wins(consumer, from_secret), **from_secret, **lading}


def check_broker_addresses(bootstrap: tuple[str, ...]) -> None:
    """Resolve each broker's name and refuse one that answers a link-local address (the
    instance metadata service), as an S3 endpoint's (``lading_jobs.pinning``). A name that does
    not resolve is left to librdkafka, which reports it. librdkafka resolves names itself
    (confluent-kafka has no resolver hook), so unlike S3 connections these are checked here,
    at the start of the driver and of each task, not pinned."""
    for i, server in enumerate(bootstrap):
        try:
            pinning.checked_addresses(kafkacreds.broker_host(server))
        except pinning.LinkLocalAddress as e:
            raise KafkaError(f"source.kafka.bootstrapServers[{i}]: {server!r} resolves to {e.address}, a "
                             "link-local address (the cloud's instance metadata service), never a Kafka "
                             "broker") from None
        except OSError:
            continue


def _redact(text: str, config: Mapping[str, str]) -> str:
    for key, value in config.items():
        if value and len(value) >= 3 and ("password" in key or "secret" in key or "sasl" in key or "key" in key):
            text = text.replace(value, "***")
    return text


def open_consumer(config: Mapping[str, str]) -> Any:
    from confluent_kafka import Consumer, KafkaException

    try:
        return Consumer(dict(config))
    except (KafkaException, ValueError, TypeError) as e:
        raise KafkaError(f"source.kafka.consumer: librdkafka refused the consumer properties: "
                         f"{_redact(str(e), config)}") from None


CONSUMER_ONLY = frozenset({
    "group.id", "enable.auto.commit", "enable.auto.offset.store", "auto.offset.reset", "enable.partition.eof",
    "isolation.level", "check.crcs", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
    "fetch.wait.max.ms", "fetch.min.bytes", "fetch.max.bytes", "fetch.message.max.bytes", "max.partition.fetch.bytes",
    "fetch.error.backoff.ms", "fetch.queue.backoff.ms", "queued.min.messages", "queued.max.messages.kbytes",
})
"""Consumer properties an admin client has no use for (librdkafka would warn about each)."""
NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
"""The all-zero topic ID (base64): what a broker without topic IDs (before Metadata v10) answers."""


TRANSIENT_ERRORS = frozenset({
    "_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE", "_WAIT_COORD", "REQUEST_TIMED_OUT",
    "NETWORK_EXCEPTION", "BROKER_NOT_AVAILABLE", "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION",
    "NOT_LEADER_OR_FOLLOWER", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "FETCH_SESSION_ID_NOT_FOUND",
    "INVALID_FETCH_SESSION_EPOCH", "KAFKA_STORAGE_ERROR", "REPLICA_NOT_AVAILABLE", "OFFSET_NOT_AVAILABLE",
    "UNKNOWN_LEADER_EPOCH", "FENCED_LEADER_EPOCH", "THROTTLING_QUOTA_EXCEEDED",
})
"""librdkafka errors a consumer recovers from by itself (a broker restarting, a leader moving):
waited out with backoff, not a failed batch. By name, so a code this librdkafka lacks is skipped."""
BACKOFF_FIRST, BACKOFF_MAX = 0.1, 5.0
RETRIES = 8
"""Attempts a driver-side metadata request (watermarks, partitions) makes across transient errors."""


def is_transient(err: Any) -> bool:
    """Whether the librdkafka error ``err`` (``confluent_kafka.KafkaError``) passes by itself: not
    fatal, and a transport, timeout or leadership error (``TRANSIENT_ERRORS``) or marked retriable."""
    from confluent_kafka import KafkaError as CKError

    if err.fatal():
        return False
    codes = {getattr(CKError, name) for name in TRANSIENT_ERRORS if hasattr(CKError, name)}
    return err.code() in codes or bool(err.retriable())


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (0, 1, ...): doubling from 0.1 s up to 5 s."""
    return float(min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** attempt))


def _retrying(call: Any, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, retried with backoff while it raises a transient ``KafkaException``."""
    from confluent_kafka import KafkaException

    for attempt in range(RETRIES):
        try:
            return call(*args, **kwargs)
        except KafkaException as e:
            if attempt == RETRIES - 1 or not (e.args and is_transient(e.args[0])):
                raise
            time.sleep(backoff(attempt))
    raise AssertionError("unreachable")


def open_admin(config: Mapping[str, str]) -> Any:
    """An admin client on the consumer's brokers and credentials (for topic IDs)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({k: v for k, v in config.items() if k not in CONSUMER_ONLY})


def topic_ids(admin: Any, topics: tuple[str, ...]) -> dict[str, str | None]:
    """Each topic's ID (KIP-516, DescribeTopics/Metadata v10+), or None where the broker gives none
    (an older broker, the all-zero ID, an error answering): a topic's identity is then unknown."""
    from confluent_kafka import KafkaException, TopicCollection

    out: dict[str, str | None] = {t: None for t in topics}
    try:
        futures = admin.describe_topics(TopicCollection(list(topics)), request_timeout=METADATA_TIMEOUT)
    except (KafkaException, ValueError, TypeError):
        return out
    for topic, future in futures.items():
        try:
            found = future.result(METADATA_TIMEOUT)
        except KafkaException:
            continue
        tid = str(found.topic_id) if getattr(found, "topic_id", None) is not None else ""
        out[topic] = tid if tid and tid != NO_TOPIC_ID else None
    return out


def partitions(consumer: Any, topics: tuple[str, ...]) -> dict[str, list[int]]:
    """The partitions of each topic; a topic the broker does not know is an error naming it."""
    from confluent_kafka import KafkaException

    out = {}
    for topic in topics:
        try:
            md = _retrying(consumer.list_topics, topic, timeout=METADATA_TIMEOUT)
        except KafkaException as e:
            raise KafkaError(f"source.kafka: cannot read the metadata of topic {topic!r}: {e}; "
                             "check bootstrapServers and the consumer properties") from None
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None or not tmd.partitions:
            why = tmd.error.str() if tmd is not None and tmd.error is not None else "no partitions"
            raise KafkaError(f"source.kafka.topics: topic {topic!r} is not available on the broker ({why}); "
                             "create it or fix the name")
        out[topic] = sorted(tmd.partitions)
    return out


def watermarks(consumer: Any, topics: tuple[str, ...]) -> dict[str, dict[int, Watermarks]]:
    """Earliest and end offsets of every partition of ``topics``."""
    from confluent_kafka import KafkaException, TopicPartition

    out: dict[str, dict[int, Watermarks]] = {}
    for topic, parts in partitions(consumer, topics).items():
        out[topic] = {}
        for p in parts:
            try:
                low, high = _retrying(consumer.get_watermark_offsets, TopicPartition(topic, p),
                                      timeout=METADATA_TIMEOUT)
            except KafkaException as e:
                raise KafkaError(f"source.kafka: cannot read the offsets of {topic}/{p}: {e}") from None
            out[topic][p] = Watermarks(int(low), int(high))
    return out


def commit_group(consumer: Any, positions: Mapping[str, Mapping[int, int]]) -> None:
    """Record the committed table position as the group's offsets (monitoring only; best effort)."""
    from confluent_kafka import KafkaException, TopicPartition

    offsets = [TopicPartition(t, p, o) for t, ps in positions.items() for p, o in ps.items()]
    if offsets:
        with contextlib.suppress(KafkaException):  # monitoring only: the table holds the position
            consumer.commit(offsets=offsets, asynchronous=False)


@dataclass
class Messages:
    """One range's messages as columns (plain Python lists from librdkafka, then Arrow)."""

    rng: Range
    keys: list[bytes | None]
    values: list[bytes | None]
    offsets: list[int]
    timestamps: list[int]  # ms since the epoch
    headers: list[Any]
    bytes: int = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def raw_table(self) -> pa.Table:
        """The columns of ``valueFormat: raw``, in Arrow."""
        n = len(self.offsets)
        ts = np.asarray(self.timestamps, dtype=np.int64) * 1000
        headers = [None if h is None else [{"key": k, "value": v} for k, v in h] for h in self.headers]
        return pa.table({
            "key": pa.array(self.keys, pa.binary()),
            "value": pa.array(self.values, pa.binary()),
            "topic": pa.repeat(pa.scalar(self.rng.topic, pa.string()), n),
            "partition": pa.repeat(pa.scalar(self.rng.partition, pa.int32()), n),
            "offset": pa.array(self.offsets, pa.int64()),
            "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "headers": pa.array(headers, HEADERS_TYPE),
        })


CONSUME_SHARE = 4
"""One ``consume`` call asks for about a quarter of the budget (by the messages' mean size so far)."""
MAX_CONSUME = 10_000
QUEUE_KBYTES = 65_536
"""librdkafka's default ``queued.max.messages.kbytes``: the most a bounded queue keeps."""
MIN_QUEUE_KBYTES = 4096
"""The least a bounded queue keeps: below about 4 MiB, fetches (librdkafka sizes them to the
queue) come back too small and a range reads 2-3x slower (measured against tansu: 1.5 MiB took
2.3-2.6 s for 50,000 messages, 4 MiB and up 0.8-1.1 s)."""


def bounded_queue(config: Mapping[str, str], budget: int) -> dict[str, str]:
    """``config`` with librdkafka's prefetch queue (``queued.max.messages.kbytes``, 64 MiB by
    default) a quarter of ``budget``, at least ``MIN_QUEUE_KBYTES``, unless the spec's ``consumer``
    map sets it."""
    out = dict(config)
    out.setdefault("queued.max.messages.kbytes",
                   str(min(QUEUE_KBYTES, max(MIN_QUEUE_KBYTES, budget // CONSUME_SHARE // 1024))))
    return out


def read_chunks(config: Mapping[str, str], rng: Range, budget: int = memory.chunk_bytes(memory.DEFAULT_TASK_BYTES),
                stall_seconds: float = READ_STALL_SECONDS) -> Iterator[Messages]:
    """The messages of ``rng`` in offset order, in chunks of at most ``budget`` bytes of keys
    and values (a message larger than the budget is a chunk of its own), so a task holds one
    chunk at a time, never its whole range. Offsets missing inside the range (transaction
    markers, compacted-away keys) are simply absent; a range without messages yields nothing.

    The consumer stays assigned between chunks; each ``consume`` asks for about a quarter of
    the budget (by the mean message size seen so far) and librdkafka's prefetch queue is bounded
    by the budget (``bounded_queue``)."""
    from confluent_kafka import KafkaError as CKError
    from confluent_kafka import TopicPartition

    # librdkafka's own fetch settings (or the spec's ``consumer`` map): the loop below stops at the
    # range's last offset without waiting for the broker, so a short fetch.wait.max.ms buys nothing.
    consumer = open_consumer(bounded_queue(config, budget))
    chunk = Messages(rng, [], [], [], [], [])
    seen, seen_bytes = 0, 0
    try:
        consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
        last_progress = time.monotonic()
        next_offset = rng.start
        waits = 0  # transient errors in a row: the consumer reconnects, the read waits with backoff
        while next_offset < rng.end:
            mean = seen_bytes / seen if seen else 1024.0
            want = max(1, min(MAX_CONSUME, rng.end - next_offset, int(budget / CONSUME_SHARE / max(mean, 1.0))))
            batch = consumer.consume(num_messages=want, timeout=1.0)
            if not batch and time.monotonic() - last_progress > stall_seconds:
                raise KafkaError(f"reading {rng}: nothing received for {stall_seconds:.0f} s at offset "
                                 f"{next_offset}; is the broker reachable?")
            for m in batch:
                err = m.error()
                if err is not None:
                    if err.code() == CKError._PARTITION_EOF:
                        if m.offset() >= rng.end:
                            next_offset = rng.end
                        continue
                    if err.code() == CKError.OFFSET_OUT_OF_RANGE:
                        raise KafkaError(f"reading {rng}: offset {next_offset} is no longer on the broker "
                                         "(retention passed?); see source.kafka.failOnDataLoss")
                    if is_transient(err):  # a broker restarting, a leader moving: librdkafka recovers
                        if time.monotonic() - last_progress > stall_seconds:
                            raise KafkaError(f"reading {rng}: {err.str()}, and no message for "
                                             f"{stall_seconds:.0f} s at offset {next_offset}")
                        time.sleep(backoff(waits))
                        waits += 1
                        continue
                    raise KafkaError(f"reading {rng}: {err.str()}")
                off = m.offset()
                if off >= rng.end:
                    next_offset = rng.end
                    break
                if off < next_offset:
                    continue
                key, value = m.key(), m.value()
                size = (len(key) if key else 0) + (len(value) if value else 0)
                if len(chunk) and chunk.bytes + size > budget:
                    yield chunk  # the task decodes and writes it; the consumer waits assigned
                    chunk = Messages(rng, [], [], [], [], [])
                    last_progress = time.monotonic()
                chunk.keys.append(key)
                chunk.values.append(value)
                chunk.offsets.append(off)
                chunk.timestamps.append(m.timestamp()[1])
                chunk.headers.append(m.headers())
                chunk.bytes += size
                seen, seen_bytes = seen + 1, seen_bytes + size
                next_offset = off + 1
                last_progress = time.monotonic()
                waits = 0
            del batch
        if len(chunk):
            yield chunk
    finally:
        consumer.close()


def read_range(config: Mapping[str, str], rng: Range, stall_seconds: float = READ_STALL_SECONDS) -> Messages:
    """Every message of ``rng`` at once (tests and tools; tasks read ``read_chunks``)."""
    out = Messages(rng, [], [], [], [], [])
    for chunk in read_chunks(config, rng, 2**62, stall_seconds):
        for name in ("keys", "values", "offsets", "timestamps", "headers"):
            getattr(out, name).extend(getattr(chunk, name))
        out.bytes += chunk.bytes
    return out
