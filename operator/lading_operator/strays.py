"""SparkApplications a resource owns that should be gone, found from what exists (pure).

The planner ends a run in status and asks for its SparkApplication's deletion in the
same plan; the controller writes the status first. A deletion lost after that write
(the operator killed, the API answering 500 or 429) would never be asked again: the
status already says the run ended, so nothing follows it. This module makes those
deletions level-triggered: every pass of a run-based kind (not a continuous one,
whose driver is stopped by its own protocol) lists the SparkApplications the
resource owns and deletes

- those of a run the status no longer keeps (``runId`` and ``lastRuns``): a history
  trim whose deletion was lost;
- those still running (not completed, not failed) although their run ended: a
  deadline, an invalid spec, a replaced scheduled run, an earlier attempt whose
  driver was lost.

The current run's application, and the applications of earlier runs still under way
(``concurrencyPolicy: Allow``), are never strays; neither is one already being deleted.

An application that lost its owner is one too (:func:`orphaned`): a resource deleted with
``propagationPolicy: Orphan`` (``kubectl delete --cascade=orphan``) leaves its application
running with no owner, no deadline, and no run slot counted for it; nothing of the
resource's passes would ever see it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lading_operator import kinds, names, render, sparkapp_state
from lading_operator.observed import Ctx
from lading_operator.phases import ACTIVE
from lading_operator.sparkapp_state import Outcome
from lading_operator.triggers import scheduled

FINISHED = (Outcome.COMPLETED, Outcome.FAILED)


def stray_apps(ctx: Ctx) -> list[tuple[str, str]]:
    """(name, why) of every owned SparkApplication that should be gone, in listing order."""
    owned = ctx.obs.owned
    if owned is None or ctx.policy.style == "continuous":
        return []
    status = ctx.status
    keep = set(scheduled.active_other_runs(status))
    if ctx.phase in ACTIVE and status.get("sparkApplication"):
        keep.add(str(status["sparkApplication"]))
    runs = {names.label_value(str(r)) for r in [status.get("runId"), *(e.get("runId") for e in
                                                                       status.get("lastRuns") or [])] if r}
    out = []
    for app in owned:
        meta: Mapping[str, Any] = app.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name or name in keep or meta.get("deletionTimestamp"):
            continue
        run = str((meta.get("labels") or {}).get(render.LABEL_RUN_ID) or "")
        if run not in runs:
            out.append((name, f"its run {run or '(unlabelled)'} is no longer kept (run history)"))
        elif sparkapp_state.classify(app) not in FINISHED:
            out.append((name, f"its run {run} ended but it was still {sparkapp_state.app_state(app) or 'starting'}"))
    return out


def orphaned(app: Mapping[str, Any]) -> bool:
    """Whether ``app`` is a SparkApplication the operator made (its ``lading.io/kind`` label, and
    a job document naming the resource's uid) that no lading resource owns any more: its owner
    was deleted with the Orphan propagation policy. The operator never makes one without an
    owner; one applied by hand from ``lading render`` names no uid, and is left alone."""
    meta: Mapping[str, Any] = app.get("metadata") or {}
    if meta.get("deletionTimestamp") or not (meta.get("labels") or {}).get(render.LABEL_KIND):
        return False
    if any(ref.get("kind") in kinds.BY_NAME for ref in meta.get("ownerReferences") or [] if isinstance(ref, Mapping)):
        return False
    job = (render.job_document_of(app) or {}).get("metadata")
    return isinstance(job, Mapping) and bool(job.get("uid"))
