"""End-to-end fixtures: the operator as a process against the real control plane, the
spark-operator stand-in running real Spark apps, and an S3 server (moto).

The operator runs as ``python -m lading_operator`` (as in its container), so a
test can kill and restart it. Everything talks HTTP on 127.0.0.1.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.ports import free_ports

from harness.client import KubeClient, wait_until
from harness.fixtures import Kube
from harness.identities import Identity
from harness.spark_operator import SparkOperatorStandIn

REPO = Path(__file__).resolve().parents[2]
API = "lading.io/v1alpha1"


BIND_ATTEMPTS = 3
"""Starts of the operator on new ports when one it was given was taken before it bound it (a port
free when chosen can be any process's by then: the suite's servers and clients run beside it)."""


class OperatorProcess:
    """``python -m lading_operator`` against the API server; start, kill, restart."""

    def __init__(self, kubeconfig: str, log_path: Path, namespaces: str = "",
                 env: dict[str, str] | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.namespaces = namespaces
        self.env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.health_port = 0
        self.metrics_port = 0

    def start(self) -> OperatorProcess:
        for attempt in range(1, BIND_ATTEMPTS + 1):
            logged = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                return self._start()
            except RuntimeError:
                since = self.log_path.read_bytes()[logged:].decode(errors="replace") if self.log_path.exists() else ""
                if attempt == BIND_ATTEMPTS or "Address already in use" not in since:
                    raise
        raise AssertionError("unreachable")

    def _start(self) -> OperatorProcess:
        self.health_port, self.metrics_port = free_ports(2)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update({
            "KUBECONFIG": self.kubeconfig,
            "LADING_NAMESPACES": self.namespaces,
            "LADING_METRICS_PORT": str(self.metrics_port),
            "LADING_LIVENESS": f"http://127.0.0.1:{self.health_port}/healthz",
            "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("operator", "spark_apps", ".")),
            "PYTHONUNBUFFERED": "1",
            **self.env,
        })
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen([sys.executable, "-m", "lading_operator"], env=env,
                                        stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        wait_until(self._healthy, bool, timeout=60, interval=0.2, what="the operator's liveness endpoint")
        return self

    def _healthy(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"the operator exited with {self.process.returncode}:\n{self.log()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, as when a node dies."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:] if self.log_path.exists() else ""


# Module scope, not session: the control plane is shared by the whole test session, and a
# cluster-wide operator or stand-in left running would act on other tests' objects.
@pytest.fixture(scope="module")
def standin(kube: Kube, standin_identity: Identity,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkOperatorStandIn]:
    with SparkOperatorStandIn(kube.url, token=standin_identity.token, ca=kube.ca, mode="spark",
                              log_dir=tmp_path_factory.mktemp("drivers")) as s:
        yield s


@pytest.fixture(scope="module")
def operator_process(operator_identity: Identity,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """The operator as the chart's ServiceAccount, with the chart's RBAC (never cluster-admin)."""
    op = OperatorProcess(operator_identity.kubeconfig, tmp_path_factory.mktemp("operator") / "operator.log").start()
    yield op
    op.stop()


@pytest.fixture(scope="module")
def plain_namespace(kube: Kube) -> Iterator[str]:
    """A namespace without Pod Security labels (for a module): the instant stand-in's driver pods are bare."""
    name = kube.create_namespace()
    yield name
    kube.delete_namespace(name)


@pytest.fixture(scope="module")
def instant(kube: Kube, standin_identity: Identity) -> Iterator[SparkOperatorStandIn]:
    """The spark-operator stand-in in instant mode (no Spark: each application completes at once), for a module."""
    with SparkOperatorStandIn(kube.url, token=standin_identity.token, ca=kube.ca, mode="instant") as s:
        yield s


@pytest.fixture
def s3_secret(kube: Kube, kube_namespace: str, s3_endpoint: str) -> str:
    """A Secret with the S3 credentials, as a user would create it."""
    data = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    kube.client.create({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "s3-credentials", "namespace": kube_namespace},
                        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}},
                       "secrets")
    return "s3-credentials"


def copyjob(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "CopyJob", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


def wait_phase(client: KubeClient, namespace: str, name: str, phases: set[str] | str,
               timeout: float = 180) -> dict[str, Any]:
    wanted = {phases} if isinstance(phases, str) else phases
    obj = client.wait_for(API, "copyjobs", namespace, name,
                          lambda o: o is not None and (o.get("status") or {}).get("phase") in wanted,
                          timeout=timeout, interval=0.2)
    assert obj is not None
    return obj


def apps_of(client: KubeClient, namespace: str) -> list[dict[str, Any]]:
    return client.list("sparkoperator.k8s.io/v1beta2", "sparkapplications", namespace)


@pytest.fixture
def make_copyjob(kube: Kube, kube_namespace: str) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    def make(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return kube.client.create(copyjob(name, kube_namespace, spec), "copyjobs")

    return make


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def ensure_stopped(deadline_seconds: float, check: Callable[[], bool], what: str) -> None:
    wait_until(check, bool, timeout=deadline_seconds, interval=0.2, what=what)


__all__ = ["OperatorProcess", "apps_of", "conditions", "copyjob", "ensure_stopped", "time", "wait_phase"]
