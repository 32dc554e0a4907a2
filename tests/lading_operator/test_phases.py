"""The transition tables: every listed transition, refusals of the rest, what each policy reaches."""

from __future__ import annotations

import itertools

import pytest

from lading_operator import lifecycle
from lading_operator.phases import (
    TERMINAL,
    Phase,
    Table,
    TransitionError,
    Trigger,
    can,
    compose,
    is_terminal,
    next_phase,
    reachable,
)
from lading_operator.triggers import oneshot, parked, scheduled

TABLES: dict[str, Table] = {"oneshot": oneshot.TABLE, "scheduled": scheduled.TABLE, "parked": parked.TABLE}

# The run's own transitions hold in every policy that runs something.
RUN = {
    (Phase.SUBMITTED, Trigger.APP_RUNNING): Phase.RUNNING,
    (Phase.SUBMITTED, Trigger.RETRY): Phase.SUBMITTED,
    (Phase.SUBMITTED, Trigger.WAIT): Phase.SUBMITTED,
    (Phase.SUBMITTED, Trigger.CANCEL): Phase.CANCELLING,
    (Phase.RUNNING, Trigger.RETRY): Phase.SUBMITTED,
    (Phase.RUNNING, Trigger.CANCEL): Phase.CANCELLING,
    (Phase.RUNNING, Trigger.INVALID): Phase.FAILED,
}
EXPECTED: dict[str, dict[tuple[Phase | None, Trigger], Phase]] = {
    "oneshot": {
        **RUN,
        (None, Trigger.SUBMIT): Phase.SUBMITTED,
        (Phase.PENDING, Trigger.INVALID): Phase.FAILED,
        (Phase.PENDING, Trigger.SUSPEND): Phase.SUSPENDED,
        (Phase.RUNNING, Trigger.COMPLETED): Phase.SUCCEEDED,
        (Phase.RUNNING, Trigger.FAILED): Phase.FAILED,
        (Phase.RUNNING, Trigger.DEADLINE): Phase.FAILED,
        (Phase.RUNNING, Trigger.DRIVER_LOST): Phase.FAILED,
        (Phase.CANCELLING, Trigger.CANCELLED): Phase.CANCELLED,
        (Phase.SUSPENDED, Trigger.RESUME): Phase.PENDING,
        (Phase.FAILED, Trigger.RESUME): Phase.PENDING,
        (Phase.SCHEDULED, Trigger.SUBMIT): Phase.SUBMITTED,
    },
    "scheduled": {
        **RUN,
        (Phase.PENDING, Trigger.SCHEDULE): Phase.SCHEDULED,
        (Phase.SCHEDULED, Trigger.SUBMIT): Phase.SUBMITTED,
        (Phase.SCHEDULED, Trigger.SUSPEND): Phase.SUSPENDED,
        (Phase.RUNNING, Trigger.SUBMIT): Phase.SUBMITTED,
        (Phase.RUNNING, Trigger.RUN_ENDED): Phase.SCHEDULED,
        (Phase.CANCELLING, Trigger.CANCELLED): Phase.CANCELLED,
        (Phase.CANCELLING, Trigger.RUN_ENDED): Phase.SCHEDULED,
        (Phase.SUSPENDED, Trigger.SCHEDULE): Phase.SCHEDULED,
    },
    "parked": {
        (None, Trigger.PARK): Phase.PENDING,
        (Phase.PENDING, Trigger.INVALID): Phase.FAILED,
        (Phase.FAILED, Trigger.RESUME): Phase.PENDING,
    },
}


@pytest.mark.parametrize(("table", "start", "trigger"),
                         [(t, s, g) for t, rows in EXPECTED.items() for s, g in rows])
def test_listed_transitions(table: str, start: Phase | None, trigger: Trigger) -> None:
    assert next_phase(TABLES[table], start, trigger) == EXPECTED[table][(start, trigger)]


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_phase_has_a_row(table: str) -> None:
    assert set(TABLES[table]) == set(Phase)


@pytest.mark.parametrize(("table", "phase", "trigger"), list(itertools.product(sorted(TABLES), Phase, Trigger)))
def test_unlisted_transitions_are_refused(table: str, phase: Phase, trigger: Trigger) -> None:
    rows = TABLES[table]
    if trigger in rows[phase]:
        assert can(rows, phase, trigger)
        assert next_phase(rows, phase, trigger) == rows[phase][trigger]
    else:
        assert not can(rows, phase, trigger)
        with pytest.raises(TransitionError, match=str(phase)):
            next_phase(rows, phase, trigger)


@pytest.mark.parametrize("table", sorted(TABLES))
def test_terminal_phases_do_not_start_runs(table: str) -> None:
    rows = TABLES[table]
    for phase in TERMINAL:
        assert is_terminal(phase)
        assert Trigger.SUBMIT not in rows[phase] and Trigger.RETRY not in rows[phase]
    assert rows[Phase.SUCCEEDED] == {} and rows[Phase.CANCELLED] == {}
    assert not is_terminal(None) and not is_terminal(Phase.RUNNING)


def test_what_each_policy_reaches_from_new() -> None:
    assert reachable(oneshot.TABLE) == set(Phase) - {Phase.SCHEDULED}
    assert reachable(scheduled.TABLE) == set(Phase) - {Phase.SUCCEEDED}
    assert reachable(parked.TABLE) == {Phase.PENDING, Phase.FAILED}


def test_every_policy_that_runs_holds_the_run_table() -> None:
    for rows in (oneshot.TABLE, scheduled.TABLE):
        for phase, row in lifecycle.RUN.items():
            assert dict(row).items() <= dict(rows[phase]).items()


def test_compose_refuses_conflicting_rows() -> None:
    with pytest.raises(ValueError, match="conflicting"):
        compose({Phase.PENDING: {Trigger.SUBMIT: Phase.SUBMITTED}},
                {Phase.PENDING: {Trigger.SUBMIT: Phase.RUNNING}})
