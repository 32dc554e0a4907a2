"""Continuous: one long-running SparkApplication per resource, kept running (StreamCopy).

::

   (new) ─▶ Pending ──submit──▶ Submitted ──app running──▶ Running ─┐ every pass: lag, rows, last
              ▲                  │  ▲  ▲                    │   ▲    │ batch from the driver's progress
              │ resume           │  │  └──── restart ───────┤   └────┘
              │                  │  └─ submit, once the old app is gone (a spec change)
           Suspended ◀─suspend───┴──────────────────────────┤
              │                                             │ stop: TooManyErrors, DataLoss,
              └── suspend / invalid ──▶ Failed ◀────────────┘       SourceConflict (the driver's result)
                                          └── a spec change (resume) ─▶ Pending

One run per generation: its run id is a hash of the resource's uid and
generation, so a spec change (a new generation) means a new application. The old
one is deleted first — its driver gets SIGTERM, commits or drops the batch in
flight and exits — and the new one is created only once the old application
*and its driver pod* are gone, so two drivers of one StreamCopy never overlap (the
table's conflict rule would stop one of them, but a restart must not look like a
failure). ``spec.suspend`` stops the application the same way (``Suspending``,
then ``Suspended``); setting it back resumes from the committed position.

What happens to a driver that exits:

- it stopped on purpose (its result's ``reason``: ``TooManyErrors``, ``DataLoss``,
  ``SourceConflict``; it exits 0, so spark-operator does not rerun it): ``Failed``
  with that reason and the driver's message (the batch range), until the spec
  changes — as StarRocks Routine Load's PAUSED until RESUME;
- it crashed, was evicted or lost its node: spark-operator reruns it
  (``restartPolicy: OnFailure``, see :mod:`lading_operator.render_stream`); the
  resource shows ``Submitted`` (reason ``Restarting``, the error) until it runs;
- spark-operator gave up (``FAILED``), the application was deleted by someone, or
  the driver ended without a reason to stop: the next attempt starts as a new
  application (``<name>-streamcopy-<run id>-<attempt + 1>``).

While the driver runs, a pass takes the latest progress document the poller
read from the driver pod (:mod:`lading_operator.progress`, never on this thread)
into the status: rows, batches, lag (per partition), the last batch, offsets —
written when they changed (at most every ``MIN_STATUS_INTERVAL``) and at least
every ``HEARTBEAT`` while the driver answers, with ``progressUpdatedAt``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from lading_operator import lifecycle, render_stream, sparkapp_state
from lading_operator import result as results
from lading_operator import status as st
from lading_operator.observed import Ctx, Plan, RunEnd
from lading_operator.phases import Phase, Table, Trigger, compose
from lading_operator.sparkapp_state import Outcome
from lading_spec import streamprogress

STOP_REASONS = frozenset(streamprogress.REASONS)
FOLLOW = lifecycle.FOLLOW_INTERVAL      # a running stream is looked at this often
STOP_POLL = 1.0                         # while an application is being stopped
MIN_STATUS_INTERVAL = 10.0              # progress that changed is written at most this often
HEARTBEAT = 20.0                        # ... and at least this often while the driver answers
TERMINAL_STATES = sparkapp_state.COMPLETED_STATES | sparkapp_state.FAILED_STATES

HINTS = {
    "InvalidTransform": ("nothing of that batch was committed; the stream is stopped at the last committed position. "
                         "Fix spec.transform (or the files' fields it names); the changed spec starts the stream "
                         "again from the same position"),
    "TooManyErrors": ("nothing of that batch was committed; the stream is stopped at the last committed position. "
                      "The rejected rows are under spec.deadLetter: fix the source or raise spec.maxErrorNumber, "
                      "and the changed spec starts the stream again from the same offsets"),
    "DataLoss": ("the stream is stopped before the lost offsets. Set spec.source.kafka.failOnDataLoss: false to skip "
                 "them (they are gone), or point spec.source.kafka at the cluster that has them; the changed spec "
                 "starts the stream again"),
    "InvalidSpec": ("nothing was committed by this driver; a rerun cannot fix this spec. Fix the field the message "
                    "names; the changed spec starts the stream again from the committed position"),
    "Superseded": ("a newer driver of this StreamCopy claimed the table (a higher epoch) and this one stopped: the "
                   "newest driver wins. If no newer driver is running (a lading run on the same stream that "
                   "ended, or a driver that outlived its pod), change the spec (e.g. suspend: true, then false) "
                   "to start this stream again from the committed position"),
    "SourceConflict": ("another writer moved this stream's position in the table: a second StreamCopy (or lading "
                       "run) loading the same source into the same table, or a driver that outlived its pod. Stop "
                       "the other writer, then change the spec (e.g. suspend: true, then false) to start this stream "
                       "again from the committed position"),
}

# lifecycle.RUN without its cancel (a stream has no spec.cancel): every phase here is in the CRD.
_RUN: Table = {phase: {t: p for t, p in row.items() if t != Trigger.CANCEL} for phase, row in lifecycle.RUN.items()}
_UNDER_WAY = {
    Trigger.RESTART: Phase.SUBMITTED,   # a spec change or a crash: the run starts again
    Trigger.SUSPEND: Phase.SUSPENDED,
    Trigger.FAILED: Phase.FAILED,       # the driver stopped on purpose (or the API refused the app)
}
TABLE = compose(_RUN, {
    Phase.PENDING: {
        Trigger.SUBMIT: Phase.SUBMITTED,
        Trigger.QUEUE: Phase.PENDING,
        Trigger.SUSPEND: Phase.SUSPENDED,
        Trigger.INVALID: Phase.FAILED,
    },
    Phase.SUBMITTED: {**_UNDER_WAY, Trigger.SUBMIT: Phase.SUBMITTED},  # the new run, once the old one stopped
    Phase.RUNNING: _UNDER_WAY,
    Phase.SUSPENDED: {
        Trigger.SUSPEND: Phase.SUSPENDED,   # Suspending → Suspended once the application is gone
        Trigger.RESUME: Phase.PENDING,
        Trigger.INVALID: Phase.FAILED,
    },
    Phase.FAILED: {
        Trigger.RESUME: Phase.PENDING,      # a spec change starts it again
        Trigger.SUSPEND: Phase.SUSPENDED,
        Trigger.INVALID: Phase.FAILED,
    },
})


def run_id(ctx: Ctx) -> str:
    """The run of the current generation (a hash of uid and generation)."""
    return lifecycle.oneshot_run_id(ctx)


def _app_name(ctx: Ctx) -> str:
    return str(ctx.status.get("sparkApplication") or "")


def _stopped(ctx: Ctx) -> bool | None:
    """Whether the application named in status runs no driver any more (None: not looked at yet)."""
    if not _app_name(ctx) or ctx.obs.foreign_app is not None:
        return True  # none, or a namesake's: nothing of ours was created under that name
    app = ctx.obs.app
    if app is not None:
        return sparkapp_state.app_state(app) in TERMINAL_STATES  # its driver exited; no rerun comes
    if not ctx.obs.driver_pod_checked:
        return None
    pod = ctx.obs.driver_pod
    return pod is None or ((pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"))


def _stop(ctx: Ctx, plan: Plan) -> bool:
    """Delete the application in status (once); True when its driver is gone."""
    app = ctx.obs.app
    if app is not None and not (app.get("metadata") or {}).get("deletionTimestamp"):
        plan.delete_apps.append(_app_name(ctx))
    return _stopped(ctx) is True


# --- the stream's status from its driver's progress ----------------------------------------

def stream_status(ctx: Ctx) -> dict[str, Any]:
    """The status fields the latest progress document fills, when it is time to write them.

    Only a document of the current run counts. Written when something changed (at most
    every MIN_STATUS_INTERVAL) and at least every HEARTBEAT while the driver answers;
    ``progressUpdatedAt`` says when the document was read.
    """
    doc = ctx.obs.progress
    status = ctx.status
    if not doc or doc.get("runId") != status.get("runId"):
        return {}
    fetched = st.parse_time(doc.get("fetchedAt"))
    if fetched is None:
        return {}
    fields: dict[str, Any] = streamprogress.status_fields(doc)
    if "lagAtLeast" not in fields and status.get("lagAtLeast") is not None:
        fields["lagAtLeast"] = None
    changed = any(status.get(k) != v for k, v in fields.items())
    last = st.parse_time(status.get("progressUpdatedAt"))
    if last is not None:
        if fetched <= last:
            return {}
        age = (ctx.now - last).total_seconds()
        if age < (MIN_STATUS_INTERVAL if changed else HEARTBEAT):
            return {}
    return {**fields, "progressUpdatedAt": st.timestamp(fetched)}


def _counters(result: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key in ("rowsTotal", "batches"):
        value = result.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= streamprogress.INT64_MAX:
            out[key] = value
    return out


# --- following the run ---------------------------------------------------------------------

def _again(plan: Plan) -> Plan:
    plan.requeue_after = FOLLOW
    return plan


def _restarting(ctx: Ctx, plan: Plan, message: str) -> Plan:
    """The driver is being rerun by spark-operator: Submitted (Restarting) until it runs again."""
    ready = ctx.ready
    if ctx.phase == Phase.RUNNING or (ready.get("reason"), ready.get("message")) != ("Restarting", message):
        ctx.transition(plan, Trigger.RESTART, "Restarting", message,
                       event_type="Warning" if ctx.phase == Phase.RUNNING or ready.get("reason") != "Restarting"
                       else None)
    return _again(plan)


def _next_attempt(ctx: Ctx, plan: Plan, why: str) -> Plan:
    """Start the next attempt of this run as a new application (the old one is done)."""
    attempts = int(ctx.status.get("attempts") or 1)
    app = ctx.obs.app
    if app is not None and not (app.get("metadata") or {}).get("deletionTimestamp"):
        plan.delete_apps.append(_app_name(ctx))
    new = lifecycle.build_app(ctx, str(ctx.status["runId"]), ctx.policy.run_time(ctx), attempts + 1)
    plan.create = new
    message = f"{why[:1000]}; started attempt {attempts + 1} as SparkApplication {new['metadata']['name']}"
    ctx.transition(plan, Trigger.RESTART, "Restarting", message, "Warning", attempts=attempts + 1,
                   sparkApplication=new["metadata"]["name"])
    return _again(plan)


def _stopped_on_purpose(ctx: Ctx, plan: Plan, result: Mapping[str, Any]) -> Plan:
    """The driver stopped with a reason (its result): Failed until the spec changes."""
    reason = str(result["reason"])
    error = str(result.get("error") or f"the stream stopped ({reason})")
    message = f"{error}; {HINTS[reason]}"
    if results.exit_code(ctx.obs.driver_pod) not in (0, None) and ctx.obs.app is not None:
        plan.delete_apps.append(_app_name(ctx))  # a driver that exits non-zero would be rerun: stop it
    return ctx.transition(plan, Trigger.FAILED, reason, message, "Warning",
                          response={"rows": None, "cancelled": None, "error": error},
                          completionTime=st.timestamp(ctx.now), **_counters(result))


def follow(ctx: Ctx) -> Plan:
    """Follow the current run's application (Submitted/Running): see the module docstring."""
    plan = Plan()
    name = _app_name(ctx)
    app = ctx.obs.app
    pod = ctx.obs.driver_pod
    outcome = sparkapp_state.classify(app, (pod is not None) if ctx.obs.driver_pod_checked else None)
    state = sparkapp_state.app_state(app)
    result = results.read_result(pod) if pod is not None else None
    if result is not None and result.get("reason") in STOP_REASONS and app is not None:
        return _stopped_on_purpose(ctx, plan, result)
    if outcome == Outcome.GONE:
        if ctx.obs.foreign_app is not None:
            return lifecycle.name_taken(ctx, ctx.obs.foreign_app)
        if _stopped(ctx) is not True:
            plan.requeue_after = STOP_POLL  # its driver pod is still going away
            return plan
        if ctx.phase == Phase.SUBMITTED:
            # Recorded but not created (the operator stopped in between): create it now.
            plan.create = lifecycle.build_app(ctx, str(ctx.status["runId"]), ctx.policy.run_time(ctx),
                                              int(ctx.status.get("attempts") or 1))
            return _again(plan)
        return _next_attempt(ctx, plan, f"SparkApplication {name} disappeared while it ran")
    if outcome == Outcome.LOST:
        return _restarting(ctx, plan, f"the driver pod of SparkApplication {name} disappeared while it was "
                                      f"{state}; spark-operator restarts it (restartPolicy OnFailure)")
    if outcome == Outcome.WAITING:
        if ctx.phase == Phase.RUNNING or (ctx.reason == "Restarting" and state in ("PENDING_RERUN", "SUBMITTED")):
            error = sparkapp_state.app_error(app)
            return _restarting(ctx, plan, f"spark-operator is restarting the driver of SparkApplication {name} "
                                          f"({state}{': ' + error if error else ''})")
        return _again(lifecycle.wait(ctx, plan, lifecycle.not_started(ctx)))
    if outcome == Outcome.FINISHING:
        error = str((result or {}).get("error") or "")
        if not error and (result or {}).get("cancelled"):
            error = "the driver was stopped (SIGTERM) by something other than lading, e.g. an eviction"
        error = error or sparkapp_state.app_error(app) or f"the driver ended ({state})"
        if state == "FAILING":
            return _restarting(ctx, plan, f"the driver of SparkApplication {name} failed: {error}; spark-operator "
                                          "restarts it (restartPolicy OnFailure)")
        return _again(plan)  # SUCCEEDING: COMPLETED follows
    if outcome == Outcome.RUNNING:
        if ctx.phase == Phase.SUBMITTED:
            ctx.transition(plan, Trigger.APP_RUNNING, "Running", f"SparkApplication {name} is running")
        plan.status.update(stream_status(ctx))
        address = render_stream.progress_address(pod)
        plan.follow_progress = address is not None
        plan.progress_source, plan.progress_address = "stream", address
        return _again(plan)
    # COMPLETED without a reason to stop, or FAILED: spark-operator will not rerun it.
    error = str((result or {}).get("error") or sparkapp_state.app_error(app) or "no result")
    return _next_attempt(ctx, plan, f"SparkApplication {name} ended {state} ({error[:500]})")


class Continuous:
    name = "continuous"
    table: Table = TABLE
    style: str | None = "continuous"

    def idle(self, ctx: Ctx) -> Plan:
        """Pending, Suspended or Failed: start the run of this generation once nothing else runs."""
        plan = Plan()
        phase = ctx.phase
        name = _app_name(ctx)
        if ctx.spec.get("suspend"):
            stopped = _stop(ctx, plan)
            if phase != Phase.SUSPENDED:
                return ctx.transition(plan, Trigger.SUSPEND, "Suspended", "suspended: nothing runs; set "
                                      "spec.suspend to false to start from the committed position")
            if not stopped:
                plan.requeue_after = STOP_POLL
            elif ctx.reason == "Suspending":
                ctx.transition(plan, Trigger.SUSPEND, "Suspended", f"suspended: SparkApplication {name} stopped; set "
                               "spec.suspend to false to resume from the committed position")
            return plan
        if phase == Phase.FAILED and ctx.status.get("runId") == run_id(ctx):
            # Stopped on purpose: the spec must change first. An application that would still run
            # a driver (the delete asked for when it stopped was lost, and spark-operator reruns it)
            # is deleted again; one that ended is kept for its logs.
            if _stopped(ctx) is not True:
                _stop(ctx, plan)
            return plan
        if not _stop(ctx, plan):
            plan.requeue_after = STOP_POLL  # the last application's driver is still going away
            return plan
        if phase == Phase.SUSPENDED:
            ctx = ctx.with_status(ctx.transition(plan, Trigger.RESUME, "Resumed",
                                                 "resumed: starting from the committed position").status)
        elif phase == Phase.FAILED:
            ctx = ctx.with_status(ctx.transition(plan, Trigger.RESUME, "SpecChanged",
                                                 f"generation {ctx.generation}: starting again from the "
                                                 "committed position").status)
        return lifecycle.submit(ctx, plan, run_id(ctx), ctx.now.replace(microsecond=0), 1, Trigger.SUBMIT,
                                "Submitted")

    def active(self, ctx: Ctx) -> Plan | None:
        """Submitted/Running: suspend, a spec change (stop the old run, then start the new), or follow."""
        plan = Plan()
        name = _app_name(ctx)
        if ctx.spec.get("suspend"):
            if _stop(ctx, plan):
                return ctx.transition(plan, Trigger.SUSPEND, "Suspended", f"suspended: SparkApplication {name} "
                                      "stopped; set spec.suspend to false to resume from the committed position")
            plan.requeue_after = STOP_POLL
            return ctx.transition(plan, Trigger.SUSPEND, "Suspending", f"suspending: stopping SparkApplication "
                                  f"{name}; its driver commits or drops the batch in flight, then exits")
        if ctx.status.get("runId") != run_id(ctx):
            if _stop(ctx, plan):
                return lifecycle.submit(ctx, plan, run_id(ctx), ctx.now.replace(microsecond=0), 1, Trigger.SUBMIT,
                                        "Submitted")
            message = (f"generation {ctx.generation}: stopping SparkApplication {name} (its driver commits or drops "
                       "the batch in flight), then starting the new spec")
            plan.requeue_after = STOP_POLL
            ready = ctx.ready
            if ctx.phase != Phase.SUBMITTED or (ready.get("reason"), ready.get("message")) != ("Restarting", message):
                ctx.transition(plan, Trigger.RESTART, "Restarting", message)
            return plan
        return follow(ctx)

    def run_ended(self, ctx: Ctx, plan: Plan, end: RunEnd, fields: dict[str, Any]) -> Plan:
        """Only the API refusing the application ends a run here (422): Failed until the spec changes."""
        return ctx.transition(plan, Trigger.FAILED, end.reason, end.message, end.event_type, **fields)

    def run_time(self, ctx: Ctx) -> dt.datetime:
        return st.parse_time(ctx.status.get("startTime")) or ctx.now.replace(microsecond=0)


POLICY = Continuous()
