"""The lading-files data source reads what DuckDB reads, over S3 (moto server) and file://."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs.formats.csv import CsvEncoder
from lading_jobs.formats.jsonl import JsonEncoder
from lading_jobs.sources.files import read_fileset, register_inputs
from lading_jobs.storage import open_storage
from lading_spec.copyjob import Input
from lading_spec.formats import CsvOptions, FileSet, JsonOptions, ParquetOptions


def _table(offset: int) -> pa.Table:
    ids = list(range(offset, offset + 50))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([None if i % 7 == 0 else ("" if i % 11 == 0 else f'n,"{i}"\n') for i in ids]),
        "amount": pa.array([i * 1.25 for i in ids], pa.float64()),
    })


@pytest.fixture(params=["s3", "file"])
def root(request: pytest.FixtureRequest, file_uri: Callable[[str], str]) -> str:
    if request.param == "s3":
        return f"s3://{request.getfixturevalue('bucket')}/in/"
    return file_uri("in/")


def _write(root: str) -> None:
    storage = open_storage(root)
    for k in range(2):
        t = _table(k * 50)
        sink = pa.BufferOutputStream()
        pq.write_table(t, sink)
        storage.put(f"{root}pq/part-{k}.parquet", sink.getvalue().to_pybytes())
        enc = CsvEncoder(t.schema, CsvOptions(header=True))
        storage.put(f"{root}csv/part-{k}.csv.gz", gzip.compress(enc.header() + enc.encode(t.to_batches()[0])))
        storage.put(f"{root}json/part-{k}.jsonl", JsonEncoder(t.schema).encode(t.to_batches()[0]))
    storage.put(f"{root}csv/_SUCCESS", b"")


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


@pytest.mark.spark
@pytest.mark.s3
def test_every_format_reads_like_duckdb(spark: Any, root: str) -> None:
    import duckdb

    _write(root)
    expected = sorted(tuple(r.values()) for r in pa.concat_tables([_table(0), _table(50)]).to_pylist())
    parquet = read_fileset(spark, FileSet(uri=root + "pq/", format="parquet", options=ParquetOptions()))
    assert parquet.schema.simpleString() == "struct<id:bigint,name:string,amount:double>"
    assert _rows(parquet) == expected
    csv = read_fileset(spark, FileSet(uri=root + "csv/*.csv.gz", format="csv", options=CsvOptions(header=True)))
    assert csv.schema.simpleString() == "struct<id:string,name:string,amount:string>"  # header: strings
    typed = read_fileset(spark, FileSet(uri=root + "csv/", format="csv", options=CsvOptions(header=True)),
                         parquet.schema)
    assert _rows(typed) == expected
    json_df = read_fileset(spark, FileSet(uri=root + "json/", pattern="*.jsonl", format="json",
                                          options=JsonOptions()), parquet.schema)
    assert _rows(json_df) == expected
    # An independent reader over the same bytes (DuckDB reads local copies of the objects).
    storage = open_storage(root)
    con = duckdb.connect()
    duck: list[tuple[Any, ...]] = []
    for o in storage.list_matching(root + "pq/"):
        duck.extend(con.execute("SELECT * FROM read_parquet(?)",
                                [_local(o.uri, storage.read(o.uri), ".parquet")]).fetchall())
    assert sorted(duck) == _rows(parquet)


def _local(uri: str, data: bytes, suffix: str) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=suffix, delete=False) as f:
        f.write(data)
        return f.name


@pytest.mark.spark
def test_register_inputs_serves_a_query(spark: Any, file_uri: Callable[[str], str]) -> None:
    root = file_uri("q/")
    _write(root)
    register_inputs(spark, (Input(name="orders", files=FileSet(uri=root + "pq/", format="parquet",
                                                                options=ParquetOptions())),))
    assert spark.sql("SELECT count(*) AS n, sum(id) AS s FROM orders").collect()[0] == (100, sum(range(100)))


@pytest.mark.spark
def test_year_month_intervals_survive_the_source(spark: Any, file_uri: Callable[[str], str]) -> None:
    from pyspark.sql import types as T

    from lading_jobs.formats import types

    schema = types.arrow_schema(T.StructType([T.StructField("ym", T.YearMonthIntervalType(0, 1)),
                                              T.StructField("id", T.IntegerType())]))
    t = pa.Table.from_pylist([{"ym": -14, "id": 1}, {"ym": None, "id": 2}], schema=schema)
    root = file_uri("ym/")
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink)
    open_storage(root).put(root + "a.parquet", sink.getvalue().to_pybytes())
    df = read_fileset(spark, FileSet(uri=root, format="parquet", options=ParquetOptions()))
    assert df.schema["ym"].dataType.simpleString() == "interval year to month"
    assert df.selectExpr("CAST(CAST(ym AS INTERVAL MONTH) AS INT) AS m").collect()[0].m == -14


def test_missing_files_are_named(file_uri: Callable[[str], str], spark: Any) -> None:
    with pytest.raises(FileNotFoundError, match="no files match"):
        read_fileset(spark, FileSet(uri=file_uri("none/"), format="parquet", options=ParquetOptions()))


@pytest.mark.spark
def test_variants_with_nulls_cross_the_source(spark: Any, file_uri: Callable[[str], str]) -> None:
    # a NULL variant is a NULL struct whose non-null children Spark's wire schema requires filled
    from pyspark.sql import types as T

    from lading_jobs.formats import types

    schema = types.arrow_schema(T.StructType([T.StructField("id", T.IntegerType()),
                                              T.StructField("v", T.VariantType())]))
    v = spark.sql("""SELECT parse_json('{"a":1}') AS v""").collect()[0].v
    t = pa.Table.from_pylist([{"id": 1, "v": {"value": v.value, "metadata": v.metadata}}, {"id": 2, "v": None}],
                             schema=schema)
    root = file_uri("variant/")
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink)
    open_storage(root).put(root + "a.parquet", sink.getvalue().to_pybytes())
    df = read_fileset(spark, FileSet(uri=root, format="parquet", options=ParquetOptions()))
    got = sorted(df.selectExpr("id", "to_json(v) AS j").collect())
    assert [tuple(r) for r in got] == [(1, '{"a":1}'), (2, None)]


@pytest.mark.s3
@pytest.mark.parametrize("fmt", ["pq", "json"])
def test_a_file_rewritten_after_the_listing_fails_the_read(root: str, fmt: str) -> None:
    # The Arrow-only unload reads splits planned from the listing; a file rewritten since must fail
    # (storage.ObjectChanged), not mix versions. Without pinned reads, the new bytes were read.
    from lading_jobs.sources.files import infer_schema, list_files, plan_splits, read_split
    from lading_jobs.storage import ObjectChanged

    _write(root)
    fs = FileSet(uri=f"{root}{fmt}/", format="parquet" if fmt == "pq" else "json",
                 options=ParquetOptions() if fmt == "pq" else JsonOptions())
    listed = list_files(fs)
    schema = infer_schema(fs, listed)
    (split,) = plan_splits(fs, listed, 1 << 30, open_cost=0)
    assert sum(b.num_rows for b in read_split(split, fs, schema)) == 100
    first = listed[0].uri
    sink = pa.BufferOutputStream()
    pq.write_table(_table(1000), sink)
    open_storage(first).put(first, sink.getvalue().to_pybytes() if fmt == "pq"
                            else JsonEncoder(_table(1000).schema).encode(_table(1000).to_batches()[0]))
    with pytest.raises(ObjectChanged, match="changed after it was listed"):
        list(read_split(split, fs, schema))


def test_text_is_decompressed_as_the_option_or_the_name_says(file_uri: Callable[[str], str]) -> None:
    # from.options.compression is honoured as loads honour it (docs/copyjob-load.md), whatever the
    # name; with none, the name decides. Before, the option was ignored and gzip bytes parsed as CSV.
    from lading_jobs.sources.files import decode_file

    text = b"id,name\n1,a\n2,b\n"
    storage = open_storage(file_uri())
    storage.put(file_uri("plain.csv"), gzip.compress(text))
    storage.put(file_uri("named.csv.GZIP"), gzip.compress(text))
    for name, options in [("plain.csv", CsvOptions(header=True, compression="gzip")),
                          ("named.csv.GZIP", CsvOptions(header=True))]:
        table = decode_file(file_uri(name), FileSet(uri=file_uri(), format="csv", options=options), None)
        assert table.to_pylist() == [{"id": "1", "name": "a"}, {"id": "2", "name": "b"}], name


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_text_file_that_does_not_decompress_fails_naming_it(file_uri: Callable[[str], str], damage: str) -> None:
    from lading_jobs.formats.compressed import NotDecompressible
    from lading_jobs.sources.files import decode_file

    gz = gzip.compress(b"id,name\n" + b"".join(b"%d,n%d\n" % (i, i) for i in range(3000)))
    uri = file_uri("part-1.csv.gz")
    open_storage(uri).put(uri, gz[:-9] if damage == "truncated" else gz[:20] + b"\xff" * 20 + gz[40:])
    fs = FileSet(uri=file_uri(), format="csv", options=CsvOptions(header=True))
    with pytest.raises(NotDecompressible, match=f"reading {uri}: not valid gzip data \\(corrupt or truncated\\)"):
        decode_file(uri, fs, None)


def _read_all(root: str, fmt: str, options: Any) -> tuple[Any, list[dict[str, Any]]]:
    """The file set's inferred schema and every row read through read_split (both paths read so)."""
    from lading_jobs.sources.files import infer_schema, list_files, plan_splits, read_split

    fs = FileSet(uri=root, format=fmt, options=options)
    listed = list_files(fs)
    schema = infer_schema(fs, listed)
    rows = [r for split in plan_splits(fs, listed, 1 << 30, open_cost=0)
            for b in read_split(split, fs, schema) for r in pa.Table.from_batches([b]).to_pylist()]
    return schema, rows


@pytest.mark.parametrize(("later", "key"), [
    (b'{"x": 2, "s": {"a": 1}, "z": 9}\n', "z"),           # a key the first file lacks
    (b'{"X": 2}\n', "X"),                                    # keys are case-sensitive in JSON
    (b'{"x": 2, "s": {"a": 1, "b": 2}}\n', "s.b"),          # nested, too
])
def test_a_json_key_the_first_file_lacks_is_refused_naming_file_and_key(file_uri: Callable[[str], str],
                                                                        later: bytes, key: str) -> None:
    # Before, pyarrow's reader dropped it ("ignore"): its values were silently lost.
    from lading_jobs.sources.files import SchemaDrift

    storage = open_storage(file_uri())
    storage.put(file_uri("in/a.jsonl"), b'{"x": 1, "s": {"a": 1}}\n')
    storage.put(file_uri("in/b.jsonl"), later)
    with pytest.raises(SchemaDrift, match=f"schema drift in {file_uri('in/b.jsonl')}: column '{key}' is in this "
                                          "file but not in the first file's columns"):
        _read_all(file_uri("in/"), "json", JsonOptions())


def test_json_keys_missing_from_a_file_are_null_and_empty_files_have_no_rows(file_uri: Callable[[str], str]) -> None:
    storage = open_storage(file_uri())
    storage.put(file_uri("in/0-empty.jsonl"), b"")  # first: the schema comes from the next file
    storage.put(file_uri("in/1.jsonl"), b'{"x": 1, "y": "a"}\n')
    storage.put(file_uri("in/2-blank.jsonl"), b"\n\n")
    storage.put(file_uri("in/3-empty.jsonl.gz"), gzip.compress(b""))
    storage.put(file_uri("in/4.jsonl"), b'{"x": 2}\n')
    _, rows = _read_all(file_uri("in/"), "json", JsonOptions())
    assert rows == [{"x": 1, "y": "a"}, {"x": 2, "y": None}]


def test_json_strings_that_look_like_times_stay_strings(file_uri: Callable[[str], str]) -> None:
    # pyarrow infers "2024-01-01" as a timestamp; the copy then rewrote it as 2024-01-01T00:00:00.000000.
    from pyspark.sql import types as T

    storage = open_storage(file_uri())
    storage.put(file_uri("in/a.jsonl"), b'{"d": "2024-01-01", "t": "2024-01-01 10:00:00", "n": 1}\n')
    storage.put(file_uri("in/b.jsonl"), b'{"d": "hello", "t": "2024-02-30", "n": 2}\n')
    schema, rows = _read_all(file_uri("in/"), "json", JsonOptions())
    assert [f.dataType for f in schema.fields] == [T.StringType(), T.StringType(), T.LongType()]
    assert rows == [{"d": "2024-01-01", "t": "2024-01-01 10:00:00", "n": 1}, {"d": "hello", "t": "2024-02-30", "n": 2}]


def test_an_empty_first_csv_file_gives_no_schema_and_all_empty_is_a_clear_error(
        file_uri: Callable[[str], str]) -> None:
    # Before, the 0-byte first file gave no columns and the next file was blamed for schema drift.
    storage = open_storage(file_uri())
    storage.put(file_uri("in/a.csv"), b"")
    storage.put(file_uri("in/b.csv"), b"x,y\n1,2\n")
    storage.put(file_uri("in/c.csv"), b"")
    _, rows = _read_all(file_uri("in/"), "csv", CsvOptions(header=True))
    assert rows == [{"x": "1", "y": "2"}]
    storage.put(file_uri("none/a.csv"), b"")
    storage.put(file_uri("none/b.csv.gz"), gzip.compress(b""))
    with pytest.raises(ValueError, match="from.files: every file of .* is empty: no columns to copy"):
        _read_all(file_uri("none/"), "csv", CsvOptions(header=True))


@pytest.mark.parametrize("damage", ["empty", "not parquet", "truncated"])
def test_a_parquet_file_that_cannot_be_read_fails_naming_it(file_uri: Callable[[str], str], damage: str) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(_table(0), sink)
    good = sink.getvalue().to_pybytes()
    storage = open_storage(file_uri())
    storage.put(file_uri("in/a.parquet"), good)
    bad = {"empty": b"", "not parquet": b"id,name\n1,x\n" * 20, "truncated": good[: len(good) // 2]}[damage]
    for first in (False, True):  # as a later file (read_split), and as the first (schema inference)
        name = "in/0.parquet" if first else "in/b.parquet"
        storage.put(file_uri(name), bad)
        with pytest.raises(ValueError, match=f"reading {file_uri(name)}: "):
            _read_all(file_uri("in/"), "parquet", ParquetOptions())
        storage.delete([file_uri(name)])


def test_a_file_list_is_read_as_given_and_a_missing_entry_is_named(file_uri: Callable[[str], str]) -> None:
    # A listed name starting with '_' or '.' is read (the user named it; before, it was skipped
    # silently); a missing one names its from.fileList index, as loads always did.
    from lading_jobs.sources.files import list_files
    from lading_jobs.unload.job import open_source
    from lading_spec.copyjob import parse_copyjob
    from lading_spec.errors import SpecError

    storage = open_storage(file_uri())
    for name in ("a.csv", "_b.csv", ".c.csv"):
        storage.put(file_uri(name), b"x\n1\n")
    listed = [file_uri(n) for n in ("_b.csv", "a.csv", ".c.csv")]
    fs = FileSet(uri=None, format="csv", file_list=tuple(listed), options=CsvOptions(header=True))
    assert [o.uri for o in list_files(fs)] == listed
    spec = parse_copyjob({"from": {"fileList": [file_uri("a.csv"), file_uri("gone.csv")], "format": "csv"},
                          "to": {"files": file_uri("out/")}})
    with pytest.raises(SpecError) as info:
        open_source(spec)
    assert info.value.field == "from.fileList[1]" and file_uri("gone.csv") in info.value.message


@pytest.mark.parametrize(("later", "column", "kind"), [
    (b'{"x": 2.5, "s": "b"}\n', "x", "double"),   # a fraction in the first file's integer column
    (b'{"x": 3, "s": 5}\n', "s", "int64"),         # a number where the first file had text
    (b'{"x": "hello", "s": "c"}\n', "x", "string"),
])
def test_a_json_value_of_another_type_is_drift_naming_the_column(file_uri: Callable[[str], str], later: bytes,
                                                                  column: str, kind: str) -> None:
    # Before: pyarrow's "Failed to convert JSON to int64, couldn't parse:2.5", no column named.
    from lading_jobs.sources.files import SchemaDrift

    storage = open_storage(file_uri())
    storage.put(file_uri("in/a.jsonl"), b'{"x": 1, "s": "a"}\n')
    storage.put(file_uri("in/b.jsonl"), later)
    with pytest.raises(SchemaDrift, match=f"schema drift in {file_uri('in/b.jsonl')}: column '{column}' holds "
                                          f"{kind} values here"):
        _read_all(file_uri("in/"), "json", JsonOptions())


def test_json_integers_in_a_double_column_are_no_drift(file_uri: Callable[[str], str]) -> None:
    storage = open_storage(file_uri())
    storage.put(file_uri("in/a.jsonl"), b'{"x": 1.5}\n')
    storage.put(file_uri("in/b.jsonl"), b'{"x": 2}\n')
    assert _read_all(file_uri("in/"), "json", JsonOptions())[1] == [{"x": 1.5}, {"x": 2.0}]


def test_lading_json_with_non_finite_floats_reads_back(file_uri: Callable[[str], str]) -> None:
    # lading writes NaN and infinities as the strings "NaN", "Infinity", "-Infinity"; inference
    # refused the first file ("changed from number to string"). Such a column is a double.
    import math

    storage = open_storage(file_uri())
    t = pa.table({"f": pa.array([1.5, math.nan, math.inf, None, -math.inf]), "s": ["a", "NaN", "b", "c", "d"]})
    storage.put(file_uri("in/a.jsonl"), JsonEncoder(t.schema).encode(t.to_batches()[0]))
    schema, rows = _read_all(file_uri("in/"), "json", JsonOptions())
    assert [f.dataType.typeName() for f in schema.fields] == ["double", "string"]
    got = [r["f"] for r in rows]
    assert got[0] == 1.5 and math.isnan(got[1]) and got[2:] == [math.inf, None, -math.inf]
    assert [r["s"] for r in rows] == ["a", "NaN", "b", "c", "d"]


@pytest.mark.parametrize("later", [b'{"x": 2}\nnull\n', b'{"x": 2}\n  5 \n', b'[1]\n', b"null\n"])
def test_a_json_line_that_is_no_object_fails_naming_file_and_line(file_uri: Callable[[str], str],
                                                                  later: bytes) -> None:
    # Before, pyarrow read a null line as a row of NULLs (a row the file does not hold), and a
    # file of only null lines crashed the process (SIGSEGV).
    storage = open_storage(file_uri())
    storage.put(file_uri("in/a.jsonl"), b'{"x": 1}\n')
    storage.put(file_uri("in/b.jsonl"), later)
    line = 2 if later.startswith(b"{") else 1
    with pytest.raises(ValueError, match=f"reading {file_uri('in/b.jsonl')}: line {line} is not a JSON object"):
        _read_all(file_uri("in/"), "json", JsonOptions())
    storage.put(file_uri("first/a.jsonl"), b"\nnull\n")  # the first file, where the schema comes from
    with pytest.raises(ValueError, match=f"reading {file_uri('first/a.jsonl')}: line 2 is not a JSON object "
                                         r"\('null'\)"):
        _read_all(file_uri("first/"), "json", JsonOptions())
