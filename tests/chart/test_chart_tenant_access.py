"""Tenants get what docs/security.md#tenant-access promises, from the chart's own ClusterRoles on
a real API server: ``lading-edit`` and ``lading-view`` are aggregated into Kubernetes' ``edit`` and
``view`` (by the controller manager, as on a cluster), so a tenant bound to ``edit`` in its
namespace creates CopyJobs there and nowhere else, one bound to ``view`` reads them and creates
none, and neither reads the Secrets of ``lading-system``."""

from __future__ import annotations

import pytest

from harness.client import ApiStatusError, KubeClient, wait_until
from harness.fixtures import Kube
from harness.identities import RELEASE_NAMESPACE, Identity, apply, tenant_binding

pytestmark = pytest.mark.k8s
API = "lading.io/v1alpha1"
SPEC = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://bucket/out/", "format": "csv"}}


def copyjob(namespace: str, name: str) -> dict[str, object]:
    return {"apiVersion": API, "kind": "CopyJob", "metadata": {"name": name, "namespace": namespace}, "spec": SPEC}


def tenant(kube: Kube, namespace: str, account: str, role: str) -> KubeClient:
    for obj in tenant_binding(namespace, account, role):
        apply(kube.client, obj)
    return kube.client_for(kube.service_account_token(namespace, account))


def aggregated(kube: Kube, role: str, verb: str) -> bool:
    """``role`` (edit, view) has picked up the chart's rule for ``verb`` on copyjobs."""
    rules = kube.client.get("rbac.authorization.k8s.io/v1", "clusterroles", None, role).get("rules") or []
    return any("lading.io" in r.get("apiGroups", []) and "copyjobs" in r.get("resources", [])
               and verb in r.get("verbs", []) for r in rules)


def refused(call: object) -> int:
    with pytest.raises(ApiStatusError) as exc:
        call()  # type: ignore[operator]
    return exc.value.code


def test_edit_and_view_tenants_get_the_charts_rules_in_their_namespace_only(
        kube: Kube, kube_namespace: str, operator_identity: Identity) -> None:
    del operator_identity  # installs the chart's RBAC, lading-edit and lading-view among it
    wait_until(lambda: aggregated(kube, "edit", "create") and aggregated(kube, "view", "list"), bool,
               timeout=60, interval=0.2, what="lading-edit/lading-view aggregated into edit/view")
    other = kube.create_namespace()
    kube.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "operator-only",
                        "namespace": RELEASE_NAMESPACE}, "stringData": {"k": "v"}}, "secrets")
    try:
        alice = tenant(kube, kube_namespace, "alice", "edit")
        bob = tenant(kube, kube_namespace, "bob", "view")
        assert alice.create(copyjob(kube_namespace, "mine"), "copyjobs")["metadata"]["name"] == "mine"
        assert refused(lambda: alice.create(copyjob(other, "theirs"), "copyjobs")) == 403
        assert refused(lambda: alice.get("v1", "secrets", RELEASE_NAMESPACE, "operator-only")) == 403
        assert refused(lambda: alice.list("v1", "secrets", RELEASE_NAMESPACE)) == 403
        assert [j["metadata"]["name"] for j in bob.list(API, "copyjobs", kube_namespace)] == ["mine"]
        assert refused(lambda: bob.create(copyjob(kube_namespace, "nope"), "copyjobs")) == 403
        assert refused(lambda: bob.delete(API, "copyjobs", kube_namespace, "mine")) == 403
        assert refused(lambda: bob.list(API, "copyjobs", other)) == 403
        assert refused(lambda: bob.get("v1", "secrets", RELEASE_NAMESPACE, "operator-only")) == 403
        alice.delete(API, "copyjobs", kube_namespace, "mine")
    finally:
        kube.client.delete("v1", "secrets", RELEASE_NAMESPACE, "operator-only")
        kube.delete_namespace(other)
