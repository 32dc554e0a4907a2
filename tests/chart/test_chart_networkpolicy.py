"""The optional NetworkPolicies select the pods they are about (the operator's, and the Spark
pods the operator renders) and open exactly what docs/security.md#network lists."""

from __future__ import annotations

import datetime as dt
from typing import Any

from chart import helm

from lading_operator import render
from lading_spec.streamprogress import PROGRESS_PORT

OPERATOR = f"{helm.RELEASE}-lading-operator"
SPARK = f"{helm.RELEASE}-lading-spark"


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector's verdict on a pod's labels (matchLabels and matchExpressions)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        ok = {"Exists": key in labels, "DoesNotExist": key not in labels,
              "In": labels.get(key) in values, "NotIn": labels.get(key) not in values}[op]
        if not ok:
            return False
    return True


def policies() -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["metadata"]["namespace"], p["metadata"]["name"]): p
            for p in helm.by_kind(helm.render(helm.EVERYTHING), "NetworkPolicy")}


def spark_pod_labels(namespace: str) -> dict[str, dict[str, str]]:
    """The labels the operator renders on driver and executor pods (plus spark-role, as Spark sets it)."""
    run = render.RunIdentity(kind="CopyJob", namespace=namespace, name="orders", uid="u", generation=1,
                             run_id="r1", run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    app = render.build_sparkapplication({"from": {"query": "SELECT 1"}, "to": {"files": "s3://b/o/"}}, run,
                                        installation=render.Installation())
    return {role: {**app["spec"][role]["labels"], "spark-role": role} for role in ("driver", "executor")}


def ports(rule: dict[str, Any]) -> set[int]:
    return {p["port"] for p in rule.get("ports") or []}


def test_off_by_default() -> None:
    assert not helm.by_kind(helm.render(helm.CLUSTER), "NetworkPolicy")


def test_one_for_the_operator_and_one_per_job_namespace() -> None:
    assert set(policies()) == {(helm.NAMESPACE, OPERATOR)} | {(ns, SPARK) for ns in ("team-a", "team-b", "batch")}


def test_operator_policy_selects_the_operator_pod_and_opens_health_metrics_api_and_driver_ui() -> None:
    policy = policies()[(helm.NAMESPACE, OPERATOR)]["spec"]
    pod_labels = helm.one(helm.render(helm.EVERYTHING), "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selects(policy["podSelector"], pod_labels)
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    assert [ports(r) for r in policy["ingress"]] == [{8080}, {9090}]
    assert policy["ingress"][1]["from"] == helm.EVERYTHING["networkPolicy"]["metricsFrom"]
    egress = {frozenset(ports(r)): r for r in policy["egress"]}
    assert {53} in [set(p) for p in egress]
    assert [b["ipBlock"]["cidr"] for b in egress[frozenset({443, 6443})]["to"]] == ["10.96.0.1/32", "172.20.0.0/16"]
    (ui_peer,) = egress[frozenset({4040, PROGRESS_PORT})]["to"]  # the Spark UI and a StreamCopy's /progress
    for ns in ("team-a", "batch"):
        assert selects(ui_peer["namespaceSelector"], {"kubernetes.io/metadata.name": ns})
        labels = spark_pod_labels(ns)
        assert selects(ui_peer["podSelector"], labels["driver"])
        assert not selects(ui_peer["podSelector"], labels["executor"])
    assert not selects(ui_peer["namespaceSelector"], {"kubernetes.io/metadata.name": "kube-system"})


def test_spark_policy_selects_the_rendered_spark_pods_and_lets_the_operator_read_the_ui() -> None:
    operator_labels = helm.one(helm.render(helm.EVERYTHING), "Deployment")["spec"]["template"]["metadata"]["labels"]
    for ns in ("team-a", "team-b", "batch"):
        policy = policies()[(ns, SPARK)]["spec"]
        labels = spark_pod_labels(ns)
        assert selects(policy["podSelector"], labels["driver"]) and selects(policy["podSelector"], labels["executor"])
        assert not selects(policy["podSelector"], {"app": "something-else"})
        between, ui = policy["ingress"]
        assert selects(between["from"][0]["podSelector"], labels["executor"]) and "ports" not in between
        assert ports(ui) == {4040, PROGRESS_PORT}  # the Spark UI and a StreamCopy driver's /progress
        assert selects(ui["from"][0]["podSelector"], operator_labels)
        assert selects(ui["from"][0]["namespaceSelector"], {"kubernetes.io/metadata.name": helm.NAMESPACE})
        egress_ports = [ports(r) for r in policy["egress"]]
        assert egress_ports == [set(), {53}, {443, 6443}, {443, 9093}]  # each other, DNS, API server, S3/Kafka
