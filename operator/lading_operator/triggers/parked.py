"""Parked: a kind whose engine is not in this release (its description's switch is off).

A valid spec stays ``Pending`` with ``Ready=False``, reason ``EngineNotAvailable``,
and ``Reconciling=False`` (nothing is under way): no fake success, no
SparkApplication, no Event. An invalid spec is ``Failed`` (InvalidSpec, Forbidden)
like any other kind's, and starts afresh once fixed::

    (new) ─▶ Pending ◀──resume── Failed (InvalidSpec | Forbidden)
               │ ▲ park            ▲
               └─┴─────invalid─────┘
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from lading_operator import status as st
from lading_operator.observed import Ctx, Plan, RunEnd
from lading_operator.phases import Phase, Table, Trigger, compose

REASON = "EngineNotAvailable"
TABLE = compose({
    Phase.PENDING: {Trigger.PARK: Phase.PENDING, Trigger.INVALID: Phase.FAILED},
    Phase.FAILED: {Trigger.RESUME: Phase.PENDING, Trigger.INVALID: Phase.FAILED},
})


def message(kind: str) -> str:
    return f"the spec is valid; the {kind} engine ships in a later lading release, so nothing runs yet"


class Parked:
    name = "parked"
    table: Table = TABLE
    style: str | None = None

    def idle(self, ctx: Ctx) -> Plan:
        plan = Plan()
        text = message(ctx.kind.name)
        ready = ctx.ready
        if (ctx.phase, ready.get("reason"), ready.get("message"), ready.get("observedGeneration")) == \
                (Phase.PENDING, REASON, text, ctx.generation):
            return plan
        ctx.transition(plan, Trigger.PARK, REASON, text, event_type=None)
        before = {c.get("type"): c for c in ctx.status.get("conditions") or []}
        for cond in plan.status["conditions"]:
            if cond["type"] == "Reconciling":  # nothing is under way
                cond["status"] = "False"
                old = before.get("Reconciling") or {}
                if old.get("status") == "False" and old.get("lastTransitionTime"):
                    cond["lastTransitionTime"] = old["lastTransitionTime"]
        return plan

    def active(self, ctx: Ctx) -> Plan | None:
        return self.idle(ctx)

    def run_ended(self, ctx: Ctx, plan: Plan, end: RunEnd, fields: dict[str, Any]) -> Plan:
        raise AssertionError("a parked kind has no runs")

    def run_time(self, ctx: Ctx) -> dt.datetime:
        return st.parse_time(ctx.status.get("startTime")) or ctx.now


POLICY = Parked()
