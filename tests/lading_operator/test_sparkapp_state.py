"""Every SparkApplication state spark-operator reports, and a vanished driver pod."""

from __future__ import annotations

from typing import Any

import pytest

from lading_operator.sparkapp_state import (
    ALL_STATES,
    Outcome,
    app_error,
    app_state,
    classify,
    needs_driver_pod,
)

CASES = {
    "": Outcome.WAITING,
    "NEW": Outcome.WAITING,
    "SUBMITTED": Outcome.WAITING,
    "PENDING_RERUN": Outcome.WAITING,
    "INVALIDATING": Outcome.WAITING,
    "SUSPENDING": Outcome.WAITING,
    "SUSPENDED": Outcome.WAITING,
    "RESUMING": Outcome.WAITING,
    "RUNNING": Outcome.RUNNING,
    "UNKNOWN": Outcome.RUNNING,
    "SUCCEEDING": Outcome.FINISHING,
    "FAILING": Outcome.FINISHING,
    "COMPLETED": Outcome.COMPLETED,
    "FAILED": Outcome.FAILED,
    "SUBMISSION_FAILED": Outcome.FAILED,
}


def app(state: str | None, error: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "a"}}
    if state is not None:
        obj["status"] = {"applicationState": {"state": state, **({"errorMessage": error} if error else {})}}
    return obj


def test_the_table_covers_every_state() -> None:
    assert set(CASES) == ALL_STATES


@pytest.mark.parametrize("state", sorted(CASES))
def test_state_with_driver_present(state: str) -> None:
    assert classify(app(state), driver_pod_exists=True) == CASES[state]
    assert classify(app(state)) == CASES[state]  # pod not looked at: no loss inferred


@pytest.mark.parametrize("state", ["RUNNING", "UNKNOWN", "SUCCEEDING", "FAILING"])
def test_driver_pod_vanished_is_lost(state: str) -> None:
    assert classify(app(state), driver_pod_exists=False) == Outcome.LOST
    assert needs_driver_pod(state)


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED", "SUBMISSION_FAILED", "", "NEW", "SUBMITTED"])
def test_no_loss_outside_running_states(state: str) -> None:
    # A finished app whose pod was cleaned up keeps its outcome; a new one has no pod yet.
    assert classify(app(state), driver_pod_exists=False) == CASES[state]


def test_absent_application_and_missing_status() -> None:
    assert classify(None) == Outcome.GONE
    assert classify(app(None)) == Outcome.WAITING
    assert app_state(None) == "" and app_state(app(None)) == ""


def test_unknown_future_state_is_never_success() -> None:
    assert classify(app("SOMETHING_NEW"), driver_pod_exists=True) == Outcome.WAITING


def test_error_message() -> None:
    assert app_error(app("FAILED", "driver OOMKilled")) == "driver OOMKilled"
    assert app_error(None) == ""


def test_a_refusal_in_spark_submits_output_comes_first() -> None:
    """A quota's refusal in the middle of spark-submit's output (what spark-operator puts in
    errorMessage) leads the error, so clipping a long output never hides it."""
    output = ("failed to run spark-submit: " + "INFO noise\n" * 2000
              + "Exception in thread \"main\" io.fabric8.kubernetes.client.KubernetesClientException: Failure "
              "executing: POST at: https://10.0.0.1:6443/api/v1/namespaces/ns/pods. Message: pods \"a-driver\" is "
              "forbidden: exceeded quota: small, requested: requests.memory=1408Mi, used: requests.memory=0, "
              "limited: requests.memory=1000Mi. Received status: Status(code=403).\n" + "INFO shutdown\n" * 2000)
    error = app_error(app("SUBMISSION_FAILED", output))
    assert error.startswith('Kubernetes refused POST /api/v1/namespaces/ns/pods: pods "a-driver" is forbidden: '
                            "exceeded quota: small, requested: requests.memory=1408Mi")
    assert len(error) < len(output) and "characters cut" in error
