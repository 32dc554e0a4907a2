"""The reconcile loop's sleep: ends on time, on a wake-up, or when kopf stops the daemon."""

from __future__ import annotations

import asyncio
import time

from lading_operator import wakeups


def test_sleep_ends_on_wake_timeout_or_stop() -> None:
    async def scenario() -> tuple[float, float, float]:
        event = wakeups.register("CopyJob", "ns", "a")
        start = time.monotonic()
        asyncio.get_running_loop().call_later(0.05, wakeups.wake, "CopyJob", "ns", "a")
        await wakeups.sleep(event, 30)
        woken = time.monotonic() - start
        assert not event.is_set()  # cleared for the next sleep
        start = time.monotonic()
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, stop.set)
        await wakeups.sleep(event, 30, stop.wait())
        stopped = time.monotonic() - start
        start = time.monotonic()
        await wakeups.sleep(event, 0.05)
        timed = time.monotonic() - start
        wakeups.forget("CopyJob", "ns", "a")
        return woken, stopped, timed

    woken, stopped, timed = asyncio.run(scenario())
    assert woken < 10 and stopped < 10 and timed >= 0.05
    assert not wakeups.wake("CopyJob", "ns", "a")  # forgotten: nothing to wake


def test_only_an_unread_generation_needs_a_wake_up() -> None:
    assert wakeups.unseen("CopyJob", "ns", "g", 1)  # nothing read yet
    wakeups.saw("CopyJob", "ns", "g", 2)
    assert not wakeups.unseen("CopyJob", "ns", "g", 1)
    assert not wakeups.unseen("CopyJob", "ns", "g", 2)  # kopf's finalizer, our status writes
    assert wakeups.unseen("CopyJob", "ns", "g", 3)  # a spec change
    assert wakeups.unseen("CopyJob", "ns", "g", None)
    wakeups.saw("CopyJob", "ns", "g", 1)  # an older read never lowers it
    assert not wakeups.unseen("CopyJob", "ns", "g", 2)
    wakeups.forget("CopyJob", "ns", "g")
    assert wakeups.unseen("CopyJob", "ns", "g", 2)
