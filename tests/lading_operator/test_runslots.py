"""Run slots per namespace (policy.limits.runs): the registry, and what the planner does with a refusal."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from lading_operator import policy, runslots, sizing
from lading_operator import reconcile as rc
from lading_operator.runslots import Key, RunSlots, runs_under_way

from .test_reconcile import NOW, SPEC, app, cond, job, pod, running

LIMIT = 2


def key(name: str, namespace: str = "ns", kind: str = "CopyJob") -> Key:
    return (kind, namespace, name)


def created(minute: int) -> str:
    return f"2026-01-01T11:{minute:02d}:00Z"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def woken() -> list[Key]:
    return []


@pytest.fixture
def slots(clock: Clock, woken: list[Key]) -> RunSlots:
    registry = RunSlots(clock)
    registry.waker = woken.extend
    return registry


def test_an_install_nobody_configured_bounds_every_namespace_and_bad_values_name_the_field() -> None:
    assert policy.DEFAULT_POLICY.limits_for("any-tenant").runs == 10
    assert sizing.parse_limits({"runs": 3}, "limits.default").runs == 3
    assert sizing.parse_limits({"executors": 2}, "limits.default").runs is None  # left out: not bounded
    for bad in (0, -1, 1.5, "10", True):
        with pytest.raises(ValueError, match=r"limits\.default\.runs"):
            sizing.parse_limits({"runs": bad}, "limits.default")


def test_runs_under_way_reads_the_current_run_and_earlier_ones_still_going() -> None:
    assert runs_under_way(None) == 0
    assert runs_under_way({"phase": "Pending"}) == 0
    assert runs_under_way({"phase": "Scheduled"}) == 0
    assert runs_under_way({"phase": "Succeeded"}) == 0
    for phase in ("Submitted", "Running", "Cancelling"):
        assert runs_under_way({"phase": phase}) == 1
    status = {"phase": "Submitted", "runId": "b",
              "lastRuns": [{"runId": "a", "phase": "Running"}, {"runId": "z", "phase": "Succeeded"},
                           {"runId": "b", "phase": "Submitted"}]}  # the current run's own entry is not counted twice
    assert runs_under_way(status) == 2
    assert runs_under_way({"phase": "Scheduled", "lastRuns": [{"runId": "a", "phase": "Running"}]}) == 1


def test_a_namespace_gets_its_limit_then_the_oldest_waiting_resource_gets_the_next_free_slot(
        slots: RunSlots, woken: list[Key]) -> None:
    assert slots.ask(key("a"), created(1), LIMIT, 0, 1).admitted
    assert slots.ask(key("b"), created(2), LIMIT, 0, 1).admitted
    late, early = slots.ask(key("d"), created(4), LIMIT, 0, 1), slots.ask(key("c"), created(3), LIMIT, 0, 1)
    assert not late.admitted and not early.admitted
    assert "namespace ns has 2 runs under way" in late.message and "policy.limits.runs" in late.message
    assert slots.waiting("ns") == [key("c"), key("d")]  # creation order, not the order they asked in
    assert slots.ask(key("x", "other"), created(9), LIMIT, 0, 1).admitted  # another namespace has its own
    slots.seen(key("a"), {"phase": "Submitted"})
    slots.seen(key("b"), {"phase": "Running"})
    assert slots.in_use("ns") == 2 and not woken  # the tickets became the runs the watch shows
    slots.seen(key("a"), {"phase": "Succeeded"})
    assert woken == [key("c")]  # one slot: the first in line
    assert not slots.ask(key("d"), created(4), LIMIT, 0, 1).admitted  # c is ahead of it
    assert slots.ask(key("c"), created(3), LIMIT, 0, 1).admitted
    assert slots.waiting("ns") == [key("d")] and slots.in_use("ns") == 2


def test_a_ticket_holds_its_slot_until_the_watch_shows_the_run_and_counts_once(slots: RunSlots) -> None:
    assert slots.ask(key("a"), created(1), 1, 0, 1).admitted
    assert slots.in_use("ns") == 1
    assert not slots.ask(key("b"), created(2), 1, 0, 1).admitted  # the watch has not shown a's run yet
    assert slots.ask(key("a"), created(1), 1, 0, 1).admitted  # a pass of a retried after an API error
    slots.seen(key("a"), {"phase": "Pending"})  # an older event: the ticket still holds the slot
    assert slots.in_use("ns") == 1
    slots.seen(key("a"), {"phase": "Submitted"})
    assert slots.in_use("ns") == 1


def test_a_run_that_did_not_start_gives_its_slot_back_at_once(slots: RunSlots, woken: list[Key]) -> None:
    assert slots.ask(key("a"), created(1), 1, 0, 1).admitted
    assert not slots.ask(key("b"), created(2), 1, 0, 1).admitted
    slots.settle(key("a"), {"phase": "Submitted"})  # written: under way, the ticket stays
    assert slots.in_use("ns") == 1 and not woken
    slots.settle(key("a"), {"phase": "Failed"})  # e.g. the API refused its SparkApplication
    assert slots.in_use("ns") == 0 and woken == [key("b")]


def test_a_ticket_the_watch_never_confirms_expires(slots: RunSlots, clock: Clock) -> None:
    assert slots.ask(key("a"), created(1), 1, 0, 1).admitted
    clock.now += runslots.TICKET_SECONDS - 1
    assert not slots.ask(key("b"), created(2), 1, 0, 1).admitted
    clock.now += 2
    assert slots.ask(key("b"), created(2), 1, 0, 1).admitted


def test_deleted_resources_and_withdrawn_waits_free_the_line(slots: RunSlots, woken: list[Key]) -> None:
    slots.seen(key("a"), {"phase": "Running"})
    assert not slots.ask(key("b"), created(2), 1, 0, 1).admitted
    assert not slots.ask(key("c"), created(3), 1, 0, 1).admitted
    slots.withdraw(key("b"))  # suspended while it waited: it no longer wants a run
    assert slots.waiting("ns") == [key("c")]
    slots.gone(key("a"))
    assert woken == [key("c")]
    assert slots.ask(key("c"), created(3), 1, 0, 1).admitted


def test_a_restarted_operator_counts_the_runs_under_way_before_it_admits_any(slots: RunSlots) -> None:
    # The kopf index feeds every resource of the initial listing before any pass runs.
    slots.seen(key("a"), {"phase": "Running"})
    slots.seen(key("s", kind="StreamCopy"), {"phase": "Running"})
    slots.seen(key("p"), {"phase": "Pending"})
    assert slots.in_use("ns") == 2
    assert not slots.ask(key("p"), created(5), LIMIT, 0, 1).admitted


def test_a_restarted_operator_keeps_the_waiting_resources_in_line(slots: RunSlots) -> None:
    queued = {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False", "reason": "Queued"}]}
    slots.seen(key("a"), {"phase": "Running"}, created(1))
    slots.seen(key("b"), queued, created(2))  # it waited before the restart
    slots.seen(key("c"), {"phase": "Pending"}, created(3))  # new: in line once it asks
    assert slots.waiting("ns") == [key("b")]
    assert not slots.ask(key("c"), created(3), LIMIT, 0, 1).admitted  # one slot free, and b is ahead
    assert slots.ask(key("b"), created(2), LIMIT, 0, 1).admitted
    assert slots.waiting("ns") == [key("c")]


def test_a_second_run_of_a_scheduled_resource_needs_a_slot_of_its_own(slots: RunSlots) -> None:
    slots.seen(key("sched"), {"phase": "Running", "runId": "r1"})
    assert slots.ask(key("sched"), created(1), LIMIT, 1, 1).admitted  # concurrencyPolicy Allow: 1 → 2
    assert slots.in_use("ns") == 2
    assert not slots.ask(key("other"), created(0), LIMIT, 0, 1).admitted
    slots.seen(key("sched"), {"phase": "Submitted", "runId": "r2", "lastRuns": [{"runId": "r1", "phase": "Running"}]})
    assert slots.in_use("ns") == 2


# --- the planner's answer to a refusal ------------------------------------------------------

QUEUED = runslots.queued_message("ns", 3)


def test_a_queued_one_shot_stays_pending_says_why_and_writes_nothing_more_while_it_waits() -> None:
    plan = rc.plan(rc.Observed(job(), now=NOW, queued=QUEUED))
    assert plan.create is None and plan.phase == "Pending"
    ready = cond(plan, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "Queued" and ready["message"] == QUEUED
    assert cond(plan, "Reconciling")["status"] == "True"  # kstatus: still in progress
    assert plan.events == [("Normal", "Queued", QUEUED)]
    assert plan.requeue_after == 60.0
    again = rc.plan(rc.Observed(job(status=plan.status), now=NOW + dt.timedelta(seconds=30), queued=QUEUED))
    assert again.create is None and not again.status and not again.events
    started = rc.plan(rc.Observed(job(status=plan.status), now=NOW + dt.timedelta(seconds=60)))
    assert started.phase == "Submitted" and started.create is not None
    assert cond(started, "Ready")["reason"] == "Submitted"
    assert started.status["startTime"] == "2026-01-01T12:01:00Z"  # the run starts when it gets its slot


def test_a_queued_scheduled_run_stays_scheduled_and_starts_its_slot_later() -> None:
    spec = {**SPEC, "schedule": "*/30 * * * *"}
    waiting = rc.plan(rc.Observed(job(spec), now=dt.datetime(2026, 1, 1, 11, 10, tzinfo=dt.UTC)))
    due_at = dt.datetime(2026, 1, 1, 11, 30, 2, tzinfo=dt.UTC)
    queued = rc.plan(rc.Observed(job(spec, waiting.status), now=due_at, queued=QUEUED))
    assert queued.create is None and queued.phase == "Scheduled" and cond(queued, "Ready")["reason"] == "Queued"
    later = rc.plan(rc.Observed(job(spec, {**waiting.status, **queued.status}), now=due_at + dt.timedelta(minutes=2)))
    assert later.phase == "Submitted" and later.status["runId"].startswith("20260101113000u")


def test_a_queued_allow_slot_keeps_following_the_run_under_way() -> None:
    spec = {**SPEC, "schedule": "*/5 * * * *"}
    status = {**running(), "lastScheduleTime": "2026-01-01T11:55:00Z"}
    plan = rc.plan(rc.Observed(job(spec, status), app("COMPLETED"), pod('{"rows": 2}'), True, NOW, queued=QUEUED))
    assert plan.create is None
    assert plan.phase == "Scheduled" and plan.status["response"]["rows"] == 2  # the run's end was seen


def test_a_retry_runs_in_the_slot_its_run_holds() -> None:
    spec = {**SPEC, "backoffLimit": 1}
    obs = rc.Observed(job(spec, running()), app("FAILED"), pod('{"error": "boom"}'), True, NOW)
    plan = rc.plan(dataclasses.replace(obs, queued=QUEUED))
    assert plan.create is not None and plan.status["attempts"] == 2

