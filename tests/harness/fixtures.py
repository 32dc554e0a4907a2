"""pytest fixtures for the Kubernetes API emulator (registered by the root conftest).

- ``kube`` (session): a running ``KubeServer`` on 127.0.0.1 serving our three CRDs
  from ``crds/``, the upstream SparkApplication CRD, and the built-in core kinds;
  every write of a custom resource is admitted by ``crd-check --serve``
  (``harness.admission``), the API server's own code.
  Attributes: ``url``, ``kubeconfig`` (a file path for kubectl, kopf and the
  kubernetes client), ``client`` (a ``KubeClient``), ``store`` (inspect it only via
  ``kube.call(fn)``, which runs on the server's thread).
- ``kube_namespace`` (function): a fresh namespace with the ``lading-spark``
  ServiceAccount, deleted (with everything in it) after the test.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.client import KubeClient
from harness.kube import KubeServer, load_crds

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "crds"
UPSTREAM_CRDS = [
    REPO / "shared" / "upstream" / "sparkoperator.k8s.io_sparkapplications.yaml",
    REPO.parent / "shared" / "upstream" / "sparkoperator.k8s.io_sparkapplications.yaml",
]


def crd_files() -> list[Path]:
    """Our CRDs plus the upstream SparkApplication CRD (the first copy found)."""
    ours = sorted(CRD_DIR.glob("*.yaml"))
    upstream = [p for p in UPSTREAM_CRDS if p.exists()][:1]
    return ours + upstream


class Kube:
    """What the ``kube`` fixture yields."""

    def __init__(self, server: KubeServer, kubeconfig: Path):
        self.server = server
        self.url = server.url
        self.kubeconfig = str(kubeconfig)
        self.client = KubeClient(server.url)

    @property
    def store(self):  # type: ignore[no-untyped-def]
        return self.server.store

    def call(self, fn, *args):  # type: ignore[no-untyped-def]
        return self.server.call(fn, *args)

    def create_namespace(self, name: str | None = None) -> str:
        name = name or f"t-{uuid.uuid4().hex[:10]}"
        self.client.create({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": name}}, "namespaces")
        self.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": "lading-spark", "namespace": name}},
                           "serviceaccounts")
        return name

    def delete_namespace(self, name: str) -> None:
        self.client.delete("v1", "namespaces", None, name)


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """The Kubernetes API emulator, serving for the whole test session."""
    server = KubeServer(load_crds(crd_files())).start()
    kubeconfig = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")
    try:
        yield Kube(server, kubeconfig)
    finally:
        server.stop()


@pytest.fixture
def kube_namespace(kube: Kube) -> Iterator[str]:
    """A fresh namespace (with the ``lading-spark`` ServiceAccount) for one test."""
    name = kube.create_namespace()
    yield name
    kube.delete_namespace(name)
