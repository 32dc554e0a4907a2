"""Where kopf keeps its per-object state, and for which kinds it keeps none.

kopf stores a "last handled configuration" annotation on every object of a kind
that has change handlers, to compute diffs for ``on.create``/``on.update``, and
builds that essence (a copy of the body) on every watch event of every kind it
watches. The operator has no change handlers at all: each resource's reconcile
loop reads the resource on every pass and is started and stopped by plain watch
events (:mod:`lading_operator.handlers.resources`), and SparkApplication events
only feed a cache. For those kinds the annotation would never be read, yet
writing it costs one more validated write and one more watch event per object
(measured in bench/operator_scale.py), and building it a copy per event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import kopf

from lading_operator import k8s, kinds, render

DIFFLESS_KINDS = frozenset({(k8s.GROUP, kind.name) for kind in kinds.ALL}
                           | {(render.SPARK_GROUP, render.SPARK_KIND)})


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
