"""Tables hold every type of lading's one mapping (docs/formats.md): nested types, intervals,
char/varchar, json/uuid; written with ``writer.append``, read back equal through Spark; parts
carry field ids and extension names; statistics and skipping stay conservative on them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T
from support import every_type

from lading_jobs import storage as st
from lading_jobs.formats import spark as spark_formats
from lading_jobs.formats import types as ftypes
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.filters import interp
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import SchemaError, TableSchema
from lading_jobs.table.stats.part import PartStats

SCHEMA = TableSchema.of(every_type.COLUMNS)
NESTED = ("arr", "ymarr", "st", "m", "deep", "mst", "v")


@pytest.fixture(scope="module")
def typed_table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = (tmp_path_factory.mktemp("types") / "t").as_uri() + "/"
    TableLog.create(uri, SCHEMA)
    writer.append(spark, every_type.source(spark).repartition(2), uri, logical_time=5, create=False)
    return uri


def test_schema_types_are_canonical_type_names() -> None:
    types = dict((c.name, c.type) for c in SCHEMA.columns)
    assert types["deep"] == "array<struct<x:bigint,y:array<string>>>"
    assert types["mst"] == "map<int,struct<d:decimal(10,2),i:interval day to second>>"
    assert TableSchema.of([("a", "Array< Struct<`b c`: INT NOT NULL> >")]).columns[0].type == "array<struct<`b c`:int>>"
    assert TableSchema.of([("a", "text"), ("b", "JSON"), ("c", "numeric(7)")]).names == ["a", "b", "c"]
    assert [c.type for c in TableSchema.of([("a", "text"), ("b", "JSON"), ("c", "numeric(7)")]).columns] == [
        "string", "json", "decimal(7,0)"]
    with pytest.raises(SchemaError, match="column c: the legacy CalendarInterval"):
        TableSchema.of([("c", "interval")])
    with pytest.raises(SchemaError, match="column x: type 'array<int': expected '>'"):
        TableSchema.of([("x", "array<int")])
    back = TableSchema.from_json(SCHEMA.to_json())
    assert back == SCHEMA and back.arrow_schema().equals(SCHEMA.arrow_schema(), check_metadata=True)


def test_part_schema_carries_ids_extension_names_and_versions() -> None:
    schema = SCHEMA.arrow_schema(table_id="t-1", envelope="append")
    ids = ftypes.field_ids(schema)
    assert [ids[c.name] for c in SCHEMA.columns] == [c.id for c in SCHEMA.columns]
    meta = {f.name: (f.metadata or {}).get(ftypes.LADING_TYPE) for f in schema}
    assert meta["vc"] == b"varchar(10)" and meta["ch"] == b"char(3)" and meta["js"] == b"json"
    assert meta["u"] == b"uuid" and meta["ymi"] == b"interval year to month" and meta["hour"] == b"interval hour"
    assert meta["i64"] is None and meta["arr"] is None
    assert schema.field("ymarr").type.value_field.metadata[ftypes.LADING_TYPE] == b"interval year to month"
    assert schema.field("mst").type.item_type.field("i").metadata[ftypes.LADING_TYPE] == b"interval day to second"
    assert schema.field("ymi").type == pa.int32() and schema.field("dti").type == pa.duration("us")
    assert schema.metadata[ftypes.SCHEMA_MAPPING_VERSION] == ftypes.TYPE_MAPPING_VERSION.encode()
    # the table schema and the files mapping agree: the Spark view of the parts is the table's
    assert ftypes.spark_schema_from_arrow(SCHEMA.arrow_schema(internal=False)) == SCHEMA.spark_schema()
    assert TableSchema.from_arrow(schema).columns == SCHEMA.columns


@pytest.mark.spark
def test_every_type_round_trips_through_append_and_the_lading_source(spark: Any, typed_table: str) -> None:
    src = every_type.source(spark)
    got = reader.read_table(spark, typed_table)
    for f, want in zip(got.schema.fields, SCHEMA.spark_schema().fields, strict=True):
        strings = isinstance(want.dataType, T.CharType | T.VarcharType)  # DataFrames hold them as strings
        assert f.dataType == (T.StringType() if strings else want.dataType), f.name
    assert every_type.rows(got) == every_type.rows(src)
    # format("lading") alone: the same rows, year-month intervals as int months (the transfer form)
    raw = spark.read.format("lading").load(typed_table)
    assert raw.schema["ymi"].dataType.simpleString() == "int"
    assert every_type.rows(raw) == every_type.rows(spark_formats.to_transfer(src))
    first = every_type.rows(raw)[0]
    assert first["ymi"] == -14 and first["ymarr"] == [3, None] and first["mo"] == 7


@pytest.mark.spark
@pytest.mark.parametrize("condition", [
    "st.a = 1", "size(arr) = 2", "m['k'] > 2", "get(get(deep, 0).y, 0) = 'p'", "mst[1].d = 1.25", "arr IS NULL",
    "st IS NOT NULL", "dti > INTERVAL '1' HOUR", "hour < INTERVAL '0' HOUR", "ymi < INTERVAL '0' MONTH",
    "bin = X'00FF2C'", "ts > TIMESTAMP'2024-01-01 00:00:00'", "ntz >= TIMESTAMP_NTZ'9999-01-01 00:00:00'",
    "ntz < TIMESTAMP_NTZ'1000-01-01 00:00:00'", "vc = 'vc'", "js = 'null'", "u LIKE '0000%'",
    "dec < 0", "f32 > 1", "i64 = 9223372036854775807",
])
def test_filters_on_every_type_match_spark_on_the_source(spark: Any, typed_table: str, condition: str) -> None:
    got = every_type.rows(reader.read_table(spark, typed_table).where(condition))
    assert got == every_type.rows(every_type.source(spark).where(condition)), condition
    assert got, f"{condition} should select a row of the source"


def test_statistics_keep_no_bounds_for_nested_and_unordered_types(typed_table: str) -> None:
    snap = TableLog.open_existing(typed_table).snapshot()
    ids = {c.name: c.id for c in snap.schema.columns}
    merged: dict[int, Any] = {}
    for p in snap.parts:
        for cid, cs in p.stats.columns.items():
            merged.setdefault(cid, []).append(cs)
    for name in (*NESTED, "dti", "hour", "bin"):
        assert all(cs.min is None and cs.max is None for cs in merged[ids[name]]), name
    assert sum(cs.nulls for cs in merged[ids["st"]]) == 1  # only row 3's struct is NULL
    assert max(cs.max for cs in merged[ids["i64"]] if cs.max is not None) == 9223372036854775807
    assert min(cs.min for cs in merged[ids["ymi"]] if cs.min is not None) == -14  # months, as stored


def test_comparisons_on_unordered_types_are_not_pushed() -> None:
    for name in (*NESTED, "dti", "bin", "n"):
        with pytest.raises(ex.NotPushable):
            ex.bind(ex.Pred("eq", name, 1), SCHEMA)
        assert isinstance(ex.bind(ex.Pred("isnull", name), SCHEMA), ex.Pred)
    bound = ex.bind(ex.Pred("eq", "ymi", -14), SCHEMA)
    id_ = SCHEMA.column("ymi").id
    from lading_jobs.table.stats.part import ColumnStats

    assert not interp.might_match(bound, PartStats(3, columns={id_: ColumnStats(0, 0, 12)}))
    # nested columns: statistics of their leaves never reach the evaluator, so nothing is skipped
    assert interp.might_match(ex.bind(ex.Pred("notnull", "st"), SCHEMA),
                          PartStats(3, columns={SCHEMA.column("st").id: ColumnStats(None)}))


def test_row_group_statistics_skip_nothing_on_nested_leaves(tmp_path: Any) -> None:
    """Parquet leaves of nested columns must not be mistaken for the next top-level column."""
    uri = tmp_path.as_uri() + "/rg/"
    schema = TableSchema.of([("st", "struct<a:bigint,b:bigint>"), ("k", "bigint")])
    log = TableLog.create(uri, schema)
    data = pa.table({"st": pa.array([{"a": 100, "b": 200}] * 4, schema.arrow_schema().field("st").type),
                     "k": pa.array([1, 2, 3, 4], pa.int64())})
    written = writer.write_parts(uri, [data], log.snapshot().schema, write_id=fmt.new_write_id(), logical_time=1,
                                 row_group_rows=2)
    writer.commit_parts(uri, written, log=log)
    got = reader.scan(uri, predicate=ex.Pred("eq", "k", 3))
    assert got.column("k").to_pylist() == [3] and got.column("st").to_pylist() == [{"a": 100, "b": 200}]


def test_time_and_logical_types_round_trip_in_arrow(tmp_path: Any) -> None:
    """TIME (which Spark SQL here cannot produce) through the pure-Arrow write and scan."""
    uri = tmp_path.as_uri() + "/time/"
    schema = TableSchema.of([("t", "time(6)"), ("j", "json"), ("l", "array<time(6)>")])
    log = TableLog.create(uri, schema)
    data = pa.table({"t": pa.array([dt.time(23, 59, 59, 999999), None], pa.time64("us")),
                     "j": ['{"x": 1}', None], "l": pa.array([[dt.time(1)], None], pa.list_(pa.time64("us")))})
    writer.commit_parts(uri, writer.write_parts(uri, [data], log.snapshot().schema, write_id=fmt.new_write_id(),
                                                logical_time=1), log=log)
    assert reader.scan(uri).to_pylist() == data.to_pylist()
    part = log.snapshot().parts[0]
    pf = pq.read_schema(st.open_storage(uri).open_input(log.snapshot().part_uri(part), part.size))
    assert pf.field("t").metadata[ftypes.LADING_TYPE] == b"time(6)" and pf.field("j").metadata[ftypes.LADING_TYPE] == b"json"


@pytest.mark.spark
def test_append_creates_a_table_of_every_type_from_the_dataframe(spark: Any, file_uri: Callable[[str], str]) -> None:
    uri = file_uri("created/")
    src = every_type.source(spark)
    writer.append(spark, src, uri, logical_time=1)
    schema = TableLog.open_existing(uri).snapshot().schema
    expected = {n: t for n, t in every_type.COLUMNS}
    expected.update(vc="string", ch="string", js="string", u="string")  # a DataFrame holds these as strings
    # the literals' own interval ranges (INTERVAL '3' MONTH is an interval month)
    expected.update(ymarr="array<interval month>", mst="map<int,struct<d:decimal(10,2),i:interval second>>")
    assert {c.name: c.type for c in schema.columns} == expected
    assert every_type.rows(reader.read_table(spark, uri)) == every_type.rows(src)


def test_nested_types_cannot_identify_rows(tmp_path: Any) -> None:
    from lading_jobs.table.log.commits import Change

    base = tmp_path.as_uri()
    with pytest.raises(SchemaError, match="key column 'k' has the nested type array<int>"):
        TableLog.create(base + "/u/", TableSchema.of([("k", "array<int>"), ("v", "int")]), "upsert", ["k"])
    with pytest.raises(SchemaError, match="column of a diff table 's' has the nested type struct<a:int>"):
        TableLog.create(base + "/d/", TableSchema.of([("s", "struct<a:int>")]), "diff")
    log = TableLog.create(base + "/d2/", TableSchema.of([("x", "int")]), "diff")
    with pytest.raises(SchemaError, match="envelope append"):
        log.commit(Change(operation="schema", schema=log.snapshot().schema.add_column("m", "map<string,int>")))
    upsert = TableLog.create(base + "/u2/", TableSchema.of([("k", "int"), ("v", "array<int>")]), "upsert", ["k"])
    upsert.commit(Change(operation="schema", schema=upsert.snapshot().schema.add_column("w", "struct<a:int>")))
    assert upsert.snapshot().schema.column("w").type == "struct<a:int>"
