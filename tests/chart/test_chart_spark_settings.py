"""Chart values reach the SparkApplications: `helm template` with non-default values, then a
CopyJob rendered by the operator's own code (``lading_operator.render``) with the environment
the chart gives the operator container."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from chart import helm

from lading_operator import controller, render
from lading_operator.observed import START_TIMEOUT

ROOT = Path(__file__).resolve().parents[2]
CUSTOM: dict[str, Any] = {
    "image": {"repository": "registry.example.com/data/lading", "tag": "2.3.4", "pullPolicy": "Always"},
    "imagePullSecrets": ["regcred", "mirror-cred"],
    "spark": {"jobNamespaces": ["analytics"], "serviceAccount": {"name": "spark-runner"}},
    "operator": {"healthPort": 8181},
}


def operator_container(values: dict[str, Any]) -> dict[str, Any]:
    dep = helm.one(helm.render(values), "Deployment")
    return dict(dep["spec"]["template"]["spec"]["containers"][0])


def chart_env(values: dict[str, Any]) -> dict[str, str]:
    """The operator container's environment (plain values; extraEnv included)."""
    return {e["name"]: str(e["value"]) for e in operator_container(values)["env"] if "value" in e}


def copyjob_spec() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "examples" / "unload-parquet.yaml").read_text())
    return dict(doc["spec"])


RUN = render.RunIdentity(kind="CopyJob", namespace="analytics", name="orders", uid="u-1", generation=1,
                         run_id="r1", run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))


def test_custom_values_reach_the_sparkapplication() -> None:
    env = chart_env(CUSTOM)
    app = render.build_sparkapplication(copyjob_spec(), RUN, installation=render.installation_from_env(env))
    spec = app["spec"]
    assert spec["image"] == "registry.example.com/data/lading:2.3.4"
    assert spec["imagePullPolicy"] == "Always"
    assert spec["imagePullSecrets"] == ["regcred", "mirror-cred"]
    assert spec["driver"]["serviceAccount"] == spec["executor"]["serviceAccount"] == "spark-runner"
    # the operator pod itself runs the same image, and the chart creates that ServiceAccount
    assert operator_container(CUSTOM)["image"] == spec["image"]
    accounts = {(o["metadata"]["namespace"], o["metadata"]["name"])
                for o in helm.by_kind(helm.render(CUSTOM), "ServiceAccount")}
    assert ("analytics", "spark-runner") in accounts


def test_the_operator_reads_the_same_environment_through_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the operator process does: no installation passed, the environment is read."""
    for name, value in chart_env(CUSTOM).items():
        monkeypatch.setenv(name, value)
    app = render.build_sparkapplication(copyjob_spec(), RUN)
    assert app["spec"]["image"] == "registry.example.com/data/lading:2.3.4"
    assert app["spec"]["driver"]["serviceAccount"] == "spark-runner"


def test_a_resource_still_chooses_its_own_image_and_account() -> None:
    spec = copyjob_spec()
    spec["spark"] = {"image": "registry.example.com/data/lading:canary", "serviceAccount": "other",
                     "imagePullPolicy": "IfNotPresent"}
    app = render.build_sparkapplication(spec, RUN, installation=render.installation_from_env(chart_env(CUSTOM)))
    assert app["spec"]["image"] == "registry.example.com/data/lading:canary"
    assert app["spec"]["imagePullPolicy"] == "IfNotPresent"
    assert app["spec"]["driver"]["serviceAccount"] == "other"
    assert app["spec"]["imagePullSecrets"] == ["regcred", "mirror-cred"]


def test_default_values_and_the_operators_defaults_agree() -> None:
    """Without the environment (lading render on a laptop) render uses what the chart defaults to."""
    from_chart = render.installation_from_env(chart_env({}))
    assert render.installation_from_env({}) == render.Installation(image_pull_policy=None)
    assert from_chart.image == render.DEFAULT_IMAGE
    assert from_chart.service_account == render.DEFAULT_SERVICE_ACCOUNT
    assert from_chart.image_pull_secrets == ()


def test_kopf_liveness_endpoint_follows_the_health_port() -> None:
    c = operator_container(CUSTOM)
    liveness = urlsplit(chart_env(CUSTOM)["LADING_LIVENESS"])
    port = {p["name"]: p["containerPort"] for p in c["ports"]}["healthz"]
    assert liveness.port == port == 8181 and liveness.path == c["livenessProbe"]["httpGet"]["path"]
    assert c["livenessProbe"]["httpGet"]["port"] == "healthz"


@pytest.mark.parametrize(("name", "value", "needle"), [
    ("LADING_SPARK_IMAGE", "has space", "image reference"),
    ("LADING_SPARK_IMAGE_PULL_POLICY", "Sometimes", "accepted: Always"),
    ("LADING_SPARK_IMAGE_PULL_SECRETS", "ok,Not_A_Name", "not a Secret name"),
    ("LADING_SPARK_SERVICE_ACCOUNT", "Spark Runner", "not a ServiceAccount name"),
])
def test_a_bad_setting_names_the_variable(name: str, value: str, needle: str) -> None:
    with pytest.raises(ValueError, match=f"{name}.*{needle}"):
        render.installation_from_env({name: value})


@pytest.mark.parametrize(("address", "liveness"), [
    (None, "http://0.0.0.0:8080/healthz"),
    ("::", "http://[::]:8080/healthz"),
    ("10.0.0.7", "http://10.0.0.7:8080/healthz"),
])
def test_listen_address_reaches_metrics_and_liveness(address: str | None, liveness: str) -> None:
    values: dict[str, Any] = {} if address is None else {"operator": {"listenAddress": address}}
    env = chart_env(values)
    assert env["LADING_LIVENESS"] == liveness
    assert env["LADING_METRICS_ADDRESS"] == (address or "0.0.0.0")
    assert urlsplit(liveness).hostname == (address or "0.0.0.0")  # what kopf binds


def test_each_job_namespace_can_have_its_own_service_account_annotations() -> None:
    """Not one IRSA role for every tenant: per-namespace annotations, merged over the common ones."""
    role = "eks.amazonaws.com/role-arn"
    values = {"spark": {"jobNamespaces": ["analytics", "marketing", "batch"], "serviceAccount": {
        "annotations": {"example.com/team-owned": "yes"},
        "annotationsByNamespace": {"analytics": {role: "arn:aws:iam::1:role/analytics"},
                                   "marketing": {role: "arn:aws:iam::1:role/marketing",
                                                 "example.com/team-owned": "no"}}}}}
    accounts = {o["metadata"]["namespace"]: o["metadata"].get("annotations", {})
                for o in helm.by_kind(helm.render(values), "ServiceAccount")
                if o["metadata"]["name"] == "lading-spark"}
    assert accounts == {
        "analytics": {role: "arn:aws:iam::1:role/analytics", "example.com/team-owned": "yes"},
        "marketing": {role: "arn:aws:iam::1:role/marketing", "example.com/team-owned": "no"},
        "batch": {"example.com/team-owned": "yes"},
    }


def test_annotations_for_a_namespace_that_is_not_a_job_namespace_fail_the_install() -> None:
    values = {"spark": {"jobNamespaces": ["analytics"], "serviceAccount": {
        "annotationsByNamespace": {"analytcs": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"}}}}}
    result = helm.run_helm("template", helm.RELEASE, str(helm.CHART), "--namespace", helm.NAMESPACE, values=values)
    assert result.returncode != 0
    assert 'annotationsByNamespace names "analytcs", which is not a job namespace (analytics)' in result.stderr


def test_the_start_timeout_reaches_the_operator() -> None:
    """operator.startTimeout is LADING_START_TIMEOUT, which the operator reads (controller.start_timeout);
    the chart's default is the operator's own."""
    assert controller.start_timeout(chart_env({"operator": {"startTimeout": 600}})) == 600.0
    assert chart_env({})["LADING_START_TIMEOUT"] == "120"
    assert controller.start_timeout(chart_env({})) == controller.start_timeout({}) == START_TIMEOUT


@pytest.mark.parametrize("value", [0, -5, "soon"])
def test_a_start_timeout_that_is_not_a_positive_number_fails_the_install(value: Any) -> None:
    result = helm.run_helm("template", helm.RELEASE, str(helm.CHART), "--namespace", helm.NAMESPACE,
                           values={"operator": {"startTimeout": value}})
    assert result.returncode != 0 and "startTimeout" in result.stderr


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "inf"])
def test_a_bad_start_timeout_names_the_variable(value: str) -> None:
    with pytest.raises(ValueError, match="LADING_START_TIMEOUT.*positive number of seconds"):
        controller.start_timeout({"LADING_START_TIMEOUT": value})
