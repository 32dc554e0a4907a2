"""``INSERT INTO t SELECT …``: a CopyJob from ``from.query`` (over ``from.inputs``) into ``to.table``.

The query is checked by the sandbox like an unload's (``sandbox.query_frame``), its
rows are written as the table's parts by Spark tasks (``table.writer.append``) and
committed in **one** log entry: ``to.ifExists: append`` (default) adds them,
``replace`` removes every part of the version the write started from in that same
entry (readers see the old contents or the new, never a mix), ``error`` refuses an
existing table. A missing table is created from the query's columns by that commit.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from pyspark.sql import SparkSession

from lading_jobs import sandbox
from lading_jobs import storage as st
from lading_jobs.engine import Cancelled
from lading_jobs.load.stores import storage_for
from lading_jobs.sources.files import register_inputs
from lading_jobs.table import writer
from lading_jobs.table.log import TableLog
from lading_spec.copyjob import CopyJobSpec
from lading_spec.job import JobDocument


def run_insert(spark: SparkSession, job: JobDocument, spec: CopyJobSpec,
               cancel: threading.Event | None = None) -> dict[str, Any]:
    """Run the query and commit its rows into the table; the CopyResponse result."""
    started = time.monotonic()
    table_uri, query = spec.target.table, spec.source.query
    assert table_uri is not None and query is not None
    settings = st.S3Settings.from_env(spec.connection.endpoint, spec.connection.region)
    base: dict[str, Any] = {"runId": job.run_id, "destination": table_uri}
    register_inputs(spark, spec.source.inputs)
    df = sandbox.query_frame(spark, query, [i.name for i in spec.source.inputs])
    log = TableLog.open(table_uri, storage_for(table_uri, settings))
    if log is not None and spec.target.if_exists == "error":
        return {**base, "error": f"to.table: a table exists at {table_uri}; set to.ifExists to append or replace",
                "rows": None}
    before = log.snapshot().rows if log is not None and spec.target.if_exists == "append" else 0
    if cancel is not None and cancel.is_set():
        raise Cancelled()
    replace = spec.target.if_exists == "replace"
    snap = writer.append(spark, df, table_uri, envelope=spec.target.envelope, key_columns=spec.target.key_columns,
                         sort_by=spec.target.sort_by, info={"runId": job.run_id},
                         operation="replace" if replace else "append", replace=replace)
    return {**base, "rows": snap.rows - before, "tableVersion": snap.version,
            "durationSeconds": round(time.monotonic() - started, 3)}
