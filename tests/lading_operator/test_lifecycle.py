"""One run's waits, planned from plain dicts: a SparkApplication nobody picks up, a driver that
does not start, a create the API refused, a namesake's application; and the messages
docs/troubleshooting.md quotes are the ones these print."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest

from lading_operator import lifecycle
from lading_operator import reconcile as rc

REPO = Path(__file__).resolve().parents[2]
CREATED = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
SPEC = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://out/x/", "format": "csv"},
        "connection": {"secretRef": {"name": "s3-credentials"}}}
APP = "exp-copyjob-r1-1"


def job(status: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob",
            "metadata": {"name": "exp", "namespace": "team-a", "uid": "uid-1", "generation": 1,
                         "creationTimestamp": "2026-01-01T11:00:00Z"},
            "spec": SPEC, "status": status}


def submitted(**extra: Any) -> dict[str, Any]:
    return {"phase": "Submitted", "runId": "r1", "attempts": 1, "sparkApplication": APP,
            "startTime": "2026-01-01T12:00:00Z",
            "conditions": [{"type": "Ready", "status": "False", "reason": "Submitted", "message": "submitted"}],
            **extra}


def app(state: str) -> dict[str, Any]:
    status = {"applicationState": {"state": state}} if state else {}
    return {"metadata": {"name": APP, "namespace": "team-a", "creationTimestamp": "2026-01-01T12:00:00Z"},
            "status": status}


def waiting_pod(reason: str, message: str) -> dict[str, Any]:
    return {"metadata": {"name": f"{APP}-driver"},
            "status": {"phase": "Pending", "containerStatuses": [
                {"name": "spark-kubernetes-driver", "state": {"waiting": {"reason": reason, "message": message}}}]}}


def plan_at(seconds: float, application: dict[str, Any] | None, pod: dict[str, Any] | None = None,
            checked: bool = False, status: dict[str, Any] | None = None) -> rc.Plan:
    obs = rc.Observed(job(status or submitted()), application, pod, checked, CREATED + dt.timedelta(seconds=seconds))
    return rc.plan(obs, start_timeout=120)


def ready(plan: rc.Plan) -> dict[str, Any]:
    return next(c for c in plan.status["conditions"] if c["type"] == "Ready")


def test_an_application_without_status_is_not_picked_up_after_the_timeout() -> None:
    assert not plan_at(119, app("")).status  # within the timeout: nothing to say yet
    late = plan_at(121, app(""))
    assert late.phase == "Submitted" and ready(late)["reason"] == "NotPickedUp"
    assert "namespace team-a is in its spark.jobNamespaces" in ready(late)["message"]
    assert late.events == [("Warning", "NotPickedUp", ready(late)["message"])]
    assert next(c for c in late.status["conditions"] if c["type"] == "Reconciling")["status"] == "True"
    # Said once: the next pass writes nothing.
    again = plan_at(180, app(""), status={**submitted(), **late.status})
    assert not again.status and not again.events


@pytest.mark.parametrize(("reason", "message", "says"), [
    ("ImagePullBackOff", 'Back-off pulling image "registry.local/lading:nope"', "registry.local/lading:nope"),
    ("CreateContainerConfigError", 'secret "s3-credentials" not found', 'secret "s3-credentials" not found'),
])
def test_a_driver_that_does_not_start_says_why(reason: str, message: str, says: str) -> None:
    plan = plan_at(200, app("SUBMITTED"), waiting_pod(reason, message), checked=True)
    assert ready(plan)["reason"] == "DriverNotStarting"
    assert f"has not started 120s after submission: {reason}: " in ready(plan)["message"]
    assert says in ready(plan)["message"]


def test_an_unschedulable_or_missing_driver_pod_says_so() -> None:
    unschedulable = {"metadata": {"name": f"{APP}-driver"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient memory."}]}}
    plan = plan_at(200, app("SUBMITTED"), unschedulable, checked=True)
    assert "Unschedulable: 0/3 nodes are available" in ready(plan)["message"]
    missing = plan_at(200, app("SUBMITTED"), None, checked=True)
    assert ready(missing)["reason"] == "DriverNotStarting" and "does not exist" in ready(missing)["message"]
    creating = waiting_pod("ContainerCreating", "")
    assert not plan_at(200, app("SUBMITTED"), creating, checked=True).status  # just slow, not stuck


def test_a_run_that_never_started_fails_at_its_deadline_saying_why() -> None:
    """activeDeadlineSeconds (the spec's bound, here shorter than the operator's start timeout)
    ends a run whose driver pod was never scheduled: Failed, naming the cause, never Pending forever."""
    unschedulable = {"metadata": {"name": f"{APP}-driver"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/1 nodes are available: 1 Insufficient cpu."}]}}
    status = submitted()
    obs = rc.Observed({**job(status), "spec": {**SPEC, "activeDeadlineSeconds": 20}}, app("SUBMITTED"),
                      unschedulable, True, CREATED + dt.timedelta(seconds=21))
    plan = rc.plan(obs, start_timeout=120)
    assert plan.phase == "Failed" and ready(plan)["reason"] == "DeadlineExceeded"
    assert plan.delete_apps == [APP]
    error = plan.status["response"]["error"]
    assert error.startswith("activeDeadlineSeconds (20s) exceeded before the run started: ")
    assert "Unschedulable: 0/1 nodes are available: 1 Insufficient cpu." in error
    assert "did not start within activeDeadlineSeconds (20s)" in ready(plan)["message"]
    # Within the deadline it waits, saying nothing yet (the start timeout has not passed either).
    early = rc.plan(rc.Observed(obs.resource, app("SUBMITTED"), unschedulable, True,
                                CREATED + dt.timedelta(seconds=19)), start_timeout=120)
    assert early.phase is None and early.requeue_after is not None and early.requeue_after <= 1.0 + 1e-9
    # A run that did start and then ran too long says so, as before.
    started = rc.plan(rc.Observed(obs.resource, app("RUNNING"), {"metadata": {"name": f"{APP}-driver"}}, True,
                                  CREATED + dt.timedelta(seconds=21)), start_timeout=120)
    assert started.status["response"]["error"] == "activeDeadlineSeconds (20s) exceeded"


def test_the_wait_clears_once_the_run_moves_on() -> None:
    stuck = plan_at(121, app(""))
    status = {**submitted(), **stuck.status}
    moving = plan_at(130, app("SUBMITTED"), None, False, status)
    assert ready(moving)["reason"] == "Submitted" and not moving.events
    running = plan_at(130, app("RUNNING"), {"metadata": {"name": f"{APP}-driver"}, "status": {}}, True, status)
    assert running.phase == "Running" and ready(running)["reason"] == "Running"


def test_a_namesakes_application_is_waited_for_never_followed() -> None:
    namesake = {**app("COMPLETED"), "metadata": {**app("")["metadata"], "ownerReferences": [
        {"kind": "CopyJob", "name": "exp", "uid": "uid-0"}]}}
    obs = rc.Observed(job(submitted()), None, None, False, CREATED, foreign_app=namesake)
    plan = rc.plan(obs)
    assert plan.create is None and ready(plan)["reason"] == "NameTaken"
    assert "CopyJob exp (uid uid-0)" in ready(plan)["message"]
    # Cancelling never deletes it.
    cancel = rc.plan(rc.Observed({**job(submitted()), "spec": {**SPEC, "cancel": True}}, None, None, False,
                                 CREATED, foreign_app=namesake))
    assert cancel.phase == "Cancelling" and cancel.delete_apps == []


# --- the messages docs/troubleshooting.md quotes ---------------------------------------

def _as_quoted(text: str, **values: str) -> str:
    """``text`` with sample values put back as the page's ``<placeholders>``."""
    for placeholder, value in values.items():
        text = text.replace(value, f"<{placeholder}>")
    return text


def _quoted() -> str:
    text = re.sub(r"```.*?```", "", (REPO / "docs" / "troubleshooting.md").read_text(), flags=re.S)
    return " ".join(m.group(1) for m in re.finditer(r"`([^`]+)`", text))


def test_troubleshooting_quotes_the_messages_the_code_prints() -> None:
    quoted = _quoted()
    ctx = rc.context(rc.Observed(job(submitted()), now=CREATED))
    messages = [
        _as_quoted(lifecycle.not_started(rc.context(rc.Observed(job(submitted()), app(""), now=CREATED
                                                                + dt.timedelta(seconds=121))))[1],  # type: ignore[index]
                   app=APP, namespace="team-a"),
        _as_quoted(lifecycle.not_started(rc.context(rc.Observed(
            job(submitted()), app("SUBMITTED"), waiting_pod("REASON", "MESSAGE"), True,
            CREATED + dt.timedelta(seconds=121))))[1],  # type: ignore[index]
            app=APP, namespace="team-a", reason="REASON", message="MESSAGE"),
        _as_quoted(lifecycle.not_started(rc.context(rc.Observed(
            job(submitted()), app("SUBMITTED"), None, True, CREATED + dt.timedelta(seconds=121))))[1],  # type: ignore[index]
            app=APP, namespace="team-a"),
        _as_quoted(ready(lifecycle.create_refused(ctx, 403, "API-MESSAGE", 2.0))["message"],
                   app=APP, namespace="team-a", **{"API message": "API-MESSAGE"}),
        _as_quoted(ready(lifecycle.create_refused(ctx, 404, "API-MESSAGE", 2.0))["message"],
                   app=APP, **{"API message": "API-MESSAGE"}),
        _as_quoted(ready(lifecycle.name_taken(ctx, {"metadata": {"ownerReferences": [
            {"kind": "K", "name": "N", "uid": "U"}]}}))["message"],
            app=APP, owner="K N (uid U)", uid="uid-1"),
    ]
    ignored = rc.plan(rc.Observed({**job({"phase": "Succeeded", "observedGeneration": 2}),
                                   "metadata": {**job({})["metadata"], "generation": 3}}, now=CREATED))
    messages.append(next(c for c in ignored.status["conditions"] if c["type"] == "SpecChangeIgnored")["message"])
    for message in messages:
        assert message in quoted, message
