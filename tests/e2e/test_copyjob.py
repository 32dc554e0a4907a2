"""CopyJob end to end: kopf operator (a process) → real API server → spark-operator
stand-in → the real Spark app → moto S3, and back to status.

Real Spark runs are expensive (a JVM each), so each test runs at most one or two.
"""

from __future__ import annotations

import io
import json
import subprocess
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.client import ApiStatusError, wait_until
from harness.fixtures import Kube
from harness.spark_operator import SparkOperatorStandIn

from .conftest import API, OperatorProcess, apps_of, conditions, wait_phase

pytestmark = [pytest.mark.k8s, pytest.mark.s3, pytest.mark.slow]
SOURCE_ROWS = 500


@pytest.fixture
def source(s3_client: Any, bucket: str) -> str:
    """A Parquet source of SOURCE_ROWS rows in S3; returns its prefix."""
    table = pa.table({"id": pa.array(range(SOURCE_ROWS), pa.int64()),
                      "name": pa.array([f"n{i}" for i in range(SOURCE_ROWS)])})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    s3_client.put_object(Bucket=bucket, Key="src/part-0.parquet", Body=buf.getvalue())
    return f"s3://{bucket}/src/"


def unload_spec(source: str, bucket: str, secret: str, endpoint: str, query: str = "SELECT * FROM src",
                to: str = "out/", **extra: Any) -> dict[str, Any]:
    return {
        "from": {"query": query, "inputs": [{"name": "src", "files": source, "format": "parquet"}]},
        "to": {"files": f"s3://{bucket}/{to}", "format": "csv"},
        "connection": {"secretRef": {"name": secret}, "endpoint": endpoint, "region": "us-east-1"},
        **extra,
    }


def keys(s3_client: Any, bucket: str, prefix: str) -> list[str]:
    listing = s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for o in listing.get("Contents", [])]


def pending_uploads(s3_client: Any, bucket: str) -> list[str]:
    return [u["Key"] for u in s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


def test_copyjob_succeeds_with_rows_and_manifest(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        s3_client: Any, bucket: str, source: str, s3_secret: str, s3_endpoint: str) -> None:
    spec = unload_spec(source, bucket, s3_secret, s3_endpoint)
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "export", "namespace": kube_namespace}, "spec": spec}, "copyjobs")
    done = wait_phase(kube.client, kube_namespace, "export", {"Succeeded", "Failed"})
    status = done["status"]
    assert status["phase"] == "Succeeded", (status, operator_process.log())
    assert status["response"]["rows"] == SOURCE_ROWS
    manifest = status["output"]["manifest"]
    assert manifest.startswith(f"s3://{bucket}/out/")
    manifest_key = manifest.split("/", 3)[3]
    s3_client.head_object(Bucket=bucket, Key=manifest_key)
    assert status["output"]["files"] >= 1
    data_keys = [k for k in keys(s3_client, bucket, "out/") if k != manifest_key]
    lines = sum(s3_client.get_object(Bucket=bucket, Key=k)["Body"].read().count(b"\n") for k in data_keys)
    assert lines == SOURCE_ROWS
    cond = conditions(done)
    assert cond["Succeeded"]["status"] == "True" and cond["Ready"]["status"] == "True"
    assert cond["Ready"]["observedGeneration"] == done["metadata"]["generation"]
    assert status["observedGeneration"] == done["metadata"]["generation"]
    apps = apps_of(kube.client, kube_namespace)
    assert [a["metadata"]["name"] for a in apps] == [status["sparkApplication"]]
    owner = apps[0]["metadata"]["ownerReferences"][0]
    assert owner["uid"] == done["metadata"]["uid"] and owner["controller"] is True
    events = kube.client.events_about(kube_namespace, "export", "Submitted", "Succeeded")
    # No credentials leak into the resource, its status or events.
    assert "testing" not in json.dumps(done) + json.dumps(events)
    # What users run: kubectl wait on the condition, kubectl get with the printer columns.
    kubectl = ["kubectl", "--kubeconfig", kube.kubeconfig, "-n", kube_namespace]
    waited = subprocess.run([*kubectl, "wait", "--for=condition=Succeeded", "copyjob/export", "--timeout=60s"],
                            capture_output=True, text=True, timeout=90)
    assert waited.returncode == 0, waited.stderr
    table = subprocess.run([*kubectl, "get", "copyjobs"], capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    row = next(line.split() for line in table.stdout.splitlines() if line.startswith("export"))
    assert row[1:3] == ["Succeeded", str(SOURCE_ROWS)]


# ~40 ms of CPU per row (about as long as the Thread.sleep(40) this used to call through java_method,
# which the query sandbox now refuses: a query may not call Java).
SLOW_QUERY = ("SELECT id, aggregate(sequence(1, 200000), 0L, (a, x) -> a + x % (id + 1)) AS pause "
              "FROM range(0, {rows}, 1, 2)")


def test_transforming_load_succeeds_with_its_rows(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        s3_client: Any, bucket: str, s3_secret: str, s3_endpoint: str) -> None:
    """A load with spec.transform (issue 10): Succeeded, response.rows = the rows the WHERE kept."""
    s3_client.put_object(Bucket=bucket, Key="in/a.csv", Body=b"1,x,5\n2,y,1\n3,z,9\n")
    spec = {"from": {"files": f"s3://{bucket}/in/", "format": "csv"},
            "to": {"table": f"s3://{bucket}/tables/t/",
                   "schema": [{"name": "id", "type": "bigint"}, {"name": "label", "type": "string"}]},
            "transform": {"select": "SELECT $1::bigint * 10, upper($2) FROM source WHERE $3::int > 2"},
            "connection": {"secretRef": {"name": s3_secret}, "endpoint": s3_endpoint, "region": "us-east-1"}}
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "load-transform", "namespace": kube_namespace}, "spec": spec}, "copyjobs")
    done = wait_phase(kube.client, kube_namespace, "load-transform", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", (done["status"], operator_process.log())
    assert done["status"]["response"]["rows"] == 2
    parts = [k for k in keys(s3_client, bucket, "tables/t/") if k.endswith(".parquet")]
    rows = pa.concat_tables([pq.read_table(io.BytesIO(s3_client.get_object(Bucket=bucket, Key=k)["Body"].read()))
                             for k in parts]).select(["id", "label"]).to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [{"id": 10, "label": "X"}, {"id": 30, "label": "Z"}]


def test_invalid_specs_are_rejected_naming_the_field(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess) -> None:
    # Admission (CRD schema / CEL) rejects what it can see...
    bad = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://out/x/", "format": "xml"}}
    with pytest.raises(ApiStatusError) as e:
        kube.client.create({"apiVersion": API, "kind": "CopyJob",
                            "metadata": {"name": "bad-format", "namespace": kube_namespace}, "spec": bad},
                           "copyjobs")
    assert e.value.code == 422 and "spec.to.format" in e.value.message
    # ...the operator rejects the rest with InvalidSpec and a message naming the field.
    spec = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://out/{when}/", "format": "csv"}}
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "bad-template", "namespace": kube_namespace}, "spec": spec},
                       "copyjobs")
    failed = wait_phase(kube.client, kube_namespace, "bad-template", "Failed", timeout=60)
    ready = conditions(failed)["Ready"]
    assert ready["reason"] == "InvalidSpec" and ready["message"].startswith("spec.to.files:")
    assert "{run_time" in ready["message"]  # says what is accepted
    assert conditions(failed)["Stalled"]["status"] == "True"
    assert apps_of(kube.client, kube_namespace) == []


def test_failing_query_reports_sparks_error(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        bucket: str, source: str, s3_secret: str, s3_endpoint: str) -> None:
    spec = unload_spec(source, bucket, s3_secret, s3_endpoint, query="SELECT no_such_column FROM src",
                       ttlSecondsAfterFinished=8)
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "broken", "namespace": kube_namespace}, "spec": spec}, "copyjobs")
    failed = wait_phase(kube.client, kube_namespace, "broken", {"Failed", "Succeeded"})
    status = failed["status"]
    assert status["phase"] == "Failed"
    assert "no_such_column" in status["response"]["error"]
    assert "UNRESOLVED_COLUMN" in status["response"]["error"]  # Spark's own error class
    assert conditions(failed)["Failed"]["status"] == "True"
    assert conditions(failed)["Ready"]["reason"] == "JobFailed"
    # ttlSecondsAfterFinished: the finished CopyJob (and, through it, its SparkApplication) goes away.
    kube.client.wait_gone(API, "copyjobs", kube_namespace, "broken", timeout=60)
    wait_until(lambda: apps_of(kube.client, kube_namespace), lambda apps: apps == [], timeout=60,
               what="the SparkApplication to be collected")


def test_cancel_mid_run_leaves_an_empty_destination(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        s3_client: Any, bucket: str, source: str, s3_secret: str, s3_endpoint: str) -> None:
    spec = unload_spec(source, bucket, s3_secret, s3_endpoint, query=SLOW_QUERY.format(rows=100_000),
                       to="cancelled/")
    spec["to"]["bufferSize"] = "5MB"
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "to-cancel", "namespace": kube_namespace}, "spec": spec}, "copyjobs")
    running = wait_phase(kube.client, kube_namespace, "to-cancel", "Running")
    app_name = running["status"]["sparkApplication"]
    # While it runs, progress comes from the driver's Spark REST API (driverInfo.webUIAddress).
    progressing = kube.client.wait_for(
        API, "copyjobs", kube_namespace, "to-cancel",
        lambda o: ((o or {}).get("status") or {}).get("progress", {}).get("tasksTotal", 0) >= 1,
        timeout=120, interval=0.5)
    assert progressing is not None and progressing["status"]["progress"]["updatedAt"]
    kube.client.patch(API, "copyjobs", kube_namespace, "to-cancel", {"spec": {"cancel": True}})
    done = wait_phase(kube.client, kube_namespace, "to-cancel", {"Cancelled", "Failed", "Succeeded"}, timeout=120)
    assert done["status"]["phase"] == "Cancelled"
    assert done["status"]["response"]["cancelled"] is True
    assert kube.client.get_or_none("sparkoperator.k8s.io/v1beta2", "sparkapplications", kube_namespace,
                                   app_name) is None
    # The job got SIGTERM and aborted: nothing visible, nothing pending.
    assert keys(s3_client, bucket, "cancelled/") == []
    assert pending_uploads(s3_client, bucket) == []
    assert "cancelled" in standin.driver_log(kube_namespace, app_name)


@pytest.mark.parametrize("propagation", ["", "Orphan"])
def test_deleting_a_running_copyjob_removes_its_sparkapplication(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        bucket: str, source: str, s3_secret: str, s3_endpoint: str, propagation: str) -> None:
    """Also with `kubectl delete --cascade=orphan`: the garbage collector strips the application's
    owner, and the run would go on outside every bound (run slots, activeDeadlineSeconds): the
    operator deletes it."""
    spec = unload_spec(source, bucket, s3_secret, s3_endpoint, query=SLOW_QUERY.format(rows=100_000),
                       to="deleted/")
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "to-delete", "namespace": kube_namespace}, "spec": spec}, "copyjobs")
    running = wait_phase(kube.client, kube_namespace, "to-delete", "Running")
    app_name = running["status"]["sparkApplication"]
    assert not running["metadata"].get("finalizers")  # nothing of ours can hold a deletion up
    kube.client.delete(API, "copyjobs", kube_namespace, "to-delete", propagation=propagation)
    kube.client.wait_gone(API, "copyjobs", kube_namespace, "to-delete", timeout=120)
    # The garbage collector deletes its SparkApplication (ownerReference), or the operator an orphaned
    # one; spark-operator's own finalizer stops the driver first.
    wait_until(lambda: kube.client.get_or_none("sparkoperator.k8s.io/v1beta2", "sparkapplications",
                                               kube_namespace, app_name),
               lambda app: app is None, timeout=120, what="the SparkApplication to be collected")
    assert kube.client.get_or_none("v1", "pods", kube_namespace, f"{app_name}-driver") is None
    assert standin.runs[(kube_namespace, app_name)].process.poll() is not None  # type: ignore[union-attr]
    assert ("propagationPolicy Orphan" in operator_process.log()) == (propagation == "Orphan")


def test_a_retry_waits_for_the_deleted_applications_driver_pod_to_be_gone(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        bucket: str, source: str, s3_secret: str, s3_endpoint: str) -> None:
    """The SparkApplication is deleted mid-run while its driver pod still stops (spark-operator deletes
    the pod and lets the application go without waiting; a driver in its commit section publishes
    first): the next attempt starts only once the pod is gone, so two attempts never overlap."""
    spec = {**unload_spec(source, bucket, s3_secret, s3_endpoint, query=SLOW_QUERY.format(rows=300),
                          to="fenced/"), "backoffLimit": 1}
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "fenced", "namespace": kube_namespace}, "spec": spec}, "copyjobs")
    running = wait_phase(kube.client, kube_namespace, "fenced", "Running")
    app_name = running["status"]["sparkApplication"]
    pod = f"{app_name}-driver"
    hold = "lading.io/test-hold"  # keeps the pod Terminating, as a kubelet does during the grace period
    kube.client.patch("v1", "pods", kube_namespace, pod, {"metadata": {"finalizers": [hold]}})
    kube.client.delete("sparkoperator.k8s.io/v1beta2", "sparkapplications", kube_namespace, app_name)
    wait_until(lambda: kube.client.get_or_none("sparkoperator.k8s.io/v1beta2", "sparkapplications",
                                               kube_namespace, app_name),
               lambda app: app is None, timeout=120, what="the SparkApplication to go")
    assert kube.client.get("v1", "pods", kube_namespace, pod)["metadata"].get("deletionTimestamp")
    # The pass the deletion's watch event starts, and the one a follow interval later: no second attempt.
    time.sleep(5.0 + 1)  # lading_operator.lifecycle.FOLLOW_INTERVAL + 1
    held = kube.client.get(API, "copyjobs", kube_namespace, "fenced")
    assert held["status"]["attempts"] == 1 and held["status"]["sparkApplication"] == app_name, held["status"]
    assert apps_of(kube.client, kube_namespace) == []
    kube.client.patch("v1", "pods", kube_namespace, pod, {"metadata": {"finalizers": []}})
    done = wait_phase(kube.client, kube_namespace, "fenced", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded" and done["status"]["attempts"] == 2, done["status"]
    assert done["status"]["response"]["rows"] == 300


def test_operator_killed_mid_run_adopts_the_run(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        s3_client: Any, bucket: str, source: str, s3_secret: str, s3_endpoint: str) -> None:
    spec = unload_spec(source, bucket, s3_secret, s3_endpoint, query=SLOW_QUERY.format(rows=300),
                       to="restart/")
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "survivor", "namespace": kube_namespace}, "spec": spec}, "copyjobs")
    running = wait_phase(kube.client, kube_namespace, "survivor", "Running")
    operator_process.kill()
    try:
        # While no operator runs, the job keeps going and finishes.
        wait_until(lambda: kube.client.get_or_none("sparkoperator.k8s.io/v1beta2", "sparkapplications",
                                                   kube_namespace, running["status"]["sparkApplication"]),
                   lambda a: ((a or {}).get("status") or {}).get("applicationState", {}).get("state")
                   in ("COMPLETED", "FAILED"), timeout=180, interval=0.2, what="the app to finish")
        assert wait_phase(kube.client, kube_namespace, "survivor", "Running", timeout=1)  # nobody updated it
    finally:
        operator_process.start()
    done = wait_phase(kube.client, kube_namespace, "survivor", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert done["status"]["response"]["rows"] == 300
    apps = apps_of(kube.client, kube_namespace)
    assert [a["metadata"]["name"] for a in apps] == [running["status"]["sparkApplication"]]
    assert done["status"]["attempts"] == 1


def test_scheduled_copyjob_runs_twice_into_two_destinations(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        s3_client: Any, bucket: str, source: str, s3_secret: str, s3_endpoint: str) -> None:
    spec = unload_spec(source, bucket, s3_secret, s3_endpoint, query="SELECT id FROM src WHERE id < 10",
                       to="sched/{run_time:%Y%m%dT%H%M%S}/")
    spec.update({"schedule": "@every 10s", "concurrencyPolicy": "Forbid"})
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "nightly", "namespace": kube_namespace}, "spec": spec}, "copyjobs")

    def succeeded_runs(obj: dict[str, Any] | None) -> bool:
        runs = ((obj or {}).get("status") or {}).get("lastRuns") or []
        return len([r for r in runs if r.get("phase") == "Succeeded"]) >= 2

    obj = kube.client.wait_for(API, "copyjobs", kube_namespace, "nightly", succeeded_runs, timeout=400,
                               interval=0.5)
    kube.client.patch(API, "copyjobs", kube_namespace, "nightly", {"spec": {"suspend": True}})
    assert obj is not None
    runs = [r for r in obj["status"]["lastRuns"] if r["phase"] == "Succeeded"][:2]
    assert runs[0]["runId"] != runs[1]["runId"]
    assert runs[0]["sparkApplication"] != runs[1]["sparkApplication"]
    destinations = {r["destination"] for r in runs}
    assert len(destinations) == 2 and all(d.startswith(f"s3://{bucket}/sched/") for d in destinations)
    assert all(r["rows"] == 10 for r in runs)
    for destination in destinations:
        assert keys(s3_client, bucket, destination.split("/", 3)[3]), destination
    assert obj["status"]["lastScheduleTime"] and obj["status"]["nextScheduleTime"]
    assert conditions(obj)["Ready"]["status"] == "True"
