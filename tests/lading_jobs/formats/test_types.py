"""The type mapping: every Spark SQL type → Arrow → Parquet and back, read independently."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

from lading_jobs.formats import spark as spark_helpers
from lading_jobs.formats import types
from lading_jobs.formats.jsonl import JsonEncoder, read_jsonl

EVERY_TYPE = T.StructType([
    T.StructField("b", T.BooleanType()), T.StructField("i8", T.ByteType()), T.StructField("i16", T.ShortType()),
    T.StructField("i32", T.IntegerType(), False), T.StructField("i64", T.LongType()),
    T.StructField("f32", T.FloatType()), T.StructField("f64", T.DoubleType()),
    T.StructField("dec", T.DecimalType(38, 10)), T.StructField("s", T.StringType()),
    T.StructField("vc", T.VarcharType(10)), T.StructField("ch", T.CharType(3)), T.StructField("bin", T.BinaryType()),
    T.StructField("d", T.DateType()), T.StructField("ts", T.TimestampType()), T.StructField("ntz", T.TimestampNTZType()),
    T.StructField("dti", T.DayTimeIntervalType(0, 3)), T.StructField("hour", T.DayTimeIntervalType(1, 1)),
    T.StructField("ymi", T.YearMonthIntervalType(0, 1)), T.StructField("tm", T.TimeType(6)),
    T.StructField("arr", T.ArrayType(T.IntegerType())), T.StructField("ymarr", T.ArrayType(T.YearMonthIntervalType())),
    T.StructField("st", T.StructType([T.StructField("a", T.IntegerType()), T.StructField("t", T.StringType())])),
    T.StructField("m", T.MapType(T.StringType(), T.DoubleType())), T.StructField("n", T.NullType()),
    T.StructField("v", T.VariantType()),
])

EXPECTED_ARROW = {
    "b": pa.bool_(), "i8": pa.int8(), "i16": pa.int16(), "i32": pa.int32(), "i64": pa.int64(),
    "f32": pa.float32(), "f64": pa.float64(), "dec": pa.decimal128(38, 10), "s": pa.string(), "vc": pa.string(),
    "ch": pa.string(), "bin": pa.binary(), "d": pa.date32(), "ts": pa.timestamp("us", tz="UTC"),
    "ntz": pa.timestamp("us"), "dti": pa.duration("us"), "hour": pa.duration("us"), "ymi": pa.int32(),
    "tm": pa.time64("us"), "n": pa.null(),
}
EXTENSIONS = {"vc": "varchar(10)", "ch": "char(3)", "dti": "interval day to second", "hour": "interval hour",
              "ymi": "interval year to month", "tm": "time(6)", "v": "variant"}


def test_arrow_schema_maps_every_type_with_ids_and_versions() -> None:
    schema = types.arrow_schema(EVERY_TYPE)
    for name, arrow_type in EXPECTED_ARROW.items():
        assert schema.field(name).type == arrow_type, name
    assert schema.field("i32").nullable is False
    assert types.field_ids(schema) == {f.name: i + 1 for i, f in enumerate(EVERY_TYPE.fields)}
    for name, ext in EXTENSIONS.items():
        assert schema.field(name).metadata[types.LADING_TYPE] == ext.encode()
    assert schema.field("ymarr").type.value_field.metadata[types.LADING_TYPE] == b"interval year to month"
    assert schema.metadata[types.SCHEMA_MAPPING_VERSION] == types.TYPE_MAPPING_VERSION.encode()
    assert schema.metadata[types.SCHEMA_FORMAT_VERSION] == types.FORMAT_VERSION.encode()


def test_spark_schema_round_trips_through_arrow_and_parquet(tmp_path: Path) -> None:
    schema = types.arrow_schema(EVERY_TYPE, column_ids={f.name: 100 + i for i, f in enumerate(EVERY_TYPE.fields)})
    pq.write_table(schema.empty_table(), tmp_path / "x.parquet")
    back = pq.read_schema(tmp_path / "x.parquet")
    assert types.spark_schema_from_arrow(back) == EVERY_TYPE
    assert types.field_ids(back)["b"] == 100
    assert pq.ParquetFile(tmp_path / "x.parquet").schema.column(0).path == "b"


def test_column_ids_must_cover_every_column() -> None:
    with pytest.raises(types.TypeMappingError, match="column i8: no column id"):
        types.arrow_schema(EVERY_TYPE, column_ids={"b": 1})


def test_unmappable_types_name_the_column() -> None:
    with pytest.raises(types.TypeMappingError, match="column c: the legacy CalendarInterval"):
        types.arrow_schema(T.StructType([T.StructField("c", T.CalendarIntervalType())]))
    with pytest.raises(types.TypeMappingError, match="column x: decimal\\(76,0\\)"):
        types.spark_type_from_arrow(pa.field("x", pa.decimal256(76, 0)))


def test_foreign_arrow_types_map_to_spark() -> None:
    assert types.spark_type_from_arrow(pa.field("u", pa.uint64())) == T.DecimalType(20, 0)
    assert types.spark_type_from_arrow(pa.field("s", pa.large_string())) == T.StringType()
    assert types.spark_type_from_arrow(pa.field("t", pa.timestamp("ns", tz="Europe/Paris"))) == T.TimestampType()
    assert types.spark_type_from_arrow(pa.field("d", pa.dictionary(pa.int8(), pa.string()))) == T.StringType()


QUERY = """
SELECT * FROM VALUES
 (true, 1Y, 2S, 3, 9223372036854775807L, CAST(1.5 AS FLOAT), 0.1D, CAST('12345678901234567890.0123456789' AS DECIMAL(38,10)),
  'a,"b"\n☃', 'vc', 'chr', X'00FF2C', DATE'0001-01-01', TIMESTAMP'2024-01-02 03:04:05.123456', TIMESTAMP_NTZ'9999-12-31 23:59:59.999999',
  INTERVAL '1 02:03:04.000005' DAY TO SECOND, INTERVAL '30' HOUR, INTERVAL '-1-2' YEAR TO MONTH, TIME'23:59:59.999999',
  array(1, null), array(INTERVAL '3' MONTH), named_struct('a', 1, 't', 'x'), map('k', 2.5D), null, parse_json('{"a":[1,2]}')),
 (null, null, null, 0, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null,
  null, null, null, null, null, null)
 AS t(b, i8, i16, i32, i64, f32, f64, dec, s, vc, ch, bin, d, ts, ntz, dti, hour, ymi, tm, arr, ymarr, st, m, n, v)
"""


@pytest.fixture(scope="module")
def every_type_df(spark: Any) -> Any:
    return spark.sql(QUERY)


@pytest.fixture(scope="module")
def every_type_arrow(every_type_df: Any) -> pa.Table:
    """What the unload does: transfer form → Arrow via Spark → conform to lading's schema."""
    schema = types.arrow_schema(every_type_df.schema)
    batches = [types.conform_batch(b, schema) for b in executor_batches(spark_helpers.to_transfer(every_type_df))]
    return pa.Table.from_batches(batches, schema=schema)


def executor_batches(df: Any) -> list[pa.RecordBatch]:
    """The Arrow batches Spark hands a Python task (as mapInArrow and the unload see them)."""
    def ship(batches: Any) -> Any:
        for batch in batches:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_batch(batch)
            yield pa.RecordBatch.from_pydict({"ipc": [sink.getvalue().to_pybytes()]})

    out = []
    for row in df.coalesce(1).mapInArrow(ship, "ipc binary").collect():
        out.extend(pa.ipc.open_stream(row.ipc).read_all().to_batches())
    return out


@pytest.mark.spark
def test_conformed_batch_has_the_mapped_types(every_type_df: Any, every_type_arrow: pa.Table) -> None:
    assert every_type_arrow.schema.equals(types.arrow_schema(every_type_df.schema), check_metadata=True)
    row = every_type_arrow.to_pylist()[0]
    assert row["ymi"] == -14 and row["ymarr"] == [3]
    assert row["dti"] == dt.timedelta(days=1, hours=2, minutes=3, seconds=4, microseconds=5)
    assert row["hour"] == dt.timedelta(hours=30)
    assert row["ts"] == dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.UTC)
    assert row["tm"] == dt.time(23, 59, 59, 999999)


@pytest.mark.spark
def test_parquet_read_back_by_duckdb_equals_source(every_type_arrow: pa.Table, tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "all.parquet"
    pq.write_table(every_type_arrow, path)
    meta = pq.read_schema(path)
    assert types.field_ids(meta) == types.field_ids(every_type_arrow.schema)
    assert meta.field("ymi").metadata[types.LADING_TYPE] == b"interval year to month"
    assert meta.metadata[types.SCHEMA_MAPPING_VERSION] == types.TYPE_MAPPING_VERSION.encode()
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    cols = [c for c in every_type_arrow.column_names if c not in ("v", "n")]
    got = con.execute(f"SELECT {', '.join(cols)} FROM read_parquet('{path}')").fetchall()
    expected = every_type_arrow.select(cols).to_pylist()
    for values, exp in zip(got, expected, strict=True):
        actual = dict(zip(cols, values, strict=True))
        exp = dict(exp)
        if exp["dti"] is not None:  # Parquet has no duration type: stored as int64 microseconds
            exp["dti"] = exp["dti"] // dt.timedelta(microseconds=1)
            exp["hour"] = exp["hour"] // dt.timedelta(microseconds=1)
        if exp["m"] is not None:
            exp["m"] = dict(exp["m"])
        if exp["st"] is not None:
            exp["st"] = dict(exp["st"])
        assert actual == exp


@pytest.mark.spark
def test_json_lines_read_back_by_python_json_equals_source(every_type_arrow: pa.Table) -> None:
    data = b"".join(JsonEncoder(every_type_arrow.schema).encode(b) for b in every_type_arrow.to_batches())
    first, second = (json.loads(line) for line in data.splitlines())
    assert first["dec"] == "12345678901234567890.0123456789" and first["i64"] == 9223372036854775807
    assert first["ts"] == "2024-01-02T03:04:05.123456Z" and first["ntz"] == "9999-12-31T23:59:59.999999"
    assert first["d"] == "0001-01-01" and base64.b64decode(first["bin"]) == b"\x00\xff,"
    assert first["dti"] == "PT93784.000005S" and first["hour"] == "PT108000.000000S" and first["ymi"] == "-P14M"
    assert first["s"] == 'a,"b"\n☃' and first["arr"] == [1, None] and first["st"] == {"a": 1, "t": "x"}
    assert first["m"] == {"k": 2.5} and first["ymarr"] == ["P3M"] and first["tm"] == "23:59:59.999999"
    assert first["f32"] == 1.5 and first["f64"] == 0.1 and first["b"] is True and first["n"] is None
    assert all(v is None for k, v in second.items() if k != "i32")
    assert read_jsonl(data, every_type_arrow.schema).equals(every_type_arrow)


@pytest.mark.spark
def test_csv_of_every_type_reads_back(every_type_arrow: pa.Table) -> None:
    from lading_jobs.formats.csv import CsvEncoder, read_csv
    from lading_spec.formats import CsvOptions

    enc = CsvEncoder(every_type_arrow.schema, CsvOptions(header=True))
    data = enc.header() + b"".join(enc.encode(b) for b in every_type_arrow.to_batches())
    assert read_csv(data, CsvOptions(header=True), every_type_arrow.schema).equals(every_type_arrow)
    assert Decimal("12345678901234567890.0123456789") == every_type_arrow.column("dec")[0].as_py()


# --- type names: the DDL parser against Spark's own ----------------------------------------

DDL_TYPES = [
    "int", "INTEGER", "byte", "short", "long", "real", "decimal", "dec(5,2)", "numeric(7)", "decimal(38,38)",
    "char(3)", "character(2)", "varchar(10)", "binary", "date", "timestamp", "timestamp_ltz", "timestamp_ntz",
    "interval day to second", "interval year", "interval hour to minute", "interval minute to second",
    "interval second", "interval month", "interval year to month", "time", "time(3)", "variant", "void",
    "array<int>", "  Array < Map<Int,String> >  ", "map<string, array<int>>", "struct<>", "array<struct<x:int>>",
    "struct<a: int, `b c`: string NOT NULL COMMENT 'x'>", "struct<a int, b string>", "struct<`a``b`:int>",
    "struct<1a:int>", "struct<select:int>", "map<int,struct<d:decimal(10,2),i:interval day to second>>",
]
BAD_DDL = [
    "text", "json", "decimal(39,0)", "decimal(5,6)", "array<int", "map<int>", "interval month to year",
    "interval year to day", "char", "varchar", "struct<a>", "double precision", "timestamp with time zone",
    "array<>", "interval day to year", "bigint,", "struct<a:int,>", "char(-1)", "int(3)", "array(int)",
]
LADING_REFUSES = {  # Spark's parser takes these; the mapping cannot store them
    "decimal(0)": "needs precision 1..38", "time(7)": "needs a precision 0..6",
    "string collate utf8_lcase": "collations are not supported", "int int": "unexpected 'int' after the type",
    "": "a type name is missing",
}


@pytest.mark.parametrize("ddl", DDL_TYPES)
def test_type_names_parse_like_spark_without_a_jvm(spark: Any, ddl: str) -> None:
    expected = T.DataType.fromDDL(ddl)
    assert types.parse_type(ddl) == expected
    name = types.type_name(expected)
    assert types.type_name(types.parse_type(name)) == name
    assert types.type_name(T.DataType.fromDDL(name)) == name  # Spark reads the canonical spelling back


@pytest.mark.parametrize("ddl", BAD_DDL)
def test_bad_type_names_fail_like_spark(spark: Any, ddl: str) -> None:
    with pytest.raises(Exception):  # noqa: B017  (Spark raises its ParseException)
        T.DataType.fromDDL(ddl)
    with pytest.raises(types.TypeMappingError, match="expected a Spark SQL type"):
        types.parse_type(ddl)


@pytest.mark.parametrize(("ddl", "message"), sorted(LADING_REFUSES.items()))
def test_type_names_spark_parses_but_lading_refuses(ddl: str, message: str) -> None:
    with pytest.raises(types.TypeMappingError, match=message):
        types.parse_type(ddl)


@pytest.mark.spark
def test_canonical_names_of_every_type_are_spark_sql(spark: Any) -> None:
    """Every type of the mapping: its canonical name casts in Spark SQL to the same type."""
    for field in EVERY_TYPE.fields:
        if isinstance(field.dataType, T.TimeType | T.CharType | T.VarcharType):
            continue  # TIME is disabled in this Spark's SQL; char/varchar casts yield strings
        name = types.canonical_type_name(types.type_name(field.dataType), field.name)
        got = spark.sql(f"SELECT CAST(NULL AS {name}) AS x").schema["x"].dataType
        assert types.type_name(types.nested_nullable(got)) == name, field.name


def test_logical_types_and_aliases_share_the_registry() -> None:
    assert types.canonical_type_name(" JSON ") == "json" and types.canonical_type_name("text") == "string"
    js = types.arrow_field("j", "json")
    assert js.type == pa.string() and js.metadata[types.LADING_TYPE] == b"json"
    assert types.spark_type_from_arrow(js) == T.StringType() and types.type_name_from_arrow(js) == "json"
    assert types.spark_type_of("uuid") == T.StringType()
    assert types.canonical_type_name("struct<a: int NOT NULL>") == "struct<a:int>"  # nested: nullable, as stored
    with pytest.raises(types.TypeMappingError, match="column c: the legacy CalendarInterval"):
        types.canonical_type_name("interval", "c")
    # a part written before extension names were limited to Arrow's gaps: plain names still read
    assert types.spark_type_from_arrow(pa.field("x", pa.int64(), metadata={types.LADING_TYPE: b"bigint"})) == T.LongType()


def test_conformed_nested_intervals_keep_their_extension_names() -> None:
    # Spark sends array<interval month> as list<int32> with no field metadata; the mapped type
    # names the element "interval month", which the CSV/JSON encoders render as an interval.
    schema = types.arrow_schema(T.StructType([T.StructField("ymarr", T.ArrayType(T.YearMonthIntervalType(1, 1)))]))
    wire = pa.RecordBatch.from_pydict({"ymarr": pa.array([[3, None]], pa.list_(pa.int32()))})
    out = types.conform_batch(wire, schema)
    assert out.column(0).type.value_field.metadata == {types.LADING_TYPE: b"interval month"}
    assert JsonEncoder(schema).encode(out) == b'{"ymarr":["P3M",null]}\n'


def test_an_empty_json_object_reads_as_an_empty_struct() -> None:
    # A struct without fields has no children to carry its length: the read lost every row
    # (without a NULL: "Column 1 named s expected length 2 but got length 0").
    schema = pa.schema([("x", pa.int64()), ("s", pa.struct([]))])
    assert read_jsonl(b'{"x": 1, "s": {}}\n{"x": 2, "s": {}}\n', schema).to_pylist() == [
        {"x": 1, "s": {}}, {"x": 2, "s": {}}]
    table = read_jsonl(b'{"x": 1, "s": {}}\n{"x": 2, "s": null}\n', schema)
    assert table.to_pylist() == [{"x": 1, "s": {}}, {"x": 2, "s": None}]
