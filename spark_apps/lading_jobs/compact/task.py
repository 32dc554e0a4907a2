"""One group's rewrite, as it runs in a Spark task: read its parts, consolidate, write parts.

Everything stays in Arrow inside the Python worker (pyarrow reads and writes
Parquet; nothing crosses into the JVM but one JSON line per group), which is
why a compaction outruns Spark reading and rewriting the same parts itself.
A group that needs consolidating or sorting is held in memory whole (about
``targetFileSize`` of compressed input, decompressed); a plain bin-pack (an
append or diff table, no ``sortBy``, every row at or after ``since``) streams:
each part's rows go to the writer as they are read, in part order, while the
next part is read on a helper thread (``_read_ahead``: decoding, or on S3 the
fetch, overlaps encoding). A streamed group reads its string and binary
columns as dictionary arrays, and the writer writes those dictionaries as they
are: a column of few distinct values is never turned into one string per row and
hashed back into a dictionary (that was about a fifth of a bin-pack's CPU with one
such column, docs/benchmarks.md). A plain bin-pack whose parts allow it is not decoded
at all: their row groups are copied into the outputs as stored (``groupcopy``), and
only a group that cannot be copied is read and written as above. The outputs stay
pending uploads; on an exception the task aborts its own.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import itertools
import json
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from lading_jobs import storage as st
from lading_jobs import workerheap
from lading_jobs.compact import groupcopy, rewrite
from lading_jobs.compact.parts import CeilingPartWriter
from lading_jobs.compact.plan import Group
from lading_jobs.formats.parquetfile import FileTooSmall
from lading_jobs.table import reader
from lading_jobs.table.log.commits import Part, Snapshot
from lading_jobs.table.writer import WrittenPart


@dataclass(frozen=True)
class RewritePlan:
    """What every task needs (shipped to executors; no credentials)."""

    snapshot: Snapshot  # parts and ledger left out: tasks get their group's parts
    groups: tuple[Group, ...]
    since: int
    sort_by: tuple[str, ...]
    write_id: str
    target_file_size: int
    settings: st.S3Settings


@dataclass(frozen=True)
class GroupOutcome:
    group: int
    written: tuple[WrittenPart, ...]
    rows_in: int
    rows_out: int
    seconds: float

    def to_json(self) -> str:
        return json.dumps({"group": self.group, "written": [w.to_json() for w in self.written],
                           "rowsIn": self.rows_in, "rowsOut": self.rows_out, "seconds": self.seconds})

    @classmethod
    def from_json(cls, text: str) -> GroupOutcome:
        d = json.loads(text)
        return cls(int(d["group"]), tuple(WrittenPart.from_json(w) for w in d["written"]), int(d["rowsIn"]),
                   int(d["rowsOut"]), float(d["seconds"]))


def storage_for(uri: str, settings: st.S3Settings) -> st.Storage:
    return st.S3Storage(settings) if uri.startswith("s3://") else st.open_storage(uri, settings)


def streams(plan: RewritePlan, group: Group) -> bool:
    """Whether ``group`` is a plain bin-pack: nothing to consolidate (by its parts' time
    statistics; missing ones mean "might") and nothing to sort, so rows can go straight
    from each part to the writer."""
    return (plan.snapshot.envelope in ("append", "diff") and not plan.sort_by
            and all(p.stats.min_time is not None and p.stats.min_time >= plan.since for p in group.parts))


def read_group(plan: RewritePlan, group: Group, storage: st.Storage, dictionary: tuple[str, ...] = ()
               ) -> tuple[pa.Table, int]:
    """The group's rows, consolidated and sorted (held in memory whole); and how many were read.
    ``dictionary``: string or binary columns (not sorted by) read as dictionary arrays, and
    encoded as such where a part of an older schema gives them plain (``as_dictionaries``)."""
    snap = plan.snapshot
    ranked = snap.envelope == "upsert"  # only upserts order rows by part and position
    pieces = list(_read_ahead(storage, snap, group.parts, order=ranked, ahead=2, dictionary=dictionary))
    if dictionary:
        pieces = [as_dictionaries(p, dictionary) for p in pieces]
    rows = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
    del pieces
    out = rewrite.consolidate(rows, snap.envelope, snap.key_columns, plan.since, drop_deletes=group.drop_deletes,
                              sort_by=plan.sort_by, merge_identical=not snap.meta.iceberg_mirror)
    return out.rows, rows.num_rows


def dictionary_columns(snap: Snapshot) -> tuple[str, ...]:
    """The columns a streamed group reads and writes as dictionary arrays: strings and binaries."""
    schema = snap.schema.arrow_schema(internal=False)
    return tuple(f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_binary(f.type))


def as_dictionaries(rows: pa.Table, names: Sequence[str]) -> pa.Table:
    """``rows`` with its plain columns among ``names`` dictionary-encoded, with int32 indices as the
    reader returns them (so pieces of parts of any schema concatenate)."""
    for name in names:
        i = rows.schema.get_field_index(name)
        field = rows.schema.field(i) if i >= 0 else None
        if field is not None and not pa.types.is_dictionary(field.type):
            t = pa.dictionary(pa.int32(), field.type)
            rows = rows.set_column(i, field.with_type(t), rows.column(i).cast(t))
    return rows


def _read_ahead(storage: st.Storage, snap: Snapshot, parts: Sequence[Part], *, order: bool = False,
                ahead: int = 1, dictionary: tuple[str, ...] = ()) -> Iterator[pa.Table]:
    """The parts' rows, in order, with up to ``ahead`` next parts read on helper threads meanwhile.

    pyarrow decodes and encodes without the GIL, so a core the task would leave idle
    (a group alone on an executor, or the encoder waiting for the next part) decodes:
    a streamed group reads one part ahead while it writes the one before; a group held
    whole reads two at a time.
    """
    todo = iter(parts)
    with concurrent.futures.ThreadPoolExecutor(ahead, thread_name_prefix="lading-read") as pool:
        read = functools.partial(reader.read_part, storage, snap, order=order, dictionary=dictionary)
        pending = collections.deque(pool.submit(read, p) for p in itertools.islice(todo, ahead))
        while pending:
            piece = pending.popleft().result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(pool.submit(read, nxt))
            yield piece


@contextlib.contextmanager
def part_writer(plan: RewritePlan, task: int, storage: st.Storage, keep_order: tuple[int, int] | None = None,
                dictionary: tuple[str, ...] = ()) -> Iterator[CeilingPartWriter]:
    """The task's part writer; if the block raises, its uploads are aborted (and a target too
    small for a footer is named ``targetFileSize``)."""
    snap = plan.snapshot
    writer = CeilingPartWriter(snap.uri, snap.schema, plan.write_id, task, table_id=snap.table_id,
                               envelope=snap.envelope, storage=storage, max_size=plan.target_file_size,
                               keep_order=keep_order, dictionary=dictionary)
    try:
        yield writer
    except FileTooSmall as e:
        writer.abort()
        raise FileTooSmall(str(e).replace("to.maxFileSize", "targetFileSize")) from e
    except BaseException:
        writer.abort()
        raise


def rewrite_group(plan: RewritePlan, index: int, storage: st.Storage, group: Group | None = None) -> GroupOutcome:
    """Read, consolidate and write group ``index`` (``plan.groups[index]`` unless ``group`` is given);
    its outputs are pending uploads."""
    started = time.monotonic()
    group = plan.groups[index] if group is None else group
    snap = plan.snapshot
    streamed = streams(plan, group)
    if streamed:  # a plain bin-pack: the parts' row groups copied as stored where they can be
        copied = groupcopy.copy_parts(snap, group.parts, plan.write_id, index, storage, plan.target_file_size,
                                      group.keep_order)
        if copied is not None:
            rows = sum(p.rows for p in group.parts)
            return GroupOutcome(index, tuple(copied), rows, rows, round(time.monotonic() - started, 3))
    dictionary = dictionary_columns(snap) if streamed else ()
    with part_writer(plan, index, storage, group.keep_order, dictionary) as writer:
        if streamed:
            rows_in = 0
            for piece in _read_ahead(storage, snap, group.parts, dictionary=dictionary):
                rows_in += piece.num_rows
                writer.write(piece)
            rows_out = rows_in
        else:
            rows, rows_in = read_group(plan, group, storage)
            rows_out = rows.num_rows
            writer.write(rows)
            del rows
        written = writer.finish()
    return GroupOutcome(index, tuple(written), rows_in, rows_out, round(time.monotonic() - started, 3))


@dataclass(frozen=True)
class GroupTasks:
    """The body of a stage of one task per group, as Spark ships it to every task: the plan without
    its groups, and each group pickled on its own, so a task decodes only its own group's parts.
    (Shipped whole, the plan of a 2,000-part run was 819 kB of parts with their statistics that
    each of its four tasks decoded: docs/benchmarks.md, "outside the groups".)"""

    plan: RewritePlan  # ``groups`` left out: they are in ``groups`` below
    groups: tuple[bytes, ...]

    @classmethod
    def of(cls, plan: RewritePlan) -> GroupTasks:
        return cls(replace(plan, groups=()), tuple(pickle.dumps(g, pickle.HIGHEST_PROTOCOL) for g in plan.groups))

    def group(self, index: int) -> Group:
        group = pickle.loads(self.groups[index])
        assert isinstance(group, Group)
        return group

    def __call__(self, index: int, storage: st.Storage) -> str:
        return rewrite_group(self.plan, index, storage, self.group(index)).to_json()


@dataclass(frozen=True)
class Stage:
    """One Spark job of a run: ``count`` tasks; task ``i`` returns ``body(i, storage)``, one JSON
    line. ``writes_parts``: the lines are :class:`GroupOutcome` (progress counts their parts)."""

    plan: RewritePlan
    name: str
    count: int
    body: Callable[[int, st.Storage], str]
    writes_parts: bool = False


Runner = Callable[[Stage], list[str]]
"""Runs a stage's tasks (Spark tasks by default; tests run them in-process) → their lines, in order."""


def in_process(storage: st.Storage) -> Runner:
    """A runner calling each task in this process, over ``storage`` (tests: thousands of plans,
    faults injected in the storage, kills at any call)."""

    def run(stage: Stage) -> list[str]:
        return [stage.body(i, storage) for i in range(stage.count)]

    return run


def rewrite_groups(plan: RewritePlan, runner: Runner) -> list[GroupOutcome]:
    """One task per group, each rewritten on its own (``rewrite_group``); each task decodes only its
    group (``GroupTasks``)."""
    tasks = GroupTasks.of(plan)
    stage = Stage(tasks.plan, "rewrite", len(plan.groups), tasks, writes_parts=True)
    return sorted((GroupOutcome.from_json(line) for line in runner(stage)), key=lambda o: o.group)


def stage_body(stage: Stage, counters: Any = None):  # type: ignore[no-untyped-def]
    """The ``mapPartitions`` function of a stage (an RDD of task indexes, one partition per task;
    an RDD stage skips the SQL planning and Arrow round trip of ``mapInArrow``, 0.1-0.3 s a stage,
    docs/benchmarks.md): yields each index's JSON line."""

    def body(indexes: Iterator[int]) -> Iterator[str]:
        workerheap.settle()
        storage = storage_for(stage.plan.snapshot.uri, stage.plan.settings)
        for index in indexes:
            line = stage.body(int(index), storage)
            if counters is not None and stage.writes_parts:
                outcome = GroupOutcome.from_json(line)
                counters[0].add(outcome.rows_out)
                counters[1].add(sum(w.part.size for w in outcome.written))
                counters[2].add(len(outcome.written))
            yield line

    return body
