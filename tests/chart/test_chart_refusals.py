"""Values the chart would render into objects Kubernetes rejects, or a pod that cannot start:
`helm template` and `helm install` refuse them with a message naming the value."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from chart import helm

LONG_RELEASE = "r" * 53  # the longest release name helm accepts: <release>-lading-metrics is 67 characters


def refused(values: dict[str, Any], *args: str, release: str = "x") -> str:
    result = helm.run_helm("template", release, str(helm.CHART), *args, values=values)
    assert result.returncode != 0, f"rendered: {values}"
    return result.stderr


@pytest.mark.parametrize("values", [
    {"metrics": {"port": 9090}, "operator": {"healthPort": 9090}},
    {"metrics": {"port": 8080}},  # the default healthPort
    {"operator": {"healthPort": 9090}},  # the default metrics.port
])
def test_metrics_and_health_on_the_same_port_are_refused(values: dict[str, Any]) -> None:
    stderr = refused(values)
    assert "metrics.port and operator.healthPort are both" in stderr, stderr
    assert "address already in use" in stderr


def test_helm_install_refuses_the_same_port_too() -> None:
    result = helm.run_helm("install", "ops", str(helm.CHART), "--namespace", "lading-system", "--dry-run=client",
                           values={"metrics": {"port": 8080}})
    assert result.returncode != 0
    assert "metrics.port and operator.healthPort" in result.stderr


def test_distinct_ports_render_distinct_container_ports() -> None:
    deployment = helm.one(helm.render({"metrics": {"port": 9100}, "operator": {"healthPort": 9101}}), "Deployment")
    ports = [p["containerPort"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]]
    assert sorted(ports) == [9100, 9101]


@pytest.mark.parametrize("name", ["Bad_Name", "UPPER", "-lead", "trail-", "a..b", "x" * 254])
def test_a_bad_service_account_name_is_refused(name: str) -> None:
    assert "/serviceAccount/name" in refused({"serviceAccount": {"name": name}})


@pytest.mark.parametrize("name", ["ops", "lading-operator", "a.b-c", "x" * 253])
def test_a_good_service_account_name_renders(name: str) -> None:
    objects = helm.render({"serviceAccount": {"name": name}})
    accounts = {a["metadata"]["name"] for a in helm.by_kind(objects, "ServiceAccount")}
    assert accounts == {name, "lading-spark"}  # the operator's and the Spark driver's
    deployment = helm.one(objects, "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == name


@pytest.mark.parametrize("key", ["fullnameOverride", "nameOverride"])
def test_a_bad_name_override_is_refused(key: str) -> None:
    assert f"/{key}" in refused({key: "Bad_Name"})


@pytest.mark.parametrize("values, release", [
    ({"fullnameOverride": "a" * 56}, "x"),
    ({"fullnameOverride": "a" * 63}, "x"),
    ({}, LONG_RELEASE),
])
def test_a_metrics_service_name_over_63_characters_is_refused(values: dict[str, Any], release: str) -> None:
    stderr = refused({**values, "metrics": {"service": {"enabled": True}}}, release=release)
    assert "the metrics Service name" in stderr and "Kubernetes allows 63" in stderr, stderr
    assert "fullnameOverride" in stderr


def test_a_metrics_service_name_not_a_dns_1035_label_is_refused() -> None:
    stderr = refused({"fullnameOverride": "9ops", "metrics": {"service": {"enabled": True}}})
    assert "is not a DNS-1035 label" in stderr, stderr


def test_the_longest_allowed_prefix_renders_a_valid_service() -> None:
    objects = helm.render({"fullnameOverride": "a" * 55, "metrics": {"service": {"enabled": True}}})
    service = helm.one(objects, "Service")
    assert service["metadata"]["name"] == "a" * 55 + "-metrics"
    assert len(service["metadata"]["name"]) == 63
    kubernetes_validate.validate(service, "1.28", strict=True)


def test_long_names_without_the_metrics_service_still_render() -> None:
    """Nothing else the chart creates is limited to 63 characters (Deployments, ConfigMaps,
    NetworkPolicies and RBAC objects take DNS subdomains or path segments)."""
    result = helm.run_helm("template", LONG_RELEASE, str(helm.CHART), values={"fullnameOverride": "a" * 63})
    assert result.returncode == 0, result.stderr
    result = helm.run_helm("template", LONG_RELEASE, str(helm.CHART), values={})
    assert result.returncode == 0, result.stderr


def test_two_replicas_without_leader_election_are_refused() -> None:
    stderr = refused({"operator": {"replicas": 2, "leaderElection": {"enabled": False}}})
    assert "operator.replicas is 2 but operator.leaderElection.enabled is false" in stderr, stderr


@pytest.mark.parametrize("election", [
    {"renewDeadlineSeconds": 15},  # = leaseDurationSeconds
    {"retryPeriodSeconds": 10},  # = renewDeadlineSeconds
    {"leaseDurationSeconds": 5},
])
def test_a_renew_deadline_not_shorter_than_the_lease_is_refused(election: dict[str, Any]) -> None:
    stderr = refused({"operator": {"leaderElection": election}})
    assert "retryPeriodSeconds" in stderr and "a leader must give up before its lease runs out" in stderr, stderr
