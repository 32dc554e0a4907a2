"""``run_load``: one CopyJob run from files into a table, start to commit.

  list files ─► drop those in the table's ledger (unless force) ─► plan (lading_jobs.ingest.plan)
      ─► a task per file, or per row-group range of a big Parquet file, small files packed
         into one Spark task (mapInArrow): decode, cast, pending uploads
      ─► schemaEvolution: addColumns and some file carried columns the table lacks:
         evolve the schema, redo those files' tasks with it (lading_jobs.table.evolve)
      ─► error policy ─► complete parts ─► ONE commit: parts + ledger entries (+ the new schema)
      ─► complete rejected-rows files ─► manifest ─► result
  policy says fail, validateOnly, any exception or cancellation
      ─► abort every pending part upload of the run (and sweep), nothing commits

A missing table is created only when the load commits, by the load's own
commit (commit 0 creates it with the rows and the ledger entries), so a failed or
validate-only load leaves no table behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from lading_jobs import critical, uploadset, workerheap
from lading_jobs import storage as st
from lading_jobs.engine import Cancelled
from lading_jobs.ingest import decode as dec
from lading_jobs.ingest import transform as tf
from lading_jobs.ingest.infer import infer_schema
from lading_jobs.ingest.plan import CHUNK_BYTES, plan_load
from lading_jobs.ingest.policy import Decision, FileOutcome, decide, merge_outcomes
from lading_jobs.ingest.stores import storage_for
from lading_jobs.ingest.task import FileTask, LoadPlan, run_file
from lading_jobs.load import manifest as mf
from lading_jobs.session import wait_for_tasks
from lading_jobs.sources import files as file_sets
from lading_jobs.sources import hive
from lading_jobs.table import evolve, writer
from lading_jobs.table import format as fmt
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg import switch as mirror_switch
from lading_jobs.table.log.commits import (
    CommitStateUnknown,
    LedgerEntry,
    Snapshot,
    TableError,
    TableExistsError,
    TableLog,
    find_commit,
    new_nonce,
)
from lading_jobs.table.schema import SchemaError, TableSchema
from lading_spec.copyjob import CopyJobSpec, parse_copyjob
from lading_spec.errors import SpecError
from lading_spec.formats import FileSet
from lading_spec.job import JobDocument


def list_files(fileset: FileSet, settings: st.S3Settings) -> list[st.ObjectInfo]:
    """The files a load reads, as every file set lists them (``sources.files.list_files``)."""
    return file_sets.list_files(fileset, lambda uri: storage_for(uri, settings))


def _settings(spec: CopyJobSpec) -> st.S3Settings:
    return st.S3Settings.from_env(spec.connection.endpoint, spec.connection.region)


def _target_schema(log: TableLog | None, spec: CopyJobSpec, files: list[st.ObjectInfo],
                   settings: st.S3Settings) -> TableSchema:
    if log is not None:
        return log.snapshot().schema
    target = spec.target
    try:
        if target.schema:
            return TableSchema.from_spec(target.schema)
        if target.infer_schema and files:
            fileset = spec.source.files
            assert fileset is not None
            first = files[0]
            data = storage_for(first.uri, settings).read(first.uri)
            extra: list[pa.Field] = []
            if fileset.partitioning == "hive":  # the directories' columns follow the file's
                root = file_sets.hive_root(fileset)
                found = [hive.path_values(root, f.uri) for f in files]
                given = list(fileset.partition_columns) or [
                    (n, hive.infer_type([p[i][1] for p in found])) for i, (n, _) in enumerate(found[0])]
                extra = [pa.field(n, hive.arrow_type(t)) for n, t in given]
            return infer_schema(data, fileset.format, fileset.options, first.uri, extra)
    except SchemaError as e:
        raise SpecError("to.schema", str(e)) from e
    raise SpecError("to.schema", f"there is no table at {target.table}; give to.schema (columns and types) "
                                 "or set to.inferSchema: true to create it from the files")


def _run_tasks(spark: SparkSession, plan: LoadPlan, tasks: list[FileTask],
               groups: list[list[int]] | None = None) -> list[FileOutcome]:
    """One Spark task per group of file tasks (``ingest.plan.plan_load``; default: one each); each file
    task returns its outcome as one JSON string."""
    groups = groups if groups is not None else [[i] for i in range(len(tasks))]

    def work(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        workerheap.settle()
        for batch in batches:
            for g in batch.column(0).to_pylist():
                for i in groups[g]:
                    outcome = run_file(plan, tasks[i])
                    yield pa.RecordBatch.from_pydict({"outcome": [json.dumps(outcome.to_dict())]})

    df = spark.range(0, len(groups), 1, numPartitions=len(groups)).mapInArrow(work, "outcome string")
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


def _sweep(plan: LoadPlan, keep: Iterable[str] = ()) -> None:
    """Abort uploads left pending under this run's prefixes (tasks killed mid-write, lost task
    attempts), except the upload ids in ``keep``."""
    prefixes = [fmt.write_prefix(plan.table_uri, plan.write_id)]
    if plan.rejects_prefix:
        prefixes.append(plan.rejects_prefix)
    for prefix in prefixes:
        with contextlib.suppress(st.StorageError, OSError):
            uploadset.sweep(storage_for(prefix, plan.settings), prefix, lambda u: True, keep)


def split_loaded(files: list[st.ObjectInfo], snapshot: Snapshot | None
                 ) -> tuple[list[st.ObjectInfo], list[st.ObjectInfo]]:
    """(files to load, files the ledger says are loaded), in listing order: one ledger
    lookup per file, so a listing of 100,000 loaded files costs 100,000 lookups. The ledger
    shards of the listed files are read first, several at once (each once)."""
    if snapshot is None:
        return list(files), []
    snapshot.prefetch_ledger(o.uri for o in files)
    todo: list[st.ObjectInfo] = []
    already: list[st.ObjectInfo] = []
    for o in files:
        (already if snapshot.loaded(o.uri, o.etag, o.size) else todo).append(o)
    return todo, already


def run_load(spark: SparkSession, job: JobDocument, spec: CopyJobSpec | None = None,
             cancel: threading.Event | None = None, *, chunk_bytes: int = CHUNK_BYTES,
             **_: Any) -> dict[str, Any]:
    """Run the load ``job`` asks for; return the CopyResponse result (``rows`` or ``error``)."""
    started = time.monotonic()
    spec = spec or parse_copyjob(job.spec)
    if spec.source.kind == "query":  # INSERT INTO t SELECT …
        from lading_jobs.load.insert import run_insert

        return run_insert(spark, job, spec, cancel)
    fileset = spec.source.files
    table_uri = spec.target.table
    if fileset is None or table_uri is None:
        raise SpecError("from.files", "a load reads from.files into to.table")
    settings = _settings(spec)
    base: dict[str, Any] = {"runId": job.run_id, "destination": table_uri}
    table_storage = storage_for(table_uri, settings)
    manifest_uri = mf.manifest_uri(table_uri, spec.load.rejected_rows, job.run_id)
    rejects_prefix = mf.run_prefix(spec.load.rejected_rows, job.run_id)
    publishing = uploadset.UploadSet(storage_for(manifest_uri, settings),
                                     mf.intent_uri(table_uri, spec.load.rejected_rows, job.run_id), job.run_id,
                                     roots=(f"{fmt.table_root(table_uri)}{fmt.DATA_DIR}/",
                                            *([rejects_prefix] if rejects_prefix else [])))
    done = _recover(publishing, table_uri, table_storage, manifest_uri)
    if done is not None:  # an earlier attempt of this run finished: report it, load nothing twice
        return {**done, "durationSeconds": round(time.monotonic() - started, 3)}
    files = list_files(fileset, settings)
    if not files:
        where = (fileset.uri or "") + (f" matching {fileset.pattern!r}" if fileset.pattern else "")
        return {**base, "error": f"from.files: no files found at {where}; check the prefix and pattern",
                "files": 0, "rows": None}
    log = TableLog.open(table_uri, table_storage)
    snapshot = log.snapshot() if log is not None else None
    if snapshot is not None and snapshot.meta.iceberg_mirror:
        mirror.warm(table_uri, table_storage)  # read the mirror's state while the parts are written
    schema = _target_schema(log, spec, files, settings)
    todo, already = split_loaded(files, None if spec.load.force else snapshot)
    plan = LoadPlan(
        table_uri=table_uri, schema=schema,
        table_id=snapshot.table_id if snapshot is not None else uuid.uuid4().hex,
        envelope=snapshot.envelope if snapshot is not None else spec.target.envelope,
        sort_by=snapshot.sort_by if snapshot is not None else spec.target.sort_by,
        key_columns=snapshot.key_columns if snapshot is not None else spec.target.key_columns,
        time=writer.default_time(snapshot) if snapshot is not None else int(time.time() * 1000),
        write_id=fmt.new_write_id(), format=fileset.format, options=fileset.options, load=spec.load,
        rejects_prefix=rejects_prefix, settings=settings,
        hive_root=file_sets.hive_root(fileset) if fileset.partitioning == "hive" else None)
    tasks, groups = plan_load(todo, fileset.format, settings, spark.sparkContext.defaultParallelism, chunk_bytes)
    tplan = None
    if spec.transform is not None and fileset.partitioning == "hive":
        raise SpecError("transform", "a transform does not read Hive-partitioned files yet: load without the "
                        "transform, or read the files without partitioning (their col=value/ directories are "
                        "then no columns)")
    if spec.transform is not None and tasks:
        tplan = tf.plan_transform(spec.transform, schema,
                                  tf.source_schema(spec.transform, fileset.format, fileset.options, todo[0], settings),
                                  dec.BINARY_TEXT.get(fileset.format))
    original = schema
    if spec.target.schema_evolution == "addColumns" and tplan is None:
        plan = dataclasses.replace(plan, discover=True)
    outcomes: list[FileOutcome] = []
    sc = spark.sparkContext
    sc.setJobGroup(job.run_id, f"lading load into {table_uri}", interruptOnCancel=True)
    try:
        if tplan is not None:
            outcomes = tf.run_tasks(spark, plan, tplan, tasks)
        elif tasks:
            outcomes = _run_tasks(spark, plan, tasks, groups)
        if plan.discover and outcomes:
            schema, outcomes = _evolve(spark, plan, tasks, outcomes, spec, snapshot, cancel)
            plan = dataclasses.replace(plan, schema=schema)
        if cancel is not None and cancel.is_set():
            raise Cancelled()  # the last point where a cancel undoes the run; publishing runs to its end
    except BaseException:
        wait_for_tasks(sc, job.run_id)  # killed tasks' workers may still be starting uploads
        _abort_all(outcomes, plan, rejects_too=True)
        _sweep(plan)
        raise
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    decision = decide(outcomes, spec.load)
    committing = bool(decision.ok and not spec.load.validate_only and tasks)
    rows = sum(outcomes[i].rows_good for i in decision.loaded) if decision.ok else 0
    keep = decision.loaded_set if committing else frozenset()
    writer.abort_parts(plan.table_uri, [w for o in outcomes if o.index not in keep for w in _written(o)],
                       storage=table_storage)
    written = [w for o in outcomes if o.index in keep for w in _written(o)]
    rejects = [st.PendingUpload.from_dict(u) for o in outcomes for u in o.rejects_uploads]
    manifest = mf.build_manifest(
        run_id=job.run_id, table_uri=table_uri, fmt_name=fileset.format, on_error=spec.load.on_error,
        validate_only=spec.load.validate_only, outcomes=outcomes, already_loaded=already, decision=decision,
        committed=committing, table_version=snapshot.version if snapshot is not None else None,
        rows=rows if (committing or spec.load.validate_only) else 0, error=decision.error,
        rejected_rows=plan.rejects_prefix)
    added = [c.name for c in schema.columns if original.by_id(c.id) is None]
    if added:
        manifest["columnsAdded"] = added
    nonce = new_nonce()
    with critical.commit_section():
        publishing.begin([*rejects, *(st.PendingUpload.from_dict(w.upload) for w in written)],
                         {"committing": committing, "nonce": nonce,
                          "base": snapshot.version if snapshot is not None else -1, "manifest": manifest})
        try:
            publishing.complete_all(rejects)  # rejected rows are durable before the rows commit
            if committing:
                manifest["tableVersion"] = _commit(spec, plan, log, schema, outcomes, decision, job.run_id,
                                                   written, nonce, evolved=bool(added))
        except CommitStateUnknown as e:
            raise CommitStateUnknown(f"{e}; run the load again with the same runId ({job.run_id}): it finds "
                                     "out which and finishes or undoes it", e.nonce) from e
        except BaseException:
            publishing.abort_all()
            _sweep(plan)
            raise
        _publish_manifest(publishing, manifest_uri, manifest)
    _sweep(plan, keep={u.upload_id for u in rejects} | {w.upload["upload_id"] for w in written})
    out = {**mf.result(manifest, manifest_uri), "durationSeconds": round(time.monotonic() - started, 3)}
    iceberg = mirror.current_metadata(plan.table_uri, table_storage) if committing else None
    return {**out, "icebergMetadata": iceberg} if iceberg else out


def _evolve(spark: SparkSession, plan: LoadPlan, tasks: list[FileTask], outcomes: list[FileOutcome],
            spec: CopyJobSpec, snapshot: Snapshot | None, cancel: threading.Event | None
            ) -> tuple[TableSchema, list[FileOutcome]]:
    """``schemaEvolution: addColumns``: the schema with the columns the loading files carry, and
    the outcomes once every file that carried one was loaded again with it (its first parts and
    rejected rows discarded; the other files' parts stay, reading NULL in the new columns). Files
    that do not load (a file error; any error under skipFile) add nothing."""
    def found(o: FileOutcome) -> list[evolve.Found]:
        loads = not o.file_error and (o.clean or spec.load.on_error == "continue")
        return [evolve.Found.from_list(f) for f in o.new_columns] if loads else []

    def redo(schema: TableSchema, stale: list[FileOutcome], round_: int) -> list[FileOutcome]:
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        files = {o.index for o in stale}
        again = [dataclasses.replace(t, index=t.index + round_ * len(tasks), file_index=t.file)
                 for t in tasks if t.file in files]  # fresh part and rejected-rows names
        got = {o.index: o for o in _run_tasks(spark, dataclasses.replace(plan, schema=schema), again)}
        return [got[o.index] for o in stale]

    envelope, keys = ((snapshot.envelope, snapshot.key_columns) if snapshot is not None
                      else (spec.target.envelope, spec.target.key_columns))
    return evolve.settle(plan.schema, outcomes, found, lambda stale: _abort_all(stale, plan, rejects_too=True),
                         redo, envelope=envelope, key_columns=keys)


def _publish_manifest(publishing: uploadset.UploadSet, uri: str, manifest: dict[str, Any]) -> None:
    """Write the manifest and drop the intent. If the manifest cannot be written, the intent stays
    and the error says the rows are committed (when they are): a rerun finishes the run."""
    try:
        publishing.storage.put(uri, json.dumps(manifest, indent=1).encode())
    except BaseException as e:
        if manifest["committed"]:
            raise st.StorageError(f"the rows are committed (table version {manifest['tableVersion']}) but "
                                  f"writing the manifest {uri} failed ({e}); run the load again with the same "
                                  f"runId ({manifest['runId']}) to write it") from e
        raise
    publishing.finish()


def _recover(publishing: uploadset.UploadSet, table_uri: str, table_storage: st.Storage,
             manifest_uri: str) -> dict[str, Any] | None:
    """What an earlier attempt of this run left: its result if it finished or committed (rolled
    forward: the manifest written, the intent dropped), else None once it is undone."""
    intent = publishing.read_intent()
    if intent is None:
        raw = _read_manifest(publishing.storage, manifest_uri)
        if raw is not None and raw.get("runId") == publishing.run_id and raw.get("committed"):
            return mf.result(raw, manifest_uri)
        return None
    manifest = dict(intent.data["manifest"])
    with critical.commit_section():
        if intent.data.get("committing"):
            landed = find_commit(table_uri, table_storage, intent.data["nonce"], int(intent.data["base"]))
            if landed is not None:
                manifest["tableVersion"] = landed.version
                _publish_manifest(publishing, manifest_uri, manifest)
                return mf.result(manifest, manifest_uri)
        publishing.roll_back(intent)
    return None


def _read_manifest(storage: st.Storage, uri: str) -> dict[str, Any] | None:
    if storage.head(uri) is None:
        return None
    return json.loads(storage.read(uri))  # type: ignore[no-any-return]


def _commit(spec: CopyJobSpec, plan: LoadPlan, log: TableLog | None, schema: TableSchema,
            outcomes: list[FileOutcome], decision: Decision, run_id: str, written: list[writer.WrittenPart],
            nonce: str, evolved: bool = False) -> int:
    """Complete the parts of the files that load and commit them with their ledger in one entry
    (creating the table in that same commit when there is none; with the evolved ``schema`` when
    ``evolved``); the version.

    ``log`` stays at the version the load planned against (a separate handle checks the table's
    identity): the commit's rebase compares with that version, so a file or a schema change that
    another writer committed meanwhile is a conflict, not silently overwritten."""
    storage = storage_for(plan.table_uri, plan.settings)
    current = TableLog.open(plan.table_uri, storage) if log is not None else None
    if log is not None and (current is None or current.snapshot().table_id != plan.table_id):
        raise TableError(f"to.table: the table at {plan.table_uri} was created or replaced by another "
                         "writer during the load; nothing was loaded, run the load again")
    keep = decision.loaded_set
    ledger = {o.uri: LedgerEntry(o.etag, o.size, o.rows_good) for o in outcomes if o.index in keep}
    create = None if log is not None else writer.NewTable(schema, spec.target.envelope, spec.target.key_columns,
                                                          spec.target.sort_by, plan.table_id,
                                                          iceberg_mirror=spec.target.iceberg_mirror is not False)
    if current is not None and spec.target.iceberg_mirror is not None:
        mirror_switch.switch(current, spec.target.iceberg_mirror)  # to.icebergMirror: its own commit, first
    try:
        snap = writer.commit_parts(plan.table_uri, written, log=log, operation="load", ledger=ledger,
                                   info={"runId": run_id, "files": len(ledger)}, storage=storage, nonce=nonce,
                                   create=create, schema=schema if evolved and create is None else None)
    except TableExistsError as e:
        raise TableError(f"to.table: a table was created at {plan.table_uri} by another writer during the load; "
                         "nothing was loaded, run the load again (it loads into that table)") from e
    return snap.version
