"""Phases, triggers and transition tables (pure).

Every kind shares one vocabulary of phases (``status.phase``) and of triggers
(what happened). Which trigger may move which phase where is a *table*; each
piece of the lifecycle owns one and composes it with the others:

- :data:`lading_operator.lifecycle.RUN` — one run: Submitted → Running →
  Cancelling, retries, waiting on things outside lading;
- :data:`lading_operator.triggers.oneshot.TABLE` — one run per resource, then a
  terminal phase;
- :data:`lading_operator.triggers.scheduled.TABLE` — a run per schedule slot,
  back to Scheduled after each;
- :data:`lading_operator.triggers.continuous.TABLE` — one long-running run kept
  alive (StreamCopy): restarted on a spec change or a crash, stopped by suspend
  or by a reason to stop (Failed until the spec changes);
- :data:`lading_operator.triggers.parked.TABLE` — a kind whose engine is not in
  this release: Pending, or Failed for an invalid spec.

``next_phase`` refuses any transition its table does not list, so a bug shows up
as an error instead of a status that lies.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


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
    WAIT = "Wait"                  # the run waits on something outside lading (a condition says what)
    QUEUE = "Queue"                # a new run waits for a free run slot of its namespace (runslots)
    COMPLETED = "Completed"        # the run succeeded
    FAILED = "Failed"              # the run failed and no retries are left (or never retried)
    RETRY = "Retry"                # the run failed; a new attempt is submitted
    DEADLINE = "Deadline"          # activeDeadlineSeconds passed
    DRIVER_LOST = "DriverLost"     # the driver pod vanished, no retries left
    CANCEL = "Cancel"              # spec.cancel with a SparkApplication to stop
    CANCELLED = "Cancelled"        # nothing (left) running: the run is cancelled
    INVALID = "Invalid"            # the spec cannot run (InvalidSpec, Forbidden)
    SCHEDULE = "Schedule"          # spec.schedule: wait for the next run
    RUN_ENDED = "RunEnded"         # a scheduled run ended; back to waiting
    SUSPEND = "Suspend"
    RESUME = "Resume"
    PARK = "Park"                  # a valid spec of a kind whose engine is not in this release
    RESTART = "Restart"            # a continuous run starts again (spec change, crash, app replaced)


TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})
ACTIVE = frozenset({Phase.SUBMITTED, Phase.RUNNING, Phase.CANCELLING})

Table = Mapping[Phase, Mapping[Trigger, Phase]]


class TransitionError(ValueError):
    """A transition the table does not allow."""


def compose(*tables: Table) -> dict[Phase, dict[Trigger, Phase]]:
    """One table holding every row of ``tables`` (every phase has a row, maybe empty).

    Two tables must not send the same (phase, trigger) to different phases.
    """
    out: dict[Phase, dict[Trigger, Phase]] = {phase: {} for phase in Phase}
    for table in tables:
        for phase, row in table.items():
            for trigger, target in row.items():
                if out[phase].get(trigger, target) != target:
                    raise ValueError(f"conflicting transitions from {phase} on {trigger}: "
                                     f"{out[phase][trigger]} and {target}")
                out[phase][trigger] = target
    return out


def next_phase(table: Table, phase: Phase | str | None, trigger: Trigger) -> Phase:
    """The phase after ``trigger`` in ``phase`` (``None``/"" = new, i.e. Pending)."""
    current = Phase(phase) if phase else Phase.PENDING
    try:
        return table[current][trigger]
    except KeyError:
        raise TransitionError(f"no transition from {current} on {trigger}") from None


def can(table: Table, phase: Phase | str | None, trigger: Trigger) -> bool:
    current = Phase(phase) if phase else Phase.PENDING
    return trigger in table.get(current, {})


def reachable(table: Table, start: Phase = Phase.PENDING) -> set[Phase]:
    """Every phase ``table`` can reach from ``start`` (``start`` included)."""
    seen = {start}
    frontier = [start]
    while frontier:
        for target in table.get(frontier.pop(), {}).values():
            if target not in seen:
                seen.add(target)
                frontier.append(target)
    return seen


def is_terminal(phase: Phase | str | None) -> bool:
    return bool(phase) and Phase(str(phase)) in TERMINAL
