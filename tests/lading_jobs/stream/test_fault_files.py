"""Exactly once under SIGKILL, files: files keep arriving under the prefix while stream drivers
are killed at random moments and restarted; nothing is lost or loaded twice.

The same rounds as the Kafka fault test (test_fault.py, helpers in
tests/support/stream_faults.py): drivers killed between the parts upload and the commit,
right after the commit, while the batch's tasks run, and from outside at random times.
At the end a clean driver catches up (``once``) and the table, read straight from its
committed parts, holds every line of every matching file exactly once, its ledger names
every file, and no upload is left pending. A separate module so that pytest-xdist runs
it beside the Kafka test.

``LADING_FAULT_FILE_KILLS`` changes the number of kills (default: one round per kill point, as the
Kafka test).
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest
from support.stream_faults import KILL_POINTS, ROUNDS, job, pending_uploads, read_table, run_killed

from lading_jobs.ingest.stores import storage_for
from lading_jobs.storage import S3Settings
from lading_jobs.stream.job import run_stream
from lading_jobs.table.log.commits import TableLog

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.slow]


@pytest.mark.timeout(1200)  # driver JVMs started and killed, one after the other
def test_files_exactly_once_across_sigkills(request: pytest.FixtureRequest, bucket: str, s3_client: Any, tmp_path: Path,
                                            progress_env: None) -> None:
    kills = int(os.environ.get("LADING_FAULT_FILE_KILLS", str(ROUNDS)))
    files_per_round, lines = 6, 40
    table = f"s3://{bucket}/from-files/"
    spec = {"source": {"files": {"uri": f"s3://{bucket}/landing/", "pattern": "*.jsonl", "format": "json"}},
            "target": {"table": table, "schema": [{"name": "file", "type": "string"},
                                                   {"name": "line", "type": "int"}]},
            "batching": {"maxBatchInterval": "1s", "maxBatchBytes": "2kB"}}
    doc = job(spec, "files-faults")
    rng = random.Random(7)

    def feed(i: int) -> None:
        for k in range(files_per_round):
            name = f"f-{i:03d}-{k}-{rng.randint(0, 999):03d}.jsonl"
            body = "".join(json.dumps({"file": name, "line": n}) + "\n" for n in range(lines))
            s3_client.put_object(Bucket=bucket, Key=f"landing/{name}", Body=body.encode())
            s3_client.put_object(Bucket=bucket, Key=f"landing/_ignored-{name}", Body=b"not loaded")
            time.sleep(0.3)  # files keep arriving while the driver runs

    rounds = run_killed(doc, tmp_path, kills, feed, seed=3)
    assert len(rounds) >= kills
    assert {(m, at) for m, at, _ in rounds} >= set(KILL_POINTS[:kills])
    spark = request.getfixturevalue("spark")  # only now: see run_killed
    out = run_stream(spark, doc, once=True, progress_port=None)
    assert "error" not in out, out
    rows = read_table(table)
    got = list(zip(rows.column("file").to_pylist(), rows.column("line").to_pylist(), strict=True))
    assert len(got) == len(set(got)), "a file was loaded twice"
    names = {o["Key"].split("/", 1)[1] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix="landing/f-")
             .get("Contents", [])}
    assert len(names) == kills * files_per_round
    assert set(got) == {(n, i) for n in names for i in range(lines)}
    snap = TableLog.open_existing(table, storage_for(table, S3Settings.from_env())).snapshot()
    assert sorted(u.rsplit("/", 1)[-1] for u in snap.ledger) == sorted(names)
    assert pending_uploads(table) == []
