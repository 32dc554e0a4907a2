"""One version: pyproject.toml, the code (lading_spec.version), the chart's appVersion and the default image."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

from lading_operator import render
from lading_spec.version import VERSION

ROOT = Path(__file__).resolve().parents[1]


def test_one_version_everywhere() -> None:
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == VERSION
    chart = yaml.safe_load((ROOT / "charts" / "lading" / "Chart.yaml").read_text())
    assert chart["appVersion"] == VERSION
    assert f"ghcr.io/lading/lading:{VERSION}" == render.DEFAULT_IMAGE
