"""Leader election decisions over a ``coordination.k8s.io/v1`` Lease, as pure functions.

Two replicas of the operator run; one holds the Lease and reconciles, the other waits
and does nothing else. The rules are client-go's ``leaderelection`` package's, the
Kubernetes convention (kube-controller-manager, controller-runtime):

- **acquire** when there is no Lease (create it), when it names no holder (released),
  or when its record has not changed for its ``leaseDurationSeconds`` *as measured by
  the candidate's own clock* from the moment it first saw that record (its
  ``resourceVersion``): never by comparing ``renewTime`` with the local wall clock, so
  clock skew between nodes cannot shorten a lease;
- **renew**: the holder writes ``renewTime`` again, every retry period;
- every write is an update conditional on the ``resourceVersion`` read (or a create,
  which fails if the Lease exists): of two candidates, exactly one succeeds;
- **release**: a leader that stops cleanly empties ``holderIdentity`` once its last
  reconcile pass has ended, so the other takes over at once;
- **give up**: a holder that has not renewed for its renew deadline (shorter than the
  lease duration), or that sees another holder named, stops leading at once. It
  measures from the moment it *sent* its last successful renewal, which is before the
  other replica can have observed it, so it stops before the other may acquire.

:mod:`lading_operator.election` does the API calls and acts on these decisions.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

Obj = dict[str, Any]


@dataclass(frozen=True)
class Timing:
    """Seconds: a lease lasts ``duration``; its holder gives up when it has not renewed for
    ``renew_deadline``; every candidate tries again every ``retry_period``."""

    duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def check(self) -> Timing:
        if not 0 < self.retry_period < self.renew_deadline < self.duration:
            raise ValueError(f"lease timing: expected 0 < retry period ({self.retry_period:g}) < renew deadline "
                             f"({self.renew_deadline:g}) < lease duration ({self.duration}) seconds")
        return self


@dataclass(frozen=True)
class Record:
    """What a Lease says (``None`` everywhere it is absent)."""

    holder: str
    duration: int | None
    acquire_time: str | None
    transitions: int
    resource_version: str


@dataclass(frozen=True)
class Observation:
    """The record a candidate last saw, and when (its own monotonic clock)."""

    resource_version: str
    seen_at: float


@dataclass(frozen=True)
class Decision:
    """``create`` or ``update`` the Lease with ``spec`` (an update conditional on
    ``resource_version``), or ``wait``: another replica holds it (``holder``)."""

    action: Literal["create", "update", "wait"]
    spec: Obj | None = None
    resource_version: str = ""
    holder: str = ""


def record_of(lease: Obj | None) -> Record | None:
    """The Lease object read from the API server (``None``: there is none)."""
    if lease is None:
        return None
    spec = lease.get("spec") or {}
    duration = spec.get("leaseDurationSeconds")
    return Record(holder=str(spec.get("holderIdentity") or ""),
                  duration=int(duration) if duration is not None else None,
                  acquire_time=spec.get("acquireTime"),
                  transitions=int(spec.get("leaseTransitions") or 0),
                  resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""))


def observe(previous: Observation | None, record: Record | None, now: float) -> Observation | None:
    """The observation after reading ``record`` at ``now``: unchanged while the record is."""
    if record is None:
        return None
    if previous is not None and previous.resource_version == record.resource_version:
        return previous
    return Observation(record.resource_version, now)


def micro_time(when: dt.datetime) -> str:
    """A ``MicroTime`` as the API server writes it (RFC 3339, microseconds, UTC)."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def decide(record: Record | None, observation: Observation | None, me: str, now: float,
           wall: dt.datetime, timing: Timing) -> Decision:
    """What candidate ``me`` does after reading ``record`` (``observation``: as observed, by
    :func:`observe`, at ``now``): create, renew or take over the Lease, or wait."""
    stamp = micro_time(wall)
    if record is None:
        return Decision("create", {"holderIdentity": me, "leaseDurationSeconds": timing.duration,
                                   "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0})
    if record.holder == me:
        return Decision("update", {"holderIdentity": me, "leaseDurationSeconds": timing.duration,
                                   "acquireTime": record.acquire_time or stamp, "renewTime": stamp,
                                   "leaseTransitions": record.transitions}, record.resource_version)
    if record.holder and not expired(record, observation, now, timing):
        return Decision("wait", holder=record.holder)
    return Decision("update", {"holderIdentity": me, "leaseDurationSeconds": timing.duration,
                               "acquireTime": stamp, "renewTime": stamp,
                               "leaseTransitions": record.transitions + 1}, record.resource_version)


def release(record: Record | None, me: str, wall: dt.datetime) -> Decision:
    """A leader that stops cleanly (after its last reconcile pass ended) hands the Lease back:
    no holder, a one-second duration (client-go's ``ReleaseOnCancel``), conditional on the
    ``resource_version`` read; the other replica takes it at its next attempt instead of
    after the lease duration. Nothing to do (``wait``) if the Lease is not ours any more."""
    if record is None or record.holder != me:
        return Decision("wait", holder=record.holder if record else "")
    stamp = micro_time(wall)
    return Decision("update", {"holderIdentity": "", "leaseDurationSeconds": 1,
                               "acquireTime": record.acquire_time or stamp, "renewTime": stamp,
                               "leaseTransitions": record.transitions}, record.resource_version)


def expired(record: Record, observation: Observation | None, now: float, timing: Timing) -> bool:
    """Has ``record`` stayed unchanged for its lease duration, by this candidate's clock?
    (A record not observed yet has not: the wait starts when it is first seen.)"""
    if observation is None or observation.resource_version != record.resource_version:
        return False
    return now >= observation.seen_at + (record.duration or timing.duration)


def must_give_up(last_renewed: float, now: float, timing: Timing) -> bool:
    """A leader that has not renewed since ``last_renewed`` (when it sent that renewal)
    for its renew deadline stops leading, before another replica may take the Lease."""
    return now - last_renewed >= timing.renew_deadline
