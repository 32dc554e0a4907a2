"""StreamCopy and Compaction: their specs are validated now; their engines ship later.

A valid resource stays ``Pending`` with a ``Ready=False`` condition that says so
(reason ``EngineNotAvailable``): no fake success. An invalid one is ``Failed``
with reason ``InvalidSpec`` and a message naming the field.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import kopf

from lading_operator import k8s, metrics
from lading_operator import status as st
from lading_operator.phases import Phase
from lading_spec.compaction import parse_compaction
from lading_spec.errors import SpecError
from lading_spec.streamcopy import parse_streamcopy

PARSERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "StreamCopy": parse_streamcopy, "Compaction": parse_compaction}


def status_for(kind: str, spec: dict[str, Any], generation: int, previous: list[dict[str, Any]] | None,
               now: dt.datetime) -> dict[str, Any]:
    """The status of a StreamCopy or Compaction (pure, given the spec parser)."""
    try:
        PARSERS[kind](dict(spec))
    except SpecError as e:
        message = f"spec.{e.field}: {e.message}"
        return {"phase": str(Phase.FAILED), "observedGeneration": generation, "response": {"error": message},
                "conditions": st.conditions(previous, Phase.FAILED, "InvalidSpec", message, generation, now)}
    message = f"the spec is valid; the {kind} engine ships in a later lading release, so nothing runs yet"
    conditions = st.conditions(previous, Phase.PENDING, "EngineNotAvailable", message, generation, now)
    for cond in conditions:
        if cond["type"] == "Reconciling":
            cond["status"] = "False"
    return {"phase": str(Phase.PENDING), "observedGeneration": generation, "conditions": conditions}


def _handle(kind: str, body: kopf.Body, patch: kopf.Patch) -> None:
    meta = body.get("metadata", {})
    status = status_for(kind, dict(body.get("spec") or {}), int(meta.get("generation") or 1),
                        list((body.get("status") or {}).get("conditions") or []), dt.datetime.now(dt.UTC))
    patch.status.update(status)
    metrics.observe_phase(kind, meta.get("namespace", ""), meta.get("name", ""), status["phase"])


@kopf.on.resume(k8s.GROUP, k8s.VERSION, "streamcopies")
@kopf.on.create(k8s.GROUP, k8s.VERSION, "streamcopies")
@kopf.on.update(k8s.GROUP, k8s.VERSION, "streamcopies", field="spec")
def streamcopy(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    _handle("StreamCopy", body, patch)


@kopf.on.resume(k8s.GROUP, k8s.VERSION, "compactions")
@kopf.on.create(k8s.GROUP, k8s.VERSION, "compactions")
@kopf.on.update(k8s.GROUP, k8s.VERSION, "compactions", field="spec")
def compaction(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    _handle("Compaction", body, patch)


@kopf.on.delete(k8s.GROUP, k8s.VERSION, "streamcopies", optional=True)
def streamcopy_deleted(name: str, namespace: str | None, **_: Any) -> None:
    metrics.forget("StreamCopy", namespace or "", name)


@kopf.on.delete(k8s.GROUP, k8s.VERSION, "compactions", optional=True)
def compaction_deleted(name: str, namespace: str | None, **_: Any) -> None:
    metrics.forget("Compaction", namespace or "", name)
