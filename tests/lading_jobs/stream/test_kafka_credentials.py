"""A Kafka Secret's credentials travel only to the brokers, protocol and mechanism the Secret names.

The tenant may name the namespace's Kafka Secret but not read it. A listener on 127.0.0.1
stands for the tenant's own broker: it speaks enough Kafka (ApiVersions, SaslHandshake) to be
sent a SaslAuthenticate. A StreamCopy run through the real job path (``run_stream``, which
opens the driver's consumer) with the Secret mounted as files must never send it there.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.sasl_listener import SaslListener

from lading_jobs.stream import kafka as kf
from lading_jobs.stream.job import run_stream
from lading_spec.job import JobDocument

PASSWORD = "hunter2-the-secret-password"
CREDENTIALS = {"sasl.username": "analytics-reader", "sasl.password": PASSWORD}
OWNERS = {"bootstrap.servers": "kafka-0.corp.example:9093,kafka-1.corp.example:9093",
          "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}
JOB_SECONDS = 20.0
"""How long a refused job may take: refusing happens before any connection, in well under a second."""


@pytest.fixture
def listener() -> Iterator[SaslListener]:
    with SaslListener() as broker:
        yield broker


def mount(directory: Path, secret: dict[str, str]) -> str:
    """The Secret as spark-operator mounts it: one file per key."""
    directory.mkdir()
    for key, value in secret.items():
        (directory / key).write_text(value)
    return str(directory)


def run_job(tmp_path: Path, brokers: list[str], consumer: dict[str, str], secret_dir: str) -> dict[str, Any] | None:
    """The StreamCopy job with the Secret mounted; its result, or None if it was still running
    (connecting) after ``JOB_SECONDS``."""
    spec = {"source": {"kafka": {"bootstrapServers": brokers, "topics": ["orders"], "consumer": consumer,
                                 "secretRef": {"name": "kafka-credentials"}}},
            "target": {"table": (tmp_path / "table").as_uri(), "schema": [{"name": "id", "type": "bigint"}]}}
    doc = JobDocument("StreamCopy", "analytics", "s", "uid", 1, "s-1", dt.datetime.now(dt.UTC), spec)
    out: list[dict[str, Any]] = []
    old = os.environ.get(kf.PROPERTIES_DIR_ENV)
    os.environ[kf.PROPERTIES_DIR_ENV] = secret_dir
    try:
        worker = threading.Thread(target=lambda: out.append(run_stream(None, doc, once=True, progress_port=None)),
                                  daemon=True)
        worker.start()
        worker.join(JOB_SECONDS)
    finally:
        if old is None:
            os.environ.pop(kf.PROPERTIES_DIR_ENV, None)
        else:
            os.environ[kf.PROPERTIES_DIR_ENV] = old
    return out[0] if out else None


CASES = [
    # the issue's attack: the spec asks for SASL PLAIN without TLS against the tenant's broker
    ("plaintext-plain", {}, {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
     "source.kafka.consumer.security.protocol"),
    # a Secret that does not say where it is for (as every Secret did before) goes nowhere
    ("unbound-secret", {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, {},
     "no bootstrap.servers key"),
    # a Secret bound to its owner's brokers, pointed at the tenant's
    ("other-brokers", {**OWNERS, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, {},
     "source.kafka.bootstrapServers[0]"),
    # the owner's brokers, but TLS turned into trusting anybody
    ("verification-off", OWNERS, {"enable.ssl.certificate.verification": "false"},
     "source.kafka.consumer.enable.ssl.certificate.verification"),
]


@pytest.mark.parametrize(("secret_extra", "consumer", "named"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_tenants_broker_never_receives_the_secrets_credentials(
        tmp_path: Path, listener: SaslListener, secret_extra: dict[str, str], consumer: dict[str, str],
        named: str) -> None:
    secret_dir = mount(tmp_path / "kafka", {**CREDENTIALS, **secret_extra})
    result = run_job(tmp_path, [listener.address], consumer, secret_dir)
    assert not listener.authenticated, f"the tenant's broker was sent {listener.api_keys.count(36)} SaslAuthenticate"
    assert PASSWORD.encode() not in bytes(listener.received)
    assert result is not None, f"the job was still connecting after {JOB_SECONDS} s"
    assert named in result["error"], result
    assert PASSWORD not in str(result) and "analytics-reader" not in str(result)


def test_the_listener_does_receive_credentials_from_a_secret_bound_to_it(tmp_path: Path,
                                                                       listener: SaslListener) -> None:
    """The control: the same Secret, bound by its owner to this listener (plaintext, PLAIN, as the
    owner said), is sent there, so the listener above would have seen it."""
    secret = {**CREDENTIALS, "bootstrap.servers": listener.address, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "PLAIN"}
    config = kf.consumer_config((listener.address,), {}, "g", kf.secret_properties(mount(tmp_path / "k", secret)))
    consumer = kf.open_consumer({**config, "log_level": "0"})
    try:
        with pytest.raises(Exception):  # noqa: B017 - the listener refuses the login; only the bytes matter
            consumer.list_topics(timeout=3)
    finally:
        consumer.close()
    assert listener.authenticated and PASSWORD.encode() in bytes(listener.received)
