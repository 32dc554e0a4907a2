"""The image's entrypoint on a real node: an arbitrary uid, a read-only root filesystem.

Pods run the image built by scripts/image in a namespace enforcing Pod Security "restricted",
as a random uid/gid the image has never heard of (no /etc/passwd entry), with
``readOnlyRootFilesystem: true`` and emptyDirs for /tmp and Spark's work dir only:

- a pod running ``spark-submit --master local[2]`` (the entrypoint passes the command through);
- Spark's own Kubernetes mode, ``spark-submit --deploy-mode cluster`` from this host: the
  driver pod runs the entrypoint's ``driver`` mode, the executor pod its ``executor`` mode,
  from the environment Spark sets on them.

Each reports (tests/node/smoke_app.py, in its termination message) the user name Java, Spark and
Hadoop saw, that the root filesystem refused a write, what it computed, and where the image's
Python imported lading's C extension (the CSV encoder's) from; in cluster mode also where the
driver's and the executor's JVMs loaded Spark's classes from: the image's class-data-sharing archive.
"""

from __future__ import annotations

import getpass
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.client import KubeClient
from harness.node import NodeCluster, pod_log, termination_message, wait_pod_done

# The session's node starts inside the first test's budget (pytest-timeout counts fixtures).
pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]

SMOKE = Path(__file__).with_name("smoke_app.py")
JVM_CLASS_LOG = "-Xshare:on -Xlog:class+load=info:file=/tmp/smoke-classes-%p.log"
"""Java options for a driver and its executors: the image's archive required, each class's source
logged (tests/node/smoke_app.py reads the log)."""
ARCHIVED = "shared objects file (top)"
"""A class's source in that log when it came from the image's (dynamic) archive."""
SPARK_ROLE_RULES = [  # what Spark's driver needs in its namespace (the chart's Spark Role grants it)
    {"apiGroups": [""], "resources": ["pods", "services", "configmaps", "persistentvolumeclaims"],
     "verbs": ["create", "get", "list", "watch", "delete", "deletecollection", "patch", "update"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
     "verbs": ["create", "get", "list", "watch", "delete"]},
]


def arbitrary_ids() -> tuple[int, int]:
    """A uid and gid no image knows (OpenShift hands out such uids per namespace)."""
    return random.randint(100_000, 2_000_000_000), random.randint(100_000, 2_000_000_000)


def restricted_pod_spec(uid: int, gid: int, container: dict[str, Any]) -> dict[str, Any]:
    """A pod spec meeting "restricted", read-only root, emptyDirs for /tmp and the work dir."""
    container = {**container,
                 "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                     "readOnlyRootFilesystem": True, "runAsNonRoot": True},
                 "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"},
                                  {"name": "work", "mountPath": "/opt/spark/work-dir"},
                                  {"name": "smoke", "mountPath": "/smoke", "readOnly": True}]}
    return {"securityContext": {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": gid,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "work", "emptyDir": {}},
                        {"name": "smoke", "configMap": {"name": "smoke"}}],
            "containers": [container]}


def smoke_config_map(client: KubeClient, namespace: str) -> None:
    client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "smoke", "namespace": namespace},
                   "data": {"smoke_app.py": SMOKE.read_text()}}, "configmaps")


def check_report(report: dict[str, Any], uid: int, gid: int, user: str) -> None:
    """``user``: the name Java, Spark and Hadoop must all see (the image's default ``spark``, or in
    cluster mode the submitter's, which Spark hands its pods as SPARK_USER)."""
    assert report["uid"] == uid and report["gid"] == gid
    assert report["passwd_has_uid"] is False, "the image must not need (or get) an /etc/passwd entry"
    assert report["root_read_only"] is True
    assert report["java_user"] == report["spark_user"] == report["hadoop_user"] == user
    assert report["rows"] == 10_000 and report["groups"] == 7 and report["hadoop_fs_write"] is True
    # the C extension the image's build stage compiled, imported by the image's python (no fallback)
    extension = report["csv_extension"]
    assert extension.startswith("/opt/lading/spark_apps/lading_jobs/formats/_csvlines.") \
        and extension.endswith(".so"), extension


def test_local_spark_submit_runs_as_an_arbitrary_uid_on_a_read_only_root(
        node_cluster: NodeCluster, node_namespace: str) -> None:
    client = node_cluster.kube.client
    smoke_config_map(client, node_namespace)
    uid, gid = arbitrary_ids()
    container = {"name": "smoke", "image": node_cluster.image, "imagePullPolicy": "Never",
                 "args": ["spark-submit", "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                          "/smoke/smoke_app.py"],
                 "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}}
    client.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "smoke", "namespace": node_namespace},
                   "spec": {"restartPolicy": "Never", **restricted_pod_spec(uid, gid, container)}}, "pods")
    pod = wait_pod_done(client, node_namespace, "smoke", timeout=300)
    assert pod["status"]["phase"] == "Succeeded", pod_log(client, node_namespace, "smoke")
    report = json.loads(termination_message(pod, "smoke"))
    check_report(report, uid, gid, "spark")
    assert report["parquet_rows"] == 100  # Spark's own writer and reader on /tmp, as this user
    assert report["master"] == "local[2]" and report["executors"][0][:2] == [uid, "spark"]


def test_driver_and_executor_modes_under_spark_submit_cluster_mode(
        node_cluster: NodeCluster, node_namespace: str, tmp_path: Path) -> None:
    """Spark's own Kubernetes submission: the driver and executor pods Spark builds, run by the
    entrypoint's ``driver`` and ``executor`` modes, as an arbitrary uid on a read-only root."""
    kube = node_cluster.kube
    client = kube.client
    smoke_config_map(client, node_namespace)
    client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "spark", "namespace": node_namespace}, "rules": SPARK_ROLE_RULES}, "roles")
    client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "spark", "namespace": node_namespace},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "spark"},
                   "subjects": [{"kind": "ServiceAccount", "name": "spark", "namespace": node_namespace}]},
                  "rolebindings")
    client.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "spark", "namespace": node_namespace}},
                  "serviceaccounts")
    uid, gid = arbitrary_ids()
    templates = {}
    for role in ("driver", "executor"):
        spec = restricted_pod_spec(uid, gid, {"name": f"spark-kubernetes-{role}"})
        templates[role] = tmp_path / f"{role}-template.yaml"
        templates[role].write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "spec": spec}))
    token = tmp_path / "token"
    token.write_text(kube.token)
    driver = "smoke-driver"
    conf = {
        "spark.kubernetes.namespace": node_namespace,
        "spark.kubernetes.authenticate.driver.serviceAccountName": "spark",
        "spark.kubernetes.authenticate.submission.oauthTokenFile": str(token),
        "spark.kubernetes.authenticate.submission.caCertFile": str(kube.ca),
        "spark.kubernetes.container.image": node_cluster.image,
        "spark.kubernetes.container.image.pullPolicy": "Never",
        "spark.kubernetes.driver.pod.name": driver,
        "spark.kubernetes.driver.podTemplateFile": str(templates["driver"]),
        "spark.kubernetes.driver.podTemplateContainerName": "spark-kubernetes-driver",
        "spark.kubernetes.executor.podTemplateFile": str(templates["executor"]),
        "spark.kubernetes.executor.podTemplateContainerName": "spark-kubernetes-executor",
        "spark.kubernetes.driver.request.cores": "500m", "spark.kubernetes.executor.request.cores": "500m",
        "spark.driver.memory": "768m", "spark.executor.memory": "768m", "spark.executor.instances": "1",
        "spark.kubernetes.submission.waitAppCompletion": "false", "spark.ui.enabled": "false",
        # the image's class-data-sharing archive (docker/entrypoint.sh): -Xshare:on, a JVM that
        # cannot map it does not start; each JVM logs where its classes came from (smoke_app.py)
        "spark.driver.extraJavaOptions": JVM_CLASS_LOG, "spark.executor.extraJavaOptions": JVM_CLASS_LOG,
    }
    submit = [str(Path(sys.executable).with_name("spark-submit")), "--master", f"k8s://{kube.url}",
              "--deploy-mode", "cluster", "--name", "smoke",
              *(a for k, v in conf.items() for a in ("--conf", f"{k}={v}")), "local:///smoke/smoke_app.py"]
    # the submitting process's PYSPARK_PYTHON would become the pods' (this host's venv path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    done = subprocess.run(submit, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    pod = wait_pod_done(client, node_namespace, driver, timeout=420)
    assert pod["status"]["phase"] == "Succeeded", pod_log(client, node_namespace, driver)
    report = json.loads(termination_message(pod, "spark-kubernetes-driver"))
    user = getpass.getuser()  # spark-submit's user: Spark sets SPARK_USER on the pods to it
    check_report(report, uid, gid, user)
    assert report["master"].startswith("k8s://")
    # the tasks ran on the executor pod, as the same arbitrary uid, named by the entrypoint
    assert [e[:2] for e in report["executors"]] == [[uid, user]] and report["executors"][0][2] == "1"
    # both JVMs mapped the image's archive and loaded most of Spark's classes from it: the driver's
    # spark-submit (client mode, the entrypoint's driver mode), the executor's backend (its java)
    classes = report["classes"]
    driver_classes, executor_classes = classes["driver"], classes["executors"]["1"]
    assert driver_classes["probe"] == executor_classes["probe"] == ARCHIVED, classes
    for seen in (driver_classes, executor_classes):
        assert seen["logs"] == 1 and seen["from_archive"] > seen["spark_classes"] // 2, classes
    # the driver removes its executor pods when it stops
    deadline = time.monotonic() + 60
    while client.list("v1", "pods", node_namespace, label_selector="spark-role=executor"):
        assert time.monotonic() < deadline, "executor pods were not removed after the driver stopped"
        time.sleep(1)
