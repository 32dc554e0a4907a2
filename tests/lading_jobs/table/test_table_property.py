"""Property: random sequences of inserts, upserts, deletes and diffs at random logical times,
committed as parts (and sometimes rewritten by a compaction up to ``since``), read as of several
times, equal a plain in-memory model — per envelope. Reads use the pure-Arrow path; a few
examples also go through Spark's ``lading`` data source."""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.consolidate import POS_COLUMN, SEQ_COLUMN
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema

SCHEMA = TableSchema.of([("k", "string"), ("v", "bigint")])
KEYS = ["a", "b", "c", None]
MAX_TIME = 8

row = s.tuples(s.sampled_from(KEYS), s.integers(0, 3), s.integers(1, MAX_TIME))  # (k, v, time)
append_batch = s.lists(row, min_size=1, max_size=6).map(lambda rs: [(k, v, t, 1) for k, v, t in rs])
upsert_batch = s.lists(s.tuples(s.sampled_from(KEYS), s.integers(0, 3), s.integers(1, MAX_TIME), s.booleans()),
                       min_size=1, max_size=6).map(
    lambda rs: [(k, None if delete else v, t, -1 if delete else 1) for k, v, t, delete in rs])
diff_batch = s.lists(s.tuples(s.sampled_from(KEYS), s.integers(0, 3), s.integers(1, MAX_TIME),
                              s.sampled_from([-2, -1, 1, 2])), min_size=1, max_size=6)
# A step is a batch of (k, v, time, diff) rows, or ("compact", since).
BATCHES = {"append": append_batch, "upsert": upsert_batch, "diff": diff_batch}


def steps(envelope: str) -> s.SearchStrategy[list[Any]]:
    step = s.one_of(BATCHES[envelope], BATCHES[envelope], s.tuples(s.just("compact"), s.integers(1, MAX_TIME)))
    return s.lists(step, min_size=1, max_size=6)


# -- the model -----------------------------------------------------------------------------
def model(envelope: str, events: list[tuple[Any, Any, int, int, int, int]], as_of: int) -> Counter:
    """events: (k, v, time, diff, seq, pos); the answer as a multiset of (k, v)."""
    visible = [e for e in events if e[2] <= as_of]
    if envelope == "append":  # a row counts diff times (1 when written; compaction may merge copies)
        counts: Counter = Counter()
        for k, v, _, d, *_ in visible:
            counts[(k, v)] += d
        return counts
    if envelope == "upsert":
        latest: dict[Any, tuple] = {}
        for e in visible:
            if e[0] not in latest or (e[2], e[4], e[5]) > (latest[e[0]][2], latest[e[0]][4], latest[e[0]][5]):
                latest[e[0]] = e
        return Counter((k, v) for k, v, _, d, *_ in latest.values() if d > 0)
    sums: Counter = Counter()
    for k, v, _, d, *_ in visible:
        sums[(k, v)] += d
    return Counter({kv: n for kv, n in sums.items() if n > 0})


def as_counter(table: pa.Table) -> Counter:
    return Counter(zip(table.column("k").to_pylist(), table.column("v").to_pylist(), strict=True))


# -- driving the table ----------------------------------------------------------------------
def batch_table(rows: list[tuple]) -> pa.Table:
    k, v, t, d = zip(*rows, strict=True)
    return pa.table({"k": pa.array(k, pa.string()), "v": pa.array(v, pa.int64()),
                     fmt.TIME_COLUMN: pa.array(t, pa.int64()), fmt.DIFF_COLUMN: pa.array(d, pa.int64())})


def commit_batch(uri: str, log: TableLog, rows: list[tuple]) -> int:
    """Commit rows as one or two parts (split at a random-ish point); returns the version."""
    table = batch_table(rows)
    cut = len(rows) // 2
    tables = [table.slice(0, cut), table.slice(cut)] if cut else [table]
    written = writer.write_parts(uri, tables, SCHEMA, write_id=fmt.new_write_id(), one_part_per_table=True)
    return writer.commit_parts(uri, written, log=log).version


def compact(uri: str, log: TableLog, envelope: str, since: int) -> list[tuple] | None:
    """Rewrite every part into one, consolidating history below ``since``; returns the new events
    as (k, v, time, diff) in the rewritten part's order (None: nothing to compact)."""
    snap = log.snapshot()
    since = max(since, snap.since)
    if since > snap.upper or not snap.parts:
        return None
    storage = log.storage
    raw = pa.concat_tables([reader.read_part(storage, snap, p) for p in snap.parts])
    raw = raw.sort_by([(SEQ_COLUMN, "ascending"), (POS_COLUMN, "ascending")])
    rows = list(zip(*(raw.column(c).to_pylist() for c in ("k", "v", fmt.TIME_COLUMN, fmt.DIFF_COLUMN)), strict=True))
    old, new = [r for r in rows if r[2] < since], [r for r in rows if r[2] >= since]
    if envelope == "upsert":
        latest: dict[Any, tuple] = {}
        for r in old:  # rows are in (seq, pos) order, so a later tie wins
            if r[0] not in latest or r[2] >= latest[r[0]][2]:
                latest[r[0]] = r
        old = sorted(latest.values(), key=lambda r: r[2])
    else:
        sums: Counter = Counter()
        for k, v, _, d in old:
            sums[(k, v)] += d
        old = [(k, v, since - 1, n) for (k, v), n in sums.items() if n != 0]
    out = old + new
    written = writer.write_parts(uri, [batch_table(out)] if out else [], SCHEMA, write_id=fmt.new_write_id())
    writer.commit_parts(uri, written, log=log, operation="compact", remove=[p.path for p in snap.parts],
                        since=since)
    return out


def run_steps(uri: str, envelope: str, plan: list[Any]) -> tuple[TableLog, list[tuple]]:
    log = TableLog.create(uri, SCHEMA, envelope, ["k"] if envelope == "upsert" else ())
    events: list[tuple] = []
    for step in plan:
        if step[0] == "compact":
            out = compact(uri, log, envelope, step[1])
            if out is not None:
                version = log.snapshot().version
                events = [(k, v, t, d, version, pos) for pos, (k, v, t, d) in enumerate(out)]
            continue
        since = log.snapshot().since
        rows = [r for r in step if r[2] >= since]  # writes below since are refused by design
        if rows:
            version = commit_batch(uri, log, rows)
            for pos, r in enumerate(rows):  # parts keep the commit's row order
                events.append((*r, version, pos))
    return log, events


def check(uri: str, envelope: str, plan: list[Any]) -> None:
    log, events = run_steps(uri, envelope, plan)
    snap = log.snapshot()
    for as_of in range(snap.since, MAX_TIME + 2):
        got = reader.scan(uri, as_of=as_of)
        assert as_counter(got) == model(envelope, events, as_of), f"as of {as_of}"
    if snap.since > 0:
        with pytest.raises(Exception, match="since frontier"):
            reader.scan(uri, as_of=snap.since - 1)
    assert as_counter(reader.scan(uri)) == model(envelope, events, 10**9)


@pytest.mark.parametrize("envelope", ["append", "upsert", "diff"])
def test_reads_as_of_any_time_match_the_model(envelope: str) -> None:
    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(plan=steps(envelope))
    def prop(plan: list[Any]) -> None:
        root = tempfile.mkdtemp(prefix="lading-prop-")
        try:
            check(f"file://{root}/t/", envelope, plan)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    prop()


@pytest.mark.spark
@pytest.mark.parametrize("envelope", ["upsert", "diff"])
def test_spark_reads_match_the_model(spark, envelope: str) -> None:  # type: ignore[no-untyped-def]
    @settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(plan=steps(envelope))
    def prop(plan: list[Any]) -> None:
        root = tempfile.mkdtemp(prefix="lading-prop-")
        try:
            uri = f"file://{root}/t/"
            log, events = run_steps(uri, envelope, plan)
            as_of = max(log.snapshot().since, MAX_TIME // 2)
            df = reader.read_table(spark, uri, as_of=as_of)
            got = Counter((r["k"], r["v"]) for r in df.collect())
            assert got == model(envelope, events, as_of)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    prop()


def test_upsert_ties_at_one_time_resolve_by_commit_then_position(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = f"file://{tmp_path}/t/"
    log = TableLog.create(uri, SCHEMA, "upsert", ["k"])
    commit_batch(uri, log, [("a", 1, 5, 1), ("a", 2, 5, 1)])
    assert as_counter(reader.scan(uri)) == Counter({("a", 2): 1})
    commit_batch(uri, log, [("a", 3, 5, 1)])
    assert as_counter(reader.scan(uri)) == Counter({("a", 3): 1})
    commit_batch(uri, log, [("a", 9, 4, 1)])  # older time: does not win
    got = reader.scan(uri)
    assert as_counter(got) == Counter({("a", 3): 1})
    assert pc.sum(pc.equal(got.column("v"), 9)).as_py() in (0, None)
