"""A sorted compaction of an append or diff table sorts all its groups as one (``compact.rangesort``):
its parts cover disjoint ranges of the first sort column, so a filtered read fetches fewer parts;
the rows read the same; identical rows from different groups consolidate; a failure at any stage
leaves no staging file, output or pending upload behind. Plus the pure range functions
(``compact.ranges``): NaN and null keys, boundaries of duplicates, batches a range needs.

Before ranges, each group was sorted on its own: with input parts that each span the whole key
range, every output part spanned it too (``test_a_sorted_compaction_through_spark...`` fails on
that code: the parts' ranges overlap and the filtered read fetches every part)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.faults import Fault, FaultyStorage

from lading_jobs import storage as st
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.engine import Totals, compact
from lading_jobs.compact.plan import written_by_compaction
from lading_jobs.engine import RunContext
from lading_jobs.storage import StorageError
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.compaction import parse_compaction

SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string")])
K = 1_000_000
SAME = (K // 3, "the same row in every part")


def build(uri: str, envelope: str = "append", commits: int = 8, rows: int = 300, iceberg_mirror: bool = False) -> int:
    """``2 × commits`` small parts whose keys each span the whole range [0, K), plus one row
    identical in every part; the table's version. Without the Iceberg mirror unless asked: a
    mirrored append table keeps identical rows apart (test_a_mirrored_append_table_keeps_identical_rows)."""
    log = TableLog.create(uri, SCHEMA, envelope, iceberg_mirror=iceberg_mirror)
    rng = np.random.default_rng(7)
    for c in range(commits):
        tables = []
        for p in range(2):
            keys = [*rng.integers(0, K, rows - 1).tolist(), SAME[0]]
            tables.append(pa.table({"k": pa.array(keys, pa.int64()),
                                    "v": [*(f"c{c}-p{p}-{i}" for i in range(rows - 1)), SAME[1]]}))
        written = writer.write_parts(uri, tables, SCHEMA, write_id=fmt.new_write_id(), logical_time=c + 1,
                                     one_part_per_table=True)
        writer.commit_parts(uri, written, log=log)
    return log.snapshot().version


def rows(uri: str) -> Counter:
    t = reader.scan(uri)
    return Counter(zip(t.column("k").to_pylist(), t.column("v").to_pylist(), strict=True))


SPEC = {"since": {"version": 100}, "targetFileSize": "12kB", "minInputFiles": 2, "sortBy": ["k"]}


def run(uri: str, storage: st.Storage, spark: Any = None) -> Totals:
    spec = parse_compaction({"table": uri, **SPEC})
    if spark is not None:
        return compact(spark, spec, RunContext(), storage=storage)
    return compact(None, spec, RunContext(), storage=storage, runner=compact_task.in_process(storage))


def data_objects(uri: str) -> set[str]:
    return {o.uri.removeprefix(uri) for o in st.open_storage(uri).list_objects(f"{uri}{fmt.DATA_DIR}/")}


def check_sorted_compaction(uri: str, spark: Any = None) -> None:
    version = build(uri)
    expected = rows(uri)
    before = TableLog.open_existing(uri).snapshot()
    lo = K // 2
    narrow = ex.And(ex.Pred("ge", "k", lo), ex.Pred("lt", "k", lo + K // 100))
    assert len(reader.plan_scan(before, ex.bind(narrow, before.schema))) == len(before.parts) == 16

    totals = run(uri, st.open_storage(uri), spark)
    snap = TableLog.open_existing(uri).snapshot()
    assert snap.version == version + 1, "one compact commit"
    assert totals.parts_before == 16 and totals.groups >= 2, totals
    assert len(snap.parts) >= 2 and all(written_by_compaction(p) for p in snap.parts)
    # the parts' k statistics cover disjoint ranges (touching at most at a value a range's
    # writer cut between two of its parts)
    spans = sorted((p.stats.columns[1].min, p.stats.columns[1].max) for p in snap.parts)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    fetched = reader.plan_scan(snap, ex.bind(narrow, snap.schema))
    assert 1 <= len(fetched) <= 2 < len(snap.parts), (len(fetched), spans)
    assert rows(uri) == expected
    assert reader.scan(uri, predicate=narrow).num_rows == sum(n for (k, _), n in expected.items()
                                                             if lo <= k < lo + K // 100)
    # the row in all 16 parts (below since, in every group) meets in one range: one row, diff 16
    raw = pa.concat_tables(reader.read_part(st.open_storage(uri), snap, p) for p in snap.parts)
    same = raw.filter(pc.equal(raw.column("v"), SAME[1]))
    assert same.num_rows == 1 and same.column(fmt.DIFF_COLUMN).to_pylist() == [16]
    # nothing left behind: no staging file, no pending upload; the outputs are exactly the new parts
    ours = {p for p in data_objects(uri) if p.startswith(f"{fmt.DATA_DIR}/c-")}
    assert ours == {p.path for p in snap.parts}
    assert not st.open_storage(uri).list_pending_uploads(uri)
    # a second run rewrites nothing
    again = run(uri, st.open_storage(uri), spark)
    assert again.parts_before == 0 and TableLog.open_existing(uri).snapshot().version == snap.version


def test_a_sorted_compaction_cuts_parts_into_disjoint_key_ranges(file_uri: Callable[[str], str]) -> None:
    check_sorted_compaction(file_uri("t/"))


@pytest.mark.spark
def test_a_sorted_compaction_through_spark_cuts_parts_into_disjoint_key_ranges(
        spark: Any, file_uri: Callable[[str], str]) -> None:
    check_sorted_compaction(file_uri("t/"), spark)


def test_a_diff_table_sorted_compaction_sums_changes_across_groups(file_uri: Callable[[str], str]) -> None:
    uri = file_uri("t/")
    build(uri, "diff")
    log = TableLog.open_existing(uri)
    # retract the row of every part once per part: after consolidation it must vanish entirely
    retract = pa.table({"k": pa.array([SAME[0]] * 16, pa.int64()), "v": [SAME[1]] * 16})
    for t in (retract.slice(0, 8), retract.slice(8)):
        writer.commit_parts(uri, writer.write_parts(uri, [t], SCHEMA, write_id=fmt.new_write_id(),
                                                    logical_time=20, diff=-1), log=log)
    expected = rows(uri)
    assert SAME not in expected
    run(uri, st.open_storage(uri))
    snap = log.snapshot()
    raw = pa.concat_tables(reader.read_part(st.open_storage(uri), snap, p) for p in snap.parts)
    assert raw.filter(pc.equal(raw.column("v"), SAME[1])).num_rows == 0, "+16 and -16 sum to nothing"
    spans = sorted((p.stats.columns[1].min, p.stats.columns[1].max) for p in snap.parts)
    assert len(spans) >= 2 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    assert rows(uri) == expected


FAULTS = {
    "writing the second staging file": Fault("begin_upload", match="/staging/", nth=2),
    "reading a staging file": Fault("read_range", match="/staging/"),
    "writing the second range's part": Fault("begin_upload", match="/part-00001-"),
    "deleting the staging files": Fault("delete", match="/staging/"),
}


@pytest.mark.parametrize("step", FAULTS)
def test_a_failure_at_any_stage_leaves_nothing_behind_and_a_rerun_completes(
        file_uri: Callable[[str], str], step: str) -> None:
    uri = file_uri("t/")
    version = build(uri)
    expected = rows(uri)
    old = data_objects(uri)
    fault = FAULTS[step]
    faulty = FaultyStorage(st.open_storage(uri), Fault(fault.method, fault.action, fault.nth, fault.match))
    if step == "deleting the staging files":  # best effort after the ranges are written: the run commits
        run(uri, faulty)
        snap = TableLog.open_existing(uri).snapshot()
        assert snap.version == version + 1 and rows(uri) == expected
        left = {p for p in data_objects(uri) - old if "/staging/" in p}
        assert left, "the staging files the failed delete left (retention's, after the grace period)"
        assert data_objects(uri) - old - left == {p.path for p in snap.parts}
        return
    with pytest.raises(StorageError, match="injected failure"):
        run(uri, faulty)
    assert faulty.faults[0].fired
    assert TableLog.open_existing(uri).snapshot().version == version and rows(uri) == expected
    assert data_objects(uri) == old, "no staging file, no output left"
    assert not st.open_storage(uri).list_pending_uploads(uri)
    run(uri, st.open_storage(uri))
    assert TableLog.open_existing(uri).snapshot().version == version + 1 and rows(uri) == expected


def test_a_mirrored_append_table_keeps_identical_rows_so_iceberg_readers_stay_exact(
        file_uri: Callable[[str], str]) -> None:
    """With the Iceberg mirror on, the row identical in all 16 parts stays 16 rows of diff 1 (merged
    into one row of diff 16, an Iceberg reader would count it once), and the compaction is the
    mirror's current snapshot, read by pyiceberg as lading reads it."""
    from pyiceberg.table import StaticTable

    from lading_jobs.table.iceberg import mirror

    uri = file_uri("t/")
    build(uri, iceberg_mirror=True)
    expected = rows(uri)
    totals = run(uri, st.open_storage(uri))
    snap = TableLog.open_existing(uri).snapshot()
    raw = pa.concat_tables(reader.read_part(st.open_storage(uri), snap, p) for p in snap.parts)
    same = raw.filter(pc.equal(raw.column("v"), SAME[1]))
    assert same.num_rows == 16 and set(same.column(fmt.DIFF_COLUMN).to_pylist()) == {1}
    assert rows(uri) == expected
    state = mirror.describe(uri)
    assert state["snapshotVersion"] == snap.version and "reason" not in state
    assert totals.to_summary(uri, "r")["icebergMetadata"] == state["metadata"]  # status.output.icebergMetadata
    iceberg = StaticTable.from_metadata(state["metadata"]).scan().to_arrow()
    assert Counter(zip(iceberg.column("k").to_pylist(), iceberg.column("v").to_pylist(), strict=True)) == expected

