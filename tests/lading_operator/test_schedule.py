"""The cron evaluator and CronJob-like due decisions."""

from __future__ import annotations

import datetime as dt
from hashlib import sha256

import pytest

from lading_operator import schedule
from lading_spec.errors import SpecError

UTC = dt.UTC


def t(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(("expr", "after", "expected"), [
    ("*/15 * * * *", t(2026, 1, 1, 10, 7), t(2026, 1, 1, 10, 15)),
    ("0 * * * *", t(2026, 1, 1, 10, 0), t(2026, 1, 1, 11, 0)),
    ("30 2 * * *", t(2026, 1, 1, 3, 0), t(2026, 1, 2, 2, 30)),
    ("0 0 1 * *", t(2026, 1, 15), t(2026, 2, 1)),
    ("0 0 * * mon", t(2026, 1, 1), t(2026, 1, 5)),         # 2026-01-01 is a Thursday
    ("0 0 * * 7", t(2026, 1, 1), t(2026, 1, 4)),           # 7 = Sunday
    ("0 0 13 * fri", t(2026, 1, 1), t(2026, 1, 2)),        # either day field matches
    ("0 12 29 feb *", t(2026, 3, 1), t(2028, 2, 29, 12)),
    ("@hourly", t(2026, 1, 1, 10, 59), t(2026, 1, 1, 11, 0)),
    ("@daily", t(2026, 12, 31, 23, 59), t(2027, 1, 1)),
    ("0-10/5 8-9 * jan-mar *", t(2026, 4, 1), t(2027, 1, 1, 8, 0)),
])
def test_next_after(expr: str, after: dt.datetime, expected: dt.datetime) -> None:
    assert schedule.parse_cron(expr).next_after(after) == expected


@pytest.mark.parametrize(("expr", "fragment"), [
    ("* * * *", "has 4 fields"),
    ("61 * * * *", "outside 0-59"),
    ("* * * * funday", "day of week"),
    ("*/0 * * * *", "step"),
    ("5-1 * * * *", "outside"),
    ("", "cron expression"),
    ("@every 1s", "shortest"),
    ("@every soon", "@every <n>s"),
])
def test_bad_expressions_name_schedule(expr: str, fragment: str) -> None:
    with pytest.raises(SpecError) as e:
        schedule.parse_schedule(expr, t(2026, 1, 1))
    assert e.value.field == "schedule" and fragment in e.value.message


def test_every_is_anchored_at_creation() -> None:
    every = schedule.parse_schedule("@every 30s", t(2026, 1, 1, 0, 0, 10))
    assert every.next_after(t(2026, 1, 1, 0, 0, 10)) == t(2026, 1, 1, 0, 0, 40)
    assert every.next_after(t(2026, 1, 1, 0, 0, 39)) == t(2026, 1, 1, 0, 0, 40)
    assert every.next_after(t(2026, 1, 1, 0, 0, 40)) == t(2026, 1, 1, 0, 1, 10)


def test_due_runs_only_the_latest_missed_slot() -> None:
    cron = schedule.parse_cron("*/10 * * * *")
    d = schedule.due(cron, last_slot=t(2026, 1, 1, 10, 0), created=t(2026, 1, 1), now=t(2026, 1, 1, 10, 35))
    assert d.slot == t(2026, 1, 1, 10, 30) and d.missed == 2 and d.next_time == t(2026, 1, 1, 10, 40)


def test_nothing_due_before_the_first_slot() -> None:
    cron = schedule.parse_cron("0 * * * *")
    d = schedule.due(cron, None, created=t(2026, 1, 1, 10, 5), now=t(2026, 1, 1, 10, 59))
    assert d.slot is None and d.next_time == t(2026, 1, 1, 11, 0)


def test_starting_deadline_skips_a_late_slot() -> None:
    cron = schedule.parse_cron("0 * * * *")
    late = schedule.due(cron, None, created=t(2026, 1, 1, 9, 30), now=t(2026, 1, 1, 10, 5),
                        starting_deadline_seconds=60)
    assert late.slot is None and late.missed == 1
    on_time = schedule.due(cron, None, created=t(2026, 1, 1, 9, 30), now=t(2026, 1, 1, 10, 0, 30),
                           starting_deadline_seconds=60)
    assert on_time.slot == t(2026, 1, 1, 10, 0)


def test_slot_run_ids_are_stable_and_distinct() -> None:
    assert schedule.slot_run_id(t(2026, 1, 1, 10, 30), "uid-1") == "20260101103000u" + sha256(b"uid-1").hexdigest()[:6]
    assert schedule.slot_run_id(t(2026, 1, 1, 10, 30), "uid-1") != schedule.slot_run_id(t(2026, 1, 1, 10, 31), "uid-1")
    # Two resources due at the same slot run two runs: a job takes a record of its run id as its own
    # earlier attempt's (an unload's manifest, a load's _lading_loads/<runId>.json)
    assert schedule.slot_run_id(t(2026, 1, 1, 10, 30), "uid-1") != schedule.slot_run_id(t(2026, 1, 1, 10, 30), "uid-2")
    assert "-" not in schedule.slot_run_id(t(2026, 1, 1, 10, 30), "uid-1")  # names.app_name's segments


def test_a_run_owner_is_the_uid_or_else_the_resources_kind_namespace_and_name() -> None:
    """The operator (triggers.scheduled) and ``lading render`` (render_cli, with no uid in a manifest)
    name the owner through this one function."""
    assert schedule.run_owner("uid-1", "CopyJob", "ns", "nightly") == "uid-1"
    assert schedule.run_owner("", "CopyJob", "ns", "nightly") == "CopyJob/ns/nightly"
    assert schedule.run_owner("", "CopyJob", "ns", "nightly") != schedule.run_owner("", "Compaction", "ns", "nightly")
