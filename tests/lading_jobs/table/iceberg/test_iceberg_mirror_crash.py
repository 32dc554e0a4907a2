"""The Iceberg mirror's publish killed at every step (issue 31, "Failure").

A child process (tests/support/crash_child.py) commits version 2 of a mirrored table through a
storage wrapper that SIGKILLs it (or fails a call) at one step of the mirror's publish, after
the lading commit landed: before the manifest, around the manifest list, around the conditional
create of ``v2.metadata.json``, after ``version-hint.text``; for an upsert table, also around its
position delete file and delete manifest; for a diff table whose rows count twice, around their
copy file. Afterwards the log holds version 2
(the mirror never undoes or blocks a commit); the Iceberg readers (DuckDB through the version
hint, pyiceberg through the metadata file the hint names) see version 1 or version 2, whole;
every file any metadata file references exists; ``mirror.sync`` (or the next writer) catches the
mirror up, and a second sync does nothing.

A child that published the version before starts v2's manifest and manifest list beside its log
commit (``mirror.prepare``): killed at each step around that early round, the log holds v1 or v2,
the readers see v1, the next writer mirrors every version, and retention deletes what was left.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import StaticTable
from support.iceberg_readers import duckdb_rows, multiset, pyiceberg_rows

from lading import cli
from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg import retention as mirror_retention
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import TableLog, snapshot_at
from lading_jobs.table.schema import TableSchema

pytestmark = [pytest.mark.slow]
CHILD = Path(__file__).resolve().parents[3] / "support" / "crash_child.py"
SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string")])
STEPS = {  # (method, match, action); v2's publish only: v0 and v1 are mirrored before the child runs
    "before the manifest": ("put", "-m0.avro", "kill"),
    "before the manifest list": ("put", "/snap-3-", "kill"),
    "after the manifest list": ("put", "/snap-3-", "kill_after"),
    "before the metadata file": ("put_if_absent", "v2.metadata.json", "kill"),
    "after the metadata file": ("put_if_absent", "v2.metadata.json", "kill_after"),
    "after the version hint": ("put", mirror.VERSION_HINT, "kill_after"),
    "the metadata write fails": ("put_if_absent", "v2.metadata.json", "raise"),
    "the manifest write fails": ("put", "-m0.avro", "raise"),
}
PUBLISHED = ("after the metadata file", "after the version hint")  # v2.metadata.json exists when it dies
UPSERT_STEPS = {  # an upsert table's v2 supersedes rows of v1: its publish writes a delete file too
    # (killed before the delete file, the state is the one after the data manifest; killed before the
    # delete manifest, the one after the delete file: not repeated)
    "after the delete file": ("put", "-deletes.parquet", "kill_after"),
    "after the delete manifest": ("put", "-d0.avro", "kill_after"),
    "the delete file write fails": ("put", "-deletes.parquet", "raise"),
}
COPY_STEPS = {  # a diff table's v2 holds rows counting twice: its publish writes their copy file first
    "after the copy file": ("put_if_absent", "-copies.parquet", "kill_after"),
    "the copy file write fails": ("put_if_absent", "-copies.parquet", "raise"),
}


def _rows(first: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + n), pa.int64()), "name": [f"n{i}" for i in range(n)]})


def _commit(uri: str, rows: pa.Table, *, create: bool = False, upsert: bool = False, diff: bool = False) -> None:
    written = writer.write_parts(uri, [rows], SCHEMA, write_id=fmt.new_write_id())
    new = (writer.NewTable(SCHEMA, "upsert", ("id",)) if upsert else writer.NewTable(SCHEMA, "diff") if diff
           else writer.NewTable(SCHEMA))
    writer.commit_parts(uri, written, create=new if create else None)


def _lading(uri: str, version: int) -> pa.Table:
    return reader.scan(uri, snapshot=snapshot_at(uri, TableLog.open_existing(uri).storage, version))


def _hinted_metadata(root: Path) -> str:
    return str(root / "metadata" / f"v{(root / 'metadata' / mirror.VERSION_HINT).read_text()}.metadata.json")


def _referenced_files_exist(root: Path) -> None:
    """Every manifest list, manifest and data file any metadata file names exists."""
    for meta_file in sorted((root / "metadata").glob("v*.metadata.json")):
        table = StaticTable.from_metadata(str(meta_file))
        for snap in table.metadata.snapshots:
            assert Path(snap.manifest_list.removeprefix("file://")).exists(), (meta_file, snap.manifest_list)
            for manifest in snap.manifests(table.io):
                assert Path(manifest.manifest_path.removeprefix("file://")).exists()
                for entry in manifest.fetch_manifest_entry(table.io):
                    assert Path(entry.data_file.file_path.removeprefix("file://")).exists()


def _run_child(uri: str, method: str, match: str, action: str, diff: int = 1,
               background: bool = False, first: bool = False) -> subprocess.CompletedProcess[str]:
    """``first``: the child commits (and publishes) a version of its own first, without a fault."""
    written = writer.write_parts(uri, [_rows(100, 4)], SCHEMA, write_id=fmt.new_write_id(), diff=diff)
    args: dict[str, object] = {"kind": "table", "table": uri, "written": [w.to_json() for w in written],
                               "fault": {"method": method, "match": match, "action": action},
                               "background": background}
    if first:
        args["first"] = [w.to_json() for w in writer.write_parts(uri, [_rows(50, 3)], SCHEMA,
                                                                  write_id=fmt.new_write_id())]
    return subprocess.run([sys.executable, str(CHILD), json.dumps(args)], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("step", list(STEPS))
def test_a_publish_killed_at_any_step_leaves_the_previous_snapshot_and_sync_catches_up(
        tmp_path: Path, step: str, capsys: pytest.CaptureFixture[str]) -> None:
    _kill_and_catch_up(tmp_path, step, STEPS[step], capsys)


@pytest.mark.parametrize("step", list(UPSERT_STEPS))
def test_an_upsert_publish_killed_around_its_delete_file_leaves_no_snapshot_naming_a_missing_file(
        tmp_path: Path, step: str, capsys: pytest.CaptureFixture[str]) -> None:
    _kill_and_catch_up(tmp_path, step, UPSERT_STEPS[step], capsys, upsert=True)
    table = StaticTable.from_metadata(_hinted_metadata(tmp_path / "t"))
    snap = table.current_snapshot()
    assert snap is not None
    deletes = [e.data_file for m in snap.manifests(table.io) for e in m.fetch_manifest_entry(table.io)
               if e.data_file.content == DataFileContent.POSITION_DELETES]
    assert [d.record_count for d in deletes] == [2]  # v1's rows of keys 100 and 101, superseded by v2


@pytest.mark.parametrize("step", list(COPY_STEPS))
def test_a_diff_publish_killed_around_its_copy_file_leaves_no_snapshot_naming_a_missing_file(
        tmp_path: Path, step: str, capsys: pytest.CaptureFixture[str]) -> None:
    """v2's rows count twice: killed after creating their copy file (or failing to), the readers see
    v1; the catch-up reuses the copy file (it is never rewritten) and reads every row twice."""
    _kill_and_catch_up(tmp_path, step, COPY_STEPS[step], capsys, counting=True)
    table = StaticTable.from_metadata(_hinted_metadata(tmp_path / "t"))
    assert multiset(table.scan().to_arrow())[(100, "n0")] == 2
    assert len(list((tmp_path / "t" / "metadata").glob("*-copies.parquet"))) == 1


def _kill_and_catch_up(tmp_path: Path, step: str, fault: tuple[str, str, str], capsys: pytest.CaptureFixture[str],
                       *, upsert: bool = False, counting: bool = False) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _rows(0, 5), create=True, upsert=upsert, diff=counting)
    _commit(uri, _rows(100, 2) if upsert else _rows(5, 3))
    method, match, action = fault
    done = _run_child(uri, method, match, action, diff=2 if counting else 1)
    if action == "raise":
        assert done.returncode == 0, done.stderr[-2000:]  # a failing mirror never fails the commit
        assert "Iceberg mirror" in done.stderr and "behind version 2" in done.stderr
    else:
        assert done.returncode == -9, done.stderr[-2000:]
    assert TableLog.open_existing(uri).version == 2  # the commit landed before the mirror began
    v1, v2 = multiset(_lading(uri, 1)), multiset(_lading(uri, 2))
    seen = v2 if step == "after the version hint" else v1  # the hint names version 1 until it is rewritten
    assert multiset(pyiceberg_rows(_hinted_metadata(root))) == seen
    assert multiset(duckdb_rows(str(root), [None])[0]) == seen
    assert (root / "metadata" / "v2.metadata.json").exists() == (step in PUBLISHED)
    if step in PUBLISHED:
        assert multiset(pyiceberg_rows(str(root / "metadata" / "v2.metadata.json"))) == v2
    _referenced_files_exist(root)

    assert cli.main(["table", "sync", uri, "--json"]) == 0  # what a user runs: `lading table sync URI`
    out = json.loads(capsys.readouterr().out)
    assert out["published"] == ([] if step in PUBLISHED else [2])
    assert out["metadata"] == f"{uri}metadata/v2.metadata.json" and out["snapshotVersion"] == 2
    assert (root / "metadata" / mirror.VERSION_HINT).read_text() == "2"
    assert multiset(pyiceberg_rows(_hinted_metadata(root))) == v2
    assert multiset(duckdb_rows(str(root), [None])[0]) == v2
    assert mirror.sync(uri) == []  # idempotent
    _referenced_files_exist(root)


def test_the_next_writer_catches_a_killed_mirror_up_in_version_order(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _rows(0, 5), create=True)
    _commit(uri, _rows(5, 3))
    assert _run_child(uri, "put_if_absent", "v2.metadata.json", "kill").returncode == -9
    _commit(uri, _rows(200, 2))  # version 3: its writer publishes 2, then 3
    latest = StaticTable.from_metadata(str(root / "metadata" / "v3.metadata.json")).metadata
    assert [s.snapshot_id for s in latest.snapshots] == [ice.snapshot_id(v) for v in range(4)]
    assert [e.metadata_file for e in latest.metadata_log][-1] == f"{uri}metadata/v2.metadata.json"
    for v in (2, 3):
        assert multiset(pyiceberg_rows(str(root / "metadata" / "v3.metadata.json"), ice.snapshot_id(v))) \
            == multiset(_lading(uri, v))


@pytest.mark.parametrize("step", ["before the manifest list", "before the metadata file"])
def test_a_process_killed_with_a_background_publish_pending_loses_nothing(tmp_path: Path, step: str) -> None:
    """The child commits v2 with the mirror published in the background (mirror_publisher) and is
    killed in the publisher's thread: the log holds v2, the readers see v1; ``sync`` then gives an
    Iceberg table equal to lading's at every version, and the next background writer publishes on."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _rows(0, 5), create=True)
    _commit(uri, _rows(5, 3))
    method, match, action = STEPS[step]
    done = _run_child(uri, method, match, action, background=True)
    assert done.returncode == -9, done.stderr[-2000:]
    assert TableLog.open_existing(uri).version == 2
    assert not (root / "metadata" / "v2.metadata.json").exists()
    assert multiset(pyiceberg_rows(_hinted_metadata(root))) == multiset(_lading(uri, 1))
    assert [p.version for p in mirror.sync(uri)] == [2]
    from lading_jobs.table.iceberg import publisher as mirror_publisher

    with mirror_publisher.background():
        _commit(uri, _rows(300, 2))  # v3
    latest = str(root / "metadata" / "v3.metadata.json")
    for v in range(4):
        want = multiset(_lading(uri, v))
        assert multiset(pyiceberg_rows(str(root / "metadata" / f"v{v}.metadata.json"))) == want, v
        assert multiset(pyiceberg_rows(latest, ice.snapshot_id(v))) == want, v
    assert multiset(duckdb_rows(str(root), [None])[0]) == multiset(_lading(uri, 3))
    _referenced_files_exist(root)


EARLY_STEPS = {  # v2's commit by a process that published v1: its manifest and list are written beside it
    "the early manifest": ("put", "-m0.avro", "kill"),  # the log commit may land first, or not
    "after the early manifest list": ("put", "/snap-3-", "kill_after"),
    "before the log commit": ("put_if_absent", fmt.commit_uri("file:///x/", 2).removeprefix("file:///x/"), "kill"),
    "after the log commit": ("put_if_absent", fmt.commit_uri("file:///x/", 2).removeprefix("file:///x/"),
                             "kill_after"),
    "before the metadata file": ("put_if_absent", "v2.metadata.json", "kill"),
}


@pytest.mark.parametrize("step", list(EARLY_STEPS))
def test_a_writer_killed_around_its_early_manifests_leaves_readers_whole_and_nothing_behind(
        tmp_path: Path, step: str) -> None:
    """The child commits v1, then v2, whose manifest and manifest list it starts beside the log
    commit (it published v1), killed at each step: the log holds v1 or v2, whole; the Iceberg readers
    see v1; every file a metadata file names exists; ``sync`` and the next writer mirror every version
    exactly; and the mirror's retention, past the grace period, deletes what the killed writer left
    (no file of the mirror is left unreferenced)."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _rows(0, 5), create=True)
    method, match, action = EARLY_STEPS[step]
    done = _run_child(uri, method, match, action, first=True)
    assert done.returncode == -9, done.stderr[-2000:]
    assert "prepared version 2" in done.stderr  # the early round was started
    version = TableLog.open_existing(uri).version
    # killed on the early round's thread, the log commit may have landed or not; otherwise the step says
    assert version in {"before the log commit": (1,), "after the log commit": (2,),
                       "before the metadata file": (2,)}.get(step, (1, 2))
    assert multiset(pyiceberg_rows(_hinted_metadata(root))) == multiset(_lading(uri, 1))
    assert multiset(duckdb_rows(str(root), [None])[0]) == multiset(_lading(uri, 1))
    _referenced_files_exist(root)
    mirror.sync(uri)
    _commit(uri, _rows(300, 2))  # the next writer
    storage = st.open_storage(uri)
    newest = mirror.latest_number(uri, storage)
    latest = str(root / "metadata" / f"v{newest}.metadata.json")
    for v in range(TableLog.open_existing(uri).version + 1):
        assert multiset(pyiceberg_rows(latest, ice.snapshot_id(v))) == multiset(_lading(uri, v)), v
    future = int(time.time() * 1000) + 2 * 3_600_000
    mirror_retention.apply(storage, mirror_retention.plan(uri, storage, future, 3_600_000))
    left = {f"file://{p}" for p in (root / "metadata").iterdir() if mirror_retention.kind(p.name) is not None}
    assert left == mirror_retention.referenced(uri, storage, [mirror.latest_number(uri, storage)]) & left
    _referenced_files_exist(root)
    assert multiset(duckdb_rows(str(root), [None])[0]) == multiset(_lading(uri, TableLog.open_existing(uri).version))
