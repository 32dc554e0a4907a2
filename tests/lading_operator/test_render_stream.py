"""A StreamCopy's SparkApplication: restarted on failure with backoff, progress port on the driver,
the Kafka Secret mounted on the driver and every executor; valid for the upstream CRD, and its job
document parses in the stream engine."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from lading_operator import kinds, render, render_stream
from lading_spec.job import parse_job_document
from lading_spec.streamcopy import KAFKA_PROPERTIES_DIR, parse_streamcopy
from lading_spec.streamprogress import PROGRESS_PORT

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = [REPO / "shared/upstream/sparkoperator.k8s.io_sparkapplications.yaml",
            REPO.parent / "shared/upstream/sparkoperator.k8s.io_sparkapplications.yaml"]


def upstream_schema() -> dict[str, Any]:
    crd = yaml.safe_load(next(p for p in UPSTREAM if p.exists()).read_text())
    return dict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def example(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "examples" / name).read_text()))


def rendered(spec: dict[str, Any]) -> dict[str, Any]:
    run = render.RunIdentity(kind="StreamCopy", namespace="data", name="orders-from-kafka", uid="u-1",
                             generation=3, run_id="abcd1234", run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    return render.build_sparkapplication(spec, run, operator_fields=kinds.STREAMCOPY.operator_fields,
                                         continuous=True)


@pytest.mark.parametrize("name", ["streamcopy-kafka.yaml", "streamcopy-files.yaml"])
def test_the_examples_render_valid_applications(name: str) -> None:
    app = rendered(example(name)["spec"])
    jsonschema.validate(app, upstream_schema())
    assert app["metadata"]["name"] == "orders-from-kafka-streamcopy-abcd1234-1"
    doc = parse_job_document(app["spec"]["arguments"][1])
    assert doc.kind == "StreamCopy" and doc.generation == 3
    parse_streamcopy(doc.spec)  # the engine's own parser accepts what the operator sends
    assert "spark" not in doc.spec


def test_a_crashed_driver_is_restarted_with_backoff() -> None:
    policy = rendered(example("streamcopy-files.yaml")["spec"])["spec"]["restartPolicy"]
    assert policy["type"] == "OnFailure"  # a driver that stopped on purpose exits 0: not restarted
    assert policy["onFailureRetries"] >= 10 and policy["onFailureRetryInterval"] >= 5
    assert policy["onSubmissionFailureRetries"] >= 1 and policy["onSubmissionFailureRetryInterval"] >= 5


def test_the_driver_serves_progress_on_a_named_pod_port() -> None:
    driver = rendered(example("streamcopy-files.yaml")["spec"])["spec"]["driver"]
    assert {"name": "progress", "containerPort": PROGRESS_PORT, "protocol": "TCP"} in driver["ports"]
    assert {"name": "LADING_PROGRESS_PORT", "value": str(PROGRESS_PORT)} in driver["env"]


def test_the_kafka_secret_is_mounted_on_the_driver_and_every_executor() -> None:
    spec = example("streamcopy-kafka.yaml")["spec"]
    app = rendered(spec)["spec"]
    for role in ("driver", "executor"):
        pod = app[role]
        assert pod["secrets"] == [{"name": "kafka-credentials", "path": KAFKA_PROPERTIES_DIR,
                                   "secretType": "Generic"}]
        assert {"name": "LADING_KAFKA_PROPERTIES_DIR", "value": KAFKA_PROPERTIES_DIR} in pod["env"]
        assert {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {  # S3 credentials as before
            "name": "s3-credentials", "key": "AWS_SECRET_ACCESS_KEY", "optional": True}}} in pod["env"]
    # Only names travel: nothing of the Secret's content, and the job document holds no Secret data.
    assert "sasl" not in json.dumps(app["arguments"]).replace("sasl.mechanism", "")


def test_a_files_stream_mounts_no_kafka_secret() -> None:
    app = rendered(example("streamcopy-files.yaml")["spec"])["spec"]
    assert "secrets" not in app["driver"] and "secrets" not in app["executor"]
    assert not any(e["name"] == "LADING_KAFKA_PROPERTIES_DIR" for e in app["driver"].get("env") or [])


def test_one_shot_kinds_keep_never() -> None:
    run = render.RunIdentity(kind="CopyJob", namespace="d", name="x", uid="u", generation=1, run_id="r",
                             run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    app = render.build_sparkapplication({"from": {"table": "s3://b/t/"}, "to": {"files": "s3://b/o/"}}, run)
    assert app["spec"]["restartPolicy"] == {"type": "Never"} and "ports" not in app["spec"]["driver"]


@pytest.mark.parametrize(("pod", "address"), [
    ({"status": {"podIP": "10.1.2.3"}}, f"http://10.1.2.3:{PROGRESS_PORT}"),
    ({"status": {"podIP": "fd00::5"}}, f"http://[fd00::5]:{PROGRESS_PORT}"),
    ({"status": {"podIP": "127.0.0.1"},
      "spec": {"containers": [{"name": "c", "ports": [{"name": "progress", "containerPort": 41234}]}]}},
     "http://127.0.0.1:41234"),
    ({"status": {}}, None),
    ({"status": {"podIP": "10.0.0.1/evil@host"}}, None),
    (None, None),
])
def test_the_progress_address_comes_from_the_driver_pod(pod: Any, address: str | None) -> None:
    assert render_stream.progress_address(pod) == address
