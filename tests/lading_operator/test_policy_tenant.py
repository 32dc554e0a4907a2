"""The tenant boundary through the policy path and ``lading render --policy``: variables, JVM
options, pods and sizes a strict policy refuses by name (issue 28, items 4 to 6)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

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


PRIVILEGED = [
    ({"podSecurityContext": {"runAsUser": 0}}, "spark.podSecurityContext.runAsUser"),
    ({"securityContext": {"runAsUser": 0}}, "spark.securityContext.runAsUser"),
    ({"podSecurityContext": {"runAsNonRoot": False}}, "spark.podSecurityContext.runAsNonRoot"),
    ({"securityContext": {"runAsNonRoot": False}}, "spark.securityContext.runAsNonRoot"),
    ({"securityContext": {"capabilities": {"add": ["SYS_ADMIN", "NET_ADMIN", "SYS_PTRACE"], "drop": ["ALL"]}}},
     "spark.securityContext.capabilities.add"),
    ({"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE", "CAP_SYS_ADMIN"], "drop": ["ALL"]}}},
     "spark.securityContext.capabilities.add"),
    ({"securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}, "spark.securityContext.capabilities.drop"),
    ({"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}, "spark.securityContext.capabilities.drop"),
    ({"podSecurityContext": {"seccompProfile": {"type": "Unconfined"}}},
     "spark.podSecurityContext.seccompProfile.type"),
    ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}, "spark.securityContext.seccompProfile.type"),
    ({"securityContext": {"allowPrivilegeEscalation": True}}, "spark.securityContext.allowPrivilegeEscalation"),
    ({"securityContext": {"privileged": True}}, "spark.securityContext.privileged"),
    ({"hostNetwork": True}, "spark.hostNetwork"),
]


@pytest.mark.parametrize(("spark", "field"), PRIVILEGED)
def test_render_policy_refuses_each_privileged_setting_by_name(tmp_path: Path, spark: dict[str, object],
                                                                field: str) -> None:
    code, err = render(tmp_path, spark)
    assert code == 2 and f"spec.{field}: " in err, err


@pytest.mark.parametrize(("spark", "field"), PRIVILEGED)
def test_the_operator_refuses_each_privileged_setting(spark: dict[str, object], field: str) -> None:
    import datetime as dt

    from lading_operator import kinds, reconcile

    spec = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://out/x/"}, "spark": spark}
    strict = pol.parse_policy(yaml.safe_load(STRICT))

    def check(namespace: str, uris: list[tuple[str, str]], spark: object) -> str | None:
        return pol.check_resource(strict, namespace, uris, spark, IMAGE, ACCOUNT)

    verdict = reconcile.validate(kinds.COPYJOB, spec, "team-a", check, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert verdict is not None and verdict[1].startswith(f"spec.{field}: "), verdict


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """Pod Security "restricted" (the pod-security-admission checks that concern what lading
    renders), on one rendered driver or executor: the container level wins over the pod level."""
    pod_sc, sc = pod.get("podSecurityContext") or {}, pod.get("securityContext") or {}
    out = []
    if sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
        out.append("runAsNonRoot")
    if 0 in (sc.get("runAsUser"), pod_sc.get("runAsUser")):
        out.append("runAsUser")
    if sc.get("allowPrivilegeEscalation") is not False:
        out.append("allowPrivilegeEscalation")
    caps = sc.get("capabilities") or {}
    if "ALL" not in (caps.get("drop") or []) or set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
        out.append("capabilities")
    types = {(level.get("seccompProfile") or {}).get("type") for level in (sc, pod_sc)} - {None}
    if not types or not types <= {"RuntimeDefault", "Localhost"}:
        out.append("seccompProfile")
    if sc.get("privileged") or any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")):
        out.append("host namespaces or privileged")
    if any(p.get("hostPort") for p in pod.get("ports") or []):
        out.append("hostPort")
    return out


@pytest.mark.parametrize("spark", [
    {},
    {"driver": {"memory": "11g"}, "executor": {"memory": "11g"}},  # 15.4g each
    {"executor": {"memory": "14g"}, "sparkConf": {"spark.executor.memoryOverheadFactor": "0.1",
                                                  "spark.driver.memoryOverheadFactor": "1.5"}},
    {"podSecurityContext": {"runAsUser": 1000, "fsGroup": 1000}},
    {"podSecurityContext": {"runAsGroup": 0, "supplementalGroups": [0]}},
    {"securityContext": {"readOnlyRootFilesystem": True}},
    {"securityContext": {"runAsUser": 185, "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL", "NET_RAW"]}}},
    {"podSecurityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}},
     "securityContext": {"allowPrivilegeEscalation": False}},
])
@pytest.mark.parametrize("kind", ["CopyJob", "StreamCopy"])
def test_every_pod_lading_renders_meets_restricted(kind: str, spark: dict[str, object]) -> None:
    import datetime as dt

    from lading_operator import render

    spec: dict[str, object] = (
        {"from": {"query": "SELECT 1"}, "to": {"files": "s3://out/x/"}} if kind == "CopyJob" else
        {"source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["t"], "secretRef": {"name": "k"}}},
         "target": {"table": "s3://bkt/t/"}})
    run = render.RunIdentity(kind=kind, namespace="team-a", name="j", uid="u", generation=1, run_id="r",
                             run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    app = render.build_sparkapplication({**spec, "spark": spark}, run, continuous=kind == "StreamCopy",
                                        installation=render.Installation())
    for role in ("driver", "executor"):
        assert restricted_violations(app["spec"][role]) == [], (role, app["spec"][role])


CAPPED = STRICT + "limits:\n  default: {executors: 10, cores: 4, memory: 16g}\n  namespaces: {batch: {executors: 2000}}\n"


@pytest.mark.parametrize(("spark", "field"), [
    ({"executor": {"instances": 1}, "sparkConf": {"spark.dynamicAllocation.minExecutors": "2000"}},
     "spec.spark.sparkConf.spark.dynamicAllocation.minExecutors"),
    ({"sparkConf": {"spark.dynamicAllocation.maxExecutors": "11"}}, "spec.spark.sparkConf.spark.dynamicAllocation.maxExecutors"),
    ({"sparkConf": {"spark.dynamicAllocation.initialExecutors": "500"}},
     "spec.spark.sparkConf.spark.dynamicAllocation.initialExecutors"),
    ({"sparkConf": {"spark.dynamicAllocation.enabled": "true"}}, "spec.spark.sparkConf.spark.dynamicAllocation.maxExecutors"),
    ({"executor": {"instances": 11}}, "spec.spark.executor.instances"),
    ({"sparkConf": {"spark.executor.memoryOverhead": "64g"}}, "spec.spark.sparkConf.spark.executor.memoryOverhead"),
    ({"sparkConf": {"spark.driver.memoryOverhead": "64g"}}, "spec.spark.sparkConf.spark.driver.memoryOverhead"),
    ({"sparkConf": {"spark.memory.offHeap.size": "256g"}}, "spec.spark.sparkConf.spark.memory.offHeap.size"),
    ({"sparkConf": {"spark.executor.pyspark.memory": "32g"}}, "spec.spark.sparkConf.spark.executor.pyspark.memory"),
    ({"sparkConf": {"spark.executor.memoryOverheadFactor": "20"}},
     "spec.spark.sparkConf.spark.executor.memoryOverheadFactor"),
    ({"executor": {"memory": "64g"}}, "spec.spark.executor.memory"),
    # a Python application's pods ask for the heap + 40 % (Spark's NON_JVM_MEMORY_OVERHEAD_FACTOR): 16.8g > 16g
    ({"driver": {"memory": "12g"}}, "spec.spark.driver.memory"),
    ({"executor": {"memory": "12g"}}, "spec.spark.executor.memory"),
    # the driver passes its factor on to the executors (as spark.kubernetes.memoryOverheadFactor)
    ({"executor": {"memory": "8g"}, "sparkConf": {"spark.driver.memoryOverheadFactor": "1.5"}},
     "spec.spark.sparkConf.spark.driver.memoryOverheadFactor"),
    ({"sparkConf": {"spark.kubernetes.executor.request.cores": "64"}},
     "spec.spark.sparkConf.spark.kubernetes.executor.request.cores"),
    ({"sparkConf": {"spark.kubernetes.driver.limit.cores": "4500m"}},
     "spec.spark.sparkConf.spark.kubernetes.driver.limit.cores"),
    ({"executor": {"cores": 64}}, "spec.spark.executor.cores"),
    ({"sparkConf": {"spark.executor.memoryOverhead": "lots"}}, "spec.spark.sparkConf.spark.executor.memoryOverhead"),
    ({"sparkConf": {"spark.kubernetes.executor.request.cores": "1e9"}},
     "spec.spark.sparkConf.spark.kubernetes.executor.request.cores"),
])
def test_render_policy_refuses_runaway_sizes_by_name(tmp_path: Path, spark: dict[str, object], field: str) -> None:
    code, err = render(tmp_path, spark, CAPPED)
    assert code == 2 and f"spec.{field.removeprefix('spec.')}: " in err, err


@pytest.mark.parametrize("spark", [
    {},
    {"driver": {"memory": "11g"}, "executor": {"memory": "11g"}},  # 15.4g each
    {"executor": {"memory": "14g"}, "sparkConf": {"spark.executor.memoryOverheadFactor": "0.1",
                                                  "spark.driver.memoryOverheadFactor": "1.5"}},
    {"executor": {"instances": 10, "cores": 4, "memory": "12g"},
     "sparkConf": {"spark.executor.memoryOverhead": "2g", "spark.memory.offHeap.size": "1g",
                   "spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.maxExecutors": "10",
                   "spark.kubernetes.executor.request.cores": "3500m", "spark.kubernetes.executor.limit.cores": "4"}},
])
def test_sizes_within_the_caps_render(tmp_path: Path, spark: dict[str, object]) -> None:
    code, err = render(tmp_path, spark, CAPPED)
    assert code == 0, err


def test_a_listed_namespace_gets_exactly_its_caps() -> None:
    policy = pol.parse_policy(yaml.safe_load(CAPPED))
    many = {"sparkConf": {"spark.dynamicAllocation.minExecutors": "2000", "spark.executor.memoryOverhead": "64g"}}
    assert pol.check_spark(policy, "batch", many, IMAGE, ACCOUNT) is None  # no memory cap in batch
    error = pol.check_spark(policy, "team-a", many, IMAGE, ACCOUNT)
    assert error is not None and error.startswith("spec.spark.sparkConf.spark.dynamicAllocation.minExecutors: 2000")


@pytest.mark.parametrize(("text", "needle"), [
    ("limits: {default: {executors: 0}}\n", "limits.default.executors must be a number of at least 1"),
    ("limits: {default: {executors: 2.5}}\n", "whole number"),
    ("limits: {default: {memory: lots}}\n", "limits.default.memory"),
    ("limits: {default: {gpus: 1}}\n", "limits.default must be a mapping with executors, cores, memory"),
    ("limits: {defaults: {}}\n", "limits must be a mapping with default and namespaces"),
])
def test_malformed_limits_are_refused_naming_the_field(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(pol.PolicyError, match=needle):
        pol.load_policy(str(path))
