"""What a reconcile pass observes, what it plans, and the small pure readers both use.

:class:`Observed` is the input of the planner (the resource, its current run's
SparkApplication and driver pod, the time); :class:`Plan` its output (a status
merge patch, at most one SparkApplication to create, what to delete, Events, when
to look again). :class:`Ctx` bundles an observation with the kind's description,
the trigger policy chosen for it and the operator's settings, so the lifecycle
and the policies read everything from one value.

The two sides of a run meet here too, so neither imports the other: :class:`Policy`,
the protocol every trigger policy (:mod:`lading_operator.triggers`) implements, and
:class:`RunEnd`, how a run ended, which the one-run lifecycle
(:mod:`lading_operator.lifecycle`) hands to the policy. This module imports neither.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from lading_operator import status as st
from lading_operator.kinds import Kind
from lading_operator.phases import Phase, Table, Trigger, next_phase

# (namespace, storage URIs with their field paths, raw spec.spark) → the policy's refusal, or None.
PolicyCheck = Callable[[str, list[tuple[str, str]], Any], str | None]
START_TIMEOUT = 120.0   # a SparkApplication not started after this long gets a condition saying why


@dataclass(frozen=True)
class Observed:
    resource: Mapping[str, Any]
    app: Mapping[str, Any] | None = None          # the SparkApplication named in status (ours)
    driver_pod: Mapping[str, Any] | None = None   # its driver pod, when looked at
    driver_pod_checked: bool = False              # whether driver_pod was looked up
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    # Earlier runs still under way (concurrencyPolicy Allow): app name → (app, driver pod).
    others: Mapping[str, tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]] = field(default_factory=dict)
    # A SparkApplication of the name in status whose owner is not this resource (a deleted
    # namesake's, still being stopped): never followed, never adopted.
    foreign_app: Mapping[str, Any] | None = None
    # The latest progress polled from the current app's driver (lading_operator.progress): Spark's
    # task counters, or a StreamCopy driver's progress document.
    progress: Mapping[str, Any] | None = None
    # Every SparkApplication the resource owns (listed by label and owner), when listed:
    # what should be gone is deleted from it (lading_operator.strays).
    owned: tuple[Mapping[str, Any], ...] | None = None
    # Why a new run may not start now (lading_operator.runslots: the namespace's run slots are
    # taken); None: it may. Set only when the controller asked for a slot and was refused.
    queued: str | None = None

    def with_status(self, patch: Mapping[str, Any]) -> Observed:
        """The same observation with ``patch`` merged into the resource's status."""
        status = {**(self.resource.get("status") or {}), **patch}
        return dataclasses.replace(self, resource={**self.resource, "status": status})


@dataclass
class Plan:
    status: dict[str, Any] = field(default_factory=dict)    # merge patch for /status
    create: dict[str, Any] | None = None                    # SparkApplication to create
    delete_apps: list[str] = field(default_factory=list)    # SparkApplications to delete (by name)
    delete_runs: list[str] = field(default_factory=list)    # runs whose every attempt to delete (by run id)
    delete_resource: bool = False                           # ttlSecondsAfterFinished
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    requeue_after: float | None = None                      # look again after (seconds)
    follow_progress: bool = False                           # poll the driver's REST API
    progress_source: str = "spark"                          # "stream": a StreamCopy driver's /progress
    progress_address: str | None = None                     # where, for "stream" (the driver pod's address)
    finished_run: dict[str, Any] | None = None              # outcome/seconds/rows/bytes for metrics

    @property
    def phase(self) -> str | None:
        return self.status.get("phase")

    def merge(self, other: Plan) -> Plan:
        """``other`` planned after this one (on the status this one leads to)."""
        self.status.update(other.status)
        self.create = other.create or self.create
        self.delete_apps += [a for a in other.delete_apps if a not in self.delete_apps]
        self.delete_runs += [r for r in other.delete_runs if r not in self.delete_runs]
        self.delete_resource = self.delete_resource or other.delete_resource
        self.events += other.events
        self.requeue_after = other.requeue_after
        if other.follow_progress:
            self.progress_source, self.progress_address = other.progress_source, other.progress_address
        self.follow_progress = self.follow_progress or other.follow_progress
        self.finished_run = other.finished_run or self.finished_run
        return self


@dataclass(frozen=True)
class RunEnd:
    """How a run ended (:mod:`lading_operator.lifecycle`), for the trigger policy to turn into status."""

    trigger: Trigger          # COMPLETED, FAILED, DEADLINE, DRIVER_LOST, CANCELLED
    phase: Phase              # the run's outcome: Succeeded, Failed or Cancelled
    reason: str
    message: str
    result: Mapping[str, Any] | None = None
    error: str | None = None
    event_type: str = "Normal"


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


@dataclass(frozen=True)
class Ctx:
    """One pass's view: the observation, the kind, its trigger policy and the settings."""

    kind: Kind
    obs: Observed
    policy: Policy
    start_timeout: float = START_TIMEOUT
    file_prefixes: tuple[str, ...] = ()
    """The ``file://`` prefixes the namespace's policy allows: rendered for the job (``lading_spec.localfiles``)."""
    catalogs: str = ""
    """The Iceberg catalogs the namespace's policy allows (``LADING_CATALOGS``, ``lading_spec.catalogs``)."""

    def with_status(self, patch: Mapping[str, Any]) -> Ctx:
        return dataclasses.replace(self, obs=self.obs.with_status(patch))

    # --- reading the resource ---------------------------------------------------------

    @property
    def now(self) -> dt.datetime:
        return self.obs.now

    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.obs.resource.get("spec") or {})

    @property
    def status(self) -> dict[str, Any]:
        return dict(self.obs.resource.get("status") or {})

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self.obs.resource.get("metadata") or {})

    @property
    def generation(self) -> int:
        return int(self.meta.get("generation") or 1)

    @property
    def phase(self) -> Phase | None:
        value = self.status.get("phase")
        return Phase(value) if value in set(Phase) else None

    @property
    def ready(self) -> dict[str, Any]:
        for cond in self.status.get("conditions") or []:
            if cond.get("type") == "Ready":
                return dict(cond)
        return {}

    @property
    def reason(self) -> str:
        return str(self.ready.get("reason") or "")

    @property
    def created(self) -> dt.datetime:
        return st.parse_time(self.meta.get("creationTimestamp")) or self.now

    def int_field(self, key: str, default: int | None) -> int | None:
        value = self.spec.get(key, default)
        return None if value is None else int(value)

    # --- building the status ----------------------------------------------------------

    def transition(self, plan: Plan, trigger: Trigger, reason: str, message: str,
                   event_type: str | None = "Normal", **fields: Any) -> Plan:
        """Move to the next phase of the policy's table: status fields, conditions, one Event."""
        new = next_phase(self.policy.table, self.phase, trigger)
        plan.status.update(fields)
        plan.status.update({
            "phase": str(new),
            "observedGeneration": self.generation,
            "conditions": st.conditions(self.status.get("conditions"), new, reason, message, self.generation,
                                        self.now, scheduled=self.policy.style == "scheduled",
                                        continuous=self.policy.style == "continuous"),
        })
        if event_type is not None:
            plan.events.append((event_type, reason, message))
        return plan
