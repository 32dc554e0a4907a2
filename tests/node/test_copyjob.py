"""A CopyJob on a real node: the chart installed with helm, the operator as its Deployment,
spark-operator's submission (the stand-in's ``k8s`` mode), the driver and executors as pods.

The answer is read from the resource's status and the data itself: the rows an unload of a
query over a lading table wrote to S3 (moto on the node's bridge address) are read back.
"""

from __future__ import annotations

import io
import threading
import time
import uuid
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import kv_tables

from harness.client import KubeClient
from harness.node import NodeCluster, Release
from harness.spark_operator import SparkOperatorStandIn

# The session's node starts inside the first test's budget (pytest-timeout counts fixtures):
# ~3-5 minutes with the image import on a loaded machine, plus Spark runs of minutes each.
pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]
API = "lading.io/v1alpha1"


class PodsSeen:
    """Every Spark pod that appears in a namespace while it runs (polled once a second)."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.seen: dict[str, str] = {}  # pod name -> spark-role
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(1.0):
            for pod in self.client.list("v1", "pods", self.namespace, label_selector="spark-role"):
                self.seen[pod["metadata"]["name"]] = pod["metadata"]["labels"]["spark-role"]

    def __enter__(self) -> PodsSeen:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(10)

    def roles(self) -> list[str]:
        return sorted(self.seen.values())


def spark_pods(client: KubeClient, namespace: str, role: str, app: str = "") -> list[dict[str, Any]]:
    """The Spark pods of ``role`` (driver, executor), of SparkApplication ``app`` if given."""
    selector = f"spark-role={role}" + (f",sparkoperator.k8s.io/app-name={app}" if app else "")
    return client.list("v1", "pods", namespace, label_selector=selector)


def wait_until_true(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(1)


def s3_setup(client: KubeClient, namespace: str, endpoint: str) -> tuple[Any, str]:
    """A boto3 client, a fresh bucket, and the namespace's Secret ``s3`` (created once)."""
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    bucket = f"n-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    if client.get_or_none("v1", "secrets", namespace, "s3") is None:
        client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3", "namespace": namespace},
                       "stringData": {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}},
                      "secrets")
    return s3, bucket


def copy_spec(source: dict[str, Any], target: str, endpoint: str) -> dict[str, Any]:
    return {
        "from": source, "to": {"files": target, "format": "parquet"},
        "connection": {"secretRef": {"name": "s3"}, "endpoint": endpoint, "region": "us-east-1"},
        # two CPUs for the whole node: the driver and the executor ask for a share each
        "spark": {"executor": {"instances": 1},
                  "sparkConf": {"spark.kubernetes.driver.request.cores": "400m",
                                "spark.kubernetes.executor.request.cores": "400m"}},
    }


def test_unload_of_a_query_over_a_table_runs_as_driver_and_executor_pods(
        node_cluster: NodeCluster, lading_release: Release, node_standin: SparkOperatorStandIn,
        node_s3: str) -> None:
    client = node_cluster.kube.client
    node_namespace = lading_release.job_namespace
    s3, bucket = s3_setup(client, node_namespace, node_s3)
    table = f"s3://{bucket}/tables/kv/"
    kv_tables.twelve_small_parts(table)  # 60 rows, k = 0..59, 12 parts
    expected = [(k, f"c{k // 10}") for k in range(0, 60, 2)]  # what twelve_small_parts wrote, k even
    spec = copy_spec({"query": "SELECT k, v FROM kv WHERE k % 2 = 0", "inputs": [{"name": "kv", "table": table}]},
                     f"s3://{bucket}/out/", node_s3)
    with PodsSeen(client, node_namespace) as pods:
        client.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": "unload", "namespace": node_namespace},
                       "spec": spec}, "copyjobs")
        done = client.wait_for(API, "copyjobs", node_namespace, "unload",
                               lambda o: ((o or {}).get("status") or {}).get("phase") in ("Succeeded", "Failed"),
                               timeout=600, interval=1)
        assert done is not None
        status = done["status"]
        assert status["phase"] == "Succeeded", status
        app = status["sparkApplication"]
        # the driver stops its executors when the job ends
        wait_until_true(lambda: not spark_pods(client, node_namespace, "executor", app), 90,
                        "executor pods still there after the job")
    assert status["response"]["rows"] == len(expected)
    assert "driver" in pods.roles() and "executor" in pods.roles(), pods.seen
    # the files read back equal the query's answer
    manifest = status["output"]["manifest"].split("/", 3)[3]
    listing = s3.list_objects_v2(Bucket=bucket, Prefix="out/").get("Contents", [])
    parts = [o["Key"] for o in listing if o["Key"].endswith(".parquet") and o["Key"] != manifest]
    assert parts
    got = pa.concat_tables([pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=k)["Body"].read()))
                            for k in parts])
    assert sorted(zip(got.column("k").to_pylist(), got.column("v").to_pylist(), strict=True)) == expected
    # deleting the CopyJob takes its SparkApplication and driver pod with it
    client.delete(API, "copyjobs", node_namespace, "unload")
    wait_until_true(lambda: not spark_pods(client, node_namespace, "driver", app), 120,
                    "the driver pod outlived its CopyJob")


# Seconds of work per row on a loaded machine: the job is still running when it is cancelled.
SLOW_QUERY = ("SELECT id, aggregate(sequence(1, 200000), 0L, (a, x) -> a + x % (id + 1)) AS pause "
              "FROM range(0, 100000, 1, 2)")


def test_cancel_mid_run_removes_the_driver_and_executors_and_leaves_nothing(
        node_cluster: NodeCluster, lading_release: Release, node_standin: SparkOperatorStandIn,
        node_s3: str) -> None:
    client = node_cluster.kube.client
    namespace = lading_release.job_namespace
    s3, bucket = s3_setup(client, namespace, node_s3)
    client.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": "to-cancel", "namespace": namespace},
                   "spec": copy_spec({"query": SLOW_QUERY}, f"s3://{bucket}/cancelled/", node_s3)}, "copyjobs")
    running = client.wait_for(API, "copyjobs", namespace, "to-cancel",
                              lambda o: bool(((o or {}).get("status") or {}).get("sparkApplication")),
                              timeout=300, interval=1)
    assert running is not None
    app = running["status"]["sparkApplication"]
    # mid-run: its executor pod is running tasks
    wait_until_true(lambda: any((p.get("status") or {}).get("phase") == "Running"
                                for p in spark_pods(client, namespace, "executor", app)), 600,
                    "no executor pod running")
    client.patch(API, "copyjobs", namespace, "to-cancel", {"spec": {"cancel": True}})
    done = client.wait_for(API, "copyjobs", namespace, "to-cancel",
                           lambda o: ((o or {}).get("status") or {}).get("phase") in ("Cancelled", "Failed",
                                                                                       "Succeeded"),
                           timeout=120, interval=1)
    assert done is not None and done["status"]["phase"] == "Cancelled", (done or {}).get("status")
    # the driver pod goes with its SparkApplication, the executors with the driver
    wait_until_true(lambda: not spark_pods(client, namespace, "driver", app)
                    and not spark_pods(client, namespace, "executor", app),
                    120, "Spark pods outlived the cancelled run")
    assert s3.list_objects_v2(Bucket=bucket, Prefix="cancelled/").get("KeyCount", 0) == 0
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
