"""Flux reads our status right: kstatus's rules, applied to what the operator writes, per phase.

Flux (kustomize-controller health checks, `flux` CLI waits) computes a resource's
readiness with kstatus (sigs.k8s.io/cli-utils/pkg/kstatus). For a custom resource
without a type-specific rule, its documented rules are (pkg/kstatus/README.md,
"Conditions" and "The Ready Condition"; pkg/kstatus/status/generic.go,
checkGenericProperties and checkGeneration):

1. metadata.deletionTimestamp set                       -> Terminating
2. status.observedGeneration present and != generation  -> InProgress
3. condition Reconciling=True                           -> InProgress
4. condition Stalled=True                               -> Failed
5. condition Ready=True -> Current; Ready=False          -> InProgress
6. none of these                                        -> Current

``kstatus`` below is that reference, small enough to read against the source.
The statuses come from the operator's own builder (lading_operator.status), so
this test fails if the operator starts writing conditions Flux misreads.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lading_operator import status as status_builder
from lading_operator.phases import Phase

NOW = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def kstatus(obj: dict[str, Any]) -> str:
    """kstatus's Compute for a custom resource, as documented (see the module docstring)."""
    meta = obj.get("metadata", {})
    status = obj.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "Terminating"
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        return "InProgress"
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    if conditions.get("Reconciling", {}).get("status") == "True":
        return "InProgress"
    if conditions.get("Stalled", {}).get("status") == "True":
        return "Failed"
    ready = conditions.get("Ready")
    if ready is not None:
        return "Current" if ready.get("status") == "True" else "InProgress"
    return "Current"


def test_reference_follows_the_documented_rules() -> None:
    def obj(conds: dict[str, str], gen: int = 1, observed: int = 1, deleting: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"generation": gen}
        if deleting:
            meta["deletionTimestamp"] = "2030-01-01T00:00:00Z"
        return {"metadata": meta, "status": {"observedGeneration": observed, "conditions": [
            {"type": t, "status": s} for t, s in conds.items()]}}

    assert kstatus(obj({"Ready": "True"}, deleting=True)) == "Terminating"
    assert kstatus(obj({"Ready": "True"}, gen=2, observed=1)) == "InProgress"
    assert kstatus(obj({"Reconciling": "True", "Stalled": "True"})) == "InProgress"
    assert kstatus(obj({"Stalled": "True", "Ready": "True"})) == "Failed"
    assert kstatus(obj({"Ready": "False"})) == "InProgress"
    assert kstatus(obj({"Ready": "True"})) == "Current"
    assert kstatus(obj({})) == "Current"
    assert kstatus({"metadata": {"generation": 1}}) == "Current"


def resource(kind: str, phase: Phase, *, generation: int = 2, observed: int = 2,
             scheduled: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "lading.io/v1alpha1", "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", "generation": generation},
        "status": {
            "phase": str(phase),
            "observedGeneration": observed,
            "conditions": status_builder.conditions(None, phase, str(phase), "m", observed, NOW,
                                                    scheduled=scheduled, continuous=kind == "StreamCopy"),
        },
    }


# What a GitOps user needs Flux to see: work under way is InProgress, a failure is
# Failed, and every phase that will not change by itself is Current (or Failed), so
# that `flux` health checks finish instead of timing out.
ONE_SHOT: dict[Phase, str] = {
    Phase.PENDING: "InProgress", Phase.SUBMITTED: "InProgress", Phase.RUNNING: "InProgress",
    Phase.CANCELLING: "InProgress", Phase.SUCCEEDED: "Current", Phase.FAILED: "Failed",
    Phase.SCHEDULED: "Current", Phase.SUSPENDED: "Current",
}
EXPECTED: dict[str, dict[Phase, str]] = {
    "CopyJob": ONE_SHOT,
    "Compaction": ONE_SHOT,
    "StreamCopy": {Phase.PENDING: "InProgress", Phase.SUBMITTED: "InProgress",
                   Phase.SUSPENDED: "Current", Phase.FAILED: "Failed"},
}
CASES = [(kind, phase, want) for kind, table in EXPECTED.items() for phase, want in table.items()]


@pytest.mark.parametrize(("kind", "phase", "want"), CASES, ids=[f"{k}-{p}" for k, p, _ in CASES])
def test_phase_reads_right(kind: str, phase: Phase, want: str) -> None:
    assert kstatus(resource(kind, phase)) == want


@pytest.mark.parametrize("kind", ["CopyJob", "Compaction"])
def test_cancelled_is_final_for_flux(kind: str) -> None:
    assert kstatus(resource(kind, Phase.CANCELLED)) in ("Current", "Failed")


def test_running_stream_is_current() -> None:
    assert kstatus(resource("StreamCopy", Phase.RUNNING)) == "Current"


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_unobserved_generation_is_in_progress(kind: str) -> None:
    assert kstatus(resource(kind, Phase.SUCCEEDED if kind != "StreamCopy" else Phase.SUSPENDED,
                            generation=3, observed=2)) == "InProgress"


def test_scheduled_run_under_way_is_in_progress() -> None:
    assert kstatus(resource("CopyJob", Phase.RUNNING, scheduled=True)) == "InProgress"


def test_conditions_carry_observed_generation_and_the_kstatus_types() -> None:
    conds = resource("CopyJob", Phase.RUNNING)["status"]["conditions"]
    assert {c["type"] for c in conds} >= {"Ready", "Reconciling", "Stalled"}
    assert all(c["observedGeneration"] == 2 and c["lastTransitionTime"] for c in conds)


@pytest.mark.parametrize("kind", ["CopyJob", "Compaction"])
def test_a_scheduled_run_under_way_is_in_progress_for_every_running_kind(kind: str) -> None:
    assert kstatus(resource(kind, Phase.RUNNING, scheduled=True)) == "InProgress"
    assert kstatus(resource(kind, Phase.SCHEDULED, scheduled=True)) == "Current"


def test_a_compaction_as_the_operator_plans_it_reads_right_at_every_step() -> None:
    """Statuses from the operator's planner itself (not a builder call), one-shot and scheduled."""
    import json

    from lading_operator import reconcile as rc

    def obj(spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "lading.io/v1alpha1", "kind": "Compaction",
                "metadata": {"name": "c", "namespace": "ns", "uid": "u", "generation": 1,
                             "creationTimestamp": "2030-01-02T03:04:00Z"},
                "spec": spec, "status": status}

    def pod(result: dict[str, Any]) -> dict[str, Any]:
        return {"status": {"containerStatuses": [{"name": "spark-kubernetes-driver", "state": {
            "terminated": {"exitCode": 0 if "rows" in result else 1, "message": json.dumps(result)}}}]}}

    def step(spec: dict[str, Any], status: dict[str, Any], state: str | None = None,
             result: dict[str, Any] | None = None) -> dict[str, Any]:
        app = ({"metadata": {"name": status["sparkApplication"]}, "status": {"applicationState": {"state": state}}}
               if state else None)
        plan = rc.plan(rc.Observed(obj(spec, status), app, pod(result) if result else None, result is not None,
                                   NOW))
        return {**status, **{k: v for k, v in plan.status.items() if v is not None}}

    spec = {"table": "s3://lake/t/"}
    submitted = step(spec, {})
    assert submitted["phase"] == "Submitted" and kstatus(obj(spec, submitted)) == "InProgress"
    running = step(spec, submitted, "RUNNING")
    assert running["phase"] == "Running" and kstatus(obj(spec, running)) == "InProgress"
    done = step(spec, running, "COMPLETED", {"rows": 3, "partsBefore": 4, "partsAfter": 1})
    assert done["phase"] == "Succeeded" and kstatus(obj(spec, done)) == "Current"
    failed = step(spec, running, "FAILED", {"error": "scope.filter: no column x"})
    assert failed["phase"] == "Failed" and kstatus(obj(spec, failed)) == "Failed"
    cancelling = step({**spec, "cancel": True}, running, "RUNNING")
    assert cancelling["phase"] == "Cancelling" and kstatus(obj(spec, cancelling)) == "InProgress"
    cancelled = step({**spec, "cancel": True}, cancelling)
    assert cancelled["phase"] == "Cancelled" and kstatus(obj(spec, cancelled)) == "Current"

    nightly = {**spec, "schedule": "@every 1m"}
    scheduled = step(nightly, {})
    assert scheduled["phase"] == "Scheduled" and kstatus(obj(nightly, scheduled)) == "Current"
