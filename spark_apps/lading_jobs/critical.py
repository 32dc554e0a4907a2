"""Commit sections: stretches of driver code that a cancellation waits for instead of cutting.

Publishing output (completing uploads, writing a manifest or a table commit,
deleting what a ``replace`` replaces) must run to its end or be undone by its
own error handling; a process that exits in the middle leaves the state for
the next attempt's recovery to sort out. ``commit_section()`` marks such a
stretch; the SIGTERM watchdog (``lading_jobs.result.Cancellation``) calls
``wait_for_commits()`` before it forces the process to exit, so a cancellation
never ends a run mid-commit (Kubernetes' SIGKILL at the end of the grace period
still can: that is what the commit-intent records are for).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_cond = threading.Condition()
_active = 0


@contextlib.contextmanager
def commit_section() -> Iterator[None]:
    """Mark the enclosed code as a commit the watchdog must not cut (re-entrant, thread-safe)."""
    global _active
    with _cond:
        _active += 1
    try:
        yield
    finally:
        with _cond:
            _active -= 1
            _cond.notify_all()


def commits_in_progress() -> int:
    with _cond:
        return _active


def wait_for_commits(timeout: float | None = None) -> bool:
    """Block until no commit section is open; False if ``timeout`` passed first."""
    with _cond:
        return _cond.wait_for(lambda: _active == 0, timeout)
