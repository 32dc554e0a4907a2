"""SparkApplications that should be gone are deleted on a later pass when their deletion was lost.

The controller writes a pass's status before it deletes. A deletion lost after that write
(the operator killed, the API failing) is found again from what exists: on the real API
server, a deletion made to fail once (as a crash there would) is carried out by the next
pass, for a deadline, a replaced scheduled run and a run history trim; and a deletion the API
answered 500 (through ``harness.api_proxy``, a real answer on the wire) likewise, for a
CopyJob's deadline and for a StreamCopy stopped on purpose whose driver spark-operator reruns."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from harness.api_proxy import ApiProxy, Fault
from harness.client import KubeClient
from harness.fixtures import Kube, restricted_pod
from harness.identities import Identity
from lading_operator import controller, k8s, progress, render, strays
from lading_operator import reconcile as rc
from lading_operator.kinds import COPYJOB, STREAMCOPY

API, SPARK = "lading.io/v1alpha1", "sparkoperator.k8s.io/v1beta2"
NS = "team"
SPEC = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://bucket/out/", "format": "csv"}}
NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def owned(name: str, run: str, state: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"lading.io/run-id": run}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    return {"metadata": meta, "status": {"applicationState": {"state": state}}}


def strays_of(status: dict[str, Any], apps: list[dict[str, Any]], spec: dict[str, Any] | None = None) -> list[str]:
    resource = {"apiVersion": API, "kind": "CopyJob", "spec": spec or SPEC, "status": status,
                "metadata": {"name": "exp", "namespace": NS, "uid": "u", "generation": 1}}
    return [name for name, _ in strays.stray_apps(rc.context(rc.Observed(resource, now=NOW, owned=tuple(apps))))]


def test_which_applications_are_strays() -> None:
    running = {"phase": "Running", "runId": "r2", "sparkApplication": "exp-r2-2"}
    apps = [owned("exp-r2-1", "r2", "FAILED"),       # an earlier attempt of the run: kept (its logs)
            owned("exp-r2-2", "r2", "RUNNING"),      # the run under way
            owned("exp-r1-1", "r1", "COMPLETED"),    # a run the status no longer keeps
            owned("exp-r0-1", "r0", "RUNNING", deleting=True)]  # already going
    assert strays_of(running, apps) == ["exp-r1-1"]
    # The run ended (a deadline): its application still running is a stray, a finished one is not.
    failed = {"phase": "Failed", "runId": "r2", "sparkApplication": "exp-r2-2"}
    assert strays_of(failed, apps) == ["exp-r2-2", "exp-r1-1"]
    assert strays_of({**failed, "lastRuns": [{"runId": "r1"}]}, apps) == ["exp-r2-2"]
    # An earlier run still under way (concurrencyPolicy Allow) is followed, not deleted.
    allow = {**running, "lastRuns": [{"runId": "r1", "phase": "Running", "sparkApplication": "exp-r1-1"}]}
    assert strays_of(allow, [owned("exp-r1-1", "r1", "RUNNING"), owned("exp-r2-2", "r2", "RUNNING")]) == []
    # Not listed this pass: nothing is judged.
    resource = {"apiVersion": API, "kind": "CopyJob", "spec": SPEC, "status": failed, "metadata": {"name": "exp"}}
    assert strays.stray_apps(rc.context(rc.Observed(resource, now=NOW))) == []


def test_an_application_whose_resource_was_deleted_with_orphan_propagation_is_a_stray() -> None:
    # kubectl delete lcj --cascade=orphan: the garbage collector strips the ownerReferences and the
    # run goes on, bounded by nothing (run slots count resources, deadlines are their passes').
    run = render.RunIdentity(kind="CopyJob", namespace=NS, name="exp", uid="u-1", generation=1, run_id="r1",
                             run_time=NOW)
    app = render.build_sparkapplication(SPEC, run)
    assert not strays.orphaned(app)  # as the operator makes it: owned
    orphan = {**app, "metadata": {k: v for k, v in app["metadata"].items() if k != "ownerReferences"}}
    assert strays.orphaned(orphan)
    assert not strays.orphaned({**orphan, "metadata": {**orphan["metadata"], "deletionTimestamp": "x"}})
    # applied by hand from `lading render` (no uid in its job document): not lading's to delete
    by_hand = render.build_sparkapplication(SPEC, render.RunIdentity(
        kind="CopyJob", namespace=NS, name="exp", uid="", generation=1, run_id="r1", run_time=NOW))
    assert not strays.orphaned({**by_hand, "metadata": {k: v for k, v in by_hand["metadata"].items()
                                                        if k != "ownerReferences"}})
    # not lading's at all (no lading.io/kind label)
    assert not strays.orphaned({"metadata": {"name": "other", "labels": {}}, "spec": orphan["spec"]})


class Crash(BaseException):
    """What a SIGKILL at that call leaves: nothing after it runs."""


@pytest.fixture
def api(kube: Kube, operator_identity: Identity, kube_namespace: str,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeClient]:
    """The real control plane: the controller as the chart's ServiceAccount, the test as
    cluster-admin, in a fresh namespace (``NS`` is this test's namespace while it runs)."""
    global NS
    NS = kube_namespace  # set here, not with monkeypatch: a test's monkeypatch.undo() keeps it
    monkeypatch.setenv("KUBECONFIG", operator_identity.kubeconfig)
    k8s.reset_client()
    try:
        yield kube.client
    finally:
        k8s.reset_client()
        NS = "team"


def at(monkeypatch: pytest.MonkeyPatch, when: dt.datetime) -> None:
    observe = controller.__dict__.get("_real_observe") or controller.observe
    controller.__dict__["_real_observe"] = observe
    monkeypatch.setattr(controller, "observe", lambda kind, resource, now=None, timeout=None:
                        observe(kind, resource, when, timeout))


def restarted_pass(name: str) -> Any:
    """A pass of a freshly started operator (nothing remembered from the watches)."""
    controller.forget_everything()
    return controller.reconcile(COPYJOB, NS, name)


def driver_pod(api: KubeClient, app: str, status: dict[str, Any]) -> None:
    """The driver pod, with the status a kubelet would write (a create's status is the server's own)."""
    api.create(restricted_pod(NS, app + "-driver"), "pods", NS)
    api.patch_status("v1", "pods", NS, app + "-driver", status)


def running(api: KubeClient, app: str) -> None:
    driver_pod(api, app, {"phase": "Running"})
    api.patch_status(SPARK, "sparkapplications", NS, app,
                     {"applicationState": {"state": "RUNNING"}, "driverInfo": {"podName": app + "-driver"}})


def completed(api: KubeClient, app: str) -> None:
    driver_pod(api, app, {"phase": "Succeeded", "containerStatuses": [{"name": "spark-kubernetes-driver", "state": {
        "terminated": {"exitCode": 0, "message": '{"rows": 1}'}}}]})
    api.patch_status(SPARK, "sparkapplications", NS, app,
                     {"applicationState": {"state": "COMPLETED"}, "driverInfo": {"podName": app + "-driver"}})


def alive(api: KubeClient) -> list[str]:
    return sorted(a["metadata"]["name"] for a in api.list(SPARK, "sparkapplications", NS)
                  if not a["metadata"].get("deletionTimestamp"))


def crash_in_delete(monkeypatch: pytest.MonkeyPatch, step: Callable[[], Any]) -> None:
    def crash(*args: Any, **kwargs: Any) -> bool:
        raise Crash()

    with monkeypatch.context() as m:
        m.setattr(k8s, "delete_app", crash)
        with pytest.raises(Crash):
            step()


@pytest.mark.k8s
def test_a_run_past_its_deadline_is_stopped_even_if_the_delete_was_lost(
        api: KubeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    api.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": "d", "namespace": NS},
                "spec": {**SPEC, "activeDeadlineSeconds": 60}}, "copyjobs")
    at(monkeypatch, NOW)
    restarted_pass("d")
    app = api.get(API, "copyjobs", NS, "d")["status"]["sparkApplication"]
    running(api, app)
    at(monkeypatch, NOW + dt.timedelta(seconds=5))
    restarted_pass("d")
    at(monkeypatch, NOW + dt.timedelta(seconds=120))
    crash_in_delete(monkeypatch, lambda: restarted_pass("d"))
    status = api.get(API, "copyjobs", NS, "d")["status"]
    assert status["phase"] == "Failed" and alive(api) == [app]  # the window: Failed, still running
    at(monkeypatch, NOW + dt.timedelta(seconds=130))
    restarted_pass("d")
    assert alive(api) == []
    events = [e for e in api.list("v1", "events", NS) if e.get("reason") == "StrayDeleted"]
    assert len(events) == 1 and app in events[0]["message"] and "still RUNNING" in events[0]["message"]
    restarted_pass("d")  # nothing more to do
    assert len([e for e in api.list("v1", "events", NS) if e.get("reason") == "StrayDeleted"]) == 1


@pytest.mark.k8s
def test_a_replaced_run_is_stopped_even_if_the_delete_was_lost(
        api: KubeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    api.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": "r", "namespace": NS},
                "spec": {**SPEC, "schedule": "0 * * * *", "concurrencyPolicy": "Replace"}}, "copyjobs")
    created = dt.datetime.fromisoformat(api.get(API, "copyjobs", NS, "r")["metadata"]["creationTimestamp"])
    first = created.replace(minute=0, second=30, microsecond=0) + dt.timedelta(hours=1)
    at(monkeypatch, first)
    restarted_pass("r")
    old = api.get(API, "copyjobs", NS, "r")["status"]["sparkApplication"]
    running(api, old)
    at(monkeypatch, first + dt.timedelta(hours=1))
    crash_in_delete(monkeypatch, lambda: restarted_pass("r"))
    status = api.get(API, "copyjobs", NS, "r")["status"]
    assert [(r["sparkApplication"], r["phase"]) for r in status["lastRuns"]] == [(old, "Cancelled")]
    assert old in alive(api)  # the window: the old run ended in status, still running
    for seconds in (10, 20):
        at(monkeypatch, first + dt.timedelta(hours=1, seconds=seconds))
        restarted_pass("r")
    new = api.get(API, "copyjobs", NS, "r")["status"]["sparkApplication"]
    assert new != old and alive(api) == [new]


@pytest.mark.k8s
def test_a_trimmed_run_is_deleted_even_if_the_delete_was_lost(
        api: KubeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    api.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": "s", "namespace": NS},
                "spec": {**SPEC, "schedule": "0 * * * *", "successfulRunsHistoryLimit": 1}}, "copyjobs")
    created = dt.datetime.fromisoformat(api.get(API, "copyjobs", NS, "s")["metadata"]["creationTimestamp"])
    first = created.replace(minute=0, second=30, microsecond=0) + dt.timedelta(hours=1)
    apps = []
    for hour in range(2):
        at(monkeypatch, first + dt.timedelta(hours=hour))
        restarted_pass("s")
        apps.append(api.get(API, "copyjobs", NS, "s")["status"]["sparkApplication"])
        completed(api, apps[-1])
        at(monkeypatch, first + dt.timedelta(hours=hour, minutes=1))
        if hour == 0:
            restarted_pass("s")
        else:  # the second run ends: the first is trimmed from the history, and that delete is lost
            monkeypatch.setattr(k8s, "delete_run", lambda *a, **k: (_ for _ in ()).throw(Crash()))
            with pytest.raises(Crash):
                restarted_pass("s")
            monkeypatch.undo()
            at(monkeypatch, first + dt.timedelta(hours=hour, minutes=1))
    assert [r["runId"] for r in api.get(API, "copyjobs", NS, "s")["status"]["lastRuns"]] != []
    assert alive(api) == sorted(apps)
    at(monkeypatch, first + dt.timedelta(hours=1, minutes=2))
    restarted_pass("s")
    assert alive(api) == [apps[1]]


@pytest.mark.k8s
def test_a_deletion_the_api_answered_500_is_made_by_a_later_pass(
        api: KubeClient, kube: Kube, operator_identity: Identity, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """The same window as above from a real answer instead of a crash: the operator's client
    reaches the server through a proxy that answers its DELETE of the application 500 once."""
    with ApiProxy(kube.url, kube.ca) as proxy:
        monkeypatch.setenv("KUBECONFIG", proxy.kubeconfig(operator_identity.token, tmp_path / "proxied"))
        k8s.reset_client()
        api.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": "d5", "namespace": NS},
                    "spec": {**SPEC, "activeDeadlineSeconds": 60}}, "copyjobs")
        at(monkeypatch, NOW)
        restarted_pass("d5")
        app = api.get(API, "copyjobs", NS, "d5")["status"]["sparkApplication"]
        running(api, app)
        at(monkeypatch, NOW + dt.timedelta(seconds=120))
        proxy.add(Fault(path=f"/namespaces/{NS}/sparkapplications/{app}$", method="DELETE", status=500))
        with pytest.raises(ApiException) as lost:
            restarted_pass("d5")
        assert lost.value.status == 500 and [s.code for s in proxy.seen if s.method == "DELETE"] == [500]
        assert api.get(API, "copyjobs", NS, "d5")["status"]["phase"] == "Failed" and alive(api) == [app]
        at(monkeypatch, NOW + dt.timedelta(seconds=130))
        restarted_pass("d5")
        assert alive(api) == []
        events = [e for e in api.list("v1", "events", NS) if e.get("reason") == "StrayDeleted"]
        assert len(events) == 1 and app in events[0]["message"]


STREAM_SPEC = {"source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["orders"],
                                    "secretRef": {"name": "kafka"}}},
               "target": {"table": "s3://warehouse/orders/", "schema": [{"name": "id", "type": "bigint"}]}}


@pytest.mark.k8s
def test_a_stopped_streams_deletion_the_api_answered_500_is_made_by_a_later_pass(
        api: KubeClient, kube: Kube, operator_identity: Identity, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """35ff68c's fault as a real answer: a StreamCopy driver stops on purpose and exits non-zero
    (DataLoss); the pass writes Failed and asks for the application's deletion, which the API
    answers 500; spark-operator reruns the driver (PENDING_RERUN); a later pass deletes it."""
    with ApiProxy(kube.url, kube.ca) as proxy:
        monkeypatch.setenv("KUBECONFIG", proxy.kubeconfig(operator_identity.token, tmp_path / "proxied"))
        k8s.reset_client()
        api.create({"apiVersion": API, "kind": "StreamCopy", "metadata": {"name": "s5", "namespace": NS},
                    "spec": STREAM_SPEC}, "streamcopies")
        controller._written.clear()
        controller._apps.clear()
        controller.reconcile(STREAMCOPY, NS, "s5")
        app = api.get(API, "streamcopies", NS, "s5")["status"]["sparkApplication"]
        try:
            running(api, app)
            api.patch_status("v1", "pods", NS, app + "-driver", {"podIP": "127.0.0.1"})
            controller.reconcile(STREAMCOPY, NS, "s5")
            assert api.get(API, "streamcopies", NS, "s5")["status"]["phase"] == "Running"
            result = {"error": "source.kafka: orders/0: offsets 0..99 are gone", "reason": "DataLoss"}
            api.patch_status("v1", "pods", NS, app + "-driver", {"phase": "Failed", "containerStatuses": [
                {"name": "spark-kubernetes-driver",
                 "state": {"terminated": {"exitCode": 1, "message": json.dumps(result)}}}]})
            api.patch_status(SPARK, "sparkapplications", NS, app, {"applicationState": {"state": "FAILING"}})
            proxy.add(Fault(path=f"/namespaces/{NS}/sparkapplications/{app}$", method="DELETE", status=500))
            with pytest.raises(ApiException) as lost:
                controller.reconcile(STREAMCOPY, NS, "s5")
            assert lost.value.status == 500
            assert api.get(API, "streamcopies", NS, "s5")["status"]["phase"] == "Failed" and alive(api) == [app]
            api.patch_status(SPARK, "sparkapplications", NS, app, {"applicationState": {"state": "PENDING_RERUN"}})
            controller.reconcile(STREAMCOPY, NS, "s5")
            assert alive(api) == []
            assert api.get(API, "streamcopies", NS, "s5")["status"]["phase"] == "Failed"
        finally:
            progress.POLLER.forget((NS, app))
