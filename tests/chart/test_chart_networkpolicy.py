"""The optional NetworkPolicies select the pods they are about (the operator's, and the Spark
pods the operator renders) and open exactly what docs/security.md#network lists."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from typing import Any

from chart import helm

from lading_operator import netpol, render
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


def test_on_by_default_and_off_when_asked() -> None:
    """``helm template`` with the default values renders the operator's policy and the Spark pods'
    policy in the (default) job namespace, and tells the operator to create each run's own."""
    found = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in
             helm.by_kind(helm.render(helm.CLUSTER), "NetworkPolicy")}
    assert found == {(helm.NAMESPACE, OPERATOR), (helm.NAMESPACE, SPARK)}
    assert run_policy_settings(helm.CLUSTER) is not None
    off = {"networkPolicy": {"enabled": False}}
    assert not helm.by_kind(helm.render(off), "NetworkPolicy") and run_policy_settings(off) is None


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
        (ui,) = policy["ingress"]  # the operator only: a run's pods admit each other by their own policy
        assert ports(ui) == {4040, PROGRESS_PORT}
        assert not selects(ui["from"][0]["podSelector"], labels["executor"])  # the Spark UI and a StreamCopy driver's /progress
        assert selects(ui["from"][0]["podSelector"], operator_labels)
        assert selects(ui["from"][0]["namespaceSelector"], {"kubernetes.io/metadata.name": helm.NAMESPACE})
        egress_ports = [ports(r) for r in policy["egress"]]
        assert egress_ports == [set(), {53}, {443, 6443}, {443, 9093}]  # each other, DNS, API server, S3/Kafka


# Where the clouds' instance metadata services answer (AWS IMDS and ECS, AWS IPv6, any link-local).
METADATA = ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "fe80::a9fe:a9fe")


def allows(rule: dict[str, Any], address: str, port: int) -> bool:
    """Whether one egress rule lets a pod reach ``address:port`` (an address outside the cluster's pods)."""
    if rule.get("ports") and port not in ports(rule):
        return False
    if not rule.get("to"):
        return True
    ip = ipaddress.ip_address(address)
    for peer in rule["to"]:
        block = peer.get("ipBlock")
        if block and ip in ipaddress.ip_network(block["cidr"]) and \
                not any(ip in ipaddress.ip_network(e) for e in block.get("except") or ()):
            return True
    return False


def spark_egress(values: dict[str, Any]) -> list[list[dict[str, Any]]]:
    found = helm.by_kind(helm.render(values), "NetworkPolicy")
    return [p["spec"]["egress"] for p in found if p["metadata"]["name"] == SPARK]


NO_API_CIDRS = {**helm.EVERYTHING, "networkPolicy": {**helm.EVERYTHING["networkPolicy"], "apiServer": {"cidrs": []}}}
EXPLICIT_ANYWHERE = {**helm.EVERYTHING, "networkPolicy": {**helm.EVERYTHING["networkPolicy"], "sparkEgress": [
    {"ports": [{"port": 80, "protocol": "TCP"}], "to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]},
    {"to": [{"podSelector": {"matchLabels": {"app": "minio"}}}]},
]}}


def test_spark_pods_reach_no_metadata_service_but_dns_storage_and_the_api_server_stay_open() -> None:
    """Every egress rule that would allow any address (no ``to``, an empty ``apiServer.cidrs``, an
    ipBlock of 0.0.0.0/0 or ::/0) leaves out 169.254.0.0/16, fe80::/10 and fd00:ec2::254, on
    every port but DNS's (NodeLocal DNSCache answers at 169.254.20.10:53)."""
    for values in (helm.EVERYTHING, NO_API_CIDRS, EXPLICIT_ANYWHERE):
        for egress in spark_egress(values):
            for rule in egress:
                for block in (peer["ipBlock"] for peer in rule.get("to") or () if "ipBlock" in peer):
                    cidr = ipaddress.ip_network(block["cidr"])  # what the API server checks: except ⊂ cidr
                    assert all(ipaddress.ip_network(e).subnet_of(cidr) for e in block.get("except") or ())  # type: ignore[arg-type]
            for address in METADATA:
                for port in (80, 443, 6443, 8080, 9093):
                    assert not any(allows(r, address, port) for r in egress), (values is helm.EVERYTHING, address, port)
            assert any(allows(r, "169.254.20.10", 53) for r in egress)
            assert any(allows(r, "10.96.0.1", 443) for r in egress)
            if values is not EXPLICIT_ANYWHERE:
                assert any(allows(r, "52.216.8.1", 443) for r in egress) and any(allows(r, "2600:1f18::1", 443) for r in egress)
    explicit = spark_egress(EXPLICIT_ANYWHERE)[0]
    assert any(allows(r, "52.216.8.1", 80) for r in explicit) and any(allows(r, "2600:1f18::1", 80) for r in explicit)


def run_policy_settings(values: dict[str, Any]) -> netpol.Settings | None:
    """What the chart tells the operator about each run's NetworkPolicy (LADING_NETWORK_POLICY)."""
    deployment = helm.one(helm.render(values), "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    old = os.environ.get(netpol.ENV)
    try:
        os.environ.pop(netpol.ENV, None)
        if env.get(netpol.ENV) is not None:
            os.environ[netpol.ENV] = env[netpol.ENV]
        return netpol.settings_from_env()
    finally:
        os.environ.pop(netpol.ENV, None)
        if old is not None:
            os.environ[netpol.ENV] = old


def app_pods(namespace: str, name: str, run_id: str, attempt: int = 1) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """A rendered SparkApplication, and its driver's and an executor's labels as they reach the pods:
    the rendered ``spec.driver.labels``/``spec.executor.labels`` (spark-operator passes them as
    spark.kubernetes.{driver,executor}.label.*), plus what spark-operator and Spark add themselves."""
    run = render.RunIdentity(kind="CopyJob", namespace=namespace, name=name, uid="u", generation=1,
                             run_id=run_id, run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), attempt=attempt)
    app = render.build_sparkapplication({"from": {"query": "SELECT 1"}, "to": {"files": "s3://b/o/"}}, run,
                                        installation=render.Installation())
    added = {"sparkoperator.k8s.io/app-name": app["metadata"]["name"],
             "sparkoperator.k8s.io/launched-by-spark-operator": "true", "spark-app-selector": f"spark-{run_id}",
             "spark-app-name": app["metadata"]["name"]}
    pods = {"driver": {**app["spec"]["driver"]["labels"], **added, "spark-role": "driver"},
            "executor": {**app["spec"]["executor"]["labels"], **added, "spark-role": "executor", "spark-exec-id": "1"}}
    return app, pods


def test_each_run_admits_its_own_pods_and_the_operator_only() -> None:
    """The policy the operator creates with each SparkApplication (lading_operator.netpol), with the
    settings the chart gives it: its driver and executors reach each other, the operator reaches the
    UI and /progress, and no other run's pods (same namespace, same resource's other attempt or run,
    another resource) get in."""
    settings = run_policy_settings(helm.CLUSTER)
    assert settings is not None
    app, pods = app_pods("team-a", "orders", "r1")
    policy = netpol.build_networkpolicy(app, "app-uid", settings)
    assert policy["metadata"]["ownerReferences"] == [{"apiVersion": render.SPARK_API_VERSION, "kind": "SparkApplication",
                                                      "name": app["metadata"]["name"], "uid": "app-uid",
                                                      "controller": True}]
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert selects(spec["podSelector"], pods["driver"]) and selects(spec["podSelector"], pods["executor"])
    own, operator = spec["ingress"]
    assert "ports" not in own and selects(own["from"][0]["podSelector"], pods["executor"])
    assert "namespaceSelector" not in own["from"][0]  # the policy's own namespace only
    operator_pod = helm.one(helm.render(helm.CLUSTER), "Deployment")["spec"]["template"]["metadata"]["labels"]
    peer = operator["from"][0]
    assert selects(peer["podSelector"], operator_pod) and not selects(peer["podSelector"], pods["driver"])
    assert selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": helm.NAMESPACE})
    assert not selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": "team-a"})
    assert ports(operator) == {4040, PROGRESS_PORT}
    for other in (app_pods("team-a", "orders", "r2")[1], app_pods("team-a", "orders", "r1", attempt=2)[1],
                  app_pods("team-a", "payments", "r1")[1]):
        for role in ("driver", "executor"):
            assert not selects(own["from"][0]["podSelector"], other[role])
            assert not selects(spec["podSelector"], other[role])
