"""The chart's crds/ is an exact copy of crds/ (scripts/sync-crds), and each CRD validates."""

from __future__ import annotations

import subprocess

import kubernetes_validate
import pytest
import yaml
from chart import helm

SOURCE = helm.ROOT / "crds"
CHART_CRDS = helm.CHART / "crds"
EXPECTED = {"copyjobs.lading.io.yaml", "streamcopies.lading.io.yaml", "compactions.lading.io.yaml"}


def test_chart_crds_equal_the_source_crds() -> None:
    source = {p.name: p.read_bytes() for p in SOURCE.glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in CHART_CRDS.glob("*.yaml")}
    assert set(source) >= EXPECTED, f"crds/ should hold {sorted(EXPECTED)}"
    assert chart == source, "charts/lading/crds/ differs from crds/: run scripts/sync-crds"


def test_sync_script_check_mode_agrees() -> None:
    result = subprocess.run(["bash", str(helm.ROOT / "scripts" / "sync-crds"), "--check"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("version", ["1.28", kubernetes_validate.utils.latest_version()])
def test_chart_crds_validate_and_are_what_helm_installs(version: str) -> None:
    rendered = [o for o in helm.render(helm.CLUSTER, include_crds=True)
                if o["kind"] == "CustomResourceDefinition"]
    names = set()
    for path in sorted(CHART_CRDS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            kubernetes_validate.validate(doc, version, strict=True)
            assert doc["spec"]["group"] == "lading.io"
            assert doc["spec"]["scope"] == "Namespaced"
            names.add(doc["metadata"]["name"])
    assert names == {o["metadata"]["name"] for o in rendered}
    assert names == {n.removesuffix(".yaml") for n in EXPECTED}
