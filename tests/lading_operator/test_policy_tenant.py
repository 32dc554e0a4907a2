"""The tenant boundary through the policy path and ``lading render --policy``: variables, JVM
options, pods and sizes a strict policy refuses by name (issue 28, items 4 to 6)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml

from lading_operator import policy as pol
from lading_operator import render_cli

IMAGE, ACCOUNT = "ghcr.io/lading/lading:0.1.0", "lading-spark"
STRICT = """\
allowedPrefixes: {default: ["s3://"]}
sparkConf:
  default: ["spark.executorEnv.TZ", "spark.kubernetes.driverEnv.TZ", "spark.driver.extraJavaOptions",
            "spark.executor.extraJavaOptions", "spark.kubernetes."]
"""


def render(tmp_path: Path, spark: dict[str, object], policy_text: str = STRICT) -> tuple[int, str]:
    """``lading render --policy`` on a CopyJob with ``spec.spark``: exit code and stderr."""
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "lading.io/v1alpha1", "kind": "CopyJob", "metadata": {"name": "j", "namespace": "team-a"},
        "spec": {"from": {"query": "SELECT 1"}, "to": {"files": "s3://out/x/"}, "spark": spark}}))
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = render_cli.main([str(manifest), "--policy", str(policy)])
    return code, err.getvalue()


ENV_PAYLOADS = ["BASH_ENV", "ENV", "SHELLOPTS", "PS4", "GLIBC_TUNABLES", "OPENSSL_CONF", "NSS_WRAPPER_HOSTS",
                "HOSTALIASES", "ALL_PROXY", "LD_PRELOAD", "JAVA_TOOL_OPTIONS"]


@pytest.mark.parametrize("prefix", ["spark.kubernetes.driverEnv.", "spark.executorEnv.", "spark.yarn.appMasterEnv."])
@pytest.mark.parametrize("name", ENV_PAYLOADS)
def test_render_policy_refuses_each_unsafe_variable_by_name(tmp_path: Path, prefix: str, name: str) -> None:
    code, err = render(tmp_path, {"sparkConf": {prefix + name: "$(touch /tmp/pwned)"}})
    assert code == 2 and f"spark.sparkConf.{prefix}{name}" in err and "never allowed" in err, err


def test_variables_only_by_their_exact_name(tmp_path: Path) -> None:
    assert render(tmp_path, {"sparkConf": {"spark.executorEnv.TZ": "UTC"}})[0] == 0
    # "spark.kubernetes." is listed as a prefix: it covers annotations, never a variable
    code, err = render(tmp_path, {"sparkConf": {"spark.kubernetes.driverEnv.TEAM": "a"}})
    assert code == 2 and "spec.spark.sparkConf.spark.kubernetes.driverEnv.TEAM: not an allowed" in err, err
    assert render(tmp_path, {"sparkConf": {"spark.kubernetes.driver.annotation.team": "a"}})[0] == 0


@pytest.mark.parametrize(("entry", "needle"), [
    ("spark.executorEnv.", "name each variable exactly"),
    ("spark.kubernetes.driverEnv.", "name each variable exactly"),
    ("spark.yarn.appMasterEnv.", "name each variable exactly"),
    ("spark.executorEnv.BASH_ENV", "can never be allowed"),
    ("spark.kubernetes.driverEnv.GLIBC_TUNABLES", "can never be allowed"),
    ("spark.executorEnv.ALL_PROXY", "can never be allowed"),
])
def test_a_policy_cannot_allow_a_prefix_of_variables_or_an_unsafe_one(tmp_path: Path, entry: str,
                                                                     needle: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(f"sparkConf: {{default: ['{entry}']}}\n")
    with pytest.raises(pol.PolicyError, match=needle):
        pol.load_policy(str(path))


@pytest.mark.parametrize("key", ["spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"])
@pytest.mark.parametrize("value", ['"-java\\agent:/path/agent.jar"', "-Xss4m\u2028-javaagent:/path/agent.jar",
                                   "-Xrunjdwp:transport=dt_socket,server=y,suspend=n",
                                   '"-XX:\\OnOutOfMemoryError=touch /tmp/x" -XX:MaxMetaspaceSize=24m'])
def test_render_policy_refuses_jvm_payloads_in_an_allowed_key(tmp_path: Path, key: str, value: str) -> None:
    code, err = render(tmp_path, {"sparkConf": {key: value}})
    assert code == 2 and f"spark.sparkConf.{key}" in err, err
    assert render(tmp_path, {"sparkConf": {key: "-XX:+UseG1GC -Xss4m"}})[0] == 0
