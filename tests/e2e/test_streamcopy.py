"""StreamCopy end to end: kopf operator (a process) → real API server → spark-operator stand-in →
the real stream driver (Spark) reading a real Kafka broker (tansu) into a table in moto S3; status
from the driver's /progress, polled by the operator at the driver pod's address.

One stream, one test (each driver is a JVM): apply, Running with rows and lag, a driver SIGKILLed
and rerun by the stand-in (restartPolicy OnFailure), suspend, messages while suspended, resume,
delete; the table holds every message exactly once.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.kafka import broker, create_topic, produce

from harness.client import KubeClient, wait_until
from harness.fixtures import Kube
from harness.spark_operator import SparkOperatorStandIn
from lading_jobs.table.log.commits import TableLog

from .conftest import API, OperatorProcess, apps_of, conditions

pytestmark = [pytest.mark.k8s, pytest.mark.s3, pytest.mark.slow]
PLURAL = "streamcopies"
SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "n", "type": "string"}]


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    with broker() as address:
        yield address


def send(kafka: str, topic: str, ids: range) -> None:
    """One message per id, alternating between partitions 0 and 1."""
    produce(kafka, topic, [(i % 2, str(i).encode(), json.dumps({"id": i, "n": f"n{i}"}).encode()) for i in ids])


def waiter(client: KubeClient, namespace: str, name: str, proc_log: Callable[[], str]) -> Callable[..., Any]:
    # A deadline, not a synchronisation: a driver's JVM start and first batch take ~10 s on an idle machine
    # and minutes on a machine loaded 15x over its cores.
    def wait(pred: Callable[[dict[str, Any]], bool], what: str, timeout: float = 420) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            obj = client.get_or_none(API, PLURAL, namespace, name)
            return obj if obj is not None and pred(obj) else None

        try:
            return wait_until(check, lambda o: o is not None, timeout=timeout, interval=0.3, what=what)
        except Exception as e:
            obj = client.get_or_none(API, PLURAL, namespace, name)
            raise AssertionError(f"{what}: {e}\nstatus: {(obj or {}).get('status')}\n{proc_log()}") from e

    return wait


def caught_up(rows: int) -> Callable[[dict[str, Any]], bool]:
    def pred(obj: dict[str, Any]) -> bool:
        status = obj.get("status") or {}
        return status.get("phase") == "Running" and status.get("rowsTotal") == rows and status.get("lag") == 0

    return pred


def table_ids(s3_client: Any, uri: str) -> list[int]:
    """Every id in the table's current snapshot, read from its parts (pyarrow, no Spark)."""
    log = TableLog.open_existing(uri)
    snap = log.snapshot()
    ids: list[int] = []
    for part in snap.parts:
        bucket, key = snap.part_uri(part)[len("s3://"):].split("/", 1)
        body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
        ids += pq.read_table(io.BytesIO(body), columns=["id"]).column("id").to_pylist()
    return sorted(ids)


def test_a_streamcopy_runs_restarts_suspends_resumes_and_stops_through_the_operator(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        kafka: str, s3_client: Any, bucket: str, s3_secret: str, s3_endpoint: str) -> None:
    client, ns, name = kube.client, kube_namespace, "orders"
    topic = create_topic(kafka, partitions=2, prefix="orders")
    table = f"s3://{bucket}/tables/orders/"
    spec = {"source": {"kafka": {"bootstrapServers": [kafka], "topics": [topic], "startingOffsets": "earliest",
                                 "valueFormat": "json"}},
            "target": {"table": table, "schema": SCHEMA},
            "batching": {"maxBatchInterval": "1s"},
            "connection": {"secretRef": {"name": s3_secret}, "endpoint": s3_endpoint, "region": "us-east-1"}}
    client.create({"apiVersion": API, "kind": "StreamCopy", "metadata": {"name": name, "namespace": ns},
                   "spec": spec}, PLURAL)
    app_name = ""
    wait = waiter(client, ns, name, lambda: operator_process.log()[-3000:] + standin.driver_log(ns, app_name))

    # Running, with rows and lag from the driver's progress as messages arrive.
    send(kafka, topic, range(10))
    obj = wait(caught_up(10), "10 rows loaded, lag 0")
    status = obj["status"]
    app_name = status["sparkApplication"]
    assert status["offsets"] == {f"{topic}:0": 5, f"{topic}:1": 5}
    assert status["lagPartitions"] == {f"{topic}:0": 0, f"{topic}:1": 0}
    assert status["lastBatch"]["end"] and status["batches"] >= 1 and status["progressUpdatedAt"]
    assert conditions(obj)["Ready"]["status"] == "True" and conditions(obj)["Ready"]["reason"] == "Running"
    (app,) = apps_of(client, ns)
    assert app["spec"]["restartPolicy"]["type"] == "OnFailure"

    # A crashed driver (SIGKILL, no clean stop) comes back in the same application; nothing lost or doubled.
    first = standin.runs[(ns, app_name)].process
    assert first is not None
    first.kill()
    send(kafka, topic, range(10, 20))
    obj = wait(caught_up(20), "20 rows loaded after the driver was killed")
    assert obj["status"]["sparkApplication"] == app_name
    assert client.get("sparkoperator.k8s.io/v1beta2", "sparkapplications", ns, app_name)["status"][
        "executionAttempts"] == 2

    # Suspend: the application and its driver go; messages sent meanwhile wait in Kafka.
    client.patch(API, PLURAL, ns, name, {"spec": {"suspend": True}})
    wait(lambda o: conditions(o).get("Ready", {}).get("reason") == "Suspended", "suspended")
    assert apps_of(client, ns) == []
    driver = standin.runs[(ns, app_name)].process
    assert driver is not None and driver.poll() is not None
    send(kafka, topic, range(20, 30))

    # Resume: a new application continues from the committed offsets.
    client.patch(API, PLURAL, ns, name, {"spec": {"suspend": False}})
    obj = wait(caught_up(30), "30 rows loaded after resume")
    resumed = obj["status"]["sparkApplication"]
    assert resumed != app_name
    app_name = resumed
    assert table_ids(s3_client, table) == list(range(30))  # every message exactly once
    assert TableLog.open_existing(table).snapshot().source_progress  # the position is in the table

    # Delete: the application goes (owner reference) and its driver stops.
    client.delete(API, PLURAL, ns, name)
    wait_until(lambda: client.get_or_none(API, PLURAL, ns, name) is None and not apps_of(client, ns), bool,
               timeout=120, interval=0.3, what="the StreamCopy and its application gone")
    last = standin.runs[(ns, resumed)]
    assert last.finished.wait(60) and last.process is not None and last.process.poll() is not None
