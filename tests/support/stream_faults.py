"""Shared parts of the stream fault tests (tests/lading_jobs/stream/test_fault*.py): start real
StreamCopy drivers one after the other, kill each (its whole process group, SIGKILL, as a
killed pod dies) at a chosen moment, and read the table back straight from its parts.

The Kafka and the files fault test live in separate modules so that pytest-xdist's workers
can run them at the same time; both use what is here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs.ingest.stores import storage_for
from lading_jobs.storage import S3Settings
from lading_jobs.table.log.commits import TableLog
from lading_spec.job import JobDocument

DRIVER = Path(__file__).resolve().parents[1] / "lading_jobs" / "stream" / "faulty_driver.py"
MODES = ("before-commit", "after-commit", "in-tasks", "none")
ALL_KILL_POINTS = tuple((mode, at) for at in (1, 2) for mode in MODES)
"""Every point a driver can be killed at: every mode at batch 1, then at batch 2 (``none``: killed
from outside at a random moment, its batch number unused)."""
KILL_POINTS = ALL_KILL_POINTS if os.environ.get("LADING_FAULT_MATRIX") == "full" else ALL_KILL_POINTS[:-1]
"""Where the rounds' drivers die, in order. The default number of rounds is one per point, so every
point is reached once in every run (a seeded random batch number left some out: the files test's
seed never killed before the commit of batch 2); more rounds (``LADING_FAULT_KILLS``) go round the
points again. By default the second ``none`` is left out: its batch number is unused, so it is the
first ``none`` again at another random moment; ``LADING_FAULT_MATRIX=full`` runs it too. Both
``in-tasks`` points stay: their kills land at a random moment of the batch's uploads, and only a
kill between an upload's start and its completion leaves the pending upload that the stream's
start-up sweep must abort (6 rounds without the second ``in-tasks`` passed once with the sweep
removed)."""
ROUNDS = len(KILL_POINTS)


def job(spec: dict[str, Any], name: str) -> JobDocument:
    return JobDocument("StreamCopy", "faults", name, "uid", 1, f"{name}-run", dt.datetime.now(dt.UTC), spec)


def read_table(uri: str) -> pa.Table:
    """Every committed row, straight from the parts the log names (no lading reader)."""
    log = TableLog.open_existing(uri, storage_for(uri, S3Settings.from_env()))
    snap = log.snapshot()
    storage = storage_for(uri, S3Settings.from_env())
    tables = [pq.read_table(pa.BufferReader(storage.read(snap.part_uri(p)))) for p in snap.parts]
    return pa.concat_tables(tables) if tables else pa.table({})


def pending_uploads(uri: str) -> list[Any]:
    storage = storage_for(uri, S3Settings.from_env())
    return storage.list_pending_uploads(uri)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
def run_killed(doc: JobDocument, tmp: Path, kills: int, feed: Any, seed: int) -> list[tuple[str, int, float]]:
    """Start drivers one after the other, each killed once; ``feed(i)`` adds source data meanwhile.

    The tests ask for the shared Spark session only after this, for their clean catch-up run: the
    session's JVM, started first thing by the suite's first modules (these), would otherwise start
    before the run's Spark CDS archive is built (tests/support/spark_cds.py) and idle through the
    rounds; started later, it maps the archive, and so do the later rounds' drivers."""
    rng = random.Random(seed)
    job_file = tmp / "job.json"
    job_file.write_text(doc.to_json())
    log = open(tmp / "drivers.log", "ab")  # noqa: SIM115 - closed below
    done: list[tuple[str, int, float]] = []
    try:
        for i in range(kills):
            mode, at = KILL_POINTS[i % len(KILL_POINTS)]
            env = dict(os.environ, LADING_PROGRESS_PORT="0", LADING_PROGRESS_HOST="127.0.0.1",
                       LADING_TERMINATION_LOG=str(tmp / "termination-log"))
            feeder = threading.Thread(target=feed, args=(i,))
            feeder.start()
            started = time.monotonic()
            proc = subprocess.Popen([sys.executable, str(DRIVER), mode, str(at), "--", "--master", "local[2]",
                                     "--job-file", str(job_file)], stdout=log, stderr=log, env=env,
                                    start_new_session=True)
            reached = True
            try:
                if mode == "none":
                    proc.wait(timeout=rng.uniform(2.0, 12.0))
                else:
                    proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                reached = mode == "none"  # else the crash window was never reached: the round proves nothing
            kill_group(proc)
            feeder.join()
            if not reached:
                pytest.fail(f"driver {i} never reached its kill point ({mode}, batch {at}) in 300 s; "
                            f"see {tmp / 'drivers.log'}")
            assert proc.returncode == -signal.SIGKILL, (
                f"driver {i} ({mode}) ended by itself with {proc.returncode}; see {tmp / 'drivers.log'}")
            done.append((mode, at, round(time.monotonic() - started, 1)))
    finally:
        log.close()
    return done

