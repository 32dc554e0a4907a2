"""Crash: a compaction SIGKILLed at 12 points spread over its storage calls (log reads, part reads,
group writes, completing uploads, the commit, retention). After each kill the table opens and reads
the same rows; a rerun completes; retention past the grace period leaves exactly the live parts
and no pending upload. The runs are forks of one worker process that imported the engine once.

SIGTERM at each step of the commit (completing the outputs, the commit's conditional PUT, the
checkpoint after it), with a watchdog that would exit at once: the commit runs to its end and the
run reports it (exit 0, the new state); SIGTERM while groups are rewritten cancels the run (exit
143, the old state). Either way the rows read the same, a rerun completes and retention later
leaves exactly the live parts. Before the compaction commit was a commit section the watchdog cut
it: exit 143, ``cancelled``, and the commit cut short."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lading_jobs import storage as st
from lading_jobs.compact import retention
from lading_jobs.compact.plan import written_by_compaction
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import Change, TableLog
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
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "spark_apps"), str(ROOT), str(ROOT / "tests")]))
        self.tmp, self.n = tmp, 0
        self.proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)

    def run(self, uri: str, kill_at: int, term: dict[str, Any] | None = None,
            spec: dict[str, Any] | None = None) -> tuple[int, dict[str, Any] | None, str]:
        self.n += 1
        out = self.tmp / f"run-{self.n}.json"
        assert self.proc.stdin is not None and self.proc.stdout is not None
        job = {"uri": uri, "kill_at": kill_at, "out": str(out), "term": term, "spec": spec}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        code = int(self.proc.stdout.readline())
        err = Path(f"{out}.err")
        return (code, json.loads(out.read_text()) if out.exists() else None,
                err.read_text()[-3000:] if err.exists() else "")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """One worker (its imports) for every run of this module."""
    w = Worker(tmp_path_factory.mktemp("runs"))
    yield w
    w.close()


def build_spanning(path: Path) -> str:
    """An append table of 16 small parts whose keys each span the whole range: a sorted compaction
    of it sorts its groups as one (two stages with staging files, ``compact.rangesort``)."""
    uri = f"file://{path}/"
    log = TableLog.create(uri, SCHEMA, "append")
    for c in range(8):
        t = pa.table({"k": pa.array([(i * 7919 + c * 104729) % 100_000 for i in range(600)], pa.int64()),
                      "v": [f"c{c}-{i}" for i in range(600)]})
        written = writer.write_parts(uri, [t.slice(0, 300), t.slice(300)], SCHEMA, write_id=fmt.new_write_id(),
                                     logical_time=c + 1, one_part_per_table=True)
        writer.commit_parts(uri, written, log=log)
    return uri


SORTED = {"sortBy": ["k"], "targetFileSize": "12kB"}


@pytest.mark.slow
def test_a_compaction_killed_anywhere_leaves_the_table_whole_and_retention_cleans_up(tmp_path: Path,
                                                                                      worker: Worker) -> None:
    check_kills(tmp_path, worker)


@pytest.mark.slow
def test_a_sorted_compaction_killed_anywhere_in_either_stage_leaves_the_table_whole(tmp_path: Path,
                                                                                     worker: Worker) -> None:
    """The kills fall in both stages too: sorting groups into staging files, writing ranges,
    deleting the staging files; retention then removes the staging files a kill left."""
    check_kills(tmp_path, worker, build_spanning, SORTED)


def cleaned_up_later(uri: str, table: Path, expected: Counter, what: str) -> None:
    """Retention, once the grace period is over, leaves exactly the live parts and no upload."""
    log = TableLog.open_existing(uri)
    snap = log.snapshot()
    later = int(time.time() * 1000) + 2 * 3600 * 1000
    retention.apply(log.storage, retention.plan_sweep(log, later, 3600 * 1000, store_now=later))
    live = {p.path for p in snap.parts}
    left = {o.uri.removeprefix(uri) for o in log.storage.list_objects(f"{uri}data/")}
    assert left == live, f"{what}: leftovers {sorted(left - live)}"
    assert not log.storage.list_pending_uploads(uri)
    assert not list(table.rglob(f"{st.STAGING_DIR}/*.part"))
    assert rows(uri) == expected


def check_kills(tmp_path: Path, worker: Worker, make: Callable[[Path], str] = build,
                spec: dict[str, Any] | None = None) -> None:
    base = tmp_path / "base"
    base_uri = make(base)
    expected = rows(base_uri)
    probe = tmp_path / "probe"
    shutil.copytree(base, probe)
    code, clean, err = worker.run(f"file://{probe}/", 0, spec=spec)
    assert code == 0 and clean is not None, err
    if spec is not None:
        assert clean["groups"] >= 2, "the groups are sorted as one"
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
        code, _, err = worker.run(uri, n, spec=spec)
        assert code == -9, (n, err)
        assert rows(uri) == expected, f"after a kill at call {n}"
        committed = any(written_by_compaction(p) for p in TableLog.open_existing(uri).snapshot().parts)
        code, _, err = worker.run(uri, 0, spec=spec)
        assert code == 0, (n, err)
        assert rows(uri) == expected
        log = TableLog.open_existing(uri)
        snap = log.snapshot()
        assert all(written_by_compaction(p) for p in snap.parts), "the rerun compacted every small part"
        cleaned_up_later(uri, table, expected, f"kill at {n}")
        outcomes.append(committed)
    assert not all(outcomes) and any(outcomes), "kills fell both before and after the commit"


COMMIT = 20  # the compaction's commit: the table is at 19, so a checkpoint follows it
TERM_STEPS = {  # step: (method, match, nth), SIGTERM sent just before that storage call
    "while rewriting groups": ("begin_upload", "", 2),
    "at the first completion": ("complete_upload", "", 1),
    "between completions": ("complete_upload", "", 2),
    "before the commit PUT": ("put_if_absent", fmt.commit_name(COMMIT), 1),
    "before the checkpoint": ("put", fmt.checkpoint_uri("", COMMIT).rsplit("/", 1)[-1], 1),
}


@pytest.mark.slow
def test_a_sigterm_during_the_compaction_commit_waits_for_it_and_the_run_reports_it(tmp_path: Path,
                                                                                     worker: Worker) -> None:
    base = tmp_path / "base"
    base_uri = build(base)
    log = TableLog.open_existing(base_uri)
    while log.version < COMMIT - 1:
        log.commit(Change())
    expected = rows(base_uri)
    for step, (method, match, nth) in TERM_STEPS.items():
        table = tmp_path / step.replace(" ", "-")
        shutil.copytree(base, table)
        uri = f"file://{table}/"
        rewriting = step == "while rewriting groups"
        # before the commit the run cancels itself (a long grace); in it, the watchdog would exit at once
        term = {"method": method, "match": match, "nth": nth, "grace": 60 if rewriting else 0}
        code, result, err = worker.run(uri, 0, term)
        assert result is not None, (step, err)
        snap = TableLog.open_existing(uri).snapshot()
        if rewriting:
            assert (code, result) == (143, {"cancelled": True}), (step, result, err)
            assert snap.version == COMMIT - 1, "nothing committed"
        else:
            assert code == 0 and result["sawSigterm"] is True, (step, code, result, err)
            assert result["version"] == snap.version == COMMIT and result["rows"] == snap.rows
            assert all(written_by_compaction(p) for p in snap.parts), f"{step}: the commit is whole"
        assert rows(uri) == expected, step
        code, _, err = worker.run(uri, 0)
        assert code == 0, (step, err)
        assert rows(uri) == expected, step
        assert all(written_by_compaction(p) for p in TableLog.open_existing(uri).snapshot().parts)
        cleaned_up_later(uri, table, expected, step)


SORTED_TERM_STEPS = {  # SIGTERM in each stage of a sorted compaction: the run cancels, nothing stays
    "while sorting groups": ("begin_upload", "/staging/", 2),
    "while reading staging files": ("read_range", "/staging/", 1),
    "while writing ranges": ("begin_upload", "/part-", 2),
}


@pytest.mark.slow
def test_a_sigterm_in_either_stage_of_a_sorted_compaction_leaves_no_staging_file(tmp_path: Path,
                                                                                  worker: Worker) -> None:
    base = tmp_path / "base"
    build_spanning(base)
    for step, (method, match, nth) in SORTED_TERM_STEPS.items():
        table = tmp_path / step.replace(" ", "-")
        shutil.copytree(base, table)
        uri = f"file://{table}/"
        expected, before = rows(uri), TableLog.open_existing(uri).snapshot().version
        objects = {o.uri for o in st.LocalStorage().list_objects(f"{uri}data/")}
        term = {"method": method, "match": match, "nth": nth, "grace": 60}
        code, result, err = worker.run(uri, 0, term, SORTED)
        assert (code, result) == (143, {"cancelled": True}), (step, result, err)
        assert TableLog.open_existing(uri).snapshot().version == before and rows(uri) == expected, step
        assert {o.uri for o in st.LocalStorage().list_objects(f"{uri}data/")} == objects, \
            f"{step}: no staging file or output left"
        assert not st.LocalStorage().list_pending_uploads(uri), step
        code, _, err = worker.run(uri, 0, spec=SORTED)
        assert code == 0 and rows(uri) == expected, (step, err)
