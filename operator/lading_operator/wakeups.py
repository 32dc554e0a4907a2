"""Wake-ups for per-resource reconcile loops.

Each CopyJob has one loop (a kopf daemon) that reconciles and then sleeps until
its requeue time or until something it depends on changes: its own spec, or a
SparkApplication it owns (watched by kopf). Only the loop reconciles, so two
passes over one resource never race.

A spec change wakes the loop only if the loop has not read that generation yet
(:func:`saw` records what it read): kopf's own writes (the finalizer) and our
status writes arrive as MODIFIED events too, and each spurious wake-up would cost
a pass of API reads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any

_events: dict[tuple[str, str, str], asyncio.Event] = {}
_seen: dict[tuple[str, str, str], int] = {}  # the newest generation a pass has read (or will)


def register(kind: str, namespace: str, name: str) -> asyncio.Event:
    event = _events.get((kind, namespace, name))
    if event is None:
        event = _events[(kind, namespace, name)] = asyncio.Event()
    return event


def forget(kind: str, namespace: str, name: str) -> None:
    _events.pop((kind, namespace, name), None)
    _seen.pop((kind, namespace, name), None)


def saw(kind: str, namespace: str, name: str, generation: int | None) -> None:
    """A pass read (or is about to read, fresh) the resource at ``generation``."""
    if generation is None:
        return
    key = (kind, namespace, name)
    if generation > _seen.get(key, 0):
        _seen[key] = generation


def unseen(kind: str, namespace: str, name: str, generation: int | None) -> bool:
    """Whether no pass has read ``generation`` yet (unknown generations count as unseen)."""
    return generation is None or generation > _seen.get((kind, namespace, name), 0)


def wake(kind: str, namespace: str, name: str) -> bool:
    """Wake the loop of a resource; ``False`` if it has none (yet)."""
    event = _events.get((kind, namespace, name))
    if event is None:
        return False
    event.set()
    return True


async def sleep(event: asyncio.Event, seconds: float, stopped: Awaitable[Any] | None = None) -> None:
    """Sleep up to ``seconds``, or until woken, or until ``stopped`` (kopf's flag) completes."""
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(event.wait())]
    if stopped is not None:
        waits.append(asyncio.ensure_future(stopped))
    try:
        await asyncio.wait(waits, timeout=max(seconds, 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waits:
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
    event.clear()
