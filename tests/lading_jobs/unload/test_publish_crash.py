"""The unload publish protocol under a crash at every step (issue 8, item 3; acceptance "crash matrix").

A child process (tests/support/crash_child.py) publishes a run's pending uploads through a
storage wrapper that SIGKILLs it, or sends it SIGTERM, at one chosen call: the intent, the
first and second completion, the manifest (before and after), ``replace``'s deletes (before,
midway: half of the old files deleted, and after), the intent's removal. SIGTERM is sent before
anything completes (``replace``), during completion, after it (before the manifest), after the
manifest (``replace``: before its deletes; ``error``: before the intent's removal). Then,
against the real S3 server:

* the destination shows the old state or the new one whole: every manifest there lists
  files that exist with the size and CRC-32 it records (``replace``'s old files are never
  overwritten, so the old manifest stays true until the new one replaces it);
* after SIGTERM the publish ran to its end (the watchdog waits for a commit) and reported rows;
* a rerun with the same runId succeeds (rolling the killed attempt forward or back) and
  leaves exactly one run's manifest and files, no intent, and no pending upload.

Without Spark in the child (the pending uploads are written here by the task writer), each
case takes a few seconds; the reruns share the test session's Spark.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from support.unload import job_doc, pending_run, s3_keys, s3_pending

from lading_jobs.storage import S3Storage, join
from lading_jobs.unload import commit, naming
from lading_jobs.unload.job import run_unload
from lading_spec.copyjob import parse_copyjob

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.slow]
CHILD = Path(__file__).resolve().parents[2] / "support" / "crash_child.py"
ROWS, TASKS = 3000, 3
QUERY = f"SELECT id, CAST(id AS STRING) AS s FROM range(0, {ROWS}, 1, {TASKS})"

# (method, match, nth, action): where the child is stopped, in the order publish makes the calls
STEPS = {
    "intent": ("put_if_absent", "_lading_intent", 1, "kill"),
    "first completion": ("complete_upload", "", 1, "kill"),
    "second completion": ("complete_upload", "", 2, "kill_after"),
    "before manifest": ("MANIFEST", "_lading_manifest", 1, "kill"),
    "after manifest": ("MANIFEST", "_lading_manifest", 1, "kill_after"),
    "before deletes": ("delete", "old", 1, "kill"),
    "midway through deletes": ("delete", "old", 1, "kill_midway"),
    "after deletes": ("delete", "old", 1, "kill_after"),
    "intent removal": ("delete", "_lading_intent", 1, "kill"),
}
CASES = [(mode, step, "kill") for mode in ("error", "replace", "append") for step in STEPS
         if "deletes" not in step or mode == "replace"]
CASES += [(mode, step, "term") for mode in ("error", "replace", "append")
          for step in ("second completion", "before manifest") + (("before deletes",) if mode == "replace" else ())]
CASES += [("replace", "intent", "term"), ("error", "intent removal", "term")]  # before completing; after the manifest


def _spec(dest: str, mode: str) -> dict[str, Any]:
    return {"from": {"query": QUERY}, "to": {"files": dest, "format": "csv", "ifExists": mode}}


def _manifests(s3: Any, bucket: str, prefix: str) -> list[dict[str, Any]]:
    return [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read())
            for k in s3_keys(s3, bucket, prefix) if k.rsplit("/", 1)[-1].startswith("_lading_manifest")]


def _assert_whole(s3: Any, bucket: str, prefix: str) -> list[dict[str, Any]]:
    """Every manifest under ``prefix`` lists files that exist, byte for byte as it says."""
    manifests = _manifests(s3, bucket, prefix)
    for m in manifests:
        for f in m["files"]:
            body = s3.get_object(Bucket=bucket, Key=prefix + f["path"])["Body"].read()
            assert (len(body), f"{zlib.crc32(body):08x}") == (f["bytes"], f["crc32"]), f["path"]
    return manifests


@pytest.mark.parametrize(("mode", "step", "signal"), CASES, ids=[f"{m}-{s}-{k}" for m, s, k in CASES])
def test_a_publish_stopped_at_any_step_leaves_old_or_new_and_the_rerun_finishes(
        spark: Any, s3_client: Any, bucket: str, mode: str, step: str, signal: str) -> None:
    prefix = "out/"
    dest = f"s3://{bucket}/{prefix}"
    if mode == "replace":  # an old state the new run replaces: old files, old manifest
        old_files, old_manifest, old_token = pending_run(dest, mode, "old-run", QUERY, ROWS, TASKS)
        commit.publish(S3Storage(), dest, old_files, old_manifest, mode=mode, run_id="old-run", token=old_token)
    run_id = f"run-{mode}-{step.replace(' ', '-')}-{signal}"
    files, manifest, token = pending_run(dest, mode, run_id, QUERY, ROWS, TASKS)
    method, match, nth, action = STEPS[step]
    if method == "MANIFEST":
        method = "put_if_absent" if mode == "error" else "put"
    if match == "old":  # replace deletes the old run's files in one batch
        match = naming.run_token("old-run")
    args = {"kind": "unload", "destination": dest, "files": files, "manifest": manifest, "mode": mode,
            "run_id": run_id, "token": token,
            "fault": {"method": method, "match": match, "nth": nth, "action": action if signal == "kill" else "term"}}
    child = subprocess.run([sys.executable, str(CHILD), json.dumps(args)], capture_output=True, text=True,
                           timeout=120)

    manifests = _assert_whole(s3_client, bucket, prefix)
    if signal == "kill":
        assert child.returncode == -9, child.stderr[-2000:]
    else:  # SIGTERM arrived mid-publish: the publish finished and the run reported its rows
        assert child.returncode == 0, child.stderr[-2000:]
        result = json.loads(child.stdout.strip().splitlines()[-1].split(" ", 1)[1])
        assert result["rows"] == ROWS and result["sawSigterm"] is True
        assert [m["runId"] for m in manifests] == [run_id]
    if mode == "replace":
        assert [m["runId"] for m in manifests] in (["old-run"], [run_id])
    else:
        assert [m["runId"] for m in manifests] in ([], [run_id])

    rerun = run_unload(spark, job_doc(_spec(dest, mode), run_id=run_id), parse_copyjob(_spec(dest, mode)))
    assert rerun["rows"] == ROWS
    final = _assert_whole(s3_client, bucket, prefix)
    assert [m["runId"] for m in final] == [run_id]
    expected = {prefix + f["path"] for f in final[0]["files"]} | {rerun["manifest"].split("/", 3)[3]}
    assert set(s3_keys(s3_client, bucket, prefix)) == expected
    assert sum(f["rows"] for f in final[0]["files"]) == ROWS
    assert s3_pending(s3_client, bucket) == []
    assert rerun["manifest"] == join(dest, naming.manifest_name(token if mode == "append" else None))
