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
