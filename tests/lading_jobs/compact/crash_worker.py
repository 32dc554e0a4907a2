"""A compaction that SIGKILLs itself at its N-th storage call, or sends itself SIGTERM at a
chosen one (run by test_compact_crash).

``python crash_worker.py`` serves runs: it imports the engine once, then for each JSON line
``{"uri": TABLE_URI, "kill_at": N, "out": OUT_FILE, "term": null | {...}, "spec": {...}}`` on stdin
(``spec``: fields overriding the Compaction spec's defaults, e.g. ``sortBy``) forks a
child that runs one compaction and prints the child's exit code (``-9``: killed) on stdout.
A fresh fork per run is a fresh run (nothing is cached in the parent: it never touches a
table); only the imports (seconds each on a busy machine) are shared. A child's traceback
goes to OUT_FILE.err.

* ``kill_at`` N > 0: SIGKILL at the N-th storage call. Every storage call of the run counts:
  reads of the log, part reads and the writes of each group, completing uploads, the commit,
  retention's listings. Groups are rewritten in the child (the engine's ``runner``), so
  task-side writes are inside the window too. ``kill_at`` 0: never kill; the child then
  writes ``{"calls": N, "groups": G}`` to OUT_FILE.
* ``term`` ``{"method", "match", "nth", "grace"}``: the run is the Spark app's — SIGTERM
  handled by ``lading_jobs.result.Cancellation`` (its watchdog exits after ``grace``
  seconds unless a commit section is open), the result reported by ``results.emit`` into
  OUT_FILE (the termination log) — through ``support.faults.FaultyStorage`` sending SIGTERM
  at the ``nth`` call of ``method`` whose URI contains ``match``. The exit code is the
  app's: 0 rows, 143 cancelled.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from support.faults import Fault, FaultyStorage

from lading_jobs import result as results
from lading_jobs import storage as st
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.engine import compact
from lading_jobs.engine import Cancelled, RunContext
from lading_spec.compaction import parse_compaction

COUNT = [0]
METHODS = ("read", "read_range", "head", "put", "put_if_absent", "delete", "begin_upload", "upload_part",
           "complete_upload", "abort_upload", "list_objects", "list_pending_uploads", "open_input")


def _counting(name: str, kill_at: int) -> None:
    original = getattr(st.LocalStorage, name)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        COUNT[0] += 1
        if 0 < kill_at <= COUNT[0]:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, *args, **kwargs)

    setattr(st.LocalStorage, name, wrapper)


def _compact(uri: str, storage: st.Storage, ctx: RunContext, spec_overrides: dict[str, Any]) -> Any:
    spec = parse_compaction({"table": uri, "since": {"version": 5}, "targetFileSize": "48kB", "minInputFiles": 2,
                             "retention": {"gracePeriod": "1h", "allowShortGracePeriod": True}, **spec_overrides})
    return compact(None, spec, ctx, storage=storage, runner=compact_task.in_process(storage))


def run(uri: str, kill_at: int, spec: dict[str, Any]) -> dict[str, int]:
    for name in METHODS:
        _counting(name, kill_at)
    totals = _compact(uri, st.LocalStorage(), RunContext(), spec)
    return {"calls": COUNT[0], "groups": totals.groups}


def run_terminated(uri: str, term: dict[str, Any], out: str, spec: dict[str, Any]) -> int:
    os.environ["LADING_TERMINATION_LOG"] = out  # results.emit writes the result there
    stdout = os.open(out + ".stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(stdout, 1)  # the app's LADING_RESULT line stays off the worker's answer pipe
    cancellation = results.Cancellation(grace_seconds=term["grace"], report_seconds=60)
    cancellation.install()
    storage = FaultyStorage(st.LocalStorage(), Fault(term["method"], "term", nth=term["nth"], match=term["match"]))
    try:
        totals = _compact(uri, storage, RunContext(cancel=cancellation.event), spec)
    except Cancelled:
        return results.emit({"cancelled": True})
    return results.emit({"rows": totals.rows_written, "version": totals.version, "groups": totals.groups,
                         "sawSigterm": cancellation.event.is_set()})


def _child(uri: str, kill_at: int, out: str, term: dict[str, Any] | None, spec: dict[str, Any]) -> int:
    try:
        if term is not None:
            return run_terminated(uri, term, out, spec)
        Path(out).write_text(json.dumps(run(uri, kill_at, spec)))
        return 0
    except BaseException:  # noqa: BLE001 - reported to the test through OUT_FILE.err
        Path(out + ".err").write_text(traceback.format_exc())
        return 1


def main() -> None:
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(_child(job["uri"], int(job["kill_at"]), job["out"], job.get("term"), job.get("spec") or {}))
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(code, flush=True)


if __name__ == "__main__":
    main()
