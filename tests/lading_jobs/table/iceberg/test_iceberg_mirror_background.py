"""The Iceberg mirror published off the commit path (table/iceberg/publisher.py, issue 31's cost target).

Inside ``mirror_publisher.background()`` a commit returns before its mirror is published; ``flush``
waits for it, in version order, and names the table and version of a publish that failed; the next
publish catches a failed one up; a process killed with publishes pending loses nothing (``sync``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable
from support.faults import Fault, FaultyStorage
from support.iceberg_readers import multiset, pyiceberg_rows

from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg import publisher as mirror_publisher
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import TableLog, snapshot_at
from lading_jobs.table.schema import TableSchema

SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string")])


def _rows(first: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + n), pa.int64()), "name": [f"n{i}" for i in range(n)]})


def _commit(uri: str, rows: pa.Table, *, log: TableLog | None = None, create: bool = False) -> None:
    written = writer.write_parts(uri, [rows], SCHEMA, write_id=fmt.new_write_id())
    writer.commit_parts(uri, written, log=log, create=writer.NewTable(SCHEMA) if create else None)


def _lading(uri: str, version: int) -> pa.Table:
    return reader.scan(uri, snapshot=snapshot_at(uri, TableLog.open_existing(uri).storage, version))


def _table(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _rows(0, 3), create=True)  # v0, mirrored before the test's own commits
    mirror.forget()
    return root, uri


def _log_faulting_v1_metadata(uri: str, action: str = "raise", hook: Callable[[], None] | None = None) -> TableLog:
    """A handle on the table whose storage applies ``action`` to the conditional create of v1.metadata.json."""
    log = TableLog.open_existing(uri)
    log.storage = FaultyStorage(log.storage, Fault("put_if_absent", match="v1.metadata.json", action=action,
                                                   hook=hook))
    return log


def test_a_failed_background_publish_surfaces_at_flush_naming_the_table_and_version_and_is_retried(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, uri = _table(tmp_path)
    log = _log_faulting_v1_metadata(uri)
    with mirror_publisher.background():
        _commit(uri, _rows(10, 2), log=log)  # v1: the commit stands, its publish fails
        with pytest.raises(mirror_publisher.MirrorBehind, match=r"could not publish version 1") as e:
            mirror.flush(uri)
        assert fmt.table_root(uri) in str(e.value) and "lading table sync" in str(e.value)
        assert not (root / "metadata" / "v1.metadata.json").exists()
        mirror.flush(uri)  # reported once
        _commit(uri, _rows(20, 2), log=log)  # v2: its publish catches v1 up first, in order
        mirror.flush(uri)
    for v in (1, 2):
        assert multiset(pyiceberg_rows(str(root / "metadata" / f"v{v}.metadata.json"))) == multiset(_lading(uri, v))


def test_a_failed_background_publish_left_at_the_end_is_reported_not_raised(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The job's end (``background()`` exiting) settles: the commits stand, stderr says what is behind."""
    _, uri = _table(tmp_path)
    log = _log_faulting_v1_metadata(uri)
    with mirror_publisher.background():
        _commit(uri, _rows(10, 2), log=log)
    err = capsys.readouterr().err
    assert "could not publish version 1" in err and f"lading table sync {fmt.table_root(uri)}" in err
    assert TableLog.open_existing(uri).version == 1
    assert [p.version for p in mirror.sync(uri)] == [1]


def test_the_commit_returns_before_its_publish_and_flush_waits_for_it(tmp_path: Path) -> None:
    """The publish of v1 is held at its metadata file: the commit has returned (the caller goes on),
    a reader still sees v0; released, ``flush`` returns once v1 is published."""
    root, uri = _table(tmp_path)
    release, reached = threading.Event(), threading.Event()

    def hold() -> None:
        reached.set()
        release.wait(30)  # a safety bound only: the old, synchronous code would stop here

    log = _log_faulting_v1_metadata(uri, "hook", hold)
    with mirror_publisher.background():
        _commit(uri, _rows(10, 2), log=log)
        returned_while_held = not release.is_set()
        assert reached.wait(60)
        assert returned_while_held and not (root / "metadata" / "v1.metadata.json").exists()
        release.set()
        mirror.flush(uri)
        assert (root / "metadata" / "v1.metadata.json").exists()


def test_many_quick_commits_publish_every_version_in_order(tmp_path: Path) -> None:
    root, uri = _table(tmp_path)
    log = TableLog.open_existing(uri)
    with mirror_publisher.background():
        for i in range(1, 9):
            _commit(uri, _rows(i * 10, 2), log=log)
        mirror.flush(uri)
    latest_table = StaticTable.from_metadata(str(root / "metadata" / "v8.metadata.json"))
    latest = latest_table.metadata
    assert [s.snapshot_id for s in latest.snapshots] == [ice.snapshot_id(v) for v in range(9)]
    assert [s.parent_snapshot_id for s in latest.snapshots] == [None, *(ice.snapshot_id(v) for v in range(8))]
    for v in range(9):
        assert multiset(pyiceberg_rows(str(root / "metadata" / f"v{v}.metadata.json"))) == multiset(_lading(uri, v))
    assert mirror.sync(uri) == []
