"""The ``node`` tier: lading on a real Kubernetes node (pods in real containers).

Off by default: it needs root, the Debian packages of the node (containerd, runc, the CNI
plugins, iptables, iproute2, podman; `LADING_NODE_TESTS=1 scripts/bootstrap` installs them as root) and the image built
by ``scripts/image``, and it changes machine-wide state while it runs (a bridge, iptables rules,
kernel settings; all restored when the node stops). ``LADING_NODE_TESTS=1`` turns it on;
``LADING_IMAGE`` names the image (default ``localhost/lading:dev``). Run it alone, in one
process: ``LADING_NODE_TESTS=1 python -m pytest -n 0 -m node tests/node``.

- ``node_cluster`` (session): a control plane advertising the node's bridge address
  (``--node-ip 10.244.0.1``) with the CRDs installed, plus the node with the image imported.
- ``node_namespace`` (function): a fresh namespace with Pod Security "restricted" enforced,
  deleted after the test.
- ``lading_release`` (session): the chart installed once, serving a main job namespace and spare
  ones; ``stage`` (session): the scenarios the selected tests name, run side by side
  (tests/node/scenes.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from node.scenes import Scenario, Scene, Stage
from support.kafka import broker

from harness import identities
from harness.node import NODE_IP, NodeCluster, Release, missing, running_cluster
from harness.spark_operator import SparkOperatorStandIn

REPO = Path(__file__).resolve().parents[2]
AWS_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_REGION")
ENABLE = "LADING_NODE_TESTS"
IMAGE = os.environ.get("LADING_IMAGE", "localhost/lading:dev")
# Spark 4.3's submission client also applies a NetworkPolicy per application (its
# NetworkPolicyFeatureStep, server-side apply: PATCH). spark-operator's ClusterRole must allow it,
# or every submission fails with "networkpolicies ... is forbidden" (docs/install.md).
SPARK_43_SUBMISSION_RULES = [{"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
                              "verbs": ["get", "create", "patch", "delete"]}]
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted",
              "pod-security.kubernetes.io/enforce-version": "latest"}


def ensure_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def node_cluster() -> Iterator[NodeCluster]:
    if os.environ.get(ENABLE) != "1":
        pytest.skip(f"the node tier is off: set {ENABLE}=1 (needs root, the node's packages and scripts/image)")
    why = missing(IMAGE)
    if why:
        pytest.skip(f"the node tier cannot run here: {why}")
    # Not under pytest's basetemp: other pytest sessions on the machine rotate (delete) old
    # basetemps, and the node's state (containerd, the kubelet's mounts) must outlive the run.
    directory = Path(tempfile.mkdtemp(prefix="lading-node-", dir="/var/tmp"))
    with running_cluster(directory, IMAGE) as cluster:
        yield cluster
    launcher = cluster.launcher.process
    if launcher is not None and launcher.returncode == 0:  # cleaned up: nothing mounted is left
        shutil.rmtree(directory, ignore_errors=True)


def restricted_namespace(cluster: NodeCluster) -> str:
    """A fresh namespace enforcing Pod Security "restricted", with its ``default`` ServiceAccount
    (nothing else: ``helm install`` creates the chart's Spark ServiceAccount there)."""
    client = cluster.kube.client
    name = f"n-{uuid.uuid4().hex[:10]}"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": RESTRICTED}},
                  "namespaces")
    client.wait_for("v1", "serviceaccounts", name, "default", lambda sa: sa is not None, timeout=60, interval=0.2)
    return name


@pytest.fixture
def node_namespace(node_cluster: NodeCluster) -> Iterator[str]:
    """A fresh namespace enforcing Pod Security "restricted" for one test."""
    name = restricted_namespace(node_cluster)
    yield name
    node_cluster.kube.delete_namespace(name)


@pytest.fixture(scope="session")
def node_s3(node_cluster: NodeCluster) -> Iterator[str]:
    """moto on the node's bridge address (pods reach it; nothing beyond this machine does), with
    this process's AWS_* pointing at it (the tests write inputs and read outputs through it)."""
    from moto.server import ThreadedMotoServer
    from support.moto_atomic import make_conditional_writes_atomic

    make_conditional_writes_atomic()
    with socket.socket() as s:
        s.bind((NODE_IP, 0))
        port = int(s.getsockname()[1])
    server = ThreadedMotoServer(ip_address=NODE_IP, port=port, verbose=False)
    server.start()
    endpoint = f"http://{NODE_IP}:{port}"
    saved = {k: os.environ.get(k) for k in AWS_ENV}
    os.environ.update({"AWS_ENDPOINT_URL_S3": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_REGION": "us-east-1"})
    yield endpoint
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def node_standin(node_cluster: NodeCluster) -> Iterator[SparkOperatorStandIn]:
    """spark-operator's part, as spark-operator does it (``mode="k8s"``: spark-submit in cluster
    mode as spark-operator's own ServiceAccount, with its chart's rules)."""
    kube = node_cluster.kube
    rbac = identities.spark_operator_rbac()
    role = next(o for o in rbac if o["kind"] == "ClusterRole")
    role["rules"] = [*role["rules"], *SPARK_43_SUBMISSION_RULES]
    identity = identities.install(kube, rbac, identities.SPARK_OPERATOR_NAMESPACE, identities.SPARK_OPERATOR_ACCOUNT,
                                  ensure_dir(node_cluster.directory / "standin-identity"))
    with SparkOperatorStandIn(kube.url, mode="k8s", token=identity.token, ca=kube.ca,
                              log_dir=ensure_dir(node_cluster.directory / "spark-submit")) as standin:
        yield standin


# Job namespaces the session's release serves besides its main one, for scenarios that change
# their namespace (a ResourceQuota, the Spark Role): tests/node/scenes.py, ``own_namespace``.
SPARE_NAMESPACES = 2
# Chart values every node test runs with: a driver may ask for more cores than the node has (the
# unschedulable case; the chart's default policy caps a pod at 8), so the API server's scheduler,
# not lading's policy, is what stops it.
HELM_SET = ("policy.limits.default.cores=64",)


@pytest.fixture(scope="session")
def lading_release(node_cluster: NodeCluster) -> Iterator[Release]:
    """``helm install lading charts/lading`` with the built image (pullPolicy Never), its
    operator Deployment (two replicas, leader election) rolled out, watching every namespace and
    serving fresh restricted namespaces as its job namespaces (``Release.job_namespace`` and
    ``Release.spare_namespaces``), once for the session. Uninstalled, and the namespaces deleted,
    afterwards."""
    kube = node_cluster.kube
    job_namespaces = [restricted_namespace(node_cluster) for _ in range(1 + SPARE_NAMESPACES)]
    release_ns = f"lading-{uuid.uuid4().hex[:6]}"
    repository, _, tag = node_cluster.image.rpartition(":")
    helm = [str(REPO / ".tools" / "bin" / "helm"), "--kubeconfig", kube.kubeconfig]
    install = [*helm, "install", "lading", str(REPO / "charts" / "lading"), "--namespace", release_ns,
               "--create-namespace", "--set", f"image.repository={repository}", "--set-string", f"image.tag={tag}",
               "--set", "image.pullPolicy=Never", "--set", f"spark.jobNamespaces={{{','.join(job_namespaces)}}}",
               "--set", "operator.resources.requests.cpu=50m", "--wait", "--timeout", "300s",
               *(a for value in HELM_SET for a in ("--set", value))]
    done = subprocess.run(install, capture_output=True, text=True, timeout=360)
    if done.returncode != 0:
        pods = kube.client.list("v1", "pods", release_ns)
        raise AssertionError(f"helm install failed: {done.stderr[-2000:]}\n"
                             + "\n".join(f"{p['metadata']['name']}: {json.dumps(p.get('status'))[:800]}" for p in pods))
    yield Release("lading", release_ns, job_namespaces[0], tuple(job_namespaces[1:]))
    subprocess.run([*helm, "uninstall", "lading", "--namespace", release_ns, "--wait", "--timeout", "120s"],
                   capture_output=True, text=True, timeout=180)
    kube.delete_namespace(release_ns)
    for name in job_namespaces:
        kube.delete_namespace(name)


@pytest.fixture(scope="session")
def stage(request: pytest.FixtureRequest, node_cluster: NodeCluster, lading_release: Release,
          node_standin: SparkOperatorStandIn, node_s3: str) -> Iterator[Stage]:
    """Every scenario the session's selected tests name (``@pytest.mark.scene``), started together
    (at most ``LADING_NODE_SCENES`` at once, default 5) the first time a test asks; the session
    waits for all of them at its end."""
    names = [m.args[0] for item in request.session.items for m in item.iter_markers("scene")]
    spares = list(lading_release.spare_namespaces)
    kafka: list[str] = []
    lock = threading.Lock()
    with contextlib.ExitStack() as stack:
        def on_demand_kafka() -> str:
            """tansu on the node's bridge address (pods reach it; nothing beyond this machine does)."""
            with lock:
                if not kafka:
                    kafka.append(stack.enter_context(broker(NODE_IP)))
                return kafka[0]

        def make_scene(chosen: Scenario) -> Scene:
            if chosen.own_namespace:
                assert spares, f"no spare job namespace left for {chosen.name}: raise SPARE_NAMESPACES"
                namespace = spares.pop(0)
            else:
                namespace = lading_release.job_namespace
            return Scene(node_cluster.kube.client, namespace, node_s3, node_cluster.kube.kubeconfig,
                         lading_release.namespace, lading_release.name, on_demand_kafka)

        staged = Stage(names, make_scene, int(os.environ.get("LADING_NODE_SCENES", "5")))
        staged.start()
        yield staged
        failed = list(staged.close())
        if failed:
            print(f"scenarios that failed: {failed}")
