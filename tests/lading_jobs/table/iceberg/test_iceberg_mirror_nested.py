"""Nested columns (struct, array, map) in the Iceberg mirror (issue 31): nested fields get ids from
the table's id counter, recorded with the schema in the log and written as Parquet field ids by
lading's writers, so lading's reader, pyiceberg's ``StaticTable`` and DuckDB's own ``iceberg_scan``
return the same rows at every version, also by snapshot id. A part written before nested fields had
ids (DuckDB would read them as NULL) stops the mirror with a reason until a compaction rewrites it;
a log written before them still opens.

Local ``file://`` tables written without Spark (``writer.write_parts`` + ``commit_parts``), as in
test_iceberg_mirror.py.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable
from pyiceberg.types import ListType, MapType, NestedField, StructType
from support.iceberg_readers import assert_strict_field_ids, duckdb_rows, pyiceberg_rows

from lading_jobs import storage as st
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.engine import compact
from lading_jobs.engine import RunContext
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import Change, Part, Snapshot, TableLog, TableMeta, snapshot_at
from lading_jobs.table.schema import Column, TableSchema
from lading_jobs.table.stats.part import ColumnStats, PartStats
from lading_spec.compaction import parse_compaction

SCHEMA = TableSchema.of([("id", "bigint"), ("s", "struct<a:int,b:string>"),
                         ("l", "array<struct<x:int,y:array<string>>>"), ("m", "map<string,int>")])


def _rows(first: int, n: int) -> pa.Table:
    """Nested values with NULLs at every level, empty lists and maps, a struct in a list."""
    ids = list(range(first, first + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "s": [None if i % 5 == 0 else {"a": None if i % 3 == 0 else i, "b": f"b{i}"} for i in ids],
        "l": [None if i % 7 == 0 else [] if i % 4 == 0 else
              [{"x": i, "y": [f"y{i}", None]}, None, {"x": None, "y": []}] for i in ids],
        "m": pa.array([None if i % 6 == 0 else [] if i % 4 == 1 else [("k", i), ("n", None)] for i in ids],
                      pa.map_(pa.string(), pa.int32())),
    }, schema=pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.struct([("a", pa.int32()),
                                                                               ("b", pa.string())])),
                         pa.field("l", pa.list_(pa.struct([("x", pa.int32()), ("y", pa.list_(pa.string()))]))),
                         pa.field("m", pa.map_(pa.string(), pa.int32()))]))


def _frozen(v: Any) -> Any:
    """A nested value as a hashable one (structs as sorted items, lists and maps as tuples)."""
    if isinstance(v, dict):
        return tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    if isinstance(v, list | tuple):
        return tuple(_frozen(x) for x in v)
    return v


def _multiset(table: pa.Table, columns: list[str], *, as_pyiceberg: bool = False) -> dict[Any, int]:
    """The rows as a multiset. ``as_pyiceberg``: a NULL list of structs as ``[]``, as pyiceberg 0.12
    reads it (its own bug, apache/iceberg-python#3833; DuckDB reads NULL): lading's rows as pyiceberg
    would return them if the mirror is exact."""
    out: dict[Any, int] = {}
    cols = []
    for c in columns:
        values = table.column(c).to_pylist()
        t = table.schema.field(c).type
        if as_pyiceberg and pa.types.is_list(t) and pa.types.is_struct(t.value_type):
            values = [[] if v is None else v for v in values]
        cols.append(values)
    for row in zip(*cols, strict=True):
        key = _frozen(list(row))
        out[key] = out.get(key, 0) + 1
    return out


def _lading(uri: str, version: int) -> pa.Table:
    return reader.scan(uri, snapshot=snapshot_at(uri, TableLog.open_existing(uri).storage, version))


def _append(uri: str, table: pa.Table, schema: TableSchema, *, create: bool = False, old: bool = False) -> None:
    written = (_old_parts(uri, table, schema) if old else
               writer.write_parts(uri, [table], schema, write_id=fmt.new_write_id()))
    writer.commit_parts(uri, written, create=writer.NewTable(schema) if create else None)


def _strip(t: pa.DataType) -> pa.DataType:
    """``t`` without field ids on nested fields: how lading wrote parts before they had them."""
    def field(f: pa.Field) -> pa.Field:
        meta = {k: v for k, v in (f.metadata or {}).items() if k != fmt.FIELD_ID_KEY}
        return pa.field(f.name, _strip(f.type), f.nullable, meta or None)
    if pa.types.is_struct(t):
        return pa.struct([field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(field(t.key_field), field(t.item_field))
    if pa.types.is_list(t):
        return pa.list_(field(t.value_field))
    return t


def _old_parts(uri: str, table: pa.Table, schema: TableSchema) -> list[writer.WrittenPart]:
    """Parts as lading wrote them before nested fields had ids: the nested fields carry no Parquet
    field ids, and the log's part entry no ``nestedIds``."""
    w = writer.PartWriter(uri, schema, fmt.new_write_id())
    w.arrow_schema = pa.schema([f.with_type(_strip(f.type)) for f in w.arrow_schema], w.arrow_schema.metadata)
    w.write(writer.prepare(table, schema, 0))
    return [dataclasses.replace(d, part=dataclasses.replace(d.part, nested_ids=False)) for d in w.finish()]


def _compact(uri: str, sort_by: tuple[str, ...] = ()) -> None:
    """The compaction engine's own run (its groups rewritten in this process, ``CeilingPartWriter``)."""
    doc: dict[str, Any] = {"table": uri, "since": {"version": 0}, "targetFileSize": "64kB", "minInputFiles": 2,
                           "sortBy": list(sort_by)}
    storage = st.open_storage(uri)
    before = TableLog.open_existing(uri).version
    compact(None, parse_compaction(doc), RunContext(), storage=storage, runner=compact_task.in_process(storage))
    entry = json.loads((Path(uri[len("file://"):]) / "_lading_log" / f"{before + 1:020d}.json").read_text())
    assert entry["operation"] == "compact" and entry["remove"], entry.get("operation")


def _check_every_version(uri: str, root: Path) -> None:
    """At every lading version: pyiceberg (from that version's metadata file, and by snapshot id from
    the newest) and DuckDB (by snapshot id, and the current snapshot) read lading's rows."""
    latest = TableLog.open_existing(uri).version
    newest = str(root / "metadata" / f"v{latest}.metadata.json")
    duck = duckdb_rows(str(root), [None, *(ice.snapshot_id(v) for v in range(latest + 1))])
    final = _lading(uri, latest)
    assert _multiset(duck[0], final.column_names) == _multiset(final, final.column_names)
    for v, by_id in zip(range(latest + 1), duck[1:], strict=True):
        want = _lading(uri, v)
        cols = want.column_names
        expected, as_py = _multiset(want, cols), _multiset(want, cols, as_pyiceberg=True)
        assert _multiset(pyiceberg_rows(str(root / "metadata" / f"v{v}.metadata.json")), cols) == as_py, v
        assert _multiset(pyiceberg_rows(newest, ice.snapshot_id(v)), cols) == as_py, v
        assert _multiset(by_id, cols) == expected, v
    assert_strict_field_ids(root)  # nested fields' ids too


def _field_ids(t: pa.DataType, path: str = "") -> dict[str, int | None]:
    """Every nested field's ``PARQUET:field_id`` in an Arrow type (as a part's Arrow schema stores it)."""
    out: dict[str, int | None] = {}
    children = ([(t.field(i).name, t.field(i)) for i in range(t.num_fields)] if pa.types.is_struct(t) else
                [("key", t.key_field), ("value", t.item_field)] if pa.types.is_map(t) else
                [("element", t.value_field)] if pa.types.is_list(t) else [])
    for name, f in children:
        p = f"{path}.{name}" if path else name
        raw = (f.metadata or {}).get(fmt.FIELD_ID_KEY)
        out[p] = int(raw) if raw is not None else None
        out.update(_field_ids(f.type, p))
    return out


# -- nested field ids: the schema, the log, the writers ------------------------------------------
def test_nested_fields_get_ids_from_the_table_counter_and_keep_them_through_evolution() -> None:
    s = SCHEMA
    ids = {c.name: dict(c.field_ids) for c in s.columns}
    assert ids == {"id": {}, "s": {"a": 5, "b": 6},
                   "l": {"element": 7, "element.x": 8, "element.y": 9, "element.y.element": 10},
                   "m": {"key": 11, "value": 12}}
    assert s.last_column_id == 12  # never handed out again: a new column comes after the nested ids
    evolved = s.add_column("z", "struct<q:bigint>").drop_column("s").rename_column("l", "items")
    assert [(c.name, c.id) for c in evolved.columns] == [("id", 1), ("items", 3), ("m", 4), ("z", 13)]
    assert dict(evolved.column("items").field_ids) == ids["l"] and dict(evolved.column("z").field_ids) == {"q": 14}
    readded = evolved.add_column("s", "struct<a:int,b:string>")
    assert dict(readded.column("s").field_ids) == {"a": 16, "b": 17}  # a new column: new ids, not 5 and 6
    assert TableSchema.from_dict(json.loads(json.dumps(readded.to_dict()))) == readded
    assert readded.to_dict()["columns"][1]["fieldIds"] == ids["l"]
    dotted = TableSchema.of([("d", "struct<`a.b`:int,a:struct<b:int>>")])
    assert dict(dotted.column("d").field_ids) == {"a\\.b": 2, "a": 3, "a.b": 4}  # a name's dot is escaped


def test_lading_writers_write_the_nested_field_ids_into_every_new_part(tmp_path: Path) -> None:
    """Loads and streams (``write_parts``) and compaction outputs (``CeilingPartWriter``) write the
    schema's nested ids as Parquet field ids, and the log records that the part has them."""
    from lading_jobs.compact.parts import CeilingPartWriter

    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 20), SCHEMA, create=True)
    log = TableLog.open_existing(uri)
    snap = log.snapshot()
    cw = CeilingPartWriter(uri, snap.schema, "c-" + fmt.new_write_id()[2:], 0, table_id=snap.table_id,
                           envelope=snap.envelope, storage=st.open_storage(uri), max_size=1 << 20)
    cw.write(pa.concat_tables([reader.read_part(log.storage, snap, p, order=False) for p in snap.parts]))
    writer.commit_parts(uri, cw.finish(), log=log, operation="compact", remove=[p.path for p in snap.parts])
    want = {c.name: dict(c.field_ids) for c in SCHEMA.columns if c.field_ids}
    for version in (0, 1):
        parts = snapshot_at(uri, log.storage, version).parts
        assert parts and all(p.nested_ids for p in parts)
        for p in parts:
            arrow = pq.read_schema(root / p.path)
            for name, ids in want.items():
                assert _field_ids(arrow.field(name).type) == ids, (version, name)
            footer = pq.ParquetFile(root / p.path).schema  # the Parquet footer itself, as other readers see it
            assert "optional int32 field_id=8 x" in str(footer) and "field_id=12 value" in str(footer)
    entry = json.loads((root / "_lading_log" / f"{0:020d}.json").read_text())
    assert entry["schema"]["columns"][2]["fieldIds"]["element.x"] == 8 and entry["add"][0]["nestedIds"] is True


def _as_old_log(root: Path) -> None:
    """Rewrite commit 0 as lading wrote it before nested fields had ids: no ``fieldIds``, the id
    counter at the last column id, no ``nestedIds`` on parts."""
    path = root / "_lading_log" / f"{0:020d}.json"
    entry = json.loads(path.read_text())
    for c in entry["schema"]["columns"]:
        c.pop("fieldIds", None)
    entry["schema"]["lastColumnId"] = max(c["id"] for c in entry["schema"]["columns"])
    for p in entry.get("add", ()):
        p.pop("nestedIds", None)
    path.write_text(json.dumps(entry))


def test_a_log_written_before_nested_ids_opens_and_its_columns_get_ids_after_the_counter(tmp_path: Path) -> None:
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 10), SCHEMA, create=True, old=True)
    _as_old_log(root)
    mirror.forget()
    log = TableLog.open_existing(uri)
    schema = log.snapshot().schema
    assert dict(schema.column("s").field_ids) == {"a": 5, "b": 6} and schema.last_column_id == 12
    assert TableLog.open_existing(uri).snapshot().schema == schema  # the same ids at every open
    assert _multiset(_lading(uri, 0), ["id", "s", "l", "m"]) == _multiset(_rows(0, 10), ["id", "s", "l", "m"])
    log.commit(Change(operation="schema", schema=schema.add_column("n", "bigint")))
    again = TableLog.open_existing(uri).snapshot().schema
    assert again.column("n").id == 13 and dict(again.column("m").field_ids) == {"key": 11, "value": 12}
    entry = json.loads((root / "_lading_log" / f"{1:020d}.json").read_text())
    assert entry["schema"]["columns"][1]["fieldIds"] == {"a": 5, "b": 6}  # recorded with the schema's commit


# -- the mirror: nested columns read exactly ---------------------------------------------------------
def _meta(root: Path, n: int) -> Any:
    return StaticTable.from_metadata(str(root / "metadata" / f"v{n}.metadata.json")).metadata


def test_nested_columns_read_the_same_in_lading_pyiceberg_and_duckdb_at_every_version(tmp_path: Path) -> None:
    """Loads, appends, evolution of nested columns (add, rename, drop, re-add) and a compaction:
    every version is mirrored, and the three readers agree at each, also by snapshot id."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 12), SCHEMA, create=True)                       # 0
    _append(uri, _rows(12, 5), SCHEMA)                                     # 1
    log = TableLog.open_existing(uri)
    schema = log.snapshot().schema.add_column("z", "array<map<string,struct<q:bigint>>>")
    log.commit(Change(operation="schema", schema=schema))                  # 2: add (older parts read NULL)
    z = [None, [], [[("a", {"q": 1}), ("b", None)], []], [None]]
    more = _rows(17, 4).append_column("z", pa.array(z, pa.list_(pa.map_(pa.string(), pa.struct([("q", pa.int64())])))))
    _append(uri, more, schema)                                             # 3
    log = TableLog.open_existing(uri)
    log.commit(Change(operation="schema", schema=log.snapshot().schema.rename_column("l", "items")))  # 4
    log.commit(Change(operation="schema", schema=log.snapshot().schema.drop_column("s")))             # 5
    schema = log.snapshot().schema.add_column("s", "struct<a:int,b:string>")
    log.commit(Change(operation="schema", schema=schema))                  # 6: re-added: new ids, old values hidden
    again = _rows(30, 3).rename_columns(["id", "s", "items", "m"]).append_column("z", pa.nulls(3, more.schema.field("z").type))
    _append(uri, again.select(["id", "items", "m", "z", "s"]), schema)    # 7
    _compact(uri, sort_by=("id",))                                        # 8: sorted
    _append(uri, _rows(40, 2).rename_columns(["id", "s", "items", "m"]), schema)  # 9
    _check_every_version(uri, root)
    meta = _meta(root, 9)
    assert meta.current_snapshot_id == ice.snapshot_id(9) and mirror.PROP_REASON not in meta.properties
    final = TableLog.open_existing(uri).snapshot().schema
    iceberg = meta.schema()
    for c in final.columns:  # Iceberg's ids are lading's, nested fields too
        for path, fid in c.field_ids:
            names = [c.name, *(p.replace("\\.", ".") for p in path.split("."))]
            assert iceberg.find_field(".".join(names)).field_id == fid, (c.name, path)
    assert iceberg.find_field("items").field_id == 3 and dict(final.column("items").field_ids)["element.x"] == 8
    assert dict(final.column("s").field_ids) != {"a": 5, "b": 6}  # the re-added column's ids are new
    mapping = json.loads(meta.properties[mirror.PROP_NAME_MAPPING])
    assert {"names": ["key"], "field-id": 11} in next(f for f in mapping if f["names"] == ["m"])["fields"]
    assert {"names": [fmt.TIME_COLUMN], "field-id": fmt.TIME_FIELD_ID} in mapping


def test_iceberg_types_of_nested_columns_carry_the_logs_ids_and_optional_elements() -> None:
    t = ice.iceberg_schema(SCHEMA)
    assert t.find_field("s").field_type == StructType(NestedField(5, "a", ice.it.IntegerType(), required=False),
                                                      NestedField(6, "b", ice.it.StringType(), required=False))
    lst = t.find_field("l").field_type
    assert isinstance(lst, ListType) and lst.element_id == 7 and not lst.element_required
    mp = t.find_field("m").field_type
    assert isinstance(mp, MapType) and (mp.key_id, mp.value_id) == (11, 12) and not mp.value_required
    nested_void = Column(9, "odd", "array<struct<w:interval day to second>>", field_ids=(("element", 10),
                                                                                           ("element.w", 11)))
    with pytest.raises(ice.Unmirrorable, match=r"column 'odd' \(id 9\) has the type array<struct<w:interval"):
        ice.iceberg_type(nested_void)
    stats = PartStats(3, 10, 0, 0, 1, 1, {1: ColumnStats(min=1, max=3, nulls=0), 2: ColumnStats(nulls=1),
                                          3: ColumnStats(nulls=0), 4: ColumnStats(nulls=2)})
    metrics = ice.column_metrics(Part("data/x.parquet", 10, stats, nested_ids=True), SCHEMA)
    assert metrics["value_counts"].keys() == metrics["lower_bounds"].keys() == {1}  # primitive leaves only


def test_parts_without_nested_ids_stop_the_mirror_until_a_compaction_rewrites_them(tmp_path: Path) -> None:
    """A table written before nested fields had ids (old parts, old log): DuckDB would read the nested
    values as NULL, so no snapshot is published and the reason names the part; a compaction writes
    the parts again with ids and the mirror resumes, exact."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    _append(uri, _rows(0, 10), SCHEMA, create=True, old=True)             # 0, as old lading wrote it
    _as_old_log(root)
    mirror.forget()
    old = TableLog.open_existing(uri).snapshot().parts[0].path
    assert mirror.sync(uri) == []  # v0 was published at create (without a snapshot)
    _append(uri, _rows(10, 3), TableLog.open_existing(uri).snapshot().schema)   # 1: new parts have ids
    meta = _meta(root, 1)
    assert meta.current_snapshot_id is None
    reason = meta.properties[mirror.PROP_REASON]
    assert f"part {old}" in reason and "nested column 's'" in reason and "compaction" in reason
    assert mirror.describe(uri)["behindSince"] == 0
    _compact(uri)                                                          # 2: bin-pack
    meta = _meta(root, 2)
    assert meta.current_snapshot_id == ice.snapshot_id(2) and mirror.PROP_REASON not in meta.properties
    want = _lading(uri, 2)
    cols = want.column_names
    assert _multiset(want, cols) == _multiset(pa.concat_tables([_rows(0, 10), _rows(10, 3)]), cols)
    assert _multiset(pyiceberg_rows(str(root / "metadata" / "v2.metadata.json")), cols) == \
        _multiset(want, cols, as_pyiceberg=True)
    current, by_id = duckdb_rows(str(root), [None, ice.snapshot_id(2)])
    assert _multiset(current, cols) == _multiset(by_id, cols) == _multiset(want, cols)


def test_a_part_written_before_a_nested_column_existed_needs_no_ids() -> None:
    """An old part that does not hold the nested column (added after it) reads NULL in every reader."""
    schema = TableSchema.of([("id", "bigint")]).add_column("s", "struct<a:int>")
    old = Part("data/old.parquet", 10, PartStats(2, 10, 0, 0, 1, 1, {1: ColumnStats(nulls=0)}), seq=0)
    assert ice.inexact(Snapshot("file:///t/", 1, TableMeta("t"), schema, (old,), {}, {}, 0, 0)) is None
    held = Part("data/held.parquet", 10, PartStats(2, 10, 0, 0, 1, 1, {1: ColumnStats(nulls=0),
                                                                        2: ColumnStats(nulls=0)}), seq=0)
    why = ice.inexact(Snapshot("file:///t/", 1, TableMeta("t"), schema, (held,), {}, {}, 0, 0))
    assert why is not None and why.startswith("part data/held.parquet was written before")


def test_an_upsert_table_with_nested_values_reads_the_same_with_its_delete_files(tmp_path: Path) -> None:
    """Stream-like batches into an upsert table whose values are nested: updates, a delete marker, a key
    re-inserted, then a compaction; every version exact in the three readers."""
    root = tmp_path / "t"
    uri = f"file://{root}/"
    schema = TableSchema.of([("k", "bigint"), ("v", "struct<a:int,tags:array<string>>"),
                             ("attrs", "map<string,string>")])
    vtype = pa.struct([("a", pa.int32()), ("tags", pa.list_(pa.string()))])

    def batch(keys: list[int], time: int, diffs: list[int]) -> pa.Table:
        return pa.table({"k": pa.array(keys, pa.int64()),
                         "v": pa.array([None if k % 3 == 0 else {"a": k * time, "tags": [] if k % 2 else [f"t{time}"]}
                                        for k in keys], vtype),
                         "attrs": pa.array([[("at", str(time))] if k % 2 else None for k in keys],
                                           pa.map_(pa.string(), pa.string())),
                         fmt.TIME_COLUMN: pa.array([time] * len(keys), pa.int64()),
                         fmt.DIFF_COLUMN: pa.array(diffs, pa.int64())})

    def commit(table: pa.Table, create: bool = False) -> None:
        written = writer.write_parts(uri, [table], schema, write_id=fmt.new_write_id())
        writer.commit_parts(uri, written, create=writer.NewTable(schema, envelope="upsert", key_columns=("k",))
                            if create else None)

    commit(batch([1, 2, 3, 4], 1, [1, 1, 1, 1]), create=True)   # 0
    commit(batch([2, 3], 2, [1, -1]))                            # 1: an update, a delete marker
    commit(batch([3, 5], 3, [1, 1]))                             # 2: re-inserted, a new key
    _compact(uri)                                                # 3
    _check_every_version(uri, root)
    assert _lading(uri, 3).num_rows == 5


@pytest.mark.spark
def test_a_streamcopy_of_nested_json_files_is_mirrored_exactly(spark: Any, tmp_path: Path) -> None:
    """End to end through the stream's own writer (the shared Spark session): JSON lines whose inferred
    columns are a struct and arrays of structs; two batches, each version exact in the three readers."""
    from lading_jobs.stream.job import run_stream
    from lading_spec.job import JobDocument

    landing = tmp_path / "landing"
    landing.mkdir()
    rows = [{"id": 1, "s": {"a": 1, "b": "x"}, "l": [{"x": 1, "y": ["p", None]}, None, {"x": 2, "y": []}]},
            {"id": 2, "s": None, "l": None}, {"id": 3, "s": {"a": None, "b": None}, "l": []}]
    (landing / "a.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    root = tmp_path / "t"
    uri = f"file://{root}/"
    spec = {"source": {"files": {"uri": f"file://{landing}/", "pattern": "*.json", "format": "json"}},
            "target": {"table": uri}}

    def once(generation: int) -> dict[str, Any]:
        doc = JobDocument("StreamCopy", "ns", "nested", "uid", generation, f"nested-{generation}",
                          datetime.datetime.now(datetime.UTC), spec)
        return run_stream(spark, doc, once=True, progress_port=None)

    assert once(1)["rows"] == 3
    (landing / "b.json").write_text(json.dumps({"id": 4, "s": {"a": 4, "b": "y"}, "l": [{"x": None, "y": None}]}))
    assert once(2)["rows"] == 1
    snap = TableLog.open_existing(uri).snapshot()
    assert {c.name: c.type for c in snap.schema.columns}["l"] == "array<struct<x:bigint,y:array<string>>>"
    assert snap.parts and all(p.nested_ids for p in snap.parts)
    _check_every_version(uri, root)
