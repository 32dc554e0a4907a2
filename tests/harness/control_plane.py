"""A real Kubernetes control plane on 127.0.0.1 for tests (envtest's idea, never shipped).

etcd 3.6, kube-apiserver 1.36 and kube-controller-manager 1.36 (garbage collector,
namespace lifecycle, service accounts), started by the shared launcher
(``shared/tools/kube/control-plane``, see its README) with authorization Node,RBAC and the
default admission plugins (PodSecurity among them). There is no kubelet and no scheduler:
Pods are stored and admitted, never run (``harness.spark_operator`` plays the kubelet).

The binaries come from, in order:

1. ``$LADING_KUBE_ASSETS``, a directory holding ``etcd``, ``kube-apiserver`` and
   ``kube-controller-manager``;
2. ``$KUBEBUILDER_ASSETS`` (envtest's convention), the same three;
3. ``shared/tools/kube`` beside (or inside) the checkout, unpacked once per machine into
   ``$XDG_CACHE_HOME/lading/kube-<key>`` (default ``~/.cache``), where ``<key>`` names the
   packed files, under a file lock, so that concurrent sessions unpack it once.

:class:`ControlPlane` starts one and stops it; if the process that started it dies, the
launcher is sent SIGTERM by the kernel (``PR_SET_PDEATHSIG``) and stops all three.

The API server keeps an audit log (``audit.log``, one JSON event per line) of every request
made by a ServiceAccount (the operator, the stand-in, tenants as test users): who asked
what, with which verb, on which resource. :func:`audit_requests` reads it, so a test can
count an identity's requests (the kube-controller-manager, as cluster-admin, is not logged).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
READY_SECONDS = 180.0
# The launcher's controllers, plus the aggregation of ClusterRoles into view/edit/admin
# (the chart's lading-view and lading-edit reach tenants that way, as on a cluster).
CONTROLLERS = ("garbagecollector,namespace,serviceaccount,serviceaccount-token,root-ca-cert-publisher,"
               "clusterrole-aggregation")
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "userGroups": ["system:serviceaccounts"]}, {"level": "None"}],
}


def kube_tools() -> Path:
    """``shared/tools/kube`` inside the checkout, else beside it (CI copies shared/ beside the clone)."""
    for base in (REPO / "shared", REPO.parent / "shared"):
        path = base / "tools" / "kube"
        if (path / "control-plane").exists():
            return path
    raise FileNotFoundError("shared/tools/kube not found beside this checkout (it holds the control plane's "
                            "binaries and launcher); or set LADING_KUBE_ASSETS to a directory with "
                            f"{', '.join(BINARIES)}")


def _complete(directory: Path) -> bool:
    return all(os.access(directory / name, os.X_OK) for name in BINARIES)


def cache_key(tools: Path) -> str:
    """Names the packed binaries by their sizes (packed and unpacked): a new version, a new key."""
    digest = hashlib.sha256()
    for name in BINARIES:
        size = tools / f"{name}.size"
        digest.update(f"{name}:{(tools / f'{name}.xz').stat().st_size}:"
                      f"{size.read_text().strip() if size.exists() else ''}\n".encode())
    return digest.hexdigest()[:16]


def assets_dir() -> Path:
    """The directory with the three binaries (see the module docstring for the order)."""
    for variable in ("LADING_KUBE_ASSETS", "KUBEBUILDER_ASSETS"):
        value = os.environ.get(variable, "")
        if value:
            directory = Path(value)
            if not _complete(directory):
                raise FileNotFoundError(f"${variable}={value} must hold executable {', '.join(BINARIES)} "
                                        "(envtest's assets lack kube-controller-manager: add it, or unset "
                                        f"{variable} to use shared/tools/kube)")
            return directory
    tools = kube_tools()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lading"
    directory = cache / f"kube-{cache_key(tools)}"
    if _complete(directory) and (directory / ".unpacked").exists():
        return directory
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"kube-{cache_key(tools)}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one unpacker per machine; the others wait, then reuse it
        if not (directory / ".unpacked").exists():
            subprocess.run([sys.executable, str(tools / "unpack"), str(directory)], check=True,
                           stdout=subprocess.DEVNULL)
            (directory / ".unpacked").touch()
    return directory


def _die_with_parent() -> None:
    """In the launcher's child, before exec: SIGTERM it when the test process dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class Endpoint:
    """Where the control plane answers: ``url``, the admin ``token``, the serving ``ca`` file."""

    url: str
    token: str
    ca: str
    directory: Path
    pids: dict[str, int]


class ControlPlane:
    """The three processes, started by the shared launcher in ``directory``."""

    def __init__(self, directory: Path, apiserver_args: tuple[str, ...] = (), node_ip: str = "") -> None:
        self.directory = directory
        self.apiserver_args = apiserver_args
        self.node_ip = node_ip  # for a real node (harness.node): the `kubernetes` Service's endpoint
        self.process: subprocess.Popen[bytes] | None = None
        self.endpoint: Endpoint | None = None

    def start(self) -> Endpoint:
        assets = assets_dir()
        self.directory.mkdir(parents=True, exist_ok=True)
        out = self.directory / "launcher.out"
        policy = self.directory / "audit-policy.json"
        policy.write_text(json.dumps(AUDIT_POLICY))
        server_args = (f"--audit-policy-file={policy}", f"--audit-log-path={self.directory / 'audit.log'}",
                       "--audit-log-mode=blocking", *self.apiserver_args)
        argv = [sys.executable, str(kube_tools() / "control-plane"), "--dir", str(self.directory),
                "--assets", str(assets), "--controllers", CONTROLLERS,
                *(f"--apiserver-arg={a}" for a in server_args),
                *(["--node-ip", self.node_ip] if self.node_ip else [])]
        with open(out, "wb") as stdout, open(self.directory / "launcher.err", "wb") as stderr:
            self.process = subprocess.Popen(argv, stdout=stdout, stderr=stderr, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + READY_SECONDS
        while not out.read_bytes().endswith(b"\n"):  # one JSON line, once the API server is ready
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the control plane did not start: "
                                   f"{(self.directory / 'launcher.err').read_text(errors='replace')[-3000:]}"
                                   f"(logs in {self.directory})")
            time.sleep(0.1)
        ready = json.loads(out.read_text().splitlines()[0])
        self.endpoint = Endpoint(url=ready["url"], token=ready["token"], ca=str(self.directory / "ca.crt"),
                                 directory=self.directory, pids=dict(ready["pids"]))
        return self.endpoint

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # the launcher stops all three, etcd last
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    @contextlib.contextmanager
    def running(self) -> Iterator[Endpoint]:
        try:
            yield self.start()
        finally:
            self.stop()


def kubeconfig(endpoint: Endpoint, token: str, user: str = "admin") -> dict[str, object]:
    """A kubeconfig for ``token`` that verifies the server against its own certificate (an
    existing cluster's kubeconfig without one skips verification, as it did)."""
    trust = {"certificate-authority": endpoint.ca} if endpoint.ca else {"insecure-skip-tls-verify": True}
    return {"apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": endpoint.url, **trust}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}]}


@dataclass(frozen=True)
class Request:
    """One request in the audit log: ``verb`` as RBAC names it (get, list, watch, create, ...)."""

    user: str
    verb: str
    resource: str
    subresource: str
    namespace: str
    code: int
    user_agent: str = ""  # e.g. kopf/1.45.2 (kopf's own watches) or OpenAPI-Generator/... (the operator's calls)


def audit_requests(endpoint: Endpoint, user: str) -> list[Request]:
    """Every request ``user`` made so far (one per audit ID; a watch is logged when it starts).

    ``--audit-log-mode=blocking``: a request's event is written before its answer is sent.
    A cluster of someone else's (``LADING_TEST_KUBECONFIG``) has no log here: FileNotFoundError."""
    seen: dict[str, Request] = {}
    path = endpoint.directory / "audit.log"
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if (event.get("user") or {}).get("username") != user:
            continue
        ref = event.get("objectRef") or {}
        seen.setdefault(event["auditID"], Request(
            user=user, verb=str(event.get("verb", "")), resource=str(ref.get("resource", "")),
            subresource=str(ref.get("subresource", "")), namespace=str(ref.get("namespace", "")),
            code=int((event.get("responseStatus") or {}).get("code") or 0),
            user_agent=str(event.get("userAgent", ""))))
    return list(seen.values())
