"""pytest fixtures for the real Kubernetes control plane (registered by the root conftest).

- ``kube`` (session): a real control plane (``harness.control_plane``: etcd,
  kube-apiserver 1.36, kube-controller-manager) on 127.0.0.1, with our three CRDs from
  ``crds/`` and the upstream SparkApplication CRD installed and Established.
  Attributes: ``url``, ``token`` (cluster-admin), ``ca`` (the server's certificate),
  ``kubeconfig`` (a file path for kubectl, helm, kopf and the kubernetes client) and
  ``client`` (a ``KubeClient`` as cluster-admin).
  With ``LADING_TEST_KUBECONFIG`` (a kubeconfig whose current user is a cluster-admin bearer
  token), the tests use that cluster instead, e.g. kind: nothing is started, our CRDs are
  installed there, the audit-log test skips (the log is the control plane's own file).
- ``operator_identity`` (session): the chart's operator ServiceAccount with the chart's
  RBAC applied (``harness.identities``): ``.kubeconfig`` for the operator process.
- ``standin_identity`` (session): spark-operator's controller account and rules, for the stand-in.
- ``kube_namespace`` (function): a fresh job namespace with the ``lading-spark``
  ServiceAccount, labelled ``pod-security.kubernetes.io/enforce=restricted`` as
  docs/install.md has it (the real PodSecurity admission then refuses a driver pod that does
  not meet "restricted"; ``LADING_TEST_POD_SECURITY`` sets another level, empty: no label),
  deleted (with everything in it, by the namespace controller) after the test.

Each pytest-xdist worker is its own session and starts its own control plane (~0.5 GB):
the end-to-end modules run a cluster-wide operator and the spark-operator stand-in,
which would act on the other worker's namespaces on a shared server.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import identities
from harness.client import ApiStatusError, KubeClient, wait_until
from harness.control_plane import ControlPlane, Endpoint, kubeconfig

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "crds"
UPSTREAM_CRDS = [
    REPO / "shared" / "upstream" / "sparkoperator.k8s.io_sparkapplications.yaml",
    REPO.parent / "shared" / "upstream" / "sparkoperator.k8s.io_sparkapplications.yaml",
]
CRD_API = "apiextensions.k8s.io/v1"
ENFORCE = "pod-security.kubernetes.io/enforce"


def job_namespace_labels() -> dict[str, str]:
    """The Pod Security label of a job namespace (``LADING_TEST_POD_SECURITY``, default restricted)."""
    level = os.environ.get("LADING_TEST_POD_SECURITY", "restricted")
    return {ENFORCE: level} if level else {}


def crd_files() -> list[Path]:
    """Our CRDs plus the upstream SparkApplication CRD (the first copy found)."""
    ours = sorted(CRD_DIR.glob("*.yaml"))
    upstream = [p for p in UPSTREAM_CRDS if p.exists()][:1]
    return ours + upstream


def load_crds(paths: list[Path]) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition document in ``paths``."""
    out = []
    for path in paths:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                out.append(doc)
    return out


def install_crds(client: KubeClient, crds: list[dict[str, Any]]) -> None:
    """Create (or replace) each CRD and wait until the server says Established."""
    for crd in crds:
        try:
            client.create(crd, "customresourcedefinitions")
        except ApiStatusError as exc:
            if exc.code != 409:
                raise
            current = client.get(CRD_API, "customresourcedefinitions", None, crd["metadata"]["name"])
            client.replace({**crd, "metadata": {**crd["metadata"],
                                                "resourceVersion": current["metadata"]["resourceVersion"]}},
                           "customresourcedefinitions")
    for crd in crds:
        client.wait_for(CRD_API, "customresourcedefinitions", None, crd["metadata"]["name"], established,
                        timeout=60, interval=0.1)


def established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def restricted_pod(namespace: str, name: str, container: str = "spark-kubernetes-driver") -> dict[str, Any]:
    """A minimal Pod that Pod Security "restricted" admits (a test's stand-in for a driver pod)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": container, "image": "x", "securityContext": {
                         "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}


class Kube:
    """What the ``kube`` fixture yields: a control plane and an admin's ways in."""

    def __init__(self, endpoint: Endpoint, kubeconfig_path: Path) -> None:
        self.endpoint = endpoint
        self.url = endpoint.url
        self.token = endpoint.token
        self.ca: str | bool = endpoint.ca or False  # the server's certificate; False: not verified
        self.kubeconfig = str(kubeconfig_path)
        self.client = KubeClient(endpoint.url, token=endpoint.token, ca=self.ca)

    def client_for(self, token: str) -> KubeClient:
        """A client that acts as whoever ``token`` belongs to (RBAC applies)."""
        return KubeClient(self.url, token=token, ca=self.ca)

    def write_kubeconfig(self, path: Path, token: str, user: str = "user") -> str:
        path.write_text(json.dumps(kubeconfig(self.endpoint, token, user), indent=1))
        return str(path)

    def service_account_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        """A token for ServiceAccount ``namespace/name`` (TokenRequest, as ``kubectl create token``)."""
        answer = self.client.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                                     {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                      "spec": {"expirationSeconds": seconds}})
        return str(answer["status"]["token"])

    def create_namespace(self, name: str | None = None, labels: dict[str, str] | None = None) -> str:
        name = name or f"t-{uuid.uuid4().hex[:10]}"
        self.client.create({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": name, "labels": dict(labels or {})}}, "namespaces")
        # The ServiceAccount admission refuses a Pod whose account does not exist yet; the
        # controller creates "default" shortly after the namespace, so do not race it.
        for account in ("default", "lading-spark"):
            try:
                self.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                    "metadata": {"name": account, "namespace": name}}, "serviceaccounts")
            except ApiStatusError as exc:
                if exc.code != 409:
                    raise
        return name

    def delete_namespace(self, name: str) -> None:
        try:
            self.client.delete("v1", "namespaces", None, name)
        except ApiStatusError as exc:
            if exc.code != 404:
                raise

    def secret_value(self, namespace: str, name: str, key: str) -> str:
        data = self.client.get("v1", "secrets", namespace, name).get("data") or {}
        return base64.b64decode(data[key]).decode()


@contextlib.contextmanager
def control_plane(directory: Path, crds: list[dict[str, Any]]) -> Iterator[Kube]:
    """A control plane of its own, with ``crds`` installed and Established, stopped on exit
    (for a test that needs a cluster without something the shared one has)."""
    with ControlPlane(directory).running() as endpoint:
        admin = directory / "admin.kubeconfig"
        admin.write_text(json.dumps(kubeconfig(endpoint, endpoint.token, "admin"), indent=1))
        kube = Kube(endpoint, admin)
        install_crds(kube.client, crds)
        wait_until(lambda: kube.client.get_or_none("v1", "serviceaccounts", "default", "default"),
                   lambda sa: sa is not None, timeout=60, interval=0.1, what="the default ServiceAccount")
        yield kube


def existing_cluster(path: Path, directory: Path) -> Kube:
    """The cluster of kubeconfig ``path`` (its current context; a bearer token and a CA file or
    data, or none): for ``LADING_TEST_KUBECONFIG``. Our CRDs are installed (or replaced) there."""
    config = yaml.safe_load(path.read_text())
    context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    ca = cluster.get("certificate-authority") or ""
    if cluster.get("certificate-authority-data"):
        ca = str(directory / "ca.crt")
        Path(ca).write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    if not user.get("token"):
        raise pytest.UsageError(f"LADING_TEST_KUBECONFIG={path}: its current user needs a bearer token "
                                "(kubectl create token ... for a cluster-admin ServiceAccount)")
    endpoint = Endpoint(url=cluster["server"], token=user["token"], ca=ca, directory=directory, pids={})
    admin = directory / "admin.kubeconfig"
    admin.write_text(json.dumps(kubeconfig(endpoint, endpoint.token, "admin"), indent=1))
    kube = Kube(endpoint, admin)
    install_crds(kube.client, load_crds(crd_files()))
    return kube


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """A real control plane with the CRDs installed, for the whole test session (or, with
    ``LADING_TEST_KUBECONFIG``, that cluster: nothing is started then)."""
    if os.environ.get("LADING_TEST_KUBECONFIG"):
        yield existing_cluster(Path(os.environ["LADING_TEST_KUBECONFIG"]), tmp_path_factory.mktemp("cluster"))
        return
    with control_plane(tmp_path_factory.mktemp("control-plane"), load_crds(crd_files())) as kube:
        yield kube


@pytest.fixture(scope="session")
def operator_identity(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> identities.Identity:
    """The operator's ServiceAccount, bound as the rendered chart binds it (never cluster-admin)."""
    return identities.install(kube, identities.operator_rbac(), identities.RELEASE_NAMESPACE, identities.RELEASE,
                              tmp_path_factory.mktemp("operator-identity"))


@pytest.fixture(scope="session")
def standin_identity(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> identities.Identity:
    """spark-operator's controller ServiceAccount with its chart's rules (and the kubelet's part)."""
    return identities.install(kube, identities.spark_operator_rbac(), identities.SPARK_OPERATOR_NAMESPACE,
                              identities.SPARK_OPERATOR_ACCOUNT, tmp_path_factory.mktemp("standin-identity"))


@pytest.fixture
def kube_namespace(kube: Kube) -> Iterator[str]:
    """A fresh job namespace (``lading-spark``, Pod Security "restricted") for one test."""
    name = kube.create_namespace(labels=job_namespace_labels())
    yield name
    kube.delete_namespace(name)


__all__ = ["Kube", "control_plane", "crd_files", "restricted_pod", "install_crds", "kube", "kube_namespace", "load_crds", "operator_identity",
           "standin_identity"]
