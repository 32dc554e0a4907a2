"""Reporting a run's result (CopyResponse), and turning SIGTERM into a clean cancellation.

The result is one JSON object: ``{"rows": N, ...}``, ``{"error": "..."}`` or
``{"cancelled": true}``. ``emit`` scrubs the pod's secrets out of it
(:mod:`lading_jobs.scrub`), prints it as the last stdout line after
``LADING_RESULT `` and writes it to the termination log (``$LADING_TERMINATION_LOG``,
else ``/dev/termination-log`` when it exists), where the operator reads it.

``Cancellation`` installs the SIGTERM handler: it sets an event, runs the
registered cancel hooks (cancel Spark jobs) on a thread, and arms a watchdog
that reports ``cancelled`` and exits on its own if clean-up has not finished
within the grace period (Kubernetes kills at 30 s); the watchdog never exits
while a commit section (``lading_jobs.critical``) is open: it waits for the
commit, then gives the run the grace period again to report it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from lading_jobs import critical, scrub
from lading_spec.job import RESULT_MARKER, TERMINATION_LOG, encode_result
from lading_spec.streamprogress import REASONS as STOP_REASONS

EXIT_OK, EXIT_ERROR, EXIT_CANCELLED = 0, 1, 143
EXIT_STOPPED = 0  # a stream stopped on purpose: no restartPolicy may restart it (see exit_code)
GRACE_SECONDS = 25.0


def termination_log_path() -> str | None:
    path = os.environ.get("LADING_TERMINATION_LOG")
    if path:
        return path
    return TERMINATION_LOG if os.path.exists(TERMINATION_LOG) else None


_emitted = threading.Lock()
_emitted_event = threading.Event()
_done = False


def emit(result: dict[str, Any]) -> int:
    """Print and record ``result`` once, secrets scrubbed; return the exit code it implies."""
    global _done
    result = scrub.result(result)
    with _emitted:
        if not _done:
            _done = True
            text = scrub.text(encode_result(result))
            path = termination_log_path()
            if path:
                try:
                    with open(path, "w") as f:
                        f.write(text)
                except OSError as e:
                    print(f"lading: cannot write the termination log {path}: {e.strerror}", file=sys.stderr)
            sys.stdout.flush()
            print(RESULT_MARKER + text, flush=True)
            _emitted_event.set()
    return exit_code(result)


def exit_code(result: dict[str, Any]) -> int:
    """0 for rows, 143 for cancelled, 1 for an error, and 0 for a stream stopped on purpose.

    A StreamCopy driver that stops on ``TooManyErrors``, ``DataLoss`` or
    ``SourceConflict`` (its result's ``reason``) exits 0: its SparkApplication's
    ``restartPolicy: OnFailure`` restarts a driver that *failed*, and this one must
    stay stopped until its spec changes. The result still says ``error``; the
    operator reads it from the termination log and shows the StreamCopy Failed.
    """
    if "rows" in result and "error" not in result:
        return EXIT_OK
    if result.get("cancelled"):
        return EXIT_CANCELLED
    return EXIT_STOPPED if result.get("reason") in STOP_REASONS else EXIT_ERROR


def describe_error(error: BaseException) -> str:
    """A message a user can act on, from a Spark or Python exception (no stack traces)."""
    text = str(error) or type(error).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if "Traceback (most recent call last)" in text:
        # A Python exception raised in a task: its last "Type: message" line says what happened.
        tail = [ln for ln in lines if ": " in ln and not ln.startswith(("File ", "at ", "JVM stacktrace"))]
        for ln in reversed(tail):
            head = ln.split(": ", 1)[0]
            if head.replace(".", "").replace("_", "").isalnum() and head[:1].isalpha():
                return ln.split(": ", 1)[1] if head.endswith(("FileTooSmall", "StorageError", "SpecError")) else ln
    first = lines[0] if lines else text
    for marker in ("org.apache.spark.SparkException: ", "Job aborted due to stage failure: "):
        if marker in first:
            first = first.split(marker, 1)[1]
    return first[:2000]


class Cancellation:
    """SIGTERM → cancel: an event, hooks that stop the work, a watchdog that guarantees an exit."""

    def __init__(self, grace_seconds: float = GRACE_SECONDS, report_seconds: float | None = None,
                 report: Callable[[dict[str, Any]], None] | None = None) -> None:
        """``report``: how the watchdog's own result reaches the user (default :func:`emit`, the
        ``LADING_RESULT`` line and termination log the operator reads; ``lading run`` prints it
        as its other outcomes)."""
        self.event = threading.Event()
        self.grace_seconds = grace_seconds
        self.report_seconds = grace_seconds if report_seconds is None else report_seconds
        self.report = report
        self.hooks: list[Callable[[], None]] = []
        self.extra: dict[str, Any] = {}

    def install(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        for sig in signals:
            signal.signal(sig, self._handle)

    def add_hook(self, hook: Callable[[], None]) -> None:
        self.hooks.append(hook)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.event.is_set():
            return
        self.event.set()
        threading.Thread(target=self._run_hooks, name="lading-cancel", daemon=True).start()
        threading.Thread(target=self._watchdog, name="lading-watchdog", daemon=True).start()

    def _run_hooks(self) -> None:
        for hook in self.hooks:
            try:
                hook()
            except Exception as e:  # noqa: BLE001 - cancelling is best effort; the watchdog guards
                print(f"lading: cancelling: {e}", file=sys.stderr)

    def _watchdog(self) -> None:
        if _emitted_event.wait(self.grace_seconds):
            return  # the run reported by itself
        if critical.commits_in_progress():
            # Never cut a commit: let it finish, then give the run its grace again to report
            # what it committed (Kubernetes' SIGKILL remains the backstop, see lading_jobs.critical).
            critical.wait_for_commits()
            if _emitted_event.wait(self.report_seconds):
                return
        result = {"cancelled": True, **self.extra,
                  "error": "cancelled; clean-up did not finish in time, pending uploads may remain"}
        if self.report is None:
            emit(result)
        else:
            try:
                self.report(scrub.result(result))
            except Exception as e:  # noqa: BLE001 - the exit below must happen whatever the report does
                print(f"lading: reporting the cancellation: {e}", file=sys.stderr)
            sys.stdout.flush()
            sys.stderr.flush()
        scrub.flush_output()
        os._exit(EXIT_CANCELLED)
