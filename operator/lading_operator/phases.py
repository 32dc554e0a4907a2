"""The CopyJob phase machine: an explicit transition table (pure).

::

                 ┌──────────── InvalidSpec / Forbidden ───────────────────────┐
                 │                                                            ▼
   (new) ─▶ Pending ──submit──▶ Submitted ──app running──▶ Running ──completed──▶ Succeeded
              │  ▲                │   ▲ retry (attempt+1)     │   │
              │  │                │   └───────────────────────┤   ├─failed, no retries left──▶ Failed
              │  │ unsuspend      │                           │   ├─deadline──────────────────▶ Failed
              │  │                └──────── cancel ───────────┴───┴─▶ Cancelling ─app gone─▶ Cancelled
              ▼  │
           Suspended ◀─suspend── Scheduled ──due──▶ Submitted ... run ends ──▶ Scheduled
                                     ▲ (scheduled CopyJobs return here after every run;
                                     │  the run's outcome goes to status.lastRuns)

Succeeded, Failed and Cancelled are terminal for one-shot CopyJobs. ``next_phase``
refuses any transition the table does not list, so a bug shows up as an error
instead of a status that lies.
"""

from __future__ import annotations

import enum


class Phase(enum.StrEnum):
    PENDING = "Pending"
    SUBMITTED = "Submitted"
    RUNNING = "Running"
    CANCELLING = "Cancelling"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    SCHEDULED = "Scheduled"
    SUSPENDED = "Suspended"


class Trigger(enum.StrEnum):
    SUBMIT = "Submit"              # a SparkApplication was created for a run
    APP_RUNNING = "AppRunning"     # its driver runs
    COMPLETED = "Completed"        # the run succeeded
    FAILED = "Failed"              # the run failed and no retries are left (or never retried)
    RETRY = "Retry"                # the run failed; a new attempt is submitted
    DEADLINE = "Deadline"          # activeDeadlineSeconds passed
    DRIVER_LOST = "DriverLost"     # the driver pod vanished, no retries left
    CANCEL = "Cancel"              # spec.cancel (or deletion) with a SparkApplication to stop
    CANCELLED = "Cancelled"        # nothing (left) running: the run is cancelled
    INVALID = "Invalid"            # the spec cannot run (InvalidSpec, Forbidden)
    SCHEDULE = "Schedule"          # spec.schedule: wait for the next run
    RUN_ENDED = "RunEnded"         # a scheduled run ended; back to waiting
    SUSPEND = "Suspend"
    RESUME = "Resume"


TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})
ACTIVE = frozenset({Phase.SUBMITTED, Phase.RUNNING, Phase.CANCELLING})

TRANSITIONS: dict[Phase, dict[Trigger, Phase]] = {
    Phase.PENDING: {
        Trigger.SUBMIT: Phase.SUBMITTED,
        Trigger.INVALID: Phase.FAILED,
        Trigger.FAILED: Phase.FAILED,          # submission refused by the API
        Trigger.CANCELLED: Phase.CANCELLED,
        Trigger.SCHEDULE: Phase.SCHEDULED,
        Trigger.SUSPEND: Phase.SUSPENDED,
    },
    Phase.SUBMITTED: {
        Trigger.SUBMIT: Phase.SUBMITTED,       # the next scheduled run starts alongside (Allow)
        Trigger.APP_RUNNING: Phase.RUNNING,
        Trigger.COMPLETED: Phase.SUCCEEDED,
        Trigger.FAILED: Phase.FAILED,
        Trigger.RETRY: Phase.SUBMITTED,
        Trigger.DEADLINE: Phase.FAILED,
        Trigger.DRIVER_LOST: Phase.FAILED,
        Trigger.CANCEL: Phase.CANCELLING,
        Trigger.CANCELLED: Phase.CANCELLED,
        Trigger.INVALID: Phase.FAILED,
        Trigger.RUN_ENDED: Phase.SCHEDULED,
    },
    Phase.RUNNING: {
        Trigger.SUBMIT: Phase.SUBMITTED,       # the next scheduled run starts alongside (Allow)
        Trigger.COMPLETED: Phase.SUCCEEDED,
        Trigger.FAILED: Phase.FAILED,
        Trigger.RETRY: Phase.SUBMITTED,
        Trigger.DEADLINE: Phase.FAILED,
        Trigger.DRIVER_LOST: Phase.FAILED,
        Trigger.CANCEL: Phase.CANCELLING,
        Trigger.CANCELLED: Phase.CANCELLED,
        Trigger.INVALID: Phase.FAILED,
        Trigger.RUN_ENDED: Phase.SCHEDULED,
    },
    Phase.CANCELLING: {
        Trigger.CANCELLED: Phase.CANCELLED,
        Trigger.RUN_ENDED: Phase.SCHEDULED,
    },
    Phase.SCHEDULED: {
        Trigger.SUBMIT: Phase.SUBMITTED,
        Trigger.SUSPEND: Phase.SUSPENDED,
        Trigger.INVALID: Phase.FAILED,
        Trigger.SCHEDULE: Phase.SCHEDULED,
        Trigger.CANCELLED: Phase.CANCELLED,
    },
    Phase.SUSPENDED: {
        Trigger.RESUME: Phase.PENDING,
        Trigger.SCHEDULE: Phase.SCHEDULED,
        Trigger.INVALID: Phase.FAILED,
        Trigger.CANCELLED: Phase.CANCELLED,
    },
    Phase.SUCCEEDED: {},
    Phase.FAILED: {
        # A spec fixed after InvalidSpec starts afresh (a new generation).
        Trigger.RESUME: Phase.PENDING,
        Trigger.INVALID: Phase.FAILED,       # still invalid, another message
    },
    Phase.CANCELLED: {},
}


class TransitionError(ValueError):
    """A transition the table does not allow."""


def next_phase(phase: Phase | str | None, trigger: Trigger) -> Phase:
    """The phase after ``trigger`` in ``phase`` (``None``/"" = new, i.e. Pending)."""
    current = Phase(phase) if phase else Phase.PENDING
    try:
        return TRANSITIONS[current][trigger]
    except KeyError:
        raise TransitionError(f"no transition from {current} on {trigger}") from None


def can(phase: Phase | str | None, trigger: Trigger) -> bool:
    current = Phase(phase) if phase else Phase.PENDING
    return trigger in TRANSITIONS[current]


def is_terminal(phase: Phase | str | None) -> bool:
    return bool(phase) and Phase(str(phase)) in TERMINAL
