"""Each run's NetworkPolicy, created by the operator with the SparkApplication, on the real API server
as the chart's ServiceAccount with the chart's RBAC (lading_operator.netpol, controller._isolate)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from harness.fixtures import Kube
from harness.identities import Identity
from lading_operator import controller, k8s, netpol
from lading_operator import reconcile as rc
from lading_operator.kinds import COPYJOB

API = "lading.io/v1alpha1"
SPEC = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://out/x/", "format": "csv"}}
OPERATOR_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "lading-system"}},
                 "podSelector": {"matchLabels": {"app.kubernetes.io/name": "lading",
                                                 "app.kubernetes.io/component": "operator"}}}


@pytest.fixture
def api(kube: Kube, operator_identity: Identity, monkeypatch: pytest.MonkeyPatch) -> Iterator[Kube]:
    monkeypatch.setenv("KUBECONFIG", operator_identity.kubeconfig)
    monkeypatch.setenv(netpol.ENV, json.dumps({"operator": OPERATOR_PEER, "ports": [4040, 8090]}))
    k8s.reset_client()
    yield kube
    k8s.reset_client()


def submit(kube: Kube, namespace: str, name: str) -> tuple[rc.Plan, dict[str, Any]]:
    job = kube.client.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": name, "namespace": namespace},
                              "spec": SPEC}, "copyjobs")
    obs = controller.observe(COPYJOB, job)
    plan = rc.plan(obs, kind=COPYJOB)
    assert plan.create is not None
    controller.execute(COPYJOB, obs, plan)
    return plan, job


@pytest.mark.k8s
def test_the_run_gets_its_own_networkpolicy_owned_by_its_application(api: Kube, kube_namespace: str) -> None:
    kube, ns = api, kube_namespace
    plan, _ = submit(kube, ns, "exp")
    assert plan.create is not None
    name = plan.create["metadata"]["name"]
    app = kube.client.get("sparkoperator.k8s.io/v1beta2", "sparkapplications", ns, name)
    policy = kube.client.get("networking.k8s.io/v1", "networkpolicies", ns, name)
    assert policy["metadata"]["ownerReferences"][0]["uid"] == app["metadata"]["uid"]
    assert policy["spec"]["podSelector"] == netpol.pod_selector(plan.create)
    assert policy["spec"]["ingress"][0]["from"] == [{"podSelector": netpol.pod_selector(plan.create)}]
    assert policy["spec"]["ingress"][1]["from"] == [OPERATOR_PEER]
    # a later pass follows the run and leaves the policy as it is
    controller.reconcile(COPYJOB, ns, "exp")
    again = kube.client.get("networking.k8s.io/v1", "networkpolicies", ns, name)
    assert again["metadata"]["resourceVersion"] == policy["metadata"]["resourceVersion"]


@pytest.mark.k8s
def test_without_the_setting_no_policy_is_created(api: Kube, kube_namespace: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(netpol.ENV, "off")
    plan, _ = submit(api, kube_namespace, "plain")
    assert plan.create is not None
    names = [p["metadata"]["name"] for p in api.client.list("networking.k8s.io/v1", "networkpolicies", kube_namespace)]
    assert plan.create["metadata"]["name"] not in names


def test_a_malformed_setting_is_refused() -> None:
    import os

    old = os.environ.get(netpol.ENV)
    try:
        for bad in ("on", "{}", '{"operator": {}, "ports": [4040]}', '{"operator": {"podSelector": {}}, "ports": []}'):
            os.environ[netpol.ENV] = bad
            with pytest.raises(ValueError, match=netpol.ENV):
                netpol.settings_from_env()
    finally:
        os.environ.pop(netpol.ENV, None)
        if old is not None:
            os.environ[netpol.ENV] = old
