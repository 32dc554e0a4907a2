"""How the Iceberg mirror's publish writes its files (issue 31, the mirror's cost per commit).

The manifest and the manifest list of a version are written together (concurrent requests), and
``v<n>.metadata.json`` is created only once both landed; a failed write leaves no metadata file
naming it. ``version-hint.text`` is replaced without ``fsync`` (``Storage.put_hint``): a hint
that is stale, ahead, empty or missing still leads lading to the newest metadata file, and
``sync`` repairs it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from support.faults import Fault, FaultyStorage
from support.iceberg_readers import multiset, pyiceberg_rows

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.log.commits import TableLog, snapshot_at
from lading_jobs.table.schema import TableSchema

SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string")])


def _rows(first: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + n), pa.int64()), "name": [f"n{i}" for i in range(n)]})


def _table(tmp_path: Path) -> tuple[Path, str]:
    """A mirrored table at version 1 (two metadata files), published by a process that then forgets it."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    writer.commit_parts(uri, writer.write_parts(uri, [_rows(0, 4)], SCHEMA, write_id=fmt.new_write_id()),
                        create=writer.NewTable(SCHEMA))
    writer.commit_parts(uri, writer.write_parts(uri, [_rows(4, 3)], SCHEMA, write_id=fmt.new_write_id()))
    mirror.forget(uri)
    return root, uri


def _commit_through(uri: str, faulty: FaultyStorage) -> int:
    """Commit version 2 (two rows) with every request of the commit and its mirror through ``faulty``."""
    written = writer.write_parts(uri, [_rows(100, 2)], SCHEMA, write_id=fmt.new_write_id())
    log = TableLog.open_existing(uri)
    log.storage = faulty
    return writer.commit_parts(uri, written, log=log).version


def _avro_files(root: Path) -> set[str]:
    return {p.name for p in (root / "metadata").glob("*.avro")}


def test_the_manifest_and_the_manifest_list_are_written_at_once_and_before_the_metadata_file(
        tmp_path: Path) -> None:
    root, uri = _table(tmp_path)
    both = threading.Barrier(2, timeout=60)  # each write waits until the other one has started
    faulty = FaultyStorage(st.LocalStorage(),
                           Fault("put", "hook", match="-m0.avro", hook=both.wait),
                           Fault("put", "hook", match="/snap-3-", hook=both.wait))
    assert _commit_through(uri, faulty) == 2
    assert not both.broken  # written one after the other, the first would have waited for the second in vain
    assert mirror.describe(uri)["mirroredVersion"] == 2
    calls = [(method, u.rsplit("/", 1)[-1]) for method, u in faulty.calls if "/metadata/" in u]
    created = calls.index(("put_if_absent", "v2.metadata.json"))
    written = [i for i, (method, name) in enumerate(calls)
               if method == "put" and (name.endswith("-m0.avro") or name.startswith("snap-3-"))]
    assert len(written) == 2 and max(written) < created, calls
    assert multiset(pyiceberg_rows(str(root / "metadata" / "v2.metadata.json"))) == \
        multiset(reader.scan(uri, snapshot=snapshot_at(uri, st.LocalStorage(), 2)))


@pytest.mark.parametrize("match", ["/snap-3-", "-m0.avro"])
def test_a_failed_manifest_or_list_write_creates_no_metadata_file_and_leaves_no_file_behind(
        tmp_path: Path, match: str) -> None:
    root, uri = _table(tmp_path)
    before = _avro_files(root)
    faulty = FaultyStorage(st.LocalStorage(), Fault("put", "raise", match=match))
    assert _commit_through(uri, faulty) == 2  # the commit stands; the mirror stays behind
    assert not (root / "metadata" / "v2.metadata.json").exists()
    assert _avro_files(root) == before  # the write that landed beside the failed one was deleted
    assert mirror.describe(uri)["mirroredVersion"] == 1
    assert [p.version for p in mirror.sync(uri)] == [2]
    assert multiset(pyiceberg_rows(str(root / "metadata" / "v2.metadata.json"))) == \
        multiset(reader.scan(uri, snapshot=snapshot_at(uri, st.LocalStorage(), 2)))


@pytest.mark.parametrize("hint", ["stale", "ahead", "empty", "garbage", "missing"])
def test_a_stale_ahead_empty_or_missing_hint_still_finds_the_newest_metadata_and_sync_repairs_it(
        tmp_path: Path, hint: str) -> None:
    root, uri = _table(tmp_path)
    path = root / "metadata" / mirror.VERSION_HINT
    if hint == "missing":
        path.unlink()
    else:
        path.write_text({"stale": "0", "ahead": "7", "empty": "", "garbage": "v1\n"}[hint])
    storage = st.LocalStorage()
    assert mirror.latest_number(uri, storage) == 1
    assert mirror.current_metadata(uri, storage) == mirror.metadata_uri(uri, 1)
    assert mirror.sync(uri, storage) == []  # nothing to publish: the mirror is current
    assert path.read_text() == "1"  # ... and the hint is repaired
    writer.commit_parts(uri, writer.write_parts(uri, [_rows(9, 1)], SCHEMA, write_id=fmt.new_write_id()))
    assert path.read_text() == "2"  # the next writer found file 1 and published file 2 after it


def test_put_hint_replaces_the_object_without_fsync_and_put_fsyncs(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    storage = st.LocalStorage()
    uri = f"file://{tmp_path}/metadata/{mirror.VERSION_HINT}"
    storage.put(uri, b"1")
    assert len(synced) >= 2  # the staged file and the directory
    synced.clear()
    storage.put_hint(uri, b"2")
    assert synced == []
    assert storage.read(uri) == b"2"
    assert sorted(p.name for p in (tmp_path / "metadata").iterdir()) == [st.STAGING_DIR, mirror.VERSION_HINT]
    assert list((tmp_path / "metadata" / st.STAGING_DIR).iterdir()) == []  # no staged file left behind
