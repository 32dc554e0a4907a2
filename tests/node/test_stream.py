"""A StreamCopy from Kafka on a real node: the chart's operator, spark-operator's submission (the
stand-in's ``k8s`` mode), the stream's driver and executor as pods reading tansu on the node's bridge
address (never beyond this machine) into a lading table in moto.

It is a scenario of the tier's stage (tests/node/scenes.py), run beside the tier's other cases.
The answer comes from the resource's status (rows, lag, offsets from the driver's progress endpoint,
which the operator polls at the driver pod's address) and from the table itself, read back here.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq
import pytest
from node.jobs import connection, spark_pods, spark_sizing, wait_until_true
from node.scenes import Scene, Seen, Stage, scenario
from support.kafka import create_topic, produce

from harness.client import KubeClient
from lading_jobs.table.log.commits import TableLog

pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]
API = "lading.io/v1alpha1"
PLURAL = "streamcopies"
SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "n", "type": "string"}]


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


@scenario("stream", priority=3)
def stream_from_kafka(scene: Scene, seen: Seen) -> None:
    client, ns, name, kafka = scene.client, scene.namespace, "from-kafka", scene.kafka()
    topic = create_topic(kafka, partitions=2, prefix="orders")
    table = f"s3://{seen.bucket}/tables/orders/"
    seen.facts["topic"] = topic
    spec = {"source": {"kafka": {"bootstrapServers": [kafka], "topics": [topic], "startingOffsets": "earliest",
                                 "valueFormat": "json"}},
            "target": {"table": table, "schema": SCHEMA},
            "batching": {"maxBatchInterval": "1s"}, "spark": spark_sizing(), "connection": connection(scene.endpoint)}
    send(kafka, topic, range(10))
    client.create({"apiVersion": API, "kind": "StreamCopy", "metadata": {"name": name, "namespace": ns},
                   "spec": spec}, PLURAL)

    # Running: rows, offsets and lag in status from the driver's progress; the driver keeps running.
    seen.facts["first"] = wait(client, ns, name, caught_up(10))["status"]
    first = seen.facts["first"]["sparkApplication"]
    seen.apps.append(first)
    send(kafka, topic, range(10, 20))
    seen.facts["second"] = wait(client, ns, name, caught_up(20))["status"]
    seen.facts["driver_phases"] = [(p.get("status") or {}).get("phase") for p in spark_pods(client, ns, "driver", first)]

    # Suspend: the application and its pods go; messages sent meanwhile wait in Kafka.
    client.patch(API, PLURAL, ns, name, {"spec": {"suspend": True}})
    wait(client, ns, name, lambda o: conditions(o or {}).get("Ready", {}).get("reason") == "Suspended")
    wait_until_true(lambda: not spark_pods(client, ns, "driver", first) and not spark_pods(client, ns, "executor", first),
                    120, "the suspended stream's pods are still there")
    seen.facts["apps_suspended"] = [a["metadata"]["name"] for a in
                                    client.list("sparkoperator.k8s.io/v1beta2", "sparkapplications", ns)
                                    if a["metadata"]["name"].startswith(f"{name}-")]
    send(kafka, topic, range(20, 30))

    # Resume: a new application continues from the offsets the table committed.
    client.patch(API, PLURAL, ns, name, {"spec": {"suspend": False}})
    seen.status = wait(client, ns, name, caught_up(30))["status"]
    resumed = seen.status["sparkApplication"]
    seen.apps.append(resumed)
    seen.facts["ids"] = table_ids(seen.s3, table)

    # Delete: the application and its pods go.
    client.delete(API, PLURAL, ns, name)
    wait_until_true(lambda: not spark_pods(client, ns, "driver", resumed) and not spark_pods(client, ns, "executor", resumed),
                    120, "the stream's pods outlived it")


@pytest.mark.scene("stream")
def test_a_streamcopy_from_kafka_runs_suspends_resumes_and_loads_every_message_once(stage: Stage) -> None:
    seen = stage.outcome("stream")
    facts, topic = seen.facts, seen.facts["topic"]
    first = facts["first"]
    assert first["offsets"] == {f"{topic}:0": 5, f"{topic}:1": 5}
    assert first["lagPartitions"] == {f"{topic}:0": 0, f"{topic}:1": 0}
    assert first["batches"] >= 1 and first["progressUpdatedAt"]
    assert facts["second"]["sparkApplication"] == first["sparkApplication"]  # the same driver, still running
    assert facts["driver_phases"] == ["Running"]
    assert facts["apps_suspended"] == []  # suspended: no SparkApplication of the stream's
    status = seen.status
    assert status["sparkApplication"] != first["sparkApplication"]  # resumed as a new application
    assert status["offsets"] == {f"{topic}:0": 15, f"{topic}:1": 15}
    assert facts["ids"] == list(range(30))  # every message exactly once
