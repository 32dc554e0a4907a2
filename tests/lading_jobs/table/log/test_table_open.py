"""Opening a table: the newest usable checkpoint at or below the version (the interval's, the hint's,
then a LIST), never commit 0 while a checkpoint is usable; a damaged checkpoint or hint is skipped
and reported once, a damaged commit is a TableError naming the object, and nothing is rewritten.
Object reads are counted, not timed. Fail on 3610912: a missing checkpoint made a pinned open read
every commit from 0, a truncated checkpoint, hint or commit raised a bare JSONDecodeError."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table.log import commits as table_log
from lading_jobs.table.log.commits import Change, Part, TableError, TableLog, snapshot_at
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats.part import PartStats

SCHEMA = TableSchema.of([("k", "string"), ("v", "bigint")])


class Counting(st.LocalStorage):
    """The local store, counting object reads (GETs) and listings."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.lists = 0

    def read(self, uri: str, etag: str | None = None) -> bytes:
        self.reads.append(uri.rsplit("/", 1)[-1])
        return super().read(uri, etag)

    def list_objects(self, prefix: str):  # type: ignore[no-untyped-def]
        self.lists += 1
        return super().list_objects(prefix)


def _table(uri: str, commits: int) -> TableLog:
    log = TableLog.create(uri, SCHEMA)
    for i in range(1, commits + 1):
        log.commit(Change(add=(Part(f"data/w/p{i}.parquet", 100, PartStats(rows=1, min_time=i, max_time=i)),)))
    return log


def _path(uri: str, name: str) -> Path:
    return Path(uri.removeprefix("file://"), fmt.LOG_DIR, name)


def _checkpoint(uri: str, v: int) -> Path:
    return _path(uri, fmt.checkpoint_uri(uri, v).rsplit("/", 1)[1])


@pytest.fixture
def table(file_uri: Callable[[str], str]) -> str:
    uri = file_uri("t/")
    _table(uri, 57)
    return uri


def test_a_pinned_read_past_a_missing_checkpoint_starts_at_the_one_before(table: str) -> None:
    _checkpoint(table, 50).unlink()
    storage = Counting()
    snap = snapshot_at(table, storage, 55)
    assert snap.version == 55 and len(snap.parts) == 55
    # checkpoint 50 (missing), the hint (names 50), a LIST, checkpoint 40, commits 41..55
    assert storage.lists == 1 and len(storage.reads) <= 3 + 15, storage.reads
    assert fmt.commit_name(1) not in storage.reads


def test_a_damaged_checkpoint_or_hint_is_skipped_reported_once_and_left_alone(
        table: str, capsys: pytest.CaptureFixture[str]) -> None:
    table_log._REPORTED.clear()  # noqa: SLF001 - reporting is once per process
    cp = _checkpoint(table, 50)
    truncated = cp.read_bytes()[:100]
    cp.write_bytes(truncated)
    hint = _path(table, fmt.LAST_CHECKPOINT)
    hint.write_bytes(b'{"vers')
    for _ in range(2):
        storage = Counting()
        snap = TableLog.open_existing(table, storage).snapshot()
        assert snap.version == 57 and len(snap.parts) == 57
        assert fmt.commit_name(1) not in storage.reads, "never from commit 0 while checkpoint 40 is usable"
    err = capsys.readouterr().err
    assert err.count(str(cp)) == 1 and err.count(str(hint)) == 1, err
    assert "damaged" in err
    assert cp.read_bytes() == truncated and hint.read_bytes() == b'{"vers', "nothing is rewritten"
    assert snapshot_at(table, Counting(), 53).version == 53


def test_every_checkpoint_damaged_falls_back_to_commit_0(table: str) -> None:
    for v in (10, 20, 30, 40, 50):
        _checkpoint(table, v).write_bytes(b"[]")
    snap = TableLog.open_existing(table).snapshot()
    assert snap.version == 57 and len(snap.parts) == 57


def test_a_damaged_commit_is_a_table_error_naming_it(table: str) -> None:
    commit = _path(table, fmt.commit_name(53))
    commit.write_bytes(commit.read_bytes()[:40])
    with pytest.raises(TableError, match=rf"{fmt.commit_name(53)} is damaged: not JSON.*restore"):
        TableLog.open_existing(table)
    with pytest.raises(TableError, match=rf"{fmt.commit_name(53)} is damaged"):
        snapshot_at(table, st.LocalStorage(), 55)
    assert snapshot_at(table, st.LocalStorage(), 52).version == 52
