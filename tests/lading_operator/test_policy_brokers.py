"""The policy's ``brokers`` section: which Kafka brokers a namespace's StreamCopies may name."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lading_operator import kinds, reconcile
from lading_operator import policy as pol

IMAGE, ACCOUNT = "ghcr.io/lading/lading:0.1.0", "lading-spark"
DOC = {"allowedPrefixes": {"default": ["s3://lake/"]},
       "brokers": {"default": ["*.{namespace}.svc.cluster.local:9092"],
                   "namespaces": {"analytics": ["kafka-0.corp:9093", "Kafka-1.corp.:9093"]}}}


def stream(*servers: str) -> dict[str, Any]:
    return {"source": {"kafka": {"bootstrapServers": list(servers), "topics": ["t"]}},
            "target": {"table": "s3://lake/t/"}}


def verdict(policy: pol.Policy, namespace: str, spec: dict[str, Any]) -> tuple[str, str] | None:
    def check(ns: str, uris: list[tuple[str, str]], spark: Any) -> str | None:
        return pol.check_resource(policy, ns, uris, spark, IMAGE, ACCOUNT)

    return reconcile.validate(kinds.STREAMCOPY, spec, namespace, check, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))


@pytest.mark.parametrize(("namespace", "servers", "refused"), [
    ("analytics", ["kafka-0.corp:9093"], None),
    ("analytics", ["KAFKA-1.corp:9093", "kafka-0.corp.:9093"], None),
    ("analytics", ["kafka-0.corp:9093", "evil.example:9093"], "spec.source.kafka.bootstrapServers[1]"),
    ("analytics", ["kafka-0.corp:9094"], "spec.source.kafka.bootstrapServers[0]"),
    ("team-a", ["kafka.team-a.svc.cluster.local:9092"], None),
    ("team-a", ["kafka.team-b.svc.cluster.local:9092"], "spec.source.kafka.bootstrapServers[0]"),
    ("team-a", ["team-a.svc.cluster.local:9092"], "spec.source.kafka.bootstrapServers[0]"),  # the domain itself
    ("team-a", ["kafka.evil-team-a.svc.cluster.local:9092"], "spec.source.kafka.bootstrapServers[0]"),
])
def test_a_namespace_names_only_its_brokers(namespace: str, servers: list[str], refused: str | None) -> None:
    out = verdict(pol.parse_policy(DOC), namespace, stream(*servers))
    if refused is None:
        assert out is None
    else:
        assert out is not None and out[0] == "Forbidden" and out[1].startswith(refused), out
        assert "policy.brokers" in out[1]


def test_without_a_brokers_section_any_checked_broker_is_allowed() -> None:
    policy = pol.parse_policy({"allowedPrefixes": {"default": ["s3://lake/"]}})
    assert policy.brokers is None
    assert verdict(policy, "team-a", stream("anything.example:9092")) is None
    # the address checks hold whatever the policy says: refused as a spec error first
    out = verdict(policy, "team-a", stream("169.254.169.254:9092"))
    assert out is not None and out[0] == "InvalidSpec" and "metadata service" in out[1]


def test_an_empty_brokers_list_allows_none() -> None:
    policy = pol.parse_policy({"brokers": {"default": []}})
    out = verdict(policy, "team-a", stream("kafka:9092"))
    assert out is not None and "no broker is allowed in namespace 'team-a'" in out[1]


@pytest.mark.parametrize(("entry", "says"), [
    ("169.254.169.254:80", "metadata service"), ("metadata.google.internal:80", "metadata service"),
    ("kafka", "host:port"), ("kafka:0", "TCP port"), ("*.corp:99999", "TCP port"),
])
def test_a_policy_entry_that_could_never_be_a_broker_is_refused_at_start(entry: str, says: str) -> None:
    with pytest.raises(pol.PolicyError, match="brokers.default\\[0\\]") as e:
        pol.parse_policy({"brokers": {"default": [entry]}})
    assert says in str(e.value)
