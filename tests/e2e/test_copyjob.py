"""CopyJob end to end: kopf operator (a process) → API emulator → spark-operator
stand-in → the real Spark app → moto S3, and back to status.

Real Spark runs are expensive (a JVM each), so each test runs at most one or two.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.fixtures import Kube
from harness.spark_operator import SparkOperatorStandIn

from .conftest import API, OperatorProcess, apps_of, conditions, wait_phase

pytestmark = [pytest.mark.k8s, pytest.mark.s3, pytest.mark.slow]
SOURCE_ROWS = 500


@pytest.fixture
def source(s3_client: Any, bucket: str) -> str:
    """A Parquet source of SOURCE_ROWS rows in S3; returns its prefix."""
    table = pa.table({"id": pa.array(range(SOURCE_ROWS), pa.int64()),
                      "name": pa.array([f"n{i}" for i in range(SOURCE_ROWS)])})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    s3_client.put_object(Bucket=bucket, Key="src/part-0.parquet", Body=buf.getvalue())
    return f"s3://{bucket}/src/"


def unload_spec(source: str, bucket: str, secret: str, endpoint: str, query: str = "SELECT * FROM src",
                to: str = "out/", **extra: Any) -> dict[str, Any]:
    return {
        "from": {"query": query, "inputs": [{"name": "src", "files": source, "format": "parquet"}]},
        "to": {"files": f"s3://{bucket}/{to}", "format": "csv"},
        "connection": {"secretRef": {"name": secret}, "endpoint": endpoint, "region": "us-east-1"},
        **extra,
    }


def keys(s3_client: Any, bucket: str, prefix: str) -> list[str]:
    listing = s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for o in listing.get("Contents", [])]


def pending_uploads(s3_client: Any, bucket: str) -> list[str]:
    return [u["Key"] for u in s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


def test_copyjob_succeeds_with_rows_and_manifest(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        s3_client: Any, bucket: str, source: str, s3_secret: str, s3_endpoint: str) -> None:
    spec = unload_spec(source, bucket, s3_secret, s3_endpoint)
    kube.client.create({"apiVersion": API, "kind": "CopyJob",
                        "metadata": {"name": "export", "namespace": kube_namespace}, "spec": spec}, "copyjobs")
    done = wait_phase(kube.client, kube_namespace, "export", {"Succeeded", "Failed"})
    status = done["status"]
    assert status["phase"] == "Succeeded", (status, operator_process.log())
    assert status["response"]["rows"] == SOURCE_ROWS
    manifest = status["output"]["manifest"]
    assert manifest.startswith(f"s3://{bucket}/out/")
    manifest_key = manifest.split("/", 3)[3]
    s3_client.head_object(Bucket=bucket, Key=manifest_key)
    assert status["output"]["files"] >= 1
    data_keys = [k for k in keys(s3_client, bucket, "out/") if k != manifest_key]
    lines = sum(s3_client.get_object(Bucket=bucket, Key=k)["Body"].read().count(b"\n") for k in data_keys)
    assert lines == SOURCE_ROWS
    cond = conditions(done)
    assert cond["Succeeded"]["status"] == "True" and cond["Ready"]["status"] == "True"
    assert cond["Ready"]["observedGeneration"] == done["metadata"]["generation"]
    assert status["observedGeneration"] == done["metadata"]["generation"]
    apps = apps_of(kube.client, kube_namespace)
    assert [a["metadata"]["name"] for a in apps] == [status["sparkApplication"]]
    owner = apps[0]["metadata"]["ownerReferences"][0]
    assert owner["uid"] == done["metadata"]["uid"] and owner["controller"] is True
    events = kube.client.list("v1", "events", kube_namespace)
    reasons = [e["reason"] for e in events if e["involvedObject"]["name"] == "export"]
    assert "Submitted" in reasons and "Succeeded" in reasons
    # No credentials leak into the resource, its status or events.
    assert "testing" not in json.dumps(done) + json.dumps(events)
