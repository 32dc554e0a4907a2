"""The CopyJob transition table: every listed transition, and refusals of the rest."""

from __future__ import annotations

import itertools

import pytest

from lading_operator.phases import (
    TERMINAL,
    TRANSITIONS,
    Phase,
    TransitionError,
    Trigger,
    can,
    is_terminal,
    next_phase,
)

EXPECTED = {
    (None, Trigger.SUBMIT): Phase.SUBMITTED,
    (Phase.PENDING, Trigger.INVALID): Phase.FAILED,
    (Phase.PENDING, Trigger.SCHEDULE): Phase.SCHEDULED,
    (Phase.PENDING, Trigger.SUSPEND): Phase.SUSPENDED,
    (Phase.SUBMITTED, Trigger.APP_RUNNING): Phase.RUNNING,
    (Phase.SUBMITTED, Trigger.RETRY): Phase.SUBMITTED,
    (Phase.RUNNING, Trigger.COMPLETED): Phase.SUCCEEDED,
    (Phase.RUNNING, Trigger.FAILED): Phase.FAILED,
    (Phase.RUNNING, Trigger.RETRY): Phase.SUBMITTED,
    (Phase.RUNNING, Trigger.DEADLINE): Phase.FAILED,
    (Phase.RUNNING, Trigger.DRIVER_LOST): Phase.FAILED,
    (Phase.RUNNING, Trigger.CANCEL): Phase.CANCELLING,
    (Phase.RUNNING, Trigger.RUN_ENDED): Phase.SCHEDULED,
    (Phase.CANCELLING, Trigger.CANCELLED): Phase.CANCELLED,
    (Phase.SCHEDULED, Trigger.SUBMIT): Phase.SUBMITTED,
    (Phase.SCHEDULED, Trigger.SUSPEND): Phase.SUSPENDED,
    (Phase.SUSPENDED, Trigger.RESUME): Phase.PENDING,
    (Phase.FAILED, Trigger.RESUME): Phase.PENDING,
}


@pytest.mark.parametrize(("start", "trigger"), list(EXPECTED))
def test_listed_transitions(start: Phase | None, trigger: Trigger) -> None:
    assert next_phase(start, trigger) == EXPECTED[(start, trigger)]


def test_every_phase_has_a_row() -> None:
    assert set(TRANSITIONS) == set(Phase)


@pytest.mark.parametrize(("phase", "trigger"), list(itertools.product(Phase, Trigger)))
def test_unlisted_transitions_are_refused(phase: Phase, trigger: Trigger) -> None:
    if trigger in TRANSITIONS[phase]:
        assert can(phase, trigger)
        assert next_phase(phase, trigger) == TRANSITIONS[phase][trigger]
    else:
        assert not can(phase, trigger)
        with pytest.raises(TransitionError, match=str(phase)):
            next_phase(phase, trigger)


def test_terminal_phases_do_not_start_runs() -> None:
    for phase in TERMINAL:
        assert is_terminal(phase)
        assert Trigger.SUBMIT not in TRANSITIONS[phase]
        assert Trigger.RETRY not in TRANSITIONS[phase]
    assert TRANSITIONS[Phase.SUCCEEDED] == {} and TRANSITIONS[Phase.CANCELLED] == {}
    assert not is_terminal(None) and not is_terminal(Phase.RUNNING)


def test_every_phase_is_reachable_from_new() -> None:
    seen = {Phase.PENDING}
    frontier = [Phase.PENDING]
    while frontier:
        phase = frontier.pop()
        for target in TRANSITIONS[phase].values():
            if target not in seen:
                seen.add(target)
                frontier.append(target)
    assert seen == set(Phase)
