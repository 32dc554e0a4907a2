"""Conditions and status pieces."""

from __future__ import annotations

import datetime as dt

from lading_operator import status as st
from lading_operator.phases import Phase

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)


def by_type(conditions: list[dict]) -> dict[str, dict]:  # type: ignore[type-arg]
    return {c["type"]: c for c in conditions}


def test_condition_values_per_phase() -> None:
    expected = {
        Phase.SUBMITTED: {"Ready": "False", "Succeeded": "Unknown", "Failed": "False", "Reconciling": "True", "Stalled": "False"},
        Phase.RUNNING: {"Ready": "False", "Succeeded": "Unknown", "Failed": "False", "Reconciling": "True", "Stalled": "False"},
        Phase.SUCCEEDED: {"Ready": "True", "Succeeded": "True", "Failed": "False", "Reconciling": "False", "Stalled": "False"},
        Phase.FAILED: {"Ready": "False", "Succeeded": "False", "Failed": "True", "Reconciling": "False", "Stalled": "True"},
        Phase.CANCELLED: {"Ready": "True", "Succeeded": "False", "Failed": "False", "Reconciling": "False", "Stalled": "False"},
        Phase.SCHEDULED: {"Ready": "True", "Succeeded": "Unknown", "Failed": "False", "Reconciling": "False", "Stalled": "False"},
    }
    for phase, want in expected.items():
        got = by_type(st.conditions(None, phase, "R", "m", 3, T0))
        assert {k: v["status"] for k, v in got.items()} == want, phase
        assert all(c["observedGeneration"] == 3 and c["reason"] == "R" for c in got.values())


def test_transition_time_moves_only_on_change() -> None:
    first = st.conditions(None, Phase.SUBMITTED, "Submitted", "a", 1, T0)
    second = by_type(st.conditions(first, Phase.RUNNING, "Running", "b", 1, T1))
    assert second["Ready"]["lastTransitionTime"] == st.timestamp(T0)       # False → False
    third = by_type(st.conditions(list(second.values()), Phase.SUCCEEDED, "Succeeded", "c", 1, T1))
    assert third["Ready"]["lastTransitionTime"] == st.timestamp(T1)        # False → True


def test_response_and_output_from_result() -> None:
    result = {"rows": 42, "files": 2, "bytes": 1234, "manifest": "s3://b/p/_manifest.json",
              "destination": "s3://b/p/", "runId": "r"}
    assert st.response_from_result(result) == {"rows": 42}
    assert st.output_from_result(result) == {"files": 2, "bytes": 1234, "manifest": "s3://b/p/_manifest.json",
                                             "destination": "s3://b/p/"}
    loaded = {**result, "icebergMetadata": "s3://b/t/metadata/v7.metadata.json"}  # a load: its table's mirror
    assert st.output_from_result(loaded)["icebergMetadata"] == "s3://b/t/metadata/v7.metadata.json"
    assert "icebergMetadata" not in st.output_from_result({**result, "icebergMetadata": ""})
    assert st.response_from_result({"error": "boom"}) == {"error": "boom"}
    assert st.response_from_result({"cancelled": True}) == {"cancelled": True}
    assert st.response_from_result(None) == {}


def test_history_limits_keep_newest_per_outcome() -> None:
    runs = [{"runId": str(i), "phase": "Succeeded" if i % 2 else "Failed"} for i in range(6, 0, -1)]
    kept, dropped = st.trim_history(runs, successful_limit=2, failed_limit=1)
    assert [r["runId"] for r in kept] == ["6", "5", "3"]
    assert [r["runId"] for r in dropped] == ["4", "2", "1"]
