"""Prometheus metrics for the operator: what exists, what ran, what failed.

The operator calls four small functions as it reconciles; this module turns them
into metrics on its own registry and serves them over HTTP
(``start_metrics_server``). Names and labels are documented in docs/metrics.md,
and a test scrapes every one of them.

- ``lading_resources{kind,phase}``: resources of a kind in a phase right now. It
  is computed at scrape time from the last phase seen per resource, so a
  resource counts in exactly one phase and ``forget`` (on deletion) removes it.
  Every phase of every kind is exported, with 0 when empty, so alerts such as
  ``lading_resources{phase="Failed"} > 0`` have a series to watch.
- ``lading_rows_total{kind}``, ``lading_bytes_total{kind}``: rows and bytes copied.
- ``lading_run_duration_seconds{kind,outcome}``: a histogram of run durations
  (its ``_count`` is the number of runs per outcome).
- ``lading_reconcile_errors_total{kind}``: reconcile handler errors.
- ``lading_runs_queued``: resources waiting for a run slot of their namespace
  (:mod:`lading_operator.runslots`), at scrape time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lading_operator import kinds, runslots
from lading_spec.version import VERSION

KINDS = kinds.NAMES
PHASES: dict[str, tuple[str, ...]] = {kind.name: kind.phases for kind in kinds.ALL}
OUTCOMES = ("succeeded", "failed", "cancelled")
# Copies run from seconds to hours: buckets from 1 s to 6 h.
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 21600)

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)


class _PhaseCollector(Collector):
    """``lading_resources``: counts the last phase seen per resource at scrape time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._phases: dict[tuple[str, str, str], str] = {}

    def set(self, kind: str, namespace: str, name: str, phase: str) -> None:
        with self._lock:
            self._phases[(kind, namespace, name)] = phase

    def forget(self, kind: str, namespace: str, name: str) -> None:
        with self._lock:
            self._phases.pop((kind, namespace, name), None)

    def counts(self) -> dict[tuple[str, str], int]:
        """(kind, phase) → number of resources, every known phase included."""
        counts = {(kind, phase): 0 for kind, phases in PHASES.items() for phase in phases}
        with self._lock:
            for (kind, _ns, _name), phase in self._phases.items():
                counts[(kind, phase)] = counts.get((kind, phase), 0) + 1
        return counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "lading_resources",
            "lading resources by kind and current status.phase",
            labels=["kind", "phase"],
        )
        for (kind, phase), n in sorted(self.counts().items()):
            family.add_metric([kind, phase], n)
        yield family

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "lading_resources", "lading resources by kind and current status.phase",
            labels=["kind", "phase"],
        )


_PHASES = _PhaseCollector()
REGISTRY.register(_PHASES)


class _QueuedCollector(Collector):
    """``lading_runs_queued``: the resources waiting for a run slot, read at scrape time."""

    HELP = "Resources waiting for a free run slot of their namespace (policy.limits runs)"

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("lading_runs_queued", self.HELP, value=runslots.SLOTS.waiting_count())

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("lading_runs_queued", self.HELP)


REGISTRY.register(_QueuedCollector())

ROWS = Counter(
    "lading_rows", "Rows copied by finished runs", ["kind"], registry=REGISTRY,
)
BYTES = Counter(
    "lading_bytes", "Bytes written by finished runs", ["kind"], registry=REGISTRY,
)
RUN_SECONDS = Histogram(
    "lading_run_duration_seconds",
    "Wall-clock duration of finished runs, from submission to completion",
    ["kind", "outcome"],
    buckets=DURATION_BUCKETS,
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "lading_reconcile_errors",
    "Reconcile handler errors (each retry of a failing handler counts)",
    ["kind"],
    registry=REGISTRY,
)
BUILD_INFO = Gauge(
    "lading_build_info", "Always 1; the operator's version as a label", ["version"],
    registry=REGISTRY,
)

for _kind in KINDS:
    ROWS.labels(_kind)
    BYTES.labels(_kind)
    RECONCILE_ERRORS.labels(_kind)
    for _outcome in OUTCOMES:
        RUN_SECONDS.labels(_kind, _outcome)

_server: WSGIServer | None = None


def _version() -> str:
    """The version in the source (the image has no package metadata for lading)."""
    return VERSION


BUILD_INFO.labels(_version()).set(1)


def start_metrics_server(port: int, addr: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` on ``addr:port`` in a daemon thread (once per process)."""
    global _server
    if _server is not None:
        return
    _server, _thread = start_http_server(port, addr=addr, registry=REGISTRY)


def bound_port() -> int | None:
    """The port the metrics server listens on (useful when started with port 0)."""
    return None if _server is None else int(_server.server_port)


def stop_metrics_server() -> None:
    """Stop the server started by :func:`start_metrics_server` (tests, shutdown)."""
    global _server
    if _server is not None:
        _server.shutdown()
        _server.server_close()
        _server = None


def observe_phase(kind: str, namespace: str, name: str, phase: str) -> None:
    """Record the phase a resource is in now; it replaces the one seen before."""
    if phase:
        _PHASES.set(kind, namespace, name, phase)


def record_run(kind: str, outcome: str, seconds: float, rows: int, bytes_: int) -> None:
    """Count one finished run: its duration by outcome, and the rows and bytes it copied.

    ``outcome`` is ``succeeded``, ``failed`` or ``cancelled``. Negative values
    (a clock step, a missing count) are recorded as 0 rather than failing the
    reconcile that reports them.
    """
    RUN_SECONDS.labels(kind, outcome).observe(max(0.0, float(seconds)))
    ROWS.labels(kind).inc(max(0, int(rows)))
    BYTES.labels(kind).inc(max(0, int(bytes_)))


def record_reconcile_error(kind: str) -> None:
    """Count one reconcile error of ``kind``."""
    RECONCILE_ERRORS.labels(kind).inc()


def forget(kind: str, namespace: str, name: str) -> None:
    """Drop a deleted resource from ``lading_resources``."""
    _PHASES.forget(kind, namespace, name)


def resource_counts() -> dict[tuple[str, str], int]:
    """(kind, phase) → resources now; what ``lading_resources`` exports."""
    return _PHASES.counts()
