"""Retention of the Iceberg mirror's own files (issue 31): after a Compaction's retention has expired
snapshots in the metadata and deleted their parts, the metadata files, manifest lists, manifests,
delete files and copy files no kept metadata file references are deleted too (same grace period),
and every snapshot still listed reads exactly lading's rows in pyiceberg and DuckDB. A run killed
between expiring and deleting, or midway through deleting, leaves readers exact, and the next run
finishes the job.

Local ``file://`` tables; the compaction engine runs in this process with a fixed clock past the
grace period (``now_ms``), so everything unreferenced is old enough.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.manifest import read_manifest_list
from pyiceberg.table import StaticTable
from support.iceberg_readers import duckdb_rows, multiset

from lading_jobs import storage as st
from lading_jobs.compact import retention
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.engine import compact
from lading_jobs.engine import RunContext
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.iceberg import copies, mirror
from lading_jobs.table.iceberg import retention as mirror_retention
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import TableLog, snapshot_at
from lading_jobs.table.schema import TableSchema
from lading_spec.compaction import parse_compaction

SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string")])
HOUR_MS = 3_600_000


def _commit(uri: str, keys: list[int], values: list[str], time_: int, diffs: list[int],
            create: writer.NewTable | None = None) -> None:
    batch = pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(values, pa.string()),
                      fmt.TIME_COLUMN: pa.array([time_] * len(keys), pa.int64()),
                      fmt.DIFF_COLUMN: pa.array(diffs, pa.int64())})
    written = writer.write_parts(uri, [batch], SCHEMA, write_id=fmt.new_write_id())
    writer.commit_parts(uri, written, create=create)


def _run(uri: str, since: int, *, retain: bool, now_ms: int | None = None) -> None:
    """The engine's own Compaction run (groups rewritten in this process); with retention, a 1 h grace
    period and the clock ``now_ms``."""
    doc: dict[str, Any] = {"table": uri, "since": {"version": since}, "targetFileSize": "64kB", "minInputFiles": 2}
    if retain:
        doc["retention"] = {"gracePeriod": "1h", "allowShortGracePeriod": True}
    storage = st.open_storage(uri)
    compact(None, parse_compaction(doc), RunContext(), storage=storage, runner=compact_task.in_process(storage),
            now_ms=now_ms)


def _table(tmp_path: Path) -> tuple[Path, str]:
    """A diff table with copy files, delete files and two compactions: parts, copy and delete files
    removed and replaced."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, [1, 2, 3], ["a", "b", "c"], 0, [2, 1, 3], create=writer.NewTable(SCHEMA, "diff"))  # v0
    _commit(uri, [3, 2], ["c", "b"], 1, [-1, 1])  # v1
    _compact_now(uri, 2)  # v2
    _commit(uri, [2, 4], ["b", "d"], 2, [-1, 2])  # v3
    _commit(uri, [1], ["a"], 3, [-1])  # v4
    _compact_now(uri, 5)  # v5
    _commit(uri, [5], ["e"], 5, [1])  # v6
    return root, uri


def _compact_now(uri: str, since: int) -> None:
    _run(uri, since, retain=False)


def _mirror_files(root: Path) -> set[str]:
    return {f"file://{p}" for p in (root / "metadata").iterdir() if mirror_retention.kind(p.name) is not None}


def _newest(uri: str, storage: st.Storage) -> str:
    return mirror.metadata_uri(uri, mirror.latest_number(uri, storage))


def _assert_listed_snapshots_exact(uri: str, root: Path, storage: st.Storage) -> list[int]:
    """Every snapshot the newest metadata file lists reads lading's rows at its version, in pyiceberg
    and in DuckDB (by snapshot id); every file it references exists. Its snapshots' versions."""
    newest = _newest(uri, storage)
    for f in mirror_retention.referenced(uri, storage, [mirror.latest_number(uri, storage)]):
        assert Path(f.removeprefix("file://")).exists(), f
    table = StaticTable.from_metadata(newest.removeprefix("file://"))
    ids = [s.snapshot_id for s in table.metadata.snapshots]
    duck = duckdb_rows(str(root), list(ids))
    for sid, by_duck in zip(ids, duck, strict=True):
        want = multiset(reader.scan(uri, storage=storage, snapshot=snapshot_at(uri, storage, ice.version_of(sid))))
        assert multiset(table.scan(snapshot_id=sid).to_arrow(), ["k", "v"]) == want, sid
        assert multiset(by_duck, ["k", "v"]) == want, sid
    return [ice.version_of(i) for i in ids]


def test_retention_deletes_the_mirrors_files_no_kept_snapshot_references(tmp_path: Path) -> None:
    root, uri = _table(tmp_path)
    storage = st.open_storage(uri)
    before = _mirror_files(root)
    assert any(f.endswith("-copies.parquet") for f in before) and any(f.endswith("-deletes.parquet") for f in before)
    _run(uri, 6, retain=True, now_ms=int(time.time() * 1000) + 2 * HOUR_MS)
    after = _mirror_files(root)
    newest = mirror.latest_number(uri, storage)
    assert after == mirror_retention.referenced(uri, storage, [newest]) & after  # nothing unreferenced is left
    assert after == {f for f in mirror_retention.referenced(uri, storage, [newest]) if f.startswith(f"{uri}metadata/")}
    gone = before - after
    assert {mirror.metadata_uri(uri, 0), mirror.metadata_uri(uri, 1)} <= gone  # old metadata files
    v0_part = snapshot_at(uri, storage, 0).parts[0]
    assert copies.copies_uri(uri, v0_part.path) in gone  # the copy file of a part compacted away
    assert any(f.endswith("-deletes.parquet") for f in gone) and any(f.endswith("-m0.avro") for f in gone)
    assert (root / "metadata" / mirror.VERSION_HINT).exists()
    versions = _assert_listed_snapshots_exact(uri, root, storage)
    assert versions[-1] == TableLog.open_existing(uri).version


def test_a_run_killed_between_expiring_and_deleting_leaves_readers_exact_and_the_next_run_finishes(
        tmp_path: Path) -> None:
    root, uri = _table(tmp_path)
    storage = st.open_storage(uri)
    log = TableLog.open_existing(uri)
    future = int(time.time() * 1000) + 2 * HOUR_MS
    sweep = retention.plan_sweep(log, future, HOUR_MS, store_now=future)  # what the engine's retention does,
    keep = mirror.expire(uri, storage, [o.uri for o in sweep.removed])  # up to where it is killed:
    assert keep == set()  # the snapshots that named the parts are expired first,
    retention.apply(storage, sweep)  # then the parts go; killed before the mirror's own files
    assert _assert_listed_snapshots_exact(uri, root, storage)
    left = mirror_retention.plan(uri, storage, future, HOUR_MS)
    assert left.deleted  # what the killed run did not delete
    mirror_retention.apply(storage, mirror_retention.MirrorSweep(
        tuple(o for o in left.deleted if mirror_retention.kind(o.uri.rsplit("/", 1)[-1]) == 0)))  # killed midway
    assert _assert_listed_snapshots_exact(uri, root, storage)
    _run(uri, 6, retain=True, now_ms=future)  # the next run
    newest = mirror.latest_number(uri, storage)
    assert _mirror_files(root) == {f for f in mirror_retention.referenced(uri, storage, [newest])
                                   if f.startswith(f"{uri}metadata/")}
    _assert_listed_snapshots_exact(uri, root, storage)


def test_the_mirrors_files_within_the_grace_period_are_kept(tmp_path: Path) -> None:
    root, uri = _table(tmp_path)
    before = _mirror_files(root)
    _run(uri, 6, retain=True, now_ms=int(time.time() * 1000))  # everything was written within the hour
    assert _mirror_files(root) >= before  # only added to (retention's own metadata file, if any)


def test_choose_takes_only_the_mirrors_own_old_unreferenced_names_in_deletion_order() -> None:
    root = "s3://b/t/"

    def obj(name: str, modified: float | None = 100.0) -> st.ObjectInfo:
        return st.ObjectInfo(f"{root}metadata/{name}", 10, "e", modified)

    hexa = "0" * 32
    objects = [obj(f"{hexa}-deletes.parquet"), obj(f"{hexa}-m0.avro"), obj(f"snap-3-{hexa}.avro"),
               obj("v1.metadata.json"), obj("v2.metadata.json"), obj("v3.metadata.json", 500.0),
               obj("version-hint.text"), obj("notes.txt"), obj(f"{hexa}-copies.parquet", None),
               st.ObjectInfo(f"{root}data/w-1/p.parquet", 1, "e", 1.0)]
    out = mirror_retention.choose(root, objects, {f"{root}metadata/v2.metadata.json"}, cutoff_s=200.0)
    assert [o.uri.rsplit("/", 1)[-1] for o in out.deleted] == [
        "v1.metadata.json", f"snap-3-{hexa}.avro", f"{hexa}-m0.avro", f"{hexa}-deletes.parquet"]


def test_retention_reads_only_the_first_and_last_kept_metadata_file_and_protects_the_same_files(
        tmp_path: Path) -> None:
    """Every metadata file is within the grace period (kept): the plan parses the oldest and the newest
    (the ones between are covered by their manifest lists' names) instead of every one, and what it
    protects is what parsing every kept metadata file protects."""
    from support.faults import FaultyStorage

    root, uri = _table(tmp_path)
    _commit(uri, [6], ["f"], 6, [1])  # v7, v8: more metadata files between the first and the last
    _commit(uri, [7], ["g"], 7, [1])
    storage = FaultyStorage(st.open_storage(uri))
    numbers = sorted(int(p.name[1:-14]) for p in (root / "metadata").glob("v*.metadata.json"))
    assert len(numbers) >= 9
    sweep = mirror_retention.plan(uri, storage, int(time.time() * 1000), HOUR_MS)
    metadata_reads = [u for m, u in storage.calls if m == "read" and u.endswith(".metadata.json")]
    assert sorted(metadata_reads) == sorted({mirror.metadata_uri(uri, numbers[0]),
                                             mirror.metadata_uri(uri, numbers[-1])}), metadata_reads
    assert sweep.deleted == ()  # all within the grace period
    plain = st.open_storage(uri)
    listed = [o.uri for o in plain.list_objects(f"{uri}metadata/")]
    assert mirror_retention.referenced(uri, plain, numbers, listed) == mirror_retention.referenced(uri, plain, numbers)


def _aged_lists_under_kept_metadata(tmp_path: Path, monkeypatch: Any) -> tuple[Path, str, list[int]]:
    """A table whose newest metadata file lists only its last three snapshots (the older ones were
    dropped from the metadata), every metadata file still within the grace period (kept, each
    referencing its own snapshots' manifest lists) and every other file of the mirror two hours old:
    the fast path of ``referenced`` finds the lists of the dropped snapshots by name, and only
    those references keep them. The metadata files' numbers."""
    monkeypatch.setattr(mirror, "SNAPSHOTS_MAX", 3)
    root, uri = _table(tmp_path)
    _commit(uri, [6], ["f"], 6, [1])
    _commit(uri, [7], ["g"], 7, [1])
    old = time.time() - 2 * 3600
    for p in (root / "metadata").iterdir():
        if mirror_retention.kind(p.name) not in (None, 0):
            os.utime(p, (old, old))
    numbers = sorted(int(p.name[1:-14]) for p in (root / "metadata").glob("v*.metadata.json"))
    return root, uri, numbers


def _lists(uri: str, numbers: list[int]) -> set[str]:
    storage = st.open_storage(uri)
    return {s.manifest_list for n in numbers for s in mirror.read_metadata(uri, storage, n).snapshots}


def _manifests(uri: str, lists: set[str]) -> set[str]:
    storage = st.open_storage(uri)
    return {m.manifest_path for ml in lists
            for m in read_manifest_list(mirror._Bytes(ml, storage.read(ml)))}  # noqa: SLF001


def _named_only(uri: str, numbers: list[int]) -> tuple[list[str], list[str]]:
    """The manifest lists, and the manifests, only the metadata files between the first and the last
    reference (the fast path finds those lists by name)."""
    ends, middle = _lists(uri, [numbers[0], numbers[-1]]), _lists(uri, numbers[1:-1])
    return sorted(middle - ends), sorted(_manifests(uri, middle - ends) - _manifests(uri, ends))


def _assert_every_kept_metadata_file_whole(uri: str, numbers: list[int]) -> None:
    storage = st.open_storage(uri)
    for n in numbers:
        for f in mirror_retention.referenced(uri, storage, [n]):
            assert Path(f.removeprefix("file://")).exists(), (n, f)


@pytest.mark.parametrize("which", ["manifest list", "manifest", "newest metadata file"])
def test_a_read_error_on_a_file_that_exists_makes_retention_delete_none_of_the_mirrors_files(
        tmp_path: Path, monkeypatch: Any, capsys: Any, which: str) -> None:
    """A transient error reading a file the kept metadata files reference (a manifest list found by
    name, a manifest it names, the newest metadata file) is not "the file is gone": what it protects
    is unknown, so the sweep deletes nothing, and the next run, the error gone, deletes only what no
    kept metadata file references. Every kept metadata file stays whole throughout."""
    from support.faults import Fault, FaultyStorage

    root, uri, numbers = _aged_lists_under_kept_metadata(tmp_path, monkeypatch)
    lists, manifests = _named_only(uri, numbers)
    assert len(numbers) >= 9 and lists and manifests  # the fast path runs; some files are protected only by name
    plain = st.open_storage(uri)
    target = {"manifest list": lists[0], "manifest": manifests[0],
              "newest metadata file": mirror.metadata_uri(uri, numbers[-1])}[which]
    now_ms = int(time.time() * 1000)
    faulty = FaultyStorage(plain, Fault("read", match=target))
    sweep = mirror_retention.plan(uri, faulty, now_ms, HOUR_MS)
    assert any(u == target for m, u in faulty.calls if m == "read") and all(f.fired for f in faulty.faults)
    assert sweep.deleted == ()
    assert "retention deletes none of the Iceberg mirror's files" in capsys.readouterr().err
    _assert_every_kept_metadata_file_whole(uri, numbers)
    mirror_retention.apply(plain, mirror_retention.plan(uri, plain, now_ms, HOUR_MS))  # the next run
    _assert_every_kept_metadata_file_whole(uri, numbers)
    _assert_listed_snapshots_exact(uri, root, plain)


def test_a_named_manifest_list_deleted_before_it_is_read_is_skipped(tmp_path: Path, monkeypatch: Any) -> None:
    """A manifest list found by name that another retention run (or a killed writer's clean-up)
    deleted between the listing and the read protects nothing: the sweep goes on."""
    from support.faults import Fault, FaultyStorage

    root, uri, numbers = _aged_lists_under_kept_metadata(tmp_path, monkeypatch)
    target = _named_only(uri, numbers)[0][0]
    plain = st.open_storage(uri)
    faulty = FaultyStorage(plain, Fault("read", action="hook", match=target,
                                        hook=lambda: Path(target.removeprefix("file://")).unlink()))
    referenced = mirror_retention.referenced(uri, faulty, numbers, [o.uri for o in plain.list_objects(
        f"{uri}metadata/")])
    assert all(f.fired for f in faulty.faults)
    assert target in referenced and mirror.metadata_uri(uri, numbers[-1]) in referenced
