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

Each policy implements :class:`lading_operator.observed.Policy` and owns its transition
table, composed with the lifecycle's :data:`lading_operator.lifecycle.RUN`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lading_operator.kinds import Kind
from lading_operator.observed import Policy
from lading_operator.triggers import continuous, oneshot, parked, scheduled

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
