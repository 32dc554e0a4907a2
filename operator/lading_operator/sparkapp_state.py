"""SparkApplication state → what it means for our run (pure).

spark-operator reports ``status.applicationState.state``; every value it uses is
mapped here, plus the two facts the state alone hides: the SparkApplication is
gone, or it claims to run while its driver pod has disappeared (the stuck status
of kubeflow/spark-operator#2755 and #2872).

::

    ""/NEW, SUBMITTED, PENDING_RERUN,          ─▶ WAITING    (our phase Submitted)
    INVALIDATING, SUSPENDING, SUSPENDED, RESUMING
    RUNNING, UNKNOWN (driver pod present)      ─▶ RUNNING    (Running)
    SUCCEEDING, FAILING                        ─▶ FINISHING  (Running; result pending)
    COMPLETED                                  ─▶ COMPLETED  (Succeeded)
    FAILED, SUBMISSION_FAILED                  ─▶ FAILED     (retry or Failed)
    RUNNING/UNKNOWN/SUCCEEDING/FAILING,
      driver pod gone                          ─▶ LOST       (retry or Failed/DriverLost)
    no SparkApplication                        ─▶ GONE
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from lading_operator import status as st
from lading_spec.refusals import refusal


class Outcome(enum.Enum):
    WAITING = "Waiting"
    RUNNING = "Running"
    FINISHING = "Finishing"
    COMPLETED = "Completed"
    FAILED = "Failed"
    LOST = "Lost"
    GONE = "Gone"


WAITING_STATES = frozenset({"", "NEW", "SUBMITTED", "PENDING_RERUN", "INVALIDATING",
                            "SUSPENDING", "SUSPENDED", "RESUMING"})
RUNNING_STATES = frozenset({"RUNNING", "UNKNOWN"})
FINISHING_STATES = frozenset({"SUCCEEDING", "FAILING"})
COMPLETED_STATES = frozenset({"COMPLETED"})
FAILED_STATES = frozenset({"FAILED", "SUBMISSION_FAILED"})
ALL_STATES = WAITING_STATES | RUNNING_STATES | FINISHING_STATES | COMPLETED_STATES | FAILED_STATES
# States in which a driver pod must exist; its absence means the driver was lost.
DRIVER_EXPECTED = RUNNING_STATES | FINISHING_STATES


def app_state(app: Mapping[str, Any] | None) -> str:
    """``status.applicationState.state`` ("" when not reported yet)."""
    if not app:
        return ""
    return str(((app.get("status") or {}).get("applicationState") or {}).get("state") or "")


def app_error(app: Mapping[str, Any] | None) -> str:
    """spark-operator's ``errorMessage``. When it holds the API server's refusal (spark-submit's
    whole output, where ``exceeded quota`` or a missing permission sits in a stack trace), that
    comes first: the head survives clipping, and it is what the user must fix."""
    if not app:
        return ""
    message = str(((app.get("status") or {}).get("applicationState") or {}).get("errorMessage") or "")
    found = refusal(message)
    return st.clip(f"{found} (spark-operator: {message})" if found else message)


def needs_driver_pod(state: str) -> bool:
    """Whether the driver pod should be looked at for this state (loss, or the result)."""
    return state in DRIVER_EXPECTED or state in COMPLETED_STATES or state in FAILED_STATES


def classify(app: Mapping[str, Any] | None, driver_pod_exists: bool | None = None) -> Outcome:
    """Map a SparkApplication (``None`` = absent) and whether its driver pod exists.

    ``driver_pod_exists=None`` means "not looked at": no loss is inferred.
    A state spark-operator may add later counts as WAITING (never as success).
    """
    if app is None:
        return Outcome.GONE
    state = app_state(app)
    if state in DRIVER_EXPECTED and driver_pod_exists is False:
        return Outcome.LOST
    if state in RUNNING_STATES:
        return Outcome.RUNNING
    if state in FINISHING_STATES:
        return Outcome.FINISHING
    if state in COMPLETED_STATES:
        return Outcome.COMPLETED
    if state in FAILED_STATES:
        return Outcome.FAILED
    return Outcome.WAITING


def is_terminal(outcome: Outcome) -> bool:
    return outcome in (Outcome.COMPLETED, Outcome.FAILED, Outcome.LOST, Outcome.GONE)
