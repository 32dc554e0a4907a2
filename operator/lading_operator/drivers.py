"""Driver pods that ended, as their watch events carried them: a run's result without a GET.

A run's result is its driver container's termination message (:mod:`lading_operator.result`);
spark-operator copies only the exit code and reason into the SparkApplication
(``status.applicationState.errorMessage``), not the message. The operator watches the driver
pods of lading's runs (label selector ``spark-role=driver`` and ``lading.io/kind``, server-side:
one watch for all runs) and keeps, from each event whose driver container has terminated, the
few fields the result is read from. The pass that ends a run takes it (once) instead of reading
the pod; whatever it does not find here (the pod's event not seen yet, an operator restart, a
pod evicted from the bounded cache) it reads from the API as before. The SparkApplications' watch
and the pods' are two streams: an application's end can arrive first (spark-operator writes it
after the driver ended), so a pass waits up to ``EVENT_WAIT`` seconds for the pod's event before
it reads the pod, while the pods' watch runs (``watching``, set at the operator's startup).

A terminated container of a pod that never restarts it (a driver's ``restartPolicy: Never``) is
final, so what is kept cannot go stale; the pod's uid and its owner (the SparkApplication's uid)
are checked, so a namesake's pod is never taken for another run's.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from lading_operator import render

SPARK_ROLE = "spark-role"
# Server-side label selector of the watch (kopf: settings.watching.label_selectors).
SELECTOR = f"{SPARK_ROLE}=driver,{render.LABEL_KIND}"
KEPT = 10_000  # ended driver pods not yet taken by a pass (oldest dropped first)

EVENT_WAIT = 2.0  # seconds a pass waits for an ended driver's event the watch has not delivered yet

_ended: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
_lock = threading.Lock()
_arrived = threading.Condition(_lock)
watching = False  # the pods' watch runs (kopf started it): an event not seen yet may still come


def _terminated(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The container statuses whose current state is terminated (the driver's, the sidecars')."""
    statuses = ((pod.get("status") or {}).get("containerStatuses") or [])
    return [copy.deepcopy(dict(s)) for s in statuses if ((s.get("state") or {}).get("terminated"))]


def pod_event(namespace: str, name: str, pod: Mapping[str, Any] | None) -> None:
    """A driver pod's watch event (``None``: it was deleted)."""
    with _arrived:
        _ended.pop((namespace, name), None)
        if pod is None:
            return
        statuses = _terminated(pod)
        if not statuses or len(statuses) != len((pod.get("status") or {}).get("containerStatuses") or []):
            return  # not ended yet
        meta = pod.get("metadata") or {}
        _ended[(namespace, name)] = {
            "metadata": {"name": name, "namespace": namespace, "uid": meta.get("uid"),
                         "ownerReferences": copy.deepcopy(meta.get("ownerReferences") or [])},
            "status": {"phase": (pod.get("status") or {}).get("phase"), "containerStatuses": statuses},
        }
        while len(_ended) > KEPT:
            _ended.popitem(last=False)
        _arrived.notify_all()


def take_ended(namespace: str, name: str, owner_uid: str, wait: float = 0.0) -> dict[str, Any] | None:
    """The ended driver pod ``name`` of the SparkApplication ``owner_uid`` (once), else ``None``
    after waiting up to ``wait`` seconds for its event (only while the pods' watch runs)."""
    deadline = time.monotonic() + (wait if watching else 0.0)
    with _arrived:
        while True:
            pod = _ended.get((namespace, name))
            if pod is not None and owner_uid and any(
                    ref.get("uid") == owner_uid for ref in pod["metadata"]["ownerReferences"]):
                del _ended[(namespace, name)]
                return pod
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            _arrived.wait(left)


def forget_all() -> None:
    with _lock:
        _ended.clear()
