"""What a reconcile pass may take from the watches instead of reading it again."""

from __future__ import annotations

import kopf

from lading_operator import controller


def _copyjob(rv: str) -> dict:
    return {"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob",
            "metadata": {"name": "a", "namespace": "ns", "resourceVersion": rv, "generation": 1},
            "status": {"phase": "Submitted"}}


def test_kopf_body_is_used_only_when_it_is_our_last_write() -> None:
    controller.forget("ns", "a")
    body = kopf.Body(_copyjob("7"))
    assert controller.known_resource(body) is None  # nothing written yet: read it
    controller._wrote(_copyjob("7"))
    known = controller.known_resource(body)
    assert known == _copyjob("7")
    known["status"]["phase"] = "Running"  # a copy: kopf's body is untouched
    assert body["status"]["phase"] == "Submitted"
    assert controller.known_resource(kopf.Body(_copyjob("8"))) is None  # newer than our write
    assert controller.known_resource(kopf.Body(_copyjob("6"))) is None  # older than our write
    controller.forget("ns", "a")
    assert controller.known_resource(body) is None


def test_an_application_from_a_watch_event_is_taken_once() -> None:
    app = {"metadata": {"name": "app", "namespace": "ns"}, "status": {"applicationState": {"state": "COMPLETED"}}}
    controller.app_event("ns", "app", app)
    app["status"]["applicationState"]["state"] = "RUNNING"  # kept as a copy
    taken = controller._get_app("ns", "app")  # from the event: no API call
    assert taken is not None and taken["status"]["applicationState"]["state"] == "COMPLETED"
    assert ("ns", "app") not in controller._apps  # taken once; the next pass reads the API
    controller.app_event("ns", "app", app)
    controller.app_event("ns", "app", None)  # deleted: nothing kept, the pass reads the API
    assert ("ns", "app") not in controller._apps
