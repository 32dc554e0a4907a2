"""Commit outcomes (issue 8, items 1 and 9): a commit that landed is never rolled back, an
undecidable one is reported and left alone, and a store that ignores If-None-Match is refused.

Faults come from tests/support/faults.py (a storage wrapper over the real S3 server or the
local filesystem). On 1b6c3cc every test here fails: commit_parts deleted the parts of a
landed commit whenever commit() raised, a retried PUT answering 412 to its own first try
committed the change twice, and no store was ever probed."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest
from support.faults import Fault, FaultyStorage

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import (
    Change,
    CommitStateUnknown,
    ConditionalWritesUnsupported,
    ConflictError,
    LedgerEntry,
    TableLog,
)
from lading_jobs.table.schema import TableSchema

SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string")])


@pytest.fixture(params=["s3", "file"])
def table_uri(request: pytest.FixtureRequest, file_uri: Callable[[str], str]) -> str:
    if request.param == "s3":
        return f"s3://{request.getfixturevalue('bucket')}/t/"
    return file_uri("t/")


def _write(uri: str, ids: list[int]) -> list[writer.WrittenPart]:
    data = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})
    return writer.write_parts(uri, [data], SCHEMA, write_id=fmt.new_write_id(), storage=st.open_storage(uri))


def _commits(uri: str) -> list[int]:
    return sorted(v for o in st.open_storage(uri).list_objects(uri + fmt.LOG_DIR + "/")
                  if (v := fmt.parse_commit_name(o.uri)) is not None)


def _ids(uri: str) -> list[int]:
    return sorted(reader.scan(uri, storage=st.open_storage(uri)).column("id").to_pylist())


def _part_objects(uri: str) -> set[str]:
    return {o.uri for o in st.open_storage(uri).list_objects(uri + fmt.DATA_DIR + "/")}


@pytest.mark.parametrize("action", ["lost_answer", "raise_after"])
def test_a_commit_whose_answer_was_lost_is_recognised_by_its_nonce(table_uri: str, action: str) -> None:
    TableLog.create(table_uri, SCHEMA)
    written = _write(table_uri, [1, 2])
    faulty = FaultyStorage(st.open_storage(table_uri), Fault("put_if_absent", action, match=fmt.commit_name(1)))
    snap = writer.commit_parts(table_uri, written, log=TableLog.open_existing(table_uri, faulty),
                               ledger={"s3://src/a.csv": LedgerEntry("e", 3, 2)})
    assert snap.version == 1 and [p.path for p in snap.parts] == [written[0].part.path]
    assert _commits(table_uri) == [0, 1]  # committed once, not rebased onto version 2
    assert _ids(table_uri) == [1, 2]
    assert TableLog.open_existing(table_uri).snapshot().ledger["s3://src/a.csv"].version == 1


def test_a_put_that_failed_before_landing_is_retried_at_the_same_version(table_uri: str) -> None:
    TableLog.create(table_uri, SCHEMA)
    written = _write(table_uri, [7])
    faulty = FaultyStorage(st.open_storage(table_uri), Fault("put_if_absent", "raise", match=fmt.commit_name(1)))
    snap = writer.commit_parts(table_uri, written, log=TableLog.open_existing(table_uri, faulty))
    assert snap.version == 1 and _commits(table_uri) == [0, 1] and _ids(table_uri) == [7]


def test_a_failed_checkpoint_leaves_the_commit_and_its_parts(table_uri: str) -> None:
    log = TableLog.create(table_uri, SCHEMA)
    for _ in range(fmt.CHECKPOINT_INTERVAL - 1):
        log.commit(Change())
    written = _write(table_uri, [3])
    faulty = FaultyStorage(st.open_storage(table_uri), Fault("put", "raise", match="checkpoint"))
    snap = writer.commit_parts(table_uri, written, log=TableLog.open_existing(table_uri, faulty))
    assert snap.version == fmt.CHECKPOINT_INTERVAL
    assert _ids(table_uri) == [3]
    assert TableLog.open_existing(table_uri).snapshot().version == fmt.CHECKPOINT_INTERVAL


def test_an_undecidable_commit_is_reported_and_nothing_is_cleaned_up(table_uri: str) -> None:
    TableLog.create(table_uri, SCHEMA)
    written = _write(table_uri, [4, 5])
    commit1 = fmt.commit_name(1)
    faulty = FaultyStorage(st.open_storage(table_uri), Fault("put_if_absent", "raise_after", match=commit1),
                           Fault("read", "raise", match=commit1), Fault("head", "raise", match=commit1))
    log = TableLog.open_existing(table_uri)
    log.storage = faulty  # faults from here on: the PUT lands, then the log cannot be read
    with pytest.raises(CommitStateUnknown, match="commit state unknown") as caught:
        writer.commit_parts(table_uri, written, log=log)
    assert caught.value.nonce in str(caught.value)
    assert _part_objects(table_uri) == {st.join(table_uri, w.part.path) for w in written}  # not deleted
    assert _ids(table_uri) == [4, 5]  # it had landed: the table reads it


def test_a_commit_that_certainly_failed_removes_its_parts(table_uri: str) -> None:
    TableLog.create(table_uri, SCHEMA)
    stale = TableLog.open_existing(table_uri)  # plans against version 0
    TableLog.open_existing(table_uri).commit(Change(ledger={"s3://src/c.csv": LedgerEntry("e", 3, 2)}))
    written = _write(table_uri, [9])
    with pytest.raises(ConflictError, match="c.csv was loaded concurrently"):
        writer.commit_parts(table_uri, written, log=stale, ledger={"s3://src/c.csv": LedgerEntry("e", 3, 1)})
    assert _part_objects(table_uri) == set()
    assert st.open_storage(table_uri).list_pending_uploads(table_uri) == []


def test_a_first_write_creates_its_table_in_the_same_commit_or_not_at_all(table_uri: str) -> None:
    written = _write(table_uri, [1])
    new = writer.NewTable(SCHEMA, table_id="t1")
    faulty = FaultyStorage(st.open_storage(table_uri), Fault("put_if_absent", "raise", match=fmt.commit_name(0)),
                           Fault("head", "raise", nth=2, match=fmt.commit_name(0)))  # 1st: open finds none
    with pytest.raises(CommitStateUnknown):
        writer.commit_parts(table_uri, written, storage=faulty, create=new)
    assert TableLog.open(table_uri) is None  # nothing landed; the parts stay for the retry to decide
    again = _write(table_uri, [2])
    snap = writer.commit_parts(table_uri, again, storage=st.open_storage(table_uri), create=new)
    assert snap.version == 0 and snap.table_id == "t1" and _commits(table_uri) == [0]
    assert _ids(table_uri) == [2]


class IgnoresIfNoneMatch(st.S3Storage):
    """A store that writes every conditional PUT unconditionally (as some S3 clones do)."""

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        self.put(uri, data)
        return True


class IgnoresLink(st.LocalStorage):
    def put_if_absent(self, uri: str, data: bytes) -> bool:
        self.put(uri, data)
        return True


def test_a_store_that_ignores_if_none_match_is_refused_before_any_commit(table_uri: str) -> None:
    storage = IgnoresIfNoneMatch() if table_uri.startswith("s3://") else IgnoresLink()
    with pytest.raises(ConditionalWritesUnsupported, match=r"does not honour conditional writes.*If-None-Match"):
        TableLog.create(table_uri, SCHEMA, storage=storage)
    assert _commits(table_uri) == []
    TableLog.create(table_uri, SCHEMA)
    with pytest.raises(ConditionalWritesUnsupported, match="S3 store at http|local file system"):
        TableLog.open_existing(table_uri, storage).commit(Change())
    assert _commits(table_uri) == [0]
    assert [o.uri for o in st.open_storage(table_uri).list_objects(table_uri) if "_probe" in o.uri] == []
