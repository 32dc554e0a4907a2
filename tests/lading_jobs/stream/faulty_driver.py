"""A StreamCopy driver (``lading_jobs.main``) that kills its whole process group at a chosen moment.

    python faulty_driver.py MODE N -- main.py arguments...

MODE (N counts the stream's batches, from 1):

* ``before-commit``: batch N's parts are uploaded and completed, its dead letters
  written, and the table commit is about to be sent: killed;
* ``after-commit``: batch N's commit has just landed (no group offsets, no progress): killed;
* ``in-tasks``: batch N's Spark job is running: killed after a random delay;
* ``none``: no kill from inside (the test kills from outside at a random moment).

SIGKILL of the process group is what a killed pod does: driver, JVM and Python
workers die at once, nothing runs a clean-up. Test code only: the product has
no fault hooks; this wraps its functions from outside.

Every round starts a new driver JVM, so the local session here leaves out what no
round uses: the Spark UI (a Jetty server, and a walk over ports 4040+ that other
JVMs on the machine hold). Nothing the engine does depends on it.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "spark_apps"))

from lading_jobs import main, session  # noqa: E402
from lading_jobs.stream import sources  # noqa: E402
from lading_jobs.table.log import commits as tlog  # noqa: E402


def die() -> None:
    sys.stdout.flush()
    os.killpg(os.getpgid(0), signal.SIGKILL)


# Test drivers only: cheaper to start, the engine's own settings untouched.
FAST_START = {"spark.ui.enabled": "false"}


def install(mode: str, at: int) -> None:
    session.LOCAL_CONF.update(FAST_START)
    counts = {"commit": 0, "tasks": 0}
    commit = tlog.TableLog.commit

    def commit_then_maybe_die(self: tlog.TableLog, change: tlog.Change, **kw: object) -> tlog.Snapshot:
        if change.operation == "stream":
            counts["commit"] += 1
            if mode == "before-commit" and counts["commit"] == at:
                die()
        snap = commit(self, change, **kw)  # type: ignore[arg-type]
        if change.operation == "stream" and mode == "after-commit" and counts["commit"] == at:
            die()
        return snap

    tlog.TableLog.commit = commit_then_maybe_die  # type: ignore[method-assign]
    run_tasks = sources.run_tasks

    def tasks_then_maybe_die(*args: object, **kw: object) -> object:
        counts["tasks"] += 1
        if mode == "in-tasks" and counts["tasks"] == at:
            threading.Timer(random.uniform(0.0, 1.5), die).start()
        return run_tasks(*args, **kw)  # type: ignore[arg-type]

    sources.run_tasks = tasks_then_maybe_die  # type: ignore[assignment]


if __name__ == "__main__":
    mode, at = sys.argv[1], int(sys.argv[2])
    assert sys.argv[3] == "--"
    install(mode, at)
    sys.exit(main.main(sys.argv[4:]))
