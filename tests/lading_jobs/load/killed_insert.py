"""A CopyJob driver (``lading_jobs.main``) that SIGKILLs its process group around its table commit.

    python killed_insert.py MODE -- main.py arguments...

MODE: ``before-commit`` (the parts are written and the intent recorded; the commit is
about to be sent) or ``after-commit`` (the commit has just landed; nothing reported).
What a killed pod does: driver, JVM and Python workers die at once, no clean-up runs.
Test code only: it wraps the product's ``TableLog.commit`` from outside.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "spark_apps"))

from lading_jobs import main  # noqa: E402
from lading_jobs.table.log import commits as tlog  # noqa: E402


def die() -> None:
    sys.stdout.flush()
    os.killpg(os.getpgid(0), signal.SIGKILL)


def install(mode: str) -> None:
    commit = tlog.TableLog.commit

    def commit_and_die(self: tlog.TableLog, change: tlog.Change, **kw: object) -> tlog.Snapshot:
        if mode == "before-commit":
            die()
        commit(self, change, **kw)  # type: ignore[arg-type]
        die()
        raise AssertionError("unreachable")

    tlog.TableLog.commit = commit_and_die  # type: ignore[method-assign]


if __name__ == "__main__":
    install(sys.argv[1])
    assert sys.argv[2] == "--"
    sys.exit(main.main(sys.argv[3:]))
