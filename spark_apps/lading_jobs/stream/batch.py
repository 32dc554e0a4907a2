"""One micro-batch, start to commit, for either source.

  snapshot of the table (the position it holds) ─► plan: ranges or files
     ─► Spark tasks: read, decode, cast, pending parts + pending dead-letter file
        (with ``spec.transform``: read, decode, ingest's transform stage, the same outputs)
     ─► schemaEvolution: addColumns and some task read fields the table lacks: evolve the
        schema, redo those tasks with it (the load's loop, lading_jobs.table.evolve.settle)
     ─► rejects > maxErrorNumber?  abort parts, keep the dead letters, TooManyErrors
     ─► complete dead letters ─► ONE commit: parts + new position (+ ledger for files)
        (+ the evolved schema)
     ─► group offsets (monitoring only)

The plan is made from one snapshot and the commit is validated against that same
snapshot, so a commit that moved this stream's entries meanwhile makes this one fail
(``ConflictError``): the driver stops if a newer driver claimed the stream (its epoch,
``job.Stream.claim``), else plans the batch again. A batch whose tasks fail, or that is cancelled before its commit, aborts
every pending upload it began; nothing of it becomes visible.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lading_jobs import storage as st
from lading_jobs import workerheap
from lading_jobs.ingest import transform as tf
from lading_jobs.ingest.policy import FileOutcome
from lading_jobs.ingest.stores import storage_for
from lading_jobs.ingest.task import FileTask, LoadPlan, is_unreadable, run_file, sort_rows
from lading_jobs.stream import kafka as kf
from lading_jobs.stream import memory
from lading_jobs.stream import positions as pos
from lading_jobs.stream.records import decode_messages, first_of_each, source_batches
from lading_jobs.table import evolve, writer
from lading_jobs.table import format as fmt
from lading_jobs.table.evolve import Found
from lading_jobs.table.log.commits import LedgerEntry, Snapshot, TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.copyjob import LoadOptions
from lading_spec.formats import FormatOptions

TASK_ROWS = 100_000
"""A partition range longer than this is read by several tasks."""
FIRST_ERRORS = 3


class TooManyErrors(RuntimeError):
    """More rejected rows than ``maxErrorNumber`` in one batch; nothing of it was committed."""


class DataLossError(RuntimeError):
    """Offsets to be read are gone from the broker and ``failOnDataLoss`` is true."""


class UnreadableFile(RuntimeError):
    """A file failed to be read in ``MAX_READ_ATTEMPTS`` batches in a row; nothing of the last one committed."""


@dataclass(frozen=True)
class Target:
    """The table side of every task (plain, picklable data)."""

    table_uri: str
    schema_json: str
    table_id: str
    envelope: str
    key_columns: tuple[str, ...]
    sort_by: tuple[str, ...]
    time: int
    write_id: str
    dead_letter: str | None  # this batch's dead-letter prefix
    settings: st.S3Settings
    discover: bool = False  # schemaEvolution: addColumns — tasks report fields the table lacks

    @property
    def schema(self) -> TableSchema:
        return TableSchema.from_json(self.schema_json)


@dataclass
class Outcome:
    """What one task did (JSON between task and driver)."""

    index: int
    where: str  # the range (topic/partition@a..b) or the file
    read: int = 0
    good: int = 0  # records loaded (an upsert range writes one row per key: maybe fewer)
    rejected: int = 0
    bytes: int = 0
    first_errors: list[dict[str, Any]] = field(default_factory=list)
    filtered: int = 0  # records a transform's WHERE removed
    parts: list[str] = field(default_factory=list)  # WrittenPart JSON
    dead_letters: list[dict[str, Any]] = field(default_factory=list)  # pending uploads
    file_error: str | None = None
    new_columns: list[list[str]] = field(default_factory=list)  # schemaEvolution: evolve.Found.to_list()
    unread: str | None = None  # the file could not be read (changed since listed, storage failed): why
    chunks: int = 0  # Kafka: chunks the range was read in (``kf.read_chunks``)
    peak_bytes: int = 0  # Kafka: the largest chunk's bytes of keys and values (``memory.chunk_bytes``)

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str) -> Outcome:
        return cls(**json.loads(text))

    @property
    def written(self) -> list[writer.WrittenPart]:
        return [writer.WrittenPart.from_json(p) for p in self.parts]


@dataclass
class Plan:
    """A batch about to run: what to read and the position to commit with it."""

    snapshot: Snapshot
    time: int
    progress: dict[str, Any]  # sourceProgress entries of the commit
    describe: str  # the batch's range, for messages
    ranges: list[pos.Range] = field(default_factory=list)  # Kafka
    files: list[st.ObjectInfo] = field(default_factory=list)  # files
    full: bool = False  # a limit cut it: more is waiting
    lag: dict[str, int] = field(default_factory=dict)
    pending_files: int | None = None
    rewritten: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # data loss skipped (failOnDataLoss: false)
    end: dict[str, Any] = field(default_factory=dict)  # the position after the batch, for progress
    schema: TableSchema | None = None  # the evolved schema the batch commits (schemaEvolution), if any
    listed_at: int = 0  # files: when the listing ran (ms), the time of the position's new mark
    unread: dict[str, str] = field(default_factory=dict)  # files it could not read (URI → why): not loaded

    @property
    def empty(self) -> bool:
        return not self.ranges and not self.files

    @property
    def moves(self) -> bool:
        """Whether committing it changes the source position."""
        return any(self.snapshot.source_progress.get(k) != v for k, v in self.progress.items()
                   if k.startswith((pos.KAFKA_PREFIX, pos.FILES_PREFIX)))


@dataclass
class Result:
    """A committed (or failed) batch, for progress and the per-batch line."""

    plan: Plan
    rows: int = 0
    read: int = 0
    bytes: int = 0
    rejected: int = 0
    filtered: int = 0
    version: int | None = None
    seconds: float = 0.0
    dead_letters: list[str] = field(default_factory=list)


def dead_letter_prefix(root: str | None, batch_id: str) -> str | None:
    return None if root is None else st.join(root, batch_id) + "/"


def write_dead_letter(storage: st.Storage, prefix: str, index: int, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Rejected records as a pending JSON-lines file (completed by the driver)."""
    uri = st.join(prefix, f"rejected-{index:05d}.jsonl")
    upload = storage.begin_upload(uri)
    try:
        body = "".join(json.dumps(e, ensure_ascii=False, default=str) + "\n" for e in entries)
        storage.upload_part(upload, body.encode())
    except BaseException:
        storage.abort_upload(upload)
        raise
    return upload.to_dict()


# -- tasks -----------------------------------------------------------------------------

@dataclass(frozen=True)
class KafkaRead:
    """How tasks reach Kafka and decode (no credentials: executors read their own Secret mount)."""

    bootstrap: tuple[str, ...]
    consumer: tuple[tuple[str, str], ...]
    group: str
    value_format: str
    task_bytes: int = memory.DEFAULT_TASK_BYTES  # a task's byte budget (``stream.memory``)


def run_range(target: Target, source: KafkaRead, index: int, rng: pos.Range) -> Outcome:
    """One Spark task: read ``rng`` in chunks of an eighth of ``source.task_bytes``
    (``kf.read_chunks``, ``memory.chunk_bytes``), decode each and stream its rows into pending
    parts before reading the next; rejects go to a pending dead-letter file. The task loads the
    whole range or nothing (its parts are pending until the batch commits), so chunking changes
    its memory, never what it loads. An upsert range's later chunk holds a key's later messages:
    its rows come later in the task's parts, and the later row wins (``consolidate``: same
    time, greater part order or position)."""
    config = kf.consumer_config(source.bootstrap, dict(source.consumer), source.group)
    kf.check_broker_addresses(source.bootstrap)
    schema = target.schema
    chunk = memory.chunk_bytes(source.task_bytes)
    out = Outcome(index, str(rng))
    rejects: list[dict[str, Any]] = []
    found: list[Found] = []

    def tables() -> Iterator[pa.Table]:
        for msgs in kf.read_chunks(config, rng, chunk):
            rows = decode_messages(msgs, schema, source.value_format, target.envelope, target.key_columns,
                                   discover=str(rng) if target.discover else None)
            out.read += len(msgs)
            out.bytes += msgs.bytes
            out.chunks += 1
            out.peak_bytes = max(out.peak_bytes, msgs.bytes)
            rejects.extend(rows.rejects)
            found.extend(rows.found)
            table = rows.table
            del msgs, rows  # only the chunk's rows stay while the writer takes them
            if table.num_rows:
                yield sort_rows(table, target.sort_by, target.envelope, target.key_columns)
            del table

    storage = storage_for(target.table_uri, target.settings)
    written: list[writer.WrittenPart] = []
    try:
        written = writer.write_parts(
            target.table_uri, tables(), schema, write_id=target.write_id,
            task=index, logical_time=target.time, table_id=target.table_id, envelope=target.envelope,
            storage=storage, single_put=True, row_group_bytes=chunk)
        out.good, out.rejected = out.read - len(rejects), len(rejects)
        out.first_errors = rejects[:FIRST_ERRORS]
        out.new_columns = [f.to_list() for f in first_of_each(found)]
        if rejects and target.dead_letter:
            out.dead_letters = [write_dead_letter(storage_for(target.dead_letter, target.settings),
                                                  target.dead_letter, index, rejects)]
    except BaseException:
        writer.abort_parts(target.table_uri, written, storage=storage)
        raise
    out.parts = [w.to_json() for w in written]
    return out


def range_transformed(target: Target, index: int, rng: pos.Range, tplan: tf.TransformPlan,
                      batches: Iterator[pa.RecordBatch]) -> Outcome:
    """The finish step of a Kafka range under a transform (``source_batches`` was its decode step):
    good rows as pending parts, rejects (by offset) as a pending dead-letter file."""
    rows = tf.Rows(tplan, target.schema)
    storage = storage_for(target.table_uri, target.settings)
    written: list[writer.WrittenPart] = []
    try:
        written = writer.write_parts(
            target.table_uri,
            (sort_rows(t, target.sort_by, target.envelope, target.key_columns) for t in rows.tables(batches)),
            target.schema,
            write_id=target.write_id, task=index, logical_time=target.time, table_id=target.table_id,
            envelope=target.envelope, storage=storage, single_put=True)
        rejects = [{"topic": rng.topic, "partition": rng.partition, "offset": r.position, "column": r.column,
                    "reason": r.reason, "record": r.record} for r in rows.rejects]
        out = Outcome(index, str(rng), read=int(rows.summary.get("rowsRead", 0)), good=rows.rows_good,
                      rejected=len(rejects), bytes=int(rows.summary.get("bytes", 0)),
                      first_errors=rejects[:FIRST_ERRORS], filtered=rows.rows_filtered)
        if rejects and target.dead_letter:
            out.dead_letters = [write_dead_letter(storage_for(target.dead_letter, target.settings),
                                                  target.dead_letter, index, rejects)]
    except BaseException:
        writer.abort_parts(target.table_uri, written, storage=storage)
        raise
    out.parts = [w.to_json() for w in written]
    return out


def _load_plan(target: Target, source: tuple[str, FormatOptions]) -> LoadPlan:
    """A file task's plan: a load's, every error a rejected row (the batch's limit is maxErrorNumber)."""
    fmt_name, options = source
    return LoadPlan(table_uri=target.table_uri, schema=target.schema, table_id=target.table_id,
                    envelope=target.envelope, sort_by=target.sort_by, time=target.time, write_id=target.write_id,
                    format=fmt_name, options=options, load=LoadOptions(on_error="continue"),
                    rejects_prefix=target.dead_letter, settings=target.settings, discover=target.discover,
                    key_columns=target.key_columns)


def run_file_task(target: Target, source: tuple[str, FormatOptions], task: FileTask) -> Outcome:
    """One Spark task for a file: ingest's file task, as a load runs it (decode, cast, pending parts, rejects)."""
    return _file_outcome(task, run_file(_load_plan(target, source), task))


def _file_outcome(task: FileTask, o: FileOutcome) -> Outcome:
    if is_unreadable(o.file_error):  # no reject: the file is listed and read again (``drop_unread``)
        return Outcome(task.index, task.uri, bytes=o.size, parts=o.parts, dead_letters=o.rejects_uploads,
                       first_errors=[{"file": o.uri, "reason": o.file_error}], unread=o.file_error)
    firsts = [{"file": e.get("file"), "line" if o.unit == "line" else "row": e.get(o.unit),
               "column": e.get("column"), "reason": e.get("reason"), "record": e.get("record")}
              for e in o.errors[:FIRST_ERRORS]]
    if o.file_error:
        firsts.insert(0, {"file": o.uri, "reason": o.file_error})
    return Outcome(task.index, task.uri, read=o.rows_read, good=o.rows_good, rejected=o.error_count,
                   bytes=o.size, first_errors=firsts, filtered=o.rows_filtered, parts=o.parts,
                   dead_letters=o.rejects_uploads, file_error=o.file_error,
                   new_columns=o.new_columns)


def _transform_stage(spark: Any, target: Target, source: Any, items: list[Any], kind: str,
                     tplan: tf.TransformPlan) -> list[str]:
    """The batch through ingest's transform stage (``ingest.transform.run_stage``): the load's
    decode and finish for files, ``source_batches`` and ``range_transformed`` for Kafka ranges."""
    if kind == "kafka":
        def decode(i: int) -> Iterator[pa.RecordBatch]:
            config = kf.consumer_config(source.bootstrap, dict(source.consumer), source.group)
            kf.check_broker_addresses(source.bootstrap)
            return source_batches(kf.read_chunks(config, items[i], memory.chunk_bytes(source.task_bytes)),
                                  source.value_format, tplan.source)

        def finish(i: int, batches: Iterator[pa.RecordBatch]) -> str:
            return range_transformed(target, i, items[i], tplan, batches).to_json()
    else:
        plan = _load_plan(target, source)

        def decode(i: int) -> Iterator[pa.RecordBatch]:
            return tf.decode_task(plan, tplan.source, items[i])

        def finish(i: int, batches: Iterator[pa.RecordBatch]) -> str:
            return _file_outcome(items[i], tf.write_task(plan, tplan, items[i], batches)).to_json()

    return tf.run_stage(spark, tplan, target.schema, len(items), decode, finish,
                        f"lading stream with a transform into {target.table_uri} ({len(items)} tasks)")


def run_tasks(spark: Any, target: Target, source: Any, items: list[Any], kind: str,
              tplan: tf.TransformPlan | None = None, which: list[int] | None = None,
              rename: int = 0) -> list[Outcome]:
    """One Spark task per item (a range or a file task); outcomes in item order. With ``tplan``
    the tasks are ingest's transform stage (the same stage a CopyJob load runs).

    ``which``: only these items (a redo), their parts and dead letters named as task
    ``i + rename`` so no name of an earlier round is taken again; outcomes keep index ``i``.
    On failure (or cancellation) every pending upload under the batch's write id
    and dead-letter prefix is aborted before the error propagates."""
    chosen = list(range(len(items))) if which is None else list(which)

    def work(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        workerheap.settle()
        for batch in batches:
            for k in batch.column(0).to_pylist():
                i = chosen[k]
                if kind == "kafka":
                    outcome = run_range(target, source, i + rename, items[i])
                else:
                    task = items[i] if not rename else dataclasses.replace(
                        items[i], index=items[i].index + rename, file_index=items[i].file)
                    outcome = run_file_task(target, source, task)
                outcome.index = i
                yield pa.RecordBatch.from_pydict({"outcome": [outcome.to_json()]})

    sc = spark.sparkContext
    previous = sc.getLocalProperty("spark.jobGroup.id")
    sc.setLocalProperty("spark.jobGroup.id", target.write_id)
    sc.setJobDescription(f"lading stream into {target.table_uri} ({len(items)} tasks)")
    try:
        if tplan is None:
            df = spark.range(0, len(chosen), 1, numPartitions=max(1, len(chosen))).mapInArrow(work, "outcome string")
            texts = [r.outcome for r in df.collect()]
        else:
            texts = _transform_stage(spark, target, source, items, kind, tplan)
    except BaseException:
        writer._wait_for_tasks(sc, target.write_id)  # tasks being killed may still begin uploads
        discard_write(target)
        raise
    finally:
        sc.setLocalProperty("spark.jobGroup.id", previous)
    outcomes = [Outcome.from_json(t) for t in texts]
    return sorted(outcomes, key=lambda o: o.index)


def discard_write(target: Target) -> None:
    """Abort every pending upload of the batch's write id and dead-letter prefix, and delete the
    parts its tasks sent whole (one PUT): this write id never commits."""
    prefix = fmt.write_prefix(target.table_uri, target.write_id)
    sweep(target.table_uri, prefix, target.dead_letter, target.settings)
    storage = storage_for(prefix, target.settings)
    with contextlib.suppress(st.StorageError, OSError):
        storage.delete([o.uri for o in storage.list_objects(prefix)])


def run_evolving(spark: Any, target: Target, source: Any, items: list[Any], kind: str,
                 run: Callable[..., list[Outcome]] = run_tasks, tplan: tf.TransformPlan | None = None
                 ) -> tuple[list[Outcome], TableSchema | None]:
    """``run_tasks``, then (``target.discover``) the load's schema-evolution loop: items whose
    input carried fields the table lacks are run again with the evolved schema. The outcomes and
    the schema the batch commits (None: unchanged). If evolving fails (two inputs disagree on a
    new column's type), everything the batch wrote is discarded before the error propagates.
    A transform (``tplan``) names the table's columns itself: nothing is discovered."""
    outcomes = run(spark, target, source, items, kind, tplan)
    if tplan is not None or not target.discover or not any(o.new_columns for o in outcomes):
        return outcomes, None

    def found(o: Outcome) -> list[evolve.Found]:
        return [] if o.file_error or o.unread else [evolve.Found.from_list(f) for f in o.new_columns]

    def redo(schema: TableSchema, stale: list[Outcome], round_: int) -> list[Outcome]:
        again = dataclasses.replace(target, schema_json=schema.to_json())
        return run(spark, again, source, items, kind, which=[o.index for o in stale], rename=round_ * len(items))

    try:
        schema, outcomes = evolve.settle(target.schema, outcomes, found,
                                         lambda stale: abort(stale, target, dead_letters_too=True), redo,
                                         envelope=target.envelope, key_columns=target.key_columns)
    except BaseException:
        abort(outcomes, target, dead_letters_too=True)
        discard_write(target)
        raise
    return outcomes, (schema if schema.last_column_id != target.schema.last_column_id else None)


def drop_unread(outcomes: list[Outcome], target: Target) -> tuple[list[Outcome], dict[str, str]]:
    """The outcomes of the files that were read, and the files that could not be (URI → why).

    A file that changed after it was listed, or that storage failed to return, is no
    reject and must not enter the ledger: the next listing finds it again (with its new
    ETag) and a later batch loads its rows, once. Whatever its tasks wrote (a big Parquet
    file's other row groups) is aborted here, so none of it commits with this batch."""
    unread = {o.where: o.unread for o in outcomes if o.unread}
    if not unread:
        return outcomes, {}
    abort([o for o in outcomes if o.where in unread], target, dead_letters_too=True)
    return [o for o in outcomes if o.where not in unread], unread


def sweep(table_uri: str, write_prefix: str, dead_letter: str | None, settings: st.S3Settings,
          own: Callable[[str], bool] | None = None) -> None:
    """Abort every pending upload whose URI starts with ``write_prefix`` (a write id, or every write
    id of a stream) or lies under ``dead_letter``: a killed task's or a killed driver's leftovers.
    ``own``: of those under ``dead_letter``, only the ones it accepts (the driver's start-up sweep
    of a shared dead-letter root: ``own_dead_letter``)."""
    for prefix, keep in ((write_prefix, None), (dead_letter, own)):
        if not prefix:
            continue
        storage = storage_for(prefix, settings)
        listing = prefix if prefix.endswith("/") else prefix.rsplit("/", 1)[0] + "/"
        with contextlib.suppress(st.StorageError, OSError):
            for upload in storage.list_pending_uploads(listing):
                if (upload.uri.startswith(prefix) or upload.uri.rstrip("/").startswith(prefix.rstrip("/"))) \
                        and (keep is None or keep(upload.uri)):
                    with contextlib.suppress(st.StorageError, OSError):
                        storage.abort_upload(upload)


def abort(outcomes: list[Outcome], target: Target, dead_letters_too: bool) -> None:
    storage = storage_for(target.table_uri, target.settings)
    writer.abort_parts(target.table_uri, [w for o in outcomes for w in o.written], storage=storage)
    for o in outcomes if dead_letters_too else ():
        for upload in o.dead_letters:
            with contextlib.suppress(st.StorageError, OSError):
                storage_for(upload["uri"], target.settings).abort_upload(st.PendingUpload.from_dict(upload))


def complete_dead_letters(outcomes: list[Outcome], settings: st.S3Settings) -> list[str]:
    done = []
    for o in outcomes:
        for upload in o.dead_letters:
            storage_for(upload["uri"], settings).complete_upload(st.PendingUpload.from_dict(upload))
            done.append(upload["uri"])
    return done


def too_many(outcomes: list[Outcome], plan: Plan, limit: int, dead_letter: list[str]) -> str:
    """The TooManyErrors message: the batch's range, the count, the first errors, where they went."""
    errors = sum(o.rejected for o in outcomes)
    firsts = [e for o in outcomes for e in o.first_errors][:FIRST_ERRORS]
    shown = "; ".join(_describe(e) for e in firsts)
    where = f"; rejected records in {dead_letter[0].rsplit('/', 1)[0]}/" if dead_letter else ""
    return (f"batch {plan.describe}: {errors} rejected rows exceed maxErrorNumber {limit}; nothing of the "
            f"batch was committed and the stream stopped. First: {shown}{where}. Fix the producer or raise "
            "maxErrorNumber (a new spec resumes from the same position)")


def _describe(e: dict[str, Any]) -> str:
    if "topic" in e:
        at = f"{e['topic']}/{e['partition']}@{e['offset']}"
    else:
        at = str(e.get("file")) + (f" line {e['line']}" if e.get("line") else f" row {e['row']}" if e.get("row")
                                   else "")
    column = f" column {e['column']}" if e.get("column") else ""
    return f"{at}{column}: {e.get('reason')}"


def commit(log: TableLog, plan: Plan, outcomes: list[Outcome], target: Target, info: dict[str, Any]) -> Snapshot:
    """The batch's ONE commit: parts, position, ledger (files), and ``upper`` past the batch's time."""
    written = [w for o in outcomes for w in o.written]
    rows: dict[str, int] = {}
    for o in outcomes:  # a big Parquet file may be read by several tasks
        rows[o.where] = rows.get(o.where, 0) + o.good
    ledger = {f.uri: LedgerEntry(f.etag, f.size, rows.get(f.uri, 0)) for f in plan.files}
    return writer.commit_parts(target.table_uri, written, log=log, operation="stream", ledger=ledger,
                               source_progress=plan.progress, upper=plan.time + 1, info=info, schema=plan.schema)


def new_batch_id(plan_version: int, tag: str) -> str:
    """A batch's dead-letter directory name: ``<UTC time>-v<version>-s<stream tag>-<id>``; the
    tag (``job.stream_tag``) lets a starting driver tell its own leftovers (``own_dead_letter``)."""
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-v{plan_version + 1}-s{tag}-{uuid.uuid4().hex[:8]}"


def own_dead_letter(uri: str, root: str, tag: str) -> bool:
    """Whether ``uri`` lies in a batch directory of the stream ``tag`` directly under the
    dead-letter ``root`` (``new_batch_id``): the only dead letters its start-up sweep may abort.
    Another StreamCopy's, or a CopyJob's ``rejectedRows``, sharing the prefix are not its own."""
    base = root if root.endswith("/") else root + "/"
    return uri.startswith(base) and re.match(
        rf"\d{{8}}T\d{{6}}Z-v\d+-s{re.escape(tag)}-[0-9a-f]{{8}}/", uri[len(base):]) is not None
