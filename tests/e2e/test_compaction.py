"""Compaction end to end: kopf operator (a process) → real API server → spark-operator stand-in → the real
Spark app → a lading table on moto S3, and back to status.

- one-shot: a table of many small parts (written by the table writer) compacts to one part; status
  carries the engine's figures (every status write passes the CRD's schema in the API server, which
  prunes or refuses what the schema lacks), ``kubectl get`` shows them, the Event says them;
- examples/compaction.yaml on a test table, every 10 s: the first run compacts, the second rewrites
  nothing and its retention deletes the parts the first one replaced;
- cancel while the run's uploads are pending (held at a test-only gate, tests/e2e/gate/):
  ``Cancelled``, the table reads the same rows at the same version, nothing pending, nothing left.

Tables are tiny: each test starts one or two Spark applications, which is what costs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

from harness.client import KubeClient, wait_until
from harness.fixtures import Kube
from harness.identities import Identity
from harness.spark_operator import SparkOperatorStandIn
from lading_jobs import storage as st
from lading_jobs.compact.plan import written_by_compaction
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema

from .conftest import API, REPO, OperatorProcess, apps_of, conditions

pytestmark = [pytest.mark.k8s, pytest.mark.s3, pytest.mark.slow]

SCHEMA = TableSchema.of([("id", "bigint"), ("created_at", "timestamp"), ("note", "string")])
GATE_DIR = Path(__file__).resolve().parent / "gate"
HELD = "/held/"  # the gate holds compaction uploads of tables whose URI contains this


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("gate")
    yield path
    (path / "release").touch()  # never leave a driver waiting


@pytest.fixture(scope="module")
def standin(kube: Kube, standin_identity: Identity, tmp_path_factory: pytest.TempPathFactory,
            gate: Path) -> Iterator[SparkOperatorStandIn]:
    """The stand-in, with the gate on the drivers' (and their Python workers') PYTHONPATH."""
    env = {"LADING_TEST_GATE": str(gate), "LADING_TEST_GATE_TABLE": HELD,
           "PYTHONPATH": os.pathsep.join([str(GATE_DIR), str(REPO / "spark_apps")])}
    with SparkOperatorStandIn(kube.url, token=standin_identity.token, ca=kube.ca, mode="spark",
                              log_dir=tmp_path_factory.mktemp("drivers"), extra_env=env) as s:
        yield s


def fill(uri: str, envelope: str, commits: int, per_commit: int = 2) -> TableLog:
    """``commits`` commits of ``per_commit`` parts of 20 rows; ids repeat across commits (upserts)."""
    log = TableLog.create(uri, SCHEMA, envelope, ["id"] if envelope == "upsert" else ())
    for c in range(commits):
        tables = []
        for p in range(per_commit):
            ids = [(c * 7 + p * 3 + i) % 30 for i in range(20)]
            tables.append(pa.table({
                "id": pa.array(ids, pa.int64()),
                "created_at": pa.array([dt.datetime(2026, 1, 1 + c, p, tzinfo=dt.UTC)] * 20,
                                       pa.timestamp("us", tz="UTC")),
                "note": [f"c{c}-p{p}-{i}" for i in range(20)]}))
        written = writer.write_parts(uri, tables, SCHEMA, write_id=fmt.new_write_id(), logical_time=c + 1,
                                     one_part_per_table=True)
        writer.commit_parts(uri, written, log=log)
    return log


def rows(uri: str) -> Counter[tuple[Any, ...]]:
    t = reader.scan(uri)
    return Counter(zip(*(t.column(c).to_pylist() for c in SCHEMA.names), strict=True))


def keys(s3_client: Any, bucket: str, prefix: str) -> list[str]:
    listing = s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for o in listing.get("Contents", [])]


def pending_uploads(s3_client: Any, bucket: str) -> list[str]:
    return [u["Key"] for u in s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


def connection(secret: str, endpoint: str) -> dict[str, Any]:
    return {"secretRef": {"name": secret}, "endpoint": endpoint, "region": "us-east-1"}


def create(kube: Kube, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return kube.client.create({"apiVersion": API, "kind": "Compaction",
                               "metadata": {"name": name, "namespace": namespace}, "spec": spec}, "compactions")


def wait_phase(client: KubeClient, namespace: str, name: str, phases: set[str], timeout: float = 240
               ) -> dict[str, Any]:
    obj = client.wait_for(API, "compactions", namespace, name,
                          lambda o: ((o or {}).get("status") or {}).get("phase") in phases,
                          timeout=timeout, interval=0.2)
    assert obj is not None
    return obj


def test_one_shot_compaction_succeeds_with_the_engines_figures_in_status(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        s3_client: Any, bucket: str, s3_secret: str, s3_endpoint: str) -> None:
    uri = f"s3://{bucket}/orders/"
    log = fill(uri, "upsert", commits=6)
    before, before_rows = log.snapshot(), rows(uri)
    assert len(before.parts) == 12
    spec = {"table": uri, "targetFileSize": "64MB", "minInputFiles": 4, "sortBy": ["id"],
            "retention": {"gracePeriod": "1h", "dryRun": True, "allowShortGracePeriod": True}, "connection": connection(s3_secret, s3_endpoint)}
    create(kube, kube_namespace, "orders", spec)
    done = wait_phase(kube.client, kube_namespace, "orders", {"Succeeded", "Failed"})
    status = done["status"]
    assert status["phase"] == "Succeeded", (status, operator_process.log())

    after = log.snapshot()
    assert len(after.parts) == 1 and written_by_compaction(after.parts[0])
    assert rows(uri) == before_rows  # same answers
    assert after.rows < before.rows  # versions older than since consolidated away
    # The engine's figures, as the table itself says they must be.
    assert status["response"] == {"rows": after.rows}
    assert (status["partsBefore"], status["partsAfter"], status["partsSummary"]) == (12, 1, "12 → 1")
    assert status["bytesBefore"] == sum(p.size for p in before.parts)
    assert status["bytesAfter"] == after.parts[0].size
    assert (status["rowsRead"], status["rowsWritten"]) == (before.rows, after.rows)
    assert status["rowsConsolidated"] == before.rows - after.rows > 0
    assert (status["sinceBefore"], status["since"], status["tableVersion"]) == (0, after.since, after.version)
    assert after.since > 0 and after.version == before.version + 1
    assert status["output"] == {"files": 1, "bytes": after.parts[0].size, "destination": uri,  # and the mirror's
                                "icebergMetadata": f"{uri}metadata/v{after.version}.metadata.json"}  # newest file
    assert status["retention"] == {"dryRun": True, "partsDeleted": 0, "orphansDeleted": 0, "bytesDeleted": 0,
                                   "uploadsAborted": 0, "wouldDelete": []}  # everything is younger than 1h
    assert "nothingToDo" not in status
    cond = conditions(done)
    assert cond["Succeeded"]["status"] == "True" and cond["Ready"]["status"] == "True"
    summary = cond["Ready"]["message"]
    assert summary.startswith("compacted 12 → 1 parts, ") and f"({before.rows - after.rows} consolidated)" in summary
    assert f"since 0 → {after.since}" in summary and "retention (dry run) would delete 0 parts" in summary
    events = kube.client.events_about(kube_namespace, "orders", "Succeeded")
    assert ("Succeeded", summary) in [(e["reason"], e["message"]) for e in events]
    assert "testing" not in json.dumps(done) + json.dumps(events)  # no credential anywhere
    # What users run: kubectl wait on the condition, kubectl get with the printer columns.
    kubectl = ["kubectl", "--kubeconfig", kube.kubeconfig, "-n", kube_namespace]
    waited = subprocess.run([*kubectl, "wait", "--for=condition=Succeeded", "compaction/orders", "--timeout=60s"],
                            capture_output=True, text=True, timeout=90)
    assert waited.returncode == 0, waited.stderr
    table = subprocess.run([*kubectl, "get", "lcp", "-o", "wide"], capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[0].split()
    assert header[:7] == ["NAME", "PHASE", "PARTS", "ROWS", "CONSOLIDATED", "SINCE", "AGE"], header
    row = next(line.split() for line in table.stdout.splitlines() if line.startswith("orders"))
    assert row[1:8] == ["Succeeded", "12", "→", "1", str(after.rows), str(before.rows - after.rows),
                        str(after.since)], row
    assert not pending_uploads(s3_client, bucket)


def test_the_example_scheduled_compacts_once_then_rewrites_nothing_and_retention_cleans_up(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        s3_client: Any, bucket: str, s3_secret: str, s3_endpoint: str) -> None:
    doc = yaml.safe_load((REPO / "examples" / "compaction.yaml").read_text())
    uri = f"s3://{bucket}/tables/orders/"
    log = fill(uri, "append", commits=4)
    before, before_rows = log.snapshot(), rows(uri)
    # The example as published, on a table of ours: every 10 s instead of nightly, and a grace period
    # short enough that the second run may delete what the first one replaced.
    spec = doc["spec"]
    assert spec["connection"]["secretRef"]["name"] == s3_secret
    spec.update(table=uri, schedule="@every 10s", connection=connection(s3_secret, s3_endpoint))
    spec["retention"].update(gracePeriod="1s", allowShortGracePeriod=True)
    doc["metadata"]["namespace"] = kube_namespace
    name = doc["metadata"]["name"]
    kube.client.create(doc, "compactions")

    def two_runs(obj: dict[str, Any] | None) -> bool:
        runs = ((obj or {}).get("status") or {}).get("lastRuns") or []
        return len([r for r in runs if r.get("phase") in ("Succeeded", "Failed")]) >= 2

    obj = kube.client.wait_for(API, "compactions", kube_namespace, name, two_runs, timeout=400, interval=0.5)
    kube.client.patch(API, "compactions", kube_namespace, name, {"spec": {"suspend": True}})
    assert obj is not None
    status = obj["status"]
    second, first = [r for r in status["lastRuns"] if r["phase"] in ("Succeeded", "Failed")][:2]
    assert first["phase"] == second["phase"] == "Succeeded", (status, operator_process.log())
    assert first["runId"] != second["runId"] and first["sparkApplication"] != second["sparkApplication"]
    after = log.snapshot()
    assert (first["partsBefore"], first["partsAfter"], first["rows"]) == (8, 1, after.rows)
    assert first["since"] == after.since and first["destination"] == uri
    # The second run rewrote nothing and committed nothing ...
    assert (second["partsBefore"], second["partsAfter"], second["rows"]) == (0, 0, 0)
    assert after.version == before.version + 1 and len(after.parts) == 1
    assert status["nothingToDo"] and status["partsSummary"] == "0 → 0" and status["tableVersion"] == after.version
    # ... and its retention deleted the 8 parts the first one replaced (older than the grace period).
    assert status["retention"]["dryRun"] is False and status["retention"]["partsDeleted"] == 8
    assert status["retention"]["orphansDeleted"] == 0 and len(status["retention"]["deleted"]) == 8
    data = keys(s3_client, bucket, "tables/orders/data/")
    assert data == [f"tables/orders/{after.parts[0].path}"]
    assert rows(uri) == before_rows and after.rows == sum(before_rows.values())
    assert conditions(obj)["Ready"]["status"] == "True" and status["nextScheduleTime"]
    def both_runs(events: list[dict[str, Any]]) -> bool:
        return len([e for e in events if e["reason"] == "Succeeded"]) >= 2

    messages = [e["message"] for e in kube.client.events_about(kube_namespace, name, "Succeeded", until=both_runs)
                if e["reason"] == "Succeeded"]
    assert any("compacted 8 → 1 parts" in m for m in messages), messages
    assert any("nothing to rewrite" in m and "retention deleted 8 parts and 0 orphans" in m for m in messages)


def test_cancel_while_uploads_are_pending_leaves_the_table_as_it_was(
        kube: Kube, kube_namespace: str, operator_process: OperatorProcess, standin: SparkOperatorStandIn,
        gate: Path, s3_client: Any, bucket: str, s3_secret: str, s3_endpoint: str) -> None:
    uri = f"s3://{bucket}{HELD}orders/"
    log = fill(uri, "upsert", commits=3)
    before, before_rows = log.snapshot(), rows(uri)
    spec = {"table": uri, "minInputFiles": 2, "connection": connection(s3_secret, s3_endpoint)}
    create(kube, kube_namespace, "held", spec)
    # The run reached its first output upload and is held there: an upload is pending.
    wait_until(lambda: (gate / "holding").exists(), bool, timeout=240, interval=0.2, what="the held upload")
    running = wait_phase(kube.client, kube_namespace, "held", {"Running"}, timeout=60)
    app_name = running["status"]["sparkApplication"]
    assert [k for k in pending_uploads(s3_client, bucket) if "/data/c-" in k]
    kube.client.patch(API, "compactions", kube_namespace, "held", {"spec": {"cancel": True}})
    done = wait_phase(kube.client, kube_namespace, "held", {"Cancelled", "Failed", "Succeeded"}, timeout=180)
    status = done["status"]
    assert status["phase"] == "Cancelled", (status, standin.driver_log(kube_namespace, app_name)[-3000:])
    assert status["response"] == {"cancelled": True}
    assert kube.client.get_or_none("sparkoperator.k8s.io/v1beta2", "sparkapplications", kube_namespace,
                                   app_name) is None
    assert apps_of(kube.client, kube_namespace) == []
    # The job got SIGTERM and aborted its uploads: the table is as it was, nothing pending, nothing left.
    assert log.snapshot().version == before.version and rows(uri) == before_rows
    assert pending_uploads(s3_client, bucket) == []
    assert [k for k in keys(s3_client, bucket, "held/orders/data/") if "/data/c-" in k] == []
    assert '"cancelled":true' in standin.driver_log(kube_namespace, app_name)
    for key in ("partsBefore", "partsAfter", "rowsConsolidated", "since", "retention"):
        assert key not in status, key
    assert conditions(done)["Ready"]["reason"] == "Cancelled"
    assert st.open_storage(uri).list_pending_uploads(uri) == []
