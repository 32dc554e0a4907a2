"""Status patches and conditions (pure).

One status shape for every kind (see docs/operator.md). Conditions follow the
Kubernetes convention and what Flux's kstatus and Argo CD read:

- ``Ready``       True when the resource did what it is for (a one-shot run
                  Succeeded; a schedule is waiting healthily).
- ``Succeeded``   True/False once a one-shot run ended; Unknown before.
- ``Failed``      True when it ended in failure.
- ``Reconciling`` True while the operator is still working towards the goal.
- ``Stalled``     True when it cannot progress without a change to the spec.
- ``SpecChangeIgnored`` True on a one-shot resource whose spec changed while its
                  run was under way or after it finished: the change is recorded, not
                  run. It stays through the run's phase changes; a new run clears it.

Every condition carries ``observedGeneration``; ``lastTransitionTime`` only moves
when the condition's status changes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from lading_operator.phases import Phase
from lading_spec import controls

CONDITION_TYPES = ("Ready", "Succeeded", "Failed", "Reconciling", "Stalled")
IGNORED = "SpecChangeIgnored"


MESSAGE_LIMIT = 4096  # characters of one message or error in status (an object must stay small)


def clip(text: str, limit: int = MESSAGE_LIMIT, keep: str = controls.MULTI_LINE) -> str:
    """``text`` with its control characters escaped (but ``keep``'s: newline and tab in a
    multi-line field, :mod:`lading_spec.controls`), its middle cut when longer than ``limit``:
    the head says what failed, the tail (of spark-submit's output, say) often why; status holds
    several copies of a message (response, five conditions), and the API refuses an object over
    etcd's 1.5 MiB."""
    text = controls.escape_controls(text, keep)
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} … [{len(text) - 2 * half} characters cut] … {text[-half:]}"


def timestamp(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _condition_states(phase: Phase, reason: str, scheduled: bool, continuous: bool = False) -> dict[str, str]:
    """Condition type → "True"/"False"/"Unknown" for a phase.

    Every phase that will not change by itself reads as done for kstatus
    (Ready=True, or Stalled=True for a failure), so GitOps health checks finish:
    ``Cancelled`` is what ``spec.cancel`` asked for, and a continuous kind's
    steady state (a StreamCopy that is ``Running``) is Ready, not Reconciling;
    one that is ``Suspended`` while its driver still stops (reason ``Suspending``)
    is Reconciling, so a wait for the suspend ends once nothing runs.
    """
    active = phase in (Phase.PENDING, Phase.SUBMITTED, Phase.RUNNING, Phase.CANCELLING)
    if continuous and phase == Phase.SUSPENDED and reason == "Suspending":
        # A stream being suspended still has a driver to stop: under way until it is gone.
        return {"Ready": "False", "Succeeded": "Unknown", "Failed": "False", "Reconciling": "True", "Stalled": "False"}
    if continuous and phase == Phase.RUNNING:
        return {"Ready": "True", "Succeeded": "Unknown", "Failed": "False", "Reconciling": "False", "Stalled": "False"}
    if phase == Phase.SUCCEEDED:
        return {"Ready": "True", "Succeeded": "True", "Failed": "False", "Reconciling": "False", "Stalled": "False"}
    if phase == Phase.FAILED:
        return {"Ready": "False", "Succeeded": "False", "Failed": "True", "Reconciling": "False", "Stalled": "True"}
    if phase == Phase.CANCELLED:
        return {"Ready": "True", "Succeeded": "False", "Failed": "False", "Reconciling": "False", "Stalled": "False"}
    if phase in (Phase.SCHEDULED, Phase.SUSPENDED):
        return {"Ready": "True", "Succeeded": "Unknown", "Failed": "False", "Reconciling": "False", "Stalled": "False"}
    if scheduled and active:
        # A scheduled job stays Ready while one of its runs is under way.
        return {"Ready": "True", "Succeeded": "Unknown", "Failed": "False", "Reconciling": "True", "Stalled": "False"}
    return {"Ready": "False", "Succeeded": "Unknown", "Failed": "False", "Reconciling": "True", "Stalled": "False"}


def conditions(
    previous: Sequence[Mapping[str, Any]] | None,
    phase: Phase,
    reason: str,
    message: str,
    generation: int,
    now: dt.datetime,
    scheduled: bool = False,
    continuous: bool = False,
) -> list[dict[str, Any]]:
    """The full conditions list for ``phase``, keeping transition times that did not change.

    ``continuous`` is for kinds whose goal is to keep running (StreamCopy).
    """
    before = {c.get("type"): c for c in previous or () if isinstance(c, Mapping)}
    out = []
    message = clip(message)
    ignored = before.get(IGNORED)
    for type_, state in _condition_states(phase, reason, scheduled, continuous).items():
        old = before.get(type_) or {}
        changed = old.get("status") != state
        out.append({
            "type": type_,
            "status": state,
            "reason": reason,
            "message": message,
            "lastTransitionTime": timestamp(now) if changed or not old.get("lastTransitionTime")
            else old["lastTransitionTime"],
            "observedGeneration": generation,
        })
    if ignored and ignored.get("status") == "True":  # still true: the change was not run
        out.append({**ignored, "observedGeneration": generation})
    return out


def without(previous: Sequence[Mapping[str, Any]] | None, type_: str) -> list[dict[str, Any]]:
    """The conditions but ``type_``."""
    return [dict(c) for c in previous or () if isinstance(c, Mapping) and c.get("type") != type_]


def with_generation(previous: Sequence[Mapping[str, Any]], generation: int) -> list[dict[str, Any]]:
    """The same conditions, observed at ``generation`` (nothing else changes)."""
    return [{**c, "observedGeneration": generation} for c in previous if isinstance(c, Mapping)]


def ignored_change(previous: Sequence[Mapping[str, Any]] | None, type_: str, message: str, generation: int,
                   now: dt.datetime) -> list[dict[str, Any]]:
    """The conditions at ``generation`` plus ``type_`` = True saying why the change is not acted on."""
    out = [c for c in with_generation(previous or (), generation) if c.get("type") != type_]
    old = next((c for c in previous or () if isinstance(c, Mapping) and c.get("type") == type_), {})
    out.append({"type": type_, "status": "True", "reason": type_, "message": clip(message),
                "lastTransitionTime": old["lastTransitionTime"] if old.get("status") == "True"
                and old.get("lastTransitionTime") else timestamp(now), "observedGeneration": generation})
    return out


def response_from_result(result: Mapping[str, Any] | None) -> dict[str, Any]:
    """``status.response`` (CopyResponse): rows, or error, or cancelled."""
    if not result:
        return {}
    out: dict[str, Any] = {}
    if result.get("rows") is not None:
        out["rows"] = int(result["rows"])
    if result.get("error"):
        out["error"] = clip(str(result["error"]))
    if result.get("cancelled"):
        out["cancelled"] = True
    return out


def output_from_result(result: Mapping[str, Any] | None) -> dict[str, Any]:
    """``status.output``: files, bytes, manifest, destination, and a load's table's Iceberg metadata file."""
    if not result:
        return {}
    out: dict[str, Any] = {}
    for key in ("files", "bytes"):
        if isinstance(result.get(key), int | float) and not isinstance(result.get(key), bool):
            out[key] = int(result[key])
    for key in ("manifest", "destination", "icebergMetadata"):
        if isinstance(result.get(key), str) and result[key]:
            out[key] = result[key]
    return out


def last_run_entry(status: Mapping[str, Any], phase: Phase, history: Mapping[str, Any],
                   error: str | None, now: dt.datetime) -> dict[str, Any]:
    """One ``status.lastRuns`` entry for the run that just ended.

    ``history``: what the kind takes from the run's result for its entry (rows,
    destination; see :class:`lading_operator.kinds.RunResult`).
    """
    entry: dict[str, Any] = {
        "runId": status.get("runId"),
        "phase": str(phase),
        "sparkApplication": status.get("sparkApplication"),
        "startTime": status.get("startTime"),
        "completionTime": timestamp(now),
        **history,
    }
    if error:
        entry["error"] = clip(error, 1000)
    return {k: v for k, v in entry.items() if v is not None}


def trim_history(runs: Sequence[Mapping[str, Any]], successful_limit: int,
                 failed_limit: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Keep the newest ``successful_limit`` succeeded and ``failed_limit`` other finished runs.

    Returns (kept, dropped), newest first, so the caller can delete the dropped
    runs' SparkApplications as CronJob deletes old Jobs.
    """
    kept: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    counts = {"ok": 0, "bad": 0}
    for run in runs:
        if run.get("phase") in (Phase.SUBMITTED, Phase.RUNNING):
            kept.append(dict(run))  # a run still under way (concurrencyPolicy Allow) is never dropped
            continue
        bucket = "ok" if run.get("phase") == Phase.SUCCEEDED else "bad"
        limit = successful_limit if bucket == "ok" else failed_limit
        if counts[bucket] < limit:
            kept.append(dict(run))
            counts[bucket] += 1
        else:
            dropped.append(dict(run))
    return kept, dropped
