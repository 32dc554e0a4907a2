"""Consumer properties: the spec's, the credentials Secret's (mounted files), JAAS translated, never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from lading_jobs.stream import kafka as kf

BOUND = {"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}
"""What a credentials Secret says it is for (lading_spec.kafkacreds)."""
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="lading" password="s3cr\\"et";'


def test_secret_files_become_properties_and_jaas_becomes_username_and_password(tmp_path: Path) -> None:
    (tmp_path / "sasl.jaas.config").write_text(JAAS + "\n")
    (tmp_path / "ssl.key.password").write_text("k3y")
    for key, value in BOUND.items():
        (tmp_path / key).write_text(value)
    (tmp_path / "..data").mkdir()  # the Secret volume's own bookkeeping is not a property
    secret = kf.secret_properties(str(tmp_path))
    assert secret == {"sasl.jaas.config": JAAS, "ssl.key.password": "k3y", **BOUND}
    config = kf.consumer_config(("b:9092",), {"security.protocol": "SASL_SSL", "enable.auto.commit": "true"},
                                "lading.ns.s", secret)
    assert config["sasl.username"] == "lading" and config["sasl.password"] == 's3cr\\"et'
    assert "sasl.jaas.config" not in config and config["ssl.key.password"] == "k3y"
    assert config["bootstrap.servers"] == "b:9092"  # the Secret's own is its binding, never a setting
    assert config["security.protocol"] == "SASL_SSL" and config["group.id"] == "lading.ns.s"
    # the engine's own settings win: nothing commits offsets behind the table's back
    assert config["enable.auto.commit"] == "false" and config["auto.offset.reset"] == "error"
    assert kf.secret_properties(str(tmp_path / "absent")) == {}


def test_a_jaas_config_without_credentials_is_refused() -> None:
    with pytest.raises(kf.KafkaError, match="sasl.username"):
        kf.translate({"sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required;"})


def test_librdkafka_errors_about_the_properties_never_show_secret_values() -> None:
    config = kf.consumer_config(("b:9092",), {"sasl.mechanism": "NOT-A-MECHANISM"}, "g",
                                {"sasl.password": "hunter2-secret", **BOUND, "sasl.mechanism": "NOT-A-MECHANISM"})
    with pytest.raises(kf.KafkaError) as e:
        kf.open_consumer({**config, "security.protocol": "bogus hunter2-secret"})
    assert "hunter2-secret" not in str(e.value) and "source.kafka.consumer" in str(e.value)


def test_lading_brokers_group_and_offsets_win_over_the_spec_and_the_secret() -> None:
    config = kf.consumer_config(("b:9092",), {"group.id": "from-spec", "fetch.max.bytes": "1024"}, "lading.ns.s",
                                {"sasl.password": "pw", "enable.auto.commit": "true", "auto.offset.reset": "latest",
                                 **BOUND})
    assert config["bootstrap.servers"] == "b:9092" and config["group.id"] == "lading.ns.s"
    assert config["enable.auto.commit"] == "false" and config["auto.offset.reset"] == "error"
    assert config["fetch.max.bytes"] == "1024" and config["sasl.password"] == "pw"


ESCAPES = ["metadata.broker.list", "plugin.library.paths", "sasl.kerberos.kinit.cmd", "sasl.kerberos.principal",
           "ssl.engine.location", "ssl.providers", "sasl.oauthbearer.token.endpoint.url",
           "sasl.oauthbearer.metadata.authentication.type", "enable.sasl.oauthbearer.unsecure.jwt"]


@pytest.mark.parametrize(("key", "side"), [*((k, s) for k in ESCAPES for s in ("spec", "secret")),
                                           ("bootstrap.servers", "spec")])
def test_escapes_are_refused_from_the_spec_and_from_the_secret(key: str, side: str) -> None:
    """The Secret is unvalidated: a key in it that runs a program, loads a library, reaches an
    address or replaces the brokers stops the stream, naming the key, never the value. (A
    Secret's ``bootstrap.servers`` is its binding, never a connection setting:
    test_kafka_credentials.py.)"""
    value = "evil.example:9092; id > /tmp/pwned"
    consumer, secret = ({key: value}, {}) if side == "spec" else ({}, {key: value})
    with pytest.raises(kf.KafkaError) as e:
        kf.consumer_config(("b:9092",), consumer, "g", secret)
    assert key in str(e.value) and value not in str(e.value)
    assert ("secretRef" in str(e.value)) == (side == "secret")


def test_escapes_in_the_mounted_secret_directory_are_refused(tmp_path: Path) -> None:
    (tmp_path / "sasl.password").write_text("pw")
    (tmp_path / "sasl.kerberos.kinit.cmd").write_text("touch /tmp/pwned")
    with pytest.raises(kf.KafkaError, match="sasl.kerberos.kinit.cmd"):
        kf.consumer_config(("b:9092",), {}, "g", kf.secret_properties(str(tmp_path)))


def test_transient_kafka_errors_are_waited_out_with_backoff_and_only_fatal_ones_fail() -> None:
    """A broker's rolling restart (_TRANSPORT, all brokers down, a leader moving) is waited out:
    inside a task's read (the stall timeout still bounds it) and around the driver's metadata
    requests. Authorization, authentication and fatal errors fail the batch as before. Real
    librdkafka error objects; tansu's in-memory broker loses its topics on a restart, so a
    restart mid-read is not shown end to end here."""
    from confluent_kafka import KafkaError as CK

    for code in (CK._TRANSPORT, CK._ALL_BROKERS_DOWN, CK._TIMED_OUT, CK.NOT_LEADER_FOR_PARTITION,
                 CK.LEADER_NOT_AVAILABLE, CK.REQUEST_TIMED_OUT, CK.NETWORK_EXCEPTION):
        assert kf.is_transient(CK(code)), CK(code)
    assert kf.is_transient(CK(CK.UNKNOWN, retriable=True))  # librdkafka says so itself
    for code in (CK.TOPIC_AUTHORIZATION_FAILED, CK.SASL_AUTHENTICATION_FAILED, CK._SSL, CK.OFFSET_OUT_OF_RANGE,
                 CK.UNKNOWN_TOPIC_OR_PART):
        assert not kf.is_transient(CK(code)), CK(code)
    assert not kf.is_transient(CK(CK._TRANSPORT, fatal=True))
    assert [kf.backoff(i) for i in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


def test_a_broker_name_that_resolves_to_a_link_local_address_is_refused() -> None:
    """The Spark app resolves each broker (here numeric spellings the resolver reads as
    169.254.169.254) and refuses a link-local answer, naming the field; other addresses pass."""
    for spelling in ("2852039166", "0xa9fea9fe", "169.254.169.254"):
        with pytest.raises(kf.KafkaError, match=r"source.kafka.bootstrapServers\[1\]: .* link-local"):
            kf.check_broker_addresses(("127.0.0.1:9092", f"{spelling}:80"))
    kf.check_broker_addresses(("127.0.0.1:9092", "no-such-host.invalid:9092"))  # librdkafka reports that one
