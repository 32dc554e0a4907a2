"""A CopyJob on a real node: the chart installed with helm, the operator as its Deployment,
spark-operator's submission (the stand-in's ``k8s`` mode), the driver and executors as pods.

The answer is read from the resource's status and the data itself: the rows an unload of a
query over a lading table wrote to S3 (moto on the node's bridge address) are read back.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from node.jobs import API, PodsSeen, copy_spec, s3_setup, slow_query, spark_pods, wait_until_true
from support import kv_tables

from harness.node import NodeCluster, Release
from harness.spark_operator import SparkOperatorStandIn

# The session's node starts inside the first test's budget (pytest-timeout counts fixtures):
# ~3-5 minutes with the image import on a loaded machine, plus Spark runs of minutes each.
pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]


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


SLOW_QUERY = slow_query(100_000)  # still running when it is cancelled


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
