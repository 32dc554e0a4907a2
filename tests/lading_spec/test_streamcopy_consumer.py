"""``source.kafka.consumer``: an allow-list; credentials go to the Secret, and nothing that runs a
program, loads a library, reaches an unvalidated address or replaces the brokers gets through,
neither into the parsed spec nor into the job document the operator renders."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from lading_spec.errors import SpecError
from lading_spec.kafkacreds import is_credential_property
from lading_spec.streamcopy import (
    CONSUMER_PROPERTIES,
    KafkaSource,
    consumer_property_error,
    escape_property_error,
    parse_streamcopy,
)

SECRET_VALUE = "S3CRET-value-that-must-not-leak"
ALLOWED = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "fetch.max.bytes": "52428800",
           "group.id": "analytics-orders", "ssl.endpoint.identification.algorithm": "https",
           "client.id": "lading", "session.timeout.ms": "45000"}
CREDENTIALS = [
    "sasl.jaas.config", "sasl.password", "sasl.username", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.password", "ssl.keystore.key", "sasl.oauthbearer.client.secret", "ssl.key.pem",
    "ssl.certificate.pem", "ssl.ca.pem", "ssl.key.location", "ssl.keystore.location", "ssl_key",
    "sasl.oauthbearer.config", "SASL.PASSWORD", "some.future.token", "aws.credentials",
]
ESCAPES = [
    "bootstrap.servers", "metadata.broker.list", "BOOTSTRAP.SERVERS", "plugin.library.paths",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.principal", "sasl.kerberos.keytab", "sasl.kerberos.service.name",
    "ssl.engine.location", "ssl.engine.id", "ssl_engine_callback_data", "ssl.providers",
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.metadata.authentication.type",
    "enable.sasl.oauthbearer.unsecure.jwt", "sasl.oauthbearer.assertion.jwt.template.file",
    "sasl.oauthbearer.assertion.private.key.file",
]
LADING_OWN = ["enable.auto.commit", "enable.auto.offset.store", "auto.offset.reset", "enable.partition.eof"]
NOT_LISTED = ["debug", "builtin.features", "allow.auto.create.topics", "statistics.interval.ms", "Security.Protocol",
              "sasl.oauthbearer.method"]


def spec_with(consumer: dict[str, Any], secret: str | None = "kafka-credentials") -> dict[str, Any]:
    kafka: dict[str, Any] = {"bootstrapServers": ["kafka:9093"], "topics": ["orders"], "consumer": consumer}
    if secret:
        kafka["secretRef"] = {"name": secret}
    return {"source": {"kafka": kafka}, "target": {"table": "s3://lake/ns/orders/"}}


def test_documented_consumer_properties_are_accepted() -> None:
    parsed = parse_streamcopy(spec_with(ALLOWED))
    assert isinstance(parsed.source, KafkaSource) and parsed.source.consumer == ALLOWED


def test_the_allow_list_holds_no_credential_or_escape() -> None:
    for key in CONSUMER_PROPERTIES:
        assert not is_credential_property(key) and escape_property_error(key) is None, key
        assert consumer_property_error(key) is None, key


@pytest.mark.parametrize("key", CREDENTIALS)
def test_credentials_are_refused_and_sent_to_the_secret(key: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_streamcopy(spec_with({"security.protocol": "SASL_SSL", key: SECRET_VALUE}))
    assert exc.value.field == f"source.kafka.consumer.{key}"
    assert "Secret named by source.kafka.secretRef" in exc.value.message
    assert SECRET_VALUE not in str(exc.value)


@pytest.mark.parametrize("key", ESCAPES)
def test_escapes_are_refused(key: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_streamcopy(spec_with({key: "x"}))
    assert exc.value.field == f"source.kafka.consumer.{key}"
    assert "never allowed" in exc.value.message
    if key.lower() in ("bootstrap.servers", "metadata.broker.list"):
        assert "bootstrapServers" in exc.value.message


@pytest.mark.parametrize("key", LADING_OWN)
def test_lading_own_properties_are_refused(key: str) -> None:
    with pytest.raises(SpecError, match="lading sets this property"):
        parse_streamcopy(spec_with({key: "true"}))


@pytest.mark.parametrize("key", NOT_LISTED)
def test_properties_outside_the_allow_list_are_refused(key: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_streamcopy(spec_with({key: "x"}))
    assert exc.value.field == f"source.kafka.consumer.{key}" and "docs/streamcopy.md" in exc.value.message


@pytest.mark.parametrize("key", CREDENTIALS + ESCAPES + LADING_OWN + NOT_LISTED)
def test_the_operator_refuses_them_before_rendering(key: str) -> None:
    """The operator's validate() (InvalidSpec, nothing created) refuses every one of them."""
    from lading_operator import kinds, reconcile

    spec = spec_with({**ALLOWED, key: SECRET_VALUE})
    refused = reconcile.validate(kinds.STREAMCOPY, spec, "ns", None, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert refused is not None and refused[0] == "InvalidSpec", refused
    assert f"source.kafka.consumer.{key}" in refused[1] and SECRET_VALUE not in refused[1]


def test_the_rendered_job_document_carries_no_credential() -> None:
    """What validate() lets through renders into the SparkApplication with the Secret's name only."""
    from lading_operator import kinds, reconcile, render

    spec = spec_with(ALLOWED)
    assert reconcile.validate(kinds.STREAMCOPY, spec, "ns", None, dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) is None
    run = render.RunIdentity("StreamCopy", "ns", "s", "uid", 1, "r1", dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    app = render.build_sparkapplication(spec, run, operator_fields=kinds.STREAMCOPY.operator_fields,
                                        continuous=True)
    text = json.dumps(app)
    job = next(json.loads(a) for a in app["spec"]["arguments"] if a.lstrip().startswith("{"))
    consumer = job["spec"]["source"]["kafka"]["consumer"]
    assert consumer == ALLOWED
    for key in consumer:
        assert consumer_property_error(key) is None
    for key in CREDENTIALS + ESCAPES:
        assert f'"{key}"' not in text, key
    assert "kafka-credentials" in text  # the Secret by name: the pods mount it, the document holds no value
