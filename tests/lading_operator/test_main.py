"""Operator start-up settings (lading_operator.main.configure), in both RBAC modes."""

from __future__ import annotations

import kopf
import pytest

from lading_operator import main


@pytest.mark.parametrize("namespaces", ["", "team-a,team-b"])
def test_scanning_is_off_in_both_modes(monkeypatch: pytest.MonkeyPatch, namespaces: str) -> None:
    """docs/security.md: the operator never watches CRDs or Namespaces (it has no RBAC for them)."""
    monkeypatch.setenv("LADING_NAMESPACES", namespaces)
    monkeypatch.setenv("LADING_METRICS_PORT", "off")
    monkeypatch.delenv("LADING_POLICY_FILE", raising=False)
    settings = kopf.OperatorSettings()
    main.configure(settings=settings)
    assert settings.scanning.disabled is True
    assert settings.peering.standalone is True


def test_a_bad_start_timeout_stops_the_operator_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a ValueError in every later reconcile: configure refuses it, naming the variable."""
    monkeypatch.setenv("LADING_NAMESPACES", "")
    monkeypatch.setenv("LADING_METRICS_PORT", "off")
    monkeypatch.delenv("LADING_POLICY_FILE", raising=False)
    monkeypatch.setenv("LADING_START_TIMEOUT", "2m")
    with pytest.raises(ValueError, match="LADING_START_TIMEOUT='2m': expected a positive number of seconds"):
        main.configure(settings=kopf.OperatorSettings())
