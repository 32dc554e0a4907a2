"""Wake-ups for per-resource reconcile loops.

Each CopyJob has one loop (a kopf daemon) that reconciles and then sleeps until
its requeue time or until something it depends on changes: its own spec, or a
SparkApplication it owns (watched by kopf). Only the loop reconciles, so two
passes over one resource never race.
"""

from __future__ import annotations

import asyncio
import contextlib

_events: dict[tuple[str, str, str], asyncio.Event] = {}


def register(kind: str, namespace: str, name: str) -> asyncio.Event:
    event = _events.get((kind, namespace, name))
    if event is None:
        event = _events[(kind, namespace, name)] = asyncio.Event()
    return event


def forget(kind: str, namespace: str, name: str) -> None:
    _events.pop((kind, namespace, name), None)


def wake(kind: str, namespace: str, name: str) -> bool:
    """Wake the loop of a resource; ``False`` if it has none (yet)."""
    event = _events.get((kind, namespace, name))
    if event is None:
        return False
    event.set()
    return True


async def sleep(event: asyncio.Event, seconds: float) -> None:
    """Sleep up to ``seconds``, or until woken."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout=max(seconds, 0.0))
    event.clear()
