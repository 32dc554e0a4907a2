"""Driver pods that ended, kept from their watch events (lading_operator.drivers)."""

from __future__ import annotations

import threading
import time
from typing import Any

from lading_operator import drivers, result
from lading_operator.drivers import pod_event, take_ended


def _pod(state: dict[str, Any], owner: str = "app-uid", sidecar: dict[str, Any] | None = None) -> dict[str, Any]:
    statuses = [{"name": result.DRIVER_CONTAINER, "state": state}]
    if sidecar is not None:
        statuses.append({"name": "sidecar", "state": sidecar})
    return {"metadata": {"name": "a-driver", "namespace": "ns", "uid": "pod-uid",
                         "ownerReferences": [{"kind": "SparkApplication", "uid": owner}]},
            "spec": {"containers": [{"name": result.DRIVER_CONTAINER, "env": [{"name": "X", "value": "y"}]}]},
            "status": {"phase": "Succeeded", "containerStatuses": statuses}}


ENDED = {"terminated": {"exitCode": 0, "message": '{"rows": 3}'}}


def test_an_ended_driver_is_taken_once_by_its_own_application() -> None:
    drivers.forget_all()
    pod_event("ns", "a-driver", _pod(ENDED))
    assert take_ended("ns", "a-driver", "another-app") is None  # a namesake's run: not this one's
    pod = take_ended("ns", "a-driver", "app-uid")
    assert pod is not None and result.read_result(pod) == {"rows": 3}
    assert "spec" not in pod  # only what the result is read from is kept
    assert take_ended("ns", "a-driver", "app-uid") is None  # taken: the next pass reads the pod


def test_a_driver_still_running_or_deleted_is_not_kept() -> None:
    drivers.forget_all()
    pod_event("ns", "a-driver", _pod({"running": {}}))
    assert take_ended("ns", "a-driver", "app-uid") is None
    pod_event("ns", "a-driver", _pod(ENDED, sidecar={"running": {}}))  # not every container ended yet
    assert take_ended("ns", "a-driver", "app-uid") is None
    pod_event("ns", "a-driver", _pod(ENDED))
    pod_event("ns", "a-driver", None)  # deleted
    assert take_ended("ns", "a-driver", "app-uid") is None


def test_the_oldest_are_dropped_past_the_bound(monkeypatch: Any) -> None:
    drivers.forget_all()
    monkeypatch.setattr(drivers, "KEPT", 2)
    for name in ("p1", "p2", "p3"):
        pod_event("ns", name, _pod(ENDED))
    assert take_ended("ns", "p1", "app-uid") is None  # the pass reads it from the API instead
    assert take_ended("ns", "p3", "app-uid") is not None


def test_a_pass_waits_a_moment_for_an_event_the_watch_has_not_delivered(monkeypatch: Any) -> None:
    """The application's end can arrive before its driver's event: while the pods' watch runs, a
    pass waits for it (up to its wait) instead of reading the pod; without the watch it does not."""
    drivers.forget_all()
    monkeypatch.setattr(drivers, "watching", True)
    later = threading.Timer(0.2, pod_event, ("ns", "a-driver", _pod(ENDED)))
    later.start()
    started = time.monotonic()
    pod = take_ended("ns", "a-driver", "app-uid", wait=30.0)
    later.join()
    assert pod is not None and result.read_result(pod) == {"rows": 3}
    assert time.monotonic() - started < 30.0  # woken by the event, not by the deadline
    # a namesake's event does not end the wait early with the wrong pod; the deadline ends it
    pod_event("ns", "a-driver", _pod(ENDED, owner="another-app"))
    assert take_ended("ns", "a-driver", "app-uid", wait=0.3) is None
    monkeypatch.setattr(drivers, "watching", False)  # no watch: no event can come, no wait
    assert take_ended("ns", "b-driver", "app-uid", wait=3600.0) is None
