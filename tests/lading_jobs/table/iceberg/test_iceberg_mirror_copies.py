"""The Iceberg mirror of rows counting more than once (issue 31): a part's rows of ``_lading_diff``
k > 1 are read k times through the part's copy file (``table.iceberg.copies``), and retractions cancel
them one copy per -1 with position deletes, by lading's own rule. At every version, lading's
reader, pyiceberg (that version's metadata file, and by snapshot id from the latest) and DuckDB's
own ``iceberg_scan`` (by snapshot id) return the same multiset of rows, and the snapshot summary's
``total-records`` is that many rows.

Local ``file://`` tables written without Spark keep the module cheap; the compaction runs the
engine in this process; one DuckDB subprocess reads every snapshot at once.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
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
from lading_jobs.table.iceberg import copies, deletes, mirror
from lading_jobs.table.iceberg import switch as mirror_switch
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import TableLog, read_commit, snapshot_at


def _copy_files(root: Path) -> list[Path]:
    return sorted((root / "metadata").glob("*-copies.parquet"))


# -- pure: the rule over expanded rows is lading's own ---------------------------------------------------
def test_expand_puts_each_copy_at_its_place_in_the_copy_file() -> None:
    table = pa.table({fmt.DIFF_COLUMN: pa.array([3, 1, 2, -2, 1], pa.int64()),
                      copies.PART_COLUMN: pa.array([0, 0, 0, 1, 1], pa.int32()),
                      cons.POS_COLUMN: pa.array([0, 1, 2, 0, 1], pa.int64())})
    out = copies.expand(table)
    assert out.column(fmt.DIFF_COLUMN).to_pylist() == [1, 1, 1, 1, 1, 1, -2, 1]
    assert out.column(cons.POS_COLUMN).to_pylist() == [0, 0, 0, 1, 2, 2, 0, 1]
    assert out.column(copies.COPY_COLUMN).to_pylist() == [-1, 0, 1, -1, -1, 2, -1, -1]
    assert copies.copy_rows(np.array([3, 1, 2])).tolist() == [0, 0, 2]  # the copy file's rows
    with pytest.raises(ValueError, match="every row of each part"):
        copies.expand(table.take([0, 2, 1, 3, 4]))


def test_the_rows_left_alive_with_copies_are_consolidates_answer_also_commit_by_commit() -> None:
    """Random commits (one part each) of a diff table with rows counting 2 or 3 times, retractions
    of one or two, equal rows across parts: the rows and copies the delete files leave are exactly
    ``consolidate``'s rows; deciding commit by commit names each row or copy once and ends where
    deciding in full ends."""
    identity = ["k", "v"]
    for seed in range(40):
        rnd = random.Random(seed)
        pieces = []
        named = np.zeros(0, dtype=bool)
        for seq in range(1, 6):
            n = rnd.randint(1, 4)
            pieces.append(pa.table({
                "k": pa.array([rnd.choice([1, 2, None]) for _ in range(n)], pa.int64()),
                "v": pa.array([rnd.choice(["a", "b"]) for _ in range(n)], pa.string()),
                fmt.TIME_COLUMN: pa.array([0] * n, pa.int64()),
                fmt.DIFF_COLUMN: pa.array([rnd.choice([1, 2, 3, -1, -2]) for _ in range(n)], pa.int64()),
                cons.SEQ_COLUMN: pa.array([seq] * n, pa.int64()), cons.POS_COLUMN: pa.array(range(n), pa.int64()),
                copies.PART_COLUMN: pa.array([seq] * n, pa.int32())}))
            table = pa.concat_tables(pieces)
            expanded = copies.expand(table)
            new = np.asarray(expanded.column(cons.SEQ_COLUMN).to_numpy()) == seq
            now = deletes.decide(expanded, "diff", identity, new)
            named = np.concatenate([named, np.zeros(int(new.sum()), dtype=bool)])
            assert not (named & now).any(), seed
            named |= now
            assert (named == deletes.decide(expanded, "diff", identity)).all(), seed
            want = cons.consolidate(table.drop_columns([copies.PART_COLUMN]), "diff")
            assert multiset(expanded.filter(pa.array(~named)), identity) == multiset(want, identity), seed


# -- end to end ------------------------------------------------------------------------------------------
def test_a_diff_table_with_rows_counting_more_than_once_is_exact_at_every_version(tmp_path: Path) -> None:
    """A load whose part holds rows counting 2 and 3 times, a retraction of one copy, a compaction
    that consolidates duplicates into rows counting more than once, retractions after it: every
    version mirrored, with copy files only for the parts that need them."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _batch([1, 2, 3], ["a", "b", "c"], [0, 0, 0], [2, 1, 3]),
            create=writer.NewTable(SCHEMA, "diff"))  # v0: a counts 2, c counts 3
    assert len(_copy_files(root)) == 1
    _commit(uri, _batch([3, 2, 4], ["c", "b", "d"], [1, 1, 1], [-1, 1, 1]))  # v1: one copy of c retracted
    _commit(uri, _batch([2, 1], ["b", "a"], [2, 2], [1, -2]))  # v2: b counts 3 over three rows; a gone
    _compact(uri, since=3)  # v3: the three b rows and the c rows consolidate into rows counting more than once
    log = TableLog.open_existing(uri)
    snap = log.snapshot()
    assert read_commit(uri, log.storage, 3)["operation"] == "compact"
    merged = multiset(reader.read_part(log.storage, snap, snap.parts[0], order=False),
                      ["k", "v", fmt.DIFF_COLUMN])
    assert len(snap.parts) == 1 and merged == {(2, "b", 3): 1, (3, "c", 2): 1, (4, "d", 1): 1}
    _commit(uri, _batch([2], ["b"], [3], [-1]))  # v4: one copy of b retracted
    _commit(uri, _batch([3, 4], ["c", "d"], [4, 4], [-2, 1]))  # v5: c gone; d counts 2 over two rows
    assert multiset(_lading(uri, 4)) == {(2, "b"): 2, (3, "c"): 2, (4, "d"): 1}
    _check_every_version(uri, root)
    meta = StaticTable.from_metadata(str(root / "metadata" / "v3.metadata.json")).metadata
    assert meta.snapshot_by_id(ice.snapshot_id(3)).summary.operation.value == "replace"  # type: ignore[union-attr]


def test_a_compaction_drops_the_copy_files_of_the_parts_it_removed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _batch([1], ["a"], [0], [3]), create=writer.NewTable(SCHEMA, "diff"))
    _commit(uri, _batch([1, 2], ["a", "b"], [1, 1], [-1, 1]))
    before = TableLog.open_existing(uri).snapshot()
    _compact(uri, since=1)
    snap = TableLog.open_existing(uri).snapshot()
    assert {p.path for p in snap.parts}.isdisjoint(p.path for p in before.parts)
    table = StaticTable.from_metadata(str(root / "metadata" / f"v{snap.version}.metadata.json"))
    current = table.metadata.current_snapshot()
    assert current is not None
    listed = {e.data_file.file_path for m in current.manifests(table.io) for e in m.fetch_manifest_entry(table.io)}
    assert copies.copies_uri(uri, before.parts[0].path) not in listed
    assert listed >= {copies.copies_uri(uri, p.path) for p in snap.parts if copies.needed("diff", p)}
    assert multiset(pyiceberg_rows(str(root / "metadata" / f"v{snap.version}.metadata.json"))) == {
        (1, "a"): 2, (2, "b"): 1}


def test_an_append_table_compacted_while_its_mirror_was_off_is_exact_once_it_is_back_on(tmp_path: Path) -> None:
    """With the mirror off, an append table's compaction merges identical rows into one row counting
    n times; switched back on, the mirror reads each of them n times through its copy file."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _batch([1, 1, 2], ["a", "a", "b"], [0, 0, 0], [1, 1, 1]),
            create=writer.NewTable(SCHEMA, "append", iceberg_mirror=False))
    _commit(uri, _batch([1, 2], ["a", "b"], [1, 1], [1, 1]))
    _compact(uri, since=2)
    log = TableLog.open_existing(uri)
    assert max(p.stats.max_diff or 0 for p in log.snapshot().parts) == 3  # merged: a counts 3
    on = mirror_switch.switch(log, True)
    assert on is not None
    mirror.sync(uri)
    _commit(uri, _batch([1], ["a"], [3], [1]))
    latest = TableLog.open_existing(uri).version
    meta_file = mirror.metadata_uri(uri, mirror.latest_number(uri, log.storage)).removeprefix("file://")
    meta = StaticTable.from_metadata(meta_file).metadata
    assert meta.current_snapshot_id == ice.snapshot_id(latest), meta.properties.get(mirror.PROP_REASON)
    for v in (on.version, latest):
        want = multiset(_lading(uri, v))
        assert multiset(pyiceberg_rows(meta_file, ice.snapshot_id(v)), ["k", "v"]) == want, v
    assert multiset(duckdb_rows(str(root), [None])[0], ["k", "v"]) == {(1, "a"): 4, (2, "b"): 2}


def test_a_copy_file_holds_the_parts_user_columns_under_their_field_ids(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _batch([1, 2], ["a", "b"], [1, 1], [3, 1]), create=writer.NewTable(SCHEMA, "diff"))
    (path,) = _copy_files(root)
    table = pq.read_table(path)
    assert table.column_names == ["k", "v"]  # no lading-only column
    assert [f.metadata[fmt.FIELD_ID_KEY] for f in table.schema] == [b"1", b"2"]
    assert table.to_pylist() == [{"k": 1, "v": "a"}, {"k": 1, "v": "a"}]
    part = TableLog.open_existing(uri).snapshot().parts[0]
    assert path == Path(copies.copies_uri(uri, part.path).removeprefix("file://"))


def test_an_append_table_retraction_still_stops_the_mirror_and_says_why(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _commit(uri, _batch([1], ["a"], [1], [1]), create=writer.NewTable(SCHEMA, "append"))
    _commit(uri, _batch([1], ["a"], [2], [-1]))
    meta = StaticTable.from_metadata(str(root / "metadata" / "v1.metadata.json")).metadata
    assert meta.current_snapshot_id == ice.snapshot_id(0)
    assert "retraction" in meta.properties[mirror.PROP_REASON]


@pytest.mark.s3
def test_on_s3_pyiceberg_reads_the_copies_through_its_own_s3_client(bucket: str, s3_endpoint: str) -> None:
    storage = st.S3Storage()
    uri = f"s3://{bucket}/tables/counting/"
    batches = [_batch([1, 2], ["a", "b"], [0, 0], [3, 1]), _batch([1], ["a"], [1], [-1])]
    for i, batch in enumerate(batches):
        written = writer.write_parts(uri, [batch], SCHEMA, write_id=fmt.new_write_id(), storage=storage)
        writer.commit_parts(uri, written, storage=storage, create=writer.NewTable(SCHEMA, "diff") if i == 0 else None)
    props = {"s3.endpoint": s3_endpoint, "s3.access-key-id": "testing", "s3.secret-access-key": "testing",
             "s3.region": "us-east-1"}
    table = StaticTable.from_metadata(mirror.metadata_uri(uri, 1), properties=props)
    assert table.metadata.current_snapshot_id == ice.snapshot_id(1)
    for v, want in ((0, {(1, "a"): 3, (2, "b"): 1}), (1, {(1, "a"): 2, (2, "b"): 1})):
        got = table.scan(snapshot_id=ice.snapshot_id(v)).to_arrow()
        assert multiset(got, ["k", "v"]) == want == multiset(
            reader.scan(uri, storage=storage, snapshot=snapshot_at(uri, storage, v))), v
