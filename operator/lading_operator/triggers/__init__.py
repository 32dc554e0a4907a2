"""Trigger policies: what starts runs of a resource, and what a finished run leads to.

The one-run lifecycle (:mod:`lading_operator.lifecycle`) is the same for every
kind; a *policy* wraps it:

- :mod:`.oneshot` — one run, then a terminal phase (a CopyJob without a schedule);
- :mod:`.scheduled` — one run per ``spec.schedule`` slot, back to Scheduled after
  each, with ``concurrencyPolicy`` and history limits;
- :mod:`.continuous` — one long-running application kept alive (StreamCopy):
  restarted on a spec change or a crash, stopped by suspend, Failed on a reason
  to stop until the spec changes;
- :mod:`.parked` — a kind whose engine is not in this release: validated, then
  ``Pending`` (``EngineNotAvailable``); nothing runs.

Each policy owns its transition table, composed with the lifecycle's
:data:`lading_operator.lifecycle.RUN`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from lading_operator.kinds import Kind
from lading_operator.lifecycle import RunEnd
from lading_operator.observed import Ctx, Plan
from lading_operator.phases import Table


class Policy(Protocol):
    name: str
    table: Table
    # How conditions read while a run is under way: None (working towards a goal),
    # "scheduled" (Ready: the schedule is healthy), "continuous" (Running is the goal).
    style: str | None

    def idle(self, ctx: Ctx) -> Plan:
        """No run under way (Pending, Scheduled, Suspended...): start one, wait, or suspend."""

    def active(self, ctx: Ctx) -> Plan | None:
        """A run is under way: act on it before it is followed (``None``: just follow it)."""

    def run_ended(self, ctx: Ctx, plan: Plan, end: RunEnd, fields: dict[str, Any]) -> Plan:
        """The run ended (``fields``: response, output, completionTime...): the status that follows."""

    def run_time(self, ctx: Ctx) -> dt.datetime:
        """When the current run was due (retries keep it, so they write where the first attempt did)."""


from lading_operator.triggers import continuous, oneshot, parked, scheduled  # noqa: E402  (they implement Policy)

POLICIES: dict[str, Callable[[Mapping[str, Any]], Policy]] = {
    "runs": lambda spec: scheduled.POLICY if spec.get("schedule") else oneshot.POLICY,
    "continuous": lambda spec: continuous.POLICY,
}


def policy_for(kind: Kind, spec: Mapping[str, Any]) -> Policy:
    """The policy that runs a resource of ``kind`` with ``spec``."""
    if not kind.engine_available:
        return parked.POLICY
    try:
        return POLICIES[kind.trigger](spec)
    except KeyError:
        raise LookupError(f"{kind.name}: no trigger policy {kind.trigger!r} in this operator") from None
