"""The reconcile step of every kind as a pure function: what is observed → what to do.

``plan(observed)`` looks at the resource (spec, status, metadata), the current
run's SparkApplication (or its absence), its driver pod and the time, and returns
a :class:`Plan`: a status merge patch, at most one SparkApplication to create,
SparkApplications (and whole runs) to delete, Events to post and when to look
again. The caller (:mod:`lading_operator.controller`) performs it; nothing here
talks to Kubernetes, so every decision is tested with plain dicts.

What is kind-specific comes from the kind's description (:mod:`lading_operator.kinds`);
what starts runs from its trigger policy (:mod:`lading_operator.triggers`); one run
from :mod:`lading_operator.lifecycle`. The dispatch::

    terminal ───────────────────▶ ttlSecondsAfterFinished; a later spec change is
                                  recorded and answered with SpecChangeIgnored
    a spec change during a run ─▶ the run goes on with its own spec; one-shot:
                                  SpecChangeIgnored, scheduled: SpecChangeDeferred
    invalid spec ───────────────▶ Failed (InvalidSpec | Forbidden); runs once fixed
    kind parked ────────────────▶ Pending (EngineNotAvailable)
    spec.cancel ────────────────▶ Cancelling ─▶ Cancelled
    Submitted/Running ──────────▶ the policy first (e.g. concurrencyPolicy), else follow the run
    idle ───────────────────────▶ the policy: start a run, wait for a slot, suspend

Every pass that reads a generation newer than ``status.observedGeneration``
records it, whatever else it does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from lading_operator import kinds, lifecycle, render, schedule, strays, triggers
from lading_operator import status as st
from lading_operator.kinds import Kind
from lading_operator.lifecycle import FOLLOW_INTERVAL
from lading_operator.observed import START_TIMEOUT, Ctx, Observed, Plan, PolicyCheck
from lading_operator.phases import ACTIVE, TERMINAL, Phase, Trigger
from lading_operator.triggers import scheduled
from lading_spec.errors import SpecError

NEVER_RAN = ("InvalidSpec", "Forbidden")   # Failed reasons of a spec that never ran: a fix runs it
IGNORED = st.IGNORED
DEFERRED = "SpecChangeDeferred"
LIMITS = ("activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished", "startingDeadlineSeconds",
          "successfulRunsHistoryLimit", "failedRunsHistoryLimit")

__all__ = ["FOLLOW_INTERVAL", "Observed", "Plan", "context", "plan", "submission_failed", "validate"]


def validate(kind: Kind, spec: Mapping[str, Any], namespace: str, check_policy: PolicyCheck | None,
             created: dt.datetime) -> tuple[str, str] | None:
    """``(reason, message)`` when the spec cannot run, else ``None``. Messages name ``spec.<field>``."""
    try:
        kind.parse(dict(spec))
        render.parse_spark_options(spec.get("spark"))
        render.check_job_size(spec, kind.operator_fields)
        if spec.get("schedule") is not None:
            schedule.parse_schedule(spec["schedule"], created)
        policy = spec.get("concurrencyPolicy", kind.default_concurrency)
        if policy not in schedule.CONCURRENCY_POLICIES:
            raise SpecError("concurrencyPolicy", f"got {policy!r}; accepted: {', '.join(schedule.CONCURRENCY_POLICIES)}")
        for key in LIMITS:
            value = spec.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise SpecError(key, f"expected a non-negative integer, got {value!r}")
        if spec.get("activeDeadlineSeconds") == 0:
            raise SpecError("activeDeadlineSeconds", "must be at least 1 (seconds)")
    except SpecError as e:
        return "InvalidSpec", f"spec.{e.field}: {e.message}"
    if check_policy is not None:
        denied = check_policy(namespace, kind.uris(spec), spec.get("spark"))
        if denied:
            return "Forbidden", denied
    return None


def context(obs: Observed, kind: Kind | None = None, start_timeout: float = START_TIMEOUT,
            file_prefixes: tuple[str, ...] = (), catalogs: str = "") -> Ctx:
    """The pass's view of ``obs``: its kind (from the resource unless given) and trigger policy."""
    kind = kind or kinds.of(obs.resource)
    return Ctx(kind, obs, triggers.policy_for(kind, obs.resource.get("spec") or {}), start_timeout, file_prefixes,
               catalogs)


def plan(obs: Observed, check_policy: PolicyCheck | None = None, *, kind: Kind | None = None,
         start_timeout: float = START_TIMEOUT, file_prefixes: tuple[str, ...] = (), catalogs: str = "") -> Plan:
    """The single reconcile decision for a resource (see the module docstring). ``file_prefixes``:
    the ``file://`` prefixes the namespace's policy allows, rendered for the job; ``catalogs``: the
    Iceberg catalogs it allows (``Policy.catalogs_env``), rendered likewise."""
    ctx, others_changed = scheduled.follow_others(context(obs, kind, start_timeout, file_prefixes, catalogs))
    out = _plan(ctx, check_policy)
    if others_changed and "lastRuns" not in out.status:
        out.status["lastRuns"] = ctx.status["lastRuns"]
    under_way = scheduled.active_other_runs(ctx.status)
    if under_way:
        if ctx.spec.get("cancel"):
            out.delete_apps.extend(n for n, (app, _) in ctx.obs.others.items()
                                   if app is not None and n in under_way
                                   and not (app.get("metadata") or {}).get("deletionTimestamp")
                                   and n not in out.delete_apps)
        out.requeue_after = min(out.requeue_after or FOLLOW_INTERVAL, FOLLOW_INTERVAL)
    _change_under_way(ctx, out)
    _record_generation(ctx, out)
    if not out.delete_resource:
        for name, why in strays.stray_apps(ctx):
            if name not in out.delete_apps:
                out.delete_apps.append(name)
                out.events.append(("Warning", "StrayDeleted", f"deleting SparkApplication {name}: {why}"))
    return out


def submission_failed(obs: Observed, error: str, kind: Kind | None = None) -> Plan:
    """The API refused the SparkApplication for good (e.g. 422): the run fails with the API's message."""
    return lifecycle.submission_failed(context(obs, kind), error)


def _plan(ctx: Ctx, check_policy: PolicyCheck | None) -> Plan:
    phase = ctx.phase
    never_ran = phase == Phase.FAILED and ctx.reason in NEVER_RAN
    # A continuous kind (StreamCopy) is never finished: a Failed stream starts again on a spec change.
    if phase in TERMINAL and not never_ran and ctx.policy.style != "continuous":
        return _terminal(ctx, say_ignored=True)
    invalid = validate(ctx.kind, ctx.spec, str(ctx.meta.get("namespace") or ""), check_policy, ctx.created)
    if invalid is not None and phase != Phase.CANCELLING:
        out = _invalid(ctx, *invalid)
        return out if out.status or phase not in TERMINAL else _terminal(ctx, say_ignored=False)
    if never_ran:
        if ctx.status.get("observedGeneration") == ctx.generation:
            return _terminal(ctx, say_ignored=False)  # nothing new to run
        # The spec was fixed: start afresh.
        out = ctx.transition(Plan(), Trigger.RESUME, "SpecFixed", "the spec is valid now; starting")
        return out.merge(_plan(ctx.with_status(out.status), check_policy))
    if not ctx.kind.engine_available:
        return ctx.policy.idle(ctx)
    if ctx.spec.get("cancel") or phase == Phase.CANCELLING:
        return lifecycle.cancel(ctx)
    if phase in (Phase.SUBMITTED, Phase.RUNNING):
        return ctx.policy.active(ctx) or lifecycle.follow(ctx)
    return ctx.policy.idle(ctx)


def _invalid(ctx: Ctx, reason: str, message: str) -> Plan:
    plan = Plan()
    phase = ctx.phase
    if phase == Phase.FAILED and ctx.reason == reason and ctx.ready.get("message") == message:
        return plan
    if phase in ACTIVE and ctx.status.get("sparkApplication") and ctx.obs.foreign_app is None:
        plan.delete_apps.append(ctx.status["sparkApplication"])
    return ctx.transition(plan, Trigger.INVALID, reason, message, event_type="Warning",
                          response={"error": message}, completionTime=st.timestamp(ctx.now))


def _terminal(ctx: Ctx, say_ignored: bool) -> Plan:
    """A finished resource: ttlSecondsAfterFinished, and a spec change it will not run."""
    plan = Plan()
    ttl = ctx.int_field("ttlSecondsAfterFinished", None)
    finished = st.parse_time(ctx.status.get("completionTime"))
    if ttl is not None and finished is not None:
        remaining = (finished + dt.timedelta(seconds=ttl) - ctx.now).total_seconds()
        if remaining <= 0:
            plan.delete_resource = True
            plan.events.append(("Normal", "Expired", f"deleted {ttl}s after it finished (ttlSecondsAfterFinished)"))
            return plan
        plan.requeue_after = remaining
    observed = ctx.status.get("observedGeneration")
    if say_ignored and observed is not None and observed != ctx.generation:
        message = (f"spec change ignored; delete and re-create to re-run (this {ctx.kind.name} ended "
                   f"{ctx.phase}; generation {ctx.generation} does not run)")
        plan.status["observedGeneration"] = ctx.generation
        plan.status["conditions"] = st.ignored_change(ctx.status.get("conditions"), IGNORED, message,
                                                      ctx.generation, ctx.now)
        plan.events.append(("Warning", IGNORED, message))
    return plan


def _change_under_way(ctx: Ctx, out: Plan) -> None:
    """The first pass that reads a newer generation while a run is under way says what
    becomes of it: the run goes on with the job spec its SparkApplication started with
    (``lifecycle.spec_changed_under_way``). A one-shot resource never runs the new one
    (``SpecChangeIgnored``, kept once the run ends); a scheduled one runs it next time."""
    generation = ctx.generation
    if ctx.status.get("observedGeneration") in (None, generation) or out.delete_resource \
            or ctx.phase not in (Phase.SUBMITTED, Phase.RUNNING) or ctx.policy.style == "continuous" \
            or lifecycle.started_job_spec(ctx.obs.app) is None:
        return
    changed = lifecycle.spec_changed_under_way(ctx)
    run = ctx.status.get("runId")
    if ctx.policy.style == "scheduled":
        if changed:
            out.events.append(("Normal", DEFERRED, f"generation {generation} changed the spec while run {run} "
                               f"is under way: that run goes on with the spec it started with; the next "
                               f"run uses generation {generation}"))
        return
    conditions = out.status.get("conditions") or ctx.status.get("conditions") or []
    if changed:
        message = (f"spec change ignored: generation {generation} changed the spec while run {run} was under way; "
                   f"the run goes on with the spec it started with and generation {generation} does not run "
                   f"(this {ctx.kind.name} runs once); delete and re-create to run it")
        out.status["conditions"] = st.ignored_change(conditions, IGNORED, message, generation, ctx.now)
        out.events.append(("Warning", IGNORED, message))
    elif any(c.get("type") == IGNORED for c in conditions):  # changed back to the spec that runs
        out.status["conditions"] = st.with_generation(st.without(conditions, IGNORED), generation)
    else:
        return
    out.status["observedGeneration"] = generation


def _record_generation(ctx: Ctx, out: Plan) -> None:
    """Every pass that reads a newer generation says so (observedGeneration, conditions)."""
    generation = ctx.generation
    if out.delete_resource or "observedGeneration" in out.status \
            or ctx.status.get("observedGeneration") in (None, generation):
        return
    out.status["observedGeneration"] = generation
    if "conditions" not in out.status and ctx.status.get("conditions"):
        out.status["conditions"] = st.with_generation(ctx.status["conditions"], generation)
