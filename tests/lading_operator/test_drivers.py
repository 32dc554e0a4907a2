"""Driver pods that ended, kept from their watch events (lading_operator.drivers)."""

from __future__ import annotations

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
