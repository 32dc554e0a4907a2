"""A real Kubernetes node on this machine for the ``node`` test tier (never shipped).

The shared launcher ``shared/tools/kube/node`` (its README) starts containerd, runc, the CNI
bridge, kube-proxy, kube-scheduler, the node-side controllers and the kubelet 1.36 beside a
control plane started with ``--node-ip 10.244.0.1`` (:class:`harness.control_plane.ControlPlane`
``node_ip``), imports the images it is given from the local podman/buildah store, and waits until
the Node is Ready. Pods then run in real containers; Pod Security admission is the API server's.

The node is machine-wide (the bridge ``lading0``, iptables rules, cgroups, four kernel settings):
one per machine, and it must always be stopped with SIGTERM, which makes the launcher remove all
of it. :class:`Node` does that on ``stop`` and, through ``PR_SET_PDEATHSIG``, when the test
process dies. :func:`missing` says what this machine lacks for it (root, the Debian packages, the
image), so the tier skips with the reason instead of failing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.client import KubeClient
from harness.control_plane import ControlPlane, _die_with_parent, kube_tools, kubeconfig
from harness.fixtures import Kube, crd_files, install_crds, load_crds

NODE_IP = "10.244.0.1"     # the launcher's bridge address (--pod-cidr 10.244.0.0/16)
READY_SECONDS = 600.0      # includes importing a ~1.5 GB image (30-75 s here, more when loaded)
PROGRAMS = ("containerd", "runc", "ctr", "iptables", "ip", "podman")
CNI_DIRS = (Path("/usr/lib/cni"), Path("/usr/libexec/cni"), Path("/opt/cni/bin"))


def image_present(image: str) -> bool:
    """Whether ``image`` is in the local podman/buildah store (what ``--import-image`` reads)."""
    podman = shutil.which("podman")
    return bool(podman) and subprocess.run([str(podman), "image", "exists", image],
                                           capture_output=True).returncode == 0


def missing(image: str) -> str:
    """Why a node cannot be started here with ``image`` ("" when it can; ``image`` "": whether it
    could once the image is built, as scripts/test asks before it builds it)."""
    if os.geteuid() != 0:
        return "the node needs root"
    absent = [p for p in PROGRAMS if shutil.which(p) is None]
    if not any((d / "bridge").exists() for d in CNI_DIRS):
        absent.append("the CNI bridge plugin")
    if absent:
        return (f"missing {', '.join(absent)} (scripts/bootstrap installs containerd runc "
                "containernetworking-plugins iptables iproute2 podman when run as root)")
    try:
        tools = kube_tools()
    except FileNotFoundError as exc:
        return str(exc)
    if not (tools / "node").exists():
        return f"{tools}/node not found"
    if image and not image_present(image):
        return f"image {image} is not in the local store: build it with scripts/image"
    return ""


@dataclass
class NodeInfo:
    """What the launcher printed once the Node was Ready."""

    name: str
    node_ip: str
    ctr: str
    seconds: float


class Node:
    """The launcher in ``directory`` for the control plane of ``kubeconfig``, importing ``images``."""

    def __init__(self, directory: Path, kubeconfig: Path, images: tuple[str, ...] = ()) -> None:
        self.directory = directory
        self.kubeconfig = kubeconfig
        self.images = images
        self.process: subprocess.Popen[bytes] | None = None
        self.info: NodeInfo | None = None

    def start(self) -> NodeInfo:
        self.directory.mkdir(parents=True, exist_ok=True)
        out, err = self.directory / "launcher.out", self.directory / "launcher.err"
        argv = [sys.executable, str(kube_tools() / "node"), "--dir", str(self.directory),
                "--kubeconfig", str(self.kubeconfig), "--timeout", str(int(READY_SECONDS)),
                *(a for image in self.images for a in ("--import-image", image))]
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            self.process = subprocess.Popen(argv, stdout=stdout, stderr=stderr, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + READY_SECONDS
        while not out.read_bytes().endswith(b"\n"):  # one JSON line once the Node is Ready
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the node did not start: {err.read_text(errors='replace')[-3000:]}"
                                   f"(logs in {self.directory})")
            time.sleep(0.2)
        ready = json.loads(out.read_text().splitlines()[0])
        self.info = NodeInfo(name=ready["node"], node_ip=ready["node_ip"], ctr=ready["ctr"],
                             seconds=float(ready.get("seconds") or 0))
        return self.info

    def stop(self) -> None:
        """SIGTERM: the launcher removes its pods, iptables rules, bridge, cgroups and kernel settings."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(120)
            except subprocess.TimeoutExpired:
                self.process.kill()  # leaves state behind: say so rather than hide it
                self.process.wait(10)
                print(f"harness.node: the node launcher did not stop in 120 s (logs in {self.directory})",
                      file=sys.stderr)

    @contextlib.contextmanager
    def running(self) -> Iterator[NodeInfo]:
        try:
            yield self.start()
        finally:
            self.stop()


@dataclass
class NodeCluster:
    """A control plane and a real node: ``kube`` (as the ``kube`` fixture's), ``node``, ``image``."""

    kube: Kube  # harness.fixtures.Kube
    node: NodeInfo
    image: str
    directory: Path
    started_seconds: float
    launcher: Node  # the node launcher (its process exits 0 once it removed all it made)


@contextlib.contextmanager
def running_cluster(directory: Path, image: str) -> Iterator[NodeCluster]:
    """A control plane advertising the node's bridge address (``--node-ip``) with lading's CRDs
    installed and an admin kubeconfig at ``directory/admin.kubeconfig``, plus the node with
    ``image`` imported; both stopped on exit (the node first). ``directory`` is left in place."""
    began = time.monotonic()
    with ControlPlane(directory / "control-plane", node_ip=NODE_IP).running() as endpoint:
        admin = directory / "admin.kubeconfig"
        admin.write_text(json.dumps(kubeconfig(endpoint, endpoint.token, "admin"), indent=1))
        kube = Kube(endpoint, admin)
        install_crds(kube.client, load_crds(crd_files()))
        node = Node(directory / "node", directory / "control-plane" / "kubeconfig", (image,))
        with node.running() as info:
            yield NodeCluster(kube=kube, node=info, image=image, directory=directory,
                              started_seconds=time.monotonic() - began, launcher=node)


@dataclass
class Release:
    """The chart installed with ``helm install``: its release name and namespace, the job namespace
    it serves, and spare job namespaces it serves too (for cases that change their namespace)."""

    name: str
    namespace: str
    job_namespace: str
    spare_namespaces: tuple[str, ...] = ()


def wait_pod_done(client: KubeClient, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    """The pod once it Succeeded or Failed (its last state on timeout, with the reason)."""
    deadline = time.monotonic() + timeout
    pod: dict[str, Any] = {}
    while time.monotonic() < deadline:
        pod = client.get_or_none("v1", "pods", namespace, name) or {}
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return pod
        time.sleep(1)
    raise AssertionError(f"pod {namespace}/{name} not done in {timeout:.0f} s: {json.dumps(pod.get('status'))[:3000]}")


def termination_message(pod: dict[str, Any], container: str) -> str:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return str(((status.get("state") or {}).get("terminated") or {}).get("message") or "")
    return ""


def pod_log(client: KubeClient, namespace: str, name: str, lines: int = 60) -> str:
    """The last ``lines`` of a pod's log (its first container's)."""
    resp = client.session.get(f"{client.url}/api/v1/namespaces/{namespace}/pods/{name}/log",
                              params={"tailLines": str(lines)}, timeout=30, verify=client.session.verify)
    return str(resp.text)
