"""The reconcile planner, situation by situation, with plain dicts (no cluster)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

import pytest

from lading_operator import reconcile as rc
from lading_operator import status as st

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
SPEC = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://out/x/", "format": "csv"}}


UID_HASH = hashlib.sha256(b"uid-1").hexdigest()[:6]  # a scheduled run id: the slot, u, this


def job(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob",
            "metadata": {"name": "exp", "namespace": "ns", "uid": "uid-1", "generation": 1,
                         "creationTimestamp": "2026-01-01T11:00:00Z", **meta},
            "spec": dict(SPEC if spec is None else spec), "status": dict(status or {})}


def app(state: str, name: str = "exp-copyjob-r1-1", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"},
            "status": {"applicationState": {"state": state}, **status}}


def pod(message: str | None) -> dict[str, Any]:
    terminated = {"exitCode": 0, **({"message": message} if message else {})}
    return {"metadata": {"name": "exp-copyjob-r1-1-driver"},
            "status": {"containerStatuses": [{"name": "spark-kubernetes-driver",
                                              "state": {"terminated": terminated}}]}}


def running(phase: str = "Running", attempts: int = 1, **extra: Any) -> dict[str, Any]:
    return {"phase": phase, "runId": "r1", "attempts": attempts, "sparkApplication": f"exp-copyjob-r1-{attempts}",
            "startTime": "2026-01-01T11:59:00Z", **extra}


def cond(plan: rc.Plan, type_: str) -> dict[str, Any]:
    return next(c for c in plan.status["conditions"] if c["type"] == type_)


def test_new_job_is_submitted_with_a_deterministic_app() -> None:
    plan = rc.plan(rc.Observed(job(), now=NOW))
    assert plan.phase == "Submitted"
    assert plan.create is not None
    name = plan.create["metadata"]["name"]
    assert plan.status["sparkApplication"] == name and plan.status["attempts"] == 1
    assert name == f"exp-copyjob-{plan.status['runId']}-1"
    assert plan.status["startTime"] == "2026-01-01T12:00:00Z"
    assert plan.status["observedGeneration"] == 1
    assert cond(plan, "Reconciling")["status"] == "True"
    assert plan.events and plan.events[0][1] == "Submitted"
    # Same resource, same decision: a restarted operator derives the same name.
    assert rc.plan(rc.Observed(job(), now=NOW + dt.timedelta(seconds=5))).create["metadata"]["name"] == name  # type: ignore[index]


@pytest.mark.parametrize(("spec", "field"), [
    ({**SPEC, "to": {"files": "s3://out/x/", "format": "xml"}}, "spec.to.format"),
    ({**SPEC, "to": {"files": "hdfs://nn/x/"}}, "spec.to.files"),
    ({**SPEC, "spark": {"driver": {"memory": "big"}}}, "spec.spark.driver.memory"),
    ({**SPEC, "schedule": "every day"}, "spec.schedule"),
    ({**SPEC, "concurrencyPolicy": "Sometimes"}, "spec.concurrencyPolicy"),
    ({**SPEC, "backoffLimit": -1}, "spec.backoffLimit"),
])
def test_invalid_spec_fails_naming_the_field(spec: dict[str, Any], field: str) -> None:
    plan = rc.plan(rc.Observed(job(spec), now=NOW))
    assert plan.phase == "Failed" and plan.create is None
    ready = cond(plan, "Ready")
    assert ready["reason"] == "InvalidSpec" and ready["message"].startswith(field + ":")
    assert cond(plan, "Stalled")["status"] == "True"
    assert plan.status["response"]["error"].startswith(field)
    # Reconciling it again changes nothing (no event storm).
    again = rc.plan(rc.Observed(job(spec, {**plan.status}), now=NOW))
    assert not again.status and not again.events


def test_policy_denial_is_forbidden() -> None:
    def deny(namespace: str, uris: list[tuple[str, str]], spark: Any) -> str | None:
        assert ("spec.to.files", "s3://out/x/") in uris and namespace == "ns" and spark is None
        return "spec.to.files: 's3://out/x/' is outside the allowed storage (allowed prefixes: s3://ok/)"

    plan = rc.plan(rc.Observed(job(), now=NOW), deny)
    assert plan.phase == "Failed" and cond(plan, "Ready")["reason"] == "Forbidden"
    assert "spec.to.files" in cond(plan, "Ready")["message"]


def test_fixed_spec_starts_afresh() -> None:
    failed = rc.plan(rc.Observed(job({**SPEC, "to": {"files": "s3://out/x/", "format": "xml"}}), now=NOW))
    fixed = job(SPEC, failed.status, generation=2)
    plan = rc.plan(rc.Observed(fixed, now=NOW))
    assert plan.phase == "Submitted" and plan.create is not None
    assert plan.status["observedGeneration"] == 2


def test_app_running_moves_to_running_and_follows_progress() -> None:
    plan = rc.plan(rc.Observed(job(status=running("Submitted")), app("RUNNING"), pod(None), True, NOW))
    assert plan.phase == "Running" and plan.follow_progress and plan.requeue_after


@pytest.mark.parametrize("state", ["", "NEW", "SUBMITTED", "PENDING_RERUN", "SUSPENDED", "RESUMING"])
def test_waiting_states_keep_submitted(state: str) -> None:
    plan = rc.plan(rc.Observed(job(status=running("Submitted")), app(state), None, False, NOW))
    assert not plan.status and plan.create is None and plan.requeue_after


def test_completed_reads_rows_and_output_from_the_driver() -> None:
    message = ('{"rows": 1000, "files": 2, "bytes": 4096, "manifest": "s3://out/x/_manifest.json", '
               '"destination": "s3://out/x/", "runId": "r1"}')
    plan = rc.plan(rc.Observed(job(status=running()), app("COMPLETED"), pod(message), True, NOW))
    assert plan.phase == "Succeeded"
    assert plan.status["response"]["rows"] == 1000 and plan.status["response"]["error"] is None
    assert plan.status["output"]["manifest"] == "s3://out/x/_manifest.json"
    assert plan.status["completionTime"] == "2026-01-01T12:00:00Z"
    assert cond(plan, "Ready")["status"] == "True" and cond(plan, "Succeeded")["status"] == "True"
    assert plan.finished_run == {"outcome": "Succeeded", "seconds": 60.0, "rows": 1000, "bytes": 4096}


def test_failed_query_reports_the_jobs_own_error() -> None:
    error = "[TABLE_OR_VIEW_NOT_FOUND] The table or view `nope` cannot be found."
    plan = rc.plan(rc.Observed(job(status=running()), app("FAILED"), pod(f'{{"error": "{error}"}}'), True, NOW))
    assert plan.phase == "Failed" and plan.create is None
    assert plan.status["response"]["error"] == error
    assert cond(plan, "Failed")["status"] == "True" and cond(plan, "Ready")["reason"] == "JobFailed"


def test_failure_without_a_result_uses_spark_operators_message() -> None:
    failed = app("SUBMISSION_FAILED")
    failed["status"]["applicationState"]["errorMessage"] = "failed to run spark-submit"
    plan = rc.plan(rc.Observed(job(status=running("Submitted")), failed, None, True, NOW))
    assert plan.phase == "Failed" and cond(plan, "Ready")["reason"] == "SubmissionFailed"
    assert plan.status["response"]["error"] == "failed to run spark-submit"


def test_backoff_limit_retries_as_a_new_application() -> None:
    spec = {**SPEC, "backoffLimit": 1}
    plan = rc.plan(rc.Observed(job(spec, running()), app("FAILED"), pod('{"error": "boom"}'), True, NOW))
    assert plan.phase == "Submitted" and plan.status["attempts"] == 2
    assert plan.create is not None and plan.create["metadata"]["name"] == "exp-copyjob-r1-2"
    assert plan.status["sparkApplication"] == "exp-copyjob-r1-2"
    assert plan.events[-1][:2] == ("Warning", "Retrying")
    # The retry keeps the run's identity (same run id, same run time → same destination).
    assert plan.create["metadata"]["labels"]["lading.io/run-id"] == "r1"
    second = rc.plan(rc.Observed(job(spec, running(attempts=2)), app("FAILED", "exp-copyjob-r1-2"),
                                 pod('{"error": "boom again"}'), True, NOW))
    assert second.phase == "Failed" and cond(second, "Ready")["reason"] == "BackoffLimitExceeded"
    assert "boom again" in second.status["response"]["error"]


def test_vanished_driver_pod_is_driver_lost() -> None:
    plan = rc.plan(rc.Observed(job(status=running()), app("RUNNING"), None, True, NOW))
    assert plan.phase == "Failed" and cond(plan, "Ready")["reason"] == "DriverLost"
    assert "exp-copyjob-r1-1-driver" in plan.status["response"]["error"]


def test_deadline_deletes_the_application() -> None:
    spec = {**SPEC, "activeDeadlineSeconds": 30}
    plan = rc.plan(rc.Observed(job(spec, running()), app("RUNNING"), pod(None), True, NOW))
    assert plan.phase == "Failed" and cond(plan, "Ready")["reason"] == "DeadlineExceeded"
    assert plan.delete_apps == ["exp-copyjob-r1-1"]
    within = rc.plan(rc.Observed(job({**SPEC, "activeDeadlineSeconds": 3600}, running()), app("RUNNING"),
                                 pod(None), True, NOW))
    assert within.phase is None and within.requeue_after is not None and within.requeue_after <= rc.FOLLOW_INTERVAL


def test_cancel_deletes_then_reports_cancelled() -> None:
    spec = {**SPEC, "cancel": True}
    first = rc.plan(rc.Observed(job(spec, running()), app("RUNNING"), pod(None), True, NOW))
    assert first.phase == "Cancelling" and first.delete_apps == ["exp-copyjob-r1-1"]
    still = rc.plan(rc.Observed(job(spec, {**running(), **first.status}),
                                {**app("RUNNING"), "metadata": {"name": "exp-copyjob-r1-1", "deletionTimestamp": "x"}},
                                None, False, NOW))
    assert not still.status and not still.delete_apps and still.requeue_after
    done = rc.plan(rc.Observed(job(spec, {**running(), **first.status}), None, None, False, NOW))
    assert done.phase == "Cancelled" and done.status["response"]["cancelled"] is True
    assert cond(done, "Reconciling")["status"] == "False"


def test_cancel_before_any_run() -> None:
    plan = rc.plan(rc.Observed(job({**SPEC, "cancel": True}), now=NOW))
    assert plan.phase == "Cancelled" and plan.create is None


def test_recorded_but_missing_app_is_created_again_under_the_same_name() -> None:
    plan = rc.plan(rc.Observed(job(status=running("Submitted")), None, None, False, NOW))
    assert plan.create is not None and plan.create["metadata"]["name"] == "exp-copyjob-r1-1"
    assert not plan.status


def test_app_gone_while_running_is_lost() -> None:
    plan = rc.plan(rc.Observed(job(status=running()), None, None, False, NOW))
    assert plan.phase == "Failed" and cond(plan, "Ready")["reason"] == "DriverLost"


def test_a_retry_waits_until_the_deleted_attempts_driver_pod_is_gone() -> None:
    # The application was deleted while running: its driver pod still stops, and a driver in its
    # commit section publishes first. The next attempt's recovery would roll that publish back.
    spec = {**SPEC, "backoffLimit": 2}
    stopping = {**pod(None), "metadata": {"name": "exp-copyjob-r1-1-driver", "deletionTimestamp": "x"}}
    waits = rc.plan(rc.Observed(job(spec, running()), None, stopping, True, NOW))
    assert waits.create is None and not waits.status and waits.requeue_after
    gone = rc.plan(rc.Observed(job(spec, running()), None, None, True, NOW))
    assert gone.phase == "Submitted" and gone.create is not None
    assert gone.create["metadata"]["name"] == "exp-copyjob-r1-2"
    # the same for an application recorded and deleted before the watch saw it run: made again only after
    again = rc.plan(rc.Observed(job(spec, running("Submitted")), None, stopping, True, NOW))
    assert again.create is None and not again.status
    # and with no retry left, the run ends only once the pod is gone (status says DriverLost then)
    assert rc.plan(rc.Observed(job(status=running()), None, stopping, True, NOW)).phase is None


def test_terminal_is_left_alone_until_ttl() -> None:
    done = {"phase": "Succeeded", "completionTime": "2026-01-01T11:59:30Z"}
    assert rc.plan(rc.Observed(job(status=done), now=NOW)).status == {}
    waiting = rc.plan(rc.Observed(job({**SPEC, "ttlSecondsAfterFinished": 60}, done), now=NOW))
    assert not waiting.delete_resource and waiting.requeue_after == pytest.approx(30)
    expired = rc.plan(rc.Observed(job({**SPEC, "ttlSecondsAfterFinished": 10}, done), now=NOW))
    assert expired.delete_resource


def test_suspend_before_start() -> None:
    plan = rc.plan(rc.Observed(job({**SPEC, "suspend": True}), now=NOW))
    assert plan.phase == "Suspended" and plan.create is None
    resumed = rc.plan(rc.Observed(job(SPEC, plan.status), now=NOW))
    assert resumed.phase == "Submitted" and resumed.create is not None


def test_schedule_waits_then_runs_each_slot_with_its_own_run_id() -> None:
    spec = {**SPEC, "to": {"files": "s3://out/{run_time:%H%M}/"}, "schedule": "*/30 * * * *"}
    early = rc.plan(rc.Observed(job(spec), now=dt.datetime(2026, 1, 1, 11, 10, tzinfo=dt.UTC)))
    assert early.phase == "Scheduled" and early.status["nextScheduleTime"] == "2026-01-01T11:30:00Z"
    assert early.create is None and early.requeue_after == pytest.approx(20 * 60)
    due = rc.plan(rc.Observed(job(spec, early.status), now=dt.datetime(2026, 1, 1, 11, 30, 2, tzinfo=dt.UTC)))
    assert due.phase == "Submitted" and due.status["runId"] == "20260101113000u" + UID_HASH
    assert due.status["lastScheduleTime"] == "2026-01-01T11:30:00Z"
    assert due.create is not None and '"runTime":"2026-01-01T11:30:00.000000Z"' in due.create["spec"]["arguments"][1]
    # The run ends: it goes to lastRuns and the job waits for the next slot.
    status = {**early.status, **due.status, "phase": "Running"}
    result = json.dumps({"rows": 5, "destination": "s3://out/1130/", "runId": "20260101113000u" + UID_HASH})
    ended = rc.plan(rc.Observed(job(spec, status), app("COMPLETED", due.status["sparkApplication"]), pod(result),
                                True, dt.datetime(2026, 1, 1, 11, 31, tzinfo=dt.UTC)))
    assert ended.phase == "Scheduled"
    assert ended.status["lastRuns"][0] == {
        "runId": "20260101113000u" + UID_HASH, "phase": "Succeeded", "sparkApplication": due.status["sparkApplication"],
        "startTime": "2026-01-01T11:30:02Z", "completionTime": "2026-01-01T11:31:00Z", "rows": 5,
        "destination": "s3://out/1130/"}
    assert ended.status["nextScheduleTime"] == "2026-01-01T12:00:00Z"
    assert ended.status["response"]["rows"] == 5
    nxt = rc.plan(rc.Observed(job(spec, {**status, **ended.status}), now=dt.datetime(2026, 1, 1, 12, 0, 1, tzinfo=dt.UTC)))
    assert nxt.status["runId"] == "20260101120000u" + UID_HASH and nxt.create is not None
    assert nxt.create["metadata"]["name"] != due.create["metadata"]["name"]


def test_history_limit_deletes_old_run_applications() -> None:
    spec = {**SPEC, "schedule": "@hourly", "successfulRunsHistoryLimit": 1}
    old = [{"runId": "a", "phase": "Succeeded", "sparkApplication": "exp-a-1"}]
    status = {**running(), "lastScheduleTime": "2026-01-01T12:00:00Z", "lastRuns": old}
    plan = rc.plan(rc.Observed(job(spec, status), app("COMPLETED"), pod('{"rows": 1}'), True, NOW))
    assert [r["runId"] for r in plan.status["lastRuns"]] == ["r1"]
    # The whole trimmed run goes, every attempt of it (by its run-id label), not one name.
    assert plan.delete_runs == ["a"] and plan.delete_apps == []


def test_replace_policy_stops_the_running_run_when_the_next_is_due() -> None:
    spec = {**SPEC, "schedule": "*/5 * * * *", "concurrencyPolicy": "Replace"}
    status = {**running(), "lastScheduleTime": "2026-01-01T11:50:00Z"}
    plan = rc.plan(rc.Observed(job(spec, status), app("RUNNING"), pod(None), True, NOW))
    assert plan.delete_apps == ["exp-copyjob-r1-1"] and plan.phase == "Scheduled"
    assert plan.status["lastRuns"][0]["phase"] == "Cancelled"
    forbid = rc.plan(rc.Observed(job({**spec, "concurrencyPolicy": "Forbid"}, status), app("RUNNING"), pod(None),
                                 True, NOW))
    assert not forbid.delete_apps and forbid.phase is None


def test_submission_refused_by_the_api() -> None:
    obs = rc.Observed(job(status=running("Submitted")), now=NOW)
    plan = rc.submission_failed(obs, 'SparkApplication.sparkoperator.k8s.io "x" is invalid: spec.driver.cores')
    assert plan.phase == "Failed" and cond(plan, "Ready")["reason"] == "SubmissionFailed"
    assert "spec.driver.cores" in plan.status["response"]["error"]


def test_timestamps() -> None:
    assert st.parse_time("2026-01-01T12:00:00Z") == NOW
    assert st.parse_time("garbage") is None


def test_allow_policy_runs_the_due_slot_alongside_and_follows_both() -> None:
    spec = {**SPEC, "schedule": "*/5 * * * *"}  # concurrencyPolicy defaults to Allow
    status = {**running(), "lastScheduleTime": "2026-01-01T11:55:00Z"}
    started = rc.plan(rc.Observed(job(spec, status), app("RUNNING"), pod(None), True, NOW))
    assert started.phase == "Submitted" and started.create is not None
    assert started.status["runId"] == "20260101120000u" + UID_HASH and not started.delete_apps
    assert started.status["lastRuns"][0] == {"runId": "r1", "phase": "Running", "sparkApplication": "exp-copyjob-r1-1",
                                             "startTime": "2026-01-01T11:59:00Z"}
    # The earlier run finishes while the new one runs: its lastRuns entry is updated.
    now = NOW + dt.timedelta(seconds=30)
    current = {**status, **started.status}
    new_app = app("RUNNING", started.status["sparkApplication"])
    done = rc.plan(rc.Observed(job(spec, current), new_app, pod(None), True, now,
                               others={"exp-copyjob-r1-1": (app("COMPLETED"), pod('{"rows": 3, "destination": "s3://o/a/"}'))}))
    entry = done.status["lastRuns"][0]
    assert entry["phase"] == "Succeeded" and entry["rows"] == 3 and entry["destination"] == "s3://o/a/"
    assert entry["completionTime"] == st.timestamp(now)
    assert done.phase == "Running"  # the current run moved on as well
    # A failed earlier run keeps its error.
    failed = rc.plan(rc.Observed(job(spec, current), new_app, pod(None), True, now,
                                 others={"exp-copyjob-r1-1": (app("FAILED"), pod('{"error": "boom"}'))}))
    assert failed.status["lastRuns"][0]["phase"] == "Failed" and failed.status["lastRuns"][0]["error"] == "boom"


def test_cancel_stops_every_run_under_way() -> None:
    spec = {**SPEC, "schedule": "*/5 * * * *", "cancel": True}
    status = {**running(attempts=1), "lastScheduleTime": "2026-01-01T12:00:00Z",
              "lastRuns": [{"runId": "r0", "phase": "Running", "sparkApplication": "exp-copyjob-r0-1"}]}
    plan = rc.plan(rc.Observed(job(spec, status), app("RUNNING"), pod(None), True, NOW,
                               others={"exp-copyjob-r0-1": (app("RUNNING", "exp-copyjob-r0-1"), pod(None))}))
    assert plan.phase == "Cancelling" and set(plan.delete_apps) == {"exp-copyjob-r1-1", "exp-copyjob-r0-1"}


def test_history_never_drops_a_run_under_way() -> None:
    runs = [{"runId": "a", "phase": "Running", "sparkApplication": "x"}, {"runId": "b", "phase": "Failed"}]
    kept, dropped = st.trim_history(runs, successful_limit=0, failed_limit=0)
    assert [r["runId"] for r in kept] == ["a"] and [r["runId"] for r in dropped] == ["b"]


# --- a spec change while a run is under way ------------------------------------------------

V2 = {**SPEC, "to": {"files": "s3://out/v2/", "format": "csv"}}


class Run:
    """Drives one resource through passes: status merge patches applied, its app observed."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.resource = job(spec)
        first = rc.plan(rc.Observed(self.resource, now=NOW))
        self.apply(first)
        assert first.create is not None
        self.app: dict[str, Any] = {**first.create, "status": {"applicationState": {"state": "RUNNING"}}}
        self.apply(rc.plan(rc.Observed(self.resource, self.app, pod(None), True, NOW)))
        assert self.resource["status"]["phase"] == "Running"

    def apply(self, plan: rc.Plan) -> rc.Plan:
        merged = {**self.resource["status"], **plan.status}
        self.resource["status"] = {k: v for k, v in merged.items() if v is not None}
        return plan

    def edit(self, spec: dict[str, Any]) -> rc.Plan:
        self.resource["spec"] = dict(spec)
        self.resource["metadata"]["generation"] += 1
        return self.apply(rc.plan(rc.Observed(self.resource, self.app, pod(None), True, NOW)))

    def ends(self, state: str, message: str) -> rc.Plan:
        self.app["status"]["applicationState"]["state"] = state
        return self.apply(rc.plan(rc.Observed(self.resource, self.app, pod(message), True, NOW)))

    def condition(self, type_: str) -> dict[str, Any] | None:
        return next((c for c in self.resource["status"]["conditions"] if c["type"] == type_), None)


def test_a_one_shot_run_goes_on_with_its_spec_and_says_the_change_is_ignored() -> None:
    run = Run(SPEC)
    edited = run.edit(V2)
    ignored = run.condition("SpecChangeIgnored")
    assert ignored is not None and ignored["status"] == "True" and ignored["observedGeneration"] == 2
    assert "generation 2" in ignored["message"] and "delete and re-create" in ignored["message"]
    assert [e[:2] for e in edited.events] == [("Warning", "SpecChangeIgnored")]
    assert edited.create is None and not edited.delete_apps
    ended = run.ends("COMPLETED", '{"rows": 1, "destination": "s3://out/x/"}')
    assert ended.phase == "Succeeded" and run.resource["status"]["output"]["destination"] == "s3://out/x/"
    # The run's end keeps saying that generation 2 did not run.
    ignored = run.condition("SpecChangeIgnored")
    assert ignored is not None and ignored["status"] == "True" and ignored["observedGeneration"] == 2
    later = run.apply(rc.plan(rc.Observed(run.resource, now=NOW)))
    assert not later.status and not later.events


def test_a_retry_never_runs_a_spec_the_run_did_not_start_with() -> None:
    run = Run({**SPEC, "backoffLimit": 2})
    run.edit({**V2, "backoffLimit": 2})
    ended = run.ends("FAILED", '{"error": "boom"}')
    assert ended.phase == "Failed" and ended.create is None
    assert run.resource["status"]["response"]["error"] == "boom"  # the job's own error
    assert "not retried" in next(c for c in run.resource["status"]["conditions"] if c["type"] == "Ready")["message"]
    assert run.condition("SpecChangeIgnored") is not None


def test_a_change_of_operator_fields_only_is_taken_and_retried() -> None:
    run = Run({**SPEC, "backoffLimit": 1})
    edited = run.edit({**SPEC, "backoffLimit": 2, "spark": {"driver": {"memory": "2g"}}})
    assert run.condition("SpecChangeIgnored") is None and not edited.events
    assert run.resource["status"]["observedGeneration"] == 2
    retried = run.ends("FAILED", '{"error": "boom"}')
    assert retried.phase == "Submitted" and retried.create is not None and retried.status["attempts"] == 2


def test_changing_the_spec_back_clears_the_condition() -> None:
    run = Run(SPEC)
    run.edit(V2)
    assert run.condition("SpecChangeIgnored") is not None
    run.edit(SPEC)
    assert run.condition("SpecChangeIgnored") is None and run.resource["status"]["observedGeneration"] == 3


def test_a_scheduled_run_goes_on_and_the_next_run_takes_the_change() -> None:
    at = dt.datetime(2026, 1, 1, 11, 30, 2, tzinfo=dt.UTC)
    spec, edited = {**SPEC, "schedule": "*/30 * * * *"}, {**V2, "schedule": "*/30 * * * *"}
    early = rc.plan(rc.Observed(job(spec), now=at - dt.timedelta(minutes=20)))
    due = rc.plan(rc.Observed(job(spec, early.status), now=at))
    assert due.create is not None
    started = {**due.create, "status": {"applicationState": {"state": "RUNNING"}}}
    status = {**early.status, **due.status, "phase": "Running"}
    plan = rc.plan(rc.Observed(job(edited, status, generation=2), started, pod(None), True, at))
    assert [e[:2] for e in plan.events] == [("Normal", "SpecChangeDeferred")]
    assert all(c["type"] != "SpecChangeIgnored" for c in plan.status.get("conditions") or [])
    # A failed attempt of that run is not retried with the new spec; the next run takes it.
    failed = {**started, "status": {"applicationState": {"state": "FAILED"}}}
    retry = rc.plan(rc.Observed(job({**edited, "backoffLimit": 1}, {**status, **plan.status}, generation=3),
                                failed, pod('{"error": "boom"}'), True, at))
    assert retry.create is None and retry.status["response"]["error"] == "boom"
    assert any("not retried" in e[2] for e in retry.events), retry.events
    nxt = rc.plan(rc.Observed(job(edited, {**status, **plan.status, **retry.status}, generation=3),
                              now=at + dt.timedelta(minutes=30)))
    assert nxt.create is not None and "s3://out/v2/" in nxt.create["spec"]["arguments"][1]


def test_a_huge_error_message_is_cut_in_status() -> None:
    # spark-operator puts spark-submit's output in errorMessage; status holds the message six
    # times (response and five conditions), and the API refuses objects over 1.5 MiB.
    failed = app("SUBMISSION_FAILED")
    failed["status"]["applicationState"]["errorMessage"] = "head " + "x" * 400_000 + " the cause"
    plan = rc.plan(rc.Observed(job(status=running("Submitted")), failed, None, True, NOW))
    assert plan.phase == "Failed"
    error = plan.status["response"]["error"]
    assert len(error) < 5000 and error.startswith("head ") and error.endswith(" the cause") and "characters cut" in error
    assert len(json.dumps(plan.status)) < 40_000
