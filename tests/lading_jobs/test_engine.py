"""The engine interface: one result shape, one Cancelled, a context long-running engines can poll."""

from __future__ import annotations

import threading

import pytest

from lading_jobs import engine
from lading_jobs.engine import Cancelled, JobResult, RunContext
from lading_jobs.main import engine_for


def test_a_result_is_exactly_one_of_rows_error_cancelled() -> None:
    assert JobResult(rows=3, summary={"files": 1}).to_dict() == {"rows": 3, "files": 1}
    assert JobResult(error="boom", summary={"rows": 5}).to_dict() == {"error": "boom"}
    assert JobResult(cancelled=True, error="late", summary={"x": 1}).to_dict() == {"cancelled": True, "x": 1}
    # the plain dicts engines built before the interface round-trip
    for d in ({"rows": 7, "files": 2}, {"error": "e", "files": 0}, {"cancelled": True}):
        assert JobResult.from_dict(d).to_dict() == d
    assert JobResult.from_dict({"error": "no files", "rows": None}).to_dict() == {"error": "no files"}


def test_the_context_raises_the_one_cancelled_and_wakes_a_waiting_engine() -> None:
    seen: list[dict[str, object]] = []
    ctx = RunContext(listener=seen.append)
    ctx.check()
    ctx.report(groups=1)
    ctx.report(rows=10)
    assert seen[-1] == {"groups": 1, "rows": 10}
    timer = threading.Timer(0.05, ctx.cancel.set)
    timer.start()
    assert ctx.wait(60) is True  # woken by the cancel, not by the timeout
    with pytest.raises(Cancelled):
        ctx.check()


def test_every_kind_names_an_engine_module_and_the_shipped_ones_load() -> None:
    assert set(engine.ENGINES) == {"CopyJob", "StreamCopy", "Compaction"}
    assert engine_for("CopyJob").kind == "CopyJob"  # type: ignore[union-attr]
    assert engine_for("StreamCopy").kind == "StreamCopy"  # type: ignore[union-attr]
    assert engine_for("Compaction").kind == "Compaction"  # type: ignore[union-attr]
    assert engine_for("NoSuchKind") is None


def test_both_copy_directions_raise_the_one_cancelled() -> None:
    from lading_jobs.load import job as load
    from lading_jobs.unload import job as unload

    assert load.Cancelled is Cancelled and unload.Cancelled is Cancelled
