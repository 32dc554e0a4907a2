"""Run the real helm binary on charts/lading: lint, template, parse what it renders.

helm comes from scripts/bootstrap (.tools/bin/helm) or PATH; without it the tests
fail with the command that fixes it, they never skip.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "lading"
RELEASE = "ops"
NAMESPACE = "lading-system"

# The two RBAC modes, and every optional part switched on.
CLUSTER: dict[str, Any] = {}
NAMESPACED: dict[str, Any] = {"watch": {"namespaces": ["team-a", "team-b"]}}
EVERYTHING: dict[str, Any] = {
    "watch": {"namespaces": ["team-a", "team-b"]},
    "spark": {"jobNamespaces": ["team-a", "team-b", "batch"], "rbac": {"persistentVolumeClaims": True},
              "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"}}},
    "policy": {"enabled": True, "allowedPrefixes": {
        "default": ["s3://exports/{namespace}/"],
        "namespaces": {"team-a": ["s3://lake-a/", "file:///data/a/"]},
    }},
    "metrics": {"service": {"enabled": True}, "podMonitor": {"enabled": True, "labels": {"release": "prom"}}},
    "image": {"digest": "sha256:" + "a" * 64},
    "imagePullSecrets": ["regcred"],
    "podAnnotations": {"example.com/a": "b"},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ops", "effect": "NoSchedule"}],
    "operator": {"extraEnv": [{"name": "LADING_EXTRA", "value": "1"}]},
    "priorityClassName": "system-cluster-critical",
    "networkPolicy": {"enabled": True, "apiServer": {"cidrs": ["10.96.0.1/32", "172.20.0.0/16"]},
                      "metricsFrom": [{"namespaceSelector": {"matchLabels": {
                          "kubernetes.io/metadata.name": "monitoring"}}}],
                      "sparkEgress": [{"ports": [{"port": 443, "protocol": "TCP"}, {"port": 9093, "protocol": "TCP"}]}]},
}
MODES = {"cluster": CLUSTER, "namespaced": NAMESPACED, "everything": EVERYTHING}


def helm_bin() -> str:
    local = ROOT / ".tools" / "bin" / "helm"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    found = shutil.which("helm")
    if found:
        return found
    pytest.fail("helm not found: run `bash scripts/bootstrap` (it puts helm in .tools/bin/helm)")


def run_helm(*args: str, values: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        json.dump(values or {}, f)
        path = f.name
    try:
        return subprocess.run(
            [helm_bin(), *args, "-f", path], capture_output=True, text=True, timeout=120, check=False,
        )
    finally:
        os.unlink(path)


@functools.cache
def _render(values_json: str, include_crds: bool) -> tuple[dict[str, Any], ...]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    if include_crds:
        args.append("--include-crds")
    result = run_helm(*args, values=json.loads(values_json))
    assert result.returncode == 0, result.stderr
    return tuple(d for d in yaml.safe_load_all(result.stdout) if d)


def render(values: dict[str, Any], *, include_crds: bool = False) -> list[dict[str, Any]]:
    """The objects `helm template` renders for ``values`` (cached per values)."""
    return [json.loads(json.dumps(d)) for d in _render(json.dumps(values, sort_keys=True), include_crds)]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]
