"""The controller: what a pass may take from the watches instead of reading it again, and (on the
real API server, as the chart's ServiceAccount) what it does with the API's answers: 409 from a
namesake, 403 from a Role without the verb (the server's own refusal), 404, trimmed runs,
progress off the reconcile thread, and the requests a first pass makes."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kopf
import pytest
from kubernetes.client.rest import ApiException

from harness import identities
from harness.client import wait_until
from harness.control_plane import audit_requests
from harness.fixtures import Kube, control_plane, load_crds, restricted_pod
from harness.identities import Identity
from lading_operator import controller, k8s, lifecycle, progress, render
from lading_operator import reconcile as rc
from lading_operator import status as st
from lading_operator.kinds import COMPACTION, COPYJOB

REPO = Path(__file__).resolve().parents[2]


def _copyjob(rv: str) -> dict:
    return {"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob",
            "metadata": {"name": "a", "namespace": "ns", "resourceVersion": rv, "generation": 1},
            "status": {"phase": "Submitted"}}


def test_kopf_body_is_used_only_when_it_is_our_last_write_or_older_or_new() -> None:
    controller.forget(COPYJOB, "ns", "a")
    body = kopf.Body(_copyjob("7"))
    assert controller.known_resource(COPYJOB, body) is None  # a status no pass of ours wrote: read it
    fresh = {k: v for k, v in _copyjob("5").items() if k != "status"}
    assert controller.known_resource(COPYJOB, kopf.Body(fresh)) == fresh  # new: the first pass reads nothing
    controller._wrote(COPYJOB, "6", _copyjob("7"))
    known = controller.known_resource(COPYJOB, body)
    assert known == _copyjob("7")
    known["status"]["phase"] = "Running"  # a copy: kopf's body is untouched
    assert body["status"]["phase"] == "Submitted"
    # the version our write was planned from: its own event is still on the way, what it returned is newer
    assert controller.known_resource(COPYJOB, kopf.Body(_copyjob("6"))) == _copyjob("7")
    assert controller.known_resource(COPYJOB, kopf.Body(_copyjob("8"))) is None  # newer than our write
    assert controller.known_resource(COPYJOB, kopf.Body(_copyjob("5"))) is None  # older than what we planned from
    assert controller.known_resource(COPYJOB, kopf.Body(fresh)) is None  # written: a status-less body is old
    controller.forget(COPYJOB, "ns", "a")
    assert controller.known_resource(COPYJOB, body) is None


def test_an_application_from_a_watch_event_is_taken_once() -> None:
    app = {"metadata": {"name": "app", "namespace": "ns"}, "status": {"applicationState": {"state": "COMPLETED"}}}
    controller.app_event("ns", "app", app)
    app["status"]["applicationState"]["state"] = "RUNNING"  # kept as a copy
    taken = controller._get_app("ns", "app")  # from the event: no API call
    assert taken is not None and taken["status"]["applicationState"]["state"] == "COMPLETED"
    assert ("ns", "app") not in controller._apps  # taken once; the next pass reads the API
    controller.app_event("ns", "app", app)
    controller.app_event("ns", "app", None)  # deleted: nothing kept, the pass reads the API
    assert ("ns", "app") not in controller._apps


def test_cache_keys_hold_the_kind() -> None:
    # A Compaction and a CopyJob of one name: our write of one does not make the other "known".
    compaction = {**_copyjob("7"), "kind": "Compaction"}
    controller._wrote(COMPACTION, "6", compaction)
    assert controller.known_resource(COMPACTION, kopf.Body(compaction)) is not None
    assert controller.known_resource(COPYJOB, kopf.Body(_copyjob("7"))) is None
    controller.forget(COMPACTION, "ns", "a")


# --- on the real API server: the shell's side of the plan ------------------------------------

API = "lading.io/v1alpha1"
SPARK = "sparkoperator.k8s.io/v1beta2"
SPEC = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://out/x/", "format": "csv"}}


@pytest.fixture
def api(kube: Kube, operator_identity: Identity, monkeypatch: pytest.MonkeyPatch) -> Iterator[Kube]:
    """The operator's own API client (lading_operator.k8s) on the real control plane, as the
    chart's ServiceAccount with the chart's RBAC (the test itself acts through ``kube.client``)."""
    monkeypatch.setenv("KUBECONFIG", operator_identity.kubeconfig)
    k8s.reset_client()
    yield kube
    k8s.reset_client()


def _create_job(kube: Kube, namespace: str, name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return kube.client.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": name, "namespace": namespace},
                               "spec": dict(SPEC if spec is None else spec)}, "copyjobs")


def _app_for(job: dict[str, Any], run_id: str, attempt: int = 1) -> dict[str, Any]:
    meta = job["metadata"]
    run = render.RunIdentity(kind="CopyJob", namespace=meta["namespace"], name=meta["name"], uid=meta["uid"],
                             generation=1, run_id=run_id, run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                             attempt=attempt)
    return render.build_sparkapplication(job["spec"], run)


def _ready(obj: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")


def _reasons(kube: Kube, namespace: str, name: str) -> list[str]:
    return [e["reason"] for e in kube.client.list("v1", "events", namespace) if e["involvedObject"]["name"] == name]


@pytest.mark.k8s
def test_a_namesakes_application_is_never_adopted(api: Kube, kube_namespace: str) -> None:
    kube, ns = api, kube_namespace
    job = _create_job(kube, ns, "nightly", {**SPEC, "schedule": "@every 10s"})
    created = st.parse_time(job["metadata"]["creationTimestamp"])
    assert created is not None
    obs = controller.observe(COPYJOB, job, now=created + dt.timedelta(seconds=11))
    plan = rc.plan(obs, kind=COPYJOB)
    assert plan.create is not None
    # A CopyJob of the same name, deleted a moment ago, left its run of this slot behind:
    # the garbage collector is deleting it, spark-operator's finalizer still holds it.
    namesake = copy.deepcopy(plan.create)
    namesake["metadata"]["ownerReferences"][0]["uid"] = "uid-of-the-deleted-namesake"
    namesake["metadata"]["finalizers"] = ["sparkoperator.k8s.io/finalizer"]
    app_name = namesake["metadata"]["name"]
    kube.client.create(namesake, "sparkapplications")
    kube.client.delete(SPARK, "sparkapplications", ns, app_name)  # as the garbage collector does
    controller.execute(COPYJOB, obs, plan)
    waiting = kube.client.get(API, "copyjobs", ns, "nightly")
    assert waiting["status"]["phase"] == "Submitted" and waiting["status"]["sparkApplication"] == app_name
    ready = _ready(waiting)
    assert ready["reason"] == "NameTaken" and "not adopting it" in ready["message"]
    assert "uid-of-the-deleted-namesake" in ready["message"]
    assert "NameTaken" in _reasons(kube, ns, "nightly")
    # Later passes neither follow it nor write anything while it is there.
    assert controller.reconcile(COPYJOB, ns, "nightly") == lifecycle.FOLLOW_INTERVAL
    again = kube.client.get(API, "copyjobs", ns, "nightly")
    assert again["metadata"]["resourceVersion"] == waiting["metadata"]["resourceVersion"]
    owner = kube.client.get(SPARK, "sparkapplications", ns, app_name)["metadata"]["ownerReferences"][0]
    assert owner["uid"] == "uid-of-the-deleted-namesake"
    # Once it is gone, the run gets its own application, and the condition says so.
    kube.client.patch(SPARK, "sparkapplications", ns, app_name, {"metadata": {"finalizers": None}})
    kube.client.wait_gone(SPARK, "sparkapplications", ns, app_name)
    controller.reconcile(COPYJOB, ns, "nightly")
    ours = kube.client.get(SPARK, "sparkapplications", ns, app_name)
    assert ours["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    controller.reconcile(COPYJOB, ns, "nightly")
    assert _ready(kube.client.get(API, "copyjobs", ns, "nightly"))["reason"] == "Submitted"


@pytest.fixture
def short_of(kube: Kube, kube_namespace: str, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Identity]]:
    """``short_of(group, resource, verb)``: the operator's API client as a ServiceAccount whose
    Role in this test's namespace has the chart's operator rules without that one verb, so the
    real API server answers 403 to it; called again with no argument, the full rules (the verb
    granted, as when RBAC finishes propagating). Returns once the authorizer answers so."""
    def grant(group: str = "", resource: str = "", verb: str = "") -> Identity:
        rules = identities.operator_rules()
        if verb:
            rules = identities.without_verb(rules, group, resource, verb)
        identity = identities.namespaced(kube, kube_namespace, "lading-short", rules, tmp_path)
        client = kube.client_for(identity.token)
        checks = [("get", "lading.io", "copyjobs", True), ("patch", "lading.io", "copyjobs/status", True)]
        checks.append((verb, group, resource, False) if verb else
                      ("create", "sparkoperator.k8s.io", "sparkapplications", True))
        wait_until(lambda: [identities.allowed(client, v, g, r, kube_namespace) for v, g, r, _ in checks],
                   lambda answers: answers == [want for *_, want in checks], timeout=30, interval=0.1,
                   what=f"RBAC of {identity.user} in {kube_namespace}")
        monkeypatch.setenv("KUBECONFIG", identity.kubeconfig)
        k8s.reset_client()
        return identity

    yield grant
    k8s.reset_client()


@pytest.mark.k8s
def test_a_role_without_create_on_sparkapplications_is_retried_with_a_condition(
        kube: Kube, kube_namespace: str, short_of: Callable[..., Identity]) -> None:
    """The real API server refuses the create (403, its own message); the run waits with a condition
    and one Event, backs off, and goes on once the Role grants the verb."""
    ns = kube_namespace
    identity = short_of("sparkoperator.k8s.io", "sparkapplications", "create")
    _create_job(kube, ns, "rbac")
    delays = [controller.reconcile(COPYJOB, ns, "rbac") for _ in range(3)]
    assert delays == list(controller.CREATE_BACKOFF[:3])  # no exception: the loop does not crash
    job = kube.client.get(API, "copyjobs", ns, "rbac")
    assert job["status"]["phase"] == "Submitted"  # not Failed: it may still work
    ready = _ready(job)
    assert ready["reason"] == "CreateForbidden" and "Retrying with backoff" in ready["message"]
    assert f"sparkapplications in namespace {ns}" in ready["message"]
    # The server's own words reach the condition: who was refused what.
    assert f'User "{identity.user}" cannot create resource "sparkapplications"' in ready["message"]
    assert _reasons(kube, ns, "rbac").count("CreateForbidden") == 1  # one Event, not one per retry
    assert kube.client.list(SPARK, "sparkapplications", ns) == []
    short_of()  # the Role now grants create
    controller.reconcile(COPYJOB, ns, "rbac")
    assert kube.client.get_or_none(SPARK, "sparkapplications", ns, job["status"]["sparkApplication"]) is not None
    controller.reconcile(COPYJOB, ns, "rbac")
    assert _ready(kube.client.get(API, "copyjobs", ns, "rbac"))["reason"] == "Submitted"


@pytest.mark.k8s
def test_missing_sparkapplication_crd_is_retried_with_a_condition(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An API server with lading's CRDs but no spark-operator: creates answer 404.
    with control_plane(tmp_path, load_crds(sorted((REPO / "crds").glob("*.yaml")))) as kube:
        identity = identities.install(kube, identities.operator_rbac(), identities.RELEASE_NAMESPACE,
                                      identities.RELEASE, tmp_path)
        monkeypatch.setenv("KUBECONFIG", identity.kubeconfig)
        k8s.reset_client()
        try:
            client = kube.client
            namespace = kube.create_namespace("team")
            client.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": "orphan", "namespace": namespace},
                           "spec": SPEC}, "copyjobs")
            assert controller.reconcile(COPYJOB, namespace, "orphan") == controller.CREATE_BACKOFF[0]
            assert controller.reconcile(COPYJOB, namespace, "orphan") == controller.CREATE_BACKOFF[1]
            job = client.get(API, "copyjobs", namespace, "orphan")
            assert job["status"]["phase"] == "Submitted"
            ready = _ready(job)
            assert ready["reason"] == "SparkApplicationCRDMissing"
            assert "install spark-operator" in ready["message"] and "Retrying with backoff" in ready["message"]
        finally:
            k8s.reset_client()
            controller.forget(COPYJOB, "team", "orphan")


@pytest.mark.k8s
def test_trimming_a_run_deletes_every_attempt_and_nothing_else(api: Kube, kube_namespace: str) -> None:
    kube, ns = api, kube_namespace
    job = _create_job(kube, ns, "hist", {**SPEC, "schedule": "@hourly"})
    keeper = kube.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "keeper", "namespace": ns}}, "configmaps")
    attempts = [_app_for(job, "a", i) for i in (1, 2, 3)]
    other_run = _app_for(job, "b")
    namesake = _app_for(job, "a", 4)  # same labels, another owner: not ours to delete
    namesake["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper",
                                                "uid": keeper["metadata"]["uid"]}]
    for app in [*attempts, other_run, namesake]:
        kube.client.create(app, "sparkapplications")
    controller.execute(COPYJOB, rc.Observed(job), rc.Plan(delete_runs=["a"]))
    left = sorted(a["metadata"]["name"] for a in kube.client.list(SPARK, "sparkapplications", ns))
    assert left == sorted([other_run["metadata"]["name"], namesake["metadata"]["name"]])


@pytest.mark.k8s
def test_progress_is_never_fetched_on_the_reconcile_thread(api: Kube, kube_namespace: str) -> None:
    kube, ns = api, kube_namespace
    job = _create_job(kube, ns, "busy")
    app = _app_for(job, "r1")
    name = app["metadata"]["name"]
    kube.client.create(app, "sparkapplications")
    kube.client.create(restricted_pod(ns, f"{name}-driver"), "pods")
    requests: list[str] = []

    class Silent(BaseHTTPRequestHandler):  # a driver UI that answers well, and counts who asks
        def do_GET(self) -> None:  # noqa: N802
            requests.append(self.path)
            body = json.dumps([{"id": "app-1"}] if self.path.endswith("applications")
                              else [{"numCompletedTasks": 1, "numTasks": 2}]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Silent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    try:
        kube.client.patch_status(SPARK, "sparkapplications", ns, name, {
            "applicationState": {"state": "RUNNING"}, "driverInfo": {"webUIAddress": address}})
        kube.client.patch_status(API, "copyjobs", ns, "busy", {
            "phase": "Running", "runId": "r1", "attempts": 1, "sparkApplication": name,
            "startTime": st.timestamp(dt.datetime.now(dt.UTC))})
        controller.reconcile(COPYJOB, ns, "busy")
        assert requests == []  # the pass asked the poller to follow it; it did not call the driver
        assert progress.POLLER.wanted()[(ns, name)] == address
        asyncio.run(progress.POLLER.poll_once())  # what the poller task does on the event loop
        asyncio.run(progress.POLLER.stop())
        assert len(requests) == 3
        controller.reconcile(COPYJOB, ns, "busy")
        written = kube.client.get(API, "copyjobs", ns, "busy")["status"]["progress"]
        assert (written["tasksDone"], written["tasksTotal"]) == (1, 2) and written["updatedAt"]
    finally:
        progress.POLLER.forget((ns, name))
        server.shutdown()
        server.server_close()


@pytest.mark.k8s
def test_an_expired_resource_the_role_may_not_delete_posts_no_event_until_it_goes(
        kube: Kube, kube_namespace: str, short_of: Callable[..., Identity]) -> None:
    """ttlSecondsAfterFinished with a Role without delete on copyjobs: the real server answers 403,
    every pass fails visibly (the loop backs off) and posts no Expired Event; granted, it goes."""
    ns = kube_namespace
    identity = short_of("lading.io", "copyjobs", "delete")
    _create_job(kube, ns, "ttl", {**SPEC, "ttlSecondsAfterFinished": 1})
    kube.client.patch_status(API, "copyjobs", ns, "ttl", {"phase": "Succeeded",
                                                           "completionTime": "2026-01-01T00:00:00Z"})
    for _ in range(3):
        with pytest.raises(ApiException) as refused:
            controller.reconcile(COPYJOB, ns, "ttl")
        assert refused.value.status == 403
        assert f'User "{identity.user}" cannot delete resource "copyjobs"' in controller._api_message(refused.value)
    assert "Expired" not in _reasons(kube, ns, "ttl")  # not one Event per refused pass
    assert kube.client.get(API, "copyjobs", ns, "ttl")["status"]["phase"] == "Succeeded"
    short_of()  # the Role now grants delete
    assert controller.reconcile(COPYJOB, ns, "ttl") is None
    assert kube.client.get_or_none(API, "copyjobs", ns, "ttl") is None
    assert _reasons(kube, ns, "ttl").count("Expired") == 1


@pytest.mark.k8s
def test_the_first_pass_of_a_resource_that_never_ran_lists_no_applications(
        api: Kube, kube_namespace: str, operator_identity: Identity) -> None:
    """Strays are looked for from the second pass on: a resource without a run in its status
    owns no SparkApplication (the status names one before it is created), so listing them in the
    first pass was a request per CopyJob for nothing (the scale benchmark's list: 2.00 → 1.00)."""
    kube, ns = api, kube_namespace
    if not (kube.endpoint.directory / "audit.log").exists():
        pytest.skip("the API server's audit log is this machine's control plane's (not LADING_TEST_KUBECONFIG's)")

    def lists() -> int:
        return sum(1 for r in audit_requests(kube.endpoint, operator_identity.user)
                   if r.namespace == ns and r.verb == "list" and r.resource == "sparkapplications"
                   and r.code != 429)  # the client repeats a list the server's cache was not ready for

    _create_job(kube, ns, "fresh")
    controller.reconcile(COPYJOB, ns, "fresh")
    status = kube.client.get(API, "copyjobs", ns, "fresh")["status"]
    assert status["phase"] == "Submitted" and len(kube.client.list(SPARK, "sparkapplications", ns)) == 1
    assert lists() == 0
    controller.reconcile(COPYJOB, ns, "fresh")  # a run under way: its strays are looked for in
    assert lists() == 0                          # what the watch saw (it saw every create of ours)
    controller.forget(COPYJOB, ns, "fresh")      # as after a restart: the watch may not have shown
    controller.reconcile(COPYJOB, ns, "fresh")   # them all yet, so the first pass lists them
    assert lists() == 1
    controller.reconcile(COPYJOB, ns, "fresh")
    assert lists() == 1


@pytest.mark.k8s
def test_strays_are_found_in_what_the_watch_saw_and_confirmed_by_a_read(
        api: Kube, kube_namespace: str, operator_identity: Identity) -> None:
    """After its first pass, a resource's strays come from the SparkApplication watch (here its events
    are handed to the controller as kopf would), with no list: one that would be a stray is read
    before it counts, as the watch's copy may lag. A real stray is deleted (once); one the watch
    kept although it is gone (a DELETED event missed) is dropped; one whose copy says RUNNING but
    which has completed since is kept."""
    kube, ns = api, kube_namespace
    if not (kube.endpoint.directory / "audit.log").exists():
        pytest.skip("the API server's audit log is this machine's control plane's (not LADING_TEST_KUBECONFIG's)")
    job = _create_job(kube, ns, "watched")
    uid = job["metadata"]["uid"]
    controller.reconcile(COPYJOB, ns, "watched")  # never ran: submits; from now on the watch has its apps
    run_id = kube.client.get(API, "copyjobs", ns, "watched")["status"]["runId"]
    stray = kube.client.create(_app_for(job, "gone-run"), "sparkapplications")
    ghost = _app_for(job, "ghost-run")  # the watch showed it; it was deleted unseen
    lagging = kube.client.create(_app_for(job, run_id, attempt=9), "sparkapplications")
    name = lagging["metadata"]["name"]
    kube.client.patch_status(SPARK, "sparkapplications", ns, name,
                             {"applicationState": {"state": "COMPLETED"}, "driverInfo": {}})
    lagging["status"] = {"applicationState": {"state": "RUNNING"}}  # the watch has not shown it completed
    for app in (stray, ghost, lagging):
        controller.app_event(ns, app["metadata"]["name"], app, (uid,))
    controller.reconcile(COPYJOB, ns, "watched")
    assert kube.client.get_or_none(SPARK, "sparkapplications", ns, stray["metadata"]["name"]) is None
    assert kube.client.get_or_none(SPARK, "sparkapplications", ns, name) is not None
    assert not any(r.namespace == ns and r.verb == "list" for r in audit_requests(kube.endpoint,
                                                                                operator_identity.user))
    assert _reasons(kube, ns, "watched").count("StrayDeleted") == 1
    controller.reconcile(COPYJOB, ns, "watched")  # asked once: not deleted (nor announced) again
    assert _reasons(kube, ns, "watched").count("StrayDeleted") == 1
    controller.forget(COPYJOB, ns, "watched")


@pytest.mark.k8s
def test_a_pass_from_a_stale_watch_event_writes_nothing_and_starts_again_from_a_read(
        api: Kube, kube_namespace: str) -> None:
    """A new resource's first pass plans from its watch event, not from a read; a change that event
    does not show (here spec.cancel, set just after) makes the status write fail (409, the
    resourceVersion precondition), before any SparkApplication is created, and the pass starts again
    from a read: the job is cancelled before it ran, as a pass that had read it would have done."""
    kube, ns = api, kube_namespace
    job = _create_job(kube, ns, "stale")
    event = controller.known_resource(COPYJOB, kopf.Body(job))
    assert event is not None  # new: no read needed
    kube.client.patch(API, "copyjobs", ns, "stale", {"spec": {"cancel": True}})
    controller.reconcile(COPYJOB, ns, "stale", event)
    assert kube.client.get(API, "copyjobs", ns, "stale")["status"]["phase"] == "Cancelled"
    assert kube.client.list(SPARK, "sparkapplications", ns) == []
    controller.forget(COPYJOB, ns, "stale")


def test_at_its_deadline_a_waiting_application_is_looked_into_whatever_its_age() -> None:
    # The deadline counts from the run's start, the start timeout from the application's creation,
    # a moment later: the pass at the deadline must read the driver pod (to say why the run never
    # started: Unschedulable, a quota, an image pull) although the application is not yet that old.
    start = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
    app = {"metadata": {"creationTimestamp": "2026-01-01T12:00:02Z"},
           "status": {"applicationState": {"state": "SUBMITTED"}}}
    at_deadline = start + dt.timedelta(seconds=45)
    assert not controller._may_be_stuck(app, at_deadline, 45.0)  # by its age alone: 43 s
    assert controller._may_be_stuck(app, at_deadline, 45.0, start + dt.timedelta(seconds=45))
    assert not controller._may_be_stuck(app, at_deadline - dt.timedelta(seconds=1), 45.0,
                                        start + dt.timedelta(seconds=45))
    running = {**app, "status": {"applicationState": {"state": "RUNNING"}}}
    assert not controller._may_be_stuck(running, at_deadline, 45.0, start + dt.timedelta(seconds=45))
    unpicked = {**app, "status": {}}  # spark-operator has not picked it up: no pod to read
    assert not controller._may_be_stuck(unpicked, at_deadline, 45.0, start + dt.timedelta(seconds=45))
