"""The Argo CD health.lua of each kind, run in a real Lua runtime (lupa) for every phase.

Argo CD runs a health script with the resource as the global ``obj`` and reads
``status`` and ``message`` from the table it returns; so does ``health``
below, in a runtime without ``os`` and ``io`` (Argo CD's sandbox has neither).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import lupa
import pytest
import yaml

from lading_operator import status as status_builder
from lading_operator.phases import Phase

ROOT = Path(__file__).resolve().parents[2]
ARGO = ROOT / "gitops" / "argocd"
ARGO_STATUSES = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}

# The contract's phases per kind, and the health each must read as.
EXPECTED: dict[str, dict[str, str]] = {
    "CopyJob": {
        "Pending": "Progressing", "Submitted": "Progressing", "Running": "Progressing",
        "Cancelling": "Progressing", "Succeeded": "Healthy", "Failed": "Degraded",
        "Cancelled": "Suspended", "Scheduled": "Healthy", "Suspended": "Suspended",
    },
    "StreamCopy": {
        "Pending": "Progressing", "Submitted": "Progressing", "Running": "Healthy",
        "Suspended": "Suspended", "Failed": "Degraded",
    },
    "Compaction": {
        "Pending": "Progressing", "Submitted": "Progressing", "Running": "Progressing",
        "Cancelling": "Progressing", "Succeeded": "Healthy", "Failed": "Degraded", "Cancelled": "Suspended",
        "Scheduled": "Healthy", "Suspended": "Suspended",
    },
}
NOW = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def to_lua(lua: Any, value: Any) -> Any:
    if isinstance(value, dict):
        return lua.table_from({k: to_lua(lua, v) for k, v in value.items()})
    if isinstance(value, list):
        return lua.table_from([to_lua(lua, v) for v in value])
    return value


def health(kind: str, obj: dict[str, Any]) -> tuple[str, str]:
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    lua.execute("os = nil; io = nil; require = nil; dofile = nil; loadfile = nil")
    lua.globals().obj = to_lua(lua, obj)
    result = lua.execute((ARGO / f"lading.io_{kind}" / "health.lua").read_text())
    assert result is not None, "health.lua must return a table"
    status, message = result["status"], result["message"]
    assert status in ARGO_STATUSES, status
    assert isinstance(message, str)
    return status, message


def resource(kind: str, phase: str | None, *, generation: int = 3, observed: int | None = 3,
             error: str | None = None, rows: int | None = None, scheduled: bool = False,
             extra_status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A resource whose status is built by the operator's own status builder."""
    obj: dict[str, Any] = {
        "apiVersion": "lading.io/v1alpha1", "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", "generation": generation},
        "spec": {},
    }
    if phase is None:
        return obj
    message = error or f"{kind} is {phase}"
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": status_builder.conditions(None, Phase(phase), phase, message, observed or 0, NOW,
                                                scheduled=scheduled),
    }
    if observed is not None:
        status["observedGeneration"] = observed
    if error:
        status["response"] = {"error": error}
    if rows is not None:
        status["response"] = {"rows": rows}
    status.update(extra_status or {})
    obj["status"] = status
    return obj


@pytest.mark.parametrize(
    ("kind", "phase"), [(k, p) for k, phases in EXPECTED.items() for p in phases]
)
def test_every_phase_of_every_kind(kind: str, phase: str) -> None:
    error = "S3 AccessDenied on s3://b/x" if phase == "Failed" else None
    got, message = health(kind, resource(kind, phase, error=error))
    assert got == EXPECTED[kind][phase]
    if phase == "Failed":
        assert message == "S3 AccessDenied on s3://b/x"
    assert message


def test_phase_tables_match_the_contract() -> None:
    # every phase the metrics module (and the contract) knows has a health, and no more
    from lading_operator import metrics

    assert {k: set(v) for k, v in EXPECTED.items()} == {k: set(v) for k, v in metrics.PHASES.items()}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_no_status_is_missing(kind: str) -> None:
    assert health(kind, resource(kind, None))[0] == "Missing"
    obj = resource(kind, None)
    obj["status"] = {}
    assert health(kind, obj)[0] == "Missing"


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_unobserved_generation_is_progressing_even_when_terminal(kind: str) -> None:
    terminal = "Failed"
    status, message = health(kind, resource(kind, terminal, generation=4, observed=3, error="boom"))
    assert status == "Progressing"
    assert "4" in message


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_unknown_phase_is_unknown(kind: str) -> None:
    obj = resource(kind, "Pending")
    obj["status"]["phase"] = "Exploding"
    assert health(kind, obj) == ("Unknown", "Unknown phase Exploding")


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_stalled_condition_degrades_any_active_phase(kind: str) -> None:
    obj = resource(kind, "Running")
    for c in obj["status"]["conditions"]:
        if c["type"] == "Stalled":
            c.update(status="True", reason="InvalidSpec", message="to.files: unsupported URI")
    assert health(kind, obj) == ("Degraded", "to.files: unsupported URI")


def test_succeeded_reports_rows() -> None:
    obj = resource("CopyJob", "Succeeded", rows=1234)
    for c in obj["status"]["conditions"]:
        c["message"] = ""
    assert health("CopyJob", obj) == ("Healthy", "Succeeded: 1234 rows")


@pytest.mark.parametrize("kind", ["CopyJob", "Compaction"])
def test_schedule_is_degraded_when_the_latest_run_failed(kind: str) -> None:
    runs = [{"runId": "r2", "phase": "Failed", "error": "DeadlineExceeded after 600s"},
            {"runId": "r1", "phase": "Succeeded", "rows": 5}]
    status, message = health(kind, resource(kind, "Scheduled", extra_status={"lastRuns": runs}))
    assert status == "Degraded" and "DeadlineExceeded after 600s" in message
    runs.reverse()
    assert health(kind, resource(kind, "Scheduled", extra_status={"lastRuns": runs}))[0] == "Healthy"


def test_scheduled_run_in_progress_is_progressing() -> None:
    assert health("CopyJob", resource("CopyJob", "Running", scheduled=True))[0] == "Progressing"


def test_argocd_cm_patch_carries_the_same_scripts() -> None:
    cm = yaml.safe_load((ARGO / "argocd-cm.yaml").read_text())
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["name"] == "argocd-cm"
    for kind in EXPECTED:
        script = (ARGO / f"lading.io_{kind}" / "health.lua").read_text()
        assert cm["data"][f"resource.customizations.health.lading.io_{kind}"] == script
    assert len(cm["data"]) == len(EXPECTED)


def test_gitops_doc_points_at_the_scripts() -> None:
    doc = (ROOT / "docs" / "gitops.md").read_text()
    for kind in EXPECTED:
        assert f"resource.customizations.health.lading.io_{kind}" in doc
        assert f"gitops/argocd/lading.io_{kind}/health.lua" in doc


def test_a_succeeded_compaction_says_what_it_did() -> None:
    """The status the operator writes when a Compaction's run ends, through Argo CD's script."""
    import json

    from lading_operator import reconcile as rc

    result = {"rows": 30, "partsBefore": 12, "partsAfter": 1, "bytesBefore": 23_940, "bytesAfter": 2_311,
              "rowsRead": 240, "rowsWritten": 30, "rowsConsolidated": 210, "sinceBefore": 0, "since": 7}
    status = {"phase": "Running", "runId": "r", "attempts": 1, "sparkApplication": "c-compaction-r-1",
              "startTime": "2030-01-02T03:00:00Z"}
    obj: dict[str, Any] = {"apiVersion": "lading.io/v1alpha1", "kind": "Compaction",
                           "metadata": {"name": "c", "namespace": "ns", "uid": "u", "generation": 1},
                           "spec": {"table": "s3://lake/t/"}, "status": status}
    pod = {"status": {"containerStatuses": [{"name": "spark-kubernetes-driver",
                                             "state": {"terminated": {"exitCode": 0, "message": json.dumps(result)}}}]}}
    app = {"metadata": {"name": "c-compaction-r-1"}, "status": {"applicationState": {"state": "COMPLETED"}}}
    plan = rc.plan(rc.Observed(obj, app, pod, True, NOW))
    obj["status"] = {**status, **plan.status}
    assert health("Compaction", obj) == ("Healthy", "compacted 12 → 1 parts, 23.4 kB → 2.3 kB, 240 rows read, "
                                                    "30 written (210 consolidated), since 0 → 7")
