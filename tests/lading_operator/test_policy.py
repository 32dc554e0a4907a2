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


def test_no_policy_file_allows_everything() -> None:
    p = pol.load_policy(None)
    assert not p.enabled
    assert pol.check_uris(p, "any", [("to.files", "s3://anything/at/all/")]) is None
    assert pol.load_policy("").enabled is False


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
    error = pol.check_uris(policy, namespace, [("to.files", uri)])
    assert (error is None) is allowed, error


def test_error_names_field_uri_and_prefixes(policy: pol.Policy) -> None:
    error = pol.check_uris(
        policy,
        "analytics",
        [("from.files.uri", "s3://lake/in/"), ("to.files", "s3://elsewhere/out/")],
    )
    assert error is not None
    assert error.startswith("to.files: ")
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
    assert pol.check_uris(p, "a", [("to.files", "s3://a/x")]) is None
    assert pol.check_uris(p, "b", [("to.files", "s3://a/x")]) is not None


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
    assert p.enabled
    assert pol.check_uris(p, "x", [("to.files", "s3://a/")]) is not None
