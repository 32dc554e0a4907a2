"""The driver pod's process: spark-submit (client mode) run by the image's entrypoint, its log
read on the way through for what Kubernetes refused the driver.

A driver that the API server refuses something (its ServiceAccount's Role lacks ``create`` on
pods or configmaps, a ResourceQuota leaves no room for an executor) does not fail with that
reason: Spark's executor allocator logs the refusal, counts a failure, and after
``spark.executor.maxNumFailures`` of them exits the JVM with code 11, taking the PySpark app
with it before it can report anything. The pod ends ``Error`` with no termination message, and
all a user sees is an exit code. This wrapper passes spark-submit's stderr through (secrets scrubbed),
keeps the first refusal in it (:func:`lading_spec.refusals.refusal`: the API server's own words,
``pods is forbidden: User "system:serviceaccount:NS:SA" cannot create resource "pods" …``), and
when the driver fails, puts it in the termination message the operator reads: as the error when
the app reported nothing, appended to the app's own error otherwise. A result with rows, or a
cancellation, is never touched; the exit code is spark-submit's.

Signals: tini (``-g``) sends them to the whole process group, spark-submit included; this
process ignores SIGTERM and SIGINT and waits for spark-submit to end. Usage (the entrypoint):
``python .../lading_jobs/driver_pod.py spark-submit ARGS...``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import IO, Any

from lading_jobs import result as results
from lading_jobs import scrub
from lading_spec.job import encode_result, parse_result
from lading_spec.refusals import refusal

SETTLE_SECONDS = 3.0


def relay(stream: IO[bytes], out: IO[bytes]) -> str | None:
    """Copy ``stream`` to ``out`` line by line, secrets' values scrubbed (:mod:`lading_jobs.scrub`:
    the JVM's log, and its Python workers', come this way, not through ``main.py``'s own filter);
    the first Kubernetes refusal seen in it."""
    found: str | None = None
    scrubber = scrub.current()
    for line in iter(stream.readline, b""):
        out.write(scrubber.data(line))
        out.flush()
        if found is None and b"Failure executing: " in line:
            found = refusal(line.decode(errors="replace"))
    return found


def _result(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as f:
            return parse_result(f.read())
    except OSError:
        return None


def report(path: str | None, code: int, found: str | None, settle: float = SETTLE_SECONDS) -> None:
    """Put ``found`` into the termination log at ``path`` for a driver that exited ``code`` != 0.

    A JVM that exits on its own (Spark's ``System.exit``) leaves the PySpark app running for a
    moment, orphaned, about to report the broken connection: its result is waited for up to
    ``settle`` seconds, so that it is merged rather than overwritten."""
    if code == 0 or found is None or not path:
        return
    before = _result(path)
    deadline = time.monotonic() + settle
    while before is None and time.monotonic() < deadline:
        time.sleep(0.1)
        before = _result(path)
    if before is not None and ("error" not in before or before.get("cancelled")):
        return  # rows, or a cancellation: the app's own word stands
    why = f"the Spark driver was refused by Kubernetes: {found}"
    error = f"{before['error']}; {why}" if before is not None and before.get("error") else \
        f"the Spark driver stopped (exit code {code}); {why}"
    try:
        with open(path, "w") as f:
            f.write(scrub.text(encode_result({**(before or {}), "error": error})))
    except OSError as e:
        print(f"lading: cannot write the termination log {path}: {e.strerror}", file=sys.stderr)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: driver_pod.py spark-submit ARGS...", file=sys.stderr)
        return 64
    # A handler, not SIG_IGN: spark-submit must not inherit an ignored SIGTERM (the JVM would
    # then install no shutdown hook for it); handlers are reset in the child by exec.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    child = subprocess.Popen(argv, stderr=subprocess.PIPE)
    assert child.stderr is not None
    found = relay(child.stderr, sys.stderr.buffer)
    code = child.wait()
    code = 128 - code if code < 0 else code  # killed by a signal: as a shell reports it
    report(results.termination_log_path(), code, found)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
