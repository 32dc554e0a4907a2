"""``run_stream``: the StreamCopy driver's loop, until it is stopped.

    start ─► abort what a killed predecessor left pending ─► serve progress
      ┌─► wait until maxBatchInterval since the last cut (sooner when Kafka's backlog
      │   already fills maxBatchRows/maxBatchBytes, or at once after a full batch)
      │   ─► one batch (``batch``: plan from the table → tasks → ONE commit)
      └── cancelled (SIGTERM, Ctrl-C, suspend)? ─► stop: the batch in flight is
          dropped (its uploads aborted) unless its tasks are done, then it commits

Every interval commits, even with no new data: the commit moves the table's
``upper`` frontier, so readers and compactions know that time has passed. The
stream stops with an error result when a batch has more rejects than
``maxErrorNumber`` (``TooManyErrors``, nothing of the batch committed), when
offsets are lost and ``failOnDataLoss`` is true (``DataLoss``), when a newer driver
of the same StreamCopy claimed the table (``Superseded``: each driver claims an epoch
at start and every batch commit carries it; a commit lost to any other writer is
re-planned instead, ``Replan``), or
when a file failed to be read in several batches in a row (``FileUnreadable``; a
file that fails once is simply listed and read again by a later batch), or when the
spec cannot run here (``InvalidSpec``: e.g. no ``target.schema`` for a new table; a rerun
would fail the same way, so it is a deliberate stop).
``once`` processes what is there and returns ``{"rows": ...}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from lading_jobs import storage as st
from lading_jobs.ingest import decode as dec
from lading_jobs.ingest import transform as tf
from lading_jobs.ingest.infer import infer_schema
from lading_jobs.ingest.stores import storage_for
from lading_jobs.stream import batch as bt
from lading_jobs.stream import kafka as kf
from lading_jobs.stream import memory, records
from lading_jobs.stream import positions as pos
from lading_jobs.stream.progress import Progress, ProgressServer, iso
from lading_jobs.stream.sources import FilesSource, KafkaSource, now_ms
from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg import publisher as mirror_publisher
from lading_jobs.table.iceberg import switch as mirror_switch
from lading_jobs.table.log.commits import Change, ConflictError, Snapshot, TableError, TableLog
from lading_jobs.table.schema import SchemaError, TableSchema
from lading_spec.errors import SpecError
from lading_spec.formats import parse_options
from lading_spec.job import JobDocument
from lading_spec.streamcopy import FilesSource as FilesSpec
from lading_spec.streamcopy import KafkaSource as KafkaSpec
from lading_spec.streamcopy import StreamCopySpec, parse_streamcopy
from lading_spec.streamprogress import PROGRESS_PORT_ENV

STREAM_PREFIX = "stream:"
"""``sourceProgress`` key of a stream's own counters (rows, batches, last batch time, epoch)."""
CLAIM_ATTEMPTS = 50
"""Lost races a starting driver's epoch claim may retry (each one re-reads the table)."""
LAG_SECONDS = 5.0
"""How often a Kafka stream's lag is refreshed from the broker's end offsets, while a batch runs and while idle."""
POLL_SECONDS = 1.0
"""How often a waiting Kafka stream with a row or byte limit checks whether its backlog fills one."""


class Cancelled(Exception):
    """The stream was stopped while a batch ran; the batch was dropped."""


class Replan(Exception):
    """The batch's commit lost to a commit that does not fence this driver (a load ledgering a
    planned file, a compaction's ``since``, a schema change, another stream on the same source):
    nothing of the batch was committed; the next batch plans again from the table."""


class Stopped(Exception):
    """The stream stopped on an error the operator shows (``reason``)."""

    def __init__(self, reason: str, message: str, batch: str | None = None) -> None:
        super().__init__(message)
        self.reason, self.batch = reason, batch


def stream_tag(doc: JobDocument, table_uri: str) -> str:
    """A short stable name for this StreamCopy on this table: its write ids start with it."""
    return hashlib.sha256(f"{doc.namespace}/{doc.name}|{table_uri}".encode()).hexdigest()[:12]


def counters_key(doc: JobDocument) -> str:
    return f"{STREAM_PREFIX}{doc.namespace}/{doc.name}"


def epoch_of(snapshot: Snapshot, key: str) -> int:
    """The newest driver epoch claimed in the table for the stream whose counters are at ``key``
    (0: none yet, a table written before epochs)."""
    epoch = (snapshot.source_progress.get(key) or {}).get("epoch")
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0


def after_conflict(mine: int, table_epoch: int) -> str:
    """What a driver of epoch ``mine`` does when its batch commit lost a race, the table now
    holding ``table_epoch``: ``"stop"`` when a newer driver claimed the stream (the newest
    wins, as Kafka Connect's task generations), else ``"replan"``: any other commit (a load's
    ledger, ``since``, a schema change, another stream's positions) is planned around."""
    return "stop" if table_epoch > mine else "replan"


def _group(spec: KafkaSpec, doc: JobDocument) -> str:
    return spec.consumer.get("group.id") or f"lading.{doc.namespace}.{doc.name}"


def _new_table_schema(spec: StreamCopySpec, first: st.ObjectInfo | None, settings: st.S3Settings) -> TableSchema:
    try:
        if spec.target.schema:
            return TableSchema.from_spec(spec.target.schema)
        if spec.transform is not None:
            raise SpecError("target.schema", f"there is no table at {spec.target.table}; a transform computes the "
                                             "table's columns, so give target.schema (their names and types) to "
                                             "create it")
        if isinstance(spec.source, KafkaSpec) and spec.source.value_format == "raw":
            return TableSchema.of(list(kf.RAW_COLUMNS))
        if isinstance(spec.source, FilesSpec) and first is not None:
            data = storage_for(first.uri, settings).read(first.uri)
            options = spec.source.options or parse_options(spec.source.format, None, "source.files.options")
            return infer_schema(data, spec.source.format, options, first.uri)
    except SchemaError as e:
        raise SpecError("target.schema", str(e)) from e
    raise SpecError("target.schema", f"there is no table at {spec.target.table}; give target.schema (the columns "
                                     "and types of the rows) so the stream can create it")


class Stream:
    """One StreamCopy's driver state between batches."""

    def __init__(self, spark: Any, doc: JobDocument, spec: StreamCopySpec, progress: Progress) -> None:
        self.spark, self.doc, self.spec, self.progress = spark, doc, spec, progress
        self.settings = st.S3Settings.from_env(spec.connection.endpoint, spec.connection.region)
        self.table_uri = fmt.table_root(spec.target.table)
        self.storage = storage_for(self.table_uri, self.settings)
        self.tag = stream_tag(doc, self.table_uri)
        self.key = counters_key(doc)
        self.source: KafkaSource | FilesSource = (
            KafkaSource(spec.source, _group(spec.source, doc), memory.task_bytes_of(spark))
            if isinstance(spec.source, KafkaSpec)
            else FilesSource(spec.source, self.settings))
        self.log = TableLog.open(self.table_uri, self.storage)
        self.rows_run = 0
        self.filtered_run = 0
        self.position: dict[str, int] = {}
        self.committed: Snapshot | None = None  # files: the table as last read (its ledger), for the lag
        self.epoch: int | None = None  # claimed in the table (``claim``) before the first batch

    def write_prefix(self) -> str:
        return f"{self.table_uri}{fmt.DATA_DIR}/w-s{self.tag}-"

    def sweep(self) -> None:
        """Abort uploads a killed predecessor left pending (never completed parts: those may be
        another live driver's, about to commit; unreferenced parts are a vacuum's to remove). Under
        ``deadLetter``, only this stream's own batch directories (another StreamCopy or a CopyJob
        may share the prefix)."""
        root = self.spec.dead_letter
        bt.sweep(self.table_uri, self.write_prefix(), root, self.settings,
                 own=None if root is None else lambda uri: bt.own_dead_letter(uri, root, self.tag))

    def close(self) -> None:
        self.source.close()

    def claim(self) -> int:
        """Claim the next driver epoch for this stream in the table (a conditional commit of
        this stream's counters, as every batch commit): every later batch commit carries it, and
        a driver whose epoch is older than the table's is refused and stops (``Superseded``).
        A claim that loses a race to another commit reads the table again and claims anew."""
        assert self.log is not None
        if self.spec.target.iceberg_mirror is not None:  # target.icebergMirror: its own commit, before any batch
            mirror_switch.switch(self.log, self.spec.target.iceberg_mirror)
        for _ in range(CLAIM_ATTEMPTS):
            snap = self.log.snapshot()
            epoch = epoch_of(snap, self.key) + 1
            counters = {**(snap.source_progress.get(self.key) or {}), "epoch": epoch}
            try:
                self.log.commit(Change(operation="stream-claim", source_progress={self.key: counters},
                                       info={"runId": self.doc.run_id, "epoch": epoch,
                                             "stream": f"{self.doc.namespace}/{self.doc.name}"}))
            except ConflictError:
                continue
            self.epoch = epoch
            self.progress.update(epoch=epoch)
            return epoch
        raise TableError(f"could not claim a driver epoch in {self.table_uri}: {CLAIM_ATTEMPTS} commits in a row "
                         "lost to other writers; the stream restarts and tries again")

    def _superseded(self, table_epoch: int, describe: str) -> Stopped:
        return Stopped("Superseded", f"a newer driver of this StreamCopy (epoch {table_epoch}) took over "
                                     f"{self.table_uri}; this driver (epoch {self.epoch}) stopped without "
                                     f"committing batch {describe}", describe)

    def resume(self) -> None:
        """Progress starts from what the table holds (counters and position), not from zero, and
        the lag from the broker's end offsets now (before the first batch commits)."""
        if self.log is None:
            with contextlib.suppress(kf.KafkaError, st.StorageError, OSError):
                self.refresh_lag()
            return
        snap = self.committed = self.log.snapshot()
        counters = snap.source_progress.get(self.key) or {}
        if isinstance(self.source, KafkaSource):
            committed = pos.committed_offsets(snap.source_progress, self.source.spec.topics)
            offsets: dict[str, int] = {f"{t}:{p}": o for t, ps in sorted(committed.items()) for p, o in sorted(ps.items())}
            self.position = dict(offsets)
        else:
            offsets = {"files": self.source.progress_of(snap).files}
        last = counters.get("lastBatchTime")
        self.progress.update(rowsTotal=int(counters.get("rowsTotal", 0)), batches=int(counters.get("batches", 0)),
                             tableVersion=snap.version, upper=snap.upper, offsets=offsets,
                             lastBatch={"time": iso(last)} if isinstance(last, int) else None)
        with contextlib.suppress(kf.KafkaError, st.StorageError, OSError):  # the first plan reports them
            self.refresh_lag()

    def refresh_lag(self, consumer: Any = None, storage: st.Storage | None = None) -> None:
        """Kafka: the lag is the broker's end offsets *now* minus the committed position (a topic
        not committed yet: where ``startingOffsets`` starts it), per partition and in total.
        Files: the visible objects a listing finds now that the table has not loaded.
        ``consumer``, ``storage``: another thread's own (the lag watcher's); default the planner's."""
        if isinstance(self.source, FilesSource):
            table = self.committed  # replaced whole when the table moves: an older count is not written
            pending, at_least = self.source.waiting(table, now_ms(), storage)
            if table is self.committed:
                self.progress.update(lag={"total": pending, "filesPending": pending, "atLeast": at_least})
            return
        spec = self.source.spec
        position = self.position  # replaced whole at each commit: a lag of an older one is not written
        marks = kf.watermarks(consumer if consumer is not None else self.source.consumer, spec.topics)
        committed: pos.Offsets = {}
        for key, offset in position.items():
            topic, _, p = key.rpartition(":")
            committed.setdefault(topic, {})[int(p)] = offset
        starts, _ = pos.resolve_starts(spec.topics, marks, committed, spec.starting_offsets)
        lag = pos.lag(starts, marks)
        if position is self.position:
            self.progress.update(lag={"total": sum(lag.values()), "partitions": lag})

    # -- planning ----------------------------------------------------------------------
    def _ensure_table(self, first: st.ObjectInfo | None) -> TableLog:
        if self.log is None:
            schema = _new_table_schema(self.spec, first, self.settings)
            t = self.spec.target
            self.log = TableLog.create(self.table_uri, schema, t.envelope, t.key_columns, t.sort_by,
                                       storage=self.storage, exist_ok=True,
                                       iceberg_mirror=t.iceberg_mirror is not False)
        return self.log

    def plan(self) -> bt.Plan | None:
        """The next batch, planned from the table's current state (None: no table and nothing to make one)."""
        now = now_ms()
        limits = self.spec.batching
        if isinstance(self.source, KafkaSource):
            log = self._ensure_table(None)
            if self.epoch is None:
                self.claim()
            snap = log.snapshot()
            return self.source.plan(snap, now, writer.default_time(snap), limits.max_batch_rows,
                                    limits.max_batch_bytes)
        current = self.log.snapshot() if self.log is not None else None
        self.committed = current
        choice = self.source.choose(current, now, limits.max_batch_bytes)
        if current is None:
            if not choice.batch:
                self.progress.update(lag={"total": choice.pending, "filesPending": choice.pending,
                                          "atLeast": choice.pending_at_least})
                return None
            current = self._ensure_table(choice.batch[0]).snapshot()
        if self.epoch is None:
            self.claim()
            assert self.log is not None
            current = self.committed = self.log.snapshot()
        plan = self.source.plan_files(current, choice, now, writer.default_time(current))
        plan.lag = {"total": choice.pending, "filesPending": choice.pending, "atLeast": choice.pending_at_least}
        return plan

    def backlog_full(self) -> bool:
        """Whether Kafka already holds a full batch past the committed position (limits only)."""
        b = self.spec.batching
        if not isinstance(self.source, KafkaSource) or (b.max_batch_rows is None and b.max_batch_bytes is None):
            return False
        marks = kf.watermarks(self.source.consumer, self.source.spec.topics)
        waiting = sum(max(0, wm.high - self.position.get(f"{t}:{p}", wm.high))
                      for t, parts in marks.items() for p, wm in parts.items())
        limit = min(x for x in (b.max_batch_rows, None if b.max_batch_bytes is None else
                                int(b.max_batch_bytes // (self.source.bytes_per_message or 1024)))
                    if x is not None)
        return waiting >= max(1, limit)

    # -- one batch ---------------------------------------------------------------------
    def transform_plan(self, plan: bt.Plan) -> tf.TransformPlan | None:
        """The batch's transform (``spec.transform``) against the table and the batch's source: a
        Kafka source's fixed view, a files batch's first file (``ingest.transform.source_schema``)."""
        transform = self.spec.transform
        if transform is None or plan.empty:
            return None
        snap = plan.snapshot
        try:
            if isinstance(self.source, KafkaSource):
                if snap.envelope != "append":
                    raise SpecError("transform", f"a transform on a Kafka source appends rows; the table "
                                                 f"{self.table_uri} is {snap.envelope} (drop the transform)")
                source = records.transform_source(self.source.spec.value_format, transform.fields, snap.schema)
            else:
                source = tf.source_schema(transform, self.source.spec.format, self.source.options, plan.files[0],
                                          self.settings)
                return tf.plan_transform(transform, snap.schema, source, dec.BINARY_TEXT.get(self.source.spec.format))
            return tf.plan_transform(transform, snap.schema, source)
        except SpecError as e:
            raise Stopped("InvalidTransform", f"batch {plan.describe}: {e}; nothing of the batch was committed",
                          plan.describe) from e

    def run_batch(self, plan: bt.Plan, cancel: threading.Event) -> bt.Result:
        started = time.monotonic()
        assert self.log is not None
        snap: Snapshot = plan.snapshot
        assert self.epoch is not None
        if epoch_of(snap, self.key) > self.epoch:
            raise self._superseded(epoch_of(snap, self.key), plan.describe)
        tplan = self.transform_plan(plan)
        counters = dict(snap.source_progress.get(self.key) or {})
        batch_id = bt.new_batch_id(snap.version, self.tag)
        target = bt.Target(
            table_uri=self.table_uri, schema_json=snap.schema.to_json(), table_id=snap.table_id,
            envelope=snap.envelope, key_columns=tuple(snap.key_columns), sort_by=tuple(snap.sort_by),
            time=plan.time, write_id=f"w-s{self.tag}-{uuid.uuid4().hex}",
            dead_letter=bt.dead_letter_prefix(self.spec.dead_letter, batch_id), settings=self.settings,
            discover=self.spec.target.schema_evolution == "addColumns")
        outcomes: list[bt.Outcome] = []
        try:
            if not plan.empty:
                outcomes = self.source.run(self.spark, target, plan, tplan)
            rejected = sum(o.rejected for o in outcomes)
            if rejected > self.spec.max_error_number:
                bt.abort(outcomes, target, dead_letters_too=False)
                letters = bt.complete_dead_letters(outcomes, self.settings)
                raise Stopped("TooManyErrors", bt.too_many(outcomes, plan, self.spec.max_error_number, letters),
                              plan.describe)
            letters = bt.complete_dead_letters(outcomes, self.settings)  # before the commit: never lost
        except SpecError as e:  # the transform's SQL: Spark cannot parse or resolve it
            bt.abort(outcomes, target, dead_letters_too=True)
            raise Stopped("InvalidTransform", f"batch {plan.describe}: {e}; nothing of the batch was committed",
                          plan.describe) from e
        except BaseException:
            bt.abort(outcomes, target, dead_letters_too=True)
            if cancel.is_set():
                raise Cancelled() from None
            raise
        rows = sum(o.good for o in outcomes)
        filtered = sum(o.filtered for o in outcomes)
        batches = int(counters.get("batches", 0)) + 1
        total = int(counters.get("rowsTotal", 0)) + rows
        plan.progress[self.key] = {"rowsTotal": total, "batches": batches, "lastBatchTime": now_ms(),
                                   "epoch": self.epoch}
        info = {"runId": self.doc.run_id, "stream": f"{self.doc.namespace}/{self.doc.name}",
                "batch": plan.describe, "rows": rows}
        try:
            new = bt.commit(self.log, plan, outcomes, target, info)
        except ConflictError as e:  # nothing of the batch committed (commit_parts cleaned its parts up)
            table_epoch = epoch_of(self.log.snapshot(), self.key)
            if after_conflict(self.epoch, table_epoch) == "stop":
                raise self._superseded(table_epoch, plan.describe) from e
            raise Replan(f"batch {plan.describe} was not committed: {e}; it is planned again") from e
        self.source.after_commit(plan)
        self.committed = new
        self.rows_run += rows
        self.filtered_run += filtered
        self.position = {k: v for k, v in plan.end.items() if isinstance(v, int)}
        result = bt.Result(plan, rows=rows, read=sum(o.read for o in outcomes), bytes=sum(o.bytes for o in outcomes),
                           rejected=sum(o.rejected for o in outcomes), filtered=filtered, version=new.version,
                           seconds=time.monotonic() - started, dead_letters=letters)
        self._report(result, total, batches, new)
        return result

    def _report(self, r: bt.Result, total: int, batches: int, snap: Snapshot) -> None:
        plan = r.plan
        offsets = dict(plan.end) if isinstance(self.source, KafkaSource) else {"files": int(plan.end["files"])}
        lag = None if isinstance(self.source, KafkaSource) else plan.lag  # Kafka: from the broker, below
        rewritten = self.source.rewritten_total if isinstance(self.source, FilesSource) else 0
        if isinstance(self.source, KafkaSource):  # null: the broker gives no ID, recreation is not provable
            self.progress.update(topicIds=dict(self.source.topic_ids))
        skipped = (self.progress.get("dataLossSkipped") or []) + plan.skipped
        if snap.meta.iceberg_mirror:  # what this process published last (the batch's own may still be on its
            # way: mirror_publisher publishes in the background; the stream's end flushes and reports the newest)
            meta = mirror.current_metadata(self.table_uri, self.storage)
            if meta is not None:
                self.progress.update(icebergMetadata=meta)
        self.progress.update(
            state="running", rowsTotal=total, batches=batches, tableVersion=snap.version, upper=snap.upper,
            lastBatch={"time": iso(), "rows": r.rows, "read": r.read, "bytes": r.bytes, "rejected": r.rejected,
                       **({"filtered": r.filtered} if self.spec.transform is not None else {}),
                       "durationSeconds": round(r.seconds, 3), "range": plan.describe, "end": plan.end},
            **({"lag": lag} if lag is not None else {}), offsets=offsets, rewrittenFiles=rewritten,
            dataLossSkipped=skipped[-20:],
            unreadFiles=[{"file": uri, "reason": why} for uri, why in sorted(plan.unread.items())][:20])
        if isinstance(self.source, KafkaSource):
            try:
                self.refresh_lag()
            except kf.KafkaError:  # the commit stands; the lag as of the plan until the next refresh
                self.progress.update(lag={"total": sum(plan.lag.values()), "partitions": plan.lag})
        for uri in plan.rewritten:
            print(f"lading: {uri} changed (new ETag) after it was loaded; it is not loaded again",
                  file=sys.stderr)
        for uri, why in sorted(plan.unread.items()):
            print(f"lading: {uri} could not be read ({why}); it was not loaded and the next batch tries it again",
                  file=sys.stderr)


class LagWatcher:
    """Refreshes a stream's lag every ``LAG_SECONDS`` (Kafka: on its own consumer; files: a listing
    on its own storage client), whether a batch runs or the stream waits for its next cut
    (``Stream.refresh_lag``)."""

    def __init__(self, stream: Stream, interval: float = LAG_SECONDS,
                 on_lag: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.stream, self.interval, self.on_lag = stream, interval, on_lag
        self.shown: int | None = None  # the total last handed to ``on_lag``
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lading-lag", daemon=True)

    def tick(self, consumer: Any = None, storage: st.Storage | None = None) -> None:
        """One refresh; ``on_lag`` gets the progress when the total changed since it last did."""
        self.stream.refresh_lag(consumer, storage)
        total = (self.stream.progress.get("lag") or {}).get("total")
        if self.on_lag is not None and total != self.shown:
            self.shown = total
            self.on_lag(self.stream.progress.snapshot())

    def start(self) -> LagWatcher:
        self.thread.start()
        return self

    def _run(self) -> None:
        source = self.stream.source
        if isinstance(source, FilesSource):
            storage = storage_for(source.prefix, source.settings)
            while not self.done.wait(self.interval):
                with contextlib.suppress(st.StorageError, OSError):
                    self.tick(storage=storage)
            return
        try:
            consumer = kf.open_consumer(source.config)
        except kf.KafkaError:
            return
        try:
            while not self.done.wait(self.interval):
                with contextlib.suppress(kf.KafkaError):
                    self.tick(consumer)
        finally:
            consumer.close()

    def close(self) -> None:
        self.done.set()
        if self.thread.is_alive():
            self.thread.join(2)  # a daemon: a refresh stuck on the broker does not hold the exit


def _wait(cancel: threading.Event, until: float, stream: Stream) -> None:
    """Sleep until ``until`` (monotonic), waking early on cancel or a full Kafka backlog."""
    while not cancel.is_set():
        left = until - time.monotonic()
        if left <= 0:
            return
        if cancel.wait(min(left, POLL_SECONDS)):
            return
        try:
            if stream.backlog_full():
                return
        except kf.KafkaError:
            return  # the batch itself will report it


def run_stream(spark: Any, doc: JobDocument, spec: StreamCopySpec | None = None,
               cancel: threading.Event | None = None, *, once: bool = False,
               on_batch: Callable[[bt.Result, dict[str, Any]], None] | None = None,
               on_lag: Callable[[dict[str, Any]], None] | None = None,
               progress_port: int | None = -1, progress_host: str | None = None,
               progress: Progress | None = None, **_: Any) -> dict[str, Any]:
    """Run the StreamCopy ``doc`` until cancelled (or, with ``once``, until nothing new is left).

    ``progress_port``: -1 reads ``$LADING_PROGRESS_PORT`` (default 8090), None serves nothing,
    0 any free port. ``on_lag``: the progress, each time the lag watcher finds a new total
    (between batches and during them). Returns the job result (``rows`` with ``once``; ``cancelled``; or ``error``
    with ``reason``)."""
    from lading_spec.streamprogress import PROGRESS_PORT

    try:
        spec = spec or parse_streamcopy(doc.spec)
    except SpecError as e:
        return {"runId": doc.run_id, "error": str(e), "reason": "InvalidSpec"}
    cancel = cancel or threading.Event()
    progress = progress or Progress(doc.run_id, "kafka" if isinstance(spec.source, KafkaSpec) else "files")
    if progress_port == -1:
        progress_port = int(os.environ.get(PROGRESS_PORT_ENV) or PROGRESS_PORT)
    server = None
    if progress_port is not None:
        server = ProgressServer(progress, progress_host or os.environ.get("LADING_PROGRESS_HOST") or "0.0.0.0",
                                progress_port)
    try:
        stream = Stream(spark, doc, spec, progress)
    except kf.KafkaError as e:  # refused before any connection: the properties, the Secret's binding
        if server is not None:
            server.close()
        progress.update(state="failed", error=str(e))
        return {"runId": doc.run_id, "error": str(e)}
    base: dict[str, Any] = {"runId": doc.run_id, "destination": stream.table_uri}
    watcher: LagWatcher | None = None
    publishing = mirror_publisher.background()  # batches commit while the mirror publishes the last one
    publishing.__enter__()
    try:
        stream.sweep()
        stream.resume()
        if stream.log is not None:
            stream.claim()
        watcher = LagWatcher(stream, on_lag=on_lag).start()
        progress.update(state="running")
        next_cut = time.monotonic()
        while not cancel.is_set():
            if not once:
                _wait(cancel, next_cut, stream)
                if cancel.is_set():
                    progress.update(state="stopping")
                    break
            cut = time.monotonic()
            plan = stream.plan()
            if plan is None or (once and plan.empty and not plan.moves):
                if once:
                    break
                next_cut = cut + spec.batching.max_batch_interval
                continue
            try:
                result = stream.run_batch(plan, cancel)
            except Replan as e:
                print(f"lading: {e}", file=sys.stderr)
                progress.update(replans=int(progress.get("replans") or 0) + 1)
                next_cut = time.monotonic()
                continue
            if on_batch is not None:
                on_batch(result, progress.snapshot())
            next_cut = time.monotonic() if plan.full else cut + spec.batching.max_batch_interval
            if once and plan.empty and not plan.unread:
                break
        if stream.log is not None and stream.log.snapshot().meta.iceberg_mirror:
            mirror_publisher.settle(fmt.table_root(stream.table_uri))  # every batch's snapshot, then report it
            progress.update(icebergMetadata=mirror.current_metadata(stream.table_uri, stream.storage))
        doc_now = progress.snapshot()
        summary = {**base, "rowsTotal": doc_now["rowsTotal"], "batches": doc_now["batches"],
                   "tableVersion": doc_now["tableVersion"], "offsets": doc_now["offsets"],
                   **({"icebergMetadata": doc_now["icebergMetadata"]} if doc_now.get("icebergMetadata") else {})}
        if once and not cancel.is_set():
            progress.update(state="stopped")
            return {**summary, "rows": stream.rows_run, "rowsFiltered": stream.filtered_run}
        progress.update(state="stopped")
        return {**summary, "cancelled": True}
    except Cancelled:
        progress.update(state="stopped")
        return {**base, "cancelled": True, "rowsTotal": progress.get("rowsTotal"), "batches": progress.get("batches")}
    except Stopped as e:
        progress.update(state="failed", error=str(e), reason=e.reason)
        return {**base, "error": str(e), "reason": e.reason, "batch": e.batch,
                "rowsTotal": progress.get("rowsTotal"), "batches": progress.get("batches")}
    except SpecError as e:  # what only the table or the source shows (no target.schema for a new table)
        progress.update(state="failed", error=str(e), reason="InvalidSpec")
        return {**base, "error": f"{e}; nothing was committed and the stream stopped", "reason": "InvalidSpec",
                "rowsTotal": progress.get("rowsTotal"), "batches": progress.get("batches")}
    except bt.UnreadableFile as e:
        progress.update(state="failed", error=str(e), reason="FileUnreadable")
        return {**base, "error": f"source.files: {e}", "reason": "FileUnreadable",
                "rowsTotal": progress.get("rowsTotal"), "batches": progress.get("batches")}
    except bt.DataLossError as e:
        progress.update(state="failed", error=str(e), reason="DataLoss")
        return {**base, "error": f"source.kafka: {e}", "reason": "DataLoss"}
    except (TableError, kf.KafkaError) as e:
        progress.update(state="failed", error=str(e))
        return {**base, "error": str(e)}
    finally:
        if watcher is not None:
            watcher.close()
        stream.close()
        publishing.__exit__(None, None, None)  # every exit path: settles every publish of this run
        if server is not None:
            server.close()
