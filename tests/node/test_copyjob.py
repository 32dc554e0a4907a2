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

pytestmark = pytest.mark.node
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


def spark_pods(client: KubeClient, namespace: str, role: str) -> list[dict[str, Any]]:
    return client.list("v1", "pods", namespace, label_selector=f"spark-role={role}")


def wait_until_true(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(1)


def test_unload_of_a_query_over_a_table_runs_as_driver_and_executor_pods(
        node_cluster: NodeCluster, node_namespace: str, lading_release: Release,
        node_standin: SparkOperatorStandIn, node_s3: str) -> None:
    client = node_cluster.kube.client
    s3 = boto3.client("s3", endpoint_url=node_s3, region_name="us-east-1")
    bucket = f"n-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    table = f"s3://{bucket}/tables/kv/"
    kv_tables.twelve_small_parts(table)  # 60 rows, k = 0..59, 12 parts
    expected = [(k, f"c{k // 10}") for k in range(0, 60, 2)]  # what twelve_small_parts wrote, k even
    assert len(expected) == 30
    client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3", "namespace": node_namespace},
                   "stringData": {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}}, "secrets")
    spec = {
        "from": {"query": "SELECT k, v FROM kv WHERE k % 2 = 0", "inputs": [{"name": "kv", "table": table}]},
        "to": {"files": f"s3://{bucket}/out/", "format": "parquet"},
        "connection": {"secretRef": {"name": "s3"}, "endpoint": node_s3, "region": "us-east-1"},
        # two CPUs for the whole node: the driver and the executor ask for a share each
        "spark": {"executor": {"instances": 1},
                  "sparkConf": {"spark.kubernetes.driver.request.cores": "400m",
                                "spark.kubernetes.executor.request.cores": "400m"}},
    }
    with PodsSeen(client, node_namespace) as pods:
        client.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": "unload", "namespace": node_namespace},
                       "spec": spec}, "copyjobs")
        done = client.wait_for(API, "copyjobs", node_namespace, "unload",
                               lambda o: ((o or {}).get("status") or {}).get("phase") in ("Succeeded", "Failed"),
                               timeout=600, interval=1)
        assert done is not None
        status = done["status"]
        assert status["phase"] == "Succeeded", status
        # the driver stops its executors when the job ends
        wait_until_true(lambda: not spark_pods(client, node_namespace, "executor"), 90,
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
    wait_until_true(lambda: not spark_pods(client, node_namespace, "driver"), 120,
                    "the driver pod outlived its CopyJob")
