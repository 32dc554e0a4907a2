"""A sorted compaction of an append or diff table: one sort across every group, cut into key ranges.

Sorting each group on its own leaves every output spanning the whole key range
when every input part does (parts of random keys): a filter on the sort column
then fetches every part. So, as Delta's ZORDER and Iceberg's sort rewrite do, the
run's groups are sorted as one, in two stages of Spark tasks, all in Arrow:

  1. per group (one task each): read its parts, consolidate up to ``since``, sort by
     ``sortBy``, write the rows as one *staging* file (Arrow IPC, lz4, batches of
     ``BATCH_ROWS``) under ``data/<write id>/staging/``, and return a sample of the
     first sort column (``ranges.sample``) and each batch's first and last key;
  2. the driver cuts the samples into ranges of about equal row counts
     (``ranges.boundaries``; as many as the rewritten bytes fill parts of
     ``targetFileSize``, at most one per group), and per range (one task each) reads
     from every staging file only the batches that may hold its keys, keeps its rows,
     consolidates them again (identical rows from different groups meet here: they
     share their key), sorts, and writes parts with the same hard ceiling.

Parts then cover disjoint ranges of the first sort column (equal keys always meet in
one range), so a filter on it fetches about (its share of the range × parts) + 1 parts.
Rows in append and diff tables carry no order between parts, so nothing else changes;
upsert tables keep their per-group rewrite (their ties resolve by part order). The
groups land as one unit: every part of the run is removed and every range's parts
added in one ``compact`` commit, or none are.

Staging files are deleted once the ranges are written; on a failure or cancel the
engine deletes them with the run's pending uploads (``discard_staging``); after a
crash they are unreferenced objects under ``data/`` that retention removes after the
grace period. Memory: a stage-1 task holds its group (as a plain sorted rewrite
does); a stage-2 task its range, about one group's worth unless one key value
holds more rows than that (every row of a value goes to the same range).

String and binary columns that are not sorted by stay dictionary arrays from the
parts to the outputs (``dictionary_columns``), as a streamed bin-pack's do: read
without decoding a string per row, sorted by gathering their int32 indices,
staged with one dictionary per file, and written as they are (the part writer
checks the outputs' schema, metadata and statistics come out as the decoded
columns' would). docs/benchmarks.md, "Issue 30, sorted", measured what it saves.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lading_jobs import storage as st
from lading_jobs.compact import ranges, rewrite
from lading_jobs.compact.parts import conform
from lading_jobs.compact.task import (
    GroupOutcome,
    RewritePlan,
    Runner,
    Stage,
    part_writer,
    read_group,
)
from lading_jobs.compact.task import dictionary_columns as task_dictionary_columns
from lading_jobs.sink import PartSink
from lading_jobs.table import format as fmt
from lading_jobs.table.schema import arrow_type

BATCH_ROWS = 64 * 1024
"""Rows per staging batch: a range task reads whole batches, so at most two per file are read in part."""
STAGING = "staging/"
STAGING_BUFFER = 16 * 1024**2


def applies(plan: RewritePlan) -> bool:
    """Whether ``plan``'s groups are sorted as one: an append or diff table, ``sortBy`` whose first
    column Arrow can cut into ranges, and more than one group (one group's parts are already cut
    from one sorted run)."""
    if plan.snapshot.envelope not in ("append", "diff") or not plan.sort_by or len(plan.groups) < 2:
        return False
    column = plan.snapshot.schema.find(plan.sort_by[0])
    return column is not None and ranges.splittable(arrow_type(column.type))


def staging_prefix(uri: str, write_id: str) -> str:
    return fmt.write_prefix(uri, write_id) + STAGING


def discard_staging(uri: str, write_id: str, storage: st.Storage) -> None:
    """Delete the run's staging files (best effort: retention removes what is left)."""
    with contextlib.suppress(Exception):
        found = [o.uri for o in storage.list_objects(staging_prefix(uri, write_id))]
        if found:
            storage.delete(found)


@dataclass(frozen=True)
class Staged:
    """What a stage-1 task wrote: one group's sorted rows (``uri`` is None when none are left)."""

    group: int
    uri: str | None
    size: int
    rows_in: int
    rows: int
    samples: pa.Array
    firsts: pa.Array  # each batch's first key
    lasts: pa.Array  # and last key
    seconds: float

    def to_json(self) -> str:
        return json.dumps({"group": self.group, "uri": self.uri, "size": self.size, "rowsIn": self.rows_in,
                           "rows": self.rows, "samples": ranges.pack(self.samples),
                           "firsts": ranges.pack(self.firsts), "lasts": ranges.pack(self.lasts),
                           "seconds": self.seconds})

    @classmethod
    def from_json(cls, text: str) -> Staged:
        d = json.loads(text)
        return cls(int(d["group"]), d["uri"], int(d["size"]), int(d["rowsIn"]), int(d["rows"]),
                   ranges.unpack(d["samples"]), ranges.unpack(d["firsts"]), ranges.unpack(d["lasts"]),
                   float(d["seconds"]))


def _part_schema(plan: RewritePlan) -> pa.Schema:
    snap = plan.snapshot
    return snap.schema.arrow_schema(table_id=snap.table_id, envelope=snap.envelope)


def dictionary_columns(plan: RewritePlan) -> tuple[str, ...]:
    """The string and binary columns both stages carry as dictionary arrays: all but the sort
    columns (whose values are compared, sampled and cut into ranges)."""
    return tuple(c for c in task_dictionary_columns(plan.snapshot) if c not in plan.sort_by)


def staging_schema(plan: RewritePlan, dictionary: Sequence[str]) -> pa.Schema:
    """The staging files' schema: the part schema, ``dictionary``'s columns as dictionary arrays
    with int32 indices (as the Parquet reader returns them)."""
    schema = _part_schema(plan)
    return pa.schema([f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in dictionary else f
                      for f in schema], metadata=schema.metadata)


def stage_group(plan: RewritePlan, index: int, storage: st.Storage) -> str:
    """Stage 1 for group ``index``: its rows consolidated and sorted, as a staging file (see the module doc)."""
    started = time.monotonic()
    dictionary = dictionary_columns(plan)
    rows, rows_in = read_group(plan, plan.groups[index], storage, dictionary)
    schema = staging_schema(plan, dictionary)
    rows = conform(rows, schema)
    keys = rows.column(plan.sort_by[0]).combine_chunks()
    batches = rows.to_batches(max_chunksize=BATCH_ROWS)
    del rows
    empty = keys[:0]
    if not batches or len(keys) == 0:
        return Staged(index, None, 0, rows_in, 0, empty, empty, empty, 0.0).to_json()
    column = schema.get_field_index(plan.sort_by[0])
    firsts = pa.concat_arrays([b.column(column)[:1] for b in batches])
    lasts = pa.concat_arrays([b.column(column)[-1:] for b in batches])
    uri = f"{staging_prefix(plan.snapshot.uri, plan.write_id)}g{index:05d}-{uuid.uuid4().hex[:12]}.arrow"
    sink = PartSink(storage, uri, STAGING_BUFFER, single_put=True)
    try:
        options = pa.ipc.IpcWriteOptions(compression="lz4")
        with pa.ipc.new_file(pa.PythonFile(sink, mode="w"), schema, options=options) as w:
            for b in batches:
                w.write_batch(b)
        storage.complete_upload(sink.finish())
    except BaseException:
        with contextlib.suppress(Exception):
            sink.abort()
        raise
    return Staged(index, uri, sink.size, rows_in, len(keys), ranges.sample(keys), firsts, lasts,
                  round(time.monotonic() - started, 3)).to_json()


def merge_range(plan: RewritePlan, staged: Sequence[Staged], cuts: pa.Array | None, r: int,
                storage: st.Storage) -> GroupOutcome:
    """Stage 2 for range ``r``: its rows from every staging file, consolidated, sorted, written as parts."""
    started = time.monotonic()
    lo, hi = ranges.bounds(cuts, r)
    dictionary = dictionary_columns(plan)
    schema = staging_schema(plan, dictionary)
    column = schema.get_field_index(plan.sort_by[0])
    pieces: list[pa.RecordBatch] = []
    for s in staged:
        wanted = ranges.overlapping(s.firsts, s.lasts, lo, hi) if s.uri is not None else []
        if not wanted:
            continue
        assert s.uri is not None
        with storage.open_input(s.uri, s.size) as f:
            reader = pa.ipc.open_file(f)
            for i in wanted:
                batch = reader.get_batch(i)
                mask = ranges.in_range(batch.column(column), lo, hi)
                pieces.append(batch if mask.true_count == len(batch) else batch.filter(mask))
    table = pa.Table.from_batches(pieces, schema=schema)
    del pieces
    snap = plan.snapshot
    out = rewrite.consolidate(table, snap.envelope, snap.key_columns, plan.since, sort_by=plan.sort_by,
                              merge_identical=not snap.meta.iceberg_mirror)
    del table
    with part_writer(plan, r, storage, dictionary=dictionary) as writer:
        writer.write(out.rows)
        written = writer.finish()
    return GroupOutcome(r, tuple(written), out.rows_in, out.rows_out, round(time.monotonic() - started, 3))


def _merge_line(plan: RewritePlan, staged: Sequence[Staged], cuts: pa.Array | None, r: int,
                storage: st.Storage) -> str:
    return merge_range(plan, staged, cuts, r, storage).to_json()


def range_count(plan: RewritePlan, staged: Sequence[Staged]) -> int:
    """Ranges to cut: as many parts of ``targetFileSize`` as the rewritten bytes fill (scaled by the
    rows consolidation kept), at least one, at most one per group."""
    rows_in = sum(s.rows_in for s in staged)
    kept = sum(s.rows for s in staged) / rows_in if rows_in else 0.0
    estimate = sum(g.bytes for g in plan.groups) * kept
    return max(1, min(len(plan.groups), math.ceil(estimate / plan.target_file_size)))


def run(plan: RewritePlan, runner: Runner, storage: st.Storage, check: Callable[[], None] = lambda: None
        ) -> GroupOutcome:
    """Both stages (see the module doc): one outcome holding every range's parts, for all groups.

    Staging files are deleted here on success; on an exception the caller discards them
    with the run's pending uploads (``discard_staging``)."""
    started = time.monotonic()
    lines = runner(Stage(plan, "sort groups", len(plan.groups), functools.partial(stage_group, plan)))
    staged = sorted((Staged.from_json(line) for line in lines), key=lambda s: s.group)
    check()
    cuts = ranges.boundaries([(s.samples, s.rows) for s in staged if s.rows], range_count(plan, staged))
    shipped = [Staged(s.group, s.uri, s.size, s.rows_in, s.rows, s.samples[:0], s.firsts, s.lasts, s.seconds)
               for s in staged if s.uri is not None]
    merge = functools.partial(_merge_line, plan, shipped, cuts)
    lines = runner(Stage(plan, "write ranges", ranges.count(cuts), merge, writes_parts=True))
    outcomes = sorted((GroupOutcome.from_json(line) for line in lines), key=lambda o: o.group)
    discard_staging(plan.snapshot.uri, plan.write_id, storage)
    return GroupOutcome(0, tuple(w for o in outcomes for w in o.written), sum(s.rows_in for s in staged),
                        sum(o.rows_out for o in outcomes), round(time.monotonic() - started, 3))
