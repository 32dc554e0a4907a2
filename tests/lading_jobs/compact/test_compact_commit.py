"""Landing a compaction under the table log's commit outcomes (issue 8): a ``compact`` commit whose
answer was lost (a 412 to its own first try, or an error after it landed) is recognised by its nonce
and stands with its parts; one whose outcome cannot be decided raises ``CommitStateUnknown`` and
deletes nothing (its outputs may be referenced); a rerun then completes and retention removes what
the undecided attempt left. Faults: tests/support/faults.py over the local filesystem (no Spark:
groups are rewritten in-process). Before the table log's nonces the lost-answer cases deleted the
outputs of the landed commit (ConflictError from ``commit(max_attempts=1)`` then meant "lost")."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest
from support.faults import Fault, FaultyStorage
from support.kv_tables import twelve_small_parts

from lading_jobs import storage as st
from lading_jobs.compact import retention
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.engine import Totals, compact
from lading_jobs.compact.plan import written_by_compaction
from lading_jobs.engine import RunContext
from lading_jobs.table import format as fmt
from lading_jobs.table import reader
from lading_jobs.table.log.commits import CommitStateUnknown, TableLog
from lading_spec.compaction import parse_compaction


def build(uri: str) -> int:
    """An append table of 12 small parts; its version."""
    log = twelve_small_parts(uri)
    return log.snapshot().version


def rows(uri: str) -> Counter:
    t = reader.scan(uri)
    return Counter(zip(t.column("k").to_pylist(), t.column("v").to_pylist(), strict=True))


def run(uri: str, storage: st.Storage) -> Totals:
    spec = parse_compaction({"table": uri, "since": {"version": 0}, "minInputFiles": 2})
    return compact(None, spec, RunContext(), storage=storage, runner=compact_task.in_process(storage))


def data_objects(uri: str) -> set[str]:
    return {o.uri.removeprefix(uri) for o in st.open_storage(uri).list_objects(f"{uri}{fmt.DATA_DIR}/")}


@pytest.mark.parametrize("action", ["lost_answer", "raise_after"])
def test_a_compact_commit_whose_answer_was_lost_stands_with_its_outputs(
        file_uri: Callable[[str], str], action: str) -> None:
    uri = file_uri("t/")
    version = build(uri)
    expected = rows(uri)
    faulty = FaultyStorage(st.open_storage(uri), Fault("put_if_absent", action, match=fmt.commit_name(version + 1)))
    totals = run(uri, faulty)
    snap = TableLog.open_existing(uri).snapshot()
    assert snap.version == version + 1, "committed once, not again on top of itself"
    assert totals.groups == 1 and totals.groups_lost == 0 and totals.parts_before == 12
    assert totals.parts_after == len(snap.parts) == 1 and written_by_compaction(snap.parts[0])
    assert {p.path for p in snap.parts} <= data_objects(uri), "a landed commit's outputs are all there"
    assert rows(uri) == expected


def test_an_undecidable_compact_commit_deletes_nothing_and_a_rerun_completes(
        file_uri: Callable[[str], str]) -> None:
    uri = file_uri("t/")
    version = build(uri)
    expected = rows(uri)
    before = data_objects(uri)
    faulty = FaultyStorage(st.open_storage(uri), Fault("put_if_absent", "raise", match=fmt.commit_name(version + 1)))
    with pytest.raises(CommitStateUnknown, match="commit state unknown"):
        run(uri, faulty)
    assert TableLog.open_existing(uri).snapshot().version == version
    stranded = data_objects(uri) - before
    assert stranded and all(p.startswith(f"{fmt.DATA_DIR}/c-") for p in stranded), "outputs left in place"
    assert data_objects(uri) >= before and rows(uri) == expected
    rerun = run(uri, st.open_storage(uri))
    assert rerun.groups == 1 and rows(uri) == expected
    log = TableLog.open_existing(uri)
    later = int(time.time() * 1000) + 2 * 3600 * 1000
    retention.apply(log.storage, retention.plan_sweep(log, later, 3600 * 1000, store_now=later))
    assert data_objects(uri) == {p.path for p in log.snapshot().parts}


def test_a_group_another_compaction_committed_first_is_dropped_and_the_run_plans_again(
        file_uri: Callable[[str], str]) -> None:
    """Issue 11: a lost race against another compaction re-plans instead of failing. While this run
    rewrites its group, another compaction commits the same parts: this run's outputs are never
    committed and not left behind; it plans again (nothing is left to do) and succeeds."""
    uri = file_uri("t/")
    version = build(uri)
    expected = rows(uri)
    storage = st.open_storage(uri)
    mine: list[str] = []
    local = compact_task.in_process(storage)

    def racing(stage: compact_task.Stage) -> list[str]:
        if not mine:
            mine.append(stage.plan.write_id)
            assert run(uri, st.open_storage(uri)).groups == 1  # the other compaction lands first
        return local(stage)

    spec = parse_compaction({"table": uri, "since": {"version": 0}, "minInputFiles": 2})
    totals = compact(None, spec, RunContext(), storage=storage, runner=racing)
    assert (totals.groups_lost, totals.groups, totals.parts_before, totals.parts_after) == (1, 0, 0, 0)
    assert "groupsReplanned" in totals.to_summary(uri, "r") and totals.reason, "planned again, found nothing"
    snap = TableLog.open_existing(uri).snapshot()
    assert snap.version == version + 1 and totals.version == snap.version, "only the other compaction committed"
    assert mine and not any(p.startswith(f"{fmt.DATA_DIR}/{mine[0]}/") for p in data_objects(uri)), \
        "the lost group's outputs are gone"
    assert not storage.list_pending_uploads(uri)
    assert rows(uri) == expected
