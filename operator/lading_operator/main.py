"""Operator start-up: kopf settings and the entry point ``python -m lading_operator``.

Environment (see docs/operator.md): ``LADING_NAMESPACES`` (comma-separated; empty
= cluster-wide), ``LADING_METRICS_PORT`` (9090; ``off`` disables),
``LADING_METRICS_ADDRESS`` (the address /metrics binds, ``0.0.0.0``),
``LADING_POLICY_FILE`` (the allow-lists; unset: :data:`lading_operator.policy.DEFAULT_POLICY`), ``LADING_LIVENESS``
(``http://0.0.0.0:8080/healthz``; ``off`` disables), ``LADING_WORKERS`` (threads
for API calls, 16), ``LADING_START_TIMEOUT`` (seconds, 120; :func:`lading_operator.controller.start_timeout`);
and what every SparkApplication gets, ``LADING_SPARK_IMAGE``,
``LADING_SPARK_IMAGE_PULL_POLICY``, ``LADING_SPARK_IMAGE_PULL_SECRETS``,
``LADING_SPARK_SERVICE_ACCOUNT`` (:func:`lading_operator.render.installation_from_env`;
a bad value stops the operator at start-up); ``LADING_LEADER_ELECTION`` and the Lease's
settings (:mod:`lading_operator.election`: with two replicas, only the Lease's holder runs kopf).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import kopf

from lading_operator import (
    controller,
    drivers,
    election,
    metrics,
    netpol,
    persistence,
    policy,
    render,
)
from lading_operator.handlers import resources  # registers the handlers on import
from lading_spec import controls

# No handler needs a finalizer (see handlers/resources.py); kopf removes this one,
# left on resources by an older release, because it is named here.
FINALIZER = "lading.io/finalizer"
DEFAULT_LIVENESS = "http://0.0.0.0:8080/healthz"


def namespaces_from_env() -> list[str]:
    return [n.strip() for n in os.environ.get("LADING_NAMESPACES", "").split(",") if n.strip()]


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="lading.io")
    settings.persistence.diffbase_storage = persistence.DiffBaseStorage(
        prefix="lading.io", key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.peering.standalone = True
    # Never watch CRDs or Namespaces, in either mode: the chart grants neither (docs/security.md).
    # Resources are discovered once at start-up, so install spark-operator's CRDs first.
    settings.scanning.disabled = True
    settings.execution.max_workers = int(os.environ.get("LADING_WORKERS", "16"))
    # Only the driver pods of lading's runs, selected by the API server (drivers.py).
    settings.watching.label_selectors["v1", "pods"] = drivers.SELECTOR
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    controller.set_policy(policy.load_policy(os.environ.get("LADING_POLICY_FILE")))
    install = render.installation_from_env()  # fails closed on a bad value, before any reconcile
    timeout = controller.start_timeout()  # likewise
    logging.getLogger(__name__).info(
        "SparkApplications: image %s, pull policy %s, pull secrets %s, service account %s",
        install.image, install.image_pull_policy or "(the cluster's default)",
        ", ".join(install.image_pull_secrets) or "none", install.service_account)
    logging.getLogger(__name__).info("a SparkApplication not started after %gs gets a condition saying why", timeout)
    port = os.environ.get("LADING_METRICS_PORT", "9090")
    if port.lower() != "off":
        metrics.start_metrics_server(int(port), os.environ.get("LADING_METRICS_ADDRESS") or "0.0.0.0")


class EscapeControls(logging.Filter):
    """Every log record's message with its control characters escaped, newlines too (one record,
    one line; :mod:`lading_spec.controls`): a message may quote a tenant's text (an error, a name)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        escaped = controls.escape_controls(message)
        if escaped != message:
            record.msg, record.args = escaped, None
        return True


def escape_log_controls() -> None:
    """Install :class:`EscapeControls` on every root handler (what the operator's log prints) and
    on ``kopf.objects``, whose records kopf also posts as Events (``settings.posting``)."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(EscapeControls())
    logging.getLogger("kopf.objects").addFilter(EscapeControls())


def run() -> None:
    logging.basicConfig(level=os.environ.get("LADING_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    escape_log_controls()
    netpol.settings_from_env()  # a malformed LADING_NETWORK_POLICY stops the start, not the first run
    namespaces = namespaces_from_env()
    liveness = os.environ.get("LADING_LIVENESS", DEFAULT_LIVENESS)
    endpoint = None if liveness.lower() == "off" else liveness
    leading = election.config_from_env()  # None: no election, this process is the only one
    elector = None if leading is None else election.Elector(leading)
    if elector is not None:
        # A standby serves /metrics and /healthz, and nothing else: no watch, no reconcile.
        port = os.environ.get("LADING_METRICS_PORT", "9090")
        if port.lower() != "off":
            metrics.start_metrics_server(int(port), os.environ.get("LADING_METRICS_ADDRESS") or "0.0.0.0")
        with election.standby_liveness(endpoint):
            elector.acquire()
        elector.keep_leading(on_lost=election.exit_now)
    # kopf's own peering stays off (standalone): the Lease above decides who runs.
    kopf.run(
        standalone=True,
        namespaces=namespaces,
        clusterwide=not namespaces,
        liveness_endpoint=endpoint,
    )
    if elector is not None:
        resources.wait_for_passes()  # nothing writes any more: hand the Lease over now
        elector.release()
