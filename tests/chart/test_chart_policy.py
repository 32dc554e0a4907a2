"""The chart's policy values reach the operator's policy file: images, ServiceAccounts, Spark properties."""

from __future__ import annotations

from pathlib import Path

from chart import helm

from lading_operator import policy as pol

VALUES = {"policy": {
    "enabled": True,
    "allowedPrefixes": {"default": ["s3://exports/{namespace}/"]},
    "images": {"default": ["registry.corp/{namespace}/"], "namespaces": {"ml": ["ghcr.io/ml/trainer"]}},
    "serviceAccounts": {"namespaces": {"team-a": ["team-a-reader"]}},
    "sparkConf": {"namespaces": {"gpu": ["spark.kubernetes.node.selector."]}},
}}
IMAGE, ACCOUNT = "ghcr.io/lading/lading:0.1.0", "lading-spark"


def _policy(values: dict[str, object], tmp_path: Path) -> pol.Policy:
    cm = helm.one(helm.render(values), "ConfigMap")
    path = tmp_path / "policy.yaml"
    path.write_text(cm["data"]["policy.yaml"])
    return pol.load_policy(str(path))


def test_policy_sections_read_back_as_the_values_say(tmp_path: Path) -> None:
    p = _policy(VALUES, tmp_path)

    def check(namespace: str, spark: dict[str, object]) -> str | None:
        return pol.check_spark(p, namespace, spark, IMAGE, ACCOUNT)

    assert check("team-a", {"image": "registry.corp/team-a/lading:2"}) is None
    assert check("team-a", {"image": "registry.corp/team-b/lading:2"}) is not None
    assert check("ml", {"image": "ghcr.io/ml/trainer:7"}) is None
    assert check("ml", {"image": "registry.corp/ml/lading:2"}) is not None  # a listed namespace replaces default
    assert check("team-a", {"serviceAccount": "team-a-reader"}) is None
    assert check("team-b", {"serviceAccount": "team-a-reader"}) is not None
    assert check("gpu", {"sparkConf": {"spark.kubernetes.node.selector.gpu": "true"}}) is None
    assert check("team-a", {"sparkConf": {"spark.kubernetes.node.selector.gpu": "true"}}) is not None


def test_enabled_without_the_new_sections_allows_only_the_defaults(tmp_path: Path) -> None:
    p = _policy({"policy": {"enabled": True, "allowedPrefixes": {"default": ["s3://x/"]}}}, tmp_path)
    assert pol.check_spark(p, "team-a", {"image": IMAGE, "serviceAccount": ACCOUNT}, IMAGE, ACCOUNT) is None
    assert pol.check_spark(p, "team-a", {"image": "other/image:1"}, IMAGE, ACCOUNT) is not None
    assert pol.check_spark(p, "team-a", {"serviceAccount": "default"}, IMAGE, ACCOUNT) is not None


def test_policy_limits_reach_the_operator(tmp_path: Path) -> None:
    from lading_operator import sizing

    values = {"policy": {**VALUES["policy"], "limits": {"default": {"executors": 10, "cores": 4, "memory": "16g"},
                                                        "namespaces": {"batch": {"executors": 100}}}}}
    p = _policy(values, tmp_path)
    # Helm merges the given default into the chart's: its run slots (runs: 10) stay.
    assert p.limits_for("team-a") == sizing.Limits(executors=10, cores=4.0, memory=16 * 1024**3, runs=10)
    assert p.limits_for("batch") == sizing.Limits(executors=100)  # a listed namespace: exactly its own caps
    error = pol.check_spark(p, "team-a", {"sparkConf": {"spark.dynamicAllocation.minExecutors": "2000"}},
                            IMAGE, ACCOUNT)
    assert error is not None and "policy.limits" in error
    assert _policy(VALUES, tmp_path).limits_for("x") == pol.DEFAULT_LIMITS  # the chart's default: a small job
    lifted = {"policy": {**VALUES["policy"], "limits": {"default": {"executors": None, "cores": None,
                                                                    "memory": None, "runs": None}}}}
    assert _policy(lifted, tmp_path).limits_for("x") == sizing.Limits()  # each cap set to null: not capped


def test_default_values_render_the_safe_policy(tmp_path: Path) -> None:
    """A plain `helm install` renders and mounts the policy, and it is the operator's safe default:
    s3:// only, no file://, the chart's image and ServiceAccount, a small job (fails on main, where
    the default rendered no policy and the operator allowed any storage, image and size)."""
    objects = helm.render({})
    dep = helm.one(objects, "Deployment")
    env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["LADING_POLICY_FILE"] == "/etc/lading/policy/policy.yaml"
    p = _policy({}, tmp_path)
    assert p == pol.DEFAULT_POLICY
    assert pol.check_uris(p, "team-a", [("spec.from.files", "file:///data/in/")]) is not None
    assert pol.check_spark(p, "team-a", {"image": "other/image:1"}, IMAGE, ACCOUNT) is not None
    assert pol.check_spark(p, "team-a", {"executor": {"instances": 100}}, IMAGE, ACCOUNT) is not None


def test_the_documented_values_widen_the_default(tmp_path: Path) -> None:
    p = _policy({"policy": {"allowedPrefixes": {"default": ["s3://", "file:///data/{namespace}/"]},
                            "limits": {"default": {"executors": 50}}}}, tmp_path)
    assert p.file_prefixes_for("team-a") == ("file:///data/team-a/",)
    assert pol.check_spark(p, "team-a", {"executor": {"instances": 50}}, IMAGE, ACCOUNT) is None


def test_policy_enabled_false_is_refused_with_the_way_to_widen() -> None:
    result = helm.run_helm("template", "x", str(helm.CHART), values={"policy": {"enabled": False}})
    assert result.returncode != 0
    assert "policy.enabled=false is no longer supported" in result.stderr
    assert "policy.allowedPrefixes" in result.stderr
    helm.render({"policy": {"enabled": True}})  # old values files that turned it on still render
