"""What `helm template` renders passes Kubernetes' own schemas and means what the values say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from chart import helm

from lading_operator import policy as pol

# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest schemas we have.
OLDEST = "1.28"
NEWEST = kubernetes_validate.utils.latest_version()
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Namespace"}


def test_chart_kube_version_is_the_oldest_we_validate() -> None:
    chart = yaml.safe_load((helm.CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">={OLDEST}.0-0"


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
@pytest.mark.parametrize("mode", sorted(helm.MODES))
def test_rendered_manifests_validate(mode: str, version: str) -> None:
    objects = helm.render(helm.MODES[mode], include_crds=True)
    assert objects
    unvalidated = []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            unvalidated.append(obj["kind"])
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {path}: {e.message}")
    # Only the Prometheus Operator's PodMonitor has no schema in Kubernetes itself.
    assert set(unvalidated) <= {"PodMonitor"}, unvalidated


def test_namespaced_mode_renders_nothing_cluster_scoped() -> None:
    objects = helm.render(helm.NAMESPACED)
    assert not [o for o in objects if o["kind"] in CLUSTER_SCOPED]
    namespaces = {o["metadata"].get("namespace") for o in objects}
    assert namespaces == {helm.NAMESPACE, "team-a", "team-b"}


def test_cluster_mode_has_one_bound_clusterrole_and_no_operator_roles() -> None:
    objects = helm.render(helm.CLUSTER)
    # the operator's, and the two tenant roles aggregated into view/edit (bound by nobody here)
    assert sorted(r["metadata"]["name"] for r in helm.by_kind(objects, "ClusterRole")) == [
        f"{helm.RELEASE}-lading-{n}" for n in ("edit", "operator", "view")]
    binding = helm.one(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == f"{helm.RELEASE}-lading-operator"
    sa = helm.one([o for o in objects if o["metadata"]["name"] != "lading-spark"], "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": helm.NAMESPACE}
    ]
    # the only Roles are the leader-election Lease's and the Spark driver's, in the release namespace
    roles = helm.by_kind(objects, "Role")
    assert sorted((r["metadata"]["name"], r["metadata"]["namespace"]) for r in roles) == [
        ("lading-spark", helm.NAMESPACE), (f"{helm.RELEASE}-lading-leader-election", helm.NAMESPACE)
    ]


def test_every_binding_points_at_a_rendered_role_and_account() -> None:
    for mode in helm.MODES.values():
        objects = helm.render(mode)
        roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
                 for o in objects if o["kind"] in ("Role", "ClusterRole")}
        accounts = {(o["metadata"]["namespace"], o["metadata"]["name"])
                    for o in helm.by_kind(objects, "ServiceAccount")}
        for b in helm.by_kind(objects, "RoleBinding") + helm.by_kind(objects, "ClusterRoleBinding"):
            ns = b["metadata"].get("namespace")
            ref = b["roleRef"]
            assert (ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"]) in roles, b
            for s in b["subjects"]:
                assert (s["namespace"], s["name"]) in accounts, s


def _deployment(values: dict[str, Any]) -> dict[str, Any]:
    return helm.one(helm.render(values), "Deployment")


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container["env"]}


@pytest.mark.parametrize("mode", sorted(helm.MODES))
def test_deployment_is_two_leader_elected_restricted_pods(mode: str) -> None:
    dep = _deployment(helm.MODES[mode])
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (c,) = pod["containers"]
    assert c["command"] == ["python", "-m", "lading_operator"]
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in sc or sc["privileged"] is False
    # a writable /tmp on the read-only root
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in vols[mounts["/tmp"]]
    # kopf's liveness endpoint is the probe
    probe = c["livenessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert probe["path"] == "/healthz" and ports[probe["port"]] == 8080
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert pod["serviceAccountName"]
    assert _env(c)["LADING_METRICS_PORT"] == str(ports["metrics"]) == "9090"


def test_operator_env_per_mode() -> None:
    cluster = _env(_deployment(helm.CLUSTER)["spec"]["template"]["spec"]["containers"][0])
    assert cluster["LADING_NAMESPACES"] == ""
    assert cluster["LADING_POLICY_FILE"] == "/etc/lading/policy/policy.yaml"  # the policy always applies
    namespaced = _env(_deployment(helm.NAMESPACED)["spec"]["template"]["spec"]["containers"][0])
    assert namespaced["LADING_NAMESPACES"] == "team-a,team-b"
    everything = _env(_deployment(helm.EVERYTHING)["spec"]["template"]["spec"]["containers"][0])
    assert everything["LADING_EXTRA"] == "1"


def test_image_tag_and_digest() -> None:
    c = _deployment(helm.CLUSTER)["spec"]["template"]["spec"]["containers"][0]
    chart = yaml.safe_load((helm.CHART / "Chart.yaml").read_text())
    assert c["image"] == f"ghcr.io/lading/lading:{chart['appVersion']}"
    c = _deployment(helm.EVERYTHING)["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "ghcr.io/lading/lading@sha256:" + "a" * 64


def test_policy_is_mounted_and_reads_back_as_the_values_say(tmp_path: Path) -> None:
    objects = helm.render(helm.EVERYTHING)
    dep = helm.one(objects, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    path = Path(_env(c)["LADING_POLICY_FILE"])
    mount = next(m for m in c["volumeMounts"] if path.is_relative_to(m["mountPath"]))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    cm = helm.one(objects, "ConfigMap")
    assert volume["configMap"]["name"] == cm["metadata"]["name"]
    local = tmp_path / path.name
    local.write_text(cm["data"][path.relative_to(mount["mountPath"]).as_posix()])
    policy = pol.load_policy(str(local))
    assert pol.check_uris(policy, "team-a", [("spec.to.files", "s3://lake-a/x/")]) is None
    assert pol.check_uris(policy, "team-a", [("spec.to.files", "s3://exports/team-a/x/")]) is not None
    assert pol.check_uris(policy, "team-b", [("spec.to.files", "s3://exports/team-b/x/")]) is None
    assert pol.check_uris(policy, "team-b", [("spec.to.files", "s3://exports/team-a/x/")]) is not None
    # the checksum restarts the operator when the policy changes
    assert "checksum/policy" in dep["spec"]["template"]["metadata"]["annotations"]
    changed = helm.EVERYTHING | {"policy": {"enabled": True, "allowedPrefixes": {"default": ["s3://z/"]}}}
    other = helm.one(helm.render(changed), "Deployment")
    assert (other["spec"]["template"]["metadata"]["annotations"]["checksum/policy"]
            != dep["spec"]["template"]["metadata"]["annotations"]["checksum/policy"])


def test_the_policy_is_rendered_by_default() -> None:
    objects = helm.render(helm.CLUSTER)
    assert helm.one(objects, "ConfigMap")["metadata"]["name"].endswith("-policy")


def test_metrics_service_and_podmonitor_select_the_operator_pod() -> None:
    objects = helm.render(helm.EVERYTHING)
    dep = helm.one(objects, "Deployment")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    svc = helm.one(objects, "Service")
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics"
    pm = helm.one(objects, "PodMonitor")
    assert pm["apiVersion"] == "monitoring.coreos.com/v1"
    assert pm["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    assert pm["metadata"]["labels"]["release"] == "prom"
    assert not helm.by_kind(helm.render(helm.CLUSTER), "PodMonitor")
    assert not helm.by_kind(helm.render(helm.CLUSTER), "Service")


def test_spark_service_account_in_each_job_namespace() -> None:
    objects = helm.render(helm.EVERYTHING)
    spark = [o for o in helm.by_kind(objects, "ServiceAccount") if o["metadata"]["name"] == "lading-spark"]
    assert sorted(o["metadata"]["namespace"] for o in spark) == ["batch", "team-a", "team-b"]
    assert all(o["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] for o in spark)
    # namespaced mode without jobNamespaces: the watched namespaces
    spark = [o for o in helm.by_kind(helm.render(helm.NAMESPACED), "ServiceAccount")
             if o["metadata"]["name"] == "lading-spark"]
    assert sorted(o["metadata"]["namespace"] for o in spark) == ["team-a", "team-b"]


def test_leader_election_env_names_the_lease_in_the_release_namespace_and_the_pod() -> None:
    (c,) = _deployment(helm.CLUSTER)["spec"]["template"]["spec"]["containers"]
    env = _env(c)
    assert {k: env[k] for k in env if k.startswith("LADING_LEA")} == {
        "LADING_LEADER_ELECTION": "on", "LADING_LEASE_NAMESPACE": helm.NAMESPACE,
        "LADING_LEASE_NAME": f"{helm.RELEASE}-lading-operator", "LADING_LEASE_DURATION": "15",
        "LADING_LEASE_RENEW_DEADLINE": "10", "LADING_LEASE_RETRY_PERIOD": "2"}
    (pod_name,) = [e for e in c["env"] if e["name"] == "LADING_POD_NAME"]
    assert pod_name["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_without_leader_election_one_pod_is_recreated_and_no_lease_role_rendered() -> None:
    objects = helm.render({"operator": {"replicas": 1, "leaderElection": {"enabled": False}}})
    dep = helm.one(objects, "Deployment")
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert _env(c)["LADING_LEADER_ELECTION"] == "off"
    assert "LADING_LEASE_NAMESPACE" not in _env(c)
    assert not [r for r in helm.by_kind(objects, "Role") if "leader-election" in r["metadata"]["name"]]
    assert not [b for b in helm.by_kind(objects, "RoleBinding") if "leader-election" in b["metadata"]["name"]]
