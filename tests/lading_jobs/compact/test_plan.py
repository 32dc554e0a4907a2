"""The planner and the frontier: pure functions of a table state and the spec, by tables of cases."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lading_jobs.compact import frontier
from lading_jobs.compact.plan import Options, Plan, plan, written_by_compaction
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.log.commits import Part, Snapshot, TableMeta
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats.part import ColumnStats, PartStats
from lading_spec.compaction import Since

SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string")])
MB = 1024**2
TARGET = 100 * MB


def part(name: str, mb: float, seq: int, *, compacted: bool = False, k: tuple[int, int] = (0, 9),
         times: tuple[int, int] = (10, 10), index: int = 0) -> Part:
    prefix = "c-1" if compacted else "w-1"
    stats = PartStats(rows=10, bytes=int(mb * MB), min_time=times[0], max_time=times[1],
                      columns={1: ColumnStats(0, k[0], k[1])})
    return Part(f"data/{prefix}/{name}.parquet", int(mb * MB), stats, seq, 0, index)


def snap(parts: list[Part], envelope: str = "append", since: int = 0) -> Snapshot:
    meta = TableMeta("t", envelope, ("k",) if envelope == "upsert" else ())
    return Snapshot("file:///t/", 99, meta, SCHEMA, tuple(parts), {}, {}, 100, since)


def names(p: Plan) -> list[list[str]]:
    return [[q.path.rsplit("/", 1)[1].split(".")[0] for q in g.parts] for g in p.groups]


def opts(**kw: object) -> Options:
    base: dict[str, object] = {"target_file_size": TARGET, "min_input_files": 2, "since": 5}
    base.update(kw)
    return Options(**base)  # type: ignore[arg-type]


CASES = [
    # (description, parts, envelope, options, expected groups)
    ("small parts pack into groups of at most the target",
     [part(f"p{i}", 30, i) for i in range(1, 7)], "append", opts(), [["p1", "p2", "p3"], ["p4", "p5", "p6"]]),
    ("groups are as many as next-fit makes, of even bytes (next-fit: 5, 5 and 2 parts)",
     [part(f"p{i}", 20, i) for i in range(1, 13)], "append", opts(),
     [[f"p{i}" for i in range(1, 5)], [f"p{i}" for i in range(5, 9)], [f"p{i}" for i in range(9, 13)]]),
    ("even groups that would pass the target keep next-fit's (7 × 30 MB: 90 + 120 either way)",
     [part(f"p{i}", 30, i) for i in range(1, 8)], "append", opts(),
     [["p1", "p2", "p3"], ["p4", "p5", "p6", "p7"]]),
    ("upsert runs are evened out each on its own, in part order",
     [*(part(f"a{i}", 20, i) for i in range(1, 8)), part("big", 80, 8), *(part(f"b{i}", 45, 8 + i) for i in (1, 2))],
     "upsert", opts(), [["a1", "a2", "a3", "a4"], ["a5", "a6", "a7"], ["b1", "b2"]]),
    ("a lone last part joins the group before it",
     [part(f"p{i}", 30, i) for i in range(1, 5)], "append", opts(), [["p1", "p2", "p3", "p4"]]),
    ("parts of half the target or more are not candidates",
     [part("big", 50, 1), part("p2", 10, 2), part("p3", 10, 3)], "append", opts(), [["p2", "p3"]]),
    ("below minInputFiles nothing happens",
     [part("p1", 10, 1), part("p2", 10, 2), part("p3", 10, 3)], "append", opts(min_input_files=4), []),
    ("compacted parts never trigger a run on their own",
     [part("c1", 10, 1, compacted=True), part("c2", 10, 2, compacted=True), part("p3", 10, 3)], "append",
     opts(), []),
    ("compacted parts ride along when fresh parts trigger",
     [part("c1", 10, 1, compacted=True), part("p2", 10, 2), part("p3", 10, 3)], "append", opts(),
     [["c1", "p2", "p3"]]),
    ("append tables pack in part order across big parts",
     [part("p1", 10, 1), part("big", 80, 2), part("p3", 10, 3)], "append", opts(), [["p1", "p3"]]),
    ("upsert groups are runs of consecutive parts: a big part ends a run",
     [part("p1", 10, 1), part("big", 80, 2), part("p3", 10, 3), part("p4", 10, 4)], "upsert", opts(),
     [["p3", "p4"]]),
    ("scope.filter keeps parts whose statistics may match",
     [part("a1", 10, 1, k=(0, 9)), part("b1", 10, 2, k=(100, 109)), part("a2", 10, 3, k=(5, 20)),
      part("b2", 10, 4, k=(200, 300))], "append",
     opts(scope=ex.bind(ex.Pred("lt", "k", 50), SCHEMA)), [["a1", "a2"]]),
    ("maxBytesPerRun takes whole groups while they fit",
     [part(f"p{i}", 30, i) for i in range(1, 7)], "append", opts(max_bytes_per_run=95 * MB),
     [["p1", "p2", "p3"]]),
]


@pytest.mark.parametrize(("what", "parts", "envelope", "options", "expected"), CASES, ids=[c[0] for c in CASES])
def test_plan_cases(what: str, parts: list[Part], envelope: str, options: Options,
                    expected: list[list[str]]) -> None:
    assert names(plan(snap(parts, envelope), options)) == expected


def test_upsert_outputs_inherit_the_last_parts_order_and_deletes_drop_only_without_older_rows_elsewhere() -> None:
    old_big = part("big", 80, 1, times=(1, 3))
    run = [part("p2", 10, 2, index=0), part("p3", 10, 2, index=1), part("p4", 10, 3)]
    alone = plan(snap(run, "upsert"), opts())
    assert [g.keep_order for g in alone.groups] == [(3, 0)]
    assert alone.groups[0].drop_deletes  # nothing outside may hold a row below since
    beside_old = plan(snap([old_big, *run], "upsert"), opts())
    assert names(beside_old) == [["p2", "p3", "p4"]] and not beside_old.groups[0].drop_deletes
    beside_new = plan(snap([part("new", 80, 9, times=(50, 60)), *run], "upsert"), opts())
    assert beside_new.groups[0].drop_deletes  # rows at or after since can never be older versions
    assert not plan(snap(run, "append"), opts()).groups[0].drop_deletes


def test_a_second_plan_over_the_outputs_of_the_first_finds_nothing() -> None:
    """Hysteresis: after a run, the same table (outputs now compacted) plans no group."""
    parts = [part(f"p{i}", 7 + i, i) for i in range(1, 12)] + [part("big", 70, 20)]
    first = plan(snap(parts), opts())
    assert first.groups
    used = {p.path for p in first.parts}
    outputs = [part(f"o{i}", g.bytes / MB * 0.9, 30 + i, compacted=True) for i, g in enumerate(first.groups)]
    after = [p for p in parts if p.path not in used] + outputs
    assert not plan(snap(after), opts()).groups
    assert all(written_by_compaction(o) for o in outputs)


@pytest.mark.parametrize(("since", "now_ms", "expected"), [
    (Since(retain_for=3600.0), 10_000_000, 10_000_000 - 3_600_000),
    (Since(retain_for=None, version=42), 0, 42),
    (Since(retain_for=None, time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)), 0, 1_767_225_600_000),
])
def test_requested_since(since: Since, now_ms: int, expected: int) -> None:
    assert frontier.requested(since, now_ms) == expected


@pytest.mark.parametrize(("current", "upper", "wanted", "expected"), [
    (10, 100, 50, 50),   # moves forward
    (60, 100, 50, 60),   # never back
    (10, 100, 500, 100),  # never past upper
])
def test_since_only_moves_forward_and_stays_at_or_below_upper(current: int, upper: int, wanted: int,
                                                             expected: int) -> None:
    assert frontier.advance(current, upper, wanted) == expected


def test_with_sort_by_append_parts_of_nearby_values_are_grouped_together() -> None:
    parts = [part("a", 30, 1, k=(0, 10)), part("z", 30, 2, k=(900, 990)), part("b", 30, 3, k=(11, 20)),
             part("y", 30, 4, k=(800, 899)), part("c", 30, 5, k=(21, 30)), part("x", 30, 6, k=(700, 799))]
    assert names(plan(snap(parts), opts())) == [["a", "z", "b"], ["y", "c", "x"]]
    assert names(plan(snap(parts), opts(cluster_column=1))) == [["a", "b", "c"], ["x", "y", "z"]]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 49), min_size=2, max_size=60))
def test_even_groups_cover_the_candidates_in_order_within_the_target(sizes: list[int]) -> None:
    parts = [part(f"p{i}", mb, i) for i, mb in enumerate(sizes)]
    groups = plan(snap(parts), opts()).groups
    assert [p for g in groups for p in g.parts] == parts  # every candidate, in part order
    bins: list[list[int]] = []  # next-fit's bins (its lone last part joining the one before)
    for mb in sizes:
        if bins and sum(bins[-1]) + mb <= 100:
            bins[-1].append(mb)
        else:
            bins.append([mb])
    if len(bins) >= 2 and len(bins[-1]) == 1:
        bins[-2].extend(bins.pop())
    next_fit = [sum(b) for b in bins]
    assert len(groups) == len(next_fit)
    sized = [round(g.bytes / MB) for g in groups]
    assert max(sized) <= max(next_fit)  # the largest group (the slowest task) never grows
    assert max(sized) <= 100 or sized == next_fit  # only next-fit's lone-last-part join passes the target


def test_upsert_siblings_sharing_an_order_are_taken_all_or_none() -> None:
    """An earlier run wrote one group as siblings s1..s4 sharing the order (5, 0); s4 is large. A
    group ending at s1 would give its outputs (holding p1's rows too) the order of s2..s4, which it
    leaves alone: a (key, time) tie between them would fall to row positions."""
    p1 = part("p1", 10, 1)
    sib = [part(f"s{i}", mb, 5, compacted=True) for i, mb in ((1, 10), (2, 10), (3, 10), (4, 60))]
    assert plan(snap([p1, *sib, part("p9", 10, 9)], "upsert"), opts()).groups == ()
    small = [part(f"s{i}", 10, 5, compacted=True) for i in range(1, 5)]
    together = plan(snap([p1, part("p2", 10, 2), *small], "upsert"), opts())
    assert names(together) == [["p1", "p2", "s1", "s2", "s3", "s4"]] and together.groups[0].keep_order == (5, 0)
    # maxBytesPerRun or a larger unit never splits siblings over two groups either
    many = [part(f"s{i}", 30, 5, compacted=True) for i in range(1, 7)]
    split = plan(snap([part("p0", 30, 1), part("p1", 30, 2), *many], "upsert"), opts(max_bytes_per_run=100 * MB))
    assert split.groups == ()


def _orders_respected(parts: list[Part], options: Options) -> None:
    result = plan(snap(parts, "upsert"), options)
    taken = {p.path for p in result.parts}
    for g in result.groups:
        members = {p.path for p in g.parts}
        assert g.keep_order == (g.parts[-1].seq, g.parts[-1].index)
        outside = [p for p in parts if p.path not in members and (p.seq, p.index) == g.keep_order]
        assert not outside, f"outputs would share order {g.keep_order} with {[p.path for p in outside]}"
    for p in parts:
        siblings = {q.path for q in parts if q.order == p.order}
        assert siblings <= taken or not (siblings & taken), f"siblings of {p.path} split"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 70), st.booleans()), min_size=2, max_size=25),
       st.sampled_from([40, 100, 250]), st.one_of(st.none(), st.integers(20, 300)))
def test_upsert_outputs_never_share_an_order_with_a_part_they_do_not_replace(
        shape: list[tuple[int, int, bool]], target_mb: int, budget_mb: int | None) -> None:
    """Parts with random sizes, several sharing orders (siblings of earlier runs); any target and
    maxBytesPerRun: every group takes all parts of an order or none of them."""
    parts = [part(f"p{i}", mb, seq, compacted=shared, index=0 if shared else i)
             for i, (seq, mb, shared) in enumerate(shape)]
    _orders_respected(parts, opts(target_file_size=target_mb * MB,
                                  max_bytes_per_run=None if budget_mb is None else budget_mb * MB))
