"""The CopyJob reconcile step as a pure function: what is observed → what to do.

``plan(observed)`` looks at the resource (spec, status, metadata), the current
run's SparkApplication (or its absence), its driver pod and the time, and
returns a :class:`Plan`: a status merge patch, at most one SparkApplication to
create, SparkApplications to delete, Events to post and when to look again.
The caller (:mod:`lading_operator.controller`) performs it; nothing here talks
to Kubernetes, so every decision is tested with plain dicts.

Dispatch is over the phase (one function per situation), following the table
in :mod:`lading_operator.phases`::

    invalid spec ───────────────▶ Failed (InvalidSpec | Forbidden)
    terminal ───────────────────▶ ttlSecondsAfterFinished
    spec.cancel ────────────────▶ Cancelling ─▶ Cancelled
    Submitted/Running ──────────▶ follow the SparkApplication (deadline, retry, result)
    scheduled, idle ────────────▶ Suspended | Scheduled | start the due run
    one-shot, idle ─────────────▶ Suspended | start the run
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lading_operator import names, render, schedule, sparkapp_state
from lading_operator import result as results
from lading_operator import status as st
from lading_operator.phases import ACTIVE, TERMINAL, Phase, Trigger, next_phase
from lading_operator.sparkapp_state import Outcome
from lading_spec.copyjob import parse_copyjob
from lading_spec.errors import SpecError

KIND = "CopyJob"
UriCheck = Callable[[str, list[tuple[str, str]]], str | None]
DEFAULT_BACKOFF_LIMIT = 0
DEFAULT_SUCCESSFUL_HISTORY = 3
DEFAULT_FAILED_HISTORY = 1
FOLLOW_INTERVAL = 5.0       # how often a running job is looked at (progress, deadline)
CANCEL_POLL = 1.0           # how often a Cancelling job checks that its app is gone


@dataclass(frozen=True)
class Observed:
    resource: Mapping[str, Any]
    app: Mapping[str, Any] | None = None          # the SparkApplication named in status
    driver_pod: Mapping[str, Any] | None = None   # its driver pod, when looked at
    driver_pod_checked: bool = False              # whether driver_pod was looked up
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    # Earlier runs still under way (concurrencyPolicy Allow): app name → (app, driver pod).
    others: Mapping[str, tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]] = field(default_factory=dict)


@dataclass
class Plan:
    status: dict[str, Any] = field(default_factory=dict)    # merge patch for /status
    create: dict[str, Any] | None = None                    # SparkApplication to create
    delete_apps: list[str] = field(default_factory=list)    # SparkApplications to delete
    delete_resource: bool = False                           # ttlSecondsAfterFinished
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    requeue_after: float | None = None                      # look again after (seconds)
    follow_progress: bool = False                           # poll the driver's REST API
    finished_run: dict[str, Any] | None = None              # outcome/seconds/rows/bytes for metrics

    @property
    def phase(self) -> str | None:
        return self.status.get("phase")


# --- reading the resource --------------------------------------------------------------

def _spec(obs: Observed) -> dict[str, Any]:
    return dict(obs.resource.get("spec") or {})


def _status(obs: Observed) -> dict[str, Any]:
    return dict(obs.resource.get("status") or {})


def _meta(obs: Observed) -> dict[str, Any]:
    return dict(obs.resource.get("metadata") or {})


def _generation(obs: Observed) -> int:
    return int(_meta(obs).get("generation") or 1)


def _phase(obs: Observed) -> Phase | None:
    value = _status(obs).get("phase")
    return Phase(value) if value in set(Phase) else None


def _ready(obs: Observed) -> dict[str, Any]:
    for cond in _status(obs).get("conditions") or []:
        if cond.get("type") == "Ready":
            return dict(cond)
    return {}


def _reason(obs: Observed) -> str:
    return str(_ready(obs).get("reason") or "")


def _run_time(obs: Observed) -> dt.datetime:
    """When the current run was due: its schedule slot, or when a one-shot run started."""
    status = _status(obs)
    key = "lastScheduleTime" if _spec(obs).get("schedule") else "startTime"
    return st.parse_time(status.get(key)) or obs.now.replace(microsecond=0)


def _int(spec: Mapping[str, Any], key: str, default: int | None) -> int | None:
    value = spec.get(key, default)
    return None if value is None else int(value)


def uris_of(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every storage URI in a CopyJob spec, with its field path (for the policy check)."""
    out: list[tuple[str, str]] = []
    source = spec.get("from") or {}
    target = spec.get("to") or {}
    for key in ("files", "table"):
        if isinstance(source.get(key), str):
            out.append((f"spec.from.{key}", source[key]))
        if isinstance(target.get(key), str):
            out.append((f"spec.to.{key}", target[key]))
    for i, uri in enumerate(source.get("fileList") or []):
        out.append((f"spec.from.fileList[{i}]", str(uri)))
    for i, item in enumerate(source.get("inputs") or []):
        for key in ("files", "table"):
            if isinstance(item, dict) and isinstance(item.get(key), str):
                out.append((f"spec.from.inputs[{i}].{key}", item[key]))
        for j, uri in enumerate((item or {}).get("fileList") or [] if isinstance(item, dict) else []):
            out.append((f"spec.from.inputs[{i}].fileList[{j}]", str(uri)))
    if isinstance(spec.get("rejectedRows"), str):
        out.append(("spec.rejectedRows", spec["rejectedRows"]))
    return out


def validate(spec: Mapping[str, Any], namespace: str, check_uris: UriCheck | None,
             created: dt.datetime) -> tuple[str, str] | None:
    """``(reason, message)`` when the spec cannot run, else ``None``. Messages name ``spec.<field>``."""
    try:
        parse_copyjob(dict(spec))
        render.parse_spark_options(spec.get("spark"))
        if spec.get("schedule") is not None:
            schedule.parse_schedule(spec["schedule"], created)
        policy = spec.get("concurrencyPolicy", "Allow")
        if policy not in schedule.CONCURRENCY_POLICIES:
            raise SpecError("concurrencyPolicy", f"got {policy!r}; accepted: {', '.join(schedule.CONCURRENCY_POLICIES)}")
        for key in ("activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished", "startingDeadlineSeconds",
                    "successfulRunsHistoryLimit", "failedRunsHistoryLimit"):
            value = spec.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise SpecError(key, f"expected a non-negative integer, got {value!r}")
        if spec.get("activeDeadlineSeconds") == 0:
            raise SpecError("activeDeadlineSeconds", "must be at least 1 (seconds)")
    except SpecError as e:
        return "InvalidSpec", f"spec.{e.field}: {e.message}"
    if check_uris is not None:
        denied = check_uris(namespace, uris_of(spec))
        if denied:
            return "Forbidden", denied
    return None


# --- building the status ----------------------------------------------------------------

def _transition(obs: Observed, plan: Plan, trigger: Trigger, reason: str, message: str,
                event_type: str = "Normal", **fields: Any) -> Plan:
    """Move to the next phase: status fields, conditions, one Event."""
    new = next_phase(_phase(obs), trigger)
    status = _status(obs)
    scheduled = bool(_spec(obs).get("schedule"))
    plan.status.update(fields)
    plan.status.update({
        "phase": str(new),
        "observedGeneration": _generation(obs),
        "conditions": st.conditions(status.get("conditions"), new, reason, message,
                                    _generation(obs), obs.now, scheduled=scheduled),
    })
    plan.events.append((event_type, reason, message))
    return plan


def _run_identity(obs: Observed, run_id: str, run_time: dt.datetime, attempt: int) -> render.RunIdentity:
    meta = _meta(obs)
    return render.RunIdentity(kind=KIND, namespace=str(meta.get("namespace") or ""), name=str(meta["name"]),
                              uid=str(meta.get("uid") or ""), generation=_generation(obs),
                              run_id=run_id, run_time=run_time, attempt=attempt)


def _submit(obs: Observed, plan: Plan, run_id: str, run_time: dt.datetime, attempt: int,
            trigger: Trigger, reason: str, extra: Mapping[str, Any] | None = None) -> Plan:
    run = _run_identity(obs, run_id, run_time, attempt)
    app = render.build_sparkapplication(_spec(obs), run)
    plan.create = app
    fields: dict[str, Any] = {
        "runId": run_id,
        "attempts": attempt,
        "sparkApplication": app["metadata"]["name"],
        "progress": None,
    }
    if attempt == 1:
        fields.update({"startTime": st.timestamp(run_time if not _spec(obs).get("schedule") else obs.now), "completionTime": None,
                       "response": None, "output": None})
    fields.update(extra or {})
    message = (f"run {run_id} attempt {attempt}: submitted SparkApplication {app['metadata']['name']}")
    plan.requeue_after = FOLLOW_INTERVAL
    return _transition(obs, plan, trigger, reason, message, **fields)


# --- the situations --------------------------------------------------------------------

def _invalid(obs: Observed, reason: str, message: str) -> Plan:
    plan = Plan()
    phase = _phase(obs)
    if phase == Phase.FAILED and _reason(obs) == reason and _ready(obs).get("message") == message:
        return plan
    if phase in (Phase.SUCCEEDED, Phase.CANCELLED):
        return plan  # a finished run keeps its outcome; the new spec is not run
    if phase in ACTIVE and _status(obs).get("sparkApplication"):
        plan.delete_apps.append(_status(obs)["sparkApplication"])
    return _transition(obs, plan, Trigger.INVALID, reason, message, event_type="Warning",
                       response={"error": message}, completionTime=st.timestamp(obs.now))


def _terminal(obs: Observed) -> Plan:
    plan = Plan()
    ttl = _int(_spec(obs), "ttlSecondsAfterFinished", None)
    finished = st.parse_time(_status(obs).get("completionTime"))
    if ttl is not None and finished is not None:
        remaining = (finished + dt.timedelta(seconds=ttl) - obs.now).total_seconds()
        if remaining <= 0:
            plan.delete_resource = True
            plan.events.append(("Normal", "Expired", f"deleted {ttl}s after it finished (ttlSecondsAfterFinished)"))
        else:
            plan.requeue_after = remaining
    return plan


def _end_run(obs: Observed, plan: Plan, trigger: Trigger, outcome_phase: Phase, reason: str, message: str,
             result: Mapping[str, Any] | None, error: str | None, event_type: str = "Normal") -> Plan:
    """A run ended: terminal phase (one-shot) or lastRuns + back to Scheduled."""
    status = _status(obs)
    spec = _spec(obs)
    response = st.response_from_result(result)
    if error and "error" not in response:
        response["error"] = error
    if outcome_phase == Phase.CANCELLED:
        response = {"cancelled": True, **{k: v for k, v in response.items() if k == "rows"}}
    fields: dict[str, Any] = {
        "response": {"rows": None, "error": None, "cancelled": None, **response},
        "output": st.output_from_result(result) or None,
        "completionTime": st.timestamp(obs.now),
    }
    started = st.parse_time(status.get("startTime"))
    plan.finished_run = {
        "outcome": str(outcome_phase),
        "seconds": (obs.now - started).total_seconds() if started else 0.0,
        "rows": int(response.get("rows") or 0),
        "bytes": int((result or {}).get("bytes") or 0),
    }
    if spec.get("schedule"):
        entry = st.last_run_entry(status, outcome_phase, result, error, obs.now)
        runs = [entry] + [r for r in status.get("lastRuns") or [] if r.get("runId") != entry.get("runId")]
        kept, dropped = st.trim_history(
            runs,
            _int(spec, "successfulRunsHistoryLimit", DEFAULT_SUCCESSFUL_HISTORY) or 0,
            _int(spec, "failedRunsHistoryLimit", DEFAULT_FAILED_HISTORY) or 0,
        )
        fields["lastRuns"] = kept
        plan.delete_apps.extend(r["sparkApplication"] for r in dropped if r.get("sparkApplication"))
        if outcome_phase == Phase.CANCELLED and spec.get("cancel"):
            return _transition(obs, plan, Trigger.CANCELLED, reason, message, event_type, **fields)
        fields["nextScheduleTime"] = _next_time(obs)
        run_message = f"run {status.get('runId')} {str(outcome_phase).lower()}: {message}"
        plan.requeue_after = 1.0
        return _transition(obs, plan, Trigger.RUN_ENDED, reason, run_message, event_type, **fields)
    plan.requeue_after = 0.0 if spec.get("ttlSecondsAfterFinished") is not None else None
    return _transition(obs, plan, trigger, reason, message, event_type, **fields)


def _next_time(obs: Observed) -> str | None:
    cron = schedule.parse_schedule(_spec(obs)["schedule"], _created(obs))
    return st.timestamp(cron.next_after(obs.now))


def _created(obs: Observed) -> dt.datetime:
    return st.parse_time(_meta(obs).get("creationTimestamp")) or obs.now


def _cancel(obs: Observed) -> Plan:
    plan = Plan()
    phase = _phase(obs)
    status = _status(obs)
    if phase in (Phase.SUBMITTED, Phase.RUNNING):
        plan.delete_apps.append(status["sparkApplication"])
        plan.requeue_after = CANCEL_POLL
        return _transition(obs, plan, Trigger.CANCEL, "Cancelled",
                           f"cancelling: deleting SparkApplication {status['sparkApplication']}")
    if phase == Phase.CANCELLING:
        return _cancelling(obs)
    return _transition(obs, plan, Trigger.CANCELLED, "Cancelled", "cancelled before it ran",
                       response={"cancelled": True}, completionTime=st.timestamp(obs.now))


def _cancelling(obs: Observed) -> Plan:
    plan = Plan()
    if obs.app is not None:
        if not (obs.app.get("metadata") or {}).get("deletionTimestamp"):
            plan.delete_apps.append(_status(obs)["sparkApplication"])
        plan.requeue_after = CANCEL_POLL
        return plan
    # The job got SIGTERM and aborted its uploads; its app (and driver pod) are gone.
    return _end_run(obs, plan, Trigger.CANCELLED, Phase.CANCELLED, "Cancelled",
                    f"cancelled; SparkApplication {_status(obs).get('sparkApplication')} deleted",
                    None, None)


def _failed_or_retry(obs: Observed, error: str, final_reason: str) -> Plan:
    plan = Plan()
    spec, status = _spec(obs), _status(obs)
    attempts = int(status.get("attempts") or 1)
    limit = _int(spec, "backoffLimit", DEFAULT_BACKOFF_LIMIT) or 0
    if attempts <= limit:
        plan = _submit(obs, plan, str(status["runId"]), _run_time(obs), attempts + 1, Trigger.RETRY, "Retrying",
                       extra={"response": {"error": error, "rows": None, "cancelled": None}})
        plan.events[-1] = ("Warning", "Retrying", f"attempt {attempts} failed: {error[:500]}; "
                           f"retrying as {plan.status['sparkApplication']} ({attempts + 1} of {limit + 1})")
        return plan
    reason = "BackoffLimitExceeded" if limit > 0 else final_reason
    message = error if limit == 0 else f"failed {attempts} times (backoffLimit {limit}); last error: {error}"
    trigger = Trigger.DRIVER_LOST if final_reason == "DriverLost" else Trigger.FAILED
    return _end_run(obs, plan, trigger, Phase.FAILED, reason, message, None, error, "Warning")


def _active(obs: Observed) -> Plan:
    """Follow the SparkApplication of the current run."""
    plan = Plan()
    spec, status = _spec(obs), _status(obs)
    app_name = str(status.get("sparkApplication") or "")
    deadline = _int(spec, "activeDeadlineSeconds", None)
    started = st.parse_time(status.get("startTime"))
    if deadline is not None and started is not None:
        left = (started + dt.timedelta(seconds=deadline) - obs.now).total_seconds()
        if left <= 0 and sparkapp_state.classify(obs.app) not in (Outcome.COMPLETED,):
            if obs.app is not None:
                plan.delete_apps.append(app_name)
            return _end_run(obs, plan, Trigger.DEADLINE, Phase.FAILED, "DeadlineExceeded",
                            f"ran longer than activeDeadlineSeconds ({deadline}s); "
                            f"SparkApplication {app_name} deleted", None,
                            f"activeDeadlineSeconds ({deadline}s) exceeded", "Warning")
    else:
        left = None
    pod_exists = (obs.driver_pod is not None) if obs.driver_pod_checked else None
    outcome = sparkapp_state.classify(obs.app, pod_exists)
    state = sparkapp_state.app_state(obs.app)
    phase = _phase(obs)

    def follow(p: Plan) -> Plan:
        p.requeue_after = FOLLOW_INTERVAL if left is None else min(FOLLOW_INTERVAL, max(left, 0.1))
        return p

    if outcome == Outcome.GONE:
        if phase == Phase.SUBMITTED:
            # Recorded but not (yet) created, e.g. the operator stopped in between: create it now.
            run = _run_identity(obs, str(status["runId"]), _run_time(obs), int(status.get("attempts") or 1))
            plan.create = render.build_sparkapplication(spec, run)
            return follow(plan)
        return _failed_or_retry(obs, f"SparkApplication {app_name} disappeared while running", "DriverLost")
    if outcome == Outcome.LOST:
        pod = results.driver_pod_name(obs.app or {"metadata": {"name": app_name}})
        return _failed_or_retry(obs, f"driver pod {pod} disappeared while SparkApplication {app_name} "
                                f"was {state}", "DriverLost")
    if outcome == Outcome.WAITING:
        return follow(plan)
    if outcome in (Outcome.RUNNING, Outcome.FINISHING):
        plan.follow_progress = True
        if phase == Phase.SUBMITTED:
            _transition(obs, plan, Trigger.APP_RUNNING, "Running", f"SparkApplication {app_name} is running")
        return follow(plan)
    result = results.read_result(obs.driver_pod)
    if outcome == Outcome.COMPLETED:
        if result is not None and result.get("rows") is None:
            error = str(result.get("error") or "the job reported no rows")
            return _failed_or_retry(obs, error, "JobFailed")
        rows = (result or {}).get("rows")
        message = f"copied {rows} rows" if rows is not None else "completed (the driver left no result)"
        if result and result.get("destination"):
            message += f" to {result['destination']}"
        return _end_run(obs, plan, Trigger.COMPLETED, Phase.SUCCEEDED, "Succeeded", message, result, None)
    # FAILED / SUBMISSION_FAILED
    error = str((result or {}).get("error") or "")
    if not error and (result or {}).get("cancelled"):
        error = "the driver was stopped (SIGTERM) by something other than lading"
    if not error:
        error = sparkapp_state.app_error(obs.app) or f"SparkApplication {app_name} ended {state}"
    return _failed_or_retry(obs, error, "SubmissionFailed" if state == "SUBMISSION_FAILED" else "JobFailed")


ACTIVE_RUN_PHASES = (str(Phase.SUBMITTED), str(Phase.RUNNING))


def active_other_runs(status: Mapping[str, Any]) -> list[str]:
    """SparkApplications of earlier runs still under way (kept in ``lastRuns``)."""
    return [str(r["sparkApplication"]) for r in status.get("lastRuns") or []
            if r.get("phase") in ACTIVE_RUN_PHASES and r.get("sparkApplication")]


def _follow_others(obs: Observed) -> tuple[Observed, bool]:
    """Update ``lastRuns`` entries of runs still under way from their SparkApplications."""
    status = _status(obs)
    runs = [dict(r) for r in status.get("lastRuns") or []]
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
            entry.update(phase=str(Phase.SUCCEEDED), rows=int(result["rows"]))
            if isinstance(result.get("destination"), str):
                entry["destination"] = result["destination"]
        elif outcome in (Outcome.COMPLETED, Outcome.FAILED, Outcome.LOST, Outcome.GONE):
            cancelled = outcome == Outcome.GONE and bool(_spec(obs).get("cancel"))
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
        return obs, False
    return Observed({**obs.resource, "status": {**status, "lastRuns": runs}}, obs.app, obs.driver_pod,
                    obs.driver_pod_checked, obs.now, obs.others), True


def _replace_or_wait(obs: Observed) -> Plan | None:
    """A scheduled job with a run under way and the next slot due (concurrencyPolicy)."""
    spec, status = _spec(obs), _status(obs)
    policy = spec.get("concurrencyPolicy", "Allow")
    if not spec.get("schedule") or spec.get("suspend") or policy == "Forbid":
        return None
    cron = schedule.parse_schedule(spec["schedule"], _created(obs))
    d = schedule.due(cron, st.parse_time(status.get("lastScheduleTime")), _created(obs), obs.now,
                     _int(spec, "startingDeadlineSeconds", None))
    if d.slot is None:
        return None
    plan = Plan()
    if policy == "Allow":
        # The run under way carries on, followed through its lastRuns entry; the due one starts.
        entry = {k: v for k, v in {"runId": status.get("runId"), "phase": status.get("phase"),
                                   "sparkApplication": status.get("sparkApplication"),
                                   "startTime": status.get("startTime")}.items() if v is not None}
        runs = [entry] + [r for r in status.get("lastRuns") or [] if r.get("runId") != entry.get("runId")]
        return _submit(obs, plan, schedule.slot_run_id(d.slot), d.slot, 1, Trigger.SUBMIT, "Submitted",
                       extra={"lastScheduleTime": st.timestamp(d.slot),
                              "nextScheduleTime": st.timestamp(d.next_time), "lastRuns": runs})
    if status.get("sparkApplication"):
        plan.delete_apps.append(status["sparkApplication"])
    ended = _end_run(obs, plan, Trigger.RUN_ENDED, Phase.CANCELLED, "Replaced",
                     "replaced by the next scheduled run (concurrencyPolicy Replace)", None, None)
    return ended


def _scheduled_idle(obs: Observed) -> Plan:
    plan = Plan()
    spec, status = _spec(obs), _status(obs)
    phase = _phase(obs)
    if spec.get("suspend"):
        if phase != Phase.SUSPENDED:
            return _transition(obs, plan, Trigger.SUSPEND, "Suspended", "suspended: no new runs start",
                               nextScheduleTime=None)
        return plan
    created = _created(obs)
    cron = schedule.parse_schedule(spec["schedule"], created)
    d = schedule.due(cron, st.parse_time(status.get("lastScheduleTime")), created, obs.now,
                     _int(spec, "startingDeadlineSeconds", None))
    if d.missed:
        plan.events.append(("Warning", "MissedSchedule", f"{d.missed} scheduled run(s) skipped "
                            "(too late for startingDeadlineSeconds or superseded)"))
    if d.slot is not None:
        if phase in (None, Phase.PENDING, Phase.SUSPENDED):
            _transition(obs, plan, Trigger.SCHEDULE, "Scheduled", "waiting for the next scheduled run")
            obs = Observed({**obs.resource, "status": {**_status(obs), **plan.status}}, obs.app,
                           obs.driver_pod, obs.driver_pod_checked, obs.now)
        run_id = schedule.slot_run_id(d.slot)
        plan = _submit(obs, plan, run_id, d.slot, 1, Trigger.SUBMIT, "Submitted",
                       extra={"lastScheduleTime": st.timestamp(d.slot),
                              "nextScheduleTime": st.timestamp(d.next_time)})
        return plan
    plan.requeue_after = max((d.next_time - obs.now).total_seconds(), 0.5)
    next_text = st.timestamp(d.next_time)
    if phase != Phase.SCHEDULED:
        return _transition(obs, plan, Trigger.SCHEDULE, "Scheduled", f"next run at {next_text}",
                           nextScheduleTime=next_text)
    if status.get("nextScheduleTime") != next_text:
        plan.status["nextScheduleTime"] = next_text
    return plan


def _oneshot_idle(obs: Observed) -> Plan:
    plan = Plan()
    if _spec(obs).get("suspend"):
        if _phase(obs) != Phase.SUSPENDED:
            return _transition(obs, plan, Trigger.SUSPEND, "Suspended", "suspended: the run has not started")
        return plan
    if _phase(obs) == Phase.SUSPENDED:
        _transition(obs, plan, Trigger.RESUME, "Resumed", "resumed")
        obs = Observed({**obs.resource, "status": {**_status(obs), **plan.status}}, obs.app,
                       obs.driver_pod, obs.driver_pod_checked, obs.now)
    meta = _meta(obs)
    run_id = names.oneshot_run_id(f"{meta.get('uid') or ''}/{_generation(obs)}", str(meta["name"]))
    return _submit(obs, plan, run_id, obs.now.replace(microsecond=0), 1, Trigger.SUBMIT, "Submitted")


def plan(obs: Observed, check_uris: UriCheck | None = None) -> Plan:
    """The single reconcile decision for a CopyJob (see the module docstring)."""
    obs, others_changed = _follow_others(obs)
    out = _plan(obs, check_uris)
    if others_changed and "lastRuns" not in out.status:
        out.status["lastRuns"] = _status(obs)["lastRuns"]
    if active_other_runs(_status(obs)):
        if _spec(obs).get("cancel"):
            out.delete_apps.extend(n for n, (app, _) in obs.others.items()
                                   if app is not None and n in active_other_runs(_status(obs))
                                   and not (app.get("metadata") or {}).get("deletionTimestamp")
                                   and n not in out.delete_apps)
        out.requeue_after = min(out.requeue_after or FOLLOW_INTERVAL, FOLLOW_INTERVAL)
    return out


def _plan(obs: Observed, check_uris: UriCheck | None = None) -> Plan:
    spec = _spec(obs)
    phase = _phase(obs)
    namespace = str(_meta(obs).get("namespace") or "")
    invalid = validate(spec, namespace, check_uris, _created(obs))
    if invalid is not None and phase != Phase.CANCELLING:
        return _invalid(obs, *invalid)
    if phase == Phase.FAILED and _reason(obs) in ("InvalidSpec", "Forbidden") \
            and _status(obs).get("observedGeneration") != _generation(obs):
        # The spec was fixed: start afresh.
        plan_ = Plan()
        _transition(obs, plan_, Trigger.RESUME, "SpecFixed", "the spec is valid now; starting")
        fresh = Observed({**obs.resource, "status": {**_status(obs), **plan_.status}}, None, None, False, obs.now)
        follow = _plan(fresh, check_uris)
        plan_.status.update(follow.status)
        plan_.create, plan_.requeue_after = follow.create, follow.requeue_after
        plan_.events.extend(follow.events)
        return plan_
    if phase in TERMINAL:
        return _terminal(obs)
    if spec.get("cancel") or phase == Phase.CANCELLING:
        return _cancel(obs)
    if phase in (Phase.SUBMITTED, Phase.RUNNING):
        return _replace_or_wait(obs) or _active(obs)
    if spec.get("schedule"):
        return _scheduled_idle(obs)
    return _oneshot_idle(obs)


def submission_failed(obs: Observed, error: str) -> Plan:
    """The API refused the SparkApplication (e.g. 422): the run fails with the API's message."""
    plan = Plan()
    message = f"the SparkApplication was refused: {error}"
    return _end_run(obs, plan, Trigger.FAILED, Phase.FAILED, "SubmissionFailed", message, None, message, "Warning")
