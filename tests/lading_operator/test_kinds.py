"""The kind descriptions: they agree with the CRDs, and one lifecycle runs every kind.

A Compaction with its engine switch on (as it will be once its engine lands) is
planned through exactly the same steps as a CopyJob: one-shot and scheduled
runs, the same status, retries, cancel and history. Parked kinds stay Pending.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lading_operator import kinds, phases
from lading_operator import reconcile as rc
from lading_operator.triggers import oneshot, parked, scheduled
from lading_spec.job import parse_job_document

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 1, 1, 2, 0, 5, tzinfo=dt.UTC)
RUNNING_COMPACTION = dataclasses.replace(kinds.COMPACTION, engine_available=True)


def example(kind: str) -> dict[str, Any]:
    for path in sorted((REPO / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == kind:
                return dict(doc["spec"])
    raise AssertionError(f"no {kind} example")


def resource(kind: str, spec: dict[str, Any], status: dict[str, Any] | None = None, name: str = "nightly",
             **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "lading.io/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{kind}", "generation": 1,
                         "creationTimestamp": "2026-01-01T00:00:00Z", **meta},
            "spec": spec, "status": dict(status or {})}


def app(state: str, name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "status": {"applicationState": {"state": state}}}


def pod(message: str) -> dict[str, Any]:
    return {"status": {"containerStatuses": [{"name": "spark-kubernetes-driver",
                                              "state": {"terminated": {"exitCode": 0, "message": message}}}]}}


def cond(plan: rc.Plan, type_: str) -> dict[str, Any]:
    return next(c for c in plan.status["conditions"] if c["type"] == type_)


@pytest.mark.parametrize("kind", kinds.ALL, ids=lambda k: k.name)
def test_description_matches_the_crd(kind: kinds.Kind) -> None:
    crd = yaml.safe_load((REPO / "crds" / f"{kind.plural}.lading.io.yaml").read_text())
    assert crd["spec"]["names"]["kind"] == kind.name and crd["spec"]["names"]["plural"] == kind.plural
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    assert list(kind.phases) == schema["status"]["properties"]["phase"]["enum"]
    spec_fields = set(schema["spec"]["properties"])
    assert set(kind.operator_fields) <= spec_fields  # what stays out of the job document exists


@pytest.mark.parametrize("kind", [kinds.COPYJOB, RUNNING_COMPACTION], ids=lambda k: k.name)
def test_every_phase_a_running_kind_reaches_is_one_its_crd_accepts(kind: kinds.Kind) -> None:
    reached = phases.reachable(oneshot.TABLE) | phases.reachable(scheduled.TABLE)
    assert {str(p) for p in reached} <= set(kind.phases)


def test_parked_kinds_reach_only_pending_and_failed() -> None:
    for kind in kinds.ALL:  # whichever kind's switch is off, or is turned off again
        assert {str(p) for p in phases.reachable(parked.TABLE)} <= set(kind.phases)


def test_a_copyjob_and_a_compaction_of_one_name_get_their_own_applications() -> None:
    # Same name, same namespace, same slot: before the kind was in the name both runs were
    # "nightly-20260101020000-1", and the second adopted the first's SparkApplication.
    copy_spec = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://out/{run_time:%H}/"},
                 "schedule": "0 2 * * *"}
    copy = rc.plan(rc.Observed(resource("CopyJob", copy_spec), now=NOW))
    compaction = rc.plan(rc.Observed(resource("Compaction", example("Compaction")), now=NOW),
                         kind=RUNNING_COMPACTION)
    assert copy.create is not None and compaction.create is not None
    assert copy.status["runId"] == compaction.status["runId"] == "20260101020000"
    assert copy.create["metadata"]["name"] == "nightly-copyjob-20260101020000-1"
    assert compaction.create["metadata"]["name"] == "nightly-compaction-20260101020000-1"


def test_a_compaction_runs_like_a_copyjob_once_its_engine_is_on() -> None:
    spec = {k: v for k, v in example("Compaction").items() if k != "schedule"}
    first = rc.plan(rc.Observed(resource("Compaction", spec), now=NOW), kind=RUNNING_COMPACTION)
    assert first.phase == "Submitted" and first.create is not None
    created = first.create
    assert created["metadata"]["labels"]["lading.io/kind"] == "Compaction"
    assert created["metadata"]["ownerReferences"][0]["kind"] == "Compaction"
    doc = parse_job_document(created["spec"]["arguments"][1])
    assert doc.kind == "Compaction" and doc.spec["table"] == spec["table"]
    assert not set(doc.spec) & set(kinds.COMPACTION.operator_fields)
    status = {**first.status, "phase": "Running"}
    result = {"rows": 1200, "partsBefore": 120, "partsAfter": 8, "bytesBefore": 900, "bytesAfter": 800}
    done = rc.plan(rc.Observed(resource("Compaction", spec, status), app("COMPLETED", status["sparkApplication"]),
                               pod(json.dumps(result)), True, NOW + dt.timedelta(minutes=1)),
                   kind=RUNNING_COMPACTION)
    assert done.phase == "Succeeded" and done.status["response"]["rows"] == 1200
    assert (done.status["partsBefore"], done.status["partsAfter"], done.status["partsSummary"]) == (120, 8, "120 → 8")
    assert done.status["bytesAfter"] == 800 and done.finished_run is not None and done.finished_run["bytes"] == 800
    assert cond(done, "Succeeded")["status"] == "True"
    assert ("Normal", "Succeeded", "compacted 120 parts into 8 (1200 rows)") in done.events


def test_a_running_compaction_retries_and_cancels_like_a_copyjob() -> None:
    spec = {k: v for k, v in example("Compaction").items() if k != "schedule"}
    status = {"phase": "Running", "runId": "r1", "attempts": 1, "sparkApplication": "nightly-compaction-r1-1",
              "startTime": "2026-01-01T02:00:00Z"}
    retry = rc.plan(rc.Observed(resource("Compaction", {**spec, "backoffLimit": 1}, status),
                                app("FAILED", "nightly-compaction-r1-1"), pod('{"error": "lost a race"}'), True, NOW),
                    kind=RUNNING_COMPACTION)
    assert retry.phase == "Submitted" and retry.create is not None
    assert retry.create["metadata"]["name"] == "nightly-compaction-r1-2"
    cancelling = rc.plan(rc.Observed(resource("Compaction", {**spec, "cancel": True}, status),
                                     app("RUNNING", "nightly-compaction-r1-1"), None, False, NOW),
                         kind=RUNNING_COMPACTION)
    assert cancelling.phase == "Cancelling" and cancelling.delete_apps == ["nightly-compaction-r1-1"]
    cancelled = rc.plan(rc.Observed(resource("Compaction", {**spec, "cancel": True},
                                             {**status, **cancelling.status}), None, None, False, NOW),
                        kind=RUNNING_COMPACTION)
    assert cancelled.phase == "Cancelled" and cancelled.status["response"]["cancelled"] is True


def test_a_scheduled_compaction_waits_for_the_run_under_way() -> None:
    # Two compactions of one table only race: Forbid is a Compaction's default concurrencyPolicy.
    spec = example("Compaction")
    status = {"phase": "Running", "runId": "20260101020000", "attempts": 1,
              "sparkApplication": "nightly-compaction-20260101020000-1", "startTime": "2026-01-01T02:00:00Z",
              "lastScheduleTime": "2026-01-01T02:00:00Z"}
    next_day = dt.datetime(2026, 1, 2, 2, 0, 5, tzinfo=dt.UTC)
    plan = rc.plan(rc.Observed(resource("Compaction", spec, status), app("RUNNING", status["sparkApplication"]),
                               None, False, next_day), kind=RUNNING_COMPACTION)
    assert plan.create is None and plan.phase is None
    ended = rc.plan(rc.Observed(resource("Compaction", spec, status), app("COMPLETED", status["sparkApplication"]),
                                pod('{"rows": 5, "partsBefore": 9, "partsAfter": 1}'), True, next_day),
                    kind=RUNNING_COMPACTION)
    assert ended.phase == "Scheduled" and ended.status["lastRuns"][0]["rows"] == 5
    assert ended.status["partsSummary"] == "9 → 1"


@pytest.mark.parametrize("kind", ["Compaction", "StreamCopy"])
def test_parked_kinds_are_validated_then_pending(kind: str) -> None:
    spec = example(kind)
    off = dataclasses.replace(kinds.BY_NAME[kind], engine_available=False)  # its switch off
    plan = rc.plan(rc.Observed(resource(kind, spec, generation=2), now=NOW), kind=off)
    assert plan.phase == "Pending" and plan.status["observedGeneration"] == 2 and plan.create is None
    ready = cond(plan, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "EngineNotAvailable" and "later" in ready["message"]
    assert cond(plan, "Reconciling")["status"] == "False" and not plan.events
    # Nothing changes while nothing changes.
    again = rc.plan(rc.Observed(resource(kind, spec, plan.status, generation=2), now=NOW), kind=off)
    assert not again.status and not again.events and again.create is None
    # Cancel or suspend of a parked resource starts nothing either.
    cancelled = rc.plan(rc.Observed(resource(kind, {**spec, "suspend": True}, plan.status, generation=3), now=NOW),
                        kind=off)
    assert cancelled.create is None and cancelled.status.get("phase", "Pending") == "Pending"


def test_an_invalid_parked_spec_fails_naming_the_field_and_runs_nowhere_once_fixed() -> None:
    spec = dict(example("Compaction"), targetFileSize="huge")
    failed = rc.plan(rc.Observed(resource("Compaction", spec), now=NOW))
    assert failed.phase == "Failed" and failed.status["response"]["error"].startswith("spec.targetFileSize")
    assert cond(failed, "Ready")["reason"] == "InvalidSpec"
    fixed = rc.plan(rc.Observed(resource("Compaction", example("Compaction"), failed.status, generation=2), now=NOW))
    assert fixed.phase == "Pending" and cond(fixed, "Ready")["reason"] == "EngineNotAvailable"
    assert fixed.create is None


def test_the_storage_policy_checks_every_kinds_uris() -> None:
    seen: list[tuple[str, str]] = []

    def deny(namespace: str, uris: list[tuple[str, str]], spark: Any) -> str | None:
        seen.extend(uris)
        return f"{uris[0][0]}: {uris[0][1]!r} is outside the allowed storage"

    plan = rc.plan(rc.Observed(resource("Compaction", example("Compaction")), now=NOW), deny)
    assert seen == [("spec.table", "s3://warehouse/tables/orders/")]
    assert plan.phase == "Failed" and cond(plan, "Ready")["reason"] == "Forbidden"
    assert kinds.streamcopy_uris(example("StreamCopy"))  # a StreamCopy names its table and source
