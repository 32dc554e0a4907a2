"""A compaction that SIGKILLs itself at its N-th storage call (run by test_compact_crash).

``python crash_worker.py`` serves runs: it imports the engine once, then for each line
``TABLE_URI KILL_AT OUT_FILE`` on stdin forks a child that runs one compaction and prints
the child's exit code (``-9``: killed) on stdout. A fresh fork per run is a fresh run
(nothing is cached in the parent: it never touches a table); only the imports (seconds
each on a busy machine) are shared. KILL_AT 0: never kill; the child then writes
``{"calls": N, "groups": G}`` to OUT_FILE. Every storage call of the run counts: reads of
the log, part reads and the writes of each group, completing uploads, the commit,
retention's listings. Groups are rewritten in the child (the engine's ``runner``), so
task-side writes are inside the window too. A child's traceback goes to OUT_FILE.err.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from lading_jobs import storage as st
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.engine import compact
from lading_jobs.engine import RunContext
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


def run(uri: str, kill_at: int) -> dict[str, int]:
    for name in METHODS:
        _counting(name, kill_at)
    storage = st.LocalStorage()
    spec = parse_compaction({"table": uri, "since": {"version": 5}, "targetFileSize": "48kB", "minInputFiles": 2,
                             "retention": {"gracePeriod": "1h"}})

    def runner(plan: compact_task.RewritePlan) -> list[compact_task.GroupOutcome]:
        return [compact_task.rewrite_group(plan, i, storage) for i in range(len(plan.groups))]

    totals = compact(None, spec, RunContext(), storage=storage, runner=runner)
    return {"calls": COUNT[0], "groups": totals.groups}


def _child(uri: str, kill_at: int, out: str) -> int:
    try:
        Path(out).write_text(json.dumps(run(uri, kill_at)))
        return 0
    except BaseException:  # noqa: BLE001 - reported to the test through OUT_FILE.err
        Path(out + ".err").write_text(traceback.format_exc())
        return 1


def main() -> None:
    for line in sys.stdin:
        uri, kill_at, out = line.split()
        pid = os.fork()
        if pid == 0:
            os._exit(_child(uri, int(kill_at), out))
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(code, flush=True)


if __name__ == "__main__":
    main()
