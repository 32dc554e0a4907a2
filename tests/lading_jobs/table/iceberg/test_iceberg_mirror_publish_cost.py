"""What keeps a publish's cost per commit small in a large table (issue 31): the exactness of a commit
that only adds parts after an exactly mirrored version is decided over the added parts (every other
live part passed under the same schema), with the same answers as deciding over every live part; the
manifest and manifest list of a commit are written beside its log commit when this process published
the version before (``mirror.prepare``), taken by the publish when the commit landed as that version,
redone when that round failed, and deleted when another writer took the version; and the publish
writes its files on threads kept for the process, which a forked child replaces."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pyarrow as pa
from pyiceberg.table import StaticTable
from support.faults import Fault, FaultyStorage
from support.iceberg_readers import multiset, pyiceberg_rows

from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg import retention as mirror_retention
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import Change, TableLog, read_commit, snapshot_at
from lading_jobs.table.schema import Column, TableSchema

SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string")])


def _append(uri: str, keys: list[int], diff: int = 1, create: bool = False, envelope: str = "append") -> None:
    batch = pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys]})
    written = writer.write_parts(uri, [batch], SCHEMA if create else TableLog.open_existing(uri).snapshot().schema,
                                 write_id=fmt.new_write_id(), diff=diff)
    writer.commit_parts(uri, written, create=writer.NewTable(SCHEMA, envelope) if create else None)


def _decisions(uri: str, version: int) -> tuple[list[str] | None, str | None, str | None]:
    """At ``version``: the parts the publish looks at (None: every live part), its answer and the
    answer over every live part, with the metadata of the version before as the publish had it."""
    log = TableLog.open_existing(uri)
    snap, entry = snapshot_at(uri, log.storage, version), read_commit(uri, log.storage, version)
    prev = next(m for n in range(mirror.latest_number(uri, log.storage), -1, -1)
                if mirror.mirrored_version(m := mirror.read_metadata(uri, log.storage, n)) == version - 1)
    unreadable = ice.unmirrorable_ids(snap.schema)
    only = mirror._to_check(snap, entry, prev)  # noqa: SLF001 - the decision under test
    return (None if only is None else sorted(p.path for p in only), ice.inexact(snap, unreadable, only),
            ice.inexact(snap, unreadable))


def test_a_commit_adding_parts_after_an_exact_version_is_decided_over_its_own_parts(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/t/"
    _append(uri, [1, 2], create=True)  # v0
    _append(uri, [3])  # v1: exact, one part added
    _append(uri, [4], diff=-1)  # v2: a retraction in an append table, which an Iceberg reader cannot read
    _append(uri, [5])  # v3: after a version the mirror could not follow
    log = TableLog.open_existing(uri)
    added = [raw["path"] for raw in read_commit(uri, log.storage, 1)["add"]]
    assert _decisions(uri, 1) == (sorted(added), None, None)
    only, answer, full = _decisions(uri, 2)
    assert only == sorted(raw["path"] for raw in read_commit(uri, log.storage, 2)["add"])
    assert answer is not None and answer == full and "retraction" in answer  # the added part decides it
    assert _decisions(uri, 3)[0] is None  # the version before was not exact: every live part is looked at
    meta = StaticTable.from_metadata(mirror.metadata_uri(uri, mirror.latest_number(uri, log.storage))
                                     .removeprefix("file://")).metadata
    assert meta.current_snapshot_id == ice.snapshot_id(1) and meta.properties[mirror.PROP_BEHIND] == "2"


def test_a_schema_change_is_decided_over_every_live_part(tmp_path: Path) -> None:
    """A column added with a default: every part written before it reads the default in lading and
    NULL in Iceberg v2, so the schema's commit looks at every live part (it adds none) and stops the mirror."""
    uri = f"file://{tmp_path}/t/"
    _append(uri, [1], create=True)
    _append(uri, [2])
    log = TableLog.open_existing(uri)
    schema = log.snapshot().schema
    log.commit(Change(schema=TableSchema(
        (*schema.columns, Column(schema.last_column_id + 1, "w", "bigint", True, 7)), schema.last_column_id + 1,
        schema.schema_id + 1)))
    only, answer, full = _decisions(uri, 2)
    assert only is None and answer == full and answer is not None and "default" in answer


def test_a_forked_child_publishes_on_threads_of_its_own(tmp_path: Path) -> None:
    """The parent's publish threads do not exist in a forked child (a crash test's writer, a worker):
    its publishes start their own instead of waiting for the parent's forever."""
    _append(f"file://{tmp_path}/a/", [1], create=True)
    _append(f"file://{tmp_path}/a/", [2])  # the pool has threads, idle
    assert mirror._POOL is not None  # noqa: SLF001
    child_uri = f"file://{tmp_path}/b/"
    pid = os.fork()
    if pid == 0:  # the child: publish (its manifest and list are two files: written on the pool), then leave
        code = 1
        try:
            signal.alarm(60)
            _append(child_uri, [1], create=True)
            _append(child_uri, [2])
            code = 0 if mirror.mirrored_version(mirror.read_metadata(child_uri, TableLog.open_existing(
                child_uri).storage, 1)) == 1 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert Path(tmp_path / "b" / "metadata" / "v1.metadata.json").exists()


def _written(uri: str, keys: list[int]) -> list[writer.WrittenPart]:
    batch = pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys]})
    return writer.write_parts(uri, [batch], SCHEMA, write_id=fmt.new_write_id())


def _spy_prepare(monkeypatch: object) -> list[mirror.Prepared]:
    seen: list[mirror.Prepared] = []
    real = mirror.prepare

    def spy(*args: object) -> mirror.Prepared | None:
        out = real(*args)  # type: ignore[arg-type]
        if out is not None:
            seen.append(out)
        return out

    monkeypatch.setattr(mirror, "prepare", spy)  # type: ignore[attr-defined]
    return seen


def _mirror_files_unreferenced(tmp_path: Path, uri: str) -> set[str]:
    storage = TableLog.open_existing(uri).storage
    numbers = list(range(mirror.latest_number(uri, storage) + 1))
    files = {f"file://{p}" for p in (tmp_path / "t" / "metadata").iterdir()
             if mirror_retention.kind(p.name) is not None}
    return files - mirror_retention.referenced(uri, storage, numbers)


def _exact_at_every_version(uri: str) -> None:
    storage = TableLog.open_existing(uri).storage
    latest = mirror.metadata_uri(uri, mirror.latest_number(uri, storage)).removeprefix("file://")
    for v in range(TableLog.open_existing(uri).version + 1):
        want = multiset(reader.scan(uri, snapshot=snapshot_at(uri, storage, v)))
        assert multiset(pyiceberg_rows(latest, ice.snapshot_id(v))) == want, v


def test_a_writer_that_published_the_version_before_writes_the_next_manifests_beside_its_commit(
        tmp_path: Path, monkeypatch: object) -> None:
    uri = f"file://{tmp_path}/t/"
    _append(uri, [1, 2], create=True)  # v0: a new process would have nothing to start from
    seen = _spy_prepare(monkeypatch)
    _append(uri, [3])  # v1: this process published v0
    _append(uri, [4, 5])  # v2
    assert [p.version for p in seen] == [1, 2] and all(p.settled for p in seen)
    storage = TableLog.open_existing(uri).storage
    meta = mirror.read_metadata(uri, storage, 2)
    assert meta.current_snapshot() is not None
    assert meta.current_snapshot().manifest_list == seen[-1].future.result()[1]  # the publish took it
    assert _mirror_files_unreferenced(tmp_path, uri) == set()
    _exact_at_every_version(uri)


def test_a_failed_early_round_is_redone_by_the_publish(tmp_path: Path, monkeypatch: object) -> None:
    uri = f"file://{tmp_path}/t/"
    _append(uri, [1], create=True)
    _append(uri, [2])
    seen = _spy_prepare(monkeypatch)
    log = TableLog.open_existing(uri)
    log.storage = FaultyStorage(log.storage, Fault("put", match="-m0.avro"))  # the early round's manifest
    writer.commit_parts(uri, _written(uri, [3]), log=log)
    assert len(seen) == 1 and seen[0].future.exception() is not None
    assert mirror.describe(uri)["mirroredVersion"] == 2  # written again, after the commit
    assert _mirror_files_unreferenced(tmp_path, uri) == set()
    _exact_at_every_version(uri)


def test_an_early_round_for_a_version_another_writer_took_is_deleted(tmp_path: Path, monkeypatch: object) -> None:
    """Writer A starts v2's round, then loses v2 to writer B (another handle, committing just before
    A's conditional write): A's round is deleted, B's v2 and A's v3 are mirrored exactly, and no file
    of the mirror is left unreferenced."""
    uri = f"file://{tmp_path}/t/"
    _append(uri, [1], create=True)
    _append(uri, [2])
    seen = _spy_prepare(monkeypatch)
    b_parts = _written(uri, [10])

    def other_writer() -> None:
        writer.commit_parts(uri, b_parts, log=TableLog.open_existing(uri))  # v2, published by B

    a = TableLog.open_existing(uri)
    a.storage = FaultyStorage(a.storage, Fault("put_if_absent", action="hook", match=fmt.commit_uri(uri, 2),
                                               hook=other_writer))
    snap = writer.commit_parts(uri, _written(uri, [20]), log=a)
    assert snap.version == 3
    a_lost, b_v2, a_v3 = seen  # A's round for v2 starts before its conditional write, whose hook runs B
    assert (a_lost.version, a_lost.number, b_v2.version, a_v3.version) == (2, 1, 2, 3)
    assert all(p.settled for p in seen)
    files = a_lost.future.result()[2]
    assert files and not any(Path(f.removeprefix("file://")).exists() for f in files)
    assert mirror.read_metadata(uri, a.storage, 2).current_snapshot().manifest_list == b_v2.future.result()[1]
    assert mirror.describe(uri)["mirroredVersion"] == 3
    assert _mirror_files_unreferenced(tmp_path, uri) == set()
    _exact_at_every_version(uri)


def test_a_writer_that_warmed_up_reads_nothing_back_and_starts_its_manifests_early(
        tmp_path: Path, monkeypatch: object) -> None:
    """A load's driver is a new process: ``mirror.warm`` reads the mirror's newest metadata file and
    manifest list while its parts are written, so its commit reads neither back and writes its
    manifest and list beside the log commit."""
    uri = f"file://{tmp_path}/t/"
    _append(uri, [1], create=True)
    _append(uri, [2])
    mirror.forget()  # as a new process
    seen = _spy_prepare(monkeypatch)
    log = TableLog.open_existing(uri)
    future = mirror.warm(uri, log.storage)
    assert future is not None
    future.result()
    assert mirror.warm(uri, log.storage) is None  # held already
    log.storage = FaultyStorage(log.storage)  # records the calls
    writer.commit_parts(uri, _written(uri, [3]), log=log)
    reads = [u for m, u in log.storage.calls if m == "read" and "/metadata/" in u]
    assert reads == [] and [p.version for p in seen] == [2]
    assert _mirror_files_unreferenced(tmp_path, uri) == set()
    _exact_at_every_version(uri)


def test_a_warmed_up_writer_whose_mirror_moved_on_still_publishes_exactly(
        tmp_path: Path, monkeypatch: object) -> None:
    """Another process commits and publishes after this one warmed up: this one's memory of the
    mirror is stale (version 0). Its commit's first attempt (version 1, lost) starts a round that is
    deleted; the second (version 2) starts none, reads the mirror again, and every version reads exactly."""
    uri = f"file://{tmp_path}/t/"
    _append(uri, [1], create=True)
    mirror.forget()
    log = TableLog.open_existing(uri)
    future = mirror.warm(uri, log.storage)
    assert future is not None
    future.result()
    root = fmt.table_root(uri)
    stale = mirror._CACHE[root]  # noqa: SLF001
    writer.commit_parts(uri, _written(uri, [5]), log=TableLog.open_existing(uri))  # v1, "another process"
    mirror._CACHE[root] = stale  # noqa: SLF001 - what this process still holds
    seen = _spy_prepare(monkeypatch)
    writer.commit_parts(uri, _written(uri, [6]), log=log)  # tries v1 (its state), loses it, lands as v2
    assert [(p.version, p.settled) for p in seen] == [(1, True)]  # the round for v1 only, abandoned
    assert not any(Path(f.removeprefix("file://")).exists() for f in seen[0].future.result()[2])
    assert mirror.describe(uri)["mirroredVersion"] == 2
    assert _mirror_files_unreferenced(tmp_path, uri) == set()
    _exact_at_every_version(uri)


def test_writers_of_several_tables_on_several_threads_all_publish_exactly(tmp_path: Path, capsys: object) -> None:
    """The process-wide memories (published metadata, Iceberg schemas, encoded manifest records) are
    shared by every table's publish and early round: four threads committing to four tables at once
    publish every version, none reported behind."""
    import threading

    uris = [f"file://{tmp_path}/t{i}/" for i in range(4)]
    for uri in uris:
        _append(uri, [0], create=True)
    errors: list[BaseException] = []

    def commits(uri: str) -> None:
        try:
            for k in range(1, 11):
                _append(uri, [k])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=commits, args=(uri,)) for uri in uris]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert "behind" not in capsys.readouterr().err  # type: ignore[attr-defined]
    for uri in uris:
        assert mirror.describe(uri)["mirroredVersion"] == 10
        _exact_at_every_version(uri)
