"""The running operator keeps to the RBAC docs/security.md lists: it never watches
CustomResourceDefinitions or Namespaces (kopf's scanning is off in both modes), and it
gets no Forbidden answer from the real API server for what it does.

It runs as the chart's ServiceAccount; its requests are read from the API server's audit log."""

from __future__ import annotations

from collections import Counter

import pytest

from harness.control_plane import audit_requests
from harness.fixtures import Kube
from harness.identities import Identity

from .conftest import API, OperatorProcess, wait_phase


def test_cluster_wide_operator_never_watches_crds_or_namespaces(
        kube: Kube, kube_namespace: str, operator_identity: Identity, operator_process: OperatorProcess) -> None:
    if not (kube.endpoint.directory / "audit.log").exists():
        pytest.skip("the API server's audit log is this machine's control plane's (not LADING_TEST_KUBECONFIG's)")
    assert operator_process.namespaces == ""  # the cluster-wide mode
    spec = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://out/{when}/", "format": "csv"}}
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "scope", "namespace": kube_namespace}, "spec": spec}, "copyjobs")
    wait_phase(kube.client, kube_namespace, "scope", "Failed", timeout=60)  # the operator is at work
    requests = audit_requests(kube.endpoint, operator_identity.user)
    counts = Counter(f"{r.verb} {r.resource}" for r in requests)
    assert counts["watch copyjobs"] >= 1, counts  # the log holds the operator's requests
    assert counts["watch customresourcedefinitions"] == 0 and counts["list customresourcedefinitions"] == 0
    assert counts["watch namespaces"] == 0 and counts["list namespaces"] == 0
    # cluster-wide requests and this test's namespace: the log is the worker's control plane's, and other
    # tests (the controller's real-Role 403 tests) take a verb from this identity in their own namespaces
    assert [r for r in requests if r.code == 403 and r.namespace in ("", kube_namespace)] == []
