"""A tenant's CopyJob cannot publish the pod's secrets: status, Events, the driver's log
and termination message never carry a credential's value (operator → API server →
stand-in → the real Spark app), and the attack of issue 14 is refused.

The Secret holds marker values. One CopyJob raises an error whose text is a
secret's value (however a query came by it); another asks the JVM for the
environment with ``java_method``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from harness.fixtures import Kube
from harness.spark_operator import SparkOperatorStandIn

from .conftest import API, OperatorProcess, apps_of, wait_phase

pytestmark = [pytest.mark.k8s, pytest.mark.s3, pytest.mark.slow]
MARKERS = {"AWS_ACCESS_KEY_ID": "marker-key-id-c41d77", "AWS_SECRET_ACCESS_KEY": "marker-secret-2b8e90",
           "AWS_SESSION_TOKEN": "marker-session-0a6f13"}


def _copyjob(kube: Kube, namespace: str, name: str, query: str, bucket: str, endpoint: str) -> None:
    spec = {"from": {"query": query}, "to": {"files": f"s3://{bucket}/{name}/", "format": "csv"},
            "connection": {"secretRef": {"name": "marker-credentials"}, "endpoint": endpoint, "region": "us-east-1"}}
    kube.client.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": name, "namespace": namespace},
                        "spec": spec}, "copyjobs")


def test_status_events_logs_and_termination_message_carry_no_secret(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        s3_client: Any, bucket: str, s3_endpoint: str) -> None:
    kube.client.create({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "marker-credentials", "namespace": kube_namespace},
                        "data": {k: base64.b64encode(v.encode()).decode() for k, v in MARKERS.items()}}, "secrets")
    leak = " ".join(MARKERS.values())
    _copyjob(kube, kube_namespace, "raises", f"SELECT raise_error('leaking: {leak}') AS x", bucket, s3_endpoint)
    _copyjob(kube, kube_namespace, "reflects",
             "SELECT java_method('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY') AS s", bucket, s3_endpoint)

    raised = wait_phase(kube.client, kube_namespace, "raises", {"Failed", "Succeeded"}, timeout=420)
    reflected = wait_phase(kube.client, kube_namespace, "reflects", {"Failed", "Succeeded"}, timeout=420)
    assert raised["status"]["phase"] == "Failed" and reflected["status"]["phase"] == "Failed"
    assert "leaking: [redacted] [redacted] [redacted]" in raised["status"]["response"]["error"]
    assert "from.query: java_method() is not allowed" in reflected["status"]["response"]["error"]

    def warned(events: list[dict[str, Any]]) -> bool:  # the failure's Event
        return any(e["type"] == "Warning" for e in events)

    published: dict[str, str] = {
        "status": json.dumps([raised["status"], reflected["status"]]),
        "events": json.dumps([e for name in ("raises", "reflects")
                              for e in kube.client.events_about(kube_namespace, name, until=warned)]),
    }
    assert "leaking: [redacted]" in published["events"]  # the failure was reported in an Event ...
    for app in apps_of(kube.client, kube_namespace):
        name = app["metadata"]["name"]
        pod = kube.client.get("v1", "pods", kube_namespace, f"{name}-driver")
        published[f"{name} termination message"] = json.dumps(pod["status"]["containerStatuses"])
        published[f"{name} driver log"] = standin.driver_log(kube_namespace, name)
        assert published[f"{name} driver log"], name
    listing = s3_client.list_objects_v2(Bucket=bucket).get("Contents", [])
    published["outputs"] = "".join(s3_client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read().decode(
        errors="replace") for o in listing)
    assert published["outputs"] == ""  # both failed before writing anything
    for where, text in published.items():  # ... and nothing anywhere carries a secret's value
        for key, value in MARKERS.items():
            assert value not in text, f"{key} in {where}"
