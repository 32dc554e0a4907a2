"""The unload's publish protocol (issue 8, items 2, 3 and 8, and ``ifExists: error``'s
conditional manifest), end to end on local Spark and the S3 server, with faults injected into
the driver's storage (tests/support/faults.py).

On 1b6c3cc: a replace run that failed after completing its uploads had overwritten the old
files in place (the old manifest's CRCs no longer matched); a failure after completion left
the completed files visible, so the rerun of the same run failed forever under ``error``;
nothing swept pending uploads after a success; two ``error`` runs that both passed the early
check both published, the second overwriting the first."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest
from support.faults import Fault, FaultyStorage
from support.unload import job_doc, pending_run, s3_keys, s3_pending

from lading_jobs import uploadset
from lading_jobs.storage import S3Storage
from lading_jobs.unload import commit, naming
from lading_jobs.unload import job as unload_job
from lading_jobs.unload.commit import DestinationNotEmpty
from lading_jobs.unload.job import run_unload
from lading_spec.copyjob import parse_copyjob

pytestmark = [pytest.mark.spark, pytest.mark.s3]
QUERY = "SELECT id, repeat('x', 20) AS pad FROM range(0, {n}, 1, 2)"


def _spec(dest: str, mode: str, n: int = 1000) -> dict[str, Any]:
    return {"from": {"query": QUERY.format(n=n)}, "to": {"files": dest, "format": "csv", "ifExists": mode}}


def _run(spark: Any, dest: str, mode: str, run_id: str, *faults: Fault, n: int = 1000,
         monkeypatch: pytest.MonkeyPatch | None = None) -> dict[str, Any]:
    doc = job_doc(_spec(dest, mode, n), run_id=run_id)
    if not faults:
        return run_unload(spark, doc, parse_copyjob(doc.spec))
    assert monkeypatch is not None
    with monkeypatch.context() as m:
        m.setattr(unload_job, "open_storage", lambda uri, settings=None: FaultyStorage(S3Storage(settings), *faults))
        try:
            return run_unload(spark, doc, parse_copyjob(doc.spec))
        except Exception as e:  # noqa: BLE001 - the result the app would report
            return {"error": str(e)}


def _manifest(s3: Any, bucket: str, key: str) -> dict[str, Any]:
    return json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())  # type: ignore[no-any-return]


def _assert_true(s3: Any, bucket: str, prefix: str, manifest: dict[str, Any]) -> None:
    for f in manifest["files"]:
        body = s3.get_object(Bucket=bucket, Key=prefix + f["path"])["Body"].read()
        assert f"{zlib.crc32(body):08x}" == f["crc32"], f"{f['path']} no longer holds what its manifest says"


def _assert_only_published(s3: Any, bucket: str, prefix: str, run_id: str) -> None:
    """The prefix holds exactly ``run_id``'s manifest and the files it lists, as listed; nothing pending."""
    published = _manifest(s3, bucket, prefix + "_lading_manifest.json")
    assert published["runId"] == run_id
    _assert_true(s3, bucket, prefix, published)
    assert sorted(s3_keys(s3, bucket, prefix)) == sorted(
        [prefix + "_lading_manifest.json"] + [prefix + f["path"] for f in published["files"]])
    assert s3_pending(s3, bucket) == []


def test_replace_never_overwrites_the_old_files_before_it_commits(spark: Any, s3_client: Any, bucket: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    dest, prefix = f"s3://{bucket}/r/", "r/"
    _run(spark, dest, "error", "run-old", n=500)  # old files: part-00000-00000.csv, ...
    old = _manifest(s3_client, bucket, prefix + "_lading_manifest.json")
    failed = _run(spark, dest, "replace", "run-new", Fault("put", "raise", match="_lading_manifest"),
                  monkeypatch=monkeypatch)
    assert "injected failure" in failed["error"]
    assert _manifest(s3_client, bucket, prefix + "_lading_manifest.json")["runId"] == "run-old"
    _assert_true(s3_client, bucket, prefix, old)
    assert sorted(s3_keys(s3_client, bucket, prefix)) == sorted(
        [prefix + "_lading_manifest.json"] + [prefix + f["path"] for f in old["files"]])
    done = _run(spark, dest, "replace", "run-new")
    new = _manifest(s3_client, bucket, prefix + "_lading_manifest.json")
    assert done["rows"] == 1000 and new["runId"] == "run-new"
    assert all(f["path"].endswith(f"-{naming.run_token('run-new')}.csv") for f in new["files"])
    assert sorted(s3_keys(s3_client, bucket, prefix)) == sorted(
        [prefix + "_lading_manifest.json"] + [prefix + f["path"] for f in new["files"]])
    _assert_true(s3_client, bucket, prefix, new)
    assert s3_pending(s3_client, bucket) == []


@pytest.mark.parametrize(("mode", "faults"), [
    ("error", (Fault("put_if_absent", "raise", match="_lading_manifest"),  # the manifest, however written
               Fault("put", "raise", match="_lading_manifest"))),
    ("append", (Fault("complete_upload", "raise", nth=2),)),
])
def test_a_failure_after_completing_uploads_leaves_nothing_and_the_same_run_reruns(
        spark: Any, s3_client: Any, bucket: str, monkeypatch: pytest.MonkeyPatch, mode: str,
        faults: tuple[Fault, ...]) -> None:
    dest, prefix = f"s3://{bucket}/e/", "e/"
    failed = _run(spark, dest, mode, "run-1", *faults, monkeypatch=monkeypatch)
    assert "injected failure" in failed["error"]
    assert s3_keys(s3_client, bucket, prefix) == []  # completed files were deleted again
    assert s3_pending(s3_client, bucket) == []
    again = _run(spark, dest, mode, "run-1")
    assert again["rows"] == 1000
    manifests = [k for k in s3_keys(s3_client, bucket, prefix) if "_lading_manifest" in k]
    assert len(manifests) == 1
    m = _manifest(s3_client, bucket, manifests[0])
    assert sorted(s3_keys(s3_client, bucket, prefix)) == sorted(manifests + [prefix + f["path"] for f in m["files"]])


def test_a_rerun_of_a_committed_run_reports_it_and_writes_nothing(spark: Any, s3_client: Any, bucket: str) -> None:
    dest, prefix = f"s3://{bucket}/a/", "a/"
    first = _run(spark, dest, "append", "run-1")
    keys = sorted(s3_keys(s3_client, bucket, prefix))
    again = _run(spark, dest, "append", "run-1")
    assert again == first and sorted(s3_keys(s3_client, bucket, prefix)) == keys


def test_after_success_pending_uploads_with_the_runs_naming_are_swept(spark: Any, s3_client: Any,
                                                                      bucket: str) -> None:
    dest, prefix = f"s3://{bucket}/s/", "s/"
    token = naming.run_token("run-1")
    storage = S3Storage()
    lost = storage.begin_upload(dest + naming.file_name(7, 0, "csv", token))  # a lost task attempt's
    other = storage.begin_upload(dest + naming.file_name(7, 0, "csv", naming.run_token("run-2")))
    storage.upload_part(lost, b"1,x\n")
    assert _run(spark, dest, "append", "run-1")["rows"] == 1000
    assert s3_pending(s3_client, bucket) == [prefix + naming.file_name(7, 0, "csv", naming.run_token("run-2"))]
    storage.abort_upload(other)


def test_an_error_runs_sweep_leaves_another_jobs_uploads_under_a_nested_prefix(s3_client: Any, bucket: str) -> None:
    # Without a token (ifExists: error) every job names its parts alike: the run at s3://b/exports/
    # swept the pending parts of a job writing to s3://b/exports/eu/, which then failed ("its upload
    # is gone"). Its own strays, directly under it or in its partition directories, still go.
    dest = f"s3://{bucket}/exports/"
    storage = S3Storage()
    other = [storage.begin_upload(dest + "eu/" + naming.file_name(t, 0, "csv")) for t in (0, 1)]
    mine = [storage.begin_upload(dest + naming.file_name(7, 0, "csv")),
            storage.begin_upload(dest + "region=eu/" + naming.file_name(8, 0, "csv"))]
    not_a_partition = storage.begin_upload(dest + "region=eu/x/" + naming.file_name(9, 0, "csv"))
    others = ["exports/eu/part-00000-00000.csv", "exports/eu/part-00001-00000.csv",
              "exports/region=eu/x/part-00009-00000.csv"]
    # partitioned by region: its parts are one region=... directory down
    assert commit.sweep(storage, dest, None, ("region",)) == 1
    assert sorted(s3_pending(s3_client, bucket)) == sorted([*others, "exports/part-00007-00000.csv"])
    # unpartitioned: directly under the destination
    assert commit.sweep(storage, dest, None, ()) == 1
    assert sorted(s3_pending(s3_client, bucket)) == sorted(others)
    for upload in [*other, not_a_partition]:
        storage.abort_upload(upload)
    assert len(mine) == 2  # aborted by the sweeps above


def test_two_error_runs_that_both_passed_the_check_publish_one(s3_client: Any, bucket: str) -> None:
    """Both runs passed the early check and hold pending files of the same names; the second to
    publish finds the first's intent (a lock) or, once it is gone, a prefix that is no longer
    empty, and stops without touching the first's files."""
    dest, prefix = f"s3://{bucket}/c/", "c/"
    query = "SELECT id, CAST(id AS STRING) AS s FROM range(0, 300, 1, 2)"
    one, m1, _ = pending_run(dest, "error", "run-1", query, 300, 2)
    two, m2, _ = pending_run(dest, "error", "run-2", query, 300, 2)
    three, m3, _ = pending_run(dest, "error", "run-3", query, 300, 2)
    storage = S3Storage()
    holding = uploadset.UploadSet(storage, dest + commit.intent_name("error", None), "run-1")
    holding.begin([], {}, exclusive=True)  # run-1 is publishing
    with pytest.raises(commit.DestinationBusy, match="run run-1 is publishing"):
        commit.publish(storage, dest, two, m2, mode="error", run_id="run-2", token=None)
    holding.finish()
    commit.publish(storage, dest, one, m1, mode="error", run_id="run-1", token=None)
    with pytest.raises(DestinationNotEmpty, match="not empty"):
        commit.publish(storage, dest, three, m3, mode="error", run_id="run-3", token=None)
    _assert_only_published(s3_client, bucket, prefix, "run-1")


def test_two_error_runs_racing_end_to_end_publish_one(spark: Any, s3_client: Any, bucket: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after run a's early check found the prefix empty, run b (which finds it empty too)
    runs start to end and publishes. Run a then runs its query and fails at publishing (its
    second check, under its intent, finds b's files), leaving b's files and manifest as they
    are (a's same-named uploads are aborted, never completed over b's). On 2b0dce2 both runs
    reported success, a's files and manifest overwriting b's."""
    dest, prefix = f"s3://{bucket}/race/", "race/"
    other: dict[str, Any] = {}

    def run_b() -> None:
        doc = job_doc(_spec(dest, "error", 500), run_id="run-b")
        try:
            other.update(run_unload(spark, doc, parse_copyjob(doc.spec)))
        except Exception as e:  # noqa: BLE001 - the result the app would report
            other["error"] = str(e)

    first = _run(spark, dest, "error", "run-a", Fault("list_objects", "hook_after", match=dest, hook=run_b),
                 monkeypatch=monkeypatch)
    assert other.get("rows") == 500, other
    assert "is not empty" in first.get("error", ""), first
    _assert_only_published(s3_client, bucket, prefix, "run-b")
