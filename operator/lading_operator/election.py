"""Leader election for two (or more) replicas: the thin shell around :mod:`lading_operator.lease`.

``python -m lading_operator`` with ``LADING_LEADER_ELECTION=on`` first waits to hold the
Lease ``LADING_LEASE_NAMESPACE/LADING_LEASE_NAME``, and only then starts kopf: a replica
that does not lead never watches, never reconciles, never writes. While it waits it
answers the liveness probe (and serves /metrics, started before the election). Once it
leads, a daemon thread renews the Lease every retry period; if a renewal has not
succeeded within the renew deadline, or another holder is named, the process exits at
once (status 1, as client-go's ``OnStoppedLeading`` does in Kubernetes' own controllers)
and the Deployment restarts it as a standby. A leader stopped cleanly (SIGTERM: an upgrade,
a drained node) releases the Lease once its last reconcile pass has ended, so the other
replica takes over at its next attempt. Nothing a SIGKILLed leader left behind needs
undoing: the new leader's reconcile loops resume every run from ``status`` (names are
deterministic, recorded before the create; docs/operator.md).

Environment: ``LADING_LEADER_ELECTION`` (``on``/``off``, default ``off``: one process, as
run by hand), ``LADING_LEASE_NAMESPACE`` (default: the pod's own namespace),
``LADING_LEASE_NAME`` (``lading-operator``), ``LADING_LEASE_DURATION`` (15 s),
``LADING_LEASE_RENEW_DEADLINE`` (10 s), ``LADING_LEASE_RETRY_PERIOD`` (2 s), and
``LADING_POD_NAME`` (the holder identity's prefix; default the host name).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.server
import logging
import os
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes.client.rest import ApiException

from lading_operator import k8s, lease

log = logging.getLogger(__name__)
POD_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
DEFAULT_LEASE_NAME = "lading-operator"


@dataclass(frozen=True)
class Config:
    namespace: str
    name: str
    identity: str
    timing: lease.Timing


def _seconds(variable: str, default: str) -> float:
    raw = os.environ.get(variable, default)
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ValueError(f"{variable}={raw!r}: expected a positive number of seconds")
    return value


def config_from_env() -> Config | None:
    """The election's settings, or ``None`` when it is off. A bad value raises ValueError
    naming the variable (the operator stops at start-up)."""
    switch = os.environ.get("LADING_LEADER_ELECTION", "off").strip().lower()
    if switch in ("off", ""):
        return None
    if switch != "on":
        raise ValueError(f"LADING_LEADER_ELECTION={switch!r}: expected on or off")
    namespace = os.environ.get("LADING_LEASE_NAMESPACE", "").strip()
    if not namespace and os.path.exists(POD_NAMESPACE_FILE):
        with open(POD_NAMESPACE_FILE) as f:
            namespace = f.read().strip()
    if not namespace:
        raise ValueError("LADING_LEASE_NAMESPACE is not set, and this is not a pod (no "
                         f"{POD_NAMESPACE_FILE}): say where the leader-election Lease lives")
    duration = _seconds("LADING_LEASE_DURATION", "15")
    if duration != int(duration):
        raise ValueError(f"LADING_LEASE_DURATION={duration:g}: expected whole seconds")
    timing = lease.Timing(int(duration), _seconds("LADING_LEASE_RENEW_DEADLINE", "10"),
                          _seconds("LADING_LEASE_RETRY_PERIOD", "2")).check()
    pod = os.environ.get("LADING_POD_NAME", "").strip() or socket.gethostname()
    return Config(namespace, os.environ.get("LADING_LEASE_NAME", "").strip() or DEFAULT_LEASE_NAME,
                  f"{pod}_{uuid.uuid4()}", timing)


class Elector:
    """One candidate: :meth:`acquire` blocks until it leads; :meth:`keep_leading` renews."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.observation: lease.Observation | None = None
        self.last_renewed = 0.0
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def attempt(self, timeout: float) -> tuple[bool, str]:
        """One read and, if the rules allow, one write. (held now?, why not)."""
        cfg = self.config
        sent = time.monotonic()
        try:
            current = k8s.get_lease(cfg.namespace, cfg.name, timeout)
        except (ApiException, OSError, ValueError) as exc:
            return False, f"reading the Lease failed: {_reason(exc)}"
        record = lease.record_of(current)
        now = time.monotonic()
        self.observation = lease.observe(self.observation, record, now)
        decision = lease.decide(record, self.observation, cfg.identity, now,
                                dt.datetime.now(dt.UTC), cfg.timing)
        if decision.action == "wait":
            return False, f"held by {decision.holder}"
        metadata: dict[str, str] = {"name": cfg.name, "namespace": cfg.namespace}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
                "spec": decision.spec}
        try:
            if decision.action == "create":
                written = k8s.create_lease(cfg.namespace, body, timeout)
            else:
                metadata["resourceVersion"] = decision.resource_version
                written = k8s.replace_lease(cfg.namespace, cfg.name, body, timeout)
        except (ApiException, OSError, ValueError) as exc:
            return False, f"{decision.action} of the Lease failed: {_reason(exc)}"
        self.observation = lease.observe(None, lease.record_of(written), time.monotonic())
        self.last_renewed = sent
        return True, ""

    def acquire(self) -> None:
        """Block until this candidate holds the Lease (a standby waits here)."""
        cfg = self.config
        last_reason = ""
        log.info("leader election: %s waits for Lease %s/%s", cfg.identity, cfg.namespace, cfg.name)
        while True:
            held, reason = self.attempt(cfg.timing.renew_deadline)
            if held:
                log.info("leader election: %s leads (Lease %s/%s)", cfg.identity, cfg.namespace, cfg.name)
                return
            if reason != last_reason:
                log.info("leader election: standby, %s", reason)
                last_reason = reason
            self.stopping.wait(cfg.timing.retry_period)

    def keep_leading(self, on_lost: Callable[[str], None]) -> threading.Thread:
        """Renew in a daemon thread; ``on_lost(why)`` when leadership is lost (it must stop
        the process: reconciling without the Lease is what election prevents)."""
        thread = threading.Thread(target=self._renew_loop, args=(on_lost,), name="lease-renewal", daemon=True)
        thread.start()
        self._thread = thread
        return thread

    def _renew_loop(self, on_lost: Callable[[str], None]) -> None:
        """Renew every retry period. After a failed renewal, try again every retry period
        but never past the renew deadline: a request still hanging is cut off at it (its
        timeout), and the deadline itself is checked on time, so the leader stops at its
        renew deadline, not a retry period later."""
        timing = self.config.timing
        wait, reason = timing.retry_period, "no answer"
        while not self.stopping.wait(wait):
            remaining = timing.renew_deadline - (time.monotonic() - self.last_renewed)
            if remaining > 0:
                held, reason = self.attempt(remaining)
                if held:
                    wait = timing.retry_period
                    continue
                if reason.startswith("held by"):
                    on_lost(f"the Lease is {reason}")
                    return
                log.warning("leader election: renewal failed: %s", reason)
            if lease.must_give_up(self.last_renewed, time.monotonic(), timing):
                on_lost(f"not renewed for {timing.renew_deadline:g}s ({reason})")
                return
            wait = min(timing.retry_period, timing.renew_deadline - (time.monotonic() - self.last_renewed))


    def release(self) -> None:
        """Stop renewing and hand the Lease back (call once nothing reconciles any more).
        Best effort: if it fails, the other replica takes over after the lease duration."""
        self.stopping.set()
        if self._thread is not None:
            self._thread.join()  # an attempt under way ends within its timeout
        cfg = self.config
        try:
            record = lease.record_of(k8s.get_lease(cfg.namespace, cfg.name, cfg.timing.retry_period))
            decision = lease.release(record, cfg.identity, dt.datetime.now(dt.UTC))
            if decision.action == "update":
                k8s.replace_lease(cfg.namespace, cfg.name, {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": cfg.name, "namespace": cfg.namespace,
                                 "resourceVersion": decision.resource_version},
                    "spec": decision.spec}, cfg.timing.retry_period)
                log.info("leader election: %s released Lease %s/%s", cfg.identity, cfg.namespace, cfg.name)
        except (ApiException, OSError, ValueError) as exc:
            log.warning("leader election: releasing the Lease failed (%s); the other replica takes over "
                        "after %ss", _reason(exc), cfg.timing.duration)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def exit_now(why: str) -> None:
    """Leadership lost: stop every reconcile at once, without a graceful shutdown that
    could still write (os._exit: no handler, no thread runs another line)."""
    log.critical("leader election: leadership lost, exiting: %s", why)
    logging.shutdown()
    os._exit(1)


@contextlib.contextmanager
def standby_liveness(endpoint: str | None) -> Iterator[None]:
    """Answer kopf's liveness URL (``http://host:port/path``) with 200 while on standby,
    so that the kubelet does not restart a replica for waiting; closed before kopf binds it."""
    if not endpoint:
        yield
        return
    url = urllib.parse.urlsplit(endpoint)
    path = url.path or "/"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            ok = self.path.split("?")[0] == path
            body = b'{"standby": true}' if ok else b""
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            return

    class Server(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in (url.hostname or "") else socket.AF_INET
        daemon_threads = True

    server = Server((url.hostname or "0.0.0.0", url.port or 80), Handler)
    thread = threading.Thread(target=server.serve_forever, name="standby-liveness", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
