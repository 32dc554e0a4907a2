"""Unloads whose answers are lost on the wire (issue 46), through the fault-injecting proxy
(tests/support/faultproxy.py): the driver and the tasks talk to S3 only through it
(``connection.endpoint``), with the real client and its own retries.

On 0440a14: a connection reset after the conditional PUT of ``_lading_manifest.json`` landed made
botocore's resend answer 412, and the run concluded "another run wrote …" and deleted its own
published files, leaving a manifest naming six missing files; a rerun of the same run id then
reported that manifest's rows. A reset after a ``CompleteMultipartUpload`` landed failed the run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import faults
from support.faultproxy import Fault, FaultProxy, Kind, Rates
from support.moto_atomic import completed_uploads_forgotten
from support.unload import job_doc, pending_run, s3_keys, s3_pending

from lading_jobs.storage import S3Storage, StorageError
from lading_jobs.unload import commit
from lading_jobs.unload.job import run_unload
from lading_spec.copyjob import parse_copyjob

pytestmark = [pytest.mark.spark, pytest.mark.s3]
ROWS = 600
QUERY = f"SELECT id, repeat('x', 20) AS pad FROM range(0, {ROWS}, 1, 3)"


def _run(spark: Any, dest: str, run_id: str, endpoint: str, mode: str = "error") -> dict[str, Any]:
    doc = job_doc({"from": {"query": QUERY}, "to": {"files": dest, "format": "csv", "ifExists": mode},
                   "connection": {"endpoint": endpoint}}, run_id=run_id)
    try:
        return run_unload(spark, doc, parse_copyjob(doc.spec))
    except Exception as e:  # noqa: BLE001 - what the app would report
        return {"error": f"{type(e).__name__}: {e}"}


def _published(s3: Any, bucket: str, prefix: str, manifest_key: str = "_lading_manifest.json") -> dict[str, Any]:
    """The manifest under ``prefix``; asserts every file it names is there with its rows, and nothing
    else but manifests is (nor pending)."""
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=prefix + manifest_key)["Body"].read())
    keys = set(s3_keys(s3, bucket, prefix))
    named = {prefix + f["path"] for f in manifest["files"]}
    assert named <= keys, f"the manifest names missing files: {sorted(named - keys)}"
    ids = sorted(int(line.split(",")[0]) for f in manifest["files"]
                 for line in s3.get_object(Bucket=bucket, Key=prefix + f["path"])["Body"].read().decode().splitlines()
                 if line and not line.startswith("id"))
    assert ids == list(range(ROWS))
    return manifest


def test_a_reset_after_the_manifest_landed_keeps_the_export(spark: Any, s3_client: Any, bucket: str,
                                                             fault_proxy: FaultProxy) -> None:
    dest, prefix = f"s3://{bucket}/e/", "e/"
    rule = fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER, match="_lading_manifest.json")
    result = _run(spark, dest, "run-1", fault_proxy.url)
    assert rule.fired
    assert result.get("rows") == ROWS, result
    assert _published(s3_client, bucket, prefix)["runId"] == "run-1"
    assert not any("_lading_intent" in k for k in s3_keys(s3_client, bucket, prefix))
    assert s3_pending(s3_client, bucket) == []


def test_a_reset_after_the_intent_landed_publishes(spark: Any, s3_client: Any, bucket: str,
                                                   fault_proxy: FaultProxy) -> None:
    dest, prefix = f"s3://{bucket}/i/", "i/"
    rule = fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER, match="_lading_intent.json")
    result = _run(spark, dest, "run-1", fault_proxy.url)
    assert rule.fired and result.get("rows") == ROWS, result
    _published(s3_client, bucket, prefix)
    assert s3_pending(s3_client, bucket) == []


def test_an_intent_that_cannot_be_written_leaves_nothing_pending(s3_client: Any, bucket: str) -> None:
    """The intent's create fails (here: refused; after lost answers: undecided): nothing completed, so
    the run's uploads are aborted (they were left pending until the lifecycle rule on 0440a14)."""
    dest = f"s3://{bucket}/n/"
    files, manifest, token = pending_run(dest, "error", "run-1", "SELECT 1", rows=30, tasks=2)
    faulty = faults.FaultyStorage(S3Storage(), faults.Fault("put_if_absent", "raise", match="_lading_intent"))
    with pytest.raises(StorageError, match="injected"):
        commit.publish(faulty, dest, files, manifest, mode="error", run_id="run-1", token=token)
    assert s3_keys(s3_client, bucket, "n/") == [] and s3_pending(s3_client, bucket) == []


@pytest.mark.parametrize("mode", ["error", "append"])
def test_a_reset_after_a_completion_landed_publishes(spark: Any, s3_client: Any, bucket: str,
                                                     fault_proxy: FaultProxy, mode: str) -> None:
    """botocore resends the completion; the upload id is gone by then (NoSuchUpload)."""
    dest, prefix = f"s3://{bucket}/c/", "c/"
    rule = fault_proxy.plan(Kind.COMPLETE_MULTIPART, Fault.RESET_AFTER, nth=2)
    with completed_uploads_forgotten():
        result = _run(spark, dest, "run-1", fault_proxy.url, mode)
    assert rule.fired and result.get("rows") == ROWS, result
    manifest = next(k for k in s3_keys(s3_client, bucket, prefix) if "_lading_manifest" in k)
    _published(s3_client, bucket, prefix, manifest.removeprefix(prefix))
    assert s3_pending(s3_client, bucket) == []


def test_a_rerun_of_a_manifest_naming_missing_files_redoes_the_run(spark: Any, s3_client: Any, bucket: str,
                                                                   s3_endpoint: str) -> None:
    """What the bug left behind (a manifest of this run, its files deleted): the same run id redoes
    the export instead of reporting rows that are gone."""
    dest, prefix = f"s3://{bucket}/m/", "m/"
    assert _run(spark, dest, "run-1", s3_endpoint).get("rows") == ROWS
    gone = [k for k in s3_keys(s3_client, bucket, prefix) if "_lading_manifest" not in k]
    s3_client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in gone[:2]]})
    again = _run(spark, dest, "run-1", s3_endpoint)
    assert again.get("rows") == ROWS, again
    assert _published(s3_client, bucket, prefix)["runId"] == "run-1"
    assert sorted(s3_keys(s3_client, bucket, prefix)) == sorted(
        [prefix + "_lading_manifest.json"] + [prefix + f["path"] for f in
                                               _published(s3_client, bucket, prefix)["files"]])


@pytest.mark.parametrize(("seed", "rate"), [(1, 0.05), (2, 0.20), (3, 0.20)])
def test_resets_after_writes_at_fixed_rates(spark: Any, s3_client: Any, bucket: str, fault_proxy: FaultProxy,
                                            seed: int, rate: float) -> None:
    """Every write kind loses its answer at ``rate``: the run succeeds exactly or fails naming the
    object; a rerun of the same run then succeeds exactly; no manifest ever names a missing file."""
    dest, prefix = f"s3://{bucket}/r/", "r/"
    fault_proxy.seed = seed
    writes = Rates(reset_after=rate)
    fault_proxy.set_rates({k: writes for k in (Kind.PUT, Kind.PUT_CONDITIONAL, Kind.CREATE_MULTIPART,
                                               Kind.UPLOAD_PART, Kind.COMPLETE_MULTIPART, Kind.DELETE)})
    first = _run(spark, dest, "run-1", fault_proxy.url)
    if "error" in first:
        assert "s3://" in first["error"], first  # names the object
        if any("_lading_manifest" in k for k in s3_keys(s3_client, bucket, prefix)):
            _published(s3_client, bucket, prefix)
    else:
        assert first["rows"] == ROWS
        _published(s3_client, bucket, prefix)
    fault_proxy.set_rates(None)
    again = _run(spark, dest, "run-1", fault_proxy.url)
    assert again.get("rows") == ROWS, (first, again)
    assert _published(s3_client, bucket, prefix)["runId"] == "run-1"
    assert not any("_lading_intent" in k for k in s3_keys(s3_client, bucket, prefix))
    assert s3_pending(s3_client, bucket) == []
