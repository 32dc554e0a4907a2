"""The Spark session lading's apps run in, with the settings the engines rely on.

Python data sources with ``pushFilters`` need ``spark.sql.python.filterPushdown.enabled``;
Arrow batches are not capped by bytes (a byte cap makes Spark measure every row:
see DESIGN.md, "What was measured here"). A tenant's query reads only its inputs
(:mod:`lading_jobs.sandbox`): SQL on paths (``csv.`s3://...```) is off, and so is
``${...}`` substitution, which would put ``${env:AWS_SECRET_ACCESS_KEY}`` into the
query text. These settings come last, over any ``conf`` given.

The Python workers' Arrow memory pool (``ARROW_DEFAULT_MEMORY_POOL``, a default a
``conf`` may override) depends on the job's kind (``arrow_pool``): a Compaction's
workers use jemalloc, because pyarrow's default, mimalloc, takes fresh memory as
transparent huge pages that the kernel zeroes on first touch, which measured here as
1.4 s of system time per 500-part compaction group (2.7 s of CPU with jemalloc, 4.2 s
with mimalloc); every other kind keeps mimalloc, because jemalloc, returning freed
pages to the kernel and faulting them in again, made loads 20-30 % slower (wall
clock) and unloads no faster (docs/benchmarks.md, "Arrow memory pool").
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from pyspark.sql import SparkSession

from lading_spec.sparkconf import SANDBOX_CONF

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "true",
}

ARROW_POOL = "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL"
ARROW_POOL_BY_KIND: dict[str, str] = {"Compaction": "jemalloc"}
"""The kinds whose Python workers allocate Arrow memory with another pool than pyarrow's own."""


def arrow_pool(kind: str | None) -> str:
    """The Arrow memory pool for the Python workers of a job of ``kind`` (None: no job yet)."""
    return ARROW_POOL_BY_KIND.get(kind or "", "mimalloc")

LOCAL_CONF: dict[str, str] = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "2g",
}


def session_settings(local: bool, conf: dict[str, Any] | None = None, kind: str | None = None) -> dict[str, str]:
    """The settings a session for a job of ``kind`` starts with: lading's defaults (the Arrow
    pool for the kind, and local ones), then ``conf``, then the sandbox's, which nothing overrides."""
    settings = {**DEFAULT_CONF, ARROW_POOL: arrow_pool(kind)}
    if local:
        settings.update(LOCAL_CONF)
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    settings.update(SANDBOX_CONF)
    return settings


def build_session(master: str | None = None, app_name: str = "lading", conf: dict[str, Any] | None = None,
                  kind: str | None = None) -> SparkSession:
    """Get or create the session for a job of ``kind``; ``master=None`` keeps what spark-submit set."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in session_settings(local=master is not None, conf=conf, kind=kind).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    for key, value in SANDBOX_CONF.items():  # an existing session (spark-submit's) keeps its own conf otherwise
        session.conf.set(key, value)
    session.sparkContext.setLogLevel("WARN")
    return session


WORKER_EXIT_GRACE = 2.0
"""Seconds a failed job's Python workers get to die after Spark reports their tasks ended."""


def wait_for_tasks(sc: Any, group: str, deadline_seconds: float = 120.0,
                   grace_seconds: float = WORKER_EXIT_GRACE) -> None:
    """Block until no task of the job group ``group`` is still running (a failed job's
    other tasks are killed asynchronously), or the deadline passes; then ``grace_seconds``
    more. Spark counts a task as ended when its JVM side has, but stops the task's Python
    worker asynchronously (the JVM asks the worker daemon to kill it): until then the
    worker keeps encoding the batches it already received and can begin an upload after
    the driver's sweep listed the pending ones (seen as a left-over upload of a failed
    unload under two test workers). Callers sweep after this returns; only failure paths
    call it, so the grace costs nothing on success. A JVM that cannot be asked (killed with
    the driver's process group) counts as running nothing: this never raises, so the
    caller's abort still runs."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        try:
            active = _active_tasks(sc, group)
        except Exception:  # noqa: BLE001 - the JVM is gone (a signal to the whole process group):
            active = 0     # it runs no task any more; the caller's clean-up needs only Python
        if active == 0:
            time.sleep(grace_seconds)
            return
        time.sleep(0.2)


def _active_tasks(sc: Any, group: str) -> int:
    tracker = sc.statusTracker()
    active = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            active += stage.numActiveTasks if stage is not None else 0
    return active
