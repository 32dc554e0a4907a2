"""A load that fails around its table commit (issue 8, item 7): rejected rows are durable before
the rows commit, and a retry with the same runId recognises the commit that carries it and
reports that run's result instead of "committed: false, rows: 0".

Faults: the driver's storage is wrapped (tests/support/faults.py) for one run; the retry runs
on the plain storage. On 1b6c3cc both tests fail: the first run committed the rows and then
failed, and its retry found every file in the ledger and reported rows 0, committed false."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import pytest
from support.faults import Fault, FaultyStorage

from lading_jobs import storage as st
from lading_jobs.ingest.stores import storage_for
from lading_jobs.load import job as load_job
from lading_jobs.load.job import run_load
from lading_jobs.table import format as fmt
from lading_jobs.table.log.commits import TableLog
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark]
SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "v", "type": "int"}]
FILES = {"a.csv": b"1,10\n2,20\n3,oops\n", "b.csv": b"4,40\n5,50\n"}


def _job(root: str, run_id: str) -> JobDocument:
    spec = {"from": {"files": root + "in/", "format": "csv"}, "to": {"table": root + "t/", "schema": SCHEMA},
            "onError": "continue", "rejectedRows": root + "rejected/"}
    return JobDocument("CopyJob", "ns", "load", "uid", 1, run_id, dt.datetime(2026, 1, 1, tzinfo=dt.UTC), spec)


@pytest.fixture
def root(file_uri: Callable[[str], str]) -> str:
    root = file_uri("root/")
    storage = st.open_storage(root)
    for name, data in FILES.items():
        storage.put(root + "in/" + name, data)
    return root


def _faulty_run(spark: Any, root: str, fault: Fault, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    with monkeypatch.context() as m:
        m.setattr(load_job, "storage_for", lambda uri, settings: FaultyStorage(storage_for(uri, settings), fault))
        try:
            return run_load(spark, _job(root, "r-1"))
        except Exception as e:  # noqa: BLE001 - the result the app would report
            return {"error": str(e)}


def _rows(root: str) -> list[int]:
    log = TableLog.open(root + "t/")
    if log is None:
        return []
    from lading_jobs.table import reader

    return sorted(reader.scan(root + "t/").column("id").to_pylist())


def _assert_done(root: str, retry: dict[str, Any]) -> None:
    assert retry["rows"] == 4 and retry["rowsRejected"] == 1, retry
    assert _rows(root) == [1, 2, 4, 5]  # loaded exactly once
    manifest = json.loads(st.open_storage(root).read(root + "rejected/r-1/manifest.json"))
    assert manifest["committed"] is True and manifest["rows"] == 4
    assert manifest["tableVersion"] == TableLog.open_existing(root + "t/").snapshot().version
    rejected = st.open_storage(root).read(root + "rejected/r-1/rejected-00000.jsonl").decode().splitlines()
    assert [json.loads(line)["line"] for line in rejected] == [3]
    leftovers = [o.uri for o in st.open_storage(root).list_objects(root) if "intent" in o.uri]
    assert leftovers == []
    assert st.open_storage(root).list_pending_uploads(root) == []


def test_rejected_rows_that_cannot_be_written_fail_the_load_before_its_rows_commit(
        spark: Any, root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _faulty_run(spark, root, Fault("complete_upload", "raise", match="rejected-"), monkeypatch)
    assert "injected failure" in first["error"]
    assert _rows(root) == []  # nothing committed without its rejected rows
    assert not [o for o in st.open_storage(root).list_objects(root + "t/") if f"/{fmt.DATA_DIR}/" in o.uri]
    _assert_done(root, run_load(spark, _job(root, "r-1")))


def test_a_retry_finishes_a_load_whose_manifest_was_not_written_after_its_commit(
        spark: Any, root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _faulty_run(spark, root, Fault("put", "raise", match="manifest.json"), monkeypatch)
    assert "the rows are committed" in first["error"] and "same runId" in first["error"]
    retry = run_load(spark, _job(root, "r-1"))
    _assert_done(root, retry)
    assert retry["tableVersion"] == 0  # the first attempt's commit (which also created the table)
    again = run_load(spark, _job(root, "r-1"))  # and once more: the run is done, nothing changes
    assert again["rows"] == 4 and _rows(root) == [1, 2, 4, 5]


def test_a_failed_first_load_leaves_no_table(spark: Any, root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on 1b6c3cc: commit 0 created the table before the rows' commit, which then failed."""
    first = _faulty_run(spark, root, Fault("complete_upload", "raise", match=f"/{fmt.DATA_DIR}/"), monkeypatch)
    assert "injected failure" in first["error"]
    assert TableLog.open(root + "t/") is None
    assert [o.uri for o in st.open_storage(root).list_objects(root + "t/") if fmt.LOG_DIR in o.uri] == []
    assert st.open_storage(root).list_pending_uploads(root) == []


def test_after_success_pending_uploads_of_the_run_are_swept(spark: Any, root: str) -> None:
    """A lost task attempt's rejected-rows upload under the run's prefix is aborted (stayed on 1b6c3cc)."""
    storage = st.open_storage(root)
    stray = storage.begin_upload(root + "rejected/r-1/rejected-00007.jsonl")
    storage.upload_part(stray, b"{}\n")
    assert run_load(spark, _job(root, "r-1"))["rows"] == 4
    assert storage.list_pending_uploads(root) == []
