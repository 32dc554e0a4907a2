"""Scheduled: one run per ``spec.schedule`` slot, as CronJob runs Jobs.

::

   (new) ─▶ Pending ──▶ Scheduled ──due──▶ Submitted ⇄ Running ──run ends──▶ Scheduled
                         │  ▲                (lifecycle.RUN)    └─cancel─▶ Cancelling ─┐
              suspend ▼  │ unsuspend                                                   │
                     Suspended            spec.cancel: every run under way stops ─▶ Cancelled

Each slot is one run with its own run id (the slot) and run time. A finished run
becomes a ``status.lastRuns`` entry; the history limits trim the entries and
delete *every* attempt's SparkApplication of a trimmed run (by the run-id
label). ``concurrencyPolicy`` (``Allow`` unless the kind says otherwise) decides
what a slot due while a run is under way does: start alongside (the earlier run
is followed through its lastRuns entry), wait (``Forbid``) or replace the run
under way (``Replace``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from lading_operator import lifecycle, schedule, sparkapp_state
from lading_operator import result as results
from lading_operator import status as st
from lading_operator.observed import Ctx, Observed, Plan, RunEnd
from lading_operator.phases import Phase, Table, Trigger, compose
from lading_operator.sparkapp_state import Outcome

DEFAULT_SUCCESSFUL_HISTORY = 3
DEFAULT_FAILED_HISTORY = 1
ACTIVE_RUN_PHASES = (str(Phase.SUBMITTED), str(Phase.RUNNING))

_UNDER_WAY = {
    Trigger.SUBMIT: Phase.SUBMITTED,       # the next slot starts alongside (Allow)
    Trigger.RUN_ENDED: Phase.SCHEDULED,
}
TABLE = compose(lifecycle.RUN, {
    Phase.PENDING: {
        Trigger.SCHEDULE: Phase.SCHEDULED,
        Trigger.SUSPEND: Phase.SUSPENDED,
        Trigger.INVALID: Phase.FAILED,
        Trigger.CANCELLED: Phase.CANCELLED,
    },
    Phase.SCHEDULED: {
        Trigger.SUBMIT: Phase.SUBMITTED,
        Trigger.QUEUE: Phase.SCHEDULED,
        Trigger.SCHEDULE: Phase.SCHEDULED,
        Trigger.SUSPEND: Phase.SUSPENDED,
        Trigger.INVALID: Phase.FAILED,
        Trigger.CANCELLED: Phase.CANCELLED,
    },
    Phase.SUBMITTED: _UNDER_WAY,
    Phase.RUNNING: _UNDER_WAY,
    Phase.CANCELLING: {
        Trigger.CANCELLED: Phase.CANCELLED,    # spec.cancel: the schedule ends
        Trigger.RUN_ENDED: Phase.SCHEDULED,    # cancel withdrawn meanwhile: the schedule goes on
    },
    Phase.SUSPENDED: {
        Trigger.SCHEDULE: Phase.SCHEDULED,
        Trigger.INVALID: Phase.FAILED,
        Trigger.CANCELLED: Phase.CANCELLED,
    },
    Phase.FAILED: {
        Trigger.RESUME: Phase.PENDING,     # a spec fixed after InvalidSpec starts afresh
        Trigger.INVALID: Phase.FAILED,
    },
})


def _cron(ctx: Ctx) -> schedule.Schedule:
    return schedule.parse_schedule(ctx.spec["schedule"], ctx.created)


def _due(ctx: Ctx) -> schedule.Due:
    return schedule.due(_cron(ctx), st.parse_time(ctx.status.get("lastScheduleTime")), ctx.created, ctx.now,
                        ctx.int_field("startingDeadlineSeconds", None))


def _concurrency(ctx: Ctx) -> str:
    return str(ctx.spec.get("concurrencyPolicy") or ctx.kind.default_concurrency)


class Scheduled:
    name = "scheduled"
    table: Table = TABLE
    style: str | None = "scheduled"

    def idle(self, ctx: Ctx) -> Plan:
        plan = Plan()
        phase = ctx.phase
        if ctx.spec.get("suspend"):
            if phase != Phase.SUSPENDED:
                return ctx.transition(plan, Trigger.SUSPEND, "Suspended", "suspended: no new runs start",
                                      nextScheduleTime=None)
            return plan
        d = _due(ctx)
        if d.missed:
            plan.events.append(("Warning", "MissedSchedule", f"{d.missed} scheduled run(s) skipped "
                                "(too late for startingDeadlineSeconds or superseded)"))
        if d.slot is not None:
            if phase in (None, Phase.PENDING, Phase.SUSPENDED):
                ctx.transition(plan, Trigger.SCHEDULE, "Scheduled", "waiting for the next scheduled run")
                ctx = ctx.with_status(plan.status)
            return lifecycle.submit(ctx, plan, schedule.slot_run_id(d.slot, _owner(ctx)), d.slot, 1, Trigger.SUBMIT, "Submitted",
                                    extra={"lastScheduleTime": st.timestamp(d.slot),
                                           "nextScheduleTime": st.timestamp(d.next_time)})
        plan.requeue_after = max((d.next_time - ctx.now).total_seconds(), 0.5)
        next_text = st.timestamp(d.next_time)
        if phase != Phase.SCHEDULED:
            return ctx.transition(plan, Trigger.SCHEDULE, "Scheduled", f"next run at {next_text}",
                                  nextScheduleTime=next_text)
        if ctx.status.get("nextScheduleTime") != next_text:
            plan.status["nextScheduleTime"] = next_text
        return plan

    def active(self, ctx: Ctx) -> Plan | None:
        """A run under way and the next slot due: ``concurrencyPolicy`` decides."""
        policy = _concurrency(ctx)
        if ctx.spec.get("suspend") or policy == "Forbid":
            return None
        d = _due(ctx)
        if d.slot is None:
            return None
        status = ctx.status
        plan = Plan()
        if policy == "Allow":
            if ctx.obs.queued is not None:
                return None  # no run slot for the due one: the run under way is followed; the due one waits
            # The run under way carries on, followed through its lastRuns entry; the due one starts.
            entry = {k: v for k, v in {"runId": status.get("runId"), "phase": status.get("phase"),
                                       "sparkApplication": status.get("sparkApplication"),
                                       "startTime": status.get("startTime")}.items() if v is not None}
            runs = [entry] + [r for r in status.get("lastRuns") or [] if r.get("runId") != entry.get("runId")]
            return lifecycle.submit(ctx, plan, schedule.slot_run_id(d.slot, _owner(ctx)), d.slot, 1, Trigger.SUBMIT, "Submitted",
                                    extra={"lastScheduleTime": st.timestamp(d.slot),
                                           "nextScheduleTime": st.timestamp(d.next_time), "lastRuns": runs})
        if status.get("sparkApplication") and ctx.obs.foreign_app is None:
            plan.delete_apps.append(status["sparkApplication"])
        return lifecycle.end_run(ctx, plan, RunEnd(Trigger.RUN_ENDED, Phase.CANCELLED, "Replaced",
                                                   "replaced by the next scheduled run (concurrencyPolicy Replace)"))

    def run_ended(self, ctx: Ctx, plan: Plan, end: RunEnd, fields: dict[str, Any]) -> Plan:
        """The run goes to ``lastRuns`` (trimmed); back to Scheduled, or Cancelled on ``spec.cancel``."""
        status, spec = ctx.status, ctx.spec
        history = ctx.kind.read_result(end.result).history
        entry = st.last_run_entry(status, end.phase, history, end.error, ctx.now)
        runs = [entry] + [r for r in status.get("lastRuns") or [] if r.get("runId") != entry.get("runId")]
        kept, dropped = st.trim_history(
            runs,
            ctx.int_field("successfulRunsHistoryLimit", DEFAULT_SUCCESSFUL_HISTORY) or 0,
            ctx.int_field("failedRunsHistoryLimit", DEFAULT_FAILED_HISTORY) or 0,
        )
        fields["lastRuns"] = kept
        # Every attempt of a trimmed run goes (a retried run has one SparkApplication per attempt).
        plan.delete_runs.extend(str(r["runId"]) for r in dropped if r.get("runId"))
        if end.phase == Phase.CANCELLED and spec.get("cancel"):
            return ctx.transition(plan, Trigger.CANCELLED, end.reason, end.message, end.event_type, **fields)
        fields["nextScheduleTime"] = st.timestamp(_cron(ctx).next_after(ctx.now))
        run_message = f"run {status.get('runId')} {str(end.phase).lower()}: {end.message}"
        plan.requeue_after = 1.0
        return ctx.transition(plan, Trigger.RUN_ENDED, end.reason, run_message, end.event_type, **fields)

    def run_time(self, ctx: Ctx) -> dt.datetime:
        return st.parse_time(ctx.status.get("lastScheduleTime")) or ctx.now.replace(microsecond=0)


POLICY = Scheduled()


def active_other_runs(status: dict[str, Any]) -> list[str]:
    """SparkApplications of earlier runs still under way (kept in ``lastRuns``)."""
    return [str(r["sparkApplication"]) for r in status.get("lastRuns") or []
            if r.get("phase") in ACTIVE_RUN_PHASES and r.get("sparkApplication")]


def follow_others(ctx: Ctx) -> tuple[Ctx, bool]:
    """Update the ``lastRuns`` entries of earlier runs still under way from their SparkApplications."""
    obs: Observed = ctx.obs
    runs = [dict(r) for r in ctx.status.get("lastRuns") or []]
    changed = False
    for entry in runs:
        name = str(entry.get("sparkApplication") or "")
        if entry.get("phase") not in ACTIVE_RUN_PHASES or name not in obs.others:
            continue
        app, pod = obs.others[name]
        outcome = sparkapp_state.classify(app, (pod is not None) if app is not None
                                          and sparkapp_state.needs_driver_pod(sparkapp_state.app_state(app))
                                          else None)
        result = results.read_result(pod)
        if outcome == Outcome.COMPLETED and result is not None and result.get("rows") is not None:
            entry.update(phase=str(Phase.SUCCEEDED), **ctx.kind.read_result(result).history)
        elif outcome in (Outcome.COMPLETED, Outcome.FAILED, Outcome.LOST, Outcome.GONE):
            cancelled = outcome == Outcome.GONE and bool(ctx.spec.get("cancel"))
            entry["phase"] = str(Phase.CANCELLED if cancelled else Phase.FAILED)
            if not cancelled:
                entry["error"] = str((result or {}).get("error") or sparkapp_state.app_error(app)
                                     or f"SparkApplication {name} ended {outcome.value.lower()}")[:1000]
        elif outcome == Outcome.RUNNING and entry["phase"] != str(Phase.RUNNING):
            entry["phase"] = str(Phase.RUNNING)
        else:
            continue
        if entry["phase"] not in ACTIVE_RUN_PHASES:
            entry["completionTime"] = st.timestamp(obs.now)
        changed = True
    if not changed:
        return ctx, False
    return ctx.with_status({"lastRuns": runs}), True


def _owner(ctx: Ctx) -> str:
    """What makes a scheduled run's id this resource's: its uid (its kind, namespace and name
    where there is none, as in a dry run)."""
    meta = ctx.meta
    return schedule.run_owner(str(meta.get("uid") or ""), ctx.kind.name, str(meta.get("namespace") or ""),
                              str(meta.get("name") or ""))
