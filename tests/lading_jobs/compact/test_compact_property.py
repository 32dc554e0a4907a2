"""Property: random appends, upserts with deletes and diffs, with compactions at random ``since``
values in between: for every T ≥ since, the rows as of T are the same before and after each
compaction; and N updates to K keys compact to K rows.

The compactions are the engine's own run (``compact.engine.compact``: frontier, planner,
consolidation, hard-ceiling part writer, commit), with each group rewritten in this process
(``runner``) instead of a Spark task, so hypothesis can try hundreds of plans; a test in
test_compact_spark.py runs the same path through Spark tasks.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from lading_jobs import storage as st
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.engine import compact
from lading_jobs.compact.plan import written_by_compaction
from lading_jobs.engine import RunContext
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.compaction import parse_compaction

SCHEMA = TableSchema.of([("k", "string"), ("v", "bigint"), ("f", "double")])
KEYS = ["a", "b", "c", "d", None]
MAX_TIME = 12
FLOATS = [0.0, -0.0, 1.5, float("nan")]

row = s.tuples(s.sampled_from(KEYS), s.integers(0, 3), s.sampled_from(FLOATS), s.integers(1, MAX_TIME))
append_batch = s.lists(row, min_size=1, max_size=8).map(lambda rs: [(*r, 1) for r in rs])
upsert_batch = s.lists(s.tuples(row, s.booleans()), min_size=1, max_size=8).map(
    lambda rs: [(k, None if d else v, None if d else f, t, -1 if d else 1) for (k, v, f, t), d in rs])
diff_batch = s.lists(s.tuples(row, s.sampled_from([-2, -1, 1, 2])), min_size=1, max_size=8).map(
    lambda rs: [(*r, d) for r, d in rs])
BATCHES = {"append": append_batch, "upsert": upsert_batch, "diff": diff_batch}
# (since, targetFileSize in kB, minInputFiles, sortBy, maxBytesPerRun in kB, scope.filter): a sorted
# append or diff rewrite of more than one group sorts its groups as one (compact.rangesort; NaN,
# -0.0 and NULL keys included). Targets small enough that a group's outputs are several sibling
# parts sharing one order, then larger ones with a budget or a scope that end a later group
# among those siblings (an upsert read then broke a (key, time) tie by row position).
SORTS = [(), ("k",), ("f", "v"), ("v",)]
TARGETS = [16, 24, 40, 96]
BUDGETS = [None, None, 12, 40]
SCOPES = [None, None, "k = 'a'", "k <= 'b'", "v >= 2"]
compaction = s.tuples(s.just("compact"), s.integers(0, MAX_TIME + 2), s.sampled_from(TARGETS),
                      s.sampled_from([2, 3]), s.sampled_from(SORTS), s.sampled_from(BUDGETS), s.sampled_from(SCOPES))
# A bulk step writes one part too big to be a candidate (it splits upsert runs, holds old versions
# and ties of many keys): (seed, earliest time).
bulk = s.tuples(s.just("bulk"), s.integers(0, 2**32 - 1), s.integers(1, MAX_TIME))


# A tie step: one commit of two parts holding the same keys at the same times (one load writes all
# its parts at one time), with other values: only part order decides which version wins.
tie = s.lists(row, min_size=1, max_size=6).map(
    lambda rs: [(k, v, f, t, 1) for k, v, f, t in rs] + [(k, v + 10, f, t, 1) for k, v, f, t in rs])


def steps(envelope: str) -> s.SearchStrategy[list[Any]]:
    step = s.one_of(BATCHES[envelope], BATCHES[envelope], compaction, bulk, tie)
    return s.lists(step, min_size=2, max_size=16)


def bulk_rows(envelope: str, seed: int, first_time: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    n = 3000
    times = rng.integers(first_time, MAX_TIME + 1, n)
    values = rng.integers(0, 2**62, n)
    diffs = {"append": np.ones(n, dtype=np.int64), "upsert": rng.choice([1, 1, 1, -1], n),
             "diff": rng.choice([-1, 1, 2], n)}[envelope]
    out = []
    for i in range(n):
        key, d = KEYS[i % len(KEYS)], int(diffs[i])
        deleted = envelope == "upsert" and d < 0
        out.append((key, None if deleted else int(values[i]), None if deleted else 0.25, int(times[i]), d))
    return out


def batch_table(rows: list[tuple]) -> pa.Table:
    k, v, f, t, d = zip(*rows, strict=True)
    return pa.table({"k": pa.array(k, pa.string()), "v": pa.array(v, pa.int64()), "f": pa.array(f, pa.float64()),
                     fmt.TIME_COLUMN: pa.array(t, pa.int64()), fmt.DIFF_COLUMN: pa.array(d, pa.int64())})


def rows_as_of(uri: str, as_of: int | None) -> Counter:
    t = reader.scan(uri, as_of=as_of)
    cols = [t.column(c).to_pylist() for c in ("k", "v", "f")]
    # NaN != NaN: compare floats by their text
    return Counter((k, v, repr(f)) for k, v, f in zip(*cols, strict=True))


def run_compaction(uri: str, since: int, target_kb: int, min_files: int, sort_by: tuple[str, ...] = (),
                   budget_kb: int | None = None, scope: str | None = None, spark: Any = None) -> int:
    """The run's groups."""
    doc: dict[str, Any] = {"table": uri, "since": {"version": since}, "targetFileSize": f"{target_kb}kB",
                           "minInputFiles": min_files, "sortBy": list(sort_by)}
    if budget_kb is not None:
        doc["maxBytesPerRun"] = f"{budget_kb}kB"
    if scope is not None and spark is not None:  # binding a scope.filter takes Spark's analyser
        doc["scope"] = {"filter": scope}
    storage = st.open_storage(uri)
    return compact(spark, parse_compaction(doc), RunContext(), storage=storage,
                   runner=compact_task.in_process(storage)).groups


def check(envelope: str, plan: list[Any], groups: list[int] | None = None, spark: Any = None) -> int:
    """Runs ``plan``, checking every compaction; the parts compactions wrote (and each run's
    groups appended to ``groups``). Scopes are drawn only when ``spark`` is given."""
    root = tempfile.mkdtemp(prefix="lading-compact-prop-")
    uri = f"file://{root}/t/"
    rewritten = 0
    try:
        log = TableLog.create(uri, SCHEMA, envelope, ["k"] if envelope == "upsert" else ())
        for step in plan:
            if step[0] == "compact":
                _, wanted, target_kb, min_files, *rest = step
                sort_by, budget_kb, scope = (*rest, None, None, None)[:3] if rest else ((), None, None)
                before_snap = log.snapshot()
                since = max(before_snap.since, min(wanted, before_snap.upper))
                times = [None, *range(since, MAX_TIME + 2)]
                before = {t: rows_as_of(uri, t) for t in times}
                ran = run_compaction(uri, wanted, target_kb, min_files, sort_by or (), budget_kb, scope, spark)
                if groups is not None:
                    groups.append(ran)
                after_snap = log.snapshot()
                assert after_snap.since == since
                rewritten += sum(1 for p in after_snap.parts if written_by_compaction(p))
                for t in times:
                    assert rows_as_of(uri, t) == before[t], f"as of {t} (since {since})"
                continue
            if step[0] == "bulk":
                step = bulk_rows(envelope, step[1], step[2])
            rows = [r for r in step if r[3] >= log.snapshot().since]  # writes below since are refused
            if not rows:
                continue
            table = batch_table(rows)
            cut = len(rows) // 2
            pieces = [table.slice(0, cut), table.slice(cut)] if cut else [table]
            written = writer.write_parts(uri, pieces, SCHEMA, write_id=fmt.new_write_id(), one_part_per_table=True)
            writer.commit_parts(uri, written, log=log)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rewritten


def _property(envelope: str, spark: Any = None, examples: int = 25) -> None:
    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(plan=steps(envelope))
    def prop(plan: list[Any]) -> None:
        check(envelope, plan, spark=spark)

    prop()


@pytest.mark.slow
def test_append_reads_as_of_any_time_at_or_after_since_are_unchanged_by_compaction() -> None:
    _property("append")


@pytest.mark.slow
@pytest.mark.spark
def test_upsert_reads_as_of_any_time_at_or_after_since_are_unchanged_by_compaction(spark: Any) -> None:
    """Also with scope.filter (bound by Spark's analyser), so scoped runs end groups anywhere."""
    _property("upsert", spark)


@pytest.mark.slow
def test_diff_reads_as_of_any_time_at_or_after_since_are_unchanged_by_compaction() -> None:
    _property("diff")


def test_the_property_exercises_real_rewrites() -> None:
    """The examples above are not vacuous: a typical plan does rewrite parts."""
    batches = [[("a", i, 0.0, i + 1, 1), ("b", i, 1.5, i + 1, 1)] for i in range(6)]
    for envelope in ("append", "upsert", "diff"):
        assert check(envelope, [*batches, ("compact", 4, 200, 2)]) > 0


def test_n_updates_to_k_keys_compact_to_k_rows(tmp_path: Any) -> None:
    uri = f"file://{tmp_path}/t/"
    n, k = 600, 12
    log = TableLog.create(uri, SCHEMA, "upsert", ["k"])
    for batch in range(20):  # 20 commits of 30 updates each, every key updated many times
        rows = [(f"key-{i % k}", batch * 1000 + i, 0.5, batch + 1, 1) for i in range(batch * 30, batch * 30 + 30)]
        writer.commit_parts(uri, writer.write_parts(uri, [batch_table(rows)], SCHEMA, write_id=fmt.new_write_id()),
                            log=log)
    latest = rows_as_of(uri, None)
    assert log.snapshot().rows == n and sum(latest.values()) == k
    run_compaction(uri, 1000, 512, 2)
    snap = log.snapshot()
    assert snap.rows == k, "storage proportional to distinct keys"
    assert rows_as_of(uri, None) == latest


def test_upsert_ties_with_a_later_part_outside_the_group_resolve_as_before() -> None:
    """Key a at time 5 in two small parts, then in a big part (later: it wins the tie), then two
    small parts: the first run is rewritten, and must not win the tie against the big part."""
    plan = [[("a", 1, 0.0, 5, 1)], [("a", 2, 0.0, 5, 1)], ("bulk", 7, 5),
            [("b", 1, 0.0, 6, 1)], [("b", 2, 0.0, 6, 1)], ("compact", 0, 24, 2)]
    assert check("upsert", plan) > 0


def test_upsert_deletes_are_kept_while_an_older_version_lives_outside_the_group() -> None:
    """Old versions of every key in a big part; small parts delete key a below since: the delete
    marker must survive the rewrite, or a's old version would come back."""
    plan = [("bulk", 3, 1), [("a", None, None, 12, -1)], [("b", 9, 0.0, 12, 1)], ("compact", 13, 24, 2)]
    assert check("upsert", plan) > 0


@pytest.mark.parametrize("envelope", ["append", "diff"])
def test_a_sorted_rewrite_of_several_groups_keeps_every_answer(envelope: str) -> None:
    """Keys NULL, NaN, -0.0 and 0.0 among ordinary ones, sorted as one across groups (by f, then
    by the string k with NULLs): reads as of every time at or after since are unchanged."""
    sign = -1 if envelope == "diff" else 1
    batches = [[(KEYS[(i + j) % 5], i % 3, FLOATS[(i * 3 + j) % 4], 1 + i % 9, 1) for j in range(6)]
               + [("a", 1, 0.25, 2, 1)] for i in range(14)]
    batches.append([("a", 1, 0.25, 3, sign)])  # the same row again (a retraction in a diff table)
    for sort_by in (("f", "v"), ("k",)):
        groups: list[int] = []
        assert check(envelope, [*batches, ("compact", 11, 24, 2, sort_by)], groups) >= 2
        assert groups[0] >= 2, "several groups: sorted as one"
