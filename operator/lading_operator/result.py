"""A run's result, read from the driver pod's termination message (pure).

The Spark app writes its CopyResponse JSON to ``/dev/termination-log``; the
kubelet copies it into ``status.containerStatuses[].state.terminated.message``.
That is how a result reaches status without anyone reading logs
(kubeflow/spark-operator#1361, #2184).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lading_operator import names
from lading_spec.job import parse_result

DRIVER_CONTAINER = "spark-kubernetes-driver"


def driver_pod_name(app: Mapping[str, Any]) -> str:
    """``status.driverInfo.podName``, else spark-operator's default ``<app>-driver``."""
    info = (app.get("status") or {}).get("driverInfo") or {}
    return str(info.get("podName") or names.driver_pod_name(str(app["metadata"]["name"])))


def _containers(pod: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """Container statuses, the driver container first."""
    statuses = list(((pod or {}).get("status") or {}).get("containerStatuses") or [])
    statuses.sort(key=lambda s: s.get("name") != DRIVER_CONTAINER)
    return statuses


def termination_message(pod: Mapping[str, Any] | None) -> str | None:
    """The driver container's termination message (the driver container first)."""
    for container in _containers(pod):
        for key in ("state", "lastState"):
            terminated = ((container.get(key) or {}).get("terminated")) or {}
            if terminated.get("message"):
                return str(terminated["message"])
    return None


def exit_code(pod: Mapping[str, Any] | None) -> int | None:
    for container in _containers(pod):
        terminated = ((container.get("state") or {}).get("terminated")) or {}
        if "exitCode" in terminated:
            return int(terminated["exitCode"])
    return None


def read_result(pod: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The CopyResponse the job wrote, or ``None`` when there is none (yet)."""
    message = termination_message(pod)
    return parse_result(message) if message else None
