"""The kind descriptions: they agree with the CRDs, and one lifecycle runs every kind.

A Compaction is planned through exactly the same steps as a CopyJob: one-shot and
scheduled runs, the same status, retries, cancel and history; its result fills
its own status fields, which its CRD's status schema admits as written. Parked
kinds (StreamCopy, until its engine ships) stay Pending.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.admission import Admission
from harness.fixtures import load_crds
from lading_operator import kinds, phases
from lading_operator import reconcile as rc
from lading_operator.triggers import oneshot, parked, scheduled
from lading_spec.job import parse_job_document

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 1, 1, 2, 0, 5, tzinfo=dt.UTC)
RUNNING_COMPACTION = kinds.COMPACTION
PARKED_COMPACTION = dataclasses.replace(kinds.COMPACTION, engine_available=False)


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
    # and their own run ids: each run's files, intents and manifests are its own (schedule.slot_run_id)
    assert copy.status["runId"].startswith("20260101020000u") and compaction.status["runId"].startswith("20260101020000u")
    assert copy.status["runId"] != compaction.status["runId"]
    assert copy.create["metadata"]["name"] == f"nightly-copyjob-{copy.status['runId']}-1"
    assert compaction.create["metadata"]["name"] == f"nightly-compaction-{compaction.status['runId']}-1"


def test_a_compaction_runs_like_a_copyjob() -> None:
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
    assert ("Normal", "Succeeded", "compacted 120 → 8 parts, 900 B → 800 B") in done.events


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
    failed = rc.plan(rc.Observed(resource("Compaction", spec), now=NOW), kind=PARKED_COMPACTION)
    assert failed.phase == "Failed" and failed.status["response"]["error"].startswith("spec.targetFileSize")
    assert cond(failed, "Ready")["reason"] == "InvalidSpec"
    fixed = rc.plan(rc.Observed(resource("Compaction", example("Compaction"), failed.status, generation=2), now=NOW),
                    kind=PARKED_COMPACTION)
    assert fixed.phase == "Pending" and cond(fixed, "Ready")["reason"] == "EngineNotAvailable"
    assert fixed.create is None


def test_a_valid_compaction_is_no_longer_parked() -> None:
    spec = {k: v for k, v in example("Compaction").items() if k != "schedule"}
    plan = rc.plan(rc.Observed(resource("Compaction", spec), now=NOW))  # the kind as the operator registers it
    assert plan.phase == "Submitted" and plan.create is not None
    assert cond(plan, "Ready")["reason"] == "Submitted"


def test_the_storage_policy_checks_every_kinds_uris() -> None:
    seen: list[tuple[str, str]] = []

    def deny(namespace: str, uris: list[tuple[str, str]], spark: Any) -> str | None:
        seen.extend(uris)
        return f"{uris[0][0]}: {uris[0][1]!r} is outside the allowed storage"

    plan = rc.plan(rc.Observed(resource("Compaction", example("Compaction")), now=NOW), deny)
    assert seen == [("spec.table", example("Compaction")["table"])]
    assert plan.phase == "Failed" and cond(plan, "Ready")["reason"] == "Forbidden"
    assert kinds.streamcopy_uris(example("StreamCopy"))  # a StreamCopy names its table and source


# --- a Compaction's result in status -----------------------------------------------------

CRD = next(c for c in load_crds([REPO / "crds" / "compactions.lading.io.yaml"]))


@pytest.fixture(scope="module")
def adm() -> Iterator[Admission]:
    """The API server's write path for the Compaction CRD (crd-check --serve)."""
    with Admission([CRD]) as a:
        yield a


RESULT = {
    "rows": 40, "partsBefore": 20, "partsAfter": 1, "bytesBefore": 61_000, "bytesAfter": 9_000,
    "rowsRead": 500, "rowsWritten": 40, "rowsConsolidated": 460, "files": 1, "bytes": 9_000,
    "destination": "s3://lake/orders/", "groups": 1, "groupsReplanned": 1, "sinceBefore": 6, "since": 10,
    "tableVersion": 12, "runId": "r1", "durationSeconds": 3.5,
    "retention": {"dryRun": False, "partsDeleted": 3, "orphansDeleted": 1, "bytesDeleted": 4096,
                  "uploadsAborted": 2, "deleted": [f"data/w-{i}/part-00000.parquet" for i in range(4)]},
}


def finish(result: dict[str, Any] | None, status: dict[str, Any] | None = None, schedule: str | None = None,
           app_state: str = "COMPLETED") -> tuple[rc.Plan, dict[str, Any]]:
    """One run of a Compaction ends with ``result``: the plan, and the resource as the API server stores it."""
    spec = {k: v for k, v in example("Compaction").items() if k != "schedule"}
    if schedule:
        spec["schedule"] = schedule
    base = {"phase": "Running", "runId": "r2", "attempts": 1, "sparkApplication": "nightly-compaction-r2-1",
            "startTime": "2026-01-01T02:00:00Z", **(status or {})}
    message = json.dumps(result) if result is not None else ""
    plan = rc.plan(rc.Observed(resource("Compaction", spec, base), app(app_state, base["sparkApplication"]),
                               pod(message) if result is not None else None, True, NOW + dt.timedelta(minutes=1)))
    stored = {k: v for k, v in {**base, **plan.status}.items() if v is not None}
    for key in ("retention", "response"):  # merge patch: None inside a nested object removes the key
        if isinstance(stored.get(key), dict):
            stored[key] = {k: v for k, v in {**(base.get(key) or {}), **stored[key]}.items() if v is not None}
    return plan, stored


def admitted(adm: Admission, status: dict[str, Any]) -> dict[str, Any]:
    """The status as the API server stores it through the status subresource (strict field
    validation): nothing pruned, nothing refused."""
    obj = {"apiVersion": "lading.io/v1alpha1", "kind": "Compaction",
           "metadata": {"name": "nightly", "namespace": "data"}, "spec": {"table": "s3://lake/orders/"}}
    created = adm.create(obj, namespace="data", field_validation="Strict")
    assert created.allowed and created.object is not None, created.message
    stored = {**created.object, "metadata": {**created.object["metadata"], "resourceVersion": "1"}}
    answer = adm.update({**stored, "status": status}, stored, subresource="status", field_validation="Strict")
    assert answer.allowed and answer.object is not None, answer.message
    assert answer.object["status"] == status, "pruned or defaulted"
    return status


def test_a_compactions_result_fills_its_status_and_its_crd_admits_every_field(adm: Admission) -> None:
    plan, status = finish(RESULT)
    assert plan.phase == "Succeeded"
    admitted(adm, status)
    assert status["response"] == {"rows": 40}
    assert status["output"] == {"files": 1, "bytes": 9_000, "destination": "s3://lake/orders/"}
    assert (status["partsBefore"], status["partsAfter"], status["partsSummary"]) == (20, 1, "20 → 1")
    assert (status["bytesBefore"], status["bytesAfter"]) == (61_000, 9_000)
    assert (status["rowsRead"], status["rowsWritten"], status["rowsConsolidated"]) == (500, 40, 460)
    assert (status["sinceBefore"], status["since"], status["tableVersion"]) == (6, 10, 12)
    assert status["retention"] == {"dryRun": False, "partsDeleted": 3, "orphansDeleted": 1, "bytesDeleted": 4096,
                                   "uploadsAborted": 2, "deleted": RESULT["retention"]["deleted"]}
    assert "nothingToDo" not in status
    message = ("compacted 20 → 1 parts, 59.6 kB → 8.8 kB, 500 rows read, 40 written (460 consolidated), "
               "since 6 → 10; retention deleted 3 parts and 1 orphan (4.0 kB), aborted 2 uploads")
    assert ("Normal", "Succeeded", message) in plan.events
    assert cond(plan, "Ready")["message"] == message
    assert plan.finished_run is not None and plan.finished_run["rows"] == 40 and plan.finished_run["bytes"] == 9_000


def test_a_run_with_nothing_to_do_and_a_dry_run_say_so(adm: Admission) -> None:
    _, first = finish(RESULT)
    nothing = {"rows": 0, "partsBefore": 0, "partsAfter": 0, "bytesBefore": 0, "bytesAfter": 0, "rowsRead": 0,
               "rowsWritten": 0, "rowsConsolidated": 0, "sinceBefore": 10, "since": 10, "tableVersion": 12,
               "nothingToDo": "3 parts are smaller than half of targetFileSize; minInputFiles is 4",
               "retention": {"dryRun": True, "partsDeleted": 2, "orphansDeleted": 0, "bytesDeleted": 100,
                             "uploadsAborted": 0, "wouldDelete": ["data/w-1/a.parquet", "data/w-1/b.parquet"]}}
    plan, status = finish(nothing, {k: v for k, v in first.items() if k not in ("phase",)})
    admitted(adm, status)
    assert status["partsSummary"] == "0 → 0" and status["nothingToDo"] == nothing["nothingToDo"]
    # The real run's list of deleted paths does not survive a dry run (status is merge-patched).
    assert status["retention"] == {"dryRun": True, "partsDeleted": 2, "orphansDeleted": 0, "bytesDeleted": 100,
                                   "uploadsAborted": 0, "wouldDelete": ["data/w-1/a.parquet", "data/w-1/b.parquet"]}
    message = cond(plan, "Ready")["message"]
    assert "since 10," not in message and message.endswith(
        "since 10; nothing to rewrite: 3 parts are smaller than half of targetFileSize; minInputFiles is 4; "
        "retention (dry run) would delete 2 parts and 0 orphans (100 B) and abort 0 uploads")


def test_a_failed_run_clears_the_figures_of_the_run_before(adm: Admission) -> None:
    _, first = finish(RESULT)
    plan, status = finish({"error": "sortBy[0]: no column 'x' in the table"},
                          {k: v for k, v in first.items() if k != "phase"}, app_state="FAILED")
    admitted(adm, status)
    assert plan.phase == "Failed" and status["response"] == {"error": "sortBy[0]: no column 'x' in the table"}
    for key in kinds.COMPACTION_FIELDS:
        assert key not in status, key


def test_a_scheduled_runs_history_entry_has_its_parts_and_the_new_since(adm: Admission) -> None:
    plan, status = finish(RESULT, {"lastScheduleTime": "2026-01-01T02:00:00Z"}, schedule="0 2 * * *")
    admitted(adm, status)
    assert plan.phase == "Scheduled"
    (entry,) = status["lastRuns"]
    assert entry["phase"] == "Succeeded" and entry["rows"] == 40 and entry["destination"] == "s3://lake/orders/"
    assert (entry["partsBefore"], entry["partsAfter"], entry["rowsConsolidated"], entry["since"]) == (20, 1, 460, 10)
    assert cond(plan, "Ready")["message"].startswith("run r2 succeeded: compacted 20 → 1 parts")


def test_figures_the_schema_would_refuse_are_left_out_not_written(adm: Admission) -> None:
    odd = {**RESULT, "rowsConsolidated": -3, "partsAfter": "many", "retention": {"dryRun": False,
                                                                                   "deleted": ["x"] * 50}}
    _, status = finish(odd)
    admitted(adm, status)  # a refused status write would leave the run looking unfinished
    assert "rowsConsolidated" not in status and "partsAfter" not in status and "partsSummary" not in status
    assert len(status["retention"]["deleted"]) == kinds.RETENTION_LISTED


# --- a load CopyJob's result in status ---------------------------------------------------

COPYJOB_CRD = next(c for c in load_crds([REPO / "crds" / "copyjobs.lading.io.yaml"]))


@pytest.fixture(scope="module")
def copyjob_adm() -> Iterator[Admission]:
    """The API server's write path for the CopyJob CRD (crd-check --serve)."""
    with Admission([COPYJOB_CRD]) as a:
        yield a


def finish_copyjob(result: dict[str, Any], status: dict[str, Any] | None = None) -> tuple[rc.Plan, dict[str, Any]]:
    """One run of a load CopyJob ends with ``result``: the plan, and the status as merge-patched."""
    spec = {k: v for k, v in example("CopyJob").items() if k != "schedule"}
    base = {"phase": "Running", "runId": "r2", "attempts": 1, "sparkApplication": "nightly-r2-1",
            "startTime": "2026-01-01T02:00:00Z", **(status or {})}
    plan = rc.plan(rc.Observed(resource("CopyJob", spec, base), app("COMPLETED", base["sparkApplication"]),
                               pod(json.dumps(result)), True, NOW + dt.timedelta(minutes=1)))
    stored = {k: v for k, v in {**base, **plan.status}.items() if v is not None}
    stored["response"] = {k: v for k, v in {**(base.get("response") or {}), **stored["response"]}.items()
                          if v is not None}
    return plan, stored


def test_a_loads_rejected_and_filtered_rows_reach_status_response_and_the_crd_admits_them(
        copyjob_adm: Admission) -> None:
    load = {"rows": 7, "rowsRejected": 2, "rowsFiltered": 3, "files": 1, "bytes": 90, "runId": "r2",
            "destination": "s3://lake/t/", "manifest": "s3://lake/t/_lading_loads/r2.json"}
    plan, status = finish_copyjob(load)
    assert plan.phase == "Succeeded"
    assert status["response"] == {"rows": 7, "rowsRejected": 2, "rowsFiltered": 3}
    obj = {"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob", "metadata": {"name": "nightly", "namespace": "ns"},
           "spec": example("CopyJob")}
    created = copyjob_adm.create(obj, namespace="ns", field_validation="Strict")
    assert created.allowed and created.object is not None, created.message
    stored = {**created.object, "metadata": {**created.object["metadata"], "resourceVersion": "1"}}
    answer = copyjob_adm.update({**stored, "status": status}, stored, subresource="status", field_validation="Strict")
    assert answer.allowed and answer.object is not None, answer.message
    assert answer.object["status"]["response"] == status["response"], "pruned"
    # The next run without the counts (an unload, a cancel) removes them rather than keeping the old ones.
    _, after = finish_copyjob({"rows": 5, "files": 1}, {"response": status["response"]})
    assert after["response"] == {"rows": 5}
