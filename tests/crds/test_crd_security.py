"""Admission refuses what would leak or escalate, through the real API server code (tools/crd-check).

Only the fields this file is about are asserted: an instance is "refused on
FIELD" when crd-check prints an error for that field path, and "accepted on
FIELD" when it prints none for it (other fields' errors do not matter here).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CRD_CHECK = next(p for p in (REPO / "shared/tools/crd-check", REPO.parent / "shared/tools/crd-check") if p.exists())
PLURALS = {"CopyJob": "copyjobs", "StreamCopy": "streamcopies", "Compaction": "compactions"}
SPECS: dict[str, dict[str, Any]] = {
    "CopyJob": {"from": {"query": "SELECT 1"}, "to": {"files": "s3://bkt/out/"}},
    "StreamCopy": {"source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["t"]}},
                   "target": {"table": "s3://bkt/t/"}},
    "Compaction": {"table": "s3://bkt/t/"},
}


def field_errors(kind: str, spec: dict[str, Any], field: str, tmp_path: Path) -> list[str]:
    """crd-check's error lines about ``field`` for one instance of ``kind``."""
    obj = {"apiVersion": "lading.io/v1alpha1", "kind": kind, "metadata": {"name": "t", "namespace": "team-a"},
           "spec": spec}
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(obj))
    out = subprocess.run([str(CRD_CHECK), "--crd", str(REPO / "crds" / f"{PLURALS[kind]}.lading.io.yaml"),
                          str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1), out.stderr
    return [ln for ln in out.stdout.splitlines() if ln.startswith("ERROR") and f": {field}: " in ln]


@pytest.mark.parametrize("kind", sorted(PLURALS))
@pytest.mark.parametrize(("endpoint", "refused"), [
    ("http://minio:9000", False),
    ("https://s3.eu-west-1.example.com/base/", False),
    ("http://user:secret@minio:9000", True),
    ("http://evil.example\\@minio:9000", True),
    ("http://minio:9000/?x=1", True),
    ("http://minio:9000#x", True),
    ("minio:9000", True),
])
def test_endpoint_admission(kind: str, endpoint: str, refused: bool, tmp_path: Path) -> None:
    spec = {**SPECS[kind], "connection": {"endpoint": endpoint}}
    errors = field_errors(kind, spec, "spec.connection.endpoint", tmp_path)
    assert bool(errors) is refused, errors


@pytest.mark.parametrize("kind", sorted(PLURALS))
@pytest.mark.parametrize(("key", "refused"), [
    ("spark.sql.shuffle.partitions", False),
    ("spark.kubernetes.driver.annotation.example.com/team", False),  # the policy decides, not admission
    ("spark.kubernetes.namespace", True),
    ("spark.kubernetes.authenticate.driver.serviceAccountName", True),
    ("spark.kubernetes.driver.secrets.other-team", True),
    ("spark.kubernetes.executor.secretKeyRef.AWS_SECRET_ACCESS_KEY", True),
    ("spark.kubernetes.container.image", True),
    ("spark.kubernetes.driver.podTemplateFile", True),
    ("spark.kubernetes.executor.volumes.hostPath.root.mount.path", True),
    ("spark.jars.packages", True),
    ("spark.executor.instances", True),
    ("spark.kubernetes.namespace=kube-system#", True),  # '=' would split into another key
    ("hive.metastore.uris", True),
])
def test_spark_conf_admission(kind: str, key: str, refused: bool, tmp_path: Path) -> None:
    spec = {**SPECS[kind], "spark": {"sparkConf": {key: "x"}}}
    errors = field_errors(kind, spec, "spec.spark.sparkConf", tmp_path)
    assert bool(errors) is refused, errors


def test_crd_rule_lists_what_lading_spec_never_allows() -> None:
    """The admission rule and lading_spec.sparkconf refuse the same fixed keys and prefixes."""
    from lading_spec import sparkconf

    for plural in PLURALS.values():
        crd = yaml.safe_load((REPO / "crds" / f"{plural}.lading.io.yaml").read_text())
        spark = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["spark"]
        rules = " ".join(r["rule"] for r in spark["properties"]["sparkConf"]["x-kubernetes-validations"])
        for pattern, _ in sparkconf.NEVER:
            assert f"'{pattern}'" in rules, (plural, pattern)
        for key in sparkconf.SPEC_FIELDS:
            assert f"'{key}'" in rules, (plural, key)
