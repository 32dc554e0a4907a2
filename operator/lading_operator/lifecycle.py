"""One run, whatever its kind and whatever started it (pure).

A run is one or more attempts, each a SparkApplication
``<name>-<kind>-<run id>-<attempt>``. This module submits an attempt, follows it
(deadline, progress, result), retries it, cancels it, and says why it waits when
something outside lading holds it up. When the run ends it hands a
:class:`~lading_operator.observed.RunEnd` to the trigger policy (:mod:`lading_operator.triggers`), which
decides what the end means: a terminal phase (one-shot), back to Scheduled, or a
restart (continuous). Its transitions, composed into every policy's table::

    Submitted ──app running──▶ Running
      │ ▲ ▲                      │
      │ │ └──── retry ───────────┤        (attempt + 1, same run id and run time)
      │ └ wait (a condition says ┤        why: create refused, name taken, not started)
      └──────── cancel ──────────┴──▶ Cancelling
    Submitted, Running ── spec invalid ──▶ Failed

A run moves the data its first attempt's spec says: a spec change while it is
under way does not reach it (its SparkApplication carries the job document it
started with), and a failed attempt is not retried with a spec the run did not
start with (:func:`spec_changed_under_way`): the run fails, saying so.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from lading_operator import names, render, runslots, sparkapp_state
from lading_operator import result as results
from lading_operator import status as st
from lading_operator.observed import Ctx, Plan, RunEnd
from lading_operator.phases import Phase, Table, Trigger
from lading_operator.sparkapp_state import Outcome

DEFAULT_BACKOFF_LIMIT = 0
FOLLOW_INTERVAL = 5.0       # how often a running job is looked at (progress, deadline)
CANCEL_POLL = 1.0           # how often a Cancelling job checks that its app is gone
QUEUE_POLL = 60.0           # a queued run looks again this often, if no run's end woke it first

RUN: Table = {
    Phase.SUBMITTED: {
        Trigger.APP_RUNNING: Phase.RUNNING,
        Trigger.RETRY: Phase.SUBMITTED,
        Trigger.WAIT: Phase.SUBMITTED,
        Trigger.CANCEL: Phase.CANCELLING,
        Trigger.INVALID: Phase.FAILED,
    },
    Phase.RUNNING: {
        Trigger.RETRY: Phase.SUBMITTED,
        Trigger.CANCEL: Phase.CANCELLING,
        Trigger.INVALID: Phase.FAILED,
    },
}

# Ready reasons of a run held up outside lading (Trigger.WAIT): cleared once it moves on.
WAIT_REASONS = frozenset({"SparkApplicationCRDMissing", "CreateForbidden", "NameTaken", "NotPickedUp",
                          "DriverNotStarting"})


# --- submitting -------------------------------------------------------------------------

def run_identity(ctx: Ctx, run_id: str, run_time: dt.datetime, attempt: int) -> render.RunIdentity:
    meta = ctx.meta
    return render.RunIdentity(kind=ctx.kind.name, namespace=str(meta.get("namespace") or ""),
                              name=str(meta["name"]), uid=str(meta.get("uid") or ""),
                              generation=ctx.generation, run_id=run_id, run_time=run_time, attempt=attempt)


def build_app(ctx: Ctx, run_id: str, run_time: dt.datetime, attempt: int) -> dict[str, Any]:
    return render.build_sparkapplication(ctx.spec, run_identity(ctx, run_id, run_time, attempt),
                                         operator_fields=ctx.kind.operator_fields,
                                         continuous=ctx.kind.trigger == "continuous",
                                         file_prefixes=ctx.file_prefixes, catalogs=ctx.catalogs)


def oneshot_run_id(ctx: Ctx) -> str:
    """A one-shot run's id: a hash of the resource's uid and generation."""
    return names.oneshot_run_id(f"{ctx.meta.get('uid') or ''}/{ctx.generation}", str(ctx.meta["name"]))


def submit(ctx: Ctx, plan: Plan, run_id: str, run_time: dt.datetime, attempt: int,
           trigger: Trigger, reason: str, extra: Mapping[str, Any] | None = None) -> Plan:
    """Record attempt ``attempt`` of run ``run_id`` in status and create its SparkApplication;
    a new run the namespace has no free run slot for (``Observed.queued``) waits instead."""
    if attempt == 1 and ctx.obs.queued is not None:
        return queue(ctx, plan, ctx.obs.queued)
    app = build_app(ctx, run_id, run_time, attempt)
    plan.create = app
    fields: dict[str, Any] = {
        "runId": run_id,
        "attempts": attempt,
        "sparkApplication": app["metadata"]["name"],
        "progress": None,
    }
    if attempt == 1:
        fields.update({"startTime": st.timestamp(ctx.now), "completionTime": None, "response": None,
                       "output": None})
    fields.update(extra or {})
    message = f"run {run_id} attempt {attempt}: submitted SparkApplication {app['metadata']['name']}"
    plan.requeue_after = FOLLOW_INTERVAL
    ctx.transition(plan, trigger, reason, message, **fields)
    if attempt == 1:  # a new run runs the current spec: no change of it is ignored
        plan.status["conditions"] = st.without(plan.status["conditions"], st.IGNORED)
    return plan


def queue(ctx: Ctx, plan: Plan, message: str) -> Plan:
    """The run waits for a run slot (:mod:`lading_operator.runslots`): the phase stays, the Ready
    condition says ``Queued`` and why; written (and one Event posted) only when it first waits."""
    plan.requeue_after = QUEUE_POLL
    if ctx.reason == runslots.QUEUED and ctx.ready.get("message") == message:
        return plan
    return ctx.transition(plan, Trigger.QUEUE, runslots.QUEUED, message)


def started_job_spec(app: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The job spec a SparkApplication was rendered with (its ``--job`` document), if readable."""
    spec = (render.job_document_of(app) or {}).get("spec")
    return spec if isinstance(spec, dict) else None


def spec_changed_under_way(ctx: Ctx) -> bool:
    """The job part of the spec (what data moves; not the operator's fields such as ``spark``
    or ``backoffLimit``) differs from what the current run's SparkApplication started with;
    without the application to look at, whether a change was recorded as ignored."""
    started = started_job_spec(ctx.obs.app)
    if started is None:
        return any(c.get("type") == st.IGNORED and c.get("status") == "True"
                   for c in ctx.status.get("conditions") or [] if isinstance(c, Mapping))
    return started != json.loads(json.dumps(render.job_spec(ctx.spec, ctx.kind.operator_fields)))


# --- ending ------------------------------------------------------------------------------

def end_run(ctx: Ctx, plan: Plan, end: RunEnd) -> Plan:
    """The run ended: its response, output and metrics; the policy says what follows."""
    read = ctx.kind.read_result(end.result)
    response = dict(read.response)
    if end.error and "error" not in response:
        response["error"] = st.clip(end.error)
    if end.phase == Phase.CANCELLED:
        response = {"cancelled": True, **{k: v for k, v in response.items() if k == "rows"}}
    fields: dict[str, Any] = {
        # merge patch: every key the kind writes is sent (None removes the previous run's figure)
        "response": {"rows": None, "error": None, "cancelled": None, **dict.fromkeys(read.response), **response},
        "output": read.output or None,
        "completionTime": st.timestamp(ctx.now),
        **read.fields,
    }
    started = st.parse_time(ctx.status.get("startTime"))
    plan.finished_run = {
        "outcome": str(end.phase),
        "seconds": (ctx.now - started).total_seconds() if started else 0.0,
        "rows": int(response.get("rows") or 0),
        "bytes": read.bytes,
    }
    return ctx.policy.run_ended(ctx, plan, end, fields)


def failed_or_retry(ctx: Ctx, error: str, final_reason: str) -> Plan:
    """An attempt failed: submit the next one, or end the run ``Failed``."""
    plan = Plan()
    attempts = int(ctx.status.get("attempts") or 1)
    limit = ctx.int_field("backoffLimit", DEFAULT_BACKOFF_LIMIT) or 0
    if attempts <= limit and ctx.policy.style != "continuous" and spec_changed_under_way(ctx):
        message = (f"attempt {attempts} failed: {error}; not retried: the spec changed (generation "
                   f"{ctx.generation}) while run {ctx.status.get('runId')} was under way, and a retry would "
                   "run a spec the run did not start with")
        trigger = Trigger.DRIVER_LOST if final_reason == "DriverLost" else Trigger.FAILED
        return end_run(ctx, plan, RunEnd(trigger, Phase.FAILED, final_reason, message, None, error, "Warning"))
    if attempts <= limit:
        plan = submit(ctx, plan, str(ctx.status["runId"]), ctx.policy.run_time(ctx), attempts + 1, Trigger.RETRY,
                      "Retrying", extra={"response": {"error": error, "rows": None, "cancelled": None}})
        plan.events[-1] = ("Warning", "Retrying", f"attempt {attempts} failed: {error[:500]}; "
                           f"retrying as {plan.status['sparkApplication']} ({attempts + 1} of {limit + 1})")
        return plan
    reason = "BackoffLimitExceeded" if limit > 0 else final_reason
    message = error if limit == 0 else f"failed {attempts} times (backoffLimit {limit}); last error: {error}"
    trigger = Trigger.DRIVER_LOST if final_reason == "DriverLost" else Trigger.FAILED
    return end_run(ctx, plan, RunEnd(trigger, Phase.FAILED, reason, message, None, error, "Warning"))


def submission_failed(ctx: Ctx, error: str) -> Plan:
    """The API refused the SparkApplication for good (e.g. 422): the run fails with the API's message."""
    message = f"the SparkApplication was refused: {error}"
    return end_run(ctx, Plan(), RunEnd(Trigger.FAILED, Phase.FAILED, "SubmissionFailed", message, None, message,
                                       "Warning"))


# --- cancelling --------------------------------------------------------------------------

def cancel(ctx: Ctx) -> Plan:
    """``spec.cancel``: delete the SparkApplication under way, or end a run that never started."""
    plan = Plan()
    phase = ctx.phase
    name = ctx.status.get("sparkApplication")
    if phase in (Phase.SUBMITTED, Phase.RUNNING):
        if ctx.obs.foreign_app is None:  # never delete a namesake's application
            plan.delete_apps.append(str(name))
        plan.requeue_after = CANCEL_POLL
        return ctx.transition(plan, Trigger.CANCEL, "Cancelled", f"cancelling: deleting SparkApplication {name}")
    if phase == Phase.CANCELLING:
        return cancelling(ctx)
    return ctx.transition(plan, Trigger.CANCELLED, "Cancelled", "cancelled before it ran",
                          response={"cancelled": True}, completionTime=st.timestamp(ctx.now))


def cancelling(ctx: Ctx) -> Plan:
    plan = Plan()
    if ctx.obs.app is not None:
        if not (ctx.obs.app.get("metadata") or {}).get("deletionTimestamp"):
            plan.delete_apps.append(str(ctx.status["sparkApplication"]))
        plan.requeue_after = CANCEL_POLL
        return plan
    # The job got SIGTERM and aborted its uploads; its app (and driver pod) are gone.
    return end_run(ctx, plan, RunEnd(Trigger.CANCELLED, Phase.CANCELLED, "Cancelled",
                                     f"cancelled; SparkApplication {ctx.status.get('sparkApplication')} deleted"))


# --- waiting on things outside lading ----------------------------------------------------

def wait(ctx: Ctx, plan: Plan, why: tuple[str, str] | None) -> Plan:
    """Say in the conditions why the run waits (``None``: it no longer does).

    The status is written, and a Warning Event posted, only when the reason or the
    message changes, so a run that keeps waiting costs no writes.
    """
    ready = ctx.ready
    if why is None:
        if ctx.reason in WAIT_REASONS:
            message = f"SparkApplication {ctx.status.get('sparkApplication')} exists; waiting for it to start"
            ctx.transition(plan, Trigger.WAIT, "Submitted", message, event_type=None)
        return plan
    reason, message = why
    if (ready.get("reason"), ready.get("message")) != (reason, message):
        ctx.transition(plan, Trigger.WAIT, reason, message,
                       event_type="Warning" if ready.get("reason") != reason else None)
    return plan


def create_refused(ctx: Ctx, code: int, api_message: str, retry_in: float) -> Plan:
    """The API server answered 404 or 403 to the create: say why, and try again later."""
    name = ctx.status.get("sparkApplication")
    namespace = ctx.meta.get("namespace")
    if code == 404:
        why = ("SparkApplicationCRDMissing",
               f"cannot create SparkApplication {name}: the API server does not serve "
               f"sparkapplications.sparkoperator.k8s.io/v1beta2 ({api_message}); install spark-operator "
               "and its CRDs. Retrying with backoff")
    else:
        why = ("CreateForbidden",
               f"cannot create SparkApplication {name}: forbidden ({api_message}); the operator's "
               f"ServiceAccount needs create on sparkapplications in namespace {namespace} (chart: rbac.create, "
               "watch.namespaces), or RBAC is still propagating. Retrying with backoff")
    plan = wait(ctx, Plan(), why)
    plan.requeue_after = retry_in
    return plan


def name_taken(ctx: Ctx, app: Mapping[str, Any]) -> Plan:
    """A SparkApplication of our name belongs to another owner: wait for it to go, never adopt it."""
    name = ctx.status.get("sparkApplication")
    owners = [f"{r.get('kind')} {r.get('name')} (uid {r.get('uid')})"
              for r in (app.get("metadata") or {}).get("ownerReferences") or []]
    owner = ", ".join(owners) or "no owner"
    message = (f"SparkApplication {name} already exists and belongs to {owner}, not to this {ctx.kind.name} "
               f"(uid {ctx.meta.get('uid')}); not adopting it. Waiting for it to be deleted (a {ctx.kind.name} of "
               "the same name deleted recently is still being cleaned up); if it stays, delete it")
    plan = wait(ctx, Plan(), ("NameTaken", message))
    plan.requeue_after = FOLLOW_INTERVAL
    return plan


def owned_by(app: Mapping[str, Any], uid: str) -> bool:
    """Whether ``app`` has an ownerReference to the resource with ``uid``."""
    return any(ref.get("uid") == uid for ref in (app.get("metadata") or {}).get("ownerReferences") or [])


def _container_waiting(pod: Mapping[str, Any]) -> str | None:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") and waiting.get("reason") != "ContainerCreating":
            return f"{waiting['reason']}: {waiting.get('message') or 'no message'}"
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{cond.get('reason') or 'Unschedulable'}: {cond.get('message') or 'no message'}"
    return None


def not_started(ctx: Ctx) -> tuple[str, str] | None:
    """Why the current SparkApplication has not started after ``ctx.start_timeout`` (else ``None``)."""
    app = ctx.obs.app
    if app is None:
        return None
    meta = app.get("metadata") or {}
    since = st.parse_time(meta.get("creationTimestamp")) or st.parse_time(ctx.status.get("startTime"))
    if since is None or (ctx.now - since).total_seconds() < ctx.start_timeout:
        return None
    return why_not_started(ctx, f"{ctx.start_timeout:g}s")


def why_not_started(ctx: Ctx, limit: str) -> tuple[str, str] | None:
    """Why the current SparkApplication, waiting ``limit`` so far, has not started: not picked
    up, no driver pod, or the driver pod's own reason (Unschedulable, an image pull, a missing
    Secret); ``None`` when nothing says (the driver pod was not looked at, or shows no reason)."""
    app = ctx.obs.app
    if app is None:
        return None
    meta = app.get("metadata") or {}
    name, namespace = meta.get("name"), ctx.meta.get("namespace")
    state = sparkapp_state.app_state(app)
    if state == "":
        return ("NotPickedUp",
                f"SparkApplication {name} has no status {limit} after it was created: spark-operator has not "
                f"picked it up. Check that spark-operator is running and that namespace {namespace} is in its "
                "spark.jobNamespaces")
    if state != "SUBMITTED" or not ctx.obs.driver_pod_checked:
        return None
    pod_name = results.driver_pod_name(app)
    if ctx.obs.driver_pod is None:
        return ("DriverNotStarting",
                f"SparkApplication {name} was submitted but its driver pod {pod_name} does not exist {limit} "
                f"later; see kubectl -n {namespace} describe sparkapplication {name} and spark-operator's log")
    cause = _container_waiting(ctx.obs.driver_pod)
    if cause is None:
        return None
    return ("DriverNotStarting",
            f"driver pod {pod_name} has not started {limit} after submission: {cause}. Check that the image "
            "(spec.spark.image) can be pulled, that the Secret in spec.connection.secretRef exists in namespace "
            f"{namespace}, and that the cluster has room for the driver")


# --- following ---------------------------------------------------------------------------

def _progress(ctx: Ctx, plan: Plan) -> None:
    current = ctx.obs.progress
    if not current:
        return
    before = {k: v for k, v in (ctx.status.get("progress") or {}).items() if k != "updatedAt"}
    if before != dict(current):
        plan.status["progress"] = {**current, "updatedAt": st.timestamp(ctx.now)}


def follow(ctx: Ctx) -> Plan:
    """Follow the SparkApplication of the current run (``Submitted``/``Running``)."""
    plan = Plan()
    status = ctx.status
    app_name = str(status.get("sparkApplication") or "")
    deadline = ctx.int_field("activeDeadlineSeconds", None)
    started = st.parse_time(status.get("startTime"))
    left: float | None = None
    if deadline is not None and started is not None:
        left = (started + dt.timedelta(seconds=deadline) - ctx.now).total_seconds()
        outcome_now = sparkapp_state.classify(ctx.obs.app)
        if left <= 0 and outcome_now != Outcome.COMPLETED:
            if ctx.obs.app is not None:
                plan.delete_apps.append(app_name)
            # A run that never started says why (quota, Unschedulable, image pull): that is
            # what the user must fix, not the deadline.
            stuck = why_not_started(ctx, f"{deadline}s") if outcome_now == Outcome.WAITING else None
            if stuck is not None:
                message = (f"did not start within activeDeadlineSeconds ({deadline}s): {stuck[1]}; "
                           f"SparkApplication {app_name} deleted")
                error = f"activeDeadlineSeconds ({deadline}s) exceeded before the run started: {stuck[1]}"
            else:
                message = f"ran longer than activeDeadlineSeconds ({deadline}s); SparkApplication {app_name} deleted"
                error = f"activeDeadlineSeconds ({deadline}s) exceeded"
            return end_run(ctx, plan, RunEnd(Trigger.DEADLINE, Phase.FAILED, "DeadlineExceeded", message, None,
                                             error, "Warning"))
    pod_exists = (ctx.obs.driver_pod is not None) if ctx.obs.driver_pod_checked else None
    outcome = sparkapp_state.classify(ctx.obs.app, pod_exists)
    state = sparkapp_state.app_state(ctx.obs.app)
    phase = ctx.phase

    def again(p: Plan) -> Plan:
        p.requeue_after = FOLLOW_INTERVAL if left is None else min(FOLLOW_INTERVAL, max(left, 0.1))
        return p

    if outcome == Outcome.GONE:
        if ctx.obs.driver_pod is not None:
            # The application was deleted, its driver pod still stops: a driver in a commit section
            # finishes it before it exits (lading_jobs.critical). The next attempt (or the application
            # made again) waits until the pod is gone: an attempt's recovery takes the run's commit
            # intent for a dead attempt's and rolls it back, deleting what a live one publishes.
            return again(plan)
        if phase == Phase.SUBMITTED:
            if ctx.obs.foreign_app is not None:
                return name_taken(ctx, ctx.obs.foreign_app)
            # Recorded but not (yet) created, e.g. the operator stopped in between: create it now.
            plan.create = build_app(ctx, str(status["runId"]), ctx.policy.run_time(ctx),
                                    int(status.get("attempts") or 1))
            return again(plan)
        return failed_or_retry(ctx, f"SparkApplication {app_name} disappeared while running", "DriverLost")
    if outcome == Outcome.LOST:
        pod = results.driver_pod_name(ctx.obs.app or {"metadata": {"name": app_name}})
        return failed_or_retry(ctx, f"driver pod {pod} disappeared while SparkApplication {app_name} "
                               f"was {state}", "DriverLost")
    if outcome == Outcome.WAITING:
        return again(wait(ctx, plan, not_started(ctx)))
    if outcome in (Outcome.RUNNING, Outcome.FINISHING):
        plan.follow_progress = True
        if phase == Phase.SUBMITTED:
            ctx.transition(plan, Trigger.APP_RUNNING, "Running", f"SparkApplication {app_name} is running")
        _progress(ctx, plan)
        return again(plan)
    result = results.read_result(ctx.obs.driver_pod)
    if outcome == Outcome.COMPLETED:
        if result is not None and result.get("rows") is None:
            return failed_or_retry(ctx, str(result.get("error") or "the job reported no rows"), "JobFailed")
        return end_run(ctx, plan, RunEnd(Trigger.COMPLETED, Phase.SUCCEEDED, "Succeeded",
                                         ctx.kind.read_result(result).summary, result))
    # FAILED / SUBMISSION_FAILED
    error = str((result or {}).get("error") or "")
    if not error and (result or {}).get("cancelled"):
        error = "the driver was stopped (SIGTERM) by something other than lading"
    if not error:
        error = sparkapp_state.app_error(ctx.obs.app) or f"SparkApplication {app_name} ended {state}"
    return failed_or_retry(ctx, error, "SubmissionFailed" if state == "SUBMISSION_FAILED" else "JobFailed")
