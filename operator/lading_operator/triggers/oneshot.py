"""One-shot: one run per resource, then a terminal phase.

::

                 ┌─────────── InvalidSpec / Forbidden ───────────┐
                 │                                               ▼
   (new) ─▶ Pending ──submit──▶ Submitted ⇄ Running ──completed──▶ Succeeded
              │  ▲                 (the run: lifecycle.RUN)  ├─failed, no retries left─▶ Failed
              │  │ unsuspend                                 ├─deadline, driver lost───▶ Failed
              ▼  │                                           └─cancel─▶ Cancelling ─▶ Cancelled
           Suspended

Succeeded, Failed and Cancelled are terminal: a later spec change is recorded
(observedGeneration) and answered with ``SpecChangeIgnored``, except a spec that
never ran (InvalidSpec, Forbidden), which runs once fixed (Failed ─resume─▶ Pending).
A change while the run is under way is answered the same way (``reconcile``): the
run goes on with the spec it started with.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from lading_operator import lifecycle
from lading_operator import status as st
from lading_operator.observed import Ctx, Plan, RunEnd
from lading_operator.phases import Phase, Table, Trigger, compose

_RUN_ENDS = {
    Trigger.COMPLETED: Phase.SUCCEEDED,
    Trigger.FAILED: Phase.FAILED,
    Trigger.DEADLINE: Phase.FAILED,
    Trigger.DRIVER_LOST: Phase.FAILED,
}
TABLE = compose(lifecycle.RUN, {
    Phase.PENDING: {
        Trigger.SUBMIT: Phase.SUBMITTED,
        Trigger.QUEUE: Phase.PENDING,
        Trigger.INVALID: Phase.FAILED,
        Trigger.CANCELLED: Phase.CANCELLED,
        Trigger.SUSPEND: Phase.SUSPENDED,
    },
    Phase.SUBMITTED: _RUN_ENDS,
    Phase.RUNNING: _RUN_ENDS,
    Phase.CANCELLING: {Trigger.CANCELLED: Phase.CANCELLED},
    Phase.SUSPENDED: {
        Trigger.RESUME: Phase.PENDING,
        Trigger.INVALID: Phase.FAILED,
        Trigger.CANCELLED: Phase.CANCELLED,
    },
    # spec.schedule removed while waiting for a slot: the resource runs once.
    Phase.SCHEDULED: {
        Trigger.SUBMIT: Phase.SUBMITTED,
        Trigger.QUEUE: Phase.SCHEDULED,
        Trigger.SUSPEND: Phase.SUSPENDED,
        Trigger.INVALID: Phase.FAILED,
        Trigger.CANCELLED: Phase.CANCELLED,
    },
    Phase.FAILED: {
        Trigger.RESUME: Phase.PENDING,     # a spec fixed after InvalidSpec starts afresh
        Trigger.INVALID: Phase.FAILED,     # still invalid, another message
    },
})


class OneShot:
    name = "oneshot"
    table: Table = TABLE
    style: str | None = None

    def idle(self, ctx: Ctx) -> Plan:
        plan = Plan()
        if ctx.spec.get("suspend"):
            if ctx.phase != Phase.SUSPENDED:
                return ctx.transition(plan, Trigger.SUSPEND, "Suspended", "suspended: the run has not started")
            return plan
        if ctx.phase == Phase.SUSPENDED:
            ctx.transition(plan, Trigger.RESUME, "Resumed", "resumed")
            ctx = ctx.with_status(plan.status)
        return lifecycle.submit(ctx, plan, lifecycle.oneshot_run_id(ctx), ctx.now.replace(microsecond=0), 1,
                                Trigger.SUBMIT, "Submitted")

    def active(self, ctx: Ctx) -> Plan | None:
        return None

    def run_ended(self, ctx: Ctx, plan: Plan, end: RunEnd, fields: dict[str, Any]) -> Plan:
        plan.requeue_after = 0.0 if ctx.spec.get("ttlSecondsAfterFinished") is not None else None
        return ctx.transition(plan, end.trigger, end.reason, end.message, end.event_type, **fields)

    def run_time(self, ctx: Ctx) -> dt.datetime:
        return st.parse_time(ctx.status.get("startTime")) or ctx.now.replace(microsecond=0)


POLICY = OneShot()
