"""A query into a table (``from.query`` → ``to.table``): append and replace, each one commit.

A reader thread reads the table over and over while the write runs; every read
must be the old contents or the new ones, never a mix (a replace that removed the
old parts in one commit and added the new in another would show an empty or a
doubled table).
"""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.faults import Fault, FaultyStorage

from lading_jobs import storage as st
from lading_jobs import uploadset
from lading_jobs.ingest.stores import storage_for
from lading_jobs.load import insert as insert_mod
from lading_jobs.load.job import run_load
from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.log.commits import CommitStateUnknown, TableLog, snapshot_at
from lading_spec.errors import SpecError
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark]


def job(spec: dict[str, Any], run_id: str) -> JobDocument:
    return JobDocument("CopyJob", "ns", "insert", "uid", 1, run_id, dt.datetime(2025, 1, 1, tzinfo=dt.UTC), spec)


def ids(table: str) -> list[int]:
    storage = storage_for(table, st.S3Settings.from_env())
    log = TableLog.open(table, storage)
    if log is None:
        return []
    snap = log.snapshot()
    parts = [pq.read_table(pa.BufferReader(storage.read(snap.part_uri(p)))) for p in snap.parts]
    return sorted(pa.concat_tables(parts).column("id").to_pylist()) if parts else []


def insert(table: str, query: str, if_exists: str | None = None) -> dict[str, Any]:
    return {"from": {"query": query}, "to": {"table": table, **({"ifExists": if_exists} if if_exists else {})}}


def while_reading(table: str, write: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], list[list[int]]]:
    seen: list[list[int]] = []
    done = threading.Event()

    def reader() -> None:
        while True:
            finished = done.is_set()
            seen.append(ids(table))
            if finished:
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        result = write()
    finally:
        done.set()
        thread.join()
    return result, seen


def test_append_then_replace_each_one_commit(spark: Any, file_uri: Callable[[str], str]) -> None:
    table = file_uri("t/")
    first = run_load(spark, job(insert(table, "SELECT id, id * 10 AS v FROM range(0, 40, 1, 4)"), "r1"))
    assert first["rows"] == 40 and ids(table) == list(range(40))
    old = ids(table)
    appended, seen = while_reading(table, lambda: run_load(spark, job(
        insert(table, "SELECT id, -id AS v FROM range(100, 130, 1, 3)", "append"), "r2")))
    new = old + list(range(100, 130))
    assert appended["rows"] == 30 and ids(table) == new
    assert seen and all(s in (old, new) for s in seen), [len(s) for s in seen]
    replaced, seen = while_reading(table, lambda: run_load(spark, job(
        insert(table, "SELECT id, id AS v FROM range(500, 520, 1, 2)", "replace"), "r3")))
    assert replaced["rows"] == 20 and ids(table) == list(range(500, 520))
    assert seen and all(s in (new, list(range(500, 520))) for s in seen), [len(s) for s in seen]
    refused = run_load(spark, job(insert(table, "SELECT 1 AS id, 1 AS v", "error"), "r4"))
    assert "a table exists" in refused["error"] and ids(table) == list(range(500, 520))


def test_the_query_is_sandboxed(spark: Any, file_uri: Callable[[str], str]) -> None:
    table = file_uri("t/")
    with pytest.raises(SpecError, match="java_method"):
        run_load(spark, job(insert(table, "SELECT java_method('java.lang.System', 'getenv', 'HOME') AS id"), "r1"))
    assert ids(table) == []


# --- a retry with the same runId commits at most once ---------------------------------------

def _faulty(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, *faults: Fault) -> None:
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda uri, *a: FaultyStorage(real(uri, *a), *faults))


class NeverLands(FaultyStorage):
    """Every conditional PUT to ``target`` fails before it reaches the store (however often it is retried)."""

    def __init__(self, inner: st.Storage, target: str) -> None:
        super().__init__(inner)
        self.target = target

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        if uri == self.target:
            raise st.StorageError(f"injected failure: put_if_absent {uri}")
        return super().put_if_absent(uri, data)


def _leftovers(table: str) -> list[str]:
    """Intents, pending uploads and parts no commit names: what a finished run must not leave."""
    storage = st.open_storage(table)
    latest = TableLog.open_existing(table).snapshot().version
    snaps = [snapshot_at(table, storage, v) for v in range(latest + 1)]  # a replace's old parts stay named
    named = {snap.part_uri(p) for snap in snaps for p in snap.parts}
    return ([o.uri for o in storage.list_objects(table) if "intent" in o.uri
             or (f"/{fmt.DATA_DIR}/" in o.uri and o.uri not in named)]
            + [u.uri for u in storage.list_pending_uploads(table)])


def test_a_retry_after_the_commit_landed_reports_it_and_appends_nothing(
        spark: Any, file_uri: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver died after its commit, before it recorded and reported the run (its record's PUT fails
    here: the intent stays, as after a SIGKILL). Fails on 5be5d03: the retry appended the rows again."""
    table = file_uri("t/")
    run_load(spark, job(insert(table, "SELECT id FROM range(0, 10, 1, 2)"), "r1"))
    spec = insert(table, "SELECT id FROM range(100, 130, 1, 3)", "append")
    with monkeypatch.context() as m:
        _faulty(m, insert_mod, "storage_for", Fault("put", "raise", match=f"{uploadset.LOADS_DIR}/r2.json"))
        with pytest.raises(st.StorageError, match="injected failure"):
            run_load(spark, job(spec, "r2"))
    landed = TableLog.open_existing(table).snapshot().version
    expected = list(range(10)) + list(range(100, 130))
    assert ids(table) == expected  # the commit landed
    retry = run_load(spark, job(spec, "r2"))
    assert (retry["rows"], retry["tableVersion"]) == (30, landed) and ids(table) == expected
    again = run_load(spark, job(spec, "r2"))
    assert (again["rows"], again["tableVersion"]) == (30, landed) and ids(table) == expected
    assert TableLog.open_existing(table).snapshot().version == landed and _leftovers(table) == []
    # a new run id is a new run: it appends
    assert run_load(spark, job(spec, "r3"))["rows"] == 30 and len(ids(table)) == 70


def test_a_commit_whose_answer_was_lost_counts_once(
        spark: Any, file_uri: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit's PUT landed but its answer was an error: the run rolls forward, and a retry agrees."""
    table = file_uri("t/")
    run_load(spark, job(insert(table, "SELECT id FROM range(0, 10, 1, 2)"), "r1"))
    spec = insert(table, "SELECT id FROM range(100, 120, 1, 2)", "replace")
    with monkeypatch.context() as m:
        _faulty(m, writer.st, "open_storage",
                Fault("put_if_absent", "raise_after", match=fmt.commit_uri(table, 1)))
        first = run_load(spark, job(spec, "r2"))
    assert first["rows"] == 20 and first["tableVersion"] == 1 and ids(table) == list(range(100, 120))
    retry = run_load(spark, job(spec, "r2"))
    assert (retry["rows"], retry["tableVersion"]) == (20, 1) and ids(table) == list(range(100, 120))
    assert _leftovers(table) == []


def test_a_run_that_died_before_its_commit_is_undone_and_its_retry_commits_once(
        spark: Any, file_uri: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit's PUT never reaches the store and the log cannot say whether it will: the parts are
    complete, the intent stays (as after a kill before the commit). The retry finds no commit with the
    intent's nonce, undoes what the intent lists and commits the rows once."""
    table = file_uri("t/")
    run_load(spark, job(insert(table, "SELECT id FROM range(0, 10, 1, 2)"), "r1"))
    spec = insert(table, "SELECT id FROM range(100, 130, 1, 3)", "append")
    with monkeypatch.context() as m:
        # every attempt at version 1 fails before it reaches the store: the log cannot tell whether one may land
        real = writer.st.open_storage
        m.setattr(writer.st, "open_storage", lambda uri, *a: NeverLands(real(uri, *a), fmt.commit_uri(table, 1)))
        with pytest.raises(CommitStateUnknown, match="same runId"):
            run_load(spark, job(spec, "r2"))
    assert ids(table) == list(range(10)) and TableLog.open_existing(table).snapshot().version == 0
    assert any("r2.intent.json" in o.uri for o in st.open_storage(table).list_objects(table))
    retry = run_load(spark, job(spec, "r2"))
    assert retry["rows"] == 30 and ids(table) == list(range(10)) + list(range(100, 130))
    assert retry["tableVersion"] == 1 and _leftovers(table) == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["after-commit"])  # before-commit: the same state as the NeverLands test above
def test_a_driver_killed_around_its_commit_then_retried_commits_the_rows_once(
        spark: Any, file_uri: Callable[[str], str], tmp_path: Path, mode: str) -> None:
    """SIGKILL of the driver's process group (``killed_insert.py``) right after the commit landed (or,
    with mode before-commit, right before it was sent; ~45 s a driver here, so not run by default); the
    retry with the same runId leaves the rows in the table once. Fails on 5be5d03: the retry appended
    the rows a second time (tableVersion 2)."""
    table = file_uri("t/")
    run_load(spark, job(insert(table, "SELECT id FROM range(0, 10, 1, 2)"), "r1"))
    doc = job(insert(table, "SELECT id FROM range(100, 130, 1, 3)", "append"), "r2")
    job_file = tmp_path / "job.json"
    job_file.write_text(doc.to_json())
    with open(tmp_path / "driver.log", "wb") as log:
        proc = subprocess.run([sys.executable, str(Path(__file__).with_name("killed_insert.py")), mode, "--",
                               "--master", "local[1]", "--job-file", str(job_file)],
                              stdout=log, stderr=log, start_new_session=True, timeout=300, check=False)
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "driver.log").read_text()[-2000:]
    landed = mode == "after-commit"
    assert ids(table) == list(range(10)) + (list(range(100, 130)) if landed else [])
    retry = run_load(spark, doc)
    assert (retry["rows"], retry["tableVersion"]) == (30, 1)
    assert ids(table) == list(range(10)) + list(range(100, 130)) and _leftovers(table) == []
