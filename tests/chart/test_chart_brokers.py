"""The chart's policy.brokers reaches the operator's policy file; unset, the file has no brokers section."""

from __future__ import annotations

from pathlib import Path

from chart import helm

from lading_operator import policy as pol


def _policy(values: dict[str, object], tmp_path: Path) -> pol.Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(helm.one(helm.render(values), "ConfigMap")["data"]["policy.yaml"])
    return pol.load_policy(str(path))


def test_brokers_read_back_as_the_values_say(tmp_path: Path) -> None:
    p = _policy({"policy": {"enabled": True, "brokers": {"default": ["*.{namespace}.svc:9092"],
                                                         "namespaces": {"analytics": ["kafka-0.corp:9093"]}}}},
                tmp_path)
    assert p.brokers is not None
    assert p.brokers.for_namespace("team-a") == ("*.team-a.svc:9092",)
    assert p.brokers.for_namespace("analytics") == ("kafka-0.corp:9093",)


def test_without_brokers_values_the_policy_has_no_brokers_section(tmp_path: Path) -> None:
    assert _policy({"policy": {"enabled": True}}, tmp_path).brokers is None
