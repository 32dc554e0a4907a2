"""kopf's diff base: neither stored nor read (nor built) for our kinds and SparkApplications."""

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


def test_no_lading_kind_keeps_a_diff_base() -> None:
    # No handler of the operator reads a diff: every kind's loop reads the resource.
    storage = persistence.DiffBaseStorage(prefix="lading.io", key="last-handled-configuration")
    for kind in ("CopyJob", "StreamCopy", "Compaction"):
        body = _body(kind, {KEY: json.dumps({"spec": {"x": 0}})})
        assert storage.fetch(body=body) is None
        patch = kopf.Patch()
        storage.store(body=body, patch=patch, essence=storage.build(body=body))
        assert not patch
    app = kopf.Body({"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
                     "metadata": {"name": "a", "namespace": "ns"}, "spec": {"x": 1}})
    assert storage.build(body=app) == {}


def test_other_groups_keep_their_diff_base() -> None:
    storage = persistence.DiffBaseStorage(prefix="lading.io", key="last-handled-configuration")
    other = kopf.Body({"apiVersion": "example.com/v1", "kind": "CopyJob",
                       "metadata": {"name": "a", "namespace": "ns",
                                    "annotations": {KEY: json.dumps({"spec": {"x": 0}})}}, "spec": {"x": 1}})
    assert not persistence.diffless(other)
    assert storage.fetch(body=other) == {"spec": {"x": 0}}
    patch = kopf.Patch()
    storage.store(body=other, patch=patch, essence=storage.build(body=other))
    assert json.loads(patch["metadata"]["annotations"][KEY])["spec"] == {"x": 1}


def test_copyjob_essence_is_not_built() -> None:
    storage = persistence.DiffBaseStorage(prefix="lading.io", key="last-handled-configuration")
    assert storage.build(body=_body("CopyJob")) == {}
    assert storage.build(body=_body("StreamCopy")) == {}
