"""``file://`` in a pod: never the pod's kernel views, devices or credentials, whatever the policy says.

A policy listing such a prefix is refused at start-up; a spec naming such a path is refused naming
the field; the namespace's file:// prefixes are what the job is told it may open. These fail on
main, where a policy could list ``file:///`` and a spec could name ``file:///proc/1/environ``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lading_operator import policy as pol
from lading_spec import sparkconf

IMAGE, ACCOUNT = "ghcr.io/lading/lading:0.1.0", "lading-spark"


def _load(tmp_path: Path, text: str) -> pol.Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return pol.load_policy(str(path))


@pytest.mark.parametrize("prefix", [
    "file:///", "file:///proc/", "file:///proc", "file:///sys/fs/", "file:///dev/", "file:///var/",
    "file:///var/run/", "file:///var/run/secrets/kubernetes.io/serviceaccount/", "file:///run/secrets/",
    "file:///etc/lading/kafka/", "file:///etc/", "file:////proc/", "file:///{namespace}/../proc/",
    "file://localhost/data/",
])
def test_a_policy_listing_a_forbidden_prefix_is_refused_at_start_up(tmp_path: Path, prefix: str) -> None:
    for section in (f"allowedPrefixes: {{default: ['{prefix}']}}\n",
                    f"allowedPrefixes: {{namespaces: {{team-a: ['s3://x/', '{prefix}']}}}}\n"):
        with pytest.raises(pol.PolicyError) as info:
            _load(tmp_path, section)
        assert "allowedPrefixes." in str(info.value) and "LADING_POLICY_FILE" in str(info.value)


def test_the_message_says_what_the_prefix_would_expose(tmp_path: Path) -> None:
    with pytest.raises(pol.PolicyError, match=r"default\[0\]: 'file:///var/' can never be allowed: .*"
                                              r"/var/run/secrets holds the pod's ServiceAccount token"):
        _load(tmp_path, "allowedPrefixes: {default: ['file:///var/']}\n")


def test_data_prefixes_are_allowed_and_reach_the_job(tmp_path: Path) -> None:
    p = _load(tmp_path, "allowedPrefixes:\n  default: ['s3://x/', 'file:///data/{namespace}/']\n"
                        "  namespaces: {ops: ['file:///var/lib/exports/']}\n")
    assert p.file_prefixes_for("team-a") == ("file:///data/team-a/",)
    assert p.file_prefixes_for("ops") == ("file:///var/lib/exports/",)
    assert pol.check_uris(p, "team-a", [("spec.from.files", "file:///data/team-a/in/*.json")]) is None


@pytest.mark.parametrize("uri", [
    "file:///proc/1/environ", "file:///proc/self/environ", "file:////proc/1/environ",
    "file:///var/run/secrets/kubernetes.io/serviceaccount/token", "file:///run/secrets/x",
    "file:///etc/lading/kafka/sasl.password", "file:///dev/stdin", "file:///sys/class/",
])
@pytest.mark.parametrize("policy_text", [None, "allowedPrefixes: {default: ['s3://', 'file:///data/']}\n"])
def test_a_spec_naming_a_forbidden_path_is_refused_naming_the_field(tmp_path: Path, uri: str,
                                                                    policy_text: str | None) -> None:
    p = pol.load_policy(None) if policy_text is None else _load(tmp_path, policy_text)
    error = pol.check_resource(p, "team-a", [("spec.from.files", uri)], {}, IMAGE, ACCOUNT)
    assert error is not None and error.startswith(f"spec.from.files: {uri!r}")
    if "proc" in uri or "secrets" in uri:
        assert "can never be read or written by a job" in error


@pytest.mark.parametrize("key", [
    "spark.kubernetes.executor.annotation.container.apparmor.security.beta.kubernetes.io/spark-kubernetes-executor",
    "spark.kubernetes.driver.annotation.container.apparmor.security.beta.kubernetes.io/spark-kubernetes-driver",
    "spark.kubernetes.driver.annotation.seccomp.security.alpha.kubernetes.io/pod",
    "spark.kubernetes.executor.annotation.container.seccomp.security.alpha.kubernetes.io/executor",
    "spark.kubernetes.executor.annotation.security.example.com/profile",
    "spark.kubernetes.executor.annotation.team.security.example.com/x",
    "spark.Kubernetes.Executor.Annotation.Container.AppArmor.security.beta.kubernetes.io/x",
])
def test_security_annotations_are_refused_whatever_the_policys_prefix_says(tmp_path: Path, key: str) -> None:
    """The docs' example entry ``spark.kubernetes.executor.annotation.`` covered AppArmor ``unconfined``
    (fails on main: only securityContext fields were checked)."""
    p = _load(tmp_path, "allowedPrefixes: {default: ['s3://']}\nsparkConf:\n  default:\n"
                        "  - spark.kubernetes.executor.annotation.\n  - spark.kubernetes.driver.annotation.\n")
    error = pol.check_spark(p, "team-a", {"sparkConf": {"spark.kubernetes.executor.annotation.team": "a"}},
                            IMAGE, ACCOUNT)
    assert error is None  # an ordinary annotation stays allowed by the prefix entry
    why = sparkconf.never_allowed(key, "unconfined")
    assert why is not None and "security profile" in why
    with pytest.raises(Exception, match="security profile") as info:
        sparkconf.parse_spark_conf({key: "unconfined"})
    assert key in str(info.value)


def test_a_policy_entry_naming_a_security_annotation_is_refused_at_start_up(tmp_path: Path) -> None:
    entry = "spark.kubernetes.executor.annotation.container.apparmor.security.beta.kubernetes.io/"
    with pytest.raises(pol.PolicyError, match="can never be allowed .*security profile"):
        _load(tmp_path, f"sparkConf: {{default: ['{entry}']}}\n")
