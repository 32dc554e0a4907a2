"""CSV: PostgreSQL COPY dialect. Edge cases load back through a real PostgreSQL server."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from lading_jobs.formats.csv import CsvEncoder, read_csv
from lading_jobs.formats.types import LADING_TYPE
from lading_spec.formats import CsvOptions

UTC = dt.UTC
EDGE_TEXT = [None, "", '"', '""', "a,b", "line1\nline2", "cr\r\nlf\r", "unicode ☃ é 𝄞", "  spaces  ",
             "NULL", "\\.", "\\x41", "'single'", "tab\there", ";semi;"]


def encode(table: pa.Table, options: CsvOptions) -> bytes:
    enc = CsvEncoder(table.schema, options)
    return (enc.header() if options.header else b"") + b"".join(enc.encode(b) for b in table.to_batches(max_chunksize=4))


def test_null_and_empty_string_are_distinct() -> None:
    t = pa.table({"s": pa.array([None, "", "x"]), "i": pa.array([1, None, 3])})
    assert encode(t, CsvOptions()) == b',1\n"",\nx,3\n'


def test_quoting_rules() -> None:
    t = pa.table({"s": pa.array(['a"b', "a,b", "a\nb", "plain", "\\."])})
    assert encode(t, CsvOptions()) == b'"a""b"\n"a,b"\n"a\nb"\nplain\n"\\."\n'


def test_value_equal_to_null_string_is_quoted_and_force_quote() -> None:
    t = pa.table({"s": pa.array(["NULL", None, "x"]), "n": pa.array([1, 2, None])})
    opts = CsvOptions(header=True, null="NULL", force_quote=("n",))
    assert encode(t, opts) == b's,n\n"NULL","1"\nNULL,"2"\nx,NULL\n'
    assert encode(t, CsvOptions(force_quote="*")) == b'"NULL","1"\n,"2"\n"x",\n'


def test_escape_differs_from_quote() -> None:
    t = pa.table({"s": pa.array(['a"b\\c'])})
    assert encode(t, CsvOptions(escape="\\")) == b'"a\\"b\\\\c"\n'


def test_unknown_force_quote_column_is_named() -> None:
    with pytest.raises(ValueError, match="forceQuote.*'nope'"):
        CsvEncoder(pa.schema([("a", pa.int32())]), CsvOptions(force_quote=("nope",)))


@pytest.mark.parametrize("options", [CsvOptions(), CsvOptions(header=True, null="NULL"),
                                     CsvOptions(delimiter=";", quote="'", escape="\\", force_quote="*")])
def test_reader_reverses_encoder(options: CsvOptions) -> None:
    t = pa.table({"s": pa.array(EDGE_TEXT), "n": pa.array(range(len(EDGE_TEXT)), pa.int64())})
    back = read_csv(encode(t, options), options, t.schema)
    assert back.equals(t)
    strings = read_csv(encode(t, options), options)
    assert strings.column(0).to_pylist() == EDGE_TEXT


def _edge_schema() -> pa.Schema:
    return pa.schema([
        pa.field("id", pa.int32()), pa.field("s", pa.string()), pa.field("b", pa.bool_()),
        pa.field("big", pa.int64()), pa.field("f", pa.float64()), pa.field("r", pa.float32()),
        pa.field("d", pa.decimal128(38, 10)), pa.field("day", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")), pa.field("ntz", pa.timestamp("us")),
        pa.field("bin", pa.binary()), pa.field("dti", pa.duration("us")),
        pa.field("ym", pa.int32(), metadata={LADING_TYPE: b"interval year to month"}),
        pa.field("tm", pa.time64("us")),
        pa.field("arr", pa.list_(pa.string())),
        pa.field("st", pa.struct([pa.field("a", pa.int64()), pa.field("t", pa.string())])),
    ])


def _edge_rows() -> list[dict[str, Any]]:
    rows = []
    for i, s in enumerate(EDGE_TEXT):
        rows.append({
            "id": i, "s": s, "b": [True, False, None][i % 3], "big": [2**63 - 1, -(2**63), None][i % 3],
            "f": [1.5, float("inf"), float("-inf"), 0.1, None, 1e300, -0.0][i % 7],
            "r": [0.1, None, 3.4e38][i % 3],
            "d": [Decimal("12345678901234567890.0123456789"), Decimal("-0.0000000001"), None][i % 3],
            "day": [dt.date(1, 1, 1), dt.date(2024, 2, 29), None][i % 3],
            "ts": [dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC), dt.datetime(1970, 1, 1, tzinfo=UTC), None][i % 3],
            "ntz": [dt.datetime(9999, 12, 31, 23, 59, 59, 999999), None, dt.datetime(2000, 1, 1)][i % 3],
            "bin": [b"\x00\xff,\"\n", None, b""][i % 3],
            "dti": [dt.timedelta(days=3, hours=4, microseconds=7), -dt.timedelta(seconds=90061, microseconds=1), None][i % 3],
            "ym": [14, -25, None, 0][i % 4],
            "tm": [dt.time(23, 59, 59, 999999), None, dt.time(0, 0)][i % 3],
            "arr": [["a", None, 'q"uote'], None, []][i % 3],
            "st": [{"a": 1, "t": "x,y"}, None, {"a": None, "t": None}][i % 3],
        })
    return rows


PG_TYPES = {"id": "int", "s": "text", "b": "boolean", "big": "bigint", "f": "double precision", "r": "real",
            "d": "numeric(38,10)", "day": "date", "ts": "timestamptz", "ntz": "timestamp", "bin": "bytea",
            "dti": "interval", "ym": "interval", "tm": "time", "arr": "jsonb", "st": "jsonb"}
SELECT = {"dti": "(extract(epoch from dti) * 1000000)::bigint",
          "ym": "(extract(year from ym) * 12 + extract(month from ym))::int"}


def _expected(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    if row["dti"] is not None:
        out["dti"] = row["dti"] // dt.timedelta(microseconds=1)
    if row["st"] is not None:
        out["st"] = dict(row["st"])
    return out


@pytest.mark.postgres
@pytest.mark.parametrize("options", [CsvOptions(), CsvOptions(header=True, null="NULL", force_quote=("s", "d")),
                                     CsvOptions(delimiter="|", escape="\\", null="\\N"),
                                     CsvOptions(delimiter="\t", quote="'", force_quote="*")])
def test_postgres_copy_loads_the_same_values(postgres_dsn: str, options: CsvOptions) -> None:
    import psycopg

    schema = _edge_schema()
    rows = _edge_rows()
    data = encode(pa.Table.from_pylist(rows, schema=schema), options)

    def lit(v: str) -> str:
        return "'" + v.replace("'", "''") + "'"

    copy_opts = [f"FORMAT csv, DELIMITER {lit(options.delimiter)}, QUOTE {lit(options.quote)}",
                 f"ESCAPE {lit(options.escape)}, NULL {lit(options.null)}, HEADER {str(options.header).lower()}"]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS lading_csv")
        conn.execute("CREATE TABLE lading_csv (" + ", ".join(f"{c} {t}" for c, t in PG_TYPES.items()) + ")")
        with conn.cursor().copy("COPY lading_csv FROM STDIN (" + ", ".join(copy_opts) + ")") as copy:
            copy.write(data)
        cols = ", ".join(SELECT.get(c, c) for c in PG_TYPES)
        got = conn.execute(f"SELECT {cols} FROM lading_csv ORDER BY id").fetchall()
    assert len(got) == len(rows)
    for row, values in zip(rows, got, strict=True):
        expected = _expected(row)
        actual = dict(zip(PG_TYPES, values, strict=True))
        if isinstance(actual["bin"], memoryview):
            actual["bin"] = bytes(actual["bin"])
        if expected["r"] is not None:  # float32 compared as float32
            assert actual["r"] == pytest.approx(expected["r"], rel=1e-7)
            actual["r"] = expected["r"]
        for key in ("arr", "st"):
            if isinstance(actual[key], str):
                actual[key] = json.loads(actual[key])
        assert actual == expected, f"row {row['id']}"


def test_all_types_read_back_by_duckdb(tmp_path: Any) -> None:
    import duckdb

    schema = _edge_schema()
    rows = _edge_rows()
    path = tmp_path / "t.csv"
    path.write_bytes(encode(pa.Table.from_pylist(rows, schema=schema), CsvOptions(header=True)))
    duck_types = {"id": "INTEGER", "s": "VARCHAR", "b": "BOOLEAN", "big": "BIGINT", "f": "DOUBLE", "r": "FLOAT",
                  "d": "DECIMAL(38,10)", "day": "DATE", "ts": "TIMESTAMPTZ", "ntz": "TIMESTAMP", "bin": "VARCHAR",
                  "dti": "INTERVAL", "ym": "INTERVAL", "tm": "TIME", "arr": "JSON", "st": "JSON"}
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    got = con.execute(
        f"SELECT * FROM read_csv('{path}', header=true, quote='\"', escape='\"', delim=',', allow_quoted_nulls=false, "
        f"columns={duck_types!r}) ORDER BY id").fetchall()
    for row, values in zip(rows, got, strict=True):
        actual = dict(zip(duck_types, values, strict=True))
        assert actual["s"] == row["s"]
        assert actual["big"] == row["big"] and actual["b"] == row["b"] and actual["d"] == row["d"]
        assert actual["day"] == row["day"] and actual["ts"] == row["ts"] and actual["ntz"] == row["ntz"]
        assert actual["f"] == row["f"] and actual["tm"] == row["tm"]
        assert actual["bin"] == (None if row["bin"] is None else "\\x" + row["bin"].hex())
        if row["dti"] is not None:
            assert actual["dti"] == row["dti"]
        if row["ym"] is not None:
            assert actual["ym"] in (dt.timedelta(days=30 * row["ym"]), _months(row["ym"]))
        assert (None if actual["arr"] is None else json.loads(actual["arr"])) == row["arr"]
        assert (None if actual["st"] is None else json.loads(actual["st"])) == row["st"]
    back = read_csv(path.read_bytes(), CsvOptions(header=True), schema)
    assert back.column("s").to_pylist() == EDGE_TEXT
    assert back.drop_columns(["f"]).equals(pa.Table.from_pylist(rows, schema=schema).drop_columns(["f"]))


def _months(n: int) -> Any:
    import duckdb

    return duckdb.connect().execute(f"SELECT INTERVAL '{n} months'").fetchall()[0][0]


def test_a_header_name_with_a_quoted_line_break_is_one_record() -> None:
    # Before, skip_rows=1 skipped one line of the two-line header and read its rest as a row.
    got = read_csv(b'"x\ny",z\n1,2\n3,\n', CsvOptions(header=True))
    assert got.column_names == ["x\ny", "z"]
    assert got.to_pylist() == [{"x\ny": "1", "z": "2"}, {"x\ny": "3", "z": None}]
    typed = read_csv(b'"x\ny",z\n1,2\n', CsvOptions(header=True), pa.schema([("z", pa.int64()), ("x\ny", pa.int64())]))
    assert typed.to_pylist() == [{"z": 2, "x\ny": 1}]


@pytest.mark.parametrize("options", [CsvOptions(), CsvOptions(header=True), CsvOptions(null="\\N")])
def test_a_one_column_file_keeps_its_null_rows(options: CsvOptions) -> None:
    # A one-column NULL is a blank line (as PostgreSQL writes it); the reader skipped blank lines,
    # so the round trip lost every NULL row. With more columns a blank line holds no row.
    t = pa.table({"s": pa.array(["a", None, "b", None, ""])})
    assert read_csv(encode(t, options), options).column(0).to_pylist() == ["a", None, "b", None, ""]
    assert read_csv(b"1,a\n\n2,b\n", CsvOptions()).num_rows == 2


ESCAPE_TEXT = [None, "a\\b", "\\\\server\\share", "\\N", "\\", 'q"uote', 'both\\"x', "\\\\", "x,y\\", "line\\\nbreak",
               '"', "", "plain", "N", "end\\"]


@pytest.mark.postgres
@pytest.mark.parametrize("options", [CsvOptions(escape="\\", null="\\N"), CsvOptions(escape="\\", header=True),
                                     CsvOptions(delimiter="|", quote="'", escape="!", null="!N")])
def test_an_escape_other_than_the_quote_reads_what_postgres_writes(postgres_dsn: str, options: CsvOptions) -> None:
    # PostgreSQL honours the escape inside quotes only and leaves unquoted values (and the null
    # string) alone; pyarrow's escape_char acted everywhere: 'a\b' read as 'ab', NULL '\N' as 'N'.
    import psycopg

    from lading_jobs.ingest.decode import decode

    values = [v.replace("\\", options.escape) if v is not None else None for v in ESCAPE_TEXT]

    def lit(v: str) -> str:
        return "'" + v.replace("'", "''") + "'"

    copy_opts = (f"FORMAT csv, DELIMITER {lit(options.delimiter)}, QUOTE {lit(options.quote)}, "
                 f"ESCAPE {lit(options.escape)}, NULL {lit(options.null)}, HEADER {str(options.header).lower()}")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS lading_escape")
        conn.execute("CREATE TABLE lading_escape (id int, s text)")
        with conn.cursor().copy("COPY lading_escape FROM STDIN") as copy:
            for i, v in enumerate(values):
                copy.write_row((i, v))
        with conn.cursor().copy(f"COPY (SELECT id, s FROM lading_escape ORDER BY id) TO STDOUT ({copy_opts})") as out:
            written = b"".join(bytes(chunk) for chunk in out)
    assert options.escape.encode() in written
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    assert read_csv(written, options, schema).column("s").to_pylist() == values
    decoded = decode(written, "csv", options, ["id", "s"], "s3://b/x.csv")
    assert decoded.error is None and decoded.rejects == []
    got = [None if v is None else v.decode() for p in decoded.pieces for v in p.table.column("s").to_pylist()]
    assert got == values
    # and lading's own CSV in that dialect reads back (it quotes every value holding the escape)
    assert read_csv(encode(pa.table({"id": range(len(values)), "s": values}, schema=schema), options), options,
                    schema).column("s").to_pylist() == values


def test_a_quote_never_closed_fails_the_read_naming_its_line() -> None:
    data = b'id,name\n1,ann\n2,"bob\n' + b"".join(b"%d,x\n" % i for i in range(3, 100))
    with pytest.raises(ValueError, match="line 3: a quoted field opens here and is never closed"):
        read_csv(data, CsvOptions(header=True))
    assert read_csv(b'id,name\n1,"a ""quoted"" name"\n', CsvOptions(header=True)).num_rows == 1
