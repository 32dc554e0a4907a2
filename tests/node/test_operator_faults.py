"""The operator's and the cluster's faults on a real node: each case reads its answer from the
resource's status (and the data, where a run writes any).

- A driver that cannot start: a namespace ResourceQuota too small for it (the API server refuses
  the driver pod: spark-submit fails), and, at the same time in another namespace, a driver asking
  for more CPU than the node has (the pod stays Pending, Unschedulable): both resources fail with
  an error naming the cause, the second within the ``activeDeadlineSeconds`` its spec sets. No
  Spark run completes, so both are quick.
- The chart's Spark Role without ``create`` on pods: the driver cannot start its executors, and
  the resource fails with an error saying which permission is missing.
- The operator's leader pod deleted while a job runs: the standby takes the Lease over and the
  job ends once (one SparkApplication, one Succeeded, the rows written once).
"""

from __future__ import annotations

import io
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from node.jobs import PodsSeen, copy_spec, s3_setup, spark_pods, wait_until_true

from harness.client import KubeClient
from harness.node import NodeCluster, Release
from harness.spark_operator import SparkOperatorStandIn

pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]
API = "lading.io/v1alpha1"
LEASES = "coordination.k8s.io/v1"
ENDED = ("Succeeded", "Failed", "Cancelled")


def phase_of(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


def wait_ended(client: KubeClient, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    done = client.wait_for(API, "copyjobs", namespace, name, lambda o: phase_of(o) in ENDED,
                           timeout=timeout, interval=1)
    assert done is not None
    return done


def cpu_cores(quantity: str) -> int:
    """Whole cores in a Kubernetes CPU quantity ("2", "2500m")."""
    return int(quantity[:-1]) // 1000 if quantity.endswith("m") else int(float(quantity))


def start(client: KubeClient, namespace: str, name: str, spec: dict[str, Any]) -> None:
    client.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": name, "namespace": namespace},
                   "spec": spec}, "copyjobs")


# --- a driver that cannot start -------------------------------------------------------------

# The quota: requests.memory of 1000Mi. The quota's driver asks for Spark's default 1g (+384Mi
# overhead, 1408Mi): refused. The unschedulable driver asks for 200m (+384Mi: fits the quota) and a
# CPU more than the node has: admitted, never scheduled (the chart's policy lets a pod ask for up
# to 64 cores here: HELM_SET).
HELM_SET = ("policy.limits.default.cores=64",)
QUOTA = {"requests.memory": "1000Mi"}
DEADLINE_SECONDS = 45  # spark-submit itself (a JVM) takes 10-30 s on a loaded machine before the pod exists


def test_a_driver_that_cannot_start_fails_naming_the_cause_within_the_deadline(
        node_cluster: NodeCluster, lading_release: Release, node_standin: SparkOperatorStandIn,
        node_s3: str) -> None:
    client = node_cluster.kube.client
    namespace = lading_release.job_namespace
    s3, bucket = s3_setup(client, namespace, node_s3)
    client.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "small", "namespace": namespace},
                   "spec": {"hard": QUOTA}}, "resourcequotas")
    try:
        over_quota = copy_spec({"query": "SELECT 1 AS one"}, f"s3://{bucket}/quota/", node_s3)
        over_quota["spark"]["driver"] = {"memory": "1g"}
        too_big = copy_spec({"query": "SELECT 1 AS one"}, f"s3://{bucket}/cpu/", node_s3)
        node = client.get("v1", "nodes", None, node_cluster.node.name)
        cores = cpu_cores(node["status"]["capacity"]["cpu"]) + 1
        too_big["spark"]["driver"] = {"cores": cores, "memory": "200m"}
        too_big["spark"]["sparkConf"] = {**too_big["spark"]["sparkConf"],
                                         "spark.kubernetes.driver.request.cores": str(cores)}
        too_big["activeDeadlineSeconds"] = DEADLINE_SECONDS
        start(client, namespace, "over-quota", over_quota)
        start(client, namespace, "too-big", too_big)
        quota = wait_ended(client, namespace, "over-quota", 300)
        unschedulable = wait_ended(client, namespace, "too-big", 300)
    finally:
        client.delete("v1", "resourcequotas", namespace, "small")
    # The quota refused the driver pod: the error names the quota and what it limits.
    assert quota["status"]["phase"] == "Failed", quota["status"]
    error = quota["status"]["response"]["error"]
    assert "exceeded quota: small" in error and "requests.memory" in error, error
    # The driver pod was never scheduled: the run fails at its deadline, saying why.
    status = unschedulable["status"]
    assert status["phase"] == "Failed", status
    error = status["response"]["error"]
    assert f"activeDeadlineSeconds ({DEADLINE_SECONDS}s)" in error, error
    assert "Unschedulable" in error and "Insufficient cpu" in error, error
    app = status["sparkApplication"]
    wait_until_true(lambda: not spark_pods(client, namespace, "driver", app), 120,
                    "the unschedulable driver pod outlived its run")
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


# --- a permission missing from the Spark Role -----------------------------------------------

def without_verb(rules: list[dict[str, Any]], resource: str, verb: str) -> list[dict[str, Any]]:
    return [dict(r, verbs=[v for v in r["verbs"] if v != verb]) if resource in r.get("resources", []) else r
            for r in rules]


def test_a_spark_role_without_create_on_pods_fails_naming_the_permission(
        node_cluster: NodeCluster, lading_release: Release, node_standin: SparkOperatorStandIn,
        node_s3: str) -> None:
    client = node_cluster.kube.client
    namespace = lading_release.job_namespace
    s3, bucket = s3_setup(client, namespace, node_s3)
    role = client.get("rbac.authorization.k8s.io/v1", "roles", namespace, "lading-spark")
    rules = role["rules"]
    client.patch("rbac.authorization.k8s.io/v1", "roles", namespace, "lading-spark",
                 {"rules": without_verb(rules, "pods", "create")})
    try:
        start(client, namespace, "no-executors", copy_spec({"query": "SELECT id FROM range(0, 10, 1, 2)"},
                                                          f"s3://{bucket}/out/", node_s3))
        done = wait_ended(client, namespace, "no-executors", 600)
    finally:
        client.patch("rbac.authorization.k8s.io/v1", "roles", namespace, "lading-spark", {"rules": rules})
    status = done["status"]
    assert status["phase"] == "Failed", status
    error = status["response"]["error"]
    # which permission, for whom: Kubernetes' own words, as the driver was refused them
    assert "forbidden" in error and 'cannot create resource "pods"' in error, error
    assert f"system:serviceaccount:{namespace}:lading-spark" in error, error
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


# --- the leader pod deleted mid-run ---------------------------------------------------------

ROWS = 300
SLOW_QUERY = ("SELECT id, aggregate(sequence(1, 20000), 0L, (a, x) -> a + x % (id + 1)) AS pause "
              f"FROM range(0, {ROWS}, 1, 2)")


def holder(client: KubeClient, release: Release) -> str:
    lease = client.get_or_none(LEASES, "leases", release.namespace, f"{release.name}-operator")
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def test_the_standby_takes_over_when_the_leader_pod_is_deleted_and_the_job_ends_once(
        node_cluster: NodeCluster, lading_release: Release, node_standin: SparkOperatorStandIn,
        node_s3: str) -> None:
    client = node_cluster.kube.client
    namespace = lading_release.job_namespace
    s3, bucket = s3_setup(client, namespace, node_s3)
    operators = {p["metadata"]["name"] for p in client.list("v1", "pods", lading_release.namespace)}
    assert len(operators) == 2, operators
    leader = next(p for p in operators if holder(client, lading_release).startswith(p))
    standby = (operators - {leader}).pop()
    with PodsSeen(client, namespace) as pods:
        start(client, namespace, "handover", copy_spec({"query": SLOW_QUERY}, f"s3://{bucket}/handover/", node_s3))
        running = client.wait_for(API, "copyjobs", namespace, "handover", lambda o: phase_of(o) == "Running",
                                  timeout=600, interval=1)
        assert running is not None
        client.delete("v1", "pods", lading_release.namespace, leader)
        deleted_at = time.monotonic()
        # The standby, almost always: the Deployment's replacement pod could win only if it
        # started before the standby's next attempt (every 2 s).
        wait_until_true(lambda: (now := holder(client, lading_release)) != "" and not now.startswith(leader), 120,
                        f"no replica took the Lease over from {leader}")
        took_over = time.monotonic() - deleted_at
        done = wait_ended(client, namespace, "handover", 600)
    status = done["status"]
    assert status["phase"] == "Succeeded", status
    assert status["response"]["rows"] == ROWS
    # One run: the application the deleted leader created, finished under the new one.
    assert (status["runId"], status["attempts"], status["sparkApplication"]) == (
        running["status"]["runId"], 1, running["status"]["sparkApplication"])
    assert sorted(n for n, role in pods.seen.items() if role == "driver" and n.startswith("handover-")) == [
        f"{running['status']['sparkApplication']}-driver"]
    # One commit: one manifest, every row once.
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="handover/").get("Contents", [])]
    assert sum(k.endswith("_lading_manifest.json") for k in keys) == 1, keys
    got = pa.concat_tables([pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=k)["Body"].read()))
                            for k in keys if k.endswith(".parquet")])
    assert sorted(got.column("id").to_pylist()) == list(range(ROWS))
    # Each status transition announced once: Succeeded once, no reason repeated.
    events = client.events_about(namespace, "handover", "Submitted", "Succeeded")
    reasons = [e["reason"] for e in events if e["involvedObject"].get("kind") == "CopyJob"]
    assert sorted(reasons) == sorted(set(reasons)), reasons
    assert all((e.get("count") or 1) == 1 for e in events), events
    print(f"{holder(client, lading_release)} (standby: {standby}) took the Lease over {took_over:.1f} s after "
          f"{leader} was deleted")

