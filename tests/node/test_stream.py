"""A StreamCopy from Kafka on a real node: the chart's operator, spark-operator's submission (the
stand-in's ``k8s`` mode), the stream's driver and executor as pods reading tansu on the node's bridge
address (never beyond this machine) into a lading table in moto.

The answer comes from the resource's status (rows, lag, offsets from the driver's progress endpoint,
which the operator polls at the driver pod's address) and from the table itself, read back here.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow.parquet as pq
import pytest
from node.jobs import connection, s3_setup, spark_pods, spark_sizing, wait_until_true
from support.kafka import broker, create_topic, produce

from harness.client import KubeClient
from harness.node import NODE_IP, NodeCluster, Release
from harness.spark_operator import SparkOperatorStandIn
from lading_jobs.table.log.commits import TableLog

pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]
API = "lading.io/v1alpha1"
PLURAL = "streamcopies"
SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "n", "type": "string"}]


@pytest.fixture(scope="module")
def node_kafka(node_cluster: NodeCluster) -> Iterator[str]:
    """tansu on the node's bridge address: pods reach it, nothing beyond this machine does."""
    with broker(NODE_IP) as address:
        yield address


def send(kafka: str, topic: str, ids: range) -> None:
    """One message per id, alternating between partitions 0 and 1."""
    produce(kafka, topic, [(i % 2, str(i).encode(), json.dumps({"id": i, "n": f"n{i}"}).encode()) for i in ids])


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def caught_up(rows: int) -> Callable[[dict[str, Any] | None], bool]:
    def pred(obj: dict[str, Any] | None) -> bool:
        status = (obj or {}).get("status") or {}
        return status.get("phase") == "Running" and status.get("rowsTotal") == rows and status.get("lag") == 0

    return pred


def wait(client: KubeClient, namespace: str, name: str, pred: Callable[[dict[str, Any] | None], bool],
         timeout: float = 600) -> dict[str, Any]:
    found = client.wait_for(API, PLURAL, namespace, name, pred, timeout=timeout, interval=1)
    assert found is not None
    return found


def table_ids(s3: Any, uri: str) -> list[int]:
    """Every id in the table's current snapshot, read from its parts (pyarrow, no Spark)."""
    snap = TableLog.open_existing(uri).snapshot()
    ids: list[int] = []
    for part in snap.parts:
        bucket, key = snap.part_uri(part)[len("s3://"):].split("/", 1)
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        ids += pq.read_table(io.BytesIO(body), columns=["id"]).column("id").to_pylist()
    return sorted(ids)


def test_a_streamcopy_from_kafka_runs_suspends_resumes_and_loads_every_message_once(
        node_cluster: NodeCluster, lading_release: Release, node_standin: SparkOperatorStandIn,
        node_s3: str, node_kafka: str) -> None:
    client = node_cluster.kube.client
    namespace, name = lading_release.job_namespace, "from-kafka"
    s3, bucket = s3_setup(client, namespace, node_s3)
    topic = create_topic(node_kafka, partitions=2, prefix="orders")
    table = f"s3://{bucket}/tables/orders/"
    spec = {"source": {"kafka": {"bootstrapServers": [node_kafka], "topics": [topic], "startingOffsets": "earliest",
                                 "valueFormat": "json"}},
            "target": {"table": table, "schema": SCHEMA},
            "batching": {"maxBatchInterval": "1s"}, "spark": spark_sizing(), "connection": connection(node_s3)}
    send(node_kafka, topic, range(10))
    client.create({"apiVersion": API, "kind": "StreamCopy", "metadata": {"name": name, "namespace": namespace},
                   "spec": spec}, PLURAL)

    # Running: rows, offsets and lag in status from the driver's progress; the driver keeps running.
    status = wait(client, namespace, name, caught_up(10))["status"]
    first = status["sparkApplication"]
    assert status["offsets"] == {f"{topic}:0": 5, f"{topic}:1": 5}
    assert status["lagPartitions"] == {f"{topic}:0": 0, f"{topic}:1": 0}
    assert status["batches"] >= 1 and status["progressUpdatedAt"]
    send(node_kafka, topic, range(10, 20))
    status = wait(client, namespace, name, caught_up(20))["status"]
    assert status["sparkApplication"] == first  # the same driver, still running
    (driver,) = spark_pods(client, namespace, "driver", first)
    assert (driver.get("status") or {}).get("phase") == "Running"

    # Suspend: the application and its pods go; messages sent meanwhile wait in Kafka.
    client.patch(API, PLURAL, namespace, name, {"spec": {"suspend": True}})
    wait(client, namespace, name, lambda o: conditions(o or {}).get("Ready", {}).get("reason") == "Suspended")
    wait_until_true(lambda: not spark_pods(client, namespace, "driver", first)
                    and not spark_pods(client, namespace, "executor", first), 120,
                    "the suspended stream's pods are still there")
    assert client.list("sparkoperator.k8s.io/v1beta2", "sparkapplications", namespace) == []
    send(node_kafka, topic, range(20, 30))

    # Resume: a new application continues from the offsets the table committed.
    client.patch(API, PLURAL, namespace, name, {"spec": {"suspend": False}})
    status = wait(client, namespace, name, caught_up(30))["status"]
    resumed = status["sparkApplication"]
    assert resumed != first
    assert status["offsets"] == {f"{topic}:0": 15, f"{topic}:1": 15}
    assert table_ids(s3, table) == list(range(30))  # every message exactly once

    # Delete: the application and its pods go.
    client.delete(API, PLURAL, namespace, name)
    wait_until_true(lambda: not spark_pods(client, namespace, "driver", resumed)
                    and not spark_pods(client, namespace, "executor", resumed), 120,
                    "the stream's pods outlived it")
