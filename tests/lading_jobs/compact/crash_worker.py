"""A compaction that SIGKILLs itself at its N-th storage call (run as a process by test_compact_crash).

Usage: ``python crash_worker.py TABLE_URI KILL_AT`` (KILL_AT 0: never). Every storage call of the
run counts: reads of the log, part reads and the writes of each group, completing uploads, the
commit, retention's listings. Groups are rewritten in this process (the engine's ``runner``), so
task-side writes are inside the window too. Prints ``{"calls": N}`` when it finishes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from lading_jobs import storage as st
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.engine import compact
from lading_jobs.engine import RunContext
from lading_spec.compaction import parse_compaction

COUNT = [0]


def _counting(name: str, kill_at: int) -> None:
    original = getattr(st.LocalStorage, name)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        COUNT[0] += 1
        if 0 < kill_at <= COUNT[0]:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, *args, **kwargs)

    setattr(st.LocalStorage, name, wrapper)


def main() -> None:
    uri, kill_at = sys.argv[1], int(sys.argv[2])
    for name in ("read", "read_range", "head", "put", "put_if_absent", "delete", "begin_upload", "upload_part",
                 "complete_upload", "abort_upload", "list_objects", "list_pending_uploads", "open_input"):
        _counting(name, kill_at)
    storage = st.LocalStorage()
    spec = parse_compaction({"table": uri, "since": {"version": 5}, "targetFileSize": "48kB", "minInputFiles": 2,
                             "retention": {"gracePeriod": "1h"}})

    def runner(plan: compact_task.RewritePlan) -> list[compact_task.GroupOutcome]:
        return [compact_task.rewrite_group(plan, i, storage) for i in range(len(plan.groups))]

    totals = compact(None, spec, RunContext(), storage=storage, runner=runner)
    print(json.dumps({"calls": COUNT[0], "groups": totals.groups}))


if __name__ == "__main__":
    main()
