"""The chart's policy.catalogs reaches the operator's policy file; unset, no catalog is allowed."""

from __future__ import annotations

import json
from pathlib import Path

from chart import helm

from lading_operator import policy as pol


def _policy(values: dict[str, object], tmp_path: Path) -> pol.Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(helm.one(helm.render(values), "ConfigMap")["data"]["policy.yaml"])
    return pol.load_policy(str(path))


def test_catalogs_read_back_as_the_values_say(tmp_path: Path) -> None:
    p = _policy({"policy": {"enabled": True, "catalogs": {
        "declared": {"lake": {"type": "glue", "properties": {"glue.region": "eu-west-1"}}},
        "namespaces": {"analytics": ["lake"]}}}}, tmp_path)
    assert json.loads(p.catalogs_env("analytics")) == {"lake": {"type": "glue",
                                                                "properties": {"glue.region": "eu-west-1"}}}
    assert p.catalogs_env("team-a") == ""


def test_without_catalogs_values_no_catalog_is_allowed(tmp_path: Path) -> None:
    p = _policy({"policy": {"enabled": True}}, tmp_path)
    assert p.declared_catalogs == {} and p.catalogs_env("analytics") == ""
