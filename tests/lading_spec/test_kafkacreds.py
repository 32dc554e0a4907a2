"""A Kafka Secret's binding (brokers, protocol, mechanism) and broker address checks, as pure tables."""

from __future__ import annotations

from typing import Any

import pytest

from lading_spec import kafkacreds
from lading_spec.errors import SpecError
from lading_spec.streamcopy import parse_streamcopy

CREDS = {"sasl.username": "u", "sasl.password": "hunter2"}
BOUND = {**CREDS, "bootstrap.servers": "kafka-0.corp:9093, Kafka-1.corp.:9093", "security.protocol": "SASL_SSL",
         "sasl.mechanism": "SCRAM-SHA-512"}


@pytest.mark.parametrize(("bootstrap", "consumer", "secret", "named"), [
    (("evil:9093",), {}, {**CREDS, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "no bootstrap.servers"),
    (("evil:9093",), {}, BOUND, "source.kafka.bootstrapServers[0]"),
    (("kafka-0.corp:9093", "kafka-0.corp:9094"), {}, BOUND, "source.kafka.bootstrapServers[1]"),
    (("kafka-0.corp:9093",), {}, {**CREDS, "bootstrap.servers": "kafka-0.corp:9093"}, "no security.protocol"),
    (("kafka-0.corp:9093",), {}, {**CREDS, "bootstrap.servers": "kafka-0.corp:9093", "security.protocol": "SASL_SSL"},
     "no sasl.mechanism"),
    (("kafka-0.corp:9093",), {"security.protocol": "SSL"}, BOUND, "source.kafka.consumer.security.protocol"),
    (("kafka-0.corp:9093",), {"sasl.mechanism": "PLAIN"}, BOUND, "source.kafka.consumer.sasl.mechanism"),
    # librdkafka's other spelling of the same property is compared too
    (("kafka-0.corp:9093",), {"sasl.mechanisms": "PLAIN"}, BOUND, "source.kafka.consumer.sasl.mechanisms"),
    (("kafka-0.corp:9093",), {"ssl.endpoint.identification.algorithm": "none"}, BOUND,
     "source.kafka.consumer.ssl.endpoint.identification.algorithm"),
    (("kafka-0.corp:9093",), {"client.dns.lookup": "resolve_canonical_bootstrap_servers_only"}, BOUND,
     "source.kafka.consumer.client.dns.lookup"),
    (("kafka-0.corp:9093",), {"ssl.cipher.suites": "aNULL"}, BOUND, "source.kafka.consumer.ssl.cipher.suites"),
    (("kafka-0.corp:9093",), {"ssl.ca.location": "/tmp/tenant-ca.pem"}, BOUND, "source.kafka.consumer.ssl.ca.location"),
    (("kafka-0.corp:9093",), {}, {"ssl.key.pem": "-----BEGIN", "security.protocol": "SSL"}, "(ssl.key.pem)"),
])
def test_a_secret_is_refused_where_its_owner_did_not_say(bootstrap: tuple[str, ...], consumer: dict[str, str],
                                                         secret: dict[str, str], named: str) -> None:
    why = kafkacreds.binding_error(bootstrap, consumer, secret)
    assert why is not None and named in why
    assert all(v not in why for v in ("hunter2", "kafka-1.corp", "-----BEGIN"))  # names keys, never values


@pytest.mark.parametrize(("bootstrap", "consumer", "secret"), [
    (("kafka-0.corp:9093",), {}, BOUND),
    (("KAFKA-1.corp:9093", "kafka-0.corp.:09093"), {"security.protocol": "sasl_ssl",
                                                    "sasl.mechanisms": "SCRAM-SHA-512"}, BOUND),
    (("kafka-0.corp:9093",), {"ssl.ca.location": "probe"}, {**BOUND, "ssl.ca.location": "probe"}),
    (("anywhere:9092",), {"security.protocol": "SASL_PLAINTEXT"}, {}),  # no credential, nothing to protect
    (("anywhere:9092",), {}, {"ssl.ca.pem": "-----BEGIN CERTIFICATE"}),  # a CA is not a credential
    (("kafka-0.corp:9093",), {}, {**CREDS, "bootstrap.servers": "kafka-0.corp:9093", "security.protocol": "SSL"}),
])
def test_a_secret_goes_where_its_owner_said(bootstrap: tuple[str, ...], consumer: dict[str, str],
                                            secret: dict[str, str]) -> None:
    assert kafkacreds.binding_error(bootstrap, consumer, secret) is None


def test_the_secrets_mechanism_wins_under_either_spelling() -> None:
    merged = {**kafkacreds.secret_wins({"sasl.mechanisms": "PLAIN", "fetch.max.bytes": "1"}, BOUND), **BOUND}
    assert "sasl.mechanisms" not in merged and merged["sasl.mechanism"] == "SCRAM-SHA-512"
    assert merged["fetch.max.bytes"] == "1"


@pytest.mark.parametrize("server", ["169.254.169.254:80", "2852039166:80", "0xa9.0xfe.0xa9.0xfe:80",
                                    "metadata.google.internal:80", "METADATA.GOOGLE.INTERNAL.:80", "metadata:80",
                                    "instance-data:80", "169.254.170.2:80"])
def test_a_metadata_service_is_never_a_broker(server: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_streamcopy(spec(servers=[server]))
    assert e.value.field == "source.kafka.bootstrapServers[0]" and "metadata service" in e.value.message


def test_a_broker_port_must_be_a_tcp_port() -> None:
    with pytest.raises(SpecError, match="not a TCP port"):
        parse_streamcopy(spec(servers=["kafka:99999"]))


def spec(servers: list[str] | None = None, consumer: dict[str, str] | None = None,
         secret: str | None = None) -> dict[str, Any]:
    kafka: dict[str, Any] = {"bootstrapServers": servers or ["kafka:9092"], "topics": ["t"],
                             "consumer": consumer or {}}
    if secret:
        kafka["secretRef"] = {"name": secret}
    return {"source": {"kafka": kafka}, "target": {"table": "s3://bucket/t/"}}


@pytest.mark.parametrize(("consumer", "field"), [
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "security.protocol"),
    ({"security.protocol": "plaintext"}, "security.protocol"),
    ({"enable.ssl.certificate.verification": "false"}, "enable.ssl.certificate.verification"),
    ({"ssl.endpoint.identification.algorithm": "none"}, "ssl.endpoint.identification.algorithm"),
    ({"client.dns.lookup": "resolve_canonical_bootstrap_servers_only"}, "client.dns.lookup"),
    ({"ssl.ca.location": "/tmp/mine.pem"}, "ssl.ca.location"),
    ({"ssl.cipher.suites": "aNULL"}, "ssl.cipher.suites"),
])
def test_with_a_secret_the_spec_cannot_weaken_the_connection(consumer: dict[str, str], field: str) -> None:
    """Refused by the operator already (it parses the spec), before any pod runs."""
    with pytest.raises(SpecError) as e:
        parse_streamcopy(spec(consumer=consumer, secret="kafka-credentials"))
    assert e.value.field == f"source.kafka.consumer.{field}"
    parse_streamcopy(spec(consumer=consumer))  # without a Secret there is no credential to weaken


def test_with_a_secret_the_spec_may_ask_for_tls_and_restate_the_safe_defaults() -> None:
    safe = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "ssl.endpoint.identification.algorithm": "https", "enable.ssl.certificate.verification": "true",
            "client.dns.lookup": "use_all_dns_ips"}
    parse_streamcopy(spec(consumer=safe, secret="kafka-credentials"))
    assert kafkacreds.binding_error(("kafka-0.corp:9093",), safe, BOUND) is None
