"""kopf registration for every lading kind, parameterised by its description (thin).

Every decision is in :mod:`lading_operator.reconcile`; this module only keeps one
reconcile loop per resource running and wakes it:

- a watch event of a resource starts its loop (an asyncio task) if none runs, and
  its ``DELETED`` event stops it. A pass is level-triggered (it looks at the
  resource and its SparkApplication) and runs on a dedicated thread pool
  (blocking API calls) sized by ``LADING_WORKERS``; the loop then sleeps until its
  requeue time or a wake-up;
- the driver pods of lading's runs are watched too (one watch, narrowed by a label
  selector): the run's end reads its termination message from there (drivers.py);
- a new generation (a spec change: ``cancel``, ``suspend``, ``schedule``...) and a
  change of a SparkApplication it owns wake the loop: coroutines, as they only
  touch in-memory state, on the event loop that owns the wake-up events;
- the runs under way per namespace (:mod:`lading_operator.runslots`) are counted from a kopf
  index of every kind: kopf fills indexes from the initial listings before any handler runs,
  so a restarted operator starts no run before it knows every run already under way; a run's
  end (or a resource's deletion) wakes the resources waiting for its slot;
- **no finalizer**. The SparkApplications carry an ownerReference
  (``blockOwnerDeletion``), so the API server's garbage collector deletes them
  when their resource goes, and spark-operator's own finalizer stops their
  drivers. A finalizer of ours would add nothing but a way to hang: deletion
  would wait for this operator (gone, or its Role already deleted with the
  namespace). kopf daemons always add one, hence the plain tasks here. A
  ``lading.io/finalizer`` left by an older release is removed by kopf.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from dataclasses import dataclass, field
from typing import Any

import kopf

from lading_operator import (
    controller,
    drivers,
    k8s,
    kinds,
    metrics,
    progress,
    render,
    runslots,
    strays,
    wakeups,
)
from lading_operator.kinds import Kind

IDLE_SECONDS = 300.0      # nothing scheduled: look again anyway (missed events, clock)
ERROR_BACKOFF = (1.0, 2.0, 5.0, 10.0, 30.0)
log = logging.getLogger(__name__)
_executor: concurrent.futures.ThreadPoolExecutor | None = None


def executor() -> concurrent.futures.ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = concurrent.futures.ThreadPoolExecutor(
            int(os.environ.get("LADING_WORKERS", "16")), thread_name_prefix="reconcile")
    return _executor


@dataclass
class _Loop:
    body: Any                                   # the resource's latest watch event body
    task: asyncio.Task[None] | None = field(default=None)


_loops: dict[tuple[str, str, str], _Loop] = {}


async def _run(kind: Kind, namespace: str, name: str, state: _Loop) -> None:
    event = wakeups.register(kind.name, namespace, name)
    # The first pass reads the resource afresh: events up to this generation need no wake-up.
    wakeups.saw(kind.name, namespace, name, (state.body.get("metadata") or {}).get("generation"))
    loop = asyncio.get_running_loop()
    uid = (state.body.get("metadata") or {}).get("uid")  # a namesake created later has its own loop
    errors = 0
    try:
        while True:
            try:
                # The latest watch body is used only when it is exactly what our last
                # status write returned (else the pass reads the resource).
                known = controller.known_resource(kind, state.body)
                delay = await loop.run_in_executor(executor(), controller.reconcile, kind, namespace, name, known,
                                                   uid)
                errors = 0
            except Exception as e:  # noqa: BLE001 - the loop must survive any API hiccup
                metrics.record_reconcile_error(kind.name)
                delay = ERROR_BACKOFF[min(errors, len(ERROR_BACKOFF) - 1)]
                errors += 1
                log.warning("reconcile of %s %s/%s failed (retrying in %ss): %s", kind.name, namespace, name,
                            delay, e)
            if delay == controller.GONE:
                return
            await wakeups.sleep(event, IDLE_SECONDS if delay is None else float(delay))
    finally:
        key = (kind.name, namespace, name)
        if _loops.get(key, state) is state:  # not if a namesake's loop took the key meanwhile
            _loops.pop(key, None)
            wakeups.forget(kind.name, namespace, name)
            controller.forget(kind, namespace, name)


def resource_event(kind: Kind, type_: str | None, body: Any, namespace: str, name: str) -> None:
    """A watch event of a resource: start, wake or stop its loop."""
    key = (kind.name, namespace, name)
    state = _loops.get(key)
    if type_ == "DELETED":
        runslots.SLOTS.gone(key)
        _loops.pop(key, None)
        if state is not None and state.task is not None:
            state.task.cancel()
        metrics.forget(kind.name, namespace, name)
        return
    if state is None or state.task is None or state.task.done():
        state = _loops[key] = _Loop(body)
        state.task = asyncio.get_running_loop().create_task(_run(kind, namespace, name, state),
                                                            name=f"reconcile {kind.name} {namespace}/{name}")
        return
    state.body = body
    # A spec change wakes the loop; only a generation no pass has read yet: our own
    # status writes arrive as MODIFIED events too.
    generation = (body.get("metadata") or {}).get("generation")
    observed = (body.get("status") or {}).get("observedGeneration")
    if generation != observed and wakeups.unseen(kind.name, namespace, name, generation):
        wakeups.wake(kind.name, namespace, name)


def register(kind: Kind) -> None:
    """The kopf handlers of one kind."""

    async def changed(type: str | None, body: kopf.Body, name: str, namespace: str | None, **_: Any) -> None:
        resource_event(kind, type, body, namespace or "", name)

    def runs(body: kopf.Body, name: str, namespace: str | None, **_: Any) -> None:
        # A kopf index for its timing (filled before any handler runs), not for its contents.
        runslots.SLOTS.seen((kind.name, namespace or "", name), body.get("status"),
                            str(body.get("metadata", {}).get("creationTimestamp") or ""))

    kopf.on.event(k8s.GROUP, k8s.VERSION, kind.plural, id=f"{kind.plural}-changed")(changed)
    kopf.index(k8s.GROUP, k8s.VERSION, kind.plural, id=f"{kind.plural}-runs")(runs)


def _wake(keys: list[runslots.Key]) -> None:
    for kind, namespace, name in keys:
        wakeups.wake(kind, namespace, name)


@kopf.on.event(render.SPARK_GROUP, render.SPARK_VERSION_API, render.SPARK_PLURAL,
               labels={render.LABEL_KIND: kopf.PRESENT})
async def sparkapplication_changed(body: kopf.Body, name: str, namespace: str | None, type: str | None,
                                   **_: Any) -> None:
    # The next pass over the owner uses this body instead of reading the application again,
    # and its owner's passes see it among the applications the owner has (strays).
    owners = tuple(str(ref.get("uid")) for ref in body.get("metadata", {}).get("ownerReferences") or []
                   if ref.get("kind") in kinds.BY_NAME and ref.get("uid"))
    controller.app_event(namespace or "", name, None if type == "DELETED" else body, owners)
    if type != "DELETED" and not owners and strays.orphaned(body):
        # Its resource was deleted with propagationPolicy Orphan: the run would go on outside every
        # bound (run slots, activeDeadlineSeconds). Deleted, with its driver and executors.
        log.warning("deleting SparkApplication %s/%s: its lading resource was deleted with propagationPolicy "
                    "Orphan, and a run without its resource is bounded by nothing", namespace, name)
        try:
            await asyncio.get_running_loop().run_in_executor(executor(), k8s.delete_app, namespace or "", name)
        except Exception:  # noqa: BLE001 - the next event of it (or the operator's restart) tries again
            log.exception("deleting the orphaned SparkApplication %s/%s failed", namespace, name)
        return
    if type == "ADDED" and not body.get("status"):
        return  # our own create (or a listing of one not started yet): nothing new to follow
    for ref in body.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") in kinds.BY_NAME:
            wakeups.wake(str(ref.get("kind")), namespace or "", str(ref.get("name")))


@kopf.on.event("", "v1", "pods", labels={drivers.SPARK_ROLE: "driver", render.LABEL_KIND: kopf.PRESENT})
async def driver_pod_changed(body: kopf.Body, name: str, namespace: str | None, type: str | None,
                             **_: Any) -> None:
    # The pass that ends the run reads the driver's termination message from here (drivers.py);
    # the watch is narrowed by a server-side label selector (main.configure).
    drivers.pod_event(namespace or "", name, None if type == "DELETED" else body)


@kopf.on.startup()
async def wake_on_free_run_slots(**_: Any) -> None:
    loop = asyncio.get_running_loop()

    def waker(keys: list[runslots.Key]) -> None:  # called from the passes' threads too
        loop.call_soon_threadsafe(_wake, keys)

    runslots.SLOTS.waker = waker


@kopf.on.startup()
async def start_progress_poller(**_: Any) -> None:
    progress.POLLER.start()
    drivers.watching = True  # kopf runs the driver pods' watch (driver_pod_changed) from now on


@kopf.on.cleanup()
async def stop_loops(**_: Any) -> None:
    for state in list(_loops.values()):
        if state.task is not None:
            state.task.cancel()
    await progress.POLLER.stop()
    if _executor is not None:
        _executor.shutdown(wait=False, cancel_futures=True)


def wait_for_passes() -> None:
    """Block until no reconcile pass runs any more (after kopf stopped: ``stop_loops`` only
    cancels what has not started), so that nothing writes after the Lease is released."""
    if _executor is not None:
        _executor.shutdown(wait=True, cancel_futures=True)


for _kind in kinds.ALL:
    register(_kind)
