"""The storage allow-list: which (field, URI) pairs a namespace may use."""

from __future__ import annotations

from pathlib import Path

import pytest

from lading_operator import policy as pol

POLICY_YAML = """
allowedPrefixes:
  default: ["s3://shared/{namespace}/"]
  namespaces:
    analytics: ["s3://lake/", "file:///data/analytics"]
    locked: []
"""


@pytest.fixture
def policy(tmp_path: Path) -> pol.Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY_YAML)
    return pol.load_policy(str(path))


def test_no_policy_file_is_the_safe_default() -> None:
    """Without a policy file (a plain helm install before the chart rendered one): s3:// only, no
    file:// at all (fails on main, where no file allowed every URI, image and ServiceAccount)."""
    p = pol.load_policy(None)
    assert p == pol.load_policy("") == pol.DEFAULT_POLICY
    assert pol.check_uris(p, "any", [("spec.to.files", "s3://anything/at/all/")]) is None
    assert pol.check_uris(p, "any", [("spec.from.files", "S3://Bucket/x")]) is None
    for uri in ("file:///data/in/", "file:///var/run/secrets/kubernetes.io/serviceaccount/token",
                "file:///proc/1/environ", "FILE:///tmp/x"):
        error = pol.check_uris(p, "any", [("spec.from.files", uri)])
        assert error is not None and error.startswith("spec.from.files: "), uri
    assert p.file_prefixes_for("any") == ()


@pytest.mark.parametrize(
    ("namespace", "uri", "allowed"),
    [
        # default, with {namespace} filled in per tenant
        ("team-a", "s3://shared/team-a/out/", True),
        ("team-a", "s3://shared/team-a", True),
        ("team-a", "s3://shared/team-b/out/", False),
        ("team-a", "s3://shared/team-a-evil/out/", False),
        ("team-a", "s3://SHARED/team-a/x", True),  # bucket names compare case-insensitively
        ("team-a", "S3://shared/team-a/x", True),
        ("team-a", "s3://shared/Team-A/x", False),  # keys are case-sensitive
        ("team-a", "s3://lake/x/", False),
        # a listed namespace replaces default, it does not add to it
        ("analytics", "s3://lake/events/2024/", True),
        ("analytics", "s3://lake", True),
        ("analytics", "s3://lakehouse/x/", False),
        ("analytics", "s3://shared/analytics/x/", False),
        ("analytics", "file:///data/analytics/in/a.csv", True),
        ("analytics", "file:///data/analytics", True),
        ("analytics", "file:///data/analytics-other/x", False),
        ("analytics", "file:///data/analytics/../secrets/x", False),
        ("analytics", "file:///data/analytics/%2e%2e/secrets/x", False),
        ("analytics", "file:///data/analytics/./x", False),
        ("analytics", "s3://lake/a/../b/", False),
        # templates and globs: only the fixed part counts
        ("analytics", "s3://lake/exports/{run_time:%Y%m%d}/", True),
        ("analytics", "s3://lake/exports/{run_id}/part-*.csv", True),
        ("analytics", "s3://lak{run_id}/", False),
        ("analytics", "s3://lake{run_id}/x", False),
        ("analytics", "s3://lake/{run_time:..}/x", False),  # expands to a .. segment
        ("analytics", "s3://la*/x", False),
        ("analytics", "s3://lake/in/*.csv", True),
        ("team-a", "s3://shared/{namespace}/x/", True),
        ("team-b", "s3://shared/{namespace}/x/", True),
        # an empty list allows nothing
        ("locked", "s3://shared/locked/x/", False),
        ("locked", "s3://lake/x/", False),
        # not a URI at all
        ("analytics", "lake/x", False),
    ],
)
def test_check_uris(policy: pol.Policy, namespace: str, uri: str, allowed: bool) -> None:
    error = pol.check_uris(policy, namespace, [("spec.to.files", uri)])
    assert (error is None) is allowed, error


def test_error_names_field_uri_and_prefixes(policy: pol.Policy) -> None:
    error = pol.check_uris(
        policy,
        "analytics",
        [("from.files.uri", "s3://lake/in/"), ("spec.to.files", "s3://elsewhere/out/")],
    )
    assert error is not None
    assert error.startswith("spec.to.files: ")
    assert "s3://elsewhere/out/" in error
    assert "s3://lake/" in error and "file:///data/analytics" in error
    assert "analytics" in error


def test_error_for_default_names_the_filled_prefix(policy: pol.Policy) -> None:
    error = pol.check_uris(policy, "team-a", [("to.table", "s3://shared/team-b/t/")])
    assert error is not None and "s3://shared/team-a/" in error and "{namespace}" not in error


def test_error_when_nothing_is_allowed(policy: pol.Policy) -> None:
    error = pol.check_uris(policy, "locked", [("from.table", "s3://lake/t/")])
    assert error is not None and "from.table" in error and "no prefix is allowed" in error


def test_missing_default_denies_unlisted_namespaces(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("allowedPrefixes:\n  namespaces:\n    a: ['s3://a/']\n")
    p = pol.load_policy(str(path))
    assert pol.check_uris(p, "a", [("spec.to.files", "s3://a/x")]) is None
    assert pol.check_uris(p, "b", [("spec.to.files", "s3://a/x")]) is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- s3://a/\n", "mapping"),
        ("allowed: {}\n", "unknown key"),
        ("allowedPrefixes: {defaults: []}\n", "unknown key"),
        ("allowedPrefixes: {default: s3://a/}\n", "allowedPrefixes.default"),
        ("allowedPrefixes: {default: ['bucket/x']}\n", "allowedPrefixes.default[0]"),
        ("allowedPrefixes: {default: ['http://x/']}\n", "s3:// or file://"),
        ("allowedPrefixes: {default: ['s3://a/*']}\n", "glob"),
        ("allowedPrefixes: {default: ['s3://a/{run_id}/']}\n", "placeholder"),
        ("allowedPrefixes: {namespaces: {x: ['s3://a/../b']}}\n", "allowedPrefixes.namespaces.x[0]"),
        ("allowedPrefixes: {namespaces: [a]}\n", "allowedPrefixes.namespaces"),
        ("allowedPrefixes: [\n", "not valid YAML"),
    ],
)
def test_malformed_policy_is_rejected_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(pol.PolicyError, match=None) as info:
        pol.load_policy(str(path))
    assert message in str(info.value)
    assert "LADING_POLICY_FILE" in str(info.value)


def test_unreadable_policy_file_fails_closed(tmp_path: Path) -> None:
    with pytest.raises(pol.PolicyError, match="cannot read"):
        pol.load_policy(str(tmp_path / "missing.yaml"))


def test_empty_policy_file_is_enabled_and_denies(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("")
    p = pol.load_policy(str(path))
    assert pol.check_uris(p, "x", [("spec.to.files", "s3://a/")]) is not None


# --- images, ServiceAccounts and Spark properties (issue 14.3, issue 9.7) ---------------------

IMAGE, ACCOUNT = "ghcr.io/lading/lading:0.1.0", "lading-spark"
SPARK_POLICY = """
allowedPrefixes: {default: ["s3://"]}
images:
  default: ["registry.corp/{namespace}/", "ghcr.io/lading/lading"]
  namespaces:
    pinned: ["ghcr.io/lading/lading@sha256:abc"]
serviceAccounts:
  default: ["{namespace}-spark"]
  namespaces: {analytics: ["lading-spark", "analytics-reader"]}
sparkConf:
  default: ["spark.kubernetes.driver.annotation."]
  namespaces: {gpu: ["spark.kubernetes.node.selector.gpu", "spark.executor.extraJavaOptions"]}
"""


@pytest.fixture
def spark_policy(tmp_path: Path) -> pol.Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(SPARK_POLICY)
    return pol.load_policy(str(path))


@pytest.mark.parametrize(("namespace", "spark", "field"), [
    # images: not set, the operator's own, a prefix with {namespace}, a bare repository (any tag)
    ("team-a", {}, None),
    ("team-a", {"image": IMAGE}, None),
    ("team-a", {"image": "registry.corp/team-a/lading:2"}, None),
    ("team-a", {"image": "registry.corp/team-b/lading:2"}, "spec.spark.image"),
    ("team-a", {"image": "ghcr.io/lading/lading:9.9"}, None),
    ("team-a", {"image": "ghcr.io/lading/lading@sha256:def"}, None),
    ("team-a", {"image": "ghcr.io/lading/lading-evil:1"}, "spec.spark.image"),
    ("team-a", {"image": "ghcr.io/lading/lading/evil:1"}, "spec.spark.image"),
    ("pinned", {"image": "ghcr.io/lading/lading@sha256:abc"}, None),
    ("pinned", {"image": "ghcr.io/lading/lading:9.9"}, "spec.spark.image"),
    # service accounts
    ("team-a", {"serviceAccount": ACCOUNT}, None),
    ("team-a", {"serviceAccount": "team-a-spark"}, None),
    ("team-a", {"serviceAccount": "team-b-spark"}, "spec.spark.serviceAccount"),
    ("analytics", {"serviceAccount": "analytics-reader"}, None),
    ("analytics", {"serviceAccount": "analytics-spark"}, "spec.spark.serviceAccount"),
    # Spark properties: safe tuning everywhere, others where listed
    ("team-a", {"sparkConf": {"spark.sql.shuffle.partitions": "8", "spark.sql.adaptive.enabled": "true"}}, None),
    ("team-a", {"sparkConf": {"spark.kubernetes.driver.annotation.example.com/x": "y"}}, None),
    ("team-a", {"sparkConf": {"spark.kubernetes.node.selector.gpu": "true"}},
     "spec.spark.sparkConf.spark.kubernetes.node.selector.gpu"),
    ("gpu", {"sparkConf": {"spark.kubernetes.node.selector.gpu": "true"}}, None),
    ("gpu", {"sparkConf": {"spark.kubernetes.driver.annotation.x": "y"}},
     "spec.spark.sparkConf.spark.kubernetes.driver.annotation.x"),
    ("gpu", {"sparkConf": {"spark.executor.extraJavaOptions": "-XX:+UseG1GC"}}, None),
    ("team-a", {"sparkConf": {"spark.plugins": "com.example.Plugin"}}, "spec.spark.sparkConf.spark.plugins"),
    ("team-a", {"sparkConf": {"spark.sql.parquet.output.committer.class": "x"}},
     "spec.spark.sparkConf.spark.sql.parquet.output.committer.class"),
])
def test_check_spark(spark_policy: pol.Policy, namespace: str, spark: dict[str, object], field: str | None) -> None:
    error = pol.check_spark(spark_policy, namespace, spark, IMAGE, ACCOUNT)
    if field is None:
        assert error is None, error
    else:
        assert error is not None and error.startswith(f"{field}: ")
        assert "ask the cluster admin" in error and f"{namespace!r}" in error


def test_without_a_policy_file_only_the_operators_image_account_and_a_small_job() -> None:
    """Fails on main: without a file any image, any ServiceAccount and any size was allowed."""
    p = pol.load_policy(None)
    assert pol.check_spark(p, "x", {"image": IMAGE, "serviceAccount": ACCOUNT}, IMAGE, ACCOUNT) is None
    error = pol.check_spark(p, "x", {"image": "any/image:1"}, IMAGE, ACCOUNT)
    assert error is not None and error.startswith("spec.spark.image: ") and "policy.images" in error
    error = pol.check_spark(p, "x", {"serviceAccount": "default"}, IMAGE, ACCOUNT)
    assert error is not None and error.startswith("spec.spark.serviceAccount: ")
    assert pol.check_spark(p, "x", {"executor": {"instances": 4, "cores": 2, "memory": "4g"}}, IMAGE, ACCOUNT) is None
    error = pol.check_spark(p, "x", {"executor": {"instances": 50}}, IMAGE, ACCOUNT)
    assert error is not None and error.startswith("spec.spark.executor.instances: ")
    error = pol.check_spark(p, "x", {"driver": {"memory": "64g"}}, IMAGE, ACCOUNT)
    assert error is not None and error.startswith("spec.spark.driver.memory: ")
    assert pol.check_spark(p, "x", {"sparkConf": {"spark.sql.shuffle.partitions": "4"}}, IMAGE, ACCOUNT) is None
    error = pol.check_spark(p, "x", {"sparkConf": {"spark.kubernetes.driver.annotation.a": "b"}}, IMAGE, ACCOUNT)
    assert error is not None and "spark.sql.shuffle.partitions" in error and "policy.sparkConf" in error


def test_check_resource_reports_storage_first(spark_policy: pol.Policy) -> None:
    error = pol.check_resource(spark_policy, "team-a", [("spec.to.files", "http://x/")],
                               {"image": "evil/x:1"}, IMAGE, ACCOUNT)
    assert error is not None and error.startswith("spec.to.files")


@pytest.mark.parametrize(("text", "message"), [
    ("images: {default: 'x'}\n", "images.default must be a list"),
    ("images: {default: ['has space']}\n", "images.default must be a list"),
    ("serviceAccounts: {namespaces: {a: ['Bad_Name']}}\n", "serviceAccounts.namespaces.a[0]"),
    ("sparkConf: {default: ['spark.kubernetes.namespace']}\n", "can never be allowed"),
    ("sparkConf: {default: ['spark.kubernetes.authenticate.']}\n", "can never be allowed"),
    ("sparkConf: {default: ['spark.kubernetes.driverEnv.AWS_ROLE_ARN']}\n", "can never be allowed"),
    ("sparkConf: {default: ['hive.metastore.uris']}\n", "not a Spark property"),
    ("sparkConf: {defaults: []}\n", "unknown key"),
    ("images: []\n", "images must be a mapping"),
])
def test_malformed_spark_sections_are_rejected_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(pol.PolicyError) as info:
        pol.load_policy(str(path))
    assert message in str(info.value) and "LADING_POLICY_FILE" in str(info.value)


def test_operator_refuses_before_rendering(spark_policy: pol.Policy) -> None:
    """Through the planner: a forbidden image fails the CopyJob as Forbidden and creates nothing."""
    import datetime as dt

    from lading_operator import reconcile as rc

    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    spec = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://out/x/"}, "spark": {"image": "evil/miner:1"}}
    obj = {"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob",
           "metadata": {"name": "c", "namespace": "team-a", "uid": "u", "generation": 1,
                        "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec}

    def check(namespace: str, uris: list[tuple[str, str]], spark: object) -> str | None:
        return pol.check_resource(spark_policy, namespace, uris, spark, IMAGE, ACCOUNT)

    plan = rc.plan(rc.Observed(obj, now=now), check)
    assert plan.create is None and plan.status["phase"] == "Failed"
    ready = next(c for c in plan.status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "Forbidden" and ready["message"].startswith("spec.spark.image: 'evil/miner:1'")
    never = {**spec, "spark": {"sparkConf": {"spark.kubernetes.namespace": "kube-system"}}}
    plan = rc.plan(rc.Observed({**obj, "spec": never}, now=now), check)
    ready = next(c for c in plan.status["conditions"] if c["type"] == "Ready")
    assert plan.create is None and ready["reason"] == "InvalidSpec"
    assert ready["message"].startswith("spec.spark.sparkConf.spark.kubernetes.namespace: never allowed")


def test_the_installations_image_and_account_are_the_defaults_the_policy_allows(
        spark_policy: pol.Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chart's image.repository/tag and spark.serviceAccount.name reach the operator as
    LADING_SPARK_IMAGE / LADING_SPARK_SERVICE_ACCOUNT: a resource naming them is allowed, the
    built-in ghcr.io default is not special (failed before: the check compared with the built-in
    default whatever the installation said)."""
    from lading_operator import controller

    monkeypatch.setenv("LADING_SPARK_IMAGE", "registry.example.com/data/lading:0.1.0")
    monkeypatch.setenv("LADING_SPARK_SERVICE_ACCOUNT", "lading-jobs")
    monkeypatch.setattr(controller, "_policy", spark_policy)
    ok = {"image": "registry.example.com/data/lading:0.1.0", "serviceAccount": "lading-jobs"}
    assert controller.check_policy("pinned", [], ok) is None
    error = controller.check_policy("pinned", [], {"image": IMAGE})
    assert error is not None and error.startswith("spec.spark.image: ")
    assert "registry.example.com/data/lading:0.1.0" in error  # the allowed list names the installation's
    error = controller.check_policy("pinned", [], {"serviceAccount": ACCOUNT})
    assert error is not None and "'lading-jobs'" in error


@pytest.mark.parametrize("field_path", [
    "spec.from.files", "spec.from.table", "spec.to.table", "spec.from.fileList[0]", "spec.from.inputs[0].files",
    "spec.rejectedRows", "spec.table", "spec.source.files.uri", "spec.target.table", "spec.deadLetter",
])
def test_namespace_is_filled_only_where_the_job_fills_it(policy: pol.Policy, field_path: str) -> None:
    # The job uses these URIs as written: a literal {namespace} directory is one place every
    # tenant shares, outside each tenant's own prefix.
    for namespace in ("team-a", "team-b"):
        error = pol.check_uris(policy, namespace, [(field_path, "s3://shared/{namespace}/x/")])
        assert error is not None and error.startswith(f"{field_path}: "), error
    assert pol.check_uris(policy, "team-a", [("spec.to.files", "s3://shared/{namespace}/x/")]) is None


@pytest.mark.parametrize(("entry", "image", "allowed"), [
    ("python", "python:3.12", True),
    ("python", "python@sha256:0123abcd", True),
    ("python", "python", True),
    ("python", "python:5000/evil/miner:latest", False),  # host "python", port 5000: another registry
    ("python", "python:3.12/evil", False),
    ("registry.corp", "registry.corp:8443/other-team/app:1", False),
    ("registry.corp/team/app", "registry.corp/team/app:1.2-rc_3", True),
    ("registry.corp/team/app", "registry.corp/team/app:1@sha256:ffee", True),
    ("registry.corp/team/app", "registry.corp/team/app:1/x", False),
    ("registry.corp/team/app:", "registry.corp/team/app:7", True),
    ("registry.corp/team/app:", "registry.corp/team/app:7/x:1", False),
    ("registry.corp/team/app@", "registry.corp/team/app@sha256:00ff", True),
    ("registry.corp/team/app@", "registry.corp/team/app@sha256:00ff/x", False),
    ("registry.corp/team/", "registry.corp/team/any/depth:1", True),
    ("registry.corp/team/app:1", "registry.corp/team/app:1", True),
    ("registry.corp/team/app:1", "registry.corp/team/app:10", False),
])
def test_what_follows_a_repository_entry_must_be_a_tag_or_digest(entry: str, image: str, allowed: bool) -> None:
    assert pol.image_allowed(image, (entry,)) is allowed


def test_an_iceberg_input_is_checked_as_its_table_directory(policy: pol.Policy) -> None:
    """The job reads every file of the table (under the metadata file's table directory), so the
    policy checks that directory, not only the metadata file's own prefix."""
    from lading_operator.kinds import copyjob_uris

    def spec(metadata: str) -> dict[str, object]:
        return {"from": {"query": "SELECT * FROM o", "inputs": [{"name": "o", "iceberg": {"metadata": metadata}}]},
                "to": {"files": "s3://lake/out/"}}

    uris = copyjob_uris(spec("s3://lake/wh/orders/metadata/v3.metadata.json"))
    assert ("spec.from.inputs[0].iceberg.metadata", "s3://lake/wh/orders/") in uris
    assert pol.check_uris(policy, "analytics", uris) is None
    narrow = pol.Policy(namespaces={"analytics": ("s3://lake/wh/orders/metadata/", "s3://lake/out/")})
    error = pol.check_uris(narrow, "analytics", uris)
    assert error is not None and error.startswith("spec.from.inputs[0].iceberg.metadata: ")


def test_a_delta_input_is_checked_as_its_table_directory() -> None:
    """The job reads the table's log and data files, all under its directory: that directory is
    what the namespace's allow-list must cover, as for any other input."""
    from lading_operator.kinds import copyjob_uris

    spec = {"from": {"query": "SELECT * FROM o", "inputs": [{"name": "o", "delta": {"table": "s3://lake/d/orders"}}]},
            "to": {"files": "s3://lake/out/"}}
    uris = copyjob_uris(spec)
    assert ("spec.from.inputs[0].delta.table", "s3://lake/d/orders/") in uris
    assert pol.check_uris(pol.Policy(namespaces={"analytics": ("s3://lake/d/", "s3://lake/out/")}), "analytics",
                          uris) is None
    narrow = pol.Policy(namespaces={"analytics": ("s3://lake/d/orders/_delta_log/", "s3://lake/out/")})
    error = pol.check_uris(narrow, "analytics", uris)
    assert error is not None and error.startswith("spec.from.inputs[0].delta.table: ")


def test_the_default_memory_cap_counts_a_python_applications_overhead() -> None:
    """With no policy written (8g per pod): a pod asks for its heap and 40 % more, Spark on Kubernetes'
    overhead for a Python application (0.1 before: a 7g heap passed and asked for 9.8g)."""
    p = pol.load_policy(None)
    for role in ("driver", "executor"):
        error = pol.check_spark(p, "any", {role: {"memory": "6g"}}, IMAGE, ACCOUNT)  # 8.4g
        assert error is not None and error.startswith(f"spec.spark.{role}.memory: "), error
        assert pol.check_spark(p, "any", {role: {"memory": "5g"}}, IMAGE, ACCOUNT) is None  # 7g
