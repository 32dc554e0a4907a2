"""The continuous trigger policy (StreamCopy), situation by situation, with plain dicts (no cluster).

Each test walks the planner through what the API server and spark-operator would
show next, feeding every plan's status back in, as the controller does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lading_operator import kinds, phases
from lading_operator import reconcile as rc
from lading_operator.phases import Phase, Trigger
from lading_operator.triggers import continuous

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 1, 2, 3, 0, tzinfo=dt.UTC)
SPEC: dict[str, Any] = {
    "source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["orders"], "secretRef": {"name": "kafka"}}},
    "target": {"table": "s3://warehouse/orders/", "schema": [{"name": "id", "type": "bigint"}]},
    "maxErrorNumber": 1, "deadLetter": "s3://warehouse/dead/",
}


class Stream:
    """A StreamCopy whose status follows the plans made for it."""

    def __init__(self, spec: dict[str, Any] | None = None) -> None:
        self.spec = dict(SPEC if spec is None else spec)
        self.generation = 1
        self.status: dict[str, Any] = {}
        self.now = NOW

    def resource(self) -> dict[str, Any]:
        return {"apiVersion": "lading.io/v1alpha1", "kind": "StreamCopy",
                "metadata": {"name": "orders", "namespace": "ns", "uid": "uid-s", "generation": self.generation,
                             "creationTimestamp": "2026-01-02T00:00:00Z"},
                "spec": dict(self.spec), "status": dict(self.status)}

    def plan(self, app: dict[str, Any] | None = None, pod: dict[str, Any] | None = None, checked: bool = True,
             progress: dict[str, Any] | None = None, seconds: float = 5) -> rc.Plan:
        self.now += dt.timedelta(seconds=seconds)
        out = rc.plan(rc.Observed(self.resource(), app, pod, checked, self.now, progress=progress))
        self.status.update(out.status)
        self.status = {k: v for k, v in self.status.items() if v is not None}
        return out

    def change(self, **spec: Any) -> None:
        self.spec.update(spec)
        self.generation += 1

    @property
    def app_name(self) -> str:
        return str(self.status["sparkApplication"])


def app(name: str, state: str, deleting: bool = False, error: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "ownerReferences": [{"uid": "uid-s"}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-02T03:00:00Z"
    app_state: dict[str, Any] = {"state": state, **({"errorMessage": error} if error else {})}
    return {"metadata": meta, "status": {"applicationState": app_state, "driverInfo": {"podName": f"{name}-driver"}}}


def pod(name: str, ip: str | None = "10.0.0.7", result: dict[str, Any] | None = None, exit_code: int = 0,
        phase: str = "Running") -> dict[str, Any]:
    state: dict[str, Any] = {"running": {}}
    if result is not None:
        state = {"terminated": {"exitCode": exit_code, "message": json.dumps(result)}}
    return {"metadata": {"name": f"{name}-driver"},
            "spec": {"containers": [{"name": "spark-kubernetes-driver",
                                     "ports": [{"name": "progress", "containerPort": 8090}]}]},
            "status": {"phase": phase, **({"podIP": ip} if ip else {}),
                       "containerStatuses": [{"name": "spark-kubernetes-driver", "state": state}]}}


def cond(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


def progress_doc(run_id: str, rows: int, lag: int, fetched: dt.datetime, batches: int = 3) -> dict[str, Any]:
    return {"kind": "StreamProgress", "runId": run_id, "state": "running", "source": "kafka", "rowsTotal": rows,
            "batches": batches, "lag": {"total": lag, "partitions": {"orders:0": lag}},
            "lastBatch": {"time": "2026-01-02T03:00:01.000Z", "rows": 10, "bytes": 900, "rejected": 0,
                          "durationSeconds": 0.5, "range": "orders/0@0..9", "end": {"orders:0": 10}},
            "offsets": {"orders:0": rows}, "fetchedAt": fetched.strftime("%Y-%m-%dT%H:%M:%SZ")}


def running_stream() -> Stream:
    s = Stream()
    s.plan()
    s.plan(app(s.app_name, "RUNNING"), pod(s.app_name))
    assert s.status["phase"] == "Running"
    return s


# --- the table ---------------------------------------------------------------------------

def test_every_phase_the_policy_reaches_is_one_the_crd_accepts() -> None:
    crd = yaml.safe_load((REPO / "crds" / "streamcopies.lading.io.yaml").read_text())
    enum = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["phase"]
    assert {str(p) for p in phases.reachable(continuous.TABLE)} == set(enum["enum"]) == set(kinds.STREAMCOPY.phases)


@pytest.mark.parametrize(("phase", "trigger"), [
    (Phase.RUNNING, Trigger.COMPLETED), (Phase.RUNNING, Trigger.CANCEL), (Phase.FAILED, Trigger.SUBMIT),
    (Phase.SUSPENDED, Trigger.SUBMIT), (Phase.PENDING, Trigger.APP_RUNNING),
])
def test_unlisted_transitions_are_refused(phase: Phase, trigger: Trigger) -> None:
    with pytest.raises(phases.TransitionError):
        phases.next_phase(continuous.TABLE, phase, trigger)


def test_a_streamcopy_runs_under_the_continuous_policy() -> None:
    assert kinds.STREAMCOPY.engine_available and rc.context(rc.Observed(Stream().resource())).policy \
        is continuous.POLICY


# --- starting and running ------------------------------------------------------------------

def test_a_new_stream_gets_one_long_running_application() -> None:
    s = Stream()
    plan = s.plan()
    assert plan.phase == "Submitted" and plan.create is not None
    assert s.app_name == f"orders-streamcopy-{s.status['runId']}-1"
    assert plan.create["spec"]["restartPolicy"]["type"] == "OnFailure"
    # Submitted, waiting: not ready yet, work under way
    assert cond(s.status, "Ready")["status"] == "False" and cond(s.status, "Reconciling")["status"] == "True"
    again = s.plan(app(s.app_name, "SUBMITTED"), None, checked=False)
    assert again.create is None and not again.delete_apps


def test_running_is_ready_and_the_driver_progress_is_followed_at_the_pod() -> None:
    s = Stream()
    s.plan()
    plan = s.plan(app(s.app_name, "RUNNING"), pod(s.app_name))
    assert plan.phase == "Running" and ("Normal", "Running", f"SparkApplication {s.app_name} is running") \
        in plan.events
    assert cond(s.status, "Ready")["status"] == "True" and cond(s.status, "Reconciling")["status"] == "False"
    assert plan.follow_progress and plan.progress_source == "stream"
    assert plan.progress_address == "http://10.0.0.7:8090"
    no_ip = s.plan(app(s.app_name, "RUNNING"), pod(s.app_name, ip=None))
    assert not no_ip.follow_progress  # nothing to poll until the pod has an address


def test_progress_reaches_status_when_it_changed_throttled_and_with_a_heartbeat() -> None:
    s = running_stream()
    run = s.status["runId"]
    a, p = app(s.app_name, "RUNNING"), pod(s.app_name)
    first = s.plan(a, p, progress=progress_doc(run, 100, 7, s.now), seconds=1)
    assert first.status["rowsTotal"] == 100 and first.status["lag"] == 7 and first.status["batches"] == 3
    assert first.status["lagPartitions"] == {"orders:0": 7} and first.status["offsets"] == {"orders:0": 100}
    assert first.status["lastBatch"]["rejected"] == 0 and first.status["lastBatch"]["end"] == {"orders:0": 10}
    assert first.status["lastBatchTime"] == "2026-01-02T03:00:01.000Z"
    assert first.status["progressUpdatedAt"] == s.status["progressUpdatedAt"]
    # Changed again 5 s later: not yet (at most every MIN_STATUS_INTERVAL) ...
    assert "rowsTotal" not in s.plan(a, p, progress=progress_doc(run, 150, 2, s.now + dt.timedelta(seconds=5)),
                                     seconds=5).status
    # ... then, 10 s after the last write, it is written.
    later = s.plan(a, p, progress=progress_doc(run, 160, 0, s.now + dt.timedelta(seconds=6)), seconds=6)
    assert later.status["rowsTotal"] == 160 and later.status["lag"] == 0
    # Unchanged: only the heartbeat, every HEARTBEAT seconds, moves progressUpdatedAt.
    quiet = s.plan(a, p, progress=progress_doc(run, 160, 0, s.now + dt.timedelta(seconds=11)), seconds=11)
    assert not quiet.status
    beat = s.plan(a, p, progress=progress_doc(run, 160, 0, s.now + dt.timedelta(seconds=10)), seconds=10)
    assert set(beat.status) >= {"progressUpdatedAt"} and beat.status["rowsTotal"] == 160
    # A document that is not newer than what status holds writes nothing.
    stale = progress_doc(run, 999, 0, dt.datetime(2026, 1, 2, 2, 0, tzinfo=dt.UTC))
    assert not s.plan(a, p, progress=stale, seconds=60).status


def test_a_document_of_another_run_is_ignored() -> None:
    s = running_stream()
    plan = s.plan(app(s.app_name, "RUNNING"), pod(s.app_name), progress=progress_doc("other", 5, 1, s.now))
    assert "rowsTotal" not in plan.status


# --- stopping on purpose ---------------------------------------------------------------------

TOO_MANY = {"error": "batch orders/0@100..1099: 3 rejected rows exceed maxErrorNumber 1; First: orders/0@105: "
                     "'x' is not a valid bigint", "reason": "TooManyErrors", "batch": "orders/0@100..1099",
            "rowsTotal": 100, "batches": 4}


def test_too_many_errors_fails_with_the_batch_range_and_stays_stopped_until_the_spec_changes() -> None:
    s = running_stream()
    name, run = s.app_name, s.status["runId"]
    plan = s.plan(app(name, "COMPLETED"), pod(name, result=TOO_MANY, exit_code=0, phase="Succeeded"))
    assert plan.phase == "Failed" and not plan.delete_apps and plan.create is None  # kept: its logs
    ready = cond(s.status, "Ready")
    assert ready["reason"] == "TooManyErrors" and "orders/0@100..1099" in ready["message"]
    assert "raise spec.maxErrorNumber" in ready["message"]
    assert s.status["response"]["error"] == TOO_MANY["error"] and s.status["rowsTotal"] == 100
    assert cond(s.status, "Stalled")["status"] == "True" and plan.events[0][:2] == ("Warning", "TooManyErrors")
    # Nothing restarts it while the spec stays the same.
    for _ in range(3):
        quiet = s.plan(app(name, "COMPLETED"), pod(name, result=TOO_MANY, phase="Succeeded"), seconds=300)
        assert quiet.create is None and not quiet.delete_apps and quiet.phase is None
    # Raising maxErrorNumber (a new generation) starts a new run; the old application goes.
    s.change(maxErrorNumber=10)
    resumed = s.plan(app(name, "COMPLETED"), pod(name, result=TOO_MANY, phase="Succeeded"))
    assert resumed.phase == "Submitted" and resumed.delete_apps == [name] and resumed.create is not None
    assert s.status["runId"] != run and s.app_name != name
    assert [e[1] for e in resumed.events] == ["SpecChanged", "Submitted"]
    assert "response" not in s.status  # the old error is cleared


def test_a_spec_the_driver_finds_invalid_fails_with_invalid_spec_and_is_not_restarted() -> None:
    """No target.schema for a new Kafka JSON table: only the driver sees there is no table. Its
    result's reason InvalidSpec (exit 0) is a stop on purpose: Failed, nothing rerun."""
    s = running_stream()
    name = s.app_name
    result = {"error": "target.schema: there is no table at s3://warehouse/orders/; give target.schema (the "
                       "columns and types of the rows) so the stream can create it; nothing was committed and "
                       "the stream stopped", "reason": "InvalidSpec"}
    plan = s.plan(app(name, "COMPLETED"), pod(name, result=result, exit_code=0, phase="Succeeded"))
    assert plan.phase == "Failed" and plan.create is None
    ready = cond(s.status, "Ready")
    assert ready["reason"] == "InvalidSpec" and ready["message"].startswith("target.schema: there is no table")
    assert "a rerun cannot fix this spec" in ready["message"]
    quiet = s.plan(app(name, "COMPLETED"), pod(name, result=result, phase="Succeeded"), seconds=300)
    assert quiet.create is None and quiet.phase is None


def test_a_superseded_driver_fails_with_the_reason_and_is_not_restarted() -> None:
    """A driver of this stream whose epoch a newer driver passed (lading run on the same stream)
    stopped: Failed, reason Superseded, with what to do; nothing reruns it (a rerun would claim
    the stream back)."""
    s = running_stream()
    name = s.app_name
    result = {"error": "a newer driver of this StreamCopy (epoch 4) took over s3://warehouse/orders/; this driver "
                       "(epoch 3) stopped without committing batch orders/0@100..1099", "reason": "Superseded"}
    plan = s.plan(app(name, "COMPLETED"), pod(name, result=result, exit_code=0, phase="Succeeded"))
    assert plan.phase == "Failed" and plan.create is None
    ready = cond(s.status, "Ready")
    assert ready["reason"] == "Superseded" and "the newest driver wins" in ready["message"]


def test_a_stop_from_a_driver_that_exits_non_zero_deletes_the_app_so_nothing_reruns_it() -> None:
    s = running_stream()
    name = s.app_name
    result = {"error": "source.kafka: orders/0: offsets 0..99 are gone", "reason": "DataLoss"}
    plan = s.plan(app(name, "FAILING"), pod(name, result=result, exit_code=1, phase="Failed"))
    assert plan.phase == "Failed" and plan.delete_apps == [name]
    assert cond(s.status, "Ready")["reason"] == "DataLoss" and "failOnDataLoss: false" in \
        cond(s.status, "Ready")["message"]


def test_a_stopped_stream_whose_delete_was_lost_is_deleted_by_a_later_pass() -> None:
    """The pass that wrote Failed asked for the delete; if that delete was lost (the operator
    killed, the API answering 500), spark-operator reruns the driver. A later pass deletes it
    again; an application that ended and reruns nothing (COMPLETED) is kept for its logs."""
    s = running_stream()
    name = s.app_name
    result = {"error": "source.kafka: orders/0: offsets 0..99 are gone", "reason": "DataLoss"}
    assert s.plan(app(name, "FAILING"), pod(name, result=result, exit_code=1, phase="Failed")).delete_apps == [name]
    for state in ("PENDING_RERUN", "SUBMITTED", "RUNNING", "FAILING"):
        again = s.plan(app(name, state), None if state != "FAILING" else
                       pod(name, result=result, exit_code=1, phase="Failed"), seconds=60)
        assert again.delete_apps == [name] and again.create is None and s.status["phase"] == "Failed", state
    gone = s.plan(app(name, "RUNNING", deleting=True), pod(name), seconds=60)  # being deleted: not again
    assert not gone.delete_apps and gone.create is None
    for state in ("COMPLETED", "FAILED"):
        kept = s.plan(app(name, state), pod(name, result=result, exit_code=1, phase="Failed"), seconds=60)
        assert not kept.delete_apps and kept.create is None and kept.phase is None, state


def test_source_conflict_says_what_to_do() -> None:
    s = running_stream()
    result = {"error": "another writer moved this stream's source position", "reason": "SourceConflict"}
    s.plan(app(s.app_name, "COMPLETED"), pod(s.app_name, result=result, phase="Succeeded"))
    assert s.status["phase"] == "Failed" and "Stop the other writer" in cond(s.status, "Ready")["message"]


# --- suspend, resume, spec change -------------------------------------------------------------

def test_suspend_stops_the_application_and_resume_waits_until_its_driver_is_gone() -> None:
    s = running_stream()
    name = s.app_name
    s.change(suspend=True)
    stopping = s.plan(app(name, "RUNNING"), pod(name))
    assert stopping.phase == "Suspended" and stopping.delete_apps == [name]
    assert cond(s.status, "Ready")["reason"] == "Suspending"
    # Being deleted (spark-operator's finalizer stops the driver): not deleted again.
    assert not s.plan(app(name, "RUNNING", deleting=True), pod(name), seconds=1).delete_apps
    # Resumed while the old driver still exits: nothing new yet.
    s.change(suspend=False)
    waiting = s.plan(app(name, "RUNNING", deleting=True), pod(name), seconds=1)
    assert waiting.create is None and s.status["phase"] == "Suspended"
    still = s.plan(None, pod(name, phase="Running"), seconds=1)  # app gone, its pod terminating
    assert still.create is None and still.requeue_after == continuous.STOP_POLL
    resumed = s.plan(None, None, seconds=1)
    assert resumed.phase == "Submitted" and resumed.create is not None and s.app_name != name
    assert [e[1] for e in resumed.events] == ["Resumed", "Submitted"]


def test_suspended_says_so_once_the_driver_is_gone() -> None:
    s = running_stream()
    name = s.app_name
    s.change(suspend=True)
    s.plan(app(name, "RUNNING"), pod(name))
    gone = s.plan(None, None)
    assert gone.phase == "Suspended" and cond(s.status, "Ready")["reason"] == "Suspended"
    assert cond(s.status, "Ready")["status"] == "True"  # suspended as asked: nothing to wait for
    assert not s.plan(None, None, seconds=300).status


def test_a_new_stream_created_suspended_starts_nothing() -> None:
    s = Stream({**SPEC, "suspend": True})
    plan = s.plan(None, None, checked=False)
    assert plan.phase == "Suspended" and plan.create is None


def test_a_spec_change_stops_the_old_driver_before_the_new_one_starts() -> None:
    s = running_stream()
    old, old_run = s.app_name, s.status["runId"]
    s.change(batching={"maxBatchInterval": "5s"})
    plan = s.plan(app(old, "RUNNING"), pod(old))
    assert plan.phase == "Submitted" and plan.delete_apps == [old] and plan.create is None
    assert cond(s.status, "Ready")["reason"] == "Restarting" and "generation 2" in cond(s.status, "Ready")["message"]
    assert s.status["observedGeneration"] == 2
    assert not s.plan(app(old, "RUNNING", deleting=True), pod(old), seconds=1).create
    assert not s.plan(None, pod(old), seconds=1).create  # its pod is still going away
    new = s.plan(None, None, seconds=1)
    assert new.create is not None and s.status["runId"] != old_run
    job = json.loads(new.create["spec"]["arguments"][1])
    assert job["metadata"]["generation"] == 2 and job["spec"]["batching"] == {"maxBatchInterval": "5s"}
    ran = s.plan(app(s.app_name, "RUNNING"), pod(s.app_name))
    assert ran.phase == "Running"


# --- crashes -------------------------------------------------------------------------------

def test_a_crashed_driver_is_rerun_by_spark_operator_and_shown_restarting() -> None:
    s = running_stream()
    name = s.app_name
    crashed = s.plan(app(name, "FAILING"), pod(name, result={"error": "Kafka: broker down"}, exit_code=1,
                                                   phase="Failed"))
    assert crashed.phase == "Submitted" and not crashed.delete_apps and crashed.create is None
    assert cond(s.status, "Ready")["reason"] == "Restarting" and "broker down" in cond(s.status, "Ready")["message"]
    assert crashed.events[0][0] == "Warning"
    rerun = s.plan(app(name, "PENDING_RERUN"), None, checked=False)
    assert rerun.create is None and not rerun.delete_apps
    back = s.plan(app(name, "RUNNING"), pod(name))
    assert back.phase == "Running"


def test_an_evicted_driver_says_so() -> None:
    s = running_stream()
    s.plan(app(s.app_name, "FAILING"), pod(s.app_name, result={"cancelled": True, "rowsTotal": 5}, exit_code=143))
    assert "eviction" in cond(s.status, "Ready")["message"]


def test_when_spark_operator_gives_up_the_next_attempt_is_a_new_application() -> None:
    s = running_stream()
    first = s.app_name
    plan = s.plan(app(first, "FAILED", error="driver container failed with ExitCode: 1"),
                  pod(first, result={"error": "boom"}, exit_code=1, phase="Failed"))
    assert plan.delete_apps == [first] and plan.create is not None
    assert s.app_name == first[:-2] + "-2" and s.status["attempts"] == 2 and s.status["phase"] == "Submitted"
    assert "boom" in cond(s.status, "Ready")["message"] and "attempt 2" in cond(s.status, "Ready")["message"]


def test_an_application_deleted_by_someone_is_replaced_once_its_driver_is_gone() -> None:
    s = running_stream()
    first = s.app_name
    assert s.plan(None, pod(first)).create is None
    plan = s.plan(None, None)
    assert plan.create is not None and s.status["attempts"] == 2


def test_an_application_recorded_but_never_created_is_created() -> None:
    s = Stream()
    s.plan()
    plan = s.plan(None, None)
    assert plan.create is not None and plan.create["metadata"]["name"] == s.app_name


# --- bad specs -------------------------------------------------------------------------------

def test_a_spec_made_invalid_while_running_stops_it_and_a_fix_starts_it_after_the_old_driver() -> None:
    s = running_stream()
    old = s.app_name
    s.change(batching={"maxBatchInterval": "0s"})
    bad = s.plan(app(old, "RUNNING"), pod(old))
    assert bad.phase == "Failed" and bad.delete_apps == [old]
    assert cond(s.status, "Ready")["reason"] == "InvalidSpec" and \
        cond(s.status, "Ready")["message"].startswith("spec.batching.maxBatchInterval")
    s.change(batching={"maxBatchInterval": "1s"})
    fixing = s.plan(app(old, "RUNNING", deleting=True), pod(old))
    assert fixing.create is None and s.status["phase"] == "Pending"
    fixed = s.plan(None, None)
    assert fixed.create is not None and s.status["phase"] == "Submitted"


def test_a_refused_application_fails_until_the_spec_changes() -> None:
    s = Stream()
    s.plan()
    out = rc.submission_failed(rc.Observed(s.resource(), now=s.now), "spec.driver.cores: Invalid value")
    assert out.phase == "Failed" and cond(out.status, "Ready")["reason"] == "SubmissionFailed"


def test_the_kind_description_reads_a_stream_result() -> None:
    read = kinds.STREAMCOPY.read_result(TOO_MANY)
    assert read.response == {"error": TOO_MANY["error"]} and read.fields == {"rowsTotal": 100, "batches": 4}
    assert read.output == {}  # no mirror named: status.output is cleared, as at a run's start
    meta = "s3://b/t/metadata/v7.metadata.json"
    read = kinds.STREAMCOPY.read_result({**TOO_MANY, "icebergMetadata": meta, "destination": "s3://b/t/"})
    assert read.output == {"icebergMetadata": meta}  # the mirror's file, as the running stream's status showed it


def test_a_parked_streamcopy_kind_still_parks() -> None:
    parked = dataclasses.replace(kinds.STREAMCOPY, engine_available=False)
    plan = rc.plan(rc.Observed(Stream().resource(), now=NOW), kind=parked)
    assert plan.phase == "Pending" and plan.create is None


# --- how Flux (kstatus) and Argo CD read a stream's life ----------------------------------------

def kstatus_check() -> str:
    """The real kstatus (``shared/tools/kstatus-check``, beside or inside the checkout, or on PATH)."""
    import os
    import shutil

    for candidate in (os.environ.get("LADING_KSTATUS_CHECK", ""), str(REPO / "shared" / "tools" / "kstatus-check"),
                      str(REPO.parent / "shared" / "tools" / "kstatus-check"), shutil.which("kstatus-check") or ""):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise AssertionError("kstatus-check not found: set LADING_KSTATUS_CHECK or put shared/tools beside the checkout")


def test_kstatus_reads_each_step_of_a_stream_right() -> None:
    import subprocess

    s = Stream()
    seen: list[tuple[str, dict[str, Any]]] = []

    def snap(what: str) -> None:
        seen.append((what, {**s.resource(), "metadata": {**s.resource()["metadata"], "name": what}}))

    s.plan()
    snap("submitted")
    s.plan(app(s.app_name, "RUNNING"), pod(s.app_name))
    snap("running")
    name = s.app_name
    s.plan(app(name, "FAILING"), pod(name, result={"error": "Kafka: broker down"}, exit_code=1, phase="Failed"))
    snap("restarting")
    s.plan(app(name, "RUNNING"), pod(name))
    s.change(batching={"maxBatchInterval": "5s"})
    snap("spec-changed-not-seen-yet")
    s.plan(app(name, "RUNNING"), pod(name))
    snap("stopping-for-the-new-spec")
    s.plan(None, None)
    s.plan(app(s.app_name, "RUNNING"), pod(s.app_name))
    s.change(suspend=True)
    s.plan(app(s.app_name, "RUNNING"), pod(s.app_name))
    snap("suspending")
    s.plan(None, None)
    snap("suspended")
    s.change(suspend=False)
    s.plan(None, None)
    s.plan(app(s.app_name, "RUNNING"), pod(s.app_name))
    s.plan(app(s.app_name, "COMPLETED"), pod(s.app_name, result=TOO_MANY, phase="Succeeded"))
    snap("too-many-errors")
    docs = "".join(json.dumps(obj) + "\n" for _, obj in seen)
    out = subprocess.run([kstatus_check(), "--json", "-"], input=docs, capture_output=True, text=True, check=True)
    got = {(d := json.loads(line))["name"]: d["status"] for line in out.stdout.splitlines() if line.strip()}
    assert got == {"submitted": "InProgress", "running": "Current", "restarting": "InProgress",
                   "spec-changed-not-seen-yet": "InProgress", "stopping-for-the-new-spec": "InProgress",
                   "suspending": "InProgress", "suspended": "Current", "too-many-errors": "Failed"}, out.stdout
