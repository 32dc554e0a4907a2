"""Pods lost while a CopyJob runs on a real node, and what the user sees afterwards.

Four unloads of a slow query (tests/node/jobs.py ``slow_query``: CPU work per row in the executor,
two tasks one after the other), each into its own bucket on moto, each hit once its executor runs a
task (its own log says ``Running task``):

- ``kubectl delete`` of the CopyJob: its SparkApplication is collected, the driver pod and the
  executor pod are gone within the driver's grace period (plus the API's own passes), and the
  bucket holds nothing: no object, no pending upload;
- the executor pod deleted: Spark asks for another executor and runs the lost task again; the
  CopyJob Succeeds with exactly the query's rows, one manifest, nothing pending;
- the driver pod deleted, with ``backoffLimit: 1``: the attempt is lost, the operator submits the
  second attempt of the same run (same run id, same destination), which Succeeds; the destination
  holds ONE published set (one manifest, exactly the files it lists) and every row once;
- the driver pod deleted, with ``backoffLimit: 0``: the run Fails with the lost driver as its error,
  no second attempt, and nothing of it is visible at the destination.

Each is a scenario of the tier's stage (tests/node/scenes.py): it runs beside the tier's other
cases, only does what a user or a fault does and records what it saw; the tests assert on those
records.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from node.jobs import (
    API,
    PodsSeen,
    copy_spec,
    create,
    executor_running_task,
    published,
    slow_query,
    slow_query_rows,
    spark_pods,
    wait_phase,
    wait_running,
    wait_until_true,
)
from node.scenes import Scene, Seen, Stage, scenario

from harness.node import pod_log

pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]

FINISHING = 400     # rows of the runs that must finish: two tasks of seconds each on the node
ENDLESS = 100_000   # rows of the run that is deleted: it never gets near its end
SLACK = 60.0        # the collector's and spark-operator's own passes on top of a grace period


@scenario("deleted", priority=1)
def deleted_with_kubectl(scene: Scene, seen: Seen) -> None:
    client, ns = scene.client, scene.namespace
    spec = copy_spec({"query": slow_query(ENDLESS)}, f"s3://{seen.bucket}/deleted/", scene.endpoint)
    create(client, ns, "CopyJob", "deleted", spec)
    app = wait_running(client, ns, "CopyJob", "deleted")
    seen.apps.append(app)
    seen.victim = executor_running_task(client, ns, app, timeout=600)
    driver = spark_pods(client, ns, "driver", app)
    grace = float((driver[0]["spec"].get("terminationGracePeriodSeconds") if driver else None) or 30)
    began = time.monotonic()
    done = subprocess.run(["kubectl", "--kubeconfig", scene.kubeconfig, "-n", ns, "delete", "copyjob", "deleted"],
                          capture_output=True, text=True, timeout=120)
    seen.facts.update(kubectl=(done.returncode, done.stdout.strip(), done.stderr.strip()), grace=grace)
    wait_until_true(lambda: not spark_pods(client, ns, "driver", app) and not spark_pods(client, ns, "executor", app),
                    grace + SLACK, f"Spark pods of {app} outlived the deleted CopyJob by {grace + SLACK:.0f} s")
    seen.facts["pods_gone_seconds"] = time.monotonic() - began
    seen.facts["copyjob_left"] = client.get_or_none(API, "copyjobs", ns, "deleted")
    wait_until_true(lambda: client.get_or_none("sparkoperator.k8s.io/v1beta2", "sparkapplications", ns, app) is None,
                    SLACK, f"SparkApplication {app} was not collected")


@scenario("executor-lost", priority=1)
def executor_lost(scene: Scene, seen: Seen) -> None:
    client, ns = scene.client, scene.namespace
    spec = copy_spec({"query": slow_query(FINISHING)}, f"s3://{seen.bucket}/out/", scene.endpoint)
    create(client, ns, "CopyJob", "executor-lost", spec)
    app = wait_running(client, ns, "CopyJob", "executor-lost")
    seen.apps.append(app)
    with PodsSeen(client, ns, app) as pods:
        seen.victim = executor_running_task(client, ns, app, timeout=600)
        client.delete("v1", "pods", ns, seen.victim)
        seen.status = wait_phase(client, ns, "CopyJob", "executor-lost", timeout=900)["status"]
    seen.executors = pods.named("executor")
    seen.driver_log = pod_log(client, ns, f"{app}-driver", lines=2000)
    seen.out = published(seen.s3, seen.bucket, "out/")


def lose_the_driver_mid_run(scene: Scene, seen: Seen, name: str, backoff_limit: int) -> str:
    """CopyJob ``name`` (``backoffLimit`` as given) started, its driver pod deleted once an
    executor runs a task, waited for to its end (``seen.status``); the first attempt's application."""
    client, ns = scene.client, scene.namespace
    spec = copy_spec({"query": slow_query(FINISHING)}, f"s3://{seen.bucket}/out/", scene.endpoint,
                     backoffLimit=backoff_limit)
    create(client, ns, "CopyJob", name, spec)
    first = wait_running(client, ns, "CopyJob", name)
    seen.apps.append(first)
    executor_running_task(client, ns, first, timeout=600)
    seen.victim = f"{first}-driver"
    client.delete("v1", "pods", ns, seen.victim)
    seen.status = wait_phase(client, ns, "CopyJob", name, timeout=900)["status"]
    return first


@scenario("driver-lost", priority=2)
def driver_lost(scene: Scene, seen: Seen) -> None:
    client, ns = scene.client, scene.namespace
    lose_the_driver_mid_run(scene, seen, "driver-lost", backoff_limit=1)
    seen.apps.append(seen.status.get("sparkApplication", ""))
    seen.out = published(seen.s3, seen.bucket, "out/")
    seen.facts["events"] = [(e["reason"], e["message"]) for e in client.events_about(ns, "driver-lost", "Retrying")]


@scenario("driver-lost-no-retry", priority=1)
def driver_lost_without_retries(scene: Scene, seen: Seen) -> None:
    client, ns = scene.client, scene.namespace
    first = lose_the_driver_mid_run(scene, seen, "driver-lost-once", backoff_limit=0)
    wait_until_true(lambda: not spark_pods(client, ns, "executor", first), 120, "executors outlived their lost driver")
    seen.facts["apps"] = [a["metadata"]["name"] for a in client.list("sparkoperator.k8s.io/v1beta2",
                                                                     "sparkapplications", ns)
                          if a["metadata"]["name"].startswith("driver-lost-once-")]
    seen.out = published(seen.s3, seen.bucket, "")


@pytest.mark.scene("deleted")
def test_kubectl_delete_mid_run_removes_the_driver_and_executors_and_leaves_nothing(
        stage: Stage) -> None:
    seen = stage.outcome("deleted")
    assert seen.facts["kubectl"][0] == 0, seen.facts["kubectl"]
    assert seen.facts["copyjob_left"] is None  # nothing of lading's holds a deletion up
    assert seen.facts["pods_gone_seconds"] <= seen.facts["grace"] + SLACK
    out = published(seen.s3, seen.bucket, "")
    assert out.keys == [] and seen.pending() == []


@pytest.mark.scene("executor-lost")
def test_an_executor_pod_deleted_mid_run_the_job_still_succeeds_with_the_right_rows(
        stage: Stage) -> None:
    seen = stage.outcome("executor-lost")
    status = seen.status
    assert status["phase"] == "Succeeded", status
    assert int(status.get("attempts") or 1) == 1  # Spark itself recovered: no retry of ours
    # the deleted executor was running a task, which Spark lost and ran again on a new executor
    assert seen.victim in seen.executors and len(seen.executors) >= 2, seen.executors
    assert any(s in seen.driver_log for s in ("ExecutorLostFailure", "Lost task", "Lost executor")), \
        seen.driver_log[-3000:]
    assert status["response"]["rows"] == FINISHING
    out = seen.out
    assert out is not None and len(out.manifests) == 1 and out.rows is not None
    assert sorted(out.parts) == sorted(f"out/{f['path']}" for f in out.manifests[0]["files"])
    assert sorted(zip(out.rows.column("id").to_pylist(), out.rows.column("pause").to_pylist(), strict=True)) == \
        slow_query_rows(FINISHING)
    assert seen.pending() == []


@pytest.mark.scene("driver-lost")
def test_the_driver_pod_deleted_mid_run_is_retried_as_the_spec_says_and_commits_once(
        stage: Stage) -> None:
    seen = stage.outcome("driver-lost")
    status = seen.status
    assert status["phase"] == "Succeeded", status
    first, second = seen.apps
    # backoffLimit 1: the lost attempt, then the run's second attempt as a new SparkApplication
    assert status["attempts"] == 2 and second != first and second.endswith("-2"), (status, seen.apps)
    retried = [m for r, m in seen.facts["events"] if r == "Retrying"]
    assert retried and "attempt 1 failed" in retried[0], seen.facts["events"]
    assert status["response"]["rows"] == FINISHING
    # ONE published set: one manifest, exactly the files it lists, every row once
    out = seen.out
    assert out is not None and len(out.manifests) == 1 and out.rows is not None, out
    manifest = out.manifests[0]
    assert sorted(out.parts) == sorted(f"out/{f['path']}" for f in manifest["files"])
    assert set(out.keys) == {*out.parts, "out/_lading_manifest.json"}, out.keys  # no intent, no stray file
    assert sorted(zip(out.rows.column("id").to_pylist(), out.rows.column("pause").to_pylist(), strict=True)) == \
        slow_query_rows(FINISHING)
    assert seen.pending() == []


@pytest.mark.scene("driver-lost-no-retry")
def test_the_driver_pod_deleted_mid_run_without_retries_fails_and_publishes_nothing(stage: Stage) -> None:
    seen = stage.outcome("driver-lost-no-retry")
    status = seen.status
    assert status["phase"] == "Failed", status
    # backoffLimit 0: the lost attempt is the run's only one, and its error says what was lost
    assert int(status.get("attempts") or 1) == 1 and status["sparkApplication"] == seen.apps[0], status
    assert seen.facts["apps"] in ([], [seen.apps[0]]), seen.facts["apps"]
    assert "driver" in status["response"]["error"], status["response"]
    # nothing of the run is visible; its tasks' pending uploads stay for the bucket's
    # AbortIncompleteMultipartUpload rule, as after any killed run never rerun (docs/copyjob.md)
    out = seen.out
    assert out is not None and out.keys == [], out.keys
    print(f"driver-lost-no-retry: {len(seen.pending())} pending upload(s) left for the lifecycle rule")
