"""Run slots: at most ``policy.limits.runs`` runs under way at once per namespace, oldest waiting first.

Every run lading starts is a SparkApplication: a driver, then executors, each asking the
cluster for CPU and memory. Kubernetes schedules pods one by one, so a tenant who starts
many runs at once can fill the cluster with drivers whose executors then never fit, and
nothing ends (docs/troubleshooting.md, "Many runs at once"); other tenants' runs wait
behind them. A namespace therefore has a number of run slots: a run that would start
while they are all taken waits instead (phase ``Pending`` or ``Scheduled``, Ready reason
``Queued``), and the resources waiting in a namespace get the slots that free up in the
order they were created.

What holds a slot: a resource whose phase is Submitted, Running or Cancelling holds one,
and one more for each earlier run of it still under way (a scheduled resource with
``concurrencyPolicy: Allow``): :func:`runs_under_way`, read from its status. A retry of a
failed attempt, or a stream restarted for a spec change, runs in the slot its run holds.

Where the counts come from: every watch event of every lading kind (:meth:`RunSlots.seen`),
fed from a kopf index, which kopf fills from each kind's initial listing before any
handler runs: a restarted operator knows every run under way before it starts one. A
watch event comes a moment after the status write it shows, so a pass told it may start
a run gets a *ticket*, which holds the slot until the watch shows the run under way, or
the pass's own status write shows it did not start, or :data:`TICKET_SECONDS` passed.

The decisions stay in the pure planner (:mod:`lading_operator.reconcile`): the controller
plans, and when the plan starts more runs than the resource had under way it asks here;
refused, it plans again with the refusal in ``Observed.queued``, and the planner answers
with the ``Queued`` status instead of a SparkApplication.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Key = tuple[str, str, str]  # (kind, namespace, name)
TICKET_SECONDS = 120.0      # a ticket whose run the watch never showed frees its slot after this long
UNDER_WAY = frozenset({"Submitted", "Running", "Cancelling"})
QUEUED = "Queued"           # the Ready reason of a resource waiting for a slot (lifecycle.queue writes it)
OTHER_RUN_PHASES = frozenset({"Submitted", "Running"})


def runs_under_way(status: Mapping[str, Any] | None) -> int:
    """The runs a resource's ``status`` says are under way: its current one (Submitted, Running,
    Cancelling) and earlier ones still going (``lastRuns`` entries Submitted or Running)."""
    status = status or {}
    current = 1 if status.get("phase") in UNDER_WAY else 0
    current_id = status.get("runId")
    others = sum(1 for run in status.get("lastRuns") or () if isinstance(run, Mapping)
                 and run.get("phase") in OTHER_RUN_PHASES and run.get("runId") != current_id)
    return current + others


def _queued(status: Mapping[str, Any] | None) -> bool:
    return any(isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("reason") == QUEUED
               for c in (status or {}).get("conditions") or ())


def queued_message(namespace: str, limit: int) -> str:
    """What a queued resource's Ready condition says (the same on every pass: no status write
    while it waits)."""
    runs = "run" if limit == 1 else "runs"
    return (f"queued: namespace {namespace} has {limit} {runs} under way, the most policy.limits.runs allows; "
            "this run starts when one of them ends (the oldest waiting resource first)")


@dataclass
class _Ticket:
    target: int        # runs under way the watch must show for the ticket to be used
    expires: float


@dataclass(frozen=True)
class Verdict:
    admitted: bool
    message: str = ""


class RunSlots:
    """The runs under way per namespace as the watches showed them, the tickets handed out and
    the resources waiting. Thread-safe: watch events arrive on the event loop, passes run on
    the reconcile threads. ``waker`` is called (outside the lock) with resources to wake when
    slots may have freed up for them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._under_way: dict[str, dict[Key, int]] = {}
        self._tickets: dict[str, dict[Key, _Ticket]] = {}
        self._waiting: dict[str, dict[Key, tuple[str, str]]] = {}  # → (creationTimestamp, name): the order
        self._limits: dict[str, int] = {}  # the last limit asked with, per namespace: whom to wake
        self.waker: Callable[[list[Key]], None] | None = None

    # --- what the watches show ------------------------------------------------------------

    def seen(self, key: Key, status: Mapping[str, Any] | None, created: str = "") -> None:
        """A watch event of resource ``key`` (created at ``created``) with this ``status``, also from
        the initial listing: a resource whose status says it waits (``Queued``) keeps its place in
        line across a restart of the operator."""
        runs = runs_under_way(status)
        namespace = key[1]
        with self._lock:
            if not runs and _queued(status) and key not in self._tickets.get(namespace, {}):  # (not a late event)
                self._waiting.setdefault(namespace, {}).setdefault(key, (created, key[2]))
            before = self._under_way.get(namespace, {}).get(key, 0)
            if runs:
                self._under_way.setdefault(namespace, {})[key] = runs
            else:
                self._drop(self._under_way, namespace, key)
            ticket = self._tickets.get(namespace, {}).get(key)
            if ticket is not None and runs >= ticket.target:
                self._drop(self._tickets, namespace, key)  # the watch shows what the ticket held
            wake = self._to_wake(namespace) if runs < before else []
        self._wake(wake)

    def gone(self, key: Key) -> None:
        """The resource was deleted: whatever it held or waited for is free."""
        namespace = key[1]
        with self._lock:
            for table in (self._under_way, self._tickets, self._waiting):
                self._drop(table, namespace, key)
            wake = self._to_wake(namespace)
        self._wake(wake)

    # --- what passes ask --------------------------------------------------------------------

    def ask(self, key: Key, created: str, limit: int, held: int, wanted: int) -> Verdict:
        """May ``key`` (created at ``created``), which has ``held`` runs under way, have ``wanted``?

        Admitted when the namespace's runs under way (and tickets out) leave room and no
        resource created earlier waits for that room; the resource then holds a ticket. A
        resource that already holds a ticket is admitted again (a pass retried after an API
        error). Refused: the resource waits, in creation order."""
        namespace = key[1]
        now = self._clock()
        with self._lock:
            self._limits[namespace] = limit
            tickets = self._tickets.get(namespace, {})
            if key in tickets and tickets[key].expires > now:
                return Verdict(True)
            self._expire(namespace, now)
            waiting = self._waiting.setdefault(namespace, {})
            waiting.setdefault(key, (created, key[2]))
            free = limit - self._in_use(namespace, exclude=key) - held
            # The line is read only when a slot is free: a namespace with many resources waiting
            # costs each of their passes nothing more while its slots are taken.
            if wanted <= free:
                ahead = sum(1 for other, order in waiting.items() if other != key and order < waiting[key])
                if wanted <= free - ahead:
                    self._drop(self._waiting, namespace, key)
                    self._tickets.setdefault(namespace, {})[key] = _Ticket(held + wanted, now + TICKET_SECONDS)
                    return Verdict(True)
        return Verdict(False, queued_message(namespace, limit))

    def settle(self, key: Key, written: Mapping[str, Any] | None) -> None:
        """After a pass: its last status write (``written``, None: none) shows whether the run it was
        admitted for started; if not, its ticket goes at once."""
        namespace = key[1]
        with self._lock:
            ticket = self._tickets.get(namespace, {}).get(key)
            if ticket is None or written is None or runs_under_way(written) >= ticket.target:
                return
            self._drop(self._tickets, namespace, key)
            wake = self._to_wake(namespace)
        self._wake(wake)

    def withdraw(self, key: Key) -> None:
        """The resource no longer waits (its pass did not want a new run)."""
        with self._lock:
            if key not in self._waiting.get(key[1], {}):
                return
            self._drop(self._waiting, key[1], key)
            wake = self._to_wake(key[1])
        self._wake(wake)

    def in_use(self, namespace: str) -> int:
        with self._lock:
            self._expire(namespace, self._clock())
            return self._in_use(namespace)

    def waiting(self, namespace: str) -> list[Key]:
        """The resources waiting in ``namespace``, first in line first."""
        with self._lock:
            return self._line(namespace)

    def waiting_count(self) -> int:
        """The resources waiting, every namespace."""
        with self._lock:
            return sum(len(w) for w in self._waiting.values())

    def clear(self) -> None:
        with self._lock:
            for table in (self._under_way, self._tickets, self._waiting, self._limits):
                table.clear()

    # --- under the lock -------------------------------------------------------------------

    def _in_use(self, namespace: str, exclude: Key | None = None) -> int:
        under_way = {k: n for k, n in self._under_way.get(namespace, {}).items() if k != exclude}
        tickets = {k: t for k, t in self._tickets.get(namespace, {}).items() if k != exclude}
        # A ticket counts what it adds beyond what the watch already shows of its resource.
        return sum(under_way.values()) + sum(max(t.target - under_way.get(k, 0), 0) for k, t in tickets.items())

    def _expire(self, namespace: str, now: float) -> None:
        tickets = self._tickets.get(namespace, {})
        for key in [k for k, t in tickets.items() if t.expires <= now]:
            self._drop(self._tickets, namespace, key)

    def _to_wake(self, namespace: str) -> list[Key]:
        """The waiting resources the free slots would admit, first in line first."""
        limit = self._limits.get(namespace)
        if not self._waiting.get(namespace) or limit is None:
            return []
        self._expire(namespace, self._clock())
        free = max(limit - self._in_use(namespace), 0)
        return self._line(namespace)[:free]

    def _line(self, namespace: str) -> list[Key]:
        waiting = self._waiting.get(namespace, {})
        return sorted(waiting, key=lambda k: waiting[k])

    @staticmethod
    def _drop(table: dict[str, dict[Key, Any]], namespace: str, key: Key) -> None:
        entries = table.get(namespace)
        if entries is not None:
            entries.pop(key, None)
            if not entries:
                table.pop(namespace, None)

    def _wake(self, keys: Iterable[Key]) -> None:
        keys = list(keys)
        if keys and self.waker is not None:
            self.waker(keys)


SLOTS = RunSlots()
"""The operator's registry (one process reconciles: the leader)."""
