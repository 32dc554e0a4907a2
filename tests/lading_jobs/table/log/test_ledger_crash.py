"""A checkpoint's ledger write killed at every step (issue 30, "Ledger at scale").

A child process (tests/support/crash_child.py) commits version 20 of a table whose checkpoint 10
names a ledger index, loading three new files, through a storage wrapper that SIGKILLs it before
or after the chosen call: the first shard it writes, the index (its last ledger object), the
checkpoint. Afterwards, on the real S3 server, the table opens at version 20 with every entry,
and the next writer commits and writes checkpoint 30 over whatever the killed one left (objects
no checkpoint names); the table opened from checkpoint 30 holds every entry.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.faults import FaultyStorage

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.log.commits import Change, LedgerEntry, TableLog
from lading_jobs.table.schema import TableSchema

pytestmark = [pytest.mark.s3, pytest.mark.slow]
CHILD = Path(__file__).resolve().parents[3] / "support" / "crash_child.py"
SCHEMA = TableSchema.of([("id", "bigint")])
LAST = -1  # the last ledger object written: the index
STEPS = {  # (method, match, nth, action)
    "before the first shard": ("put", fmt.LEDGER_DIR, 1, "kill"),
    "before the index": ("put", fmt.LEDGER_DIR, LAST, "kill"),
    "after the index": ("put", fmt.LEDGER_DIR, LAST, "kill_after"),
    "after the checkpoint": ("put", "checkpoint.json", 1, "kill_after"),
}
OLD = {f"s3://src/in/f{i:04d}.csv": LedgerEntry(f"e{i}", i, 1) for i in range(400)}
NEW = {f"s3://src/in/n{i}.csv": {"etag": f"n{i}", "size": 1, "rows": 1} for i in range(3)}


def _table(uri: str) -> None:
    """Commit 1 loads OLD; checkpoint 10 names its index; commits up to 19."""
    log = TableLog.create(uri, SCHEMA)
    log.commit(Change(operation="load", ledger=OLD))
    while log.version < 19:
        log.commit(Change())


def _ledger_writes(bucket: str) -> int:
    """How many ledger objects commit 20 writes (on a twin table: the same URIs, the same shards)."""
    uri = f"s3://{bucket}/twin/"
    _table(uri)
    log = TableLog.open_existing(uri)
    spy = FaultyStorage(st.S3Storage())
    log.storage = spy
    writer.commit_parts(uri, [], log=log, ledger=NEW)
    return sum(1 for m, u in spy.calls if m == "put" and f"/{fmt.LEDGER_DIR}/" in u)


@pytest.mark.parametrize("step", list(STEPS))
def test_a_checkpoint_killed_while_writing_the_ledger_leaves_a_table_that_opens_and_commits(
        bucket: str, step: str) -> None:
    uri = f"s3://{bucket}/t/"
    _table(uri)
    method, match, nth, action = STEPS[step]
    if nth == LAST:
        nth = _ledger_writes(bucket)
        assert nth >= 2  # at least one shard, then the index
    args = {"kind": "table", "table": uri, "written": [], "ledger": NEW,
            "fault": {"method": method, "match": match, "nth": nth, "action": action}}
    child = subprocess.run([sys.executable, str(CHILD), json.dumps(args)], capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == -9, child.stderr[-2000:]

    storage = st.S3Storage()
    assert (storage.head(fmt.checkpoint_uri(uri, 20)) is not None) == (step == "after the checkpoint")
    snap = TableLog.open_existing(uri).snapshot()
    assert snap.version == 20
    assert sorted(snap.ledger) == sorted([*OLD, *NEW])
    assert snap.loaded("s3://src/in/n1.csv", "n1", 1) and snap.loaded("s3://src/in/f0007.csv", "e7", 7)

    log = TableLog.open_existing(uri)
    log.commit(Change(operation="load", ledger={"s3://src/in/last.csv": LedgerEntry("l", 1, 1)}))
    while log.version < 30:
        log.commit(Change())
    hint = json.loads(storage.read(fmt.last_checkpoint_uri(uri)))
    assert hint == {"version": 30}
    after = TableLog.open_existing(uri).snapshot()
    assert sorted(after.ledger) == sorted([*OLD, *NEW, "s3://src/in/last.csv"])
    assert after.ledger["s3://src/in/n2.csv"].version == 20 and after.ledger["s3://src/in/f0001.csv"].version == 1
