"""What the node tier's job tests share: lading resources on the node, their Spark pods, S3 on moto.

Imported as ``node.jobs`` (``tests`` is on pytest's ``pythonpath``; this directory has no
``__init__``, as the tier's modules are found by pytest alone).

- :class:`PodsSeen`: every Spark pod that appears in a namespace while a block runs;
- :func:`spark_pods`, :func:`executor_running_task`: the pods of an application, and the executor
  that has a task running (its own log says so: Spark's ``Executor: Running task``);
- :func:`s3_setup`, :func:`copy_spec`, :func:`spark_sizing`: a bucket and the ``s3`` Secret, a
  CopyJob spec sized for the node's two CPUs;
- :func:`create`, :func:`wait_phase`, :func:`wait_until_true`: resources and waiting on them;
- :func:`slow_query`, :func:`slow_query_rows`: a query that keeps an executor busy, and its answer;
- :func:`published`: what an unload's destination holds (manifest, parts, their rows).
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq

from harness.client import KubeClient
from harness.node import pod_log

API = "lading.io/v1alpha1"
PLURALS = {"CopyJob": "copyjobs", "Compaction": "compactions", "StreamCopy": "streamcopies"}
DONE = ("Succeeded", "Failed", "Cancelled")


class PodsSeen:
    """Every Spark pod that appears in a namespace (of SparkApplication ``app`` if given) while it
    runs (polled once a second)."""

    def __init__(self, client: KubeClient, namespace: str, app: str = "") -> None:
        self.client = client
        self.namespace = namespace
        self.selector = "spark-role" + (f",sparkoperator.k8s.io/app-name={app}" if app else "")
        self.seen: dict[str, str] = {}  # pod name -> spark-role
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(1.0):
            for pod in self.client.list("v1", "pods", self.namespace, label_selector=self.selector):
                self.seen[pod["metadata"]["name"]] = pod["metadata"]["labels"]["spark-role"]

    def __enter__(self) -> PodsSeen:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(10)

    def roles(self) -> list[str]:
        return sorted(self.seen.values())

    def named(self, role: str) -> list[str]:
        return sorted(name for name, r in self.seen.items() if r == role)


def spark_pods(client: KubeClient, namespace: str, role: str, app: str = "") -> list[dict[str, Any]]:
    """The Spark pods of ``role`` (driver, executor), of SparkApplication ``app`` if given."""
    selector = f"spark-role={role}" + (f",sparkoperator.k8s.io/app-name={app}" if app else "")
    return client.list("v1", "pods", namespace, label_selector=selector)


def wait_until_true(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(1)


def executor_running_task(client: KubeClient, namespace: str, app: str, timeout: float) -> str:
    """The name of an executor pod of ``app`` that is running a task: its log has Spark's
    ``Executor: Running task`` line (the executor's log4j is Spark's default, INFO)."""
    found: list[str] = []

    def running() -> bool:
        for pod in spark_pods(client, namespace, "executor", app):
            name = pod["metadata"]["name"]
            if (pod.get("status") or {}).get("phase") == "Running" and \
                    "Running task" in pod_log(client, namespace, name, lines=400):
                found.append(name)
                return True
        return False

    wait_until_true(running, timeout, f"no executor of {app} ran a task in {timeout:.0f} s")
    return found[0]


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


def connection(endpoint: str) -> dict[str, Any]:
    return {"secretRef": {"name": "s3"}, "endpoint": endpoint, "region": "us-east-1"}


def spark_sizing(cores: str = "100m") -> dict[str, Any]:
    """One executor; the driver and the executor each ask for ``cores`` of the node's two CPUs
    (100m: the tier's scenarios run side by side, a dozen Spark pods at a time, tests/node/scenes.py)."""
    return {"executor": {"instances": 1},
            "sparkConf": {"spark.kubernetes.driver.request.cores": cores,
                          "spark.kubernetes.executor.request.cores": cores}}


def copy_spec(source: dict[str, Any], target: str | dict[str, Any], endpoint: str, cores: str = "100m",
              **fields: Any) -> dict[str, Any]:
    """A CopyJob spec: ``target`` a prefix (Parquet files) or a ``to`` of its own (a table)."""
    to = {"files": target, "format": "parquet"} if isinstance(target, str) else target
    return {"from": source, "to": to, "connection": connection(endpoint), "spark": spark_sizing(cores), **fields}


def create(client: KubeClient, namespace: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return client.create({"apiVersion": API, "kind": kind, "metadata": {"name": name, "namespace": namespace},
                          "spec": spec}, PLURALS[kind])


def wait_phase(client: KubeClient, namespace: str, kind: str, name: str, phases: tuple[str, ...] = DONE,
               timeout: float = 600) -> dict[str, Any]:
    """The resource once its ``status.phase`` is one of ``phases``."""
    obj = client.wait_for(API, PLURALS[kind], namespace, name,
                          lambda o: ((o or {}).get("status") or {}).get("phase") in phases,
                          timeout=timeout, interval=1)
    assert obj is not None, f"{kind} {name} not in {phases} after {timeout:.0f} s"
    return obj


def wait_running(client: KubeClient, namespace: str, kind: str, name: str, timeout: float = 300) -> str:
    """The SparkApplication of the resource's run, once the operator has named it."""
    obj = client.wait_for(API, PLURALS[kind], namespace, name,
                          lambda o: bool(((o or {}).get("status") or {}).get("sparkApplication")),
                          timeout=timeout, interval=1)
    assert obj is not None, f"{kind} {name} has no SparkApplication after {timeout:.0f} s"
    return str(obj["status"]["sparkApplication"])


# ~work/5000 ms of CPU per row in an executor (a pure computation: the query sandbox refuses calls
# into Java such as a sleep). Two partitions: two tasks, one after the other on a one-core executor.
def slow_query(rows: int, work: int = 200_000) -> str:
    return (f"SELECT id, aggregate(sequence(1, {work}), 0L, (a, x) -> a + x % (id + 1)) AS pause "
            f"FROM range(0, {rows}, 1, 2)")


def slow_query_rows(rows: int, work: int = 200_000) -> list[tuple[int, int]]:
    """:func:`slow_query`'s answer, computed here (closed form of the sum of ``x mod (id+1)``)."""
    out = []
    for i in range(rows):
        m = i + 1
        full, rest = divmod(work, m)
        out.append((i, full * (m * (m - 1) // 2) + rest * (rest + 1) // 2))
    return out


@dataclass
class Published:
    """What an unload's destination holds: every key, the manifests, the parts and their rows."""

    keys: list[str]
    manifests: list[dict[str, Any]]
    parts: list[str]
    rows: pa.Table | None


def published(s3: Any, bucket: str, prefix: str, manifest_name: str = "_lading_manifest.json") -> Published:
    listing = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    keys = sorted(o["Key"] for o in listing)
    manifests = [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read())
                 for k in keys if k.endswith(manifest_name)]
    parts = [k for k in keys if k.endswith(".parquet")]
    tables = [pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=k)["Body"].read())) for k in parts]
    return Published(keys, manifests, parts, pa.concat_tables(tables) if tables else None)
