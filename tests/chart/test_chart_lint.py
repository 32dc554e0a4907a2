"""`helm lint --strict` is clean in every mode, and bad values are refused by the schema."""

from __future__ import annotations

import pytest
from chart import helm


@pytest.mark.parametrize("mode", sorted(helm.MODES))
def test_lint_strict(mode: str) -> None:
    result = helm.run_helm("lint", "--strict", str(helm.CHART), values=helm.MODES[mode])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"watch": {"namespaces": "team-a"}}, "/watch/namespaces"),
        ({"watch": {"namespaces": ["Team_A"]}}, "/watch/namespaces/0"),
        ({"watchNamespaces": ["a"]}, "watchNamespaces"),
        ({"policy": {"allowedPrefixes": {"default": ["bucket/x"]}}}, "/policy/allowedPrefixes/default/0"),
        ({"metrics": {"port": 0}}, "/metrics/port"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"spark": {"rbac": {"secrets": True}}}, "secrets"),
    ],
)
def test_schema_rejects_bad_values(values: dict, complaint: str) -> None:  # type: ignore[type-arg]
    result = helm.run_helm("template", "x", str(helm.CHART), values=values)
    assert result.returncode != 0
    assert complaint in result.stderr, result.stderr


def test_notes_tell_the_user_what_to_do_next() -> None:
    values = {"watch": {"namespaces": ["team-a"]}, "spark": {"jobNamespaces": ["team-a", "batch"]},
              "policy": {"enabled": True}}
    result = helm.run_helm("install", "ops", str(helm.CHART), "--namespace", "lading-system",
                           "--dry-run=client", values=values)
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "spark.jobNamespaces={team-a,batch}" in notes  # the Spark operator must watch them
    assert "watches these namespaces only: team-a" in notes
    assert "rollout status deployment/ops-lading-operator" in notes
    assert "kubectl apply --server-side -f charts/lading/crds/" in notes  # Helm never upgrades CRDs
    assert "Forbidden" in notes  # the policy is on
