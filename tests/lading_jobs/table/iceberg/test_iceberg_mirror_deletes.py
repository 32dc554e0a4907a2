"""The Iceberg mirror of upsert and diff tables (issue 31): position delete files make every version
exact. At every version, lading's reader, pyiceberg's ``StaticTable`` (that version's metadata file,
and by snapshot id from the latest) and DuckDB's own ``iceberg_scan`` (by snapshot id) return the
same multiset of rows: loads, delete markers, a key re-inserted after its delete, late rows that
lose, ties on (key, time) across two parts of one commit, compactions (bin-pack and sorted, the
engine's own run), retention; retractions and duplicates of diff tables. The rule the delete files
follow is lading's own (``consolidate``), checked here against ``consolidate`` directly too.

Local ``file://`` tables written without Spark keep the module cheap; compactions run the engine in
this process (``compact_task.in_process``); one DuckDB subprocess reads every snapshot at once.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import StaticTable
from support.iceberg_readers import duckdb_rows, multiset, pyiceberg_rows
from support.kv_tables import SCHEMA
from support.kv_tables import batch as _batch
from support.kv_tables import check_mirror_every_version as _check_every_version
from support.kv_tables import commit as _commit
from support.kv_tables import compact_in_process as _compact
from support.kv_tables import rows_at as _lading

from lading_jobs import storage as st
from lading_jobs.table import consolidate as cons
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.iceberg import deletes, mirror
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import Change, TableLog, read_commit, snapshot_at


def _delete_files(meta_file: str) -> list[Any]:
    table = StaticTable.from_metadata(meta_file)
    snap = table.metadata.current_snapshot()
    assert snap is not None
    return [e.data_file for m in snap.manifests(table.io) for e in m.fetch_manifest_entry(table.io)
            if e.data_file.content == DataFileContent.POSITION_DELETES]


# -- the rule is lading's own ------------------------------------------------------------------------
def _random_rows(rnd: random.Random, envelope: str, n: int, seq: int) -> pa.Table:
    keys = [rnd.choice([1, 2, 3, None]) for _ in range(n)]
    diffs = [rnd.choice([1, 1, -1]) for _ in range(n)]
    return pa.table({"k": pa.array(keys, pa.int64()),
                     "v": pa.array([rnd.choice(["a", "b"]) if envelope == "diff" else f"v{seq}-{i}"
                                    for i in range(n)], pa.string()),
                     fmt.TIME_COLUMN: pa.array([rnd.randint(0, 3) for _ in range(n)], pa.int64()),
                     fmt.DIFF_COLUMN: pa.array(diffs, pa.int64()),
                     cons.SEQ_COLUMN: pa.array([seq] * n, pa.int64()),
                     cons.POS_COLUMN: pa.array(range(n), pa.int64())})


@pytest.mark.parametrize("envelope", ["upsert", "diff"])
def test_the_rows_left_alive_are_consolidates_answer_also_when_decided_commit_by_commit(envelope: str) -> None:
    """Pure: for random commits of small parts (delete markers, retractions, equal times, NULL keys),
    the rows the delete files leave are exactly ``consolidate``'s rows; deciding commit by commit
    (``decide`` with the new rows) names each row once and ends where deciding in full ends."""
    identity = ["k"] if envelope == "upsert" else ["k", "v"]
    for seed in range(30):
        rnd = random.Random(seed)
        table = _random_rows(rnd, envelope, 0, 0)
        named = np.zeros(0, dtype=bool)
        for seq in range(1, 6):
            table = pa.concat_tables([table, _random_rows(rnd, envelope, rnd.randint(1, 4), seq)])
            new = np.asarray(table.column(cons.SEQ_COLUMN).to_numpy()) == seq
            now = deletes.decide(table, envelope, identity, new)
            named = np.concatenate([named, np.zeros(int(new.sum()), dtype=bool)])
            assert not (named & now).any(), seed  # a row is named once
            named |= now
            assert (named == deletes.decide(table, envelope, identity)).all(), seed
            want = cons.consolidate(table, envelope, identity)
            assert multiset(table.filter(pa.array(~named)), ["k", "v"]) == multiset(want, ["k", "v"]), seed


def test_candidate_parts_come_from_key_statistics_and_keep_part_order(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _batch([1, 2], ["a", "b"], [1, 1], [1, 1]), _batch([10, 12], ["c", "d"], [1, 1], [1, 1]),
            create=writer.NewTable(SCHEMA, "upsert", ("k",)))
    _commit(uri, _batch([5, 6], ["e", "f"], [1, 1], [1, 1]), _batch([2, 2], ["g", "h"], [2, 2], [1, 1]))
    snap = TableLog.open_existing(uri).snapshot()
    parts = list(snap.parts)
    touched = [parts[3]]  # keys 2..2
    assert deletes.candidates(parts, touched, [1]) == [parts[0], parts[3]]  # not 10..12, not 5..6
    assert deletes.candidates(parts, touched, [1], floating={1}) == parts  # float keys: every part


# -- upsert tables -----------------------------------------------------------------------------------
def test_an_upsert_table_is_exact_at_every_version(tmp_path: Path) -> None:
    """Loads, delete markers, a re-insert after a delete, a late row that loses, ties on (key, time)
    across two parts of one commit, a bin-pack and a sorted compaction: every version mirrored."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _batch([1, 2, 3, 4, 5, 6], list("abcdef"), [1] * 6, [1] * 6),
            create=writer.NewTable(SCHEMA, "upsert", ("k",)))  # v0: a load
    _commit(uri, _batch([2, 3, 4, 7, 2], ["b2", "c2", None, "g", "b3"], [2, 2, 2, 2, 3], [1, 1, -1, 1, 1]))  # v1
    _commit(uri, _batch([4, 5], ["d2", "late"], [3, 0], [1, 1]))  # v2: 4 re-inserted; 5's row is older: it loses
    _commit(uri, _batch([1, 6], ["tie-first", None], [5, 4], [1, -1]),  # v3: two parts, same (key, time):
            _batch([1, 8], ["tie-second", "h"], [5, 4], [1, 1]))  # the later part wins
    _commit(uri, _batch([9, 9, 3], ["i", "i2", None], [1, 1, 9], [1, 1, -1]))  # v4: a tie inside one part
    assert multiset(_lading(uri, 3))[(1, "tie-second")] == 1
    files = _delete_files(str(root / "metadata" / "v4.metadata.json"))
    alive = _lading(uri, 4).num_rows
    assert alive == 7 and sum(f.record_count for f in files) == 20 - alive  # each row not in the answer once
    _compact(uri)  # v5: bin-pack
    _commit(uri, _batch([5, 10], ["e2", "j"], [7, 7], [1, 1]), _batch([10, 11], ["j2", "k"], [7, 7], [1, 1]))  # v6
    _compact(uri, ("v",))  # v7: sorted
    _commit(uri, _batch([10], [None], [8], [-1]))  # v8
    storage = TableLog.open_existing(uri).storage
    assert [read_commit(uri, storage, v)["operation"] for v in (5, 7)] == ["compact", "compact"]
    _check_every_version(uri, root)
    meta = StaticTable.from_metadata(str(root / "metadata" / "v7.metadata.json")).metadata
    summary = meta.snapshot_by_id(ice.snapshot_id(7)).summary  # type: ignore[union-attr]
    assert summary is not None and summary.operation.value == "replace"


def test_retention_after_a_compaction_leaves_readers_exact(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _batch([1, 2, 3], list("abc"), [1, 1, 1], [1, 1, 1]),
            create=writer.NewTable(SCHEMA, "upsert", ("k",)))
    _commit(uri, _batch([2, 3], ["b2", None], [2, 2], [1, -1]))
    log = TableLog.open_existing(uri)
    before = log.snapshot()
    _compact(uri)
    removed = [before.part_uri(p) for p in before.parts if p.path not in {q.path for q in log.snapshot().parts}]
    assert removed
    _commit(uri, _batch([1, 4], ["a2", "d"], [3, 3], [1, 1]))
    assert mirror.expire(uri, log.storage, removed) == set()
    for u in removed:  # what retention.apply then does
        Path(u.removeprefix("file://")).unlink()
    hinted = str(root / "metadata" / f"v{(root / 'metadata' / mirror.VERSION_HINT).read_text()}.metadata.json")
    meta = StaticTable.from_metadata(hinted)
    latest = TableLog.open_existing(uri).version
    assert [s.snapshot_id for s in meta.metadata.snapshots] == [ice.snapshot_id(v) for v in (2, latest)]
    for snap in meta.metadata.snapshots:  # every data and delete file a kept snapshot names exists
        for m in snap.manifests(meta.io):
            assert all(Path(e.data_file.file_path.removeprefix("file://")).exists()
                       for e in m.fetch_manifest_entry(meta.io))
    for v in (2, latest):
        assert multiset(pyiceberg_rows(hinted, ice.snapshot_id(v))) == multiset(_lading(uri, v))
    assert multiset(duckdb_rows(str(root), [None])[0]) == multiset(_lading(uri, latest))


def test_a_compaction_drops_the_delete_files_of_the_parts_it_removed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _batch([1, 2], ["a", "b"], [1, 1], [1, 1]), create=writer.NewTable(SCHEMA, "upsert", ("k",)))
    _commit(uri, _batch([1, 2], ["a2", None], [2, 2], [1, -1]))
    _commit(uri, _batch([3], ["c"], [2], [1]))
    assert len(_delete_files(str(root / "metadata" / "v2.metadata.json"))) == 1
    before = TableLog.open_existing(uri).snapshot()
    _compact(uri, since=2)  # consolidates up to time 2
    snap = TableLog.open_existing(uri).snapshot()
    assert snap.version == 3 and {p.path for p in snap.parts}.isdisjoint(p.path for p in before.parts)
    meta_file = str(root / "metadata" / "v3.metadata.json")
    named = set()
    for f in _delete_files(meta_file):
        named |= set(pq.read_table(f.file_path.removeprefix("file://")).column("file_path").to_pylist())
    assert named <= {f"{uri}{p.path}" for p in snap.parts}  # none names a removed part
    assert multiset(pyiceberg_rows(meta_file)) == multiset(_lading(uri, 3)) == {(1, "a2"): 1, (3, "c"): 1}


# -- diff tables ----------------------------------------------------------------------------------------
def test_a_diff_table_with_retractions_is_exact_at_every_version(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _batch([1, 2, 2, 3], ["a", "b", "b", "c"], [1] * 4, [1] * 4),
            create=writer.NewTable(SCHEMA, "diff"))  # v0: duplicates count twice
    _commit(uri, _batch([2, 3, 4], ["b", "c", "d"], [2, 2, 2], [-1, -1, -1]))  # v1: retractions (4: before its insert)
    _commit(uri, _batch([4, 3, 2], ["d", "c", "b"], [3, 3, 3], [1, 1, -1]))  # v2: 4's insert cancelled; 3 back; 2 gone
    _commit(uri, _batch([2, 2], ["b", "b"], [4, 4], [1, 1]), _batch([1], ["a"], [4], [-1]))  # v3: two parts
    _check_every_version(uri, root)
    log = TableLog.open_existing(uri)
    log.commit(Change(operation="schema", schema=log.snapshot().schema.drop_column("v")))  # v4: rows merge by k
    assert mirror.describe(uri)["snapshotVersion"] == 4
    want = _lading(uri, 4)
    assert multiset(pyiceberg_rows(str(root / "metadata" / "v4.metadata.json")), ["k"]) == multiset(want)
    assert multiset(duckdb_rows(str(root), [None])[0], ["k"]) == multiset(want)


@pytest.mark.s3
def test_on_s3_pyiceberg_applies_the_delete_files_through_its_own_s3_client(bucket: str, s3_endpoint: str) -> None:
    storage = st.S3Storage()
    uri = f"s3://{bucket}/tables/upserts/"
    batches = [_batch([1, 2, 3], list("abc"), [1, 1, 1], [1, 1, 1]), _batch([2, 3], ["b2", None], [2, 2], [1, -1]),
               _batch([3, 1], ["c3", "a0"], [3, 0], [1, 1])]
    for i, batch in enumerate(batches):
        written = writer.write_parts(uri, [batch], SCHEMA, write_id=fmt.new_write_id(), storage=storage)
        writer.commit_parts(uri, written, storage=storage,
                            create=writer.NewTable(SCHEMA, "upsert", ("k",)) if i == 0 else None)
    props = {"s3.endpoint": s3_endpoint, "s3.access-key-id": "testing", "s3.secret-access-key": "testing",
             "s3.region": "us-east-1"}
    table = StaticTable.from_metadata(mirror.metadata_uri(uri, 2), properties=props)
    assert table.metadata.current_snapshot_id == ice.snapshot_id(2)
    for v in range(3):
        want = reader.scan(uri, storage=storage, snapshot=snapshot_at(uri, storage, v))
        assert multiset(table.scan(snapshot_id=ice.snapshot_id(v)).to_arrow(), ["k", "v"]) == multiset(want), v
    assert multiset(table.scan().to_arrow(), ["k", "v"]) == {(1, "a"): 1, (2, "b2"): 1, (3, "c3"): 1}


def test_a_compaction_of_some_parts_carries_the_delete_files_of_the_parts_it_left(tmp_path: Path) -> None:
    """An upsert compaction decides only its outputs: the rows of a part it left alone that earlier
    delete files named (superseded by the parts it compacted) stay named, in one delete file."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    n = 3000
    big = _batch(list(range(n)), [f"{i:05d}-" + "x" * 40 for i in range(n)], [1] * n, [1] * n)  # not a candidate
    _commit(uri, big, create=writer.NewTable(SCHEMA, "upsert", ("k",)))
    _commit(uri, _batch([1, 2], ["a", "b"], [2, 2], [1, 1]))
    _commit(uri, _batch([2, 3, n + 1], ["b2", None, "new"], [3, 3, 3], [1, -1, 1]))
    before = TableLog.open_existing(uri).snapshot()
    assert before.parts[0].size > 8 * 1024 > max(p.size for p in before.parts[1:])
    _compact(uri, target_kb=16)
    snap = TableLog.open_existing(uri).snapshot()
    assert snap.version == 3 and before.parts[0] in snap.parts and len(snap.parts) == 2  # the big part stayed
    files = _delete_files(str(root / "metadata" / "v3.metadata.json"))
    assert len(files) == 1
    named = pq.read_table(files[0].file_path.removeprefix("file://"))
    assert sorted(named.filter(pa.compute.equal(named.column("file_path"), f"{uri}{before.parts[0].path}"))
                  .column("pos").to_pylist()) == [1, 2, 3]  # carried over: keys 1, 2, 3 of the big part
    _commit(uri, _batch([1], ["a2"], [4], [1]))
    _check_every_version(uri, root)
