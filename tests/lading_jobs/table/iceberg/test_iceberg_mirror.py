"""The Iceberg mirror (issue 31), checked with readers no one here wrote: at every version of a
table, lading's reader, pyiceberg's ``StaticTable`` and DuckDB's own ``iceberg_scan`` return the
same multiset of rows, also by snapshot id (time travel); bounds are never narrower than the parts'
data; a version Iceberg cannot read exactly is not mirrored, and the metadata says why.

Local ``file://`` tables, written without Spark (``writer.write_parts`` + ``commit_parts``), keep
the module cheap; one DuckDB subprocess reads every snapshot of a table at once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.conversions import from_bytes
from pyiceberg.table import StaticTable
from support.iceberg_readers import assert_strict_field_ids, duckdb_rows, multiset, pyiceberg_rows

from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg import publisher as mirror_publisher
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import Change, TableError, TableLog, snapshot_at
from lading_jobs.table.schema import TableSchema

SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string"), ("amount", "decimal(12,2)"),
                         ("at", "timestamp"), ("day", "date"), ("score", "double"), ("small", "smallint"),
                         ("flag", "boolean"), ("code", "varchar(8)"), ("local", "timestamp_ntz")])
BASE = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)


def _rows(first: int, n: int, schema: TableSchema = SCHEMA) -> pa.Table:
    ids = list(range(first, first + n))
    data = {
        "id": pa.array(ids, pa.int64()),
        "name": [None if i % 5 == 0 else ("ä" * (i % 3)) + f"name-{i}-" + "x" * (i % 40) for i in ids],
        "amount": pa.array([decimal.Decimal(i * 7 - 50) / 4 for i in ids], pa.decimal128(12, 2)),
        "at": pa.array([BASE + dt.timedelta(minutes=i) for i in ids], pa.timestamp("us", tz="UTC")),
        "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in ids]),
        "score": [(-0.0 if i % 4 == 0 else i / 3) if i % 7 else None for i in ids],
        "small": pa.array([i % 100 - 50 for i in ids], pa.int16()),
        "flag": [i % 2 == 0 for i in ids],
        "code": [f"c{i % 13}" for i in ids],
        "local": pa.array([dt.datetime(2020, 1, 1) + dt.timedelta(seconds=i) for i in ids], pa.timestamp("us")),
    }
    return pa.table({c.name: data[c.name] for c in schema.columns if c.name in data})


def _append(uri: str, table: pa.Table, schema: TableSchema, *, create: bool = False,
            iceberg_mirror: bool = True, envelope: str = "append", diff: int = 1) -> None:
    written = writer.write_parts(uri, [table], schema, write_id=fmt.new_write_id(), diff=diff)
    new = writer.NewTable(schema, envelope=envelope, iceberg_mirror=iceberg_mirror) if create else None
    writer.commit_parts(uri, written, create=new)


def _lading(uri: str, version: int) -> pa.Table:
    return reader.scan(uri, snapshot=snapshot_at(uri, TableLog.open_existing(uri).storage, version))


def _check_every_version(uri: str, root: Path) -> None:
    """At every lading version: the mirror's snapshot holds lading's rows, read by pyiceberg from that
    version's metadata, by pyiceberg by snapshot id from the latest, and by DuckDB (current and by id);
    every field id in the files is one the metadata assigned (a strict reader takes them)."""
    mirror.flush(uri)  # a publish handed to the background publisher lands first
    latest = TableLog.open_existing(uri).version
    meta = str(root / "metadata" / f"v{latest}.metadata.json")
    versions = list(range(latest + 1))
    duck = duckdb_rows(str(root), [None, *(ice.snapshot_id(v) for v in versions)])
    final = _lading(uri, latest)
    names = final.column_names
    assert multiset(duck[0], names) == multiset(final)
    for v, by_id in zip(versions, duck[1:], strict=True):
        want = _lading(uri, v)
        cols = want.column_names
        assert multiset(pyiceberg_rows(str(root / "metadata" / f"v{v}.metadata.json")), cols) == multiset(want), v
        assert multiset(pyiceberg_rows(meta, ice.snapshot_id(v)), cols) == multiset(want), v
        assert multiset(by_id, cols) == multiset(want), v
        own = StaticTable.from_metadata(str(root / "metadata" / f"v{v}.metadata.json")).metadata
        summary = own.snapshot_by_id(ice.snapshot_id(v)).summary  # type: ignore[union-attr]
        assert summary is not None and summary["total-records"] == str(want.num_rows), v  # the rows read
    assert_strict_field_ids(root)


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_every_version_reads_the_same_in_lading_pyiceberg_and_duckdb(tmp_path: Path, background: bool) -> None:
    """Also with the mirror published off the commit path (mirror_publisher): flushed before reading."""
    with mirror_publisher.background() if background else contextlib.nullcontext():
        _every_version(tmp_path)


def _every_version(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 30), SCHEMA, create=True)
    _append(uri, _rows(30, 7), SCHEMA)
    log = TableLog.open_existing(uri)
    renamed = log.snapshot().schema.rename_column("name", "label")  # rename: same id, new name
    log.commit(Change(operation="schema", schema=renamed))
    dropped = log.snapshot().schema.drop_column("score")  # drop: the parts keep it, readers ignore it
    log.commit(Change(operation="schema", schema=dropped))
    readded = log.snapshot().schema.add_column("score", "bigint")  # re-add: a new id, old values stay hidden
    log.commit(Change(operation="schema", schema=readded))
    schema = log.snapshot().schema
    more = _rows(40, 5, SCHEMA).rename_columns(["id", "label", "amount", "at", "day", "score", "small", "flag",
                                                "code", "local"])
    more = more.set_column(5, "score", pa.array([7, None, 9, 10, 11], pa.int64()))
    _append(uri, more, schema)
    _append(uri, _rows(100, 1, SCHEMA).rename_columns(more.column_names).set_column(
        5, "score", pa.array([None], pa.int64())), schema)
    _check_every_version(uri, root)
    meta = StaticTable.from_metadata(str(root / "metadata" / "v6.metadata.json")).metadata
    assert [f.field_id for f in meta.schema().fields] == [c.id for c in schema.columns]
    assert meta.schema().find_field("score").field_id == 11  # not the dropped id 6
    assert (root / "metadata" / "version-hint.text").read_text() == "6"
    snap = meta.current_snapshot()
    assert snap is not None and snap.summary is not None
    assert snap.summary["lading.version"] == "6" and snap.summary["lading.operation"] == "append"
    assert [s.snapshot_id for s in meta.snapshots] == [1, 2, 3, 4, 5, 6, 7]


def test_bounds_are_never_narrower_than_the_parts_data(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    schema = TableSchema.of([("s", "string"), ("x", "double"), ("n", "int"), ("d", "decimal(5,1)")])
    long = "\U0001f600" * 20 + "a"  # four-byte characters, longer than 16
    table = pa.table({"s": ["b" * 40, long, "\U0010ffff" * 18, "a"], "x": [0.0, -0.0, 2.5, None],
                      "n": pa.array([3, -7, 0, 2], pa.int32()),
                      "d": pa.array([decimal.Decimal("1.5"), decimal.Decimal("-9.9"), None, None],
                                    pa.decimal128(5, 1))})
    _append(uri, table, schema, create=True)
    meta = StaticTable.from_metadata(str(root / "metadata" / "v0.metadata.json"))
    files = list(meta.scan().plan_files())
    assert len(files) == 1
    f = files[0].file
    data = pq.read_table(f.file_path.removeprefix("file://"))
    checked = 0
    for c in schema.columns:
        t = ice.iceberg_type(c)
        col = data.column(c.name).drop_null()
        lo = from_bytes(t, f.lower_bounds[c.id]) if c.id in f.lower_bounds else None
        hi = from_bytes(t, f.upper_bounds[c.id]) if c.id in f.upper_bounds else None
        for v in col.to_pylist():
            if c.type == "string":  # Iceberg compares strings as UTF-8 bytes
                assert lo is None or lo.encode() <= v.encode(), (c.name, lo, v)
                assert hi is None or hi.encode() >= v.encode(), (c.name, hi, v)
            else:
                assert lo is None or lo <= v, (c.name, lo, v)
                assert hi is None or hi >= v, (c.name, hi, v)
            checked += 1
        assert f.null_value_counts[c.id] == data.column(c.name).null_count
        assert f.value_counts[c.id] == data.num_rows
    assert checked == 13
    assert len(from_bytes(ice.iceberg_type(schema.columns[0]), f.lower_bounds[1])) <= 16  # truncated as Iceberg does
    assert 1 not in f.upper_bounds  # no 16-character string is above U+10FFFF * 18: no upper bound at all
    x_lo = from_bytes(ice.iceberg_type(schema.columns[1]), f.lower_bounds[2])
    assert str(x_lo) == "-0.0"  # -0.0 is below 0.0 in Iceberg's order: the bound must not be 0.0
    assert pc.min(data.column("n")).as_py() == from_bytes(ice.iceberg_type(schema.columns[2]), f.lower_bounds[3])


def test_a_type_iceberg_cannot_express_is_not_mirrored_and_the_metadata_names_the_column(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    schema = TableSchema.of([("id", "bigint"), ("wait", "interval day to second")])
    _append(uri, pa.table({"id": pa.array([1, 2], pa.int64()),
                           "wait": pa.array([dt.timedelta(seconds=5), None], pa.duration("us"))}), schema,
            create=True)
    meta = StaticTable.from_metadata(str(root / "metadata" / "v0.metadata.json")).metadata
    assert meta.current_snapshot_id is None
    assert "column 'wait'" in meta.properties[mirror.PROP_REASON]
    assert "interval" in meta.properties[mirror.PROP_REASON]
    assert mirror.describe(uri)["behindSince"] == 0
    log = TableLog.open_existing(uri)
    log.commit(Change(operation="schema", schema=log.snapshot().schema.drop_column("wait")))
    meta = StaticTable.from_metadata(str(root / "metadata" / "v1.metadata.json")).metadata
    assert meta.current_snapshot_id is None  # dropped, but the part still holds it: pyiceberg would refuse it
    assert "column id 2" in meta.properties[mirror.PROP_REASON]
    snap = log.snapshot()
    rows = pa.concat_tables([reader.read_part(log.storage, snap, p) for p in snap.parts])
    written = writer.write_parts(uri, [rows], snap.schema, write_id="c-" + fmt.new_write_id()[2:])
    writer.commit_parts(uri, written, log=log, operation="compact", remove=[p.path for p in snap.parts])
    meta = StaticTable.from_metadata(str(root / "metadata" / "v2.metadata.json")).metadata
    assert mirror.PROP_REASON not in meta.properties  # rewritten without it: a snapshot for version 2
    assert meta.current_snapshot_id == ice.snapshot_id(2)
    assert multiset(pyiceberg_rows(str(root / "metadata" / "v2.metadata.json"))) == multiset(_lading(uri, 2))


def test_a_row_counting_twice_is_read_twice_and_a_retraction_of_it_once(tmp_path: Path) -> None:
    """A row of ``_lading_diff`` 2 (where the mirror used to stop) is read twice through its part's
    copy file; retracting it once leaves one; the mirror never falls behind."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    schema = TableSchema.of([("k", "bigint"), ("v", "string")])
    _append(uri, pa.table({"k": pa.array([1, 2, 2], pa.int64()), "v": ["a", "b", "b"]}), schema, create=True,
            envelope="diff")
    _append(uri, pa.table({"k": pa.array([3], pa.int64()), "v": ["c"]}), schema, diff=-1)  # exact: a delete file
    _append(uri, pa.table({"k": pa.array([2], pa.int64()), "v": ["b"]}), schema, diff=2)  # one row, counting twice
    _append(uri, pa.table({"k": pa.array([2, 4], pa.int64()), "v": ["b", "d"]}), schema, diff=-1)
    latest = str(root / "metadata" / "v3.metadata.json")
    meta = StaticTable.from_metadata(latest).metadata
    assert meta.current_snapshot_id == ice.snapshot_id(3) and mirror.PROP_BEHIND not in meta.properties
    assert multiset(_lading(uri, 2)) == {(1, "a"): 1, (2, "b"): 4}
    assert multiset(_lading(uri, 3)) == {(1, "a"): 1, (2, "b"): 3}
    _check_every_version(uri, root)
    assert mirror.describe(uri) == {"metadata": f"{uri}metadata/v3.metadata.json", "mirroredVersion": 3,
                                    "snapshotVersion": 3}


def test_an_upsert_table_with_rows_is_not_mirrored_as_if_it_were_append(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    schema = TableSchema.of([("k", "bigint"), ("v", "string")])
    written = writer.write_parts(uri, [pa.table({"k": pa.array([1], pa.int64()), "v": ["a"]})], schema,
                                 write_id=fmt.new_write_id())
    writer.commit_parts(uri, written, create=writer.NewTable(schema, "upsert", ("k",)))
    _append(uri, pa.table({"k": pa.array([1], pa.int64()), "v": ["b"]}), schema)
    meta_file = str(root / "metadata" / "v1.metadata.json")
    assert StaticTable.from_metadata(meta_file).metadata.current_snapshot_id == ice.snapshot_id(1)
    assert multiset(pyiceberg_rows(meta_file)) == multiset(_lading(uri, 1)) == {(1, "b"): 1}  # a delete file


def test_the_mirror_is_off_for_a_table_created_with_the_switch_off(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 3), SCHEMA, create=True, iceberg_mirror=False)
    _append(uri, _rows(3, 3), SCHEMA)
    assert not (root / "metadata").exists()
    assert mirror.sync(uri) == []
    assert json.loads((root / fmt.LOG_DIR / fmt.commit_name(0)).read_text())["metadata"]["icebergMirror"] is False


def test_a_compaction_commit_is_an_iceberg_replace_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 4), SCHEMA, create=True)
    _append(uri, _rows(4, 4), SCHEMA)
    log = TableLog.open_existing(uri)
    snap = log.snapshot()
    merged = pa.concat_tables([reader.read_part(log.storage, snap, p) for p in snap.parts])
    written = writer.write_parts(uri, [merged], SCHEMA, write_id="c-" + fmt.new_write_id()[2:])
    writer.commit_parts(uri, written, log=log, operation="compact", remove=[p.path for p in snap.parts])
    _append(uri, _rows(8, 2), SCHEMA)
    _check_every_version(uri, root)
    meta = StaticTable.from_metadata(str(root / "metadata" / "v3.metadata.json")).metadata
    assert meta.snapshot_by_id(ice.snapshot_id(2)).summary.operation.value == "replace"  # type: ignore[union-attr]
    files = list(StaticTable.from_metadata(str(root / "metadata" / "v3.metadata.json")).scan().plan_files())
    assert len(files) == 2


@pytest.mark.parametrize("path", ["file:///etc/passwd", "{root}metadata/../../other/x.avro", "{root}metadata/a/b.avro",
                                  "{root}data/w-1/part-0.parquet", "{root}metadata/%2e%2e.avro", "s3://b/t/metadata/x.avro"])
def test_a_manifest_list_outside_the_table_is_refused_naming_the_metadata_file(tmp_path: Path, path: str) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 2), SCHEMA, create=True)
    assert mirror.metadata_path_problem(uri, path.format(root=uri)) is not None
    meta_file = root / "metadata" / "v0.metadata.json"
    meta = json.loads(meta_file.read_text())
    meta["snapshots"][0]["manifest-list"] = path.format(root=uri)
    meta_file.write_text(json.dumps(meta))
    mirror.forget(uri)  # as another process, which reads the metadata back
    _append(uri, _rows(2, 2), SCHEMA)  # the commit lands; its mirror refuses to follow the path
    assert TableLog.open_existing(uri).version == 1
    assert not (root / "metadata" / "v1.metadata.json").exists()
    with pytest.raises(TableError, match=r"v0\.metadata\.json: snapshot 1's manifest-list .* is not"):
        mirror.sync(uri)


def test_the_mirrors_own_paths_pass_the_check(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 2), SCHEMA, create=True)
    _append(uri, _rows(2, 2), SCHEMA)
    meta = StaticTable.from_metadata(str(root / "metadata" / "v1.metadata.json"))
    for snap in meta.metadata.snapshots:
        assert mirror.metadata_path_problem(uri, snap.manifest_list) is None
        assert all(mirror.metadata_path_problem(uri, m.manifest_path) is None for m in snap.manifests(meta.io))


def _compact_all(uri: str) -> list[str]:
    """Rewrite every part into one (a compaction commit); the removed parts' URIs."""
    log = TableLog.open_existing(uri)
    snap = log.snapshot()
    rows = pa.concat_tables([reader.read_part(log.storage, snap, p) for p in snap.parts])
    written = writer.write_parts(uri, [rows], snap.schema, write_id="c-" + fmt.new_write_id()[2:])
    writer.commit_parts(uri, written, log=log, operation="compact", remove=[p.path for p in snap.parts])
    return [snap.part_uri(p) for p in snap.parts]


def test_retention_expires_the_snapshots_of_the_parts_it_deletes_first(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 3), SCHEMA, create=True)
    _append(uri, _rows(3, 3), SCHEMA)
    removed = _compact_all(uri)
    _append(uri, _rows(6, 2), SCHEMA)
    storage = TableLog.open_existing(uri).storage
    assert mirror.expire(uri, storage, removed) == set()  # nothing to hold back: the current snapshot is exact
    for u in removed:  # what retention.apply then does
        Path(u.removeprefix("file://")).unlink()
    hinted = str(root / "metadata" / f"v{(root / 'metadata' / mirror.VERSION_HINT).read_text()}.metadata.json")
    assert hinted.endswith("v4.metadata.json")  # a metadata file of its own, after v3's
    meta = StaticTable.from_metadata(hinted)
    assert [s.snapshot_id for s in meta.metadata.snapshots] == [ice.snapshot_id(2), ice.snapshot_id(3)]
    assert meta.metadata.properties[mirror.PROP_VERSION] == "3"
    for snap in meta.metadata.snapshots:  # every file a kept snapshot names is still there
        for m in snap.manifests(meta.io):
            assert all(Path(e.data_file.file_path.removeprefix("file://")).exists()
                       for e in m.fetch_manifest_entry(meta.io))
    assert multiset(pyiceberg_rows(hinted)) == multiset(_lading(uri, 3))
    assert multiset(pyiceberg_rows(hinted, ice.snapshot_id(2))) == multiset(_lading(uri, 2))
    assert multiset(duckdb_rows(str(root), [None])[0]) == multiset(_lading(uri, 3))
    _append(uri, _rows(8, 1), SCHEMA)  # the next version follows the expired metadata
    latest = StaticTable.from_metadata(str(root / "metadata" / "v5.metadata.json")).metadata
    assert [s.snapshot_id for s in latest.snapshots] == [ice.snapshot_id(v) for v in (2, 3, 4)]
    assert mirror.describe(uri)["mirroredVersion"] == 4
    assert multiset(pyiceberg_rows(str(root / "metadata" / "v5.metadata.json"))) == multiset(_lading(uri, 4))


def test_retention_keeps_the_parts_of_a_mirror_behind_the_log(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    schema = TableSchema.of([("k", "bigint")])
    _append(uri, pa.table({"k": pa.array([1, 2], pa.int64())}), schema, create=True)
    _append(uri, pa.table({"k": pa.array([2], pa.int64())}), schema, diff=-1)  # append: the mirror stays at 0
    removed = _compact_all(uri)  # lading consolidates; the mirror's current snapshot still names the old part
    storage = TableLog.open_existing(uri).storage
    first = TableLog.open_existing(uri).snapshot(version=0).parts[0]
    held = mirror.expire(uri, storage, removed)
    assert held == {f"{uri}{first.path}"}  # retention must keep it: it is what Iceberg readers still read
    assert multiset(duckdb_rows(str(root), [None])[0]) == multiset(_lading(uri, 0))


@pytest.mark.s3
def test_on_s3_the_mirror_is_read_by_pyiceberg_through_its_own_s3_client(bucket: str, s3_endpoint: str) -> None:
    from lading_jobs import storage as st

    uri = f"s3://{bucket}/tables/t/"
    storage = st.S3Storage()
    for i, first in enumerate((0, 4, 9)):
        written = writer.write_parts(uri, [_rows(first, 4)], SCHEMA, write_id=fmt.new_write_id(), storage=storage)
        writer.commit_parts(uri, written, storage=storage, create=writer.NewTable(SCHEMA) if i == 0 else None)
    props = {"s3.endpoint": s3_endpoint, "s3.access-key-id": "testing", "s3.secret-access-key": "testing",
             "s3.region": "us-east-1"}
    assert storage.read(mirror.hint_uri(uri)) == b"2"
    table = StaticTable.from_metadata(mirror.metadata_uri(uri, 2), properties=props)
    for v in range(3):
        want = reader.scan(uri, storage=storage, snapshot=snapshot_at(uri, storage, v))
        got = table.scan(snapshot_id=ice.snapshot_id(v)).to_arrow()
        assert multiset(got, want.column_names) == multiset(want), v
    assert all(f.file.file_path.startswith(f"{uri}data/w-") for f in table.scan().plan_files())


@pytest.mark.parametrize("envelope", ["diff", "upsert"])
@pytest.mark.parametrize("seed", range(1, 4))
def test_random_operations_never_give_an_iceberg_reader_a_wrong_answer(tmp_path: Path, seed: int,
                                                                       envelope: str) -> None:
    """Random appends, retractions (diff) or updates and delete markers of earlier keys (upsert),
    rows counting 2 or 3 times and a retraction of one copy, compactions and schema changes on a small table: after every commit, the mirror's current
    snapshot is that commit's version (delete files keep it exact) and holds exactly lading's rows,
    and every earlier snapshot exactly its version's rows; DuckDB agrees at the end."""
    import random

    rnd = random.Random(seed)
    root = tmp_path / "t"
    uri = f"file://{root}/"
    schema = TableSchema.of([("k", "bigint"), ("s", "string")])
    written = writer.write_parts(uri, [pa.table({"k": pa.array([0], pa.int64()), "s": ["x0"]})], schema,
                                 write_id=fmt.new_write_id())
    writer.commit_parts(uri, written, create=writer.NewTable(schema, envelope, ("k",) if envelope == "upsert" else ()))
    next_key = 1
    for _ in range(8):
        log = TableLog.open_existing(uri)
        snap = log.snapshot()
        op = rnd.choice(["append", "append", "retract", "retract", "count", "compact", "add", "rename", "drop"])
        cols = snap.schema.names
        if op in ("append", "retract", "count"):
            n = rnd.randint(1, 3)
            keys = list(range(next_key, next_key + n))
            if envelope == "upsert":  # some keys again: new versions (or, retracting, delete markers)
                keys = [rnd.randrange(next_key) if rnd.random() < 0.5 else k for k in keys]
            data = {c.name: (pa.array(keys, pa.int64()) if c.name == "k"
                             else pa.array([f"v{next_key + i}" for i in range(n)]) if c.type == "string"
                             else pa.array([next_key + i for i in range(n)], pa.int64()))
                    for c in snap.schema.columns}
            next_key += n
            rows = pa.table(data)
            if op == "retract":  # insert then retract one of the rows: the sum stays positive for the rest
                _append(uri, rows, snap.schema)
                rows = rows.slice(0, 1)
            if op == "count":  # rows counting 2 or 3 times, then one copy of one retracted
                _append(uri, rows, snap.schema, diff=rnd.choice([2, 3]))
                rows = rows.slice(0, 1)
            _append(uri, rows, snap.schema, diff=-1 if op in ("retract", "count") else 1)
        elif op == "compact" and snap.parts:
            _compact_all(uri)
        elif op == "add":
            log.commit(Change(operation="schema", schema=snap.schema.add_column(f"c{next_key}", "bigint")))
            next_key += 1
        elif op == "rename" and len(cols) > 1:
            log.commit(Change(operation="schema", schema=snap.schema.rename_column(cols[-1], f"r{next_key}")))
            next_key += 1
        elif op == "drop" and len(cols) > 1:
            log.commit(Change(operation="schema", schema=snap.schema.drop_column(cols[-1])))
        latest = mirror.describe(uri)
        meta = StaticTable.from_metadata(latest["metadata"])
        for s in meta.metadata.snapshots:  # every snapshot: exactly its version's rows
            want = _lading(uri, ice.version_of(s.snapshot_id))
            assert multiset(meta.scan(snapshot_id=s.snapshot_id).to_arrow(), want.column_names) == multiset(want)
        assert latest["mirroredVersion"] == latest["snapshotVersion"] == TableLog.open_existing(uri).version
    assert_strict_field_ids(root)
    current = mirror.describe(uri).get("snapshotVersion")
    if current is not None:
        want = _lading(uri, current)
        assert multiset(duckdb_rows(str(root), [None])[0], want.column_names) == multiset(want)


def test_concurrent_writers_publish_every_version_once_in_order(tmp_path: Path) -> None:
    """Two writers append at once (each with its own handle; some of their commits race and rebase):
    every version gets exactly one snapshot, in order, each holding that version's rows."""
    import threading

    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 2), SCHEMA, create=True)
    errors: list[BaseException] = []

    def write(first: int) -> None:
        try:
            log = TableLog.open_existing(uri)
            for i in range(5):
                rows = _rows(first + 10 * i, 2)
                written = writer.write_parts(uri, [rows], SCHEMA, write_id=fmt.new_write_id())
                writer.commit_parts(uri, written, log=log)
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            errors.append(e)

    threads = [threading.Thread(target=write, args=(first,)) for first in (1000, 2000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert mirror.sync(uri) == []  # the writers left nothing to catch up
    state = mirror.describe(uri)
    assert state["mirroredVersion"] == state["snapshotVersion"] == 10
    meta = StaticTable.from_metadata(state["metadata"])
    assert [s.snapshot_id for s in meta.metadata.snapshots] == [ice.snapshot_id(v) for v in range(11)]
    for v in range(11):
        want = _lading(uri, v)
        assert multiset(meta.scan(snapshot_id=ice.snapshot_id(v)).to_arrow(), want.column_names) == multiset(want)


def test_the_switch_turns_an_existing_tables_mirror_off_and_on_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lading import cli

    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 3), SCHEMA, create=True)
    assert cli.main(["table", "mirror", uri, "--off"]) == 0  # version 1
    assert "off from version 1" in capsys.readouterr().out
    _append(uri, _rows(3, 3), SCHEMA)  # version 2: not mirrored
    meta = StaticTable.from_metadata(mirror.current_metadata(uri) or "").metadata
    assert meta.properties[mirror.PROP_VERSION] == "1" and "switched off at version 1" in meta.properties[
        mirror.PROP_REASON]
    assert meta.current_snapshot_id == ice.snapshot_id(0)  # readers keep version 0, and are told why
    assert not (root / "metadata" / "v2.metadata.json").exists() and mirror.sync(uri) == []
    assert cli.main(["table", "mirror", uri, "--off"]) == 0 and "already off" in capsys.readouterr().out
    assert cli.main(["table", "mirror", uri, "--on"]) == 0  # version 3: catches up, then mirrors it
    state = mirror.describe(uri)
    assert state["mirroredVersion"] == state["snapshotVersion"] == 3 and "reason" not in state
    assert multiset(pyiceberg_rows(state["metadata"])) == multiset(_lading(uri, 3))
    _append(uri, _rows(6, 1), SCHEMA)
    assert mirror.describe(uri)["snapshotVersion"] == 4


def test_a_column_added_with_a_default_waits_for_a_rewrite_and_sort_by_is_the_sort_order(tmp_path: Path) -> None:
    """Iceberg v2 readers read NULL where lading reads a new column's default in older parts: such a
    version is not mirrored (the reason names the column) until a compaction writes the default into
    the parts. The table's sortBy is the metadata's default sort order."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    written = writer.write_parts(uri, [_rows(0, 4)], SCHEMA, write_id=fmt.new_write_id())
    writer.commit_parts(uri, written, create=writer.NewTable(SCHEMA, sort_by=("day", "id")))
    meta = StaticTable.from_metadata(str(root / "metadata" / "v0.metadata.json")).metadata
    order = meta.sort_order_by_id(meta.default_sort_order_id)
    assert order is not None and [f.source_id for f in order.fields] == [SCHEMA.column("day").id,
                                                                       SCHEMA.column("id").id]
    log = TableLog.open_existing(uri)
    log.commit(Change(operation="schema", schema=log.snapshot().schema.add_column("region", "string", "eu")))
    meta = StaticTable.from_metadata(str(root / "metadata" / "v1.metadata.json")).metadata
    assert meta.current_snapshot_id == ice.snapshot_id(0)
    assert "column 'region'" in meta.properties[mirror.PROP_REASON]
    assert "'eu'" in meta.properties[mirror.PROP_REASON]
    _compact_all(uri)  # version 2: the parts now hold 'eu'
    state = mirror.describe(uri)
    assert state["snapshotVersion"] == 2 and "reason" not in state
    got = pyiceberg_rows(state["metadata"])
    assert set(got.column("region").to_pylist()) == {"eu"}
    assert multiset(got) == multiset(_lading(uri, 2))


def test_manifests_are_merged_into_one_when_a_snapshot_would_hold_too_many(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mirror, "MERGE_AT", 3)
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 2), SCHEMA, create=True)
    for i in range(1, 6):
        _append(uri, _rows(10 * i, 2), SCHEMA)
    meta = StaticTable.from_metadata(str(root / "metadata" / "v5.metadata.json"))
    counts = [len(s.manifests(meta.io)) for s in meta.metadata.snapshots]
    assert counts == [1, 2, 3, 1, 2, 3]  # the fourth would have held four: one manifest of every live part
    merged = meta.metadata.snapshots[3].manifests(meta.io)[0]
    statuses = sorted(e.status.name for e in merged.fetch_manifest_entry(meta.io, discard_deleted=False))
    assert statuses == ["ADDED", "EXISTING", "EXISTING", "EXISTING"]
    for v in range(6):
        want = _lading(uri, v)
        assert multiset(meta.scan(snapshot_id=ice.snapshot_id(v)).to_arrow(), want.column_names) == multiset(want)


def test_a_metadata_file_keeps_the_newest_snapshots_and_every_version_stays_readable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A metadata file lists at most SNAPSHOTS_MAX snapshots (the oldest expire from the newest file,
    with their snapshot-log entries), so its size stops growing with the table's history; every
    version stays readable, by id, from its own metadata file, which metadata-log lists."""
    monkeypatch.setattr(mirror, "SNAPSHOTS_MAX", 3, raising=False)  # raising: the old code has no bound
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 2), SCHEMA, create=True)
    for i in range(1, 7):
        _append(uri, _rows(10 * i, 2), SCHEMA)
    meta = StaticTable.from_metadata(str(root / "metadata" / "v6.metadata.json")).metadata
    assert [s.snapshot_id for s in meta.snapshots] == [ice.snapshot_id(v) for v in (4, 5, 6)]
    assert [e.snapshot_id for e in meta.snapshot_log] == [ice.snapshot_id(v) for v in (4, 5, 6)]
    assert meta.current_snapshot_id == ice.snapshot_id(6)
    listed = [e.metadata_file for e in meta.metadata_log]
    assert listed == [f"{uri}metadata/v{n}.metadata.json" for n in range(6)]
    sizes = [(root / "metadata" / f"v{n}.metadata.json").stat().st_size for n in range(7)]
    assert sizes[6] - sizes[5] < sizes[3] - sizes[2], sizes  # only the metadata-log entry grows it now
    for v in range(7):  # each version: from its own file, and from the newest while it is listed there
        want = _lading(uri, v)
        own = str(root / "metadata" / f"v{v}.metadata.json")
        assert multiset(pyiceberg_rows(own, ice.snapshot_id(v)), want.column_names) == multiset(want), v
    newest = str(root / "metadata" / "v6.metadata.json")
    for v in (4, 5, 6):
        want = _lading(uri, v)
        assert multiset(pyiceberg_rows(newest, ice.snapshot_id(v)), want.column_names) == multiset(want), v
    assert multiset(duckdb_rows(str(root), [None])[0]) == multiset(_lading(uri, 6))


@pytest.mark.parametrize("type_name", ["array<interval day to second>", "struct<x:void>", "map<string,variant>",
                                       "void", "interval year to month", "variant"])
def test_types_iceberg_readers_would_misread_are_refused_naming_the_column(type_name: str) -> None:
    schema = TableSchema.of([("id", "bigint"), ("odd", type_name)])
    with pytest.raises(ice.Unmirrorable, match=r"column 'odd' \(id 2\) has the type"):
        ice.iceberg_schema(schema)
    assert ice.unmirrorable_ids(schema) == {2}
