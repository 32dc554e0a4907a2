"""A table commit killed at every step (issue 8; acceptance "the same for a table commit").

A child process (tests/support/crash_child.py) runs ``writer.commit_parts`` for two pending
parts as commit 10 (so a checkpoint follows) through a storage wrapper that SIGKILLs it
before or after the chosen call: a part's completion, the conditional PUT of the commit, the
checkpoint, ``_last_checkpoint``; or sends SIGTERM during completion, before the PUT or
before the checkpoint (the commit runs to its end and reports). Afterwards, on the real
S3 server, the table opens and reads: the rows of commit 9, plus the new ones exactly when
commit 10 exists; every part any commit references exists (none was ever deleted); and the
next commit succeeds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import Change, TableLog
from lading_jobs.table.schema import TableSchema

pytestmark = [pytest.mark.s3, pytest.mark.slow]
CHILD = Path(__file__).resolve().parents[3] / "support" / "crash_child.py"
SCHEMA = TableSchema.of([("id", "bigint")])
STEPS = {  # (method, match, nth, action)
    "first completion": ("complete_upload", "", 1, "kill"),
    "between completions": ("complete_upload", "", 1, "kill_after"),
    "before the PUT": ("put_if_absent", fmt.commit_name(10), 1, "kill"),
    "after the PUT": ("put_if_absent", fmt.commit_name(10), 1, "kill_after"),
    "before the checkpoint": ("put", "checkpoint.json", 1, "kill"),
    "after the checkpoint": ("put", "checkpoint.json", 1, "kill_after"),
    "after _last_checkpoint": ("put", fmt.LAST_CHECKPOINT, 1, "kill_after"),
    "SIGTERM during completion": ("complete_upload", "", 1, "term"),
    "SIGTERM before the PUT": ("put_if_absent", fmt.commit_name(10), 1, "term"),
    "SIGTERM before the checkpoint": ("put", "checkpoint.json", 1, "term"),
}
NOT_LANDED = ("first completion", "between completions", "before the PUT")  # killed before the commit exists


def _parts(uri: str, first: int, n: int) -> list[writer.WrittenPart]:
    tables = [pa.table({"id": pa.array(range(first + 10 * i, first + 10 * i + 10), pa.int64())}) for i in range(n)]
    return writer.write_parts(uri, tables, SCHEMA, write_id=fmt.new_write_id(), one_part_per_table=True,
                              storage=st.S3Storage())


def _ids(uri: str) -> list[int]:
    return sorted(reader.scan(uri, storage=st.S3Storage()).column("id").to_pylist())


@pytest.mark.parametrize("step", list(STEPS))
def test_a_commit_killed_at_any_step_leaves_a_table_that_opens_and_reads(bucket: str, step: str) -> None:
    uri = f"s3://{bucket}/t/"
    log = TableLog.create(uri, SCHEMA)
    writer.commit_parts(uri, _parts(uri, 0, 1), log=log)  # commit 1: ids 0..9
    for _ in range(8):
        log.commit(Change())  # up to commit 9
    committed_before = {o.uri for o in st.S3Storage().list_objects(uri + fmt.DATA_DIR + "/")}
    new = _parts(uri, 100, 2)
    method, match, nth, action = STEPS[step]
    args = {"kind": "table", "table": uri, "written": [w.to_json() for w in new],
            "fault": {"method": method, "match": match, "nth": nth, "action": action}}
    child = subprocess.run([sys.executable, str(CHILD), json.dumps(args)], capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == (0 if action == "term" else -9), child.stderr[-2000:]

    snap = TableLog.open_existing(uri).snapshot()
    landed = snap.version == 10
    assert snap.version in (9, 10)
    assert landed == (step not in NOT_LANDED)
    assert _ids(uri) == list(range(10)) + (list(range(100, 120)) if landed else [])
    objects = {o.uri for o in st.S3Storage().list_objects(uri + fmt.DATA_DIR + "/")}
    assert {snap.part_uri(p) for p in snap.parts} <= objects  # every referenced part is there
    assert committed_before <= objects  # nothing committed was ever deleted
    if action == "term":
        result = json.loads(child.stdout.strip().splitlines()[-1].split(" ", 1)[1])
        assert result["version"] == 10 and result["sawSigterm"] is True

    after = writer.commit_parts(uri, _parts(uri, 200, 1), log=TableLog.open_existing(uri))
    assert after.version == snap.version + 1
    assert _ids(uri)[-10:] == list(range(200, 210))


def test_kill_points_cover_the_commit(bucket: str) -> None:
    """The matrix above stops the child at calls commit_parts really makes, in this order."""
    from support.faults import FaultyStorage

    uri = f"s3://{bucket}/order/"
    log = TableLog.create(uri, SCHEMA)
    for _ in range(9):
        log.commit(Change())
    spy = FaultyStorage(st.S3Storage())
    log.storage = spy
    writer.commit_parts(uri, _parts(uri, 0, 2), log=log)
    calls = [(m, u.rsplit("/", 1)[-1]) for m, u in spy.calls if m in ("complete_upload", "put_if_absent", "put")
             and "/metadata/" not in u]  # the Iceberg mirror's steps follow: test_iceberg_mirror_crash.py
    names = [m if m == "complete_upload" else n for m, n in calls if not n.startswith("_probe")]
    assert names == ["complete_upload", "complete_upload", fmt.commit_name(10),
                     fmt.checkpoint_uri(uri, 10).rsplit("/", 1)[-1], fmt.LAST_CHECKPOINT]
