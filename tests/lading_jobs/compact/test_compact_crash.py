"""Crash: a compaction SIGKILLed at 12 points spread over its storage calls (log reads, part reads,
group writes, completing uploads, the commit, retention). After each kill the table opens and reads
the same rows; a rerun completes; retention past the grace period leaves exactly the live parts
and no pending upload. The runs are forks of one worker process that imported the engine once."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from lading_jobs import storage as st
from lading_jobs.compact import retention
from lading_jobs.compact.plan import written_by_compaction
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log import TableLog
from lading_jobs.table.schema import TableSchema

WORKER = Path(__file__).with_name("crash_worker.py")
ROOT = Path(__file__).resolve().parents[3]
SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string")])


def build(path: Path) -> str:
    uri = f"file://{path}/"
    log = TableLog.create(uri, SCHEMA, "upsert", ["k"])
    for c in range(12):
        t = pa.table({"k": pa.array([(c * 5 + i) % 30 for i in range(40)], pa.int64()),
                      "v": [f"c{c}-{i}" for i in range(40)],
                      fmt.DIFF_COLUMN: pa.array([-1 if i % 9 == 0 else 1 for i in range(40)], pa.int64())})
        halves = [t.slice(0, 20), t.slice(20)]
        written = writer.write_parts(uri, halves, SCHEMA, write_id=fmt.new_write_id(), logical_time=c + 1,
                                     one_part_per_table=True)
        writer.commit_parts(uri, written, log=log)
    return uri


def rows(uri: str) -> Counter:
    t = reader.scan(uri)
    return Counter(zip(t.column("k").to_pylist(), t.column("v").to_pylist(), strict=True))


class Worker:
    """crash_worker.py serving runs (one fork each, imports shared): ``run(uri, kill_at)`` is
    the run's exit code (-9: SIGKILLed), its result when it finished, its traceback if any."""

    def __init__(self, tmp: Path) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "spark_apps"), str(ROOT)]))
        self.tmp, self.n = tmp, 0
        self.proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)

    def run(self, uri: str, kill_at: int) -> tuple[int, dict[str, int] | None, str]:
        self.n += 1
        out = self.tmp / f"run-{self.n}.json"
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{uri} {kill_at} {out}\n")
        self.proc.stdin.flush()
        code = int(self.proc.stdout.readline())
        err = Path(f"{out}.err")
        return (code, json.loads(out.read_text()) if out.exists() else None,
                err.read_text()[-3000:] if err.exists() else "")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.mark.slow
def test_a_compaction_killed_anywhere_leaves_the_table_whole_and_retention_cleans_up(tmp_path: Path) -> None:
    worker = Worker(tmp_path)
    try:
        check_kills(tmp_path, worker)
    finally:
        worker.close()


def check_kills(tmp_path: Path, worker: Worker) -> None:
    base = tmp_path / "base"
    base_uri = build(base)
    expected = rows(base_uri)
    probe = tmp_path / "probe"
    shutil.copytree(base, probe)
    code, clean, err = worker.run(f"file://{probe}/", 0)
    assert code == 0 and clean is not None, err
    total = clean["calls"]
    assert total > 40
    rng = random.Random(11)
    points = sorted({max(1, int(total * (i + rng.random()) / 12)) for i in range(12)})
    assert len(points) >= 10
    outcomes = []
    for n in points:
        table = tmp_path / f"kill-{n}"
        shutil.copytree(base, table)
        uri = f"file://{table}/"
        code, _, err = worker.run(uri, n)
        assert code == -9, (n, err)
        assert rows(uri) == expected, f"after a kill at call {n}"
        committed = any(written_by_compaction(p) for p in TableLog.open_existing(uri).snapshot().parts)
        code, _, err = worker.run(uri, 0)
        assert code == 0, (n, err)
        assert rows(uri) == expected
        log = TableLog.open_existing(uri)
        snap = log.snapshot()
        assert all(written_by_compaction(p) for p in snap.parts), "the rerun compacted every small part"
        # retention, once the grace period is over, leaves exactly the live parts and no upload
        later = int(time.time() * 1000) + 2 * 3600 * 1000
        retention.apply(log.storage, retention.plan_sweep(log, later, 3600 * 1000))
        live = {p.path for p in snap.parts}
        left = {o.uri.removeprefix(uri) for o in log.storage.list_objects(f"{uri}data/")}
        assert left == live, f"kill at {n}: leftovers {sorted(left - live)}"
        assert not log.storage.list_pending_uploads(uri)
        assert not list(Path(table).rglob(f"{st.STAGING_DIR}/*.part"))
        assert rows(uri) == expected
        outcomes.append(committed)
    assert not all(outcomes) and any(outcomes), "kills fell both before and after the commit"
