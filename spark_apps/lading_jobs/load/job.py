"""``run_load``: one CopyJob run from files into a table, start to commit.

  list files ─► drop those in the table's ledger (unless force) ─► plan
      ─► one Spark task per file (mapInArrow): decode, cast, pending uploads
      ─► error policy ─► complete parts ─► ONE commit: parts + ledger entries
      ─► complete rejected-rows files ─► manifest ─► result
  policy says fail, validateOnly, any exception or cancellation
      ─► abort every pending part upload of the run (and sweep), nothing commits

A missing table is created by the same commit sequence only when the load
commits (commit 0 creates it, the next adds the rows), so a failed or
validate-only load leaves no table behind.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from lading_jobs import storage as st
from lading_jobs.engine import Cancelled
from lading_jobs.load import manifest as mf
from lading_jobs.load.infer import infer_schema
from lading_jobs.load.policy import Decision, FileOutcome, decide, merge_outcomes
from lading_jobs.load.stores import storage_for
from lading_jobs.load.task import FileTask, LoadPlan, run_file
from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.log import LedgerEntry, Snapshot, TableError, TableLog
from lading_jobs.table.schema import SchemaError, TableSchema
from lading_spec.copyjob import CopyJobSpec, parse_copyjob
from lading_spec.errors import SpecError
from lading_spec.formats import FileSet
from lading_spec.job import JobDocument

CHUNK_BYTES = 256 * 1024**2
"""A Parquet file bigger than this is read by several tasks, each a range of its row groups."""


def list_files(fileset: FileSet, settings: st.S3Settings) -> list[st.ObjectInfo]:
    """The files a load reads, in key order: an explicit ``fileList`` or prefix/glob + pattern."""
    if fileset.file_list:
        out = []
        for i, uri in enumerate(fileset.file_list):
            info = storage_for(uri, settings).head(uri)
            if info is None:
                raise SpecError(f"from.fileList[{i}]", f"{uri} does not exist; fix the URI or remove it")
            out.append(info)
        return out
    assert fileset.uri is not None
    found = storage_for(fileset.uri, settings).list_matching(fileset.uri, fileset.pattern)
    return [o for o in found if not o.uri.rsplit("/", 1)[-1].startswith(("_", "."))]


def _settings(spec: CopyJobSpec) -> st.S3Settings:
    return st.S3Settings.from_env(spec.connection.endpoint, spec.connection.region)


def _target_schema(log: TableLog | None, spec: CopyJobSpec, first: st.ObjectInfo | None,
                   settings: st.S3Settings) -> TableSchema:
    if log is not None:
        return log.snapshot().schema
    target = spec.target
    try:
        if target.schema:
            return TableSchema.from_spec(target.schema)
        if target.infer_schema and first is not None:
            fileset = spec.source.files
            assert fileset is not None
            data = storage_for(first.uri, settings).read(first.uri)
            return infer_schema(data, fileset.format, fileset.options, first.uri)
    except SchemaError as e:
        raise SpecError("to.schema", str(e)) from e
    raise SpecError("to.schema", f"there is no table at {target.table}; give to.schema (columns and types) "
                                 "or set to.inferSchema: true to create it from the files")


def _run_tasks(spark: SparkSession, plan: LoadPlan, tasks: list[FileTask]) -> list[FileOutcome]:
    """One Spark task per file; each returns its outcome as one JSON string."""

    def work(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                outcome = run_file(plan, tasks[i])
                yield pa.RecordBatch.from_pydict({"outcome": [json.dumps(outcome.to_dict())]})

    df = spark.range(0, len(tasks), 1, numPartitions=len(tasks)).mapInArrow(work, "outcome string")
    spark.sparkContext.setJobDescription(f"lading load into {plan.table_uri} ({len(tasks)} files)")
    rows = df.collect()
    by_file: dict[int, list[FileOutcome]] = {}
    for r in rows:  # in task order (collect keeps partition order), so a file's chunks stay in order
        o = FileOutcome.from_dict(json.loads(r.outcome))
        by_file.setdefault(o.index, []).append(o)
    return [merge_outcomes(chunks) for _, chunks in sorted(by_file.items())]


def _written(o: FileOutcome) -> list[writer.WrittenPart]:
    return [writer.WrittenPart.from_json(p) for p in o.parts]


def _abort_all(outcomes: list[FileOutcome], plan: LoadPlan, rejects_too: bool = False) -> None:
    storage = storage_for(plan.table_uri, plan.settings)
    writer.abort_parts(plan.table_uri, [w for o in outcomes for w in _written(o)], storage=storage)
    for o in outcomes if rejects_too else ():
        for upload in o.rejects_uploads:
            with contextlib.suppress(st.StorageError, OSError):
                storage_for(upload["uri"], plan.settings).abort_upload(st.PendingUpload.from_dict(upload))


def _sweep(plan: LoadPlan) -> None:
    """Abort uploads left under this run's prefixes (tasks killed mid-write)."""
    prefixes = [fmt.write_prefix(plan.table_uri, plan.write_id)]
    if plan.rejects_prefix:
        prefixes.append(plan.rejects_prefix)
    for prefix in prefixes:
        storage = storage_for(prefix, plan.settings)
        with contextlib.suppress(st.StorageError, OSError):
            for u in storage.list_pending_uploads(prefix):
                storage.abort_upload(u)


def split_loaded(files: list[st.ObjectInfo], snapshot: Snapshot | None
                 ) -> tuple[list[st.ObjectInfo], list[st.ObjectInfo]]:
    """(files to load, files the ledger says are loaded), in listing order: one ledger
    lookup per file, so a listing of 100,000 loaded files costs 100,000 lookups."""
    if snapshot is None:
        return list(files), []
    todo: list[st.ObjectInfo] = []
    already: list[st.ObjectInfo] = []
    for o in files:
        (already if snapshot.loaded(o.uri, o.etag, o.size) else todo).append(o)
    return todo, already


def plan_tasks(files: list[st.ObjectInfo], fmt_name: str, settings: st.S3Settings,
               chunk_bytes: int = CHUNK_BYTES) -> list[FileTask]:
    """One task per file; a Parquet file bigger than ``chunk_bytes`` is split into tasks of
    consecutive row groups of about that many (compressed) bytes, read from its footer."""
    tasks: list[FileTask] = []
    for n, o in enumerate(files):
        chunks = _row_group_chunks(o, settings, chunk_bytes) if fmt_name == "parquet" and o.size > chunk_bytes else []
        if len(chunks) <= 1:
            tasks.append(FileTask(len(tasks), o.uri, o.etag, o.size, n))
            continue
        for start, stop, first_row in chunks:
            tasks.append(FileTask(len(tasks), o.uri, o.etag, o.size, n, (start, stop), first_row))
    return tasks


def _row_group_chunks(o: st.ObjectInfo, settings: st.S3Settings, chunk_bytes: int) -> list[tuple[int, int, int]]:
    """[(first row group, stop, first row)] of about ``chunk_bytes`` each; [] if the footer is unreadable."""
    try:
        meta = pq.read_metadata(storage_for(o.uri, settings).open_input(o.uri, o.size))
    except (pa.ArrowInvalid, OSError, st.StorageError):
        return []  # the task reports the file as unreadable
    out: list[tuple[int, int, int]] = []
    start, size, row, first_row = 0, 0, 1, 1
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        group = sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
        if i > start and size + group > chunk_bytes:
            out.append((start, i, first_row))
            start, size, first_row = i, 0, row
        size += group
        row += rg.num_rows
    out.append((start, meta.num_row_groups, first_row))
    return out


def run_load(spark: SparkSession, job: JobDocument, spec: CopyJobSpec | None = None,
             cancel: threading.Event | None = None, *, chunk_bytes: int = CHUNK_BYTES,
             **_: Any) -> dict[str, Any]:
    """Run the load ``job`` asks for; return the CopyResponse result (``rows`` or ``error``)."""
    started = time.monotonic()
    spec = spec or parse_copyjob(job.spec)
    fileset = spec.source.files
    table_uri = spec.target.table
    if fileset is None or table_uri is None:
        raise SpecError("from.files", "a load reads from.files into to.table")
    settings = _settings(spec)
    base: dict[str, Any] = {"runId": job.run_id, "destination": table_uri}
    files = list_files(fileset, settings)
    if not files:
        where = (fileset.uri or "") + (f" matching {fileset.pattern!r}" if fileset.pattern else "")
        return {**base, "error": f"from.files: no files found at {where}; check the prefix and pattern",
                "files": 0, "rows": None}
    table_storage = storage_for(table_uri, settings)
    log = TableLog.open(table_uri, table_storage)
    snapshot = log.snapshot() if log is not None else None
    schema = _target_schema(log, spec, files[0], settings)
    todo, already = split_loaded(files, None if spec.load.force else snapshot)
    plan = LoadPlan(
        table_uri=table_uri, schema=schema,
        table_id=snapshot.table_id if snapshot is not None else uuid.uuid4().hex,
        envelope=snapshot.envelope if snapshot is not None else spec.target.envelope,
        sort_by=snapshot.sort_by if snapshot is not None else spec.target.sort_by,
        time=writer.default_time(snapshot) if snapshot is not None else int(time.time() * 1000),
        write_id=fmt.new_write_id(), format=fileset.format, options=fileset.options, load=spec.load,
        rejects_prefix=mf.run_prefix(spec.load.rejected_rows, job.run_id), settings=settings)
    tasks = plan_tasks(todo, fileset.format, settings, chunk_bytes)
    outcomes: list[FileOutcome] = []
    try:
        if tasks:
            outcomes = _run_tasks(spark, plan, tasks)
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        decision = decide(outcomes, spec.load)
        committed, version, rows, error = False, snapshot.version if snapshot else None, 0, decision.error
        if decision.ok:
            rows = sum(outcomes[i].rows_good for i in decision.loaded)
        if decision.ok and not spec.load.validate_only and tasks:
            version = _commit(spec, plan, log, schema, outcomes, decision, job.run_id)
            committed = True
        else:
            _abort_all(outcomes, plan)
    except BaseException:
        _abort_all(outcomes, plan, rejects_too=True)
        _sweep(plan)
        raise
    for o in outcomes:  # rejected rows are a report: they are written whatever the outcome
        for upload in o.rejects_uploads:
            storage_for(upload["uri"], settings).complete_upload(st.PendingUpload.from_dict(upload))
    manifest = mf.build_manifest(
        run_id=job.run_id, table_uri=table_uri, fmt_name=fileset.format, on_error=spec.load.on_error,
        validate_only=spec.load.validate_only, outcomes=outcomes, already_loaded=already, decision=decision,
        committed=committed, table_version=version, rows=rows if (committed or spec.load.validate_only) else 0,
        error=error, rejected_rows=plan.rejects_prefix)
    manifest_uri = mf.manifest_uri(table_uri, spec.load.rejected_rows, job.run_id)
    storage_for(manifest_uri, settings).put(manifest_uri, json.dumps(manifest, indent=1).encode())
    result: dict[str, Any] = {
        **base, "manifest": manifest_uri,
        "files": manifest["filesLoaded"], "filesAlreadyLoaded": len(already),
        "filesSkipped": len(decision.skipped),
        "bytes": sum(o.size for o in outcomes if o.index in decision.loaded_set) if committed else 0,
        "rowsRejected": manifest["rowsRejected"], "tableVersion": version,
        "durationSeconds": round(time.monotonic() - started, 3),
        "fileResults": [{k: f[k] for k in ("file", "status", "rowsLoaded", "rowsRejected", "firstError") if k in f}
                        for f in manifest["files"][:20]],
    }
    if plan.rejects_prefix:
        result["rejectedRows"] = plan.rejects_prefix
    if spec.load.validate_only:
        result["validateOnly"] = True
    if error is not None:
        return {**result, "error": error}
    return {**result, "rows": rows}


def _commit(spec: CopyJobSpec, plan: LoadPlan, log: TableLog | None, schema: TableSchema,
            outcomes: list[FileOutcome], decision: Decision, run_id: str) -> int:
    """Complete the parts of the files that load, abort the rest, and commit them in one entry."""
    keep = set(decision.loaded)
    storage = storage_for(plan.table_uri, plan.settings)
    writer.abort_parts(plan.table_uri, [w for o in outcomes if o.index not in keep for w in _written(o)],
                       storage=storage)
    written = [w for o in outcomes if o.index in keep for w in _written(o)]
    try:
        if log is None:
            log = TableLog.create(plan.table_uri, schema, spec.target.envelope, spec.target.key_columns,
                                  spec.target.sort_by, storage=storage, exist_ok=True, table_id=plan.table_id)
        if log.snapshot().table_id != plan.table_id:
            raise TableError(f"to.table: the table at {plan.table_uri} was created or replaced by another "
                             "writer during the load; nothing was loaded, run the load again")
    except BaseException:
        writer.abort_parts(plan.table_uri, written, storage=storage)
        raise
    ledger = {o.uri: LedgerEntry(o.etag, o.size, o.rows_good) for o in outcomes if o.index in keep}
    snap = writer.commit_parts(plan.table_uri, written, log=log, operation="load", ledger=ledger,
                               info={"runId": run_id, "files": len(ledger)})
    return snap.version
