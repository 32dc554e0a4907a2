"""The Iceberg mirror read by a reader that checks field ids strictly (issue 43, item 5): every
Parquet field id in every file a snapshot lists — parts, copy files, position delete files — is one
the metadata assigned (at most ``last-column-id`` and in one of its ``schemas``) or a spec-reserved id
with its spec meaning (a position delete file's ``file_path`` and ``pos``). lading's own columns
(``_lading_time``, ``_lading_diff``) are recorded in a schema of their own that no snapshot reads, so
pyiceberg and DuckDB still return exactly the user's columns and rows, for every envelope; a table
mirrored before that gets the schema at its next publish, its parts unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import StaticTable
from support.iceberg_readers import (
    assert_strict_field_ids,
    duckdb_rows,
    multiset,
    pyiceberg_rows,
    strict_field_id_problems,
)
from support.kv_tables import (
    SCHEMA,
    batch,
    check_mirror_every_version,
    commit,
    compact_in_process,
    rows_at,
)

from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import Change, TableLog


def _meta_file(root: Path, n: int) -> str:
    return str(root / "metadata" / f"v{n}.metadata.json")


def _file_contents(meta_file: str) -> set[DataFileContent]:
    table = StaticTable.from_metadata(meta_file)
    return {e.data_file.content for s in table.metadata.snapshots for m in s.manifests(table.io)
            for e in m.fetch_manifest_entry(table.io)}


def _history(uri: str, envelope: str) -> None:
    """Loads with updates, delete markers or retractions (by envelope), rows counting more than once
    (diff) and a compaction. (Schema evolution: the every-version tests of test_iceberg_mirror*.py,
    which run the same check.)"""
    create = writer.NewTable(SCHEMA, envelope, ("k",) if envelope == "upsert" else ())
    commit(uri, batch([1, 2, 3, 3], ["a", "b", "c", "c"], [1] * 4, [2 if envelope == "diff" else 1, 1, 1, 1]),
           create=create)
    if envelope == "append":
        commit(uri, batch([4, 5], ["d", None], [2, 2], [1, 1]))
    else:
        commit(uri, batch([2, 3, 4], ["b", "c", "d"], [2, 2, 2], [-1, -1 if envelope == "diff" else 1, 1]))
    compact_in_process(uri, since=2)
    commit(uri, batch([6, 1], ["f", "a"], [4, 4], [1, -1 if envelope == "diff" else 1]))


@pytest.mark.parametrize("envelope", ["append", "upsert", "diff"])
def test_every_field_id_of_every_envelope_is_one_the_metadata_assigned(tmp_path: Path, envelope: str) -> None:
    """At every version (its own metadata file, each of whose snapshots' files): no field id a strict
    reader refuses; pyiceberg and DuckDB read lading's rows, and exactly its columns (``SELECT *``
    shows no lading column)."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _history(uri, envelope)
    latest = TableLog.open_existing(uri).version
    check_mirror_every_version(uri, root)  # rows exact at every version; the strict check on every file
    contents = _file_contents(_meta_file(root, latest))
    want = {"append": {DataFileContent.DATA}, "upsert": {DataFileContent.DATA, DataFileContent.POSITION_DELETES},
            "diff": {DataFileContent.DATA, DataFileContent.POSITION_DELETES}}[envelope]
    assert contents == want  # the check read delete files too where the envelope has them
    if envelope == "diff":
        assert list((root / "metadata").glob("*-copies.parquet"))  # and a copy file (a row counting twice)
    names = rows_at(uri, latest).column_names
    assert names == ["k", "v"]
    assert pyiceberg_rows(_meta_file(root, latest)).column_names == names
    assert duckdb_rows(str(root), [None])[0].column_names == names


def test_lading_columns_are_in_a_schema_of_their_own_that_no_snapshot_reads(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    commit(uri, batch([1, 2], ["a", "b"], [1, 1], [1, 1]), create=writer.NewTable(SCHEMA, "append"))
    log = TableLog.open_existing(uri)
    log.commit(Change(operation="schema", schema=log.snapshot().schema.add_column("x", "bigint")))
    raw = json.loads(Path(_meta_file(root, 1)).read_text())
    own = raw["schemas"][0]
    assert own["schema-id"] == ice.LADING_SCHEMA_ID
    assert [(f["id"], f["name"], f["type"], f["required"]) for f in own["fields"]] == [
        (fmt.TIME_FIELD_ID, fmt.TIME_COLUMN, "long", True), (fmt.DIFF_FIELD_ID, fmt.DIFF_COLUMN, "long", True)]
    assert [s["schema-id"] for s in raw["schemas"][1:]] == [0, 1]
    assert raw["current-schema-id"] == 1
    assert all(s["schema-id"] != ice.LADING_SCHEMA_ID for s in raw["snapshots"])
    assert raw["last-column-id"] == fmt.DIFF_FIELD_ID == ice.LADING_LAST_COLUMN_ID
    assert ice.LADING_LAST_COLUMN_ID < 2_147_483_447  # below the ids the spec reserves


def _as_written_before(root: Path) -> None:
    """The metadata files as the mirror wrote them before it recorded lading's columns: no schema of
    theirs, ``last-column-id`` lading's own counter. (This process forgets what it published.)"""
    for f in (root / "metadata").glob("v*.metadata.json"):
        raw = json.loads(f.read_text())
        raw["schemas"] = [s for s in raw["schemas"] if s["schema-id"] != ice.LADING_SCHEMA_ID]
        raw["last-column-id"] = max(fid["id"] for s in raw["schemas"] for fid in s["fields"])
        f.write_text(json.dumps(raw))
    mirror.forget()


def test_a_table_mirrored_before_is_accounted_for_at_its_next_publish(tmp_path: Path) -> None:
    """Its parts carry lading's columns under the same ids as ever (nothing is rewritten): the old
    metadata files (immutable) still read exactly, and the next publish's file assigns the ids — for
    every snapshot it lists, the old ones too."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    commit(uri, batch([1, 2, 2], ["a", "b", "b"], [1, 1, 1], [1, 1, 1]), create=writer.NewTable(SCHEMA, "diff"))
    commit(uri, batch([2, 3], ["b", "c"], [2, 2], [-1, 1]))
    _as_written_before(root)
    problems = strict_field_id_problems(_meta_file(root, 1))
    assert problems and all(fmt.TIME_COLUMN in p or fmt.DIFF_COLUMN in p for p in problems), problems
    commit(uri, batch([4], ["d"], [3], [1]))
    assert_strict_field_ids(root, first=2)
    table = StaticTable.from_metadata(_meta_file(root, 2))
    assert [s.snapshot_id for s in table.metadata.snapshots] == [1, 2, 3]
    for v in range(3):  # the old files and the new one: lading's rows
        assert multiset(pyiceberg_rows(_meta_file(root, 2), ice.snapshot_id(v)), ["k", "v"]) == multiset(
            rows_at(uri, v)), v
    check_mirror_every_version(uri, root, first=2)
    for v in range(2):
        assert multiset(pyiceberg_rows(_meta_file(root, v)), ["k", "v"]) == multiset(rows_at(uri, v)), v


def test_the_check_refuses_an_unassigned_id_and_a_reserved_id_out_of_place(tmp_path: Path) -> None:
    """The strict check itself: a part column under an id no schema has, and a data file using a
    position delete file's reserved id, are both named."""
    import pyarrow.parquet as pq

    root = tmp_path / "t"
    uri = f"file://{root}/"
    commit(uri, batch([1], ["a"], [1], [1]), create=writer.NewTable(SCHEMA, "append"))
    part = next(root.glob("data/*/*.parquet"))
    t = pq.read_table(part)
    fields = [f.with_metadata({b"PARQUET:field_id": str(fid).encode()})
              for f, fid in zip(t.schema, (1, 2_147_483_546, 17, fmt.DIFF_FIELD_ID), strict=True)]
    pq.write_table(pa.Table.from_arrays(t.columns, schema=pa.schema(fields)), part)
    problems = strict_field_id_problems(_meta_file(root, 0))
    assert len(problems) == 2, problems
    assert "'v': id 2147483546 is reserved" in problems[0] and "'_lading_time': id 17 was never assigned" in problems[1]


def test_sync_records_lading_columns_for_a_table_mirrored_before_without_a_new_commit(tmp_path: Path) -> None:
    """``lading table sync`` on a current mirror whose newest metadata file was written before:
    one more metadata file (same version, same snapshots) that a strict reader takes; a second sync
    writes nothing."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    commit(uri, batch([1, 2], ["a", "b"], [1, 1], [1, 1]), create=writer.NewTable(SCHEMA, "upsert", ("k",)))
    commit(uri, batch([2, 3], ["b2", "c"], [2, 2], [1, 1]))
    _as_written_before(root)
    assert strict_field_id_problems(_meta_file(root, 1))
    assert mirror.sync(uri) == []  # no version was missing
    assert_strict_field_ids(root, first=2)
    old, new = (StaticTable.from_metadata(_meta_file(root, n)).metadata for n in (1, 2))
    assert new.properties[mirror.PROP_VERSION] == "1" and new.snapshots == old.snapshots
    assert new.current_schema_id == old.current_schema_id == 0
    assert new.metadata_log[-1].metadata_file == _meta_file(root, 1).replace(str(root), f"file://{root}")
    assert (root / "metadata" / "version-hint.text").read_text() == "2"
    assert mirror.describe(uri)["mirroredVersion"] == 1
    for v in range(2):
        assert multiset(pyiceberg_rows(_meta_file(root, 2), ice.snapshot_id(v)), ["k", "v"]) == multiset(
            rows_at(uri, v)), v
    assert multiset(duckdb_rows(str(root), [None])[0], ["k", "v"]) == multiset(rows_at(uri, 1))
    mirror.sync(uri)
    assert not (root / "metadata" / "v3.metadata.json").exists()
    commit(uri, batch([4], ["d"], [3], [1]))  # version 2's file follows it, as number 3
    assert_strict_field_ids(root, first=2)
    assert multiset(pyiceberg_rows(_meta_file(root, 3)), ["k", "v"]) == multiset(rows_at(uri, 2))


def test_a_column_added_and_dropped_while_the_mirror_was_off_is_assigned_once_it_is_back_on(
        tmp_path: Path) -> None:
    """A part written while the mirror was off holds a column dropped before it was switched back on:
    the schema of those versions is recorded too (not current), so the part's id of that column is one
    the metadata assigned; readers read the part without it."""
    from lading import cli

    root = tmp_path / "t"
    uri = f"file://{root}/"
    commit(uri, batch([1], ["a"], [1], [1]), create=writer.NewTable(SCHEMA, "append"))
    assert cli.main(["table", "mirror", uri, "--off"]) == 0  # 1
    log = TableLog.open_existing(uri)
    with_c = log.snapshot().schema.add_column("c", "bigint")
    log.commit(Change(operation="schema", schema=with_c))  # 2
    rows = pa.table({"k": pa.array([2], pa.int64()), "v": ["b"], "c": pa.array([5], pa.int64())})
    writer.commit_parts(uri, writer.write_parts(uri, [rows], with_c, write_id=fmt.new_write_id()))  # 3
    log = TableLog.open_existing(uri)
    log.commit(Change(operation="schema", schema=log.snapshot().schema.drop_column("c")))  # 4
    assert cli.main(["table", "mirror", uri, "--on"]) == 0  # 5
    newest = mirror.current_metadata(uri)
    assert newest is not None and not strict_field_id_problems(newest)
    meta = StaticTable.from_metadata(newest).metadata
    assert meta.current_schema_id == TableLog.open_existing(uri).snapshot().schema.schema_id == with_c.schema_id + 1
    assert with_c.schema_id in {s.schema_id for s in meta.schemas}
    assert multiset(pyiceberg_rows(newest)) == multiset(rows_at(uri, 5)) == {(1, "a"): 1, (2, "b"): 1}
    assert multiset(duckdb_rows(str(root), [None])[0]) == multiset(rows_at(uri, 5))
