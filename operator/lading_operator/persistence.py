"""Where kopf keeps its per-object state, and for which kinds it keeps none.

kopf stores a "last handled configuration" annotation on every object of a kind
that has change handlers, to compute diffs for ``on.create``/``on.update``. A
CopyJob has none of those: its reconcile loop reads the resource on every pass,
and its only change handler is ``on.delete`` (a finalizer, which kopf detects
from ``deletionTimestamp``, not from a diff). For CopyJobs the annotation is
therefore never read, yet writing it costs one more validated write and one more
watch event per CopyJob (measured in bench/operator_scale.py). StreamCopy and
Compaction use ``on.update(field="spec")`` and keep it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import kopf

DIFFLESS_KINDS = frozenset({("lading.io", "CopyJob")})


def diffless(body: Any) -> bool:
    """Whether ``body`` is of a kind whose diff base is neither stored nor read."""
    api_version = str(body.get("apiVersion") or "")
    return (api_version.split("/", 1)[0], body.get("kind")) in DIFFLESS_KINDS


class DiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """kopf's annotation storage, skipped for :data:`DIFFLESS_KINDS`."""

    def build(self, *, body: kopf.Body,
              extra_fields: Iterable[str | tuple[str, ...] | list[str] | None] | None = None) -> kopf.BodyEssence:
        if diffless(body):
            return cast(kopf.BodyEssence, {})  # nothing to compare: no copy of the body per event
        return super().build(body=body, extra_fields=extra_fields)

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        if diffless(body):
            return None
        return super().fetch(body=body)

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        if diffless(body):
            return
        super().store(body=body, patch=patch, essence=essence)
