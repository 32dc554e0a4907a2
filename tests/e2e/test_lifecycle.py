"""The operator's lifecycle end to end, where no Spark needs to run: the operator (a process)
against the real API server, and *no* spark-operator, as on a cluster where it is missing, down, or
not watching the namespace.

- deletion never waits for the operator (no finalizer): a resource, and its namespace, go
  while the operator is down;
- a SparkApplication spark-operator never picks up gets a condition saying what to check;
- every pass that reads a newer generation records it; a finished one-shot says a spec
  change is ignored;
- a cron that never fires is InvalidSpec naming spec.schedule.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.client import wait_until
from harness.fixtures import Kube
from harness.identities import Identity

from .conftest import API, OperatorProcess, apps_of, conditions, wait_phase

pytestmark = [pytest.mark.k8s]
SPEC = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://out/x/", "format": "csv"}}
START_TIMEOUT = 2  # seconds, for LADING_START_TIMEOUT
SPARK_API = "sparkoperator.k8s.io/v1beta2"


@pytest.fixture(scope="module")
def operator(operator_identity: Identity, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    op = OperatorProcess(operator_identity.kubeconfig, tmp_path_factory.mktemp("operator") / "operator.log",
                         env={"LADING_START_TIMEOUT": str(START_TIMEOUT)}).start()
    yield op
    op.stop()


def create(kube: Kube, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return kube.client.create({"apiVersion": API, "kind": "CopyJob",
                               "metadata": {"name": name, "namespace": namespace}, "spec": spec}, "copyjobs")


def events(kube: Kube, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.client.events_about(namespace, name, reason) if e["reason"] == reason]


def test_deletion_does_not_wait_for_the_operator(kube: Kube, operator: OperatorProcess) -> None:
    namespace = kube.create_namespace()
    for name in ("left-behind", "in-a-dying-namespace"):
        create(kube, namespace, name, SPEC)
        submitted = wait_phase(kube.client, namespace, name, "Submitted", timeout=60)
        assert not submitted["metadata"].get("finalizers")
        # the status names the application before the operator creates it (a crash between adopts it)
        kube.client.wait_for(SPARK_API, "sparkapplications", namespace, submitted["status"]["sparkApplication"],
                             lambda app: app is not None, timeout=30)
    operator.kill()  # as when the operator is gone, or its Role went first with the namespace
    try:
        kube.client.delete(API, "copyjobs", namespace, "left-behind")
        kube.client.wait_gone(API, "copyjobs", namespace, "left-behind", timeout=30)
        # the real garbage collector takes the application of the deleted owner, in the background
        remaining = wait_until(lambda: apps_of(kube.client, namespace), lambda apps: len(apps) == 1, timeout=60,
                               interval=0.2, what="the garbage collector to delete left-behind's application")
        assert [a["metadata"]["labels"]["lading.io/name"] for a in remaining] == ["in-a-dying-namespace"]
        kube.delete_namespace(namespace)
        kube.client.wait_gone("v1", "namespaces", None, namespace, timeout=30)
    finally:
        operator.start()


def test_an_application_nobody_picks_up_gets_a_condition(kube: Kube, kube_namespace: str,
                                                         operator: OperatorProcess) -> None:
    create(kube, kube_namespace, "unwatched", SPEC)

    def stuck(obj: dict[str, Any] | None) -> bool:
        return bool(obj and conditions(obj).get("Ready", {}).get("reason") == "NotPickedUp")

    obj = kube.client.wait_for(API, "copyjobs", kube_namespace, "unwatched", stuck, timeout=60, interval=0.2)
    assert obj is not None and obj["status"]["phase"] == "Submitted"
    message = conditions(obj)["Ready"]["message"]
    app = obj["status"]["sparkApplication"]
    assert message == (f"SparkApplication {app} has no status {START_TIMEOUT}s after it was created: "
                       f"spark-operator has not picked it up. Check that spark-operator is running and that "
                       f"namespace {kube_namespace} is in its spark.jobNamespaces")
    assert conditions(obj)["Reconciling"]["status"] == "True"  # still waiting, not given up
    assert [e["type"] for e in events(kube, kube_namespace, "unwatched", "NotPickedUp")] == ["Warning"]


def test_a_finished_one_shot_records_and_ignores_a_spec_change(kube: Kube, kube_namespace: str,
                                                               operator: OperatorProcess) -> None:
    create(kube, kube_namespace, "done", {**SPEC, "suspend": True})
    wait_phase(kube.client, kube_namespace, "done", "Suspended", timeout=60)
    kube.client.patch(API, "copyjobs", kube_namespace, "done", {"spec": {"cancel": True}})
    wait_phase(kube.client, kube_namespace, "done", "Cancelled", timeout=60)
    changed = kube.client.patch(API, "copyjobs", kube_namespace, "done",
                                {"spec": {"cancel": False, "suspend": False}})
    generation = changed["metadata"]["generation"]

    def observed(obj: dict[str, Any] | None) -> bool:
        return bool(obj and obj["status"].get("observedGeneration") == generation)

    obj = kube.client.wait_for(API, "copyjobs", kube_namespace, "done", observed, timeout=60, interval=0.2)
    assert obj is not None and obj["status"]["phase"] == "Cancelled"  # the change does not run
    ignored = conditions(obj)["SpecChangeIgnored"]
    assert ignored["status"] == "True" and ignored["observedGeneration"] == generation
    assert ignored["message"].startswith("spec change ignored; delete and re-create to re-run")
    assert all(c["observedGeneration"] == generation for c in obj["status"]["conditions"])
    assert events(kube, kube_namespace, "done", "SpecChangeIgnored")
    assert apps_of(kube.client, kube_namespace) == []


def test_a_schedule_change_is_observed(kube: Kube, kube_namespace: str, operator: OperatorProcess) -> None:
    create(kube, kube_namespace, "yearly", {**SPEC, "schedule": "0 0 1 1 *"})
    first = wait_phase(kube.client, kube_namespace, "yearly", "Scheduled", timeout=60)
    assert first["status"]["nextScheduleTime"].endswith("-01-01T00:00:00Z")
    changed = kube.client.patch(API, "copyjobs", kube_namespace, "yearly", {"spec": {"schedule": "0 0 2 1 *"}})

    def observed(obj: dict[str, Any] | None) -> bool:
        return bool(obj and obj["status"].get("observedGeneration") == changed["metadata"]["generation"])

    obj = kube.client.wait_for(API, "copyjobs", kube_namespace, "yearly", observed, timeout=60, interval=0.2)
    assert obj is not None and obj["status"]["phase"] == "Scheduled"
    assert obj["status"]["nextScheduleTime"].endswith("-01-02T00:00:00Z")
    assert conditions(obj)["Ready"]["observedGeneration"] == changed["metadata"]["generation"]


def test_a_cron_that_never_fires_is_invalid(kube: Kube, kube_namespace: str, operator: OperatorProcess) -> None:
    create(kube, kube_namespace, "never", {**SPEC, "schedule": "0 0 30 2 *"})
    failed = wait_phase(kube.client, kube_namespace, "never", "Failed", timeout=60)
    ready = conditions(failed)["Ready"]
    assert ready["reason"] == "InvalidSpec"
    assert ready["message"] == ("spec.schedule: '0 0 30 2 *' never fires: day of month 30 does not exist in "
                                "February; choose days that exist in those months")
    assert f"reconcile of CopyJob {kube_namespace}/never failed" not in operator.log()


def test_a_finalizer_left_by_an_earlier_version_is_removed(kube: Kube, kube_namespace: str,
                                                           operator: OperatorProcess) -> None:
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "old", "namespace": kube_namespace,
                                     "finalizers": ["lading.io/finalizer"]}, "spec": SPEC}, "copyjobs")
    obj = kube.client.wait_for(API, "copyjobs", kube_namespace, "old",
                               lambda o: o is not None and not o["metadata"].get("finalizers"), timeout=60,
                               interval=0.2)
    assert obj is not None
    kube.client.delete(API, "copyjobs", kube_namespace, "old")
    kube.client.wait_gone(API, "copyjobs", kube_namespace, "old", timeout=30)
