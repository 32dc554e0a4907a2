"""The stand-in's ``k8s`` mode submits as spark-operator does: the spark-submit arguments and pod
templates it derives from a SparkApplication lading renders, and the state it reads from the
driver pod (no cluster needed: harness.spark_submit is pure)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import yaml

from harness import spark_submit
from lading_operator import render

SPEC = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://bucket/out/"},
        "connection": {"secretRef": {"name": "s3-creds"}, "endpoint": "http://minio:9000", "region": "eu-west-1"},
        "spark": {"driver": {"cores": 2, "memory": "2g"}, "executor": {"instances": 3, "memory": "3g"},
                  "sparkConf": {"spark.sql.shuffle.partitions": "7"}}}


def application() -> dict:  # type: ignore[type-arg]
    run = render.RunIdentity(kind="CopyJob", namespace="ns", name="export", uid="u-1", generation=1,
                             run_id="r1", run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    app = render.build_sparkapplication(SPEC, run, installation=render.Installation(
        image="registry.example/lading:1", image_pull_policy="Never"))
    app["metadata"]["uid"] = "app-uid"
    return app


def confs(args: list[str]) -> dict[str, str]:
    return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--conf")


def test_submit_args_carry_what_spark_operator_derives_from_the_spec(tmp_path: Path) -> None:
    app = application()
    templates = spark_submit.write_pod_templates(app, tmp_path)
    args = spark_submit.submit_args(app, "k8s://https://10.0.0.1:443", "sub-1", templates)
    assert args[:4] == ["--master", "k8s://https://10.0.0.1:443", "--deploy-mode", "cluster"]
    assert args[args.index("--name") + 1] == app["metadata"]["name"]
    conf = confs(args)
    name = app["metadata"]["name"]
    assert conf["spark.kubernetes.namespace"] == "ns"
    assert conf["spark.kubernetes.container.image"] == "registry.example/lading:1"
    assert conf["spark.kubernetes.container.image.pullPolicy"] == "Never"
    assert conf["spark.kubernetes.driver.container.image"] == conf["spark.kubernetes.executor.container.image"]
    assert conf["spark.kubernetes.submission.waitAppCompletion"] == "false"
    assert conf["spark.kubernetes.driver.pod.name"] == f"{name}-driver"
    assert conf["spark.driver.cores"] == "2" and conf["spark.driver.memory"] == "2g"
    assert conf["spark.executor.instances"] == "3" and conf["spark.executor.memory"] == "3g"
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "lading-spark"
    assert conf["spark.sql.shuffle.partitions"] == "7"
    assert conf["spark.kubernetes.pyspark.pythonVersion"] == "3"
    for role in ("driver", "executor"):
        assert conf[f"spark.kubernetes.{role}.label.sparkoperator.k8s.io/app-name"] == name
        assert conf[f"spark.kubernetes.{role}.label.sparkoperator.k8s.io/submission-id"] == "sub-1"
        assert conf[f"spark.kubernetes.{role}.label.lading.io/run-id"] == "r1"
        assert conf[f"spark.kubernetes.{role}.podTemplateFile"] == str(templates[role])
    # the main file, then the application's arguments, last
    assert args[-3:] == [render.MAIN_APPLICATION_FILE, *app["spec"]["arguments"]]


def test_pod_templates_carry_the_webhooks_mutations(tmp_path: Path) -> None:
    app = application()
    templates = spark_submit.write_pod_templates(app, tmp_path)
    driver = yaml.safe_load(templates["driver"].read_text())
    container = driver["spec"]["containers"][0]
    assert container["name"] == "spark-kubernetes-driver"
    assert container["securityContext"] == app["spec"]["driver"]["securityContext"]
    assert driver["spec"]["securityContext"] == app["spec"]["driver"]["podSecurityContext"]
    # credentials by reference only, as the app has them
    assert container["env"] == app["spec"]["driver"]["env"]
    assert all("value" not in e for e in container["env"] if e["name"].startswith("AWS_SECRET"))
    assert driver["metadata"]["ownerReferences"][0]["uid"] == "app-uid"
    executor = yaml.safe_load(templates["executor"].read_text())
    assert executor["spec"]["containers"][0]["name"] == "spark-kubernetes-executor"
    assert executor["spec"]["containers"][0]["env"] == app["spec"]["executor"]["env"]
    assert "ownerReferences" not in executor["metadata"]  # Spark's executors are owned by the driver pod


def pod(phase: str, exit_code: int | None = None, reason: str = "") -> dict:  # type: ignore[type-arg]
    state = {"terminated": {"exitCode": exit_code, "reason": reason}} if exit_code is not None else {}
    return {"status": {"phase": phase, "containerStatuses": [{"name": "spark-kubernetes-driver", "state": state}]}}


def test_application_state_follows_the_driver_pod_as_spark_operator_does() -> None:
    assert spark_submit.application_state(pod("Pending")) == ("SUBMITTED", "")
    assert spark_submit.application_state(pod("Running")) == ("RUNNING", "")
    assert spark_submit.application_state(pod("Succeeded", 0, "Completed")) == ("SUCCEEDING", "")
    assert spark_submit.application_state(pod("Failed", 1, "Error")) == (
        "FAILING", "driver container failed with ExitCode: 1, Reason: Error")
    assert spark_submit.application_state(None) == ("FAILING", "driver pod not found")
    assert spark_submit.application_state({"status": {"phase": "Failed"}}) == (
        "FAILING", "driver container status missing")
