"""Schedules (pure): a small 5-field cron evaluator and CronJob-like run decisions.

``minute hour day-of-month month day-of-week`` in UTC, with ``*``, lists, ranges,
steps (``*/15``, ``1-30/2``), month and weekday names, and the macros
``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight``,
``@hourly``, and ``@every <n>s|m|h`` (a fixed interval counted from the
resource's creation, as robfig/cron offers). As in cron and Kubernetes CronJob, when both day fields are
restricted a day matches if either does.

Each due time (slot) is one run; its run id is derived from the slot, so a
restarted operator derives the same id and adopts the run's SparkApplication.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from lading_operator import names
from lading_spec.errors import SpecError

MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_MONTHS = {m: i + 1 for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])}
_DAYS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
           ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _DAYS))
MAX_MISSED = 100
CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")


@dataclass(frozen=True)
class Cron:
    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool

    def _day_matches(self, day: dt.datetime) -> bool:
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return dom or dow
        return dom and dow

    def next_after(self, after: dt.datetime) -> dt.datetime:
        """The first matching minute strictly after ``after`` (UTC)."""
        t = after.astimezone(dt.UTC).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
        limit = t + dt.timedelta(days=366 * 9)  # Feb 29 may be 8 years away (2096 → 2104)
        while t < limit:
            if t.month not in self.months:
                t = (t.replace(day=1, hour=0, minute=0) + dt.timedelta(days=32)).replace(day=1)
                continue
            if not self._day_matches(t):
                t = t.replace(hour=0, minute=0) + dt.timedelta(days=1)
                continue
            if t.hour not in self.hours:
                t = t.replace(minute=0) + dt.timedelta(hours=1)
                continue
            if t.minute not in self.minutes:
                t += dt.timedelta(minutes=1)
                continue
            return t
        raise SpecError("schedule", f"{self.expression!r} never matches a date")


def _parse_value(text: str, names: dict[str, int], field: str, expr: str) -> int:
    lowered = text.lower()
    if lowered in names:
        return names[lowered]
    if not text.isdigit():
        raise SpecError("schedule", f"{expr!r}: {field} has {text!r}; expected a number"
                        + (f" or a name ({', '.join(names)})" if names else ""))
    return int(text)


def _parse_field(text: str, field: str, low: int, high: int, names: dict[str, int], expr: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise SpecError("schedule", f"{expr!r}: {field} step {step_text!r} must be a positive number")
            step = int(step_text)
        if base in ("*", "?"):
            start, end = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            start, end = _parse_value(a, names, field, expr), _parse_value(b, names, field, expr)
        else:
            start = _parse_value(base, names, field, expr)
            end = high if step_text else start
        if not (low <= start <= high and low <= end <= high) or start > end:
            raise SpecError("schedule", f"{expr!r}: {field} {part!r} is outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def parse_cron(expression: str) -> Cron:
    """Parse a cron expression; errors name ``schedule`` and what is accepted."""
    if not isinstance(expression, str) or not expression.strip():
        raise SpecError("schedule", "expected a cron expression such as '0 * * * *' or '@daily'")
    expr = MACROS.get(expression.strip().lower(), expression.strip())
    parts = expr.split()
    if len(parts) != 5:
        raise SpecError("schedule", f"{expression!r} has {len(parts)} fields; expected 5 "
                        "(minute hour day-of-month month day-of-week) or one of " + ", ".join(MACROS))
    sets = [_parse_field(p, *spec[:3], spec[3], expression) for p, spec in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in sets[4])
    cron = Cron(expression, sets[0], sets[1], sets[2], sets[3], weekdays,
                days_restricted=parts[2] not in ("*", "?"), weekdays_restricted=parts[4] not in ("*", "?"))
    _check_fires(cron)
    return cron


# The longest each month gets (February: 29, in leap years).
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
                "October", "November", "December")


def _check_fires(cron: Cron) -> None:
    """Refuse a cron whose days of month exist in none of its months (``0 0 30 2 *``).

    Restricted days of week match by themselves (either day field matches), and
    every other field always has a match, so this is the only way a cron never fires.
    """
    if cron.weekdays_restricted and cron.days_restricted:
        return
    if any(day <= _MONTH_DAYS[month - 1] for month in cron.months for day in cron.days):
        return
    months = ", ".join(_MONTH_NAMES[m - 1] for m in sorted(cron.months))
    days = ", ".join(str(d) for d in sorted(cron.days))
    raise SpecError("schedule", f"{cron.expression!r} never fires: day of month {days} does not exist in "
                    f"{months}; choose days that exist in those months")


@dataclass(frozen=True)
class Every:
    """``@every 30s``: slots at ``anchor + k * interval``."""

    expression: str
    interval: dt.timedelta
    anchor: dt.datetime

    def next_after(self, after: dt.datetime) -> dt.datetime:
        steps = (after - self.anchor) // self.interval + 1
        return self.anchor + max(steps, 1) * self.interval


Schedule = Cron | Every
_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_schedule(expression: str, anchor: dt.datetime) -> Schedule:
    """A cron expression or ``@every <duration>`` (anchored at ``anchor``, the creation time)."""
    if isinstance(expression, str) and expression.strip().lower().startswith("@every"):
        text = expression.strip()[len("@every"):].strip().lower()
        if len(text) < 2 or text[-1] not in _UNITS or not text[:-1].isdigit() or int(text[:-1]) < 1:
            raise SpecError("schedule", f"{expression!r}: expected '@every <n>s', '@every <n>m' or '@every <n>h'")
        seconds = int(text[:-1]) * _UNITS[text[-1]]
        if seconds < 10:
            raise SpecError("schedule", f"{expression!r}: the shortest interval is 10s")
        return Every(expression, dt.timedelta(seconds=seconds), anchor.astimezone(dt.UTC))
    return parse_cron(expression)


@dataclass(frozen=True)
class Due:
    """What the schedule asks for now."""

    slot: dt.datetime | None      # the run to start now (the latest missed one), if any
    missed: int                   # due slots skipped (too many or past startingDeadlineSeconds)
    next_time: dt.datetime        # the next slot after now


def due(cron: Schedule, last_slot: dt.datetime | None, created: dt.datetime, now: dt.datetime,
        starting_deadline_seconds: int | None = None) -> Due:
    """Which slot (if any) should start now, as CronJob decides: only the latest due one."""
    cursor = last_slot or created
    latest: dt.datetime | None = None
    count = 0
    t = cron.next_after(cursor)
    while t <= now:
        latest = t
        count += 1
        if count > MAX_MISSED:
            # Too many missed: jump (CronJob gives up counting at 100).
            cursor = now - dt.timedelta(minutes=1)
            t = cron.next_after(cursor)
            latest = t if t <= now else latest
            break
        t = cron.next_after(t)
    next_time = cron.next_after(now)
    if latest is None:
        return Due(None, 0, next_time)
    missed = count - 1
    if starting_deadline_seconds is not None and (now - latest).total_seconds() > starting_deadline_seconds:
        return Due(None, count, next_time)
    return Due(latest, missed, next_time)


def run_owner(uid: str, kind: str, namespace: str, name: str) -> str:
    """The ``owner`` of ``slot_run_id``: the resource's uid, or its kind, namespace and name where it
    has none yet (a dry run of a manifest: ``lading render``)."""
    return uid or f"{kind}/{namespace}/{name}"


def slot_run_id(slot: dt.datetime, owner: str) -> str:
    """The run id of a scheduled run: its slot, ``YYYYMMDDhhmmss`` in UTC, then ``u`` and a hash of
    ``owner`` (the resource's uid), e.g. ``20260101020000u4c1f0e``.

    A run id names one run of one resource everywhere the job writes (file names' run token,
    the commit intent and manifest, a load's ``_lading_loads/<runId>``): a job that finds a
    record of its run id takes it as its own earlier attempt's. Two resources due at the same
    slot (two ``@hourly`` jobs appending to one prefix, or loading one table) would otherwise
    share it, and the second would report the first's result as its own and load nothing.
    No ``-`` (``names.app_name`` needs none)."""
    return f"{slot.astimezone(dt.UTC).strftime('%Y%m%d%H%M%S')}u{names.short_hash(owner, 6)}"
