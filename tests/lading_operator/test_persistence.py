"""kopf's diff base: kept for StreamCopy and Compaction, neither stored nor read for CopyJob."""

from __future__ import annotations

import json

import kopf

from lading_operator import persistence

KEY = "lading.io/last-handled-configuration"


def _body(kind: str, annotations: dict[str, str] | None = None) -> kopf.Body:
    return kopf.Body({"apiVersion": "lading.io/v1alpha1", "kind": kind,
                      "metadata": {"name": "a", "namespace": "ns", "annotations": annotations or {}},
                      "spec": {"x": 1}})


def test_copyjob_has_no_diff_base() -> None:
    storage = persistence.DiffBaseStorage(prefix="lading.io", key="last-handled-configuration")
    stored = json.dumps({"spec": {"x": 0}})
    copyjob = _body("CopyJob", {KEY: stored})
    assert storage.fetch(body=copyjob) is None
    patch = kopf.Patch()
    storage.store(body=copyjob, patch=patch, essence=storage.build(body=copyjob))
    assert not patch  # no write at all


def test_other_kinds_keep_their_diff_base() -> None:
    storage = persistence.DiffBaseStorage(prefix="lading.io", key="last-handled-configuration")
    compaction = _body("Compaction", {KEY: json.dumps({"spec": {"x": 0}})})
    assert storage.fetch(body=compaction) == {"spec": {"x": 0}}
    patch = kopf.Patch()
    storage.store(body=compaction, patch=patch, essence=storage.build(body=compaction))
    assert json.loads(patch["metadata"]["annotations"][KEY])["spec"] == {"x": 1}
    assert not persistence.diffless({"apiVersion": "example.com/v1", "kind": "CopyJob"})


def test_copyjob_essence_is_not_built() -> None:
    storage = persistence.DiffBaseStorage(prefix="lading.io", key="last-handled-configuration")
    assert storage.build(body=_body("CopyJob")) == {}
    assert storage.build(body=_body("StreamCopy"))["spec"] == {"x": 1}
