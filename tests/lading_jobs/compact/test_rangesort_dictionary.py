"""A sorted compaction carries string columns as dictionary arrays through both stages
(``rangesort.dictionary_columns``) and answers exactly as when it decoded them: the same rows in
the same order (ties on the sort key kept in part order, across groups and within one), the same
part statistics, the same stored schema and metadata; parts of an older schema (read plain) meet
parts of the current one (read as dictionaries) in one group.

Before this lever every stage decoded the string column to one string per row
(``test_staging_keeps_string_columns_as_dictionaries`` fails on that code: the staging file held
``v`` as plain strings)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs import storage as st
from lading_jobs.compact import plan as planner
from lading_jobs.compact import rangesort
from lading_jobs.compact import task as compact_task
from lading_jobs.table import evolve, reader, writer
from lading_jobs.table import format as fmt
from lading_jobs.table.evolve import Found
from lading_jobs.table.log.commits import Part, Snapshot, TableLog
from lading_jobs.table.schema import TableSchema, conform
from lading_jobs.table.stats import part as stx

SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string"), ("tag", "string")])
TAGS = ["eu", "us", None, "apac"]


def build(uri: str) -> None:
    """Eight parts in two commits of schema 0, then the column ``w`` added and eight parts of
    schema 1. Keys from a narrow range (many ties, within parts and across them); ``v`` names each
    row, so any change of order shows; ``tag`` has few values and nulls."""
    log = TableLog.create(uri, SCHEMA, "append")
    rng = np.random.default_rng(11)
    schema = SCHEMA
    for c in range(4):
        if c == 2:
            schema = evolve.evolve(schema, [Found("w", "bigint", "test")])
        tables = []
        for p in range(4):
            n = 200
            t = {"k": pa.array(rng.integers(0, 40, n), pa.int64()),
                 "v": [f"c{c}-p{p}-{i}" for i in range(n)],
                 "tag": [TAGS[i % len(TAGS)] if (i * 7 + p) % 5 else f"rare-{c}" for i in range(n)]}
            if "w" in schema.names:
                t["w"] = pa.array(rng.integers(0, 9, n), pa.int64())
            tables.append(pa.table(t))
        written = writer.write_parts(uri, tables, schema, write_id=fmt.new_write_id(), logical_time=c + 1,
                                     one_part_per_table=True)
        writer.commit_parts(uri, written, log=log, schema=schema if c == 2 else None)


def sorted_plan(uri: str, groups: int = 3) -> tuple[compact_task.RewritePlan, list[Part]]:
    storage = st.open_storage(uri)
    snap = TableLog.open_existing(uri, storage).snapshot()
    parts = list(snap.parts)
    assert {p.schema_id for p in parts} == {0, 1}
    per = -(-len(parts) // groups)
    chosen = tuple(planner.Group(tuple(parts[i:i + per])) for i in range(0, len(parts), per))
    plan = compact_task.RewritePlan(replace(snap, parts=()), chosen, 0, ("k",), planner.WRITE_ID_PREFIX + "t1",
                                    24 * 1024, st.S3Settings.from_env())
    assert rangesort.applies(plan)
    return plan, parts


def pending_rows(written: compact_task.GroupOutcome, snap: Snapshot) -> pa.Table:
    """The rows of a run's pending file:// outputs (their temporary files, before any commit)."""
    return pa.concat_tables(conform(pq.read_table(w.upload["upload_id"]), snap.schema) for w in written.written)


def run(uri: str) -> tuple[compact_task.GroupOutcome, compact_task.RewritePlan, list[Part]]:
    plan, parts = sorted_plan(uri)
    storage = st.open_storage(uri)
    return rangesort.run(plan, compact_task.in_process(storage), storage), plan, parts


def test_staging_keeps_string_columns_as_dictionaries(file_uri: Callable[[str], str]) -> None:
    uri = file_uri("t/")
    build(uri)
    plan, _ = sorted_plan(uri)
    storage = st.open_storage(uri)
    assert {p.schema_id for p in plan.groups[1].parts} == {0, 1}
    staged = rangesort.Staged.from_json(rangesort.stage_group(plan, 1, storage))
    assert staged.uri is not None
    with storage.open_input(staged.uri, staged.size) as f:
        staging = pa.ipc.open_file(f).read_all()
    # group 1 holds parts of schema 0 (read plain, encoded) and of schema 1 (read as dictionaries)
    assert [staging.schema.field(n).type for n in ("k", "v", "tag")] == [
        pa.int64(), pa.dictionary(pa.int32(), pa.string()), pa.dictionary(pa.int32(), pa.string())]
    assert rangesort.dictionary_columns(plan) == ("v", "tag")
    tag = staging.column("tag").combine_chunks()
    assert sorted(tag.dictionary.to_pylist()) == sorted({*filter(None, TAGS), "rare-1", "rare-2"})
    rangesort.discard_staging(uri, plan.write_id, storage)


def test_a_sort_key_column_is_never_a_dictionary(file_uri: Callable[[str], str]) -> None:
    uri = file_uri("t/")
    build(uri)
    plan, _ = sorted_plan(uri)
    by_tag = replace(plan, sort_by=("tag", "k"))
    assert rangesort.dictionary_columns(by_tag) == ("v",)
    assert rangesort.staging_schema(by_tag, ("v",)).field("tag").type == pa.string()


@pytest.mark.parametrize("decoded", [False, True], ids=["dictionaries", "decoded"])
def test_outputs_hold_the_input_rows_stably_sorted_with_their_statistics(
        file_uri: Callable[[str], str], monkeypatch: pytest.MonkeyPatch, decoded: bool) -> None:
    """Both paths (dictionaries, and the decoded one: no dictionary column) give the input's rows
    sorted stably by ``k`` in part order (ties across groups and parts as before), and each
    part's statistics are those of its rows; the stored Arrow schema is the plain one."""
    uri = file_uri("t/")
    build(uri)
    if decoded:
        monkeypatch.setattr(rangesort, "dictionary_columns", lambda plan: ())
    outcome, plan, parts = run(uri)
    snap = plan.snapshot
    storage = st.open_storage(uri)
    expected = pa.concat_tables(reader.read_part(storage, snap, p, order=False) for p in parts).sort_by("k")
    got = pending_rows(outcome, snap)
    assert got.num_rows == expected.num_rows == 3200
    assert got.select(["k", "v", "tag", "w"]).equals(expected.select(["k", "v", "tag", "w"]))
    part_schema = snap.schema.arrow_schema(table_id=snap.table_id, envelope=snap.envelope)
    ids = {c.name: c.id for c in snap.schema.columns}
    for w in outcome.written:
        f = pq.ParquetFile(w.upload["upload_id"])
        assert f.schema_arrow.equals(part_schema, check_metadata=True), f.schema_arrow
        rows = f.read()
        assert w.part.stats.columns == stx.table_stats(rows, ids).columns
        assert w.part.stats.rows == rows.num_rows
    writer.abort_parts(uri, outcome.written, [plan.write_id], storage=storage)


def test_the_dictionary_and_decoded_paths_write_the_same_parts(
        file_uri: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Part for part: the same rows, statistics, stored schema and key-value metadata."""
    build(file_uri("a/"))
    shutil.copytree(file_uri("a/").removeprefix("file://"), file_uri("b/").removeprefix("file://"))  # one table id
    outcomes = []
    for name, decoded in (("a/", False), ("b/", True)):
        uri = file_uri(name)
        with monkeypatch.context() as m:
            if decoded:
                m.setattr(rangesort, "dictionary_columns", lambda plan: ())
            outcomes.append(run(uri)[0])
    a, b = outcomes
    assert len(a.written) == len(b.written) >= 2
    for x, y in zip(a.written, b.written, strict=True):
        fx, fy = pq.ParquetFile(x.upload["upload_id"]), pq.ParquetFile(y.upload["upload_id"])
        assert fx.schema_arrow.equals(fy.schema_arrow, check_metadata=True)
        assert fx.metadata.metadata == fy.metadata.metadata
        assert fx.read().equals(fy.read())
        assert x.part.stats.columns == y.part.stats.columns and x.part.stats.rows == y.part.stats.rows
