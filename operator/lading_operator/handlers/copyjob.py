"""CopyJob handlers: thin; every decision is in :mod:`lading_operator.reconcile`.

- a daemon per CopyJob runs the reconcile loop (level-triggered: every pass
  looks at the resource and its SparkApplication) and sleeps until its requeue
  time or a wake-up; reconciles run on a dedicated thread pool (blocking API
  calls), sized by ``LADING_WORKERS``;
- spec changes (``cancel``, ``suspend``, ``schedule``...) and SparkApplication
  changes wake the loop: coroutines, as they only touch in-memory state, on the
  event loop that owns the wake-up events (no thread-pool hop per watch event);
- deletion (finalizer ``lading.io/finalizer``) deletes the SparkApplications and
  waits, with ``TemporaryError``, until they are gone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from typing import Any

import kopf

from lading_operator import controller, k8s, metrics, render, wakeups

KIND = "CopyJob"
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


@kopf.daemon(k8s.GROUP, k8s.VERSION, "copyjobs", cancellation_backoff=5.0, cancellation_timeout=10.0)
async def reconcile_loop(name: str, namespace: str | None, stopped: kopf.DaemonStopped, body: kopf.Body,
                         **_: Any) -> None:
    namespace = namespace or ""
    event = wakeups.register(KIND, namespace, name)
    # The first pass reads the resource afresh: events up to this generation need no wake-up.
    wakeups.saw(KIND, namespace, name, body.get("metadata", {}).get("generation"))
    loop = asyncio.get_running_loop()
    errors = 0
    try:
        while not stopped:
            try:
                # kopf keeps ``body`` current from the watch; it is used only when it is
                # exactly what our last status write returned (else the pass reads it).
                known = controller.known_resource(body)
                delay = await loop.run_in_executor(executor(), controller.reconcile_copyjob, namespace, name,
                                                   known)
                errors = 0
            except Exception as e:  # noqa: BLE001 - the loop must survive any API hiccup
                metrics.record_reconcile_error(KIND)
                delay = ERROR_BACKOFF[min(errors, len(ERROR_BACKOFF) - 1)]
                errors += 1
                log.warning("reconcile of %s/%s failed (retrying in %ss): %s", namespace, name, delay, e)
            await wakeups.sleep(event, IDLE_SECONDS if delay is None else delay, stopped.wait())
    finally:
        wakeups.forget(KIND, namespace, name)
        controller.forget(namespace, name)


@kopf.on.event(k8s.GROUP, k8s.VERSION, "copyjobs")
async def copyjob_changed(name: str, namespace: str | None, type: str, body: kopf.Body, **_: Any) -> None:
    # A spec change (cancel, suspend, schedule...) wakes the loop. Watching events rather
    # than kopf's on.update keeps kopf from writing a diff-base annotation on every CopyJob.
    # Only a generation no pass has read yet: kopf's finalizer and our own status writes
    # arrive as MODIFIED events too.
    generation = body.get("metadata", {}).get("generation")
    observed = (body.get("status") or {}).get("observedGeneration")
    if type == "MODIFIED" and generation != observed and wakeups.unseen(KIND, namespace or "", name, generation):
        wakeups.wake(KIND, namespace or "", name)


@kopf.on.event(render.SPARK_GROUP, render.SPARK_VERSION_API, render.SPARK_PLURAL,
               labels={render.LABEL_KIND: KIND})
async def sparkapplication_changed(body: kopf.Body, name: str, namespace: str | None, type: str | None,
                             **_: Any) -> None:
    # The next pass over the owner uses this body instead of reading the application again.
    controller.app_event(namespace or "", name, None if type == "DELETED" else body)
    if type == "ADDED" and not body.get("status"):
        return  # our own create (or a listing of one not started yet): nothing new to follow
    for ref in body.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == KIND:
            wakeups.wake(KIND, namespace or "", str(ref.get("name")))


@kopf.on.delete(k8s.GROUP, k8s.VERSION, "copyjobs")
def deleted(name: str, namespace: str | None, **_: Any) -> None:
    namespace = namespace or ""
    remaining = controller.delete_children(namespace, name)
    if remaining:
        raise kopf.TemporaryError(f"waiting for {remaining} SparkApplication(s) to stop", delay=1)
    metrics.forget(KIND, namespace, name)
