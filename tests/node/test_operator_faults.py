"""The operator's and the cluster's faults on a real node: each case reads its answer from the
resource's status (and the data, where a run writes any).

- A driver that cannot start: a namespace ResourceQuota too small for it (the API server refuses
  the driver pod: spark-submit fails), and, at the same time in the same namespace, a driver asking
  for more CPU than the node has (the pod stays Pending, Unschedulable): both resources fail with
  an error naming the cause, the second within the ``activeDeadlineSeconds`` its spec sets. No
  Spark run completes, so both are quick.
- The chart's Spark Role without ``create`` on pods: the driver cannot start its executors, and
  the resource fails with an error saying which permission is missing.
- The operator's leader pod deleted while a job runs: the standby takes the Lease over and the
  job ends once (one SparkApplication, one Succeeded, the rows written once).

Each is a scenario of the tier's stage (tests/node/scenes.py), run beside the tier's other cases;
the first two in job namespaces of their own, as they change their namespace.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from node.jobs import PodsSeen, copy_spec, published, spark_pods, wait_until_true
from node.scenes import Scene, Seen, Stage, scenario

from harness.client import KubeClient

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
# CPU more than the node has: admitted, never scheduled (the tier's release lets a pod ask for up to
# 64 cores: tests/node/conftest.py HELM_SET). Both in a job namespace of their own: the quota binds
# every pod there.
QUOTA = {"requests.memory": "1000Mi"}
DEADLINE_SECONDS = 45  # spark-submit itself (a JVM) takes 10-30 s on a loaded machine before the pod exists


@scenario("cannot-start", own_namespace=True, priority=2)
def driver_that_cannot_start(scene: Scene, seen: Seen) -> None:
    client, ns, bucket, endpoint = scene.client, scene.namespace, seen.bucket, scene.endpoint
    client.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "small", "namespace": ns},
                   "spec": {"hard": QUOTA}}, "resourcequotas")
    try:
        over_quota = copy_spec({"query": "SELECT 1 AS one"}, f"s3://{bucket}/quota/", endpoint)
        over_quota["spark"]["driver"] = {"memory": "1g"}
        too_big = copy_spec({"query": "SELECT 1 AS one"}, f"s3://{bucket}/cpu/", endpoint)
        node = client.list("v1", "nodes", None)[0]
        cores = cpu_cores(node["status"]["capacity"]["cpu"]) + 1
        too_big["spark"]["driver"] = {"cores": cores, "memory": "200m"}
        too_big["spark"]["sparkConf"] = {**too_big["spark"]["sparkConf"],
                                         "spark.kubernetes.driver.request.cores": str(cores)}
        too_big["activeDeadlineSeconds"] = DEADLINE_SECONDS
        start(client, ns, "over-quota", over_quota)
        start(client, ns, "too-big", too_big)
        seen.facts["quota"] = wait_ended(client, ns, "over-quota", 300)["status"]
        seen.status = wait_ended(client, ns, "too-big", 300)["status"]
    finally:
        client.delete("v1", "resourcequotas", ns, "small")
    app = seen.status.get("sparkApplication", "")
    wait_until_true(lambda: not spark_pods(client, ns, "driver", app), 120,
                    "the unschedulable driver pod outlived its run")
    seen.facts["keys"] = seen.s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0)


@pytest.mark.scene("cannot-start")
def test_a_driver_that_cannot_start_fails_naming_the_cause_within_the_deadline(stage: Stage) -> None:
    seen = stage.outcome("cannot-start")
    # The quota refused the driver pod: the error names the quota and what it limits.
    quota = seen.facts["quota"]
    assert quota["phase"] == "Failed", quota
    error = quota["response"]["error"]
    assert "exceeded quota: small" in error and "requests.memory" in error, error
    # The driver pod was never scheduled: the run fails at its deadline, saying why.
    status = seen.status
    assert status["phase"] == "Failed", status
    error = status["response"]["error"]
    assert f"activeDeadlineSeconds ({DEADLINE_SECONDS}s)" in error, error
    assert "Unschedulable" in error and "Insufficient cpu" in error, error
    assert seen.facts["keys"] == 0


# --- a permission missing from the Spark Role -----------------------------------------------

def without_verb(rules: list[dict[str, Any]], resource: str, verb: str) -> list[dict[str, Any]]:
    return [dict(r, verbs=[v for v in r["verbs"] if v != verb]) if resource in r.get("resources", []) else r
            for r in rules]


@scenario("role-without-create-pods", own_namespace=True, priority=1)
def spark_role_without_create_on_pods(scene: Scene, seen: Seen) -> None:
    client, ns = scene.client, scene.namespace
    role = client.get("rbac.authorization.k8s.io/v1", "roles", ns, "lading-spark")
    rules = role["rules"]
    client.patch("rbac.authorization.k8s.io/v1", "roles", ns, "lading-spark",
                 {"rules": without_verb(rules, "pods", "create")})
    try:
        start(client, ns, "no-executors", copy_spec({"query": "SELECT id FROM range(0, 10, 1, 2)"},
                                                   f"s3://{seen.bucket}/out/", scene.endpoint))
        seen.status = wait_ended(client, ns, "no-executors", 600)["status"]
    finally:
        client.patch("rbac.authorization.k8s.io/v1", "roles", ns, "lading-spark", {"rules": rules})
    seen.facts["namespace"] = ns
    seen.facts["keys"] = seen.s3.list_objects_v2(Bucket=seen.bucket).get("KeyCount", 0)


@pytest.mark.scene("role-without-create-pods")
def test_a_spark_role_without_create_on_pods_fails_naming_the_permission(stage: Stage) -> None:
    seen = stage.outcome("role-without-create-pods")
    status = seen.status
    assert status["phase"] == "Failed", status
    error = status["response"]["error"]
    # which permission, for whom: Kubernetes' own words, as the driver was refused them
    assert "forbidden" in error and 'cannot create resource "pods"' in error, error
    assert f"system:serviceaccount:{seen.facts['namespace']}:lading-spark" in error, error
    assert seen.facts["keys"] == 0


# --- the leader pod deleted mid-run ---------------------------------------------------------

ROWS = 300
SLOW_QUERY = ("SELECT id, aggregate(sequence(1, 20000), 0L, (a, x) -> a + x % (id + 1)) AS pause "
              f"FROM range(0, {ROWS}, 1, 2)")


def holder(client: KubeClient, scene: Scene) -> str:
    lease = client.get_or_none(LEASES, "leases", scene.release_namespace, f"{scene.release_name}-operator")
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


@scenario("leader-deleted")
def leader_deleted_mid_run(scene: Scene, seen: Seen) -> None:
    client, ns = scene.client, scene.namespace
    operators = {p["metadata"]["name"] for p in client.list("v1", "pods", scene.release_namespace)}
    seen.facts["operators"] = sorted(operators)
    leader = next(p for p in operators if holder(client, scene).startswith(p))
    seen.facts["standby"] = sorted(operators - {leader})
    seen.victim = leader
    start(client, ns, "handover", copy_spec({"query": SLOW_QUERY}, f"s3://{seen.bucket}/handover/", scene.endpoint))
    running = client.wait_for(API, "copyjobs", ns, "handover", lambda o: phase_of(o) == "Running",
                              timeout=600, interval=1)
    assert running is not None
    seen.facts["running"] = running["status"]
    with PodsSeen(client, ns) as pods:
        client.delete("v1", "pods", scene.release_namespace, leader)
        deleted_at = time.monotonic()
        # The standby, almost always: the Deployment's replacement pod could win only if it
        # started before the standby's next attempt (every 2 s).
        wait_until_true(lambda: (now := holder(client, scene)) != "" and not now.startswith(leader), 120,
                        f"no replica took the Lease over from {leader}")
        seen.facts["took_over"] = time.monotonic() - deleted_at
        seen.facts["new_leader"] = holder(client, scene)
        seen.status = wait_ended(client, ns, "handover", 600)["status"]
    seen.facts["drivers"] = sorted(n for n, role in pods.seen.items() if role == "driver" and n.startswith("handover-"))
    seen.out = published(seen.s3, seen.bucket, "handover/")
    seen.facts["events"] = client.events_about(ns, "handover", "Submitted", "Succeeded")


@pytest.mark.scene("leader-deleted")
def test_the_standby_takes_over_when_the_leader_pod_is_deleted_and_the_job_ends_once(stage: Stage) -> None:
    seen = stage.outcome("leader-deleted")
    facts = seen.facts
    assert len(facts["operators"]) == 2, facts["operators"]
    status, running = seen.status, facts["running"]
    assert status["phase"] == "Succeeded", status
    assert status["response"]["rows"] == ROWS
    # One run: the application the deleted leader created, finished under the new one.
    assert (status["runId"], status["attempts"], status["sparkApplication"]) == (
        running["runId"], 1, running["sparkApplication"])
    assert facts["drivers"] == [f"{running['sparkApplication']}-driver"]
    # One commit: one manifest, every row once.
    out = seen.out
    assert out is not None and len(out.manifests) == 1 and out.rows is not None, out
    assert sorted(out.rows.column("id").to_pylist()) == list(range(ROWS))
    # Each status transition announced once: Succeeded once, no reason repeated.
    events = facts["events"]
    reasons = [e["reason"] for e in events if e["involvedObject"].get("kind") == "CopyJob"]
    assert sorted(reasons) == sorted(set(reasons)), reasons
    assert all((e.get("count") or 1) == 1 for e in events), events
    print(f"{facts['new_leader']} (standby: {facts['standby']}) took the Lease over {facts['took_over']:.1f} s after "
          f"{seen.victim} was deleted")
