"""The spark-operator stand-in behaves like spark-operator's mutating webhook: the driver pod gets
the SparkApplication's env, envFrom and security contexts, and the driver's environment comes
from the pod (the kubelet's view), so without the webhook there are no credentials."""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path

import pytest

from harness.client import ApiStatusError
from harness.fixtures import ENFORCE
from harness.spark_operator import DRIVER_CONTAINER, SparkOperatorStandIn, _Run
from lading_operator import render

pytestmark = pytest.mark.k8s
SPARK = "sparkoperator.k8s.io/v1beta2"

SPEC = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://bucket/out/"},
        "connection": {"secretRef": {"name": "s3-creds"}, "endpoint": "http://minio:9000", "region": "eu-west-1"}}


def application(kube, namespace: str, name: str) -> dict:  # type: ignore[no-untyped-def]
    run = render.RunIdentity(kind="CopyJob", namespace=namespace, name=name, uid="u-1", generation=1,
                             run_id="r1", run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    app = render.build_sparkapplication(SPEC, run, installation=render.Installation())
    del app["metadata"]["ownerReferences"]  # no owner in this test: the app must not be collected
    return kube.client.create(app, "sparkapplications")  # type: ignore[no-any-return]


@pytest.fixture
def secret(kube, kube_namespace):  # type: ignore[no-untyped-def]
    data = {"AWS_ACCESS_KEY_ID": "AKIDMARKER", "AWS_SECRET_ACCESS_KEY": "s3cr3t-marker",
            # keys a tenant may add to its own Secret: none of them may become a variable of the pods
            "BASH_ENV": "$(touch /tmp/pwned)", "AWS_ENDPOINT_URL": "http://evil.example", "LD_PRELOAD": "/x.so"}
    kube.client.create({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "s3-creds", "namespace": kube_namespace},
                        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}},
                       "secrets")
    return data


def test_driver_pod_and_environment_follow_the_webhook(kube, kube_namespace, secret, tmp_path: Path,
                                                       standin_identity) -> None:
    app = application(kube, kube_namespace, "job-true")
    standin = SparkOperatorStandIn(kube.url, token=standin_identity.token, ca=kube.ca, log_dir=tmp_path)
    try:
        run = _Run(kube_namespace, app["metadata"]["name"])
        pod = standin._create_driver_pod(run, app)  # admitted by Pod Security "restricted"
        stored = kube.client.get("v1", "pods", kube_namespace, pod["metadata"]["name"])
        container = next(c for c in stored["spec"]["containers"] if c["name"] == DRIVER_CONTAINER)
        env = standin._env(app, stored, tmp_path / "termination-log", 4040)
    finally:
        standin.stop()
    driver = app["spec"]["driver"]
    assert kube.client.get("v1", "namespaces", None, kube_namespace)["metadata"]["labels"][ENFORCE] == "restricted"
    assert "envFrom" not in container and "envFrom" not in driver
    assert container["env"] == driver["env"]
    assert container["securityContext"] == render.RESTRICTED_SECURITY_CONTEXT
    assert stored["spec"]["securityContext"] == render.RESTRICTED_POD_SECURITY_CONTEXT
    assert env["AWS_ACCESS_KEY_ID"] == "AKIDMARKER" and env["AWS_SECRET_ACCESS_KEY"] == "s3cr3t-marker"
    assert env["AWS_REGION"] == "eu-west-1"
    assert "AWS_SESSION_TOKEN" not in env  # optional: the Secret has none
    assert not {"BASH_ENV", "AWS_ENDPOINT_URL", "LD_PRELOAD"} & set(env), env


def test_without_the_webhook_the_driver_has_nothing_from_the_application(kube, secret, tmp_path: Path,
                                                                         standin_identity) -> None:
    namespace = kube.create_namespace()  # no Pod Security label: such a pod is admitted there
    try:
        kube.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-creds", "namespace": namespace},
                            "data": {k: base64.b64encode(v.encode()).decode() for k, v in secret.items()}}, "secrets")
        app = application(kube, namespace, "job-false")
        standin = SparkOperatorStandIn(kube.url, token=standin_identity.token, ca=kube.ca, log_dir=tmp_path,
                                       webhook=False)
        try:
            pod = standin._create_driver_pod(_Run(namespace, app["metadata"]["name"]), app)
            stored = kube.client.get("v1", "pods", namespace, pod["metadata"]["name"])
            container = next(c for c in stored["spec"]["containers"] if c["name"] == DRIVER_CONTAINER)
            env = standin._env(app, stored, tmp_path / "termination-log", 4040)
        finally:
            standin.stop()
    finally:
        kube.delete_namespace(namespace)
    assert "envFrom" not in container and "env" not in container and "securityContext" not in container
    assert not stored["spec"].get("securityContext")  # the API server defaults it to {}
    assert not any(k.startswith("AWS_") for k in env)


def test_pod_security_admission_refuses_a_driver_pod_without_the_restricted_context(
        kube, kube_namespace, secret, tmp_path: Path, standin_identity) -> None:
    """The real PodSecurity admission plugin, not the stand-in, decides: the same application's
    driver pod without the webhook's security context is refused in a restricted job namespace,
    and the stand-in reports it as spark-operator does (SUBMISSION_FAILED, the server's words)."""
    app = application(kube, kube_namespace, "unsafe")
    name = app["metadata"]["name"]
    with SparkOperatorStandIn(kube.url, token=standin_identity.token, ca=kube.ca, log_dir=tmp_path,
                              webhook=False) as standin:
        with pytest.raises(ApiStatusError) as refused:
            standin._create_driver_pod(_Run(kube_namespace, name), app)
        state = kube.client.wait_for(
            SPARK, "sparkapplications", kube_namespace, name,
            lambda a: ((a or {}).get("status") or {}).get("applicationState", {}).get("state") == "SUBMISSION_FAILED",
            timeout=60)
    assert refused.value.code == 403
    assert 'violates PodSecurity "restricted:latest"' in refused.value.message
    assert "allowPrivilegeEscalation != false" in refused.value.message and "runAsNonRoot" in refused.value.message
    assert state is not None
    assert "violates PodSecurity" in state["status"]["applicationState"]["errorMessage"]
    assert kube.client.get_or_none("v1", "pods", kube_namespace, f"{name}-driver") is None
