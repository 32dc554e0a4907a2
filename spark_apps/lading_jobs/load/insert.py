"""``INSERT INTO t SELECT …``: a CopyJob from ``from.query`` (over ``from.inputs``) into ``to.table``.

The query is checked by the sandbox like an unload's (``sandbox.query_frame``), its
rows are written as the table's parts by Spark tasks (``table.writer.append``) and
committed in **one** log entry: ``to.ifExists: append`` (default) adds them,
``replace`` removes every part of the version the write started from in that same
entry (readers see the old contents or the new, never a mix), ``error`` refuses an
existing table. A missing table is created from the query's columns by that commit.

A run commits at most once, however often it is retried with the same run id (a
driver killed after its commit landed, before it reported):

  tasks write pending parts ─► intent (``uploadset``): the uploads, the commit's nonce and
      base version, at ``<table>/_lading_loads/<runId>.intent.json``
  ─► ONE commit carrying the nonce ─► record ``<table>/_lading_loads/<runId>.json`` ─► drop the intent

A retry first looks there: a record means the run is done (its result is reported,
nothing runs); an intent whose nonce is in the log means the commit landed (the
record is written, the result reported); any other intent is undone (its uploads
aborted or deleted) and the run starts over.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from pyspark.sql import SparkSession

from lading_jobs import critical, uploadset
from lading_jobs import storage as st
from lading_jobs.engine import Cancelled
from lading_jobs.ingest.stores import storage_for
from lading_jobs.load import manifest as mf
from lading_jobs.sources.files import query_frame
from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.iceberg import switch as mirror_switch
from lading_jobs.table.log.commits import CommitStateUnknown, TableLog, find_commit, new_nonce
from lading_spec.copyjob import CopyJobSpec
from lading_spec.job import JobDocument

KIND = "insert"


def _record(run_id: str, table_uri: str, version: int, rows: int, operation: str) -> dict[str, Any]:
    return {"kind": KIND, "runId": run_id, "table": table_uri, "committed": True, "tableVersion": version,
            "rows": rows, "operation": operation}


def _result(record: dict[str, Any]) -> dict[str, Any]:
    return {"runId": record["runId"], "destination": record["table"], "rows": record["rows"],
            "tableVersion": record["tableVersion"]}


def _finish(publishing: uploadset.UploadSet, uri: str, record: dict[str, Any]) -> None:
    """Write the run's record, then drop its intent (a crash in between: the retry writes it again)."""
    publishing.storage.put(uri, json.dumps(record).encode())
    publishing.finish()


def recover(publishing: uploadset.UploadSet, table_uri: str, table_storage: st.Storage,
            record_uri: str) -> dict[str, Any] | None:
    """What an earlier attempt of this run left: its record if it committed (rolled forward from
    its intent when the commit landed but the record was not written), else None once undone."""
    intent = publishing.read_intent()
    if intent is None:
        if publishing.storage.head(record_uri) is None:
            return None
        record: dict[str, Any] = json.loads(publishing.storage.read(record_uri))
        return record if record.get("runId") == publishing.run_id and record.get("kind") == KIND else None
    data = intent.data
    with critical.commit_section():
        landed = find_commit(table_uri, table_storage, data["nonce"], int(data["base"]))
        if landed is not None:
            record = _record(publishing.run_id, table_uri, landed.version, int(data["rows"]), str(data["operation"]))
            _finish(publishing, record_uri, record)
            return record
        publishing.roll_back(intent)
    return None


def run_insert(spark: SparkSession, job: JobDocument, spec: CopyJobSpec,
               cancel: threading.Event | None = None) -> dict[str, Any]:
    """Run the query and commit its rows into the table; the CopyResponse result."""
    started = time.monotonic()
    table_uri, query = spec.target.table, spec.source.query
    assert table_uri is not None and query is not None
    settings = st.S3Settings.from_env(spec.connection.endpoint, spec.connection.region)
    base: dict[str, Any] = {"runId": job.run_id, "destination": table_uri}
    record_uri = mf.manifest_uri(table_uri, None, job.run_id)
    publishing = uploadset.UploadSet(storage_for(record_uri, settings), mf.intent_uri(table_uri, None, job.run_id),
                                     job.run_id, roots=(f"{fmt.table_root(table_uri)}{fmt.DATA_DIR}/",))
    table_storage = storage_for(table_uri, settings)
    done = recover(publishing, table_uri, table_storage, record_uri)
    if done is not None:  # an earlier attempt of this run committed: report it, commit nothing twice
        return {**_result(done), "durationSeconds": round(time.monotonic() - started, 3)}
    df = query_frame(spark, query, spec.source.inputs)
    log = TableLog.open(table_uri, table_storage)
    if log is not None and spec.target.if_exists == "error":
        return {**base, "error": f"to.table: a table exists at {table_uri}; set to.ifExists to append or replace",
                "rows": None}
    if cancel is not None and cancel.is_set():
        raise Cancelled()
    if log is not None and spec.target.iceberg_mirror is not None:  # to.icebergMirror: its own commit, first
        mirror_switch.switch(log, spec.target.iceberg_mirror)
    replace = spec.target.if_exists == "replace"
    operation = "replace" if replace else "append"
    nonce = new_nonce()
    rows = 0

    def before_commit(written: list[writer.WrittenPart], version: int) -> None:
        nonlocal rows
        rows = sum(w.part.stats.rows for w in written)
        publishing.begin([st.PendingUpload.from_dict(w.upload) for w in written],
                         {"nonce": nonce, "base": version, "rows": rows, "operation": operation})

    try:
        snap = writer.append(spark, df, table_uri, envelope=spec.target.envelope, key_columns=spec.target.key_columns,
                             sort_by=spec.target.sort_by, info={"runId": job.run_id}, operation=operation,
                             replace=replace, nonce=nonce, before_commit=before_commit,
                             iceberg_mirror=spec.target.iceberg_mirror is not False)
    except CommitStateUnknown as e:
        raise CommitStateUnknown(f"{e}; run the CopyJob again with the same runId ({job.run_id}): it finds "
                                 "out which and finishes or undoes it", e.nonce) from e
    except BaseException:
        if publishing.begun:
            # interrupted after the commit landed (append re-raises then, parts kept): roll forward
            landed = find_commit(table_uri, table_storage, nonce, int(publishing.data["base"]))
            if landed is None:
                publishing.abort_all()
                raise
            version = landed.version
        else:
            raise
    else:
        version = snap.version
    record = _record(job.run_id, table_uri, version, rows, operation)
    with critical.commit_section():
        _finish(publishing, record_uri, record)
    return {**_result(record), "durationSeconds": round(time.monotonic() - started, 3)}
