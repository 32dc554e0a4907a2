"""The driver's side of each source: plan a batch from a table snapshot, run its tasks.

``KafkaSource`` asks the broker for each partition's watermarks and turns the
committed offsets into ranges (``positions``); ``FilesSource`` lists the prefix
from the late-arrival start key and picks the files the ledger does not hold.
Both return a ``batch.Plan`` carrying the exact ``sourceProgress`` to commit. A file
that could not be read (changed after it was listed, storage failed) leaves the
batch: it is not ledgered, and the next listing finds it again; one that fails
``MAX_READ_ATTEMPTS`` batches in a row stops the stream (``UnreadableFile``).
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Iterable, Iterator
from typing import Any

from lading_jobs import storage as st
from lading_jobs.ingest.plan import plan_tasks
from lading_jobs.ingest.stores import storage_for
from lading_jobs.ingest.transform import TransformPlan
from lading_jobs.stream import kafka as kf
from lading_jobs.stream import memory
from lading_jobs.stream import positions as pos
from lading_jobs.stream.batch import (
    TASK_ROWS,
    DataLossError,
    KafkaRead,
    Outcome,
    Plan,
    Target,
    UnreadableFile,
    abort,
    drop_unread,
    run_evolving,
    run_tasks,
)
from lading_jobs.table.log.commits import Snapshot
from lading_spec.formats import FormatOptions, parse_options
from lading_spec.streamcopy import FilesSource as FilesSpec
from lading_spec.streamcopy import KafkaSource as KafkaSpec

MAX_FILES_PER_BATCH = 1000
PENDING_COUNT_LIMIT = 10_000
"""A listing counts waiting files up to this many, then reports "at least"."""
LEDGER_READ_AHEAD = 256
"""Listed files whose ledger shards a batch reads at once before looking them up."""
MAX_READ_ATTEMPTS = 5
"""Batches in a row a file may fail to be read (changed since listed, storage failed) before the stream stops."""
DEFAULT_MESSAGE_BYTES = 1024
"""The message size assumed for ``maxBatchBytes`` until a batch has measured it."""


class KafkaSource:
    kind = "kafka"

    def __init__(self, spec: KafkaSpec, group: str, task_bytes: int = memory.DEFAULT_TASK_BYTES) -> None:
        self.spec, self.group = spec, group
        self.config = kf.consumer_config(spec.bootstrap_servers, spec.consumer, group)
        kf.check_broker_addresses(spec.bootstrap_servers)
        self.consumer = kf.open_consumer(self.config)
        self.admin: Any = None  # opened at the first plan (topic IDs)
        self.topic_ids: dict[str, str | None] = {}  # the broker's, at the last plan
        self.bytes_per_message: float | None = None
        self.read = KafkaRead(spec.bootstrap_servers, tuple(sorted(spec.consumer.items())), group,
                              spec.value_format, task_bytes)

    def close(self) -> None:
        self.consumer.close()
        self.admin = None

    def plan(self, snapshot: Snapshot, now_ms: int, time_: int, max_rows: int | None,
             max_bytes: int | None) -> Plan:
        topics = self.spec.topics
        committed = pos.committed_offsets(snapshot.source_progress, topics)
        if self.admin is None:
            self.admin = kf.open_admin(self.config)
        ids = self.topic_ids = kf.topic_ids(self.admin, topics)
        marks = kf.watermarks(self.consumer, topics)
        starts, losses = pos.resolve_starts(topics, marks, committed, self.spec.starting_offsets, ids,
                                            pos.stored_topic_ids(snapshot.source_progress, topics))
        skipped = []
        if losses:
            if self.spec.fail_on_data_loss:
                raise DataLossError(data_loss_message(losses))
            starts = pos.skip_lost(starts, losses)
            skipped = [str(x) if isinstance(x, pos.DataLoss) else f"{x}: restarted at offset {x.earliest}"
                       for x in losses]
        limit = max_rows
        if max_bytes is not None:
            by_bytes = max(1, int(max_bytes // (self.bytes_per_message or DEFAULT_MESSAGE_BYTES)))
            limit = by_bytes if limit is None else min(limit, by_bytes)
        ranges = pos.plan_ranges(starts, marks, limit)
        ends = pos.ends_after(starts, ranges)
        taken = sum(r.count for r in ranges)
        describe = ", ".join(str(r) for r in ranges) or "(no new messages)"
        end = {f"{t}:{p}": o for t, ps in sorted(ends.items()) for p, o in sorted(ps.items())}
        progress: dict[str, Any] = {**pos.progress_entries(ends, committed),
                                    **{pos.topic_id_key(t): i for t, i in ids.items() if i}}
        return Plan(snapshot, time_, progress, describe, ranges=ranges,
                    full=limit is not None and taken >= limit, lag=pos.lag(ends, marks), skipped=skipped,
                    end=end)

    def run(self, spark: Any, target: Target, plan: Plan, tplan: TransformPlan | None = None) -> list[Outcome]:
        tasks = pos.split_ranges(plan.ranges, TASK_ROWS)
        outcomes, plan.schema = run_evolving(spark, target, self.read, tasks, "kafka", run_tasks, tplan)
        read = sum(o.read for o in outcomes)
        if read:
            self.bytes_per_message = sum(o.bytes for o in outcomes) / read
        return outcomes

    def after_commit(self, plan: Plan) -> None:
        kf.commit_group(self.consumer, {t: {int(p): o for p, o in offsets.items()}
                                        for t, offsets in ((k[len(pos.KAFKA_PREFIX):], v)
                                                           for k, v in plan.progress.items()
                                                           if k.startswith(pos.KAFKA_PREFIX))})


def data_loss_message(losses: list[pos.Loss]) -> str:
    """The ``DataLossError`` of a batch that cannot resume where the table says (``failOnDataLoss``)."""
    gone = [x for x in losses if isinstance(x, pos.DataLoss)]
    reset = [x for x in losses if isinstance(x, pos.OffsetsReset | pos.TopicRecreated)]
    out = []
    if gone:
        out.append("; ".join(str(x) for x in gone) + ". Nothing was loaded past them. Set "
                   "source.kafka.failOnDataLoss: false to skip to the earliest offsets the broker still has")
    if reset:
        out.append("; ".join(str(x) for x in reset) + ". Nothing was loaded from them. If the topic was "
                   "recreated, set source.kafka.failOnDataLoss: false to restart these partitions at their "
                   "earliest offsets (their messages are then loaded once, from the beginning); if the brokers "
                   "are the wrong cluster, fix source.kafka.bootstrapServers")
    return ". ".join(out)


def read_ahead(listed: Iterable[st.ObjectInfo], snapshot: Snapshot, chunk: int = LEDGER_READ_AHEAD
               ) -> Iterator[st.ObjectInfo]:
    """``listed``, in order, with the ledger shards of each next ``chunk`` files read first, several
    at once (``Snapshot.prefetch_ledger``): the listing stays lazy, the lookups do not wait on one
    GET after another."""
    batch: list[st.ObjectInfo] = []
    for o in listed:
        batch.append(o)
        if len(batch) >= chunk:
            snapshot.prefetch_ledger(x.uri for x in batch)
            yield from batch
            batch = []
    snapshot.prefetch_ledger(x.uri for x in batch)
    yield from batch


def visible(uri: str, prefix: str, pattern: str | None) -> bool:
    """Whether the object ``uri`` under ``prefix`` is a file the stream loads: not a folder
    marker (a key ending in ``/``, what the S3 console's "Create folder" writes), no path
    segment below the prefix starting with ``_`` or ``.`` (Hadoop's ``hiddenFileFilter`` at
    every level: a committer's ``_temporary/0/part-0.json``, a producer's ``.staging/x.json``
    before its rename, ``_SUCCESS``), and the name matching ``pattern``."""
    if uri.endswith("/"):
        return False
    name = uri.rsplit("/", 1)[-1]
    below = uri[len(prefix):] if uri.startswith(prefix) else name
    if any(seg.startswith(("_", ".")) for seg in below.split("/")):
        return False
    return not pattern or fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(uri, pattern)


class FilesSource:
    kind = "files"

    def __init__(self, spec: FilesSpec, settings: st.S3Settings) -> None:
        self.spec, self.settings = spec, settings
        self.prefix = spec.uri if spec.uri.endswith("/") else spec.uri + "/"
        self.key = pos.files_key(self.prefix)
        self.storage = storage_for(self.prefix, settings)
        self.reported: set[tuple[str, str]] = set()
        self.rewritten_total = 0
        self.attempts: dict[str, int] = {}  # files the last batch could not read → batches in a row

    def close(self) -> None:
        pass

    def progress_of(self, snapshot: Snapshot | None) -> pos.FilesProgress:
        return pos.FilesProgress.from_dict(None if snapshot is None else snapshot.source_progress.get(self.key))

    def _listed(self, snapshot: Snapshot | None, now_ms: int, storage: st.Storage | None = None
                ) -> Iterator[st.ObjectInfo]:
        """The visible objects from where a listing starts (the late-arrival window), in key order, with
        their ledger shards read ahead (``read_ahead``)."""
        start = pos.listing_start(self.progress_of(snapshot), now_ms, int(self.spec.late_arrival * 1000))
        listed: Iterator[st.ObjectInfo] = (o for o in (storage or self.storage).list_objects_after(self.prefix, start)
                                           if visible(o.uri, self.prefix, self.spec.pattern))
        return listed if snapshot is None else read_ahead(listed, snapshot)

    def waiting(self, snapshot: Snapshot | None, now_ms: int, storage: st.Storage | None = None
                ) -> tuple[int, bool]:
        """The files a listing now finds that the table (``snapshot``) has not loaded: the lag, and
        whether the count stopped at its bound (``PENDING_COUNT_LIMIT``). ``storage``: another
        thread's own (the lag watcher's)."""
        ledger = snapshot.ledger if snapshot is not None else {}
        choice = pos.choose_files(self._listed(snapshot, now_ms, storage), ledger, None, 0, PENDING_COUNT_LIMIT)
        return choice.pending, choice.pending_at_least

    def choose(self, snapshot: Snapshot | None, now_ms: int, max_bytes: int | None) -> pos.FileChoice:
        ledger = snapshot.ledger if snapshot is not None else {}
        choice = pos.choose_files(self._listed(snapshot, now_ms), ledger, max_bytes, MAX_FILES_PER_BATCH,
                                  PENDING_COUNT_LIMIT)
        for o in choice.rewritten:
            if (o.uri, o.etag) not in self.reported:
                self.reported.add((o.uri, o.etag))
                self.rewritten_total += 1
        return choice

    def plan_files(self, snapshot: Snapshot, choice: pos.FileChoice, now_ms: int, time_: int) -> Plan:
        first, last = (choice.batch[0].uri, choice.batch[-1].uri) if choice.batch else ("", "")
        describe = (f"{len(choice.batch)} files {first} .. {last}" if len(choice.batch) > 1 else first) \
            or "(no new files)"
        plan = Plan(snapshot, time_, {}, describe, files=list(choice.batch),
                    full=choice.pending > 0, pending_files=choice.pending,
                    rewritten=[o.uri for o in choice.rewritten], lag={"files": choice.pending}, listed_at=now_ms)
        self._advance(plan)
        return plan

    def _advance(self, plan: Plan, hold: str | None = None) -> None:
        """The plan's position to commit (and ``end``) after loading ``plan.files``."""
        progress = self.progress_of(plan.snapshot)
        window = int(self.spec.late_arrival * 1000)
        loaded = [o.uri for o in plan.files]
        after = pos.advance(progress, loaded, plan.listed_at, window, hold=hold) if loaded else progress
        if loaded or hold is not None or self.key not in plan.snapshot.source_progress:
            plan.progress[self.key] = after.to_dict()
        plan.end = {"files": after.files, "highWater": after.high_water}

    @property
    def options(self) -> FormatOptions:
        return self.spec.options or parse_options(self.spec.format, None, "source.files.options")

    def run(self, spark: Any, target: Target, plan: Plan, tplan: TransformPlan | None = None) -> list[Outcome]:
        tasks = plan_tasks(plan.files, self.spec.format, self.settings)
        options = self.spec.options if tplan is None else self.options
        outcomes, plan.schema = run_evolving(spark, target, (self.spec.format, options), tasks, "files", run_tasks,
                                             tplan)
        outcomes, unread = drop_unread(outcomes, target)
        self.attempts = {uri: self.attempts.get(uri, 0) + 1 for uri in unread}
        given_up = sorted(uri for uri, n in self.attempts.items() if n >= MAX_READ_ATTEMPTS)
        if given_up:
            abort(outcomes, target, dead_letters_too=True)
            raise UnreadableFile(
                f"{given_up[0]} could not be read in {MAX_READ_ATTEMPTS} batches in a row (last: "
                f"{unread[given_up[0]]}); nothing of batch {plan.describe} was committed and the stream stopped. "
                "Check the storage (permissions, health), or stop rewriting the file in place (each rewrite "
                "changes its ETag): write it under a new name. A restart tries it again")
        if unread:
            plan.unread = unread
            plan.files = [o for o in plan.files if o.uri not in unread]
            self._advance(plan, hold=min(unread))
        return outcomes

    def after_commit(self, plan: Plan) -> None:
        pass


def now_ms() -> int:
    return int(time.time() * 1000)
