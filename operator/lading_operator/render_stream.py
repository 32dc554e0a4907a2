"""What a continuous kind's (StreamCopy's) SparkApplication adds to the common rendering (pure).

A stream's application runs until lading stops it, so on top of what
:func:`lading_operator.render.build_sparkapplication` renders for every kind:

- ``restartPolicy: OnFailure`` with retry intervals: spark-operator reruns a
  driver that crashed, was evicted or lost its node, waiting ``interval x
  submissions`` since the last submission (its linear backoff: a driver that ran
  for hours comes back at once, one that crashes at start waits longer each
  time). A driver that stopped on purpose (too many bad rows, lost offsets,
  another writer) exits 0, so it is not rerun: it stays stopped until its spec
  changes. When spark-operator gives up (``FAILED``), the operator starts the
  next attempt as a new application, so a budget spent over months of evictions
  never stops a stream for good;
- the progress endpoint: the driver serves ``GET /progress`` on port 8090
  (``LADING_PROGRESS_PORT``), declared as the driver pod's port ``progress``;
  the operator reads the address from the driver pod (its IP and that port);
- the Kafka credentials Secret (``source.kafka.secretRef``) mounted at
  ``/etc/lading/kafka`` on the driver and every executor (spark-operator's
  ``secrets``, i.e. ``spark.kubernetes.{driver,executor}.secrets.*``), one file
  per consumer property, with ``LADING_KAFKA_PROPERTIES_DIR`` naming it. The
  operator never reads the Secret.
"""

from __future__ import annotations

import copy
import ipaddress
from collections.abc import Mapping
from typing import Any

from lading_spec.streamcopy import KAFKA_PROPERTIES_DIR, KAFKA_PROPERTIES_DIR_ENV
from lading_spec.streamprogress import PROGRESS_PORT, PROGRESS_PORT_ENV

PROGRESS_PORT_NAME = "progress"
RESTART_POLICY: dict[str, Any] = {
    "type": "OnFailure",
    # spark-operator counts executions over the application's life, so evictions add up: after
    # this many the application ends FAILED and the operator starts a new one (a fresh budget).
    "onFailureRetries": 20,
    "onFailureRetryInterval": 10,          # seconds x submissions so far, since the last submission
    "onSubmissionFailureRetries": 5,
    "onSubmissionFailureRetryInterval": 20,
}


def kafka_secret(spec: Mapping[str, Any]) -> str | None:
    """The Secret named by ``source.kafka.secretRef`` (None for a files source or no Secret)."""
    kafka = (spec.get("source") or {}).get("kafka") or {}
    name = (kafka.get("secretRef") or {}).get("name")
    return str(name) if name else None


def _add_env(pod: dict[str, Any], name: str, value: str) -> None:
    pod["env"] = [e for e in pod.get("env") or [] if e.get("name") != name] + [{"name": name, "value": value}]


def continuous_spec(app_spec: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """``app_spec`` (a rendered SparkApplication spec) with what a stream's application needs."""
    out = copy.deepcopy(dict(app_spec))
    out["restartPolicy"] = dict(RESTART_POLICY)
    driver, executor = out["driver"], out["executor"]
    driver["ports"] = [*(driver.get("ports") or []),
                       {"name": PROGRESS_PORT_NAME, "containerPort": PROGRESS_PORT, "protocol": "TCP"}]
    _add_env(driver, PROGRESS_PORT_ENV, str(PROGRESS_PORT))
    secret = kafka_secret(spec)
    if secret:
        for pod in (driver, executor):
            pod["secrets"] = [*(pod.get("secrets") or []),
                              {"name": secret, "path": KAFKA_PROPERTIES_DIR, "secretType": "Generic"}]
            _add_env(pod, KAFKA_PROPERTIES_DIR_ENV, KAFKA_PROPERTIES_DIR)
    return out


def progress_address(pod: Mapping[str, Any] | None) -> str | None:
    """``http://<pod IP>:<port>`` of a driver pod's progress endpoint (None until it has an IP).

    The port is the pod's container port named ``progress`` (8090 as rendered; a
    stand-in that runs every driver on one host declares each its own).
    """
    status = (pod or {}).get("status") or {}
    try:
        ip = str(ipaddress.ip_address(str(status.get("podIP") or "")))
    except ValueError:
        return None
    port = PROGRESS_PORT
    for container in ((pod or {}).get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == PROGRESS_PORT_NAME and isinstance(declared.get("containerPort"), int):
                port = int(declared["containerPort"])
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}"
