"""Decoding malformed input into good pieces plus rejects naming line or row (pure, no Spark)."""

from __future__ import annotations

import datetime as dt
import gzip
import io
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs.ingest.conform import conform
from lading_jobs.ingest.decode import decode, decode_csv, decode_json, decode_parquet
from lading_jobs.table.schema import TableSchema
from lading_spec.formats import CsvOptions, JsonOptions, ParquetOptions

SCHEMA = TableSchema.of([("id", "bigint", False), ("name", "string"), ("amount", "decimal(10,2)")])

CSV = (b"id,name,amount\n"
       b"1,ann,1.50\n"          # 2 good
       b'2,"multi\nline",2\n'   # 3-4 good (a quoted newline)
       b"3,bob,oops\n"          # 5 does not cast
       b"\n"                    # 6 blank
       b"4,\xff\xfe,3\n"        # 7 bad UTF-8
       b"5,cy\n"                # 8 too few fields
       b",dan,4\n"              # 9 NULL id (NOT NULL)
       b'6,"",\n')              # 10 good: '' name, NULL amount


def test_csv_rejects_each_bad_record_by_line_and_keeps_the_rest() -> None:
    decoded = decode_csv(CSV, CsvOptions(header=True), SCHEMA.names)
    result = conform(decoded, SCHEMA)
    assert result.table.to_pydict() == {"id": [1, 2, 6], "name": ["ann", "multi\nline", ""],
                                        "amount": [Decimal("1.50"), Decimal("2.00"), None]}
    got = [(r.position, r.column, r.reason.split(":")[0], r.record) for r in result.rejects]
    assert got == [
        (5, "amount", "'oops' is not a valid decimal(10,2)", "3,bob,oops"),
        (7, "name", "invalid UTF-8", "4,\\xff\\xfe,3"),
        (8, None, "expected 3 fields, found 2", "5,cy"),
        (9, "id", "NULL in column 'id', which is NOT NULL", ",dan,4"),
    ]
    assert decoded.rows_read == 7


def test_headerless_csv_matches_by_position_and_honours_options() -> None:
    data = b"1;'a;b';NA\n2;'it''s';3\n"
    decoded = decode_csv(data, CsvOptions(header=False, delimiter=";", quote="'", escape="'", null="NA"),
                         SCHEMA.names)
    result = conform(decoded, SCHEMA)
    assert result.table.column("name").to_pylist() == ["a;b", "it's"]
    assert result.table.column("amount").to_pylist()[0] is None
    assert result.rejects == []


def test_header_names_match_case_insensitively_and_extra_columns_are_ignored() -> None:
    data = b"AMOUNT,extra,ID\n1.5,zz,7\n"
    result = conform(decode_csv(data, CsvOptions(header=True), SCHEMA.names), SCHEMA)
    assert result.table.to_pylist()[0]["id"] == 7
    assert result.table.to_pylist()[0]["name"] is None


def test_gzip_csv_is_decompressed_by_name() -> None:
    decoded = decode(gzip.compress(b"1,a,2\n"), "csv", CsvOptions(), SCHEMA.names, "s3://b/x.csv.gz")
    assert conform(decoded, SCHEMA).table.num_rows == 1


def test_every_gzip_member_of_a_concatenation_is_decompressed() -> None:
    data = gzip.compress(b"1,a,2\n") + gzip.compress(b"") + gzip.compress(b"2,b,3\n3,c,4\n")
    decoded = decode(data, "csv", CsvOptions(compression="gzip"), SCHEMA.names, "s3://b/x.csv")
    assert [r["id"] for r in conform(decoded, SCHEMA).table.to_pylist()] == [1, 2, 3]


def _flipped(data: bytes, start: int, end: int) -> bytes:
    return data[:start] + bytes(b ^ 0xFF for b in data[start:end]) + data[end:]


@pytest.mark.parametrize("case", ["corrupt deflate", "truncated", "bad header", "corrupt zstd", "truncated zstd"])
def test_a_file_that_does_not_decompress_is_a_file_error_not_a_task_failure(case: str) -> None:
    """Whatever the library raises (zlib-ng's ``error``, ``EOFError``, ``OSError``), the file
    gets an error naming its compression and the load goes on."""
    body = b"".join(b"%d,name-%d,%d.5\n" % (i, i, i) for i in range(2000))
    gz, zst = gzip.compress(body), pa.Codec("zstd").compress(body, asbytes=True)
    data, compression = {
        "corrupt deflate": (_flipped(gz, 20, 40), "gzip"), "truncated": (gz[:-9], "gzip"),
        "bad header": (b"\x1f\x8b" + b"x" * 30, "gzip"), "corrupt zstd": (_flipped(zst, 20, 40), "zstd"),
        "truncated zstd": (zst[:-7], "zstd")}[case]
    decoded = decode(data, "csv", CsvOptions(compression=compression), SCHEMA.names, "s3://b/x.csv")
    assert decoded.error is not None and decoded.error.startswith(f"cannot decompress ({compression}): not valid")


def test_json_lines_reject_bad_lines_and_values() -> None:
    data = (b'{"id": 1, "name": "a", "amount": 1.5}\n'
            b'{"id": "x", "name": "b"}\n'
            b"\n"
            b'{"id": 3, "name": \n'
            b'{"id": 4, "name": "\xff"}\n'
            b'{"id": 5, "name": "e", "amount": "2.25", "other": [1]}\n')
    decoded = decode_json(data)
    result = conform(decoded, SCHEMA)
    assert result.table.column("id").to_pylist() == [1, 5]
    assert [(r.position, r.column) for r in result.rejects] == [(2, "id"), (4, None), (5, "name")]
    assert result.rejects[1].record == '{"id": 3, "name": '
    assert result.rejects[2].reason == "invalid UTF-8"


def test_parquet_values_that_do_not_cast_are_rows_and_truncation_is_a_file_error() -> None:
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2, 3], "amount": ["1", "x", "3"]}), buf)
    decoded = decode(buf.getvalue(), "parquet", ParquetOptions(), SCHEMA.names, "s3://b/p.parquet")
    result = conform(decoded, SCHEMA)
    assert result.table.column("id").to_pylist() == [1, 3]
    assert [(r.position, r.column) for r in result.rejects] == [(2, "amount")]
    assert '"amount": "x"' in (result.rejects[0].record or "")
    truncated = decode_parquet(buf.getvalue()[: len(buf.getvalue()) // 2])
    assert truncated.error is not None and "truncated" in truncated.error and truncated.pieces == []


def test_corrupt_compression_is_a_file_error() -> None:
    decoded = decode(b"not gzip at all", "json", JsonOptions(compression="gzip"), SCHEMA.names, "s3://b/x")
    assert decoded.error is not None and "decompress" in decoded.error


EXACT = TableSchema.of([("id", "bigint"), ("small", "int"), ("amount", "decimal(22,2)"), ("ratio", "double")])


def test_json_numbers_load_into_integers_and_decimals_from_their_text() -> None:
    """Fails on 1b6c3cc: the numbers went through float64 (…768.00, 2.67, 9007199254740992)."""
    data = (b'{"id": 9007199254740993, "small": 1, "amount": 1234567890123456789.12, "ratio": 0.5}\n'
            b'{"id": 2, "small": 2, "amount": 2.675, "ratio": 1}\n'
            b'{"id": 2.5, "small": 3, "amount": 0.1}\n'
            b'{"id": 4, "small": 1e3, "amount": "7.10"}\n'
            b'{"id": 5, "small": 99999999999, "amount": 1e-2}\n')
    decoded = decode(data, "json", JsonOptions(), EXACT.names, "s3://b/n.jsonl",
                     exact_numbers=["id", "small", "amount"])
    result = conform(decoded, EXACT)
    assert result.table.to_pylist() == [
        {"id": 9007199254740993, "small": 1, "amount": Decimal("1234567890123456789.12"), "ratio": 0.5},
        {"id": 4, "small": 1000, "amount": Decimal("7.10"), "ratio": None},
    ]
    reasons = {(r.position, r.column): r.reason for r in result.rejects}
    assert sorted(reasons) == [(2, "amount"), (3, "id"), (5, "small")]
    assert reasons[(2, "amount")].startswith("'2.675' is not a valid decimal(22,2)")
    assert reasons[(3, "id")].startswith("'2.5' is not a valid bigint")


def test_a_json_number_with_more_digits_than_any_column_holds_is_rejected_not_rounded() -> None:
    data = b'{"id": 1, "amount": 1.000000000000000000000000000000000000001}\n{"id": 2, "amount": 3}\n'
    decoded = decode(data, "json", JsonOptions(), EXACT.names, "s3://b/n.jsonl", exact_numbers=["id", "amount"])
    result = conform(decoded, EXACT)
    assert result.table.column("id").to_pylist() == [2]
    assert [r.position for r in result.rejects] == [1]
    assert "cannot be read exactly" in result.rejects[0].reason


def test_exact_numbers_follow_keys_matched_ignoring_case() -> None:
    data = b'{"ID": 9007199254740993, "Amount": 0.1}\n{"ID": 1.5, "Amount": 2}\n'
    decoded = decode(data, "json", JsonOptions(), EXACT.names, "s3://b/n.jsonl", exact_numbers=["id", "amount"])
    result = conform(decoded, EXACT)
    assert result.table.select(["id", "amount"]).to_pylist() == [{"id": 9007199254740993, "amount": Decimal("0.10")}]
    assert [(r.position, r.column) for r in result.rejects] == [(2, "id")]


def test_json_keys_of_any_case_load_the_same_whichever_lines_share_a_file() -> None:
    """Keys match columns exactly, else ignoring case, row by row: lines spelling ``id``/``ID``
    in one file load as they load one per file (one spelling only used to win: (2, NULL) loaded)."""
    lines = [b'{"id": 1, "name": "a", "amount": 1.5}', b'{"ID": 2, "Name": "b", "AMOUNT": 2.25}',
             b'{"Id": 3, "id": 4, "NAME": "c"}', b'{"ID": "x", "name": "d"}', b'{"Name": null, "name": "e", "id": 5}']

    def load(data: bytes) -> tuple[list[dict[str, Any]], list[tuple[str | None, str]]]:
        decoded = decode(data, "json", JsonOptions(), SCHEMA.names, "s3://b/n.jsonl", exact_numbers=["id", "amount"])
        result = conform(decoded, SCHEMA)
        return result.table.to_pylist(), [(r.column, r.reason[:30]) for r in result.rejects]

    together = load(b"\n".join(lines) + b"\n")
    apart = [load(line + b"\n") for line in lines]
    assert together == ([r for rows, _ in apart for r in rows], [e for _, errors in apart for e in errors])
    assert together == ([{"id": 1, "name": "a", "amount": Decimal("1.50")},
                         {"id": 2, "name": "b", "amount": Decimal("2.25")},
                         {"id": 4, "name": "c", "amount": None},  # the exact spelling wins
                         {"id": 5, "name": "e", "amount": None}],
                        [("id", "'x' is not a valid bigint: Fai")])


def test_json_numbers_in_timestamp_columns_are_seconds_since_the_epoch_in_files_and_messages() -> None:
    """A file load and a Kafka message read ``{"ts": 1700000000}`` alike: 2023-11-14 22:13:20 UTC,
    as Spark's CAST and JSON reader take it (it was 1970-01-01 00:28:20: microseconds)."""
    from lading_jobs.stream.kafka import Messages
    from lading_jobs.stream.positions import Range
    from lading_jobs.stream.records import decode_messages

    schema = TableSchema.of([("id", "bigint"), ("ts", "timestamp")])
    lines = [b'{"id": 1, "ts": 1700000000}', b'{"id": 2, "ts": 1.5}', b'{"id": 3, "ts": 1e15}',
             b'{"id": 4, "ts": "2024-01-01T00:00:00+02:00"}']
    utc = dt.UTC
    expected = [{"id": 1, "ts": dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=utc)},
                {"id": 2, "ts": dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=utc)},
                {"id": 4, "ts": dt.datetime(2023, 12, 31, 22, 0, tzinfo=utc)}]
    decoded = decode(b"\n".join(lines) + b"\n", "json", JsonOptions(), schema.names, "s3://b/t.jsonl",
                     exact_numbers=["id"])
    result = conform(decoded, schema)
    assert [{"id": r["id"], "ts": r["ts"]} for r in result.table.to_pylist()] == expected
    assert [(r.position, r.column) for r in result.rejects] == [(3, "ts")]
    assert "out of the timestamp range" in result.rejects[0].reason
    n = len(lines)
    msgs = Messages(Range("t", 0, 0, n), [None] * n, lines, list(range(n)), [0] * n, [None] * n)
    rows = decode_messages(msgs, schema, "json", "append", ())
    assert [{"id": r["id"], "ts": r["ts"]} for r in rows.table.to_pylist()] == expected
    assert [(r["offset"], r["column"]) for r in rows.rejects] == [(2, "ts")]


def test_a_header_name_with_a_line_break_is_a_clear_file_error() -> None:
    # Loads read one-line headers; before, the header's second line was taken as the first record
    # and every row was rejected with "expected 1 fields, found 2".
    decoded = decode(b'"x\ny",z\n1,2\n3,4\n', "csv", CsvOptions(header=True), ["x\ny", "z"], "s3://b/x.csv")
    assert decoded.error is not None and decoded.error.startswith("line 1: a header name holds a line break")
    assert decoded.rejects == []


def test_a_blank_line_is_a_null_row_in_a_one_column_file_only() -> None:
    # As PostgreSQL reads it (and as lading writes a one-column NULL); before, the row was lost.
    one = decode(b"a\n\nb\n\n", "csv", CsvOptions(), ["s"], "s3://b/x.csv")
    (piece,) = one.pieces
    assert piece.table.column("s").to_pylist() == [b"a", None, b"b", None]
    assert piece.positions.tolist() == [1, 2, 3, 4]
    two = decode(b"1,a\n\n2,b,extra\n3,c\n", "csv", CsvOptions(), ["i", "s"], "s3://b/x.csv")
    assert [p.positions.tolist() for p in two.pieces] == [[1, 4]]
    assert [r.position for r in two.rejects] == [3]


def test_a_byte_order_mark_is_no_part_of_the_first_header_name() -> None:
    # Excel's "CSV UTF-8" starts with one; the first column was named '\ufeffid' and matched nothing.
    decoded = decode("\ufeffid,name,amount\n1,a,2\n".encode(), "csv", CsvOptions(header=True), SCHEMA.names,
                     "s3://b/x.csv")
    assert conform(decoded, SCHEMA).table.to_pylist()[0]["id"] == 1


@pytest.mark.parametrize(("data", "line"), [
    (b'1,ann,1\n2,"bob,2\n' + b"".join(b"%d,x,%d\n" % (i, i) for i in range(3, 1000)), 2),  # the rest was one value
    (b'1,"a""b",1\n2,c,2\n3,d"e,3\n4,f,4\n', 3),                                             # a quote inside a bare field
])
def test_a_quote_never_closed_is_a_file_error_naming_its_line(data: bytes, line: int) -> None:
    # pyarrow took the open field to the end of the file: 2 rows loaded, none rejected, 998 gone.
    decoded = decode(data, "csv", CsvOptions(), SCHEMA.names, "s3://b/x.csv")
    assert decoded.error is not None and decoded.error.startswith(f"line {line}: a quoted field opens here")


def test_lines_that_are_no_json_object_are_rejected_not_rows() -> None:
    # A 'null' line loaded as a row of NULLs; a chunk of only such lines crashed the worker (SIGSEGV
    # in pyarrow's JSON reader) once bisection isolated one beside another bad line.
    data = b'{"id": 1, "name": "a"}\nnull\n{"id": 2, "name":\n  5\n[1]\n{"id": 3, "name": "c"}\n'
    result = conform(decode(data, "json", JsonOptions(), SCHEMA.names, "s3://b/x.jsonl"), SCHEMA)
    assert result.table.column("id").to_pylist() == [1, 3]
    assert [r.position for r in result.rejects] == [2, 3, 4, 5]
    assert result.rejects[0].reason == "not a JSON object (one object per line)"
    assert result.rejects[0].record == "null"


def test_json_strings_that_look_like_times_load_as_written_into_text() -> None:
    # pyarrow inferred them as timestamps: '2024-01-02T10:00:00+02:00' loaded as '2024-01-02 08:00:00'.
    schema = TableSchema.of([("id", "bigint"), ("name", "string")])
    data = b'{"id": 1, "name": "2024-01-02T10:00:00+02:00"}\n{"id": 2, "name": "2024-01-02"}\n'
    result = conform(decode(data, "json", JsonOptions(), schema.names, "s3://b/x.jsonl"), schema)
    assert result.table.column("name").to_pylist() == ["2024-01-02T10:00:00+02:00", "2024-01-02"]


def test_a_header_alone_without_a_line_break_loads_no_rows() -> None:
    # It was a file error ("Could not skip initial 1 rows"), which fails a load under onError: abort.
    decoded = decode(b"id,name,amount", "csv", CsvOptions(header=True), SCHEMA.names, "s3://b/x.csv")
    assert decoded.error is None and conform(decoded, SCHEMA).table.num_rows == 0


def test_a_headerless_one_column_file_of_blank_lines_is_null_rows() -> None:
    # Lading writes two NULLs of a one-column table as "\n\n"; the empty-file shortcut loaded none.
    (piece,) = decode(b"\n\n", "csv", CsvOptions(), ["s"], "s3://b/x.csv").pieces
    assert piece.table.column("s").to_pylist() == [None, None]
    assert decode(b"", "csv", CsvOptions(), ["s"], "s3://b/x.csv").pieces == []


def test_binary_columns_decode_the_text_that_spells_them() -> None:
    # CSV spells bytea as \x hex, lading's JSON as base64; both loaded the text's own bytes
    # (b'\\x0102'), and invalid hex loaded too. An odd digit count is refused, not shifted.
    schema = TableSchema.of([("id", "bigint"), ("b", "binary")])
    csv = b'1,\\x0102\n2,\n3,\\xZZ\n4,\\x012\n5,0102\n6,\\x\n'
    result = conform(decode(csv, "csv", CsvOptions(), schema.names, "s3://b/x.csv"), schema)
    assert result.table.to_pylist() == [{"id": 1, "b": b"\x01\x02"}, {"id": 2, "b": None}, {"id": 6, "b": b""}]
    assert [(r.position, r.column) for r in result.rejects] == [(3, "b"), (4, "b"), (5, "b")]
    assert "'\\\\x012' is not a valid binary" in result.rejects[1].reason
    js = b'{"id": 1, "b": "AQI="}\n{"id": 2, "b": null}\n{"id": 3, "b": "AQI"}\n'
    result = conform(decode(js, "json", JsonOptions(), schema.names, "s3://b/x.jsonl"), schema)
    assert result.table.to_pylist() == [{"id": 1, "b": b"\x01\x02"}, {"id": 2, "b": None}]
    assert [r.position for r in result.rejects] == [3]


def test_varchar_and_char_lengths_hold_as_in_postgresql() -> None:
    # 'abcd' loaded into varchar(3). Now: too long is a rejected row naming the column; excess
    # that is all spaces is cut (PostgreSQL's rule, and Spark's write check).
    schema = TableSchema.of([("id", "bigint"), ("v", "varchar(3)"), ("c", "char(2)")])
    data = "1,abc,ab\n2,abcd,a\n3,ab   ,ab \n4,é€x,\n5,x,abc\n".encode()
    result = conform(decode(data, "csv", CsvOptions(), schema.names, "s3://b/x.csv"), schema)
    assert result.table.to_pylist() == [{"id": 1, "v": "abc", "c": "ab"}, {"id": 3, "v": "ab ", "c": "ab"},
                                        {"id": 4, "v": "é€x", "c": None}]
    assert [(r.position, r.column) for r in result.rejects] == [(2, "v"), (5, "c")]
    assert result.rejects[0].reason == "'abcd' is longer than varchar(3) allows (4 characters)"


def test_lines_ended_by_cr_alone_are_lines() -> None:
    # A lone-CR file was one line: with a header, "a header name holds a line break"; with a bad
    # value past line 1, IndexError in the task; a bad byte rejected a good row.
    data = b"id,name,amount\r1,a,2\r2,b,oops\r3,c,4\r"
    result = conform(decode(data, "csv", CsvOptions(header=True), SCHEMA.names, "s3://b/x.csv"), SCHEMA)
    assert result.table.column("id").to_pylist() == [1, 3]
    assert [(r.position, r.column) for r in result.rejects] == [(3, "amount")]
    assert result.rejects[0].record == "2,b,oops"


def test_uuids_are_checked_and_stored_in_one_form() -> None:
    # 'not-a-uuid' loaded, and upper-case or braced spellings of one UUID were different keys.
    schema = TableSchema.of([("id", "bigint"), ("u", "uuid")])
    data = (b"1,A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11\n2,{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}\n"
            b"3,a0eebc999c0b4ef8bb6d6bb9bd380a11\n4,not-a-uuid\n5,\n")
    result = conform(decode(data, "csv", CsvOptions(), schema.names, "s3://b/x.csv"), schema)
    assert result.table.column("u").to_pylist() == ["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"] * 3 + [None]
    assert [(r.position, r.column, r.reason) for r in result.rejects] == [(4, "u", "'not-a-uuid' is not a valid uuid")]


def test_a_json_column_takes_nested_json_lines_values_as_their_text() -> None:
    # An object under a json column's key was rejected ('Unsupported cast from struct ... to utf8');
    # a string is the JSON text it holds, as lading's encoder writes a json column.
    schema = TableSchema.of([("id", "bigint"), ("doc", "json")])
    data = (b'{"id": 1, "doc": {"a": [1, 2], "b": "x"}}\n{"id": 2, "doc": "{\\"c\\": true}"}\n'
            b'{"id": 3, "doc": "not json"}\n{"id": 4, "doc": null}\n')
    result = conform(decode(data, "json", JsonOptions(), schema.names, "s3://b/x.jsonl"), schema)
    assert result.table.to_pylist() == [{"id": 1, "doc": '{"a":[1,2],"b":"x"}'}, {"id": 2, "doc": '{"c": true}'},
                                        {"id": 4, "doc": None}]
    assert [(r.position, r.column) for r in result.rejects] == [(3, "doc")]


VERBATIM = TableSchema.of([("id", "bigint"), ("s", "string"), ("doc", "json"), ("n", "string")])


def _verbatim_rows(data: bytes) -> tuple[list[tuple[Any, ...]], list[tuple[int, str]]]:
    result = conform(decode(data, "json", JsonOptions(), VERBATIM.names, "s3://b/v.jsonl", exact_numbers=["id"],
                            verbatim=["s", "doc", "n"]), VERBATIM)
    return ([(r["id"], r["s"], r["doc"], r["n"]) for r in result.table.to_pylist()],
            [(r.position, r.reason) for r in result.rejects])


@pytest.mark.parametrize("case", ["found by key", "a nested member shares the key", "the key spelled with escapes"])
def test_numbers_and_nested_values_in_text_columns_keep_their_text_however_the_lines_hold_them(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The key is found by an expression over the bytes; where it is not found once per value (also
    # inside a nested object, or spelled "\u0073"), each line's members are scanned instead: same text.
    lines = [b'{"id": 1, "s": 1.10, "doc": {"a": [1, 2.50]}, "n": "say \\"s\\": 5"}',
             b'{"id": 2, "s": null, "doc": null, "n": null}',
             b'', b'  ',
             b'{"S": -0.0, "id": 3, "doc": [ ], "n": "x"}',
             b'{"id": 4, "doc": {"t": 7, "u": {}}, "s": 12345678901234567890123}']
    if case == "a nested member shares the key":
        lines.append(b'{"id": 5, "doc": [{"s": 1.5, "doc": [0]}], "s": 2e-3}')
    if case == "the key spelled with escapes":
        lines.append(b'{"id": 5, "\\u0073": 2e-3, "do\\u0063": [0]}')
    from lading_jobs.ingest import decode as decode_module

    scanned: list[list[str]] = []
    members = decode_module._members
    monkeypatch.setattr(decode_module, "_members", lambda line, names: scanned.append(names) or members(line, names))
    rows, rejects = _verbatim_rows(b"\n".join(lines) + b"\n")
    assert rows[:4] == [(1, "1.10", '{"a": [1, 2.50]}', 'say "s": 5'), (2, None, None, None),
                        (3, "-0.0", "[ ]", "x"), (4, "12345678901234567890123", '{"t": 7, "u": {}}', None)]
    assert {name for names in scanned for name in names} == (set() if case == "found by key" else {"s", "doc"})
    if case != "found by key":
        assert rows[4][:2] == (5, "2e-3") and rows[4][2] in ('[{"s": 1.5, "doc": [0]}]', "[0]")
    assert rejects == []


def test_a_line_with_invalid_utf8_is_still_rejected_beside_numbers_kept_as_text() -> None:
    rows, rejects = _verbatim_rows(b'{"id": 1, "s": 1.50, "n": "ok"}\n{"id": 2, "s": 2.50, "n": "\xff"}\n')
    assert rows == [(1, "1.50", None, "ok")]
    assert rejects == [(2, "invalid UTF-8")]


def test_text_columns_of_strings_or_integers_take_no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    from lading_jobs.ingest import decode as decode_module

    def no_scan(*args: Any) -> Any:
        raise AssertionError("scanned")

    monkeypatch.setattr(decode_module, "_as_spelled", no_scan)
    monkeypatch.setattr(decode_module, "_members", no_scan)
    rows, _ = _verbatim_rows(b'{"id": 1, "s": "a", "n": 10}\n{"id": 2, "s": "b", "n": -20}\n')
    assert rows == [(1, "a", None, "10"), (2, "b", None, "-20")]
    monkeypatch.undo()
    rows, _ = _verbatim_rows(b'{"id": 1, "n": -0}\n')  # the one integer whose int64 prints otherwise
    assert rows == [(1, None, None, "-0")]


STRINGS = TableSchema.of([("id", "string"), ("a", "string"), ("b", "string")])


@pytest.mark.parametrize(("data", "options", "rows", "rejects"), [
    (b'1;ab"c;d"e;x\r\n2;f;"g"h\r\n', CsvOptions(delimiter=";"), [("1", "abc;de", "x"), ("2", "f", "gh")], []),
    (b'1,ab"c\\"d",x\n', CsvOptions(escape="\\"), [("1", 'abc"d', "x")], []),
    (b'1,a"b\nc"d,x\n2,y\n3,"z" ,\n', CsvOptions(), [("1", "ab\ncd", "x"), ("3", "z ", None)], [(3, "2,y")]),
    (b'id,a,b\n1,"x"y,\n', CsvOptions(header=True), [("1", "xy", None)], []),
])
@pytest.mark.parametrize("block", [None, 2])  # 2: quotes classified two bytes at a time, parity carried over
def test_a_quote_inside_a_field_opens_a_quoted_section_as_in_postgresql(
        data: bytes, options: CsvOptions, rows: list[tuple[str | None, ...]], rejects: list[tuple[int, str]],
        block: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if block is not None:
        from lading_jobs.formats import csv

        monkeypatch.setattr(csv, "_BLOCK", block)
    result = conform(decode(data, "csv", options, STRINGS.names, "s3://b/q.csv"), STRINGS)
    assert [tuple(r.values()) for r in result.table.to_pylist()] == rows
    assert [(r.position, r.record) for r in result.rejects] == rejects
