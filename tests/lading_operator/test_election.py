"""Leader election's settings and the standby's liveness endpoint (lading_operator.election);
the decisions are in test_lease.py, the election against a real API server in
tests/e2e/test_leader_election.py."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest

from lading_operator import election, lease

VARIABLES = ("LADING_LEADER_ELECTION", "LADING_LEASE_NAMESPACE", "LADING_LEASE_NAME", "LADING_LEASE_DURATION",
             "LADING_LEASE_RENEW_DEADLINE", "LADING_LEASE_RETRY_PERIOD", "LADING_POD_NAME")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(election, "POD_NAMESPACE_FILE", "/nonexistent/namespace")  # not a pod


def test_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert election.config_from_env() is None
    monkeypatch.setenv("LADING_LEADER_ELECTION", "off")
    assert election.config_from_env() is None


def test_on_with_the_chart_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LADING_LEADER_ELECTION", "on")
    monkeypatch.setenv("LADING_LEASE_NAMESPACE", "lading-system")
    monkeypatch.setenv("LADING_POD_NAME", "lading-operator-7d9f-abcde")
    config = election.config_from_env()
    assert config is not None
    assert (config.namespace, config.name, config.timing) == ("lading-system", "lading-operator", lease.Timing(15, 10, 2))
    prefix, suffix = config.identity.split("_")
    assert prefix == "lading-operator-7d9f-abcde" and len(suffix) == 36
    again = election.config_from_env()  # as a restarted process: a new holder
    assert again is not None and again.identity != config.identity


@pytest.mark.parametrize("env, message", [
    ({"LADING_LEADER_ELECTION": "yes"}, "LADING_LEADER_ELECTION='yes': expected on or off"),
    ({"LADING_LEADER_ELECTION": "on", "LADING_LEASE_NAMESPACE": ""}, "LADING_LEASE_NAMESPACE is not set"),
    ({"LADING_LEASE_DURATION": "15s"}, "LADING_LEASE_DURATION='15s': expected a positive number of seconds"),
    ({"LADING_LEASE_DURATION": "7.5"}, "LADING_LEASE_DURATION=7.5: expected whole seconds"),
    ({"LADING_LEASE_RETRY_PERIOD": "0"}, "LADING_LEASE_RETRY_PERIOD='0': expected a positive number"),
    ({"LADING_LEASE_RENEW_DEADLINE": "15"}, "renew deadline \\(15\\) < lease duration \\(15\\)"),
])
def test_a_bad_setting_stops_the_operator_at_start_up_naming_it(
        monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str) -> None:
    settings = {"LADING_LEADER_ELECTION": "on", "LADING_LEASE_NAMESPACE": "lading-system", **env}
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        election.config_from_env()


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_the_standby_answers_the_liveness_probe_and_frees_the_port_for_kopf() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with election.standby_liveness(f"http://127.0.0.1:{port}/healthz"):
        assert _get(f"http://127.0.0.1:{port}/healthz") == 200
        assert _get(f"http://127.0.0.1:{port}/other") == 404
    with socket.socket() as s:  # kopf binds it next
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
