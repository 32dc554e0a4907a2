"""Publishing the Iceberg mirror off the commit path: one background publisher per table and process.

Inside ``background()`` (a StreamCopy's driver), ``mirror.after_commit`` hands version *v*'s publish to
the table's publisher and returns: the caller goes on (its next micro-batch runs its Spark job) while
the publisher writes the manifests and ``v<n>.metadata.json``. Readers of the Iceberg table meanwhile
see the previous snapshot, whole (the mirror's commit point is still the conditional create of the
metadata file).

* **In version order, none skipped**: one thread per table runs the publishes one at a time, in the
  order the commits were handed over; a publish whose predecessor failed catches up first (``sync``).
* **Bounded**: at most one publish waits behind the running one; a commit that outruns publishing waits
  in ``submit`` (back-pressure) instead of a queue growing without bound.
* **Flushed**: ``flush(root)`` waits until every handed-over version is published and re-raises a
  failed publish (``MirrorBehind``, naming the table and the version); ``settle`` does the same but
  reports the failure on stderr (a job's end: the commits stand). Mirror ``sync``, ``expire`` and
  retention wait first.
* **No thread left behind**: a publisher's thread is not a daemon and ends as soon as its queue is
  empty; the interpreter waits for it at exit. A process killed with publishes pending loses nothing:
  the log is the truth and the next publish or ``lading table sync`` catches up.
* Thread names carry no table URI.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from lading_jobs.table.log.commits import TableError

PENDING_MAX = 1
"""Publishes that may wait behind the running one, per table."""


class MirrorBehind(TableError):
    """A background publish failed: the mirror is behind the log until the next publish or ``sync``."""


@dataclass
class _Job:
    version: int
    run: Callable[[], None]


class _Publisher:
    def __init__(self, root: str) -> None:
        self.root = root
        self.cond = threading.Condition()
        self.queue: deque[_Job] = deque()  # the running job first
        self.error: tuple[int, Exception] | None = None
        self.thread: threading.Thread | None = None

    def submit(self, job: _Job) -> None:
        with self.cond:
            while len(self.queue) > PENDING_MAX:  # the running one and PENDING_MAX waiting: back-pressure
                self.cond.wait()
            self.queue.append(job)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="lading-mirror-publisher", daemon=False)
                self.thread.start()

    def _run(self) -> None:
        while True:
            with self.cond:
                if not self.queue:
                    self.thread = None
                    self.cond.notify_all()
                    return
                job = self.queue[0]
            failed: Exception | None = None
            try:
                job.run()
            except Exception as e:  # noqa: BLE001 - kept for flush; the next publish catches up
                failed = e
            with self.cond:
                self.queue.popleft()
                if failed is not None:
                    self.error = (job.version, failed)
                elif self.error is not None and self.error[0] <= job.version:
                    self.error = None  # this publish caught the failed version up (sync, in order)
                self.cond.notify_all()

    def wait(self, *, take_error: bool = True) -> tuple[int, Exception] | None:
        """Wait until every handed-over publish ran; the failure left (forgotten with ``take_error``).
        The publisher's own thread (a publish catching up through ``sync``) does not wait for itself."""
        with self.cond:
            if threading.current_thread() is self.thread:
                return None
            while self.queue or self.thread is not None:
                self.cond.wait()
            if not take_error:
                return None
            error, self.error = self.error, None
            return error


_PUBLISHERS: dict[str, _Publisher] = {}
_LOCK = threading.Lock()
_DEPTH = [0]


def active() -> bool:
    """Whether commits in this process publish their mirror in the background (inside ``background()``)."""
    return _DEPTH[0] > 0


@contextlib.contextmanager
def background() -> Iterator[None]:
    """Publish the mirror of every commit inside in the background; at the end, ``settle`` every table."""
    with _LOCK:
        _DEPTH[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH[0] -= 1
        settle()


def submit(root: str, version: int, run: Callable[[], None]) -> None:
    """Hand version ``version``'s publish (``run``) to the table's publisher; waits while one is queued."""
    with _LOCK:
        publisher = _PUBLISHERS.setdefault(root, _Publisher(root))
    publisher.submit(_Job(version, run))


def _message(root: str, version: int, e: Exception) -> str:
    return (f"the Iceberg mirror of {root} could not publish version {version} ({e}); the commit stands and "
            f"Iceberg readers see the previous snapshot: `lading table sync {root}` or the next commit catches it up")


def flush(root: str) -> None:
    """Wait until every version of table ``root`` handed over is published; raise ``MirrorBehind`` when
    one failed (once: the next publish or ``sync`` retries it)."""
    publisher = _PUBLISHERS.get(root)
    error = publisher.wait() if publisher is not None else None
    if error is not None:
        raise MirrorBehind(_message(root, *error)) from error[1]


def wait(root: str) -> None:
    """Wait for table ``root``'s pending publishes, keeping a failure for ``flush`` (``sync`` catches it up)."""
    publisher = _PUBLISHERS.get(root)
    if publisher is not None:
        publisher.wait(take_error=False)


def settle(root: str | None = None) -> None:
    """``flush`` one table (every table: None), reporting a failure on stderr instead of raising."""
    for r in [root] if root is not None else list(_PUBLISHERS):
        try:
            flush(r)
        except MirrorBehind as e:
            print(f"lading: {e}", file=sys.stderr)
