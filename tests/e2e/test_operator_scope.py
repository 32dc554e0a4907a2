"""The running operator keeps to the RBAC docs/security.md lists: it never watches
CustomResourceDefinitions or Namespaces (kopf's scanning is off in both modes)."""

from __future__ import annotations

from harness.fixtures import Kube

from .conftest import API, OperatorProcess, wait_phase


def test_cluster_wide_operator_never_watches_crds_or_namespaces(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess) -> None:
    assert operator_process.namespaces == ""  # the cluster-wide mode
    spec = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://out/{when}/", "format": "csv"}}
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "scope", "namespace": kube_namespace}, "spec": spec}, "copyjobs")
    wait_phase(kube.client, kube_namespace, "scope", "Failed", timeout=60)  # the operator is at work
    counts = kube.server.request_counts
    assert counts["WATCH customresourcedefinitions"] == 0
    assert counts["WATCH namespaces"] == 0 and counts["LIST namespaces"] == 0
