"""CSV quoting against a row-at-a-time reference of PostgreSQL's rules.

The encoder decides quoting column-at-a-time and skips per-value tests when a
scan of the column's bytes proves them unnecessary; these tests pin that the
shortcut never changes a single byte: random text full of special characters,
sliced batches, null strings that real values collide with, and null slots that
(legally, in Arrow) still span bytes.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lading_jobs.formats.csv import CsvEncoder, _unquoted_lines, read_csv
from lading_spec.formats import CsvOptions

DIALECTS = [
    CsvOptions(),
    CsvOptions(null="NULL"),
    CsvOptions(null="1"),  # a number can equal the null string: it must be quoted
    CsvOptions(delimiter=";", quote="'", escape="\\"),
    CsvOptions(delimiter="|", null="\\N", force_quote=("n",)),
    CsvOptions(force_quote="*"),
]
ALPHABET = st.sampled_from([",", '"', "'", "\\", ".", "\r", "\n", ";", "|", "N", "U", "L", "1", "x", " ", "é", "☃"])
TEXT = st.one_of(st.none(), st.text(ALPHABET, max_size=6), st.sampled_from(["", "\\.", "NULL", "\\N", "1"]))


def reference_field(value: str | None, o: CsvOptions, forced: bool, text_column: bool) -> str:
    """PostgreSQL ``COPY ... (FORMAT csv)`` output for one value, written the obvious way."""
    if value is None:
        return o.null
    special = any(c in value for c in (o.delimiter, o.quote, o.escape, "\r", "\n"))
    if forced or special or value == o.null or (text_column and value == "\\."):
        if o.escape != o.quote:
            value = value.replace(o.escape, o.escape + o.escape)
        return o.quote + value.replace(o.quote, o.escape + o.quote) + o.quote
    return value


def reference(table: pa.Table, o: CsvOptions) -> bytes:
    forced = set(table.schema.names) if o.force_quote == "*" else set(o.force_quote)
    lines = []
    for row in table.to_pylist():
        lines.append(o.delimiter.join(
            reference_field(None if row[name] is None else str(row[name]), o, name in forced, name == "s")
            for name in table.schema.names) + "\n")
    return "".join(lines).encode()


def encode(table: pa.Table, o: CsvOptions, chunk: int, native: bool = True) -> bytes:
    """With ``native`` false, the pure-Arrow encoder (the fallback where the C line writer is not built)."""
    enc = CsvEncoder(table.schema, o)
    enc._native = enc._native and native
    return b"".join(enc.encode(b) for b in table.to_batches(max_chunksize=chunk))


@settings(max_examples=150, deadline=None)
@given(values=st.lists(TEXT, min_size=1, max_size=40), dialect=st.sampled_from(DIALECTS),
       chunk=st.integers(1, 16), native=st.booleans())
def test_encoder_equals_the_row_at_a_time_reference(values: list[str | None], dialect: CsvOptions,
                                                    chunk: int, native: bool) -> None:
    table = pa.table({"s": pa.array(values, pa.string()),
                      "n": pa.array([i if i % 5 else None for i in range(len(values))], pa.int64())})
    out = encode(table, dialect, chunk, native)  # chunks are slices: offsets into shared buffers
    assert out == reference(table, dialect)
    assert read_csv(out, dialect, table.schema).equals(table)


def test_null_slots_that_span_bytes_change_nothing() -> None:
    # Arrow lets a null slot span bytes; here the null's bytes hold a delimiter, a quote
    # and a newline, while the valid values need no quoting at all.
    data = b'plain,"\nother'
    offsets = pa.array([0, 5, 8, 13], pa.int32())
    validity = pa.array([True, False, True]).buffers()[1]
    arr = pa.Array.from_buffers(pa.string(), 3, [validity, offsets.buffers()[1], pa.py_buffer(data)], null_count=1)
    assert arr.to_pylist() == ["plain", None, "other"]
    table = pa.table({"s": arr})
    for o in DIALECTS[:4]:
        assert encode(table, o, 3) == encode(table, o, 3, native=False) == reference(table, o)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.sampled_from(["plain", "", "x y", "é"]), TEXT), min_size=3, max_size=60),
       dialect=st.sampled_from(DIALECTS), chunk=st.integers(3, 60), native=st.booleans())
def test_a_few_values_quoted_among_many_equal_the_reference(values: list[str | None], dialect: CsvOptions,
                                                            chunk: int, native: bool) -> None:
    """Mostly values needing no quotes: the few that do are quoted apart and put in place."""
    values = [v if i % 7 == 3 else ("plain" if v is not None and i % 2 else None) for i, v in enumerate(values)]
    table = pa.table({"s": pa.array(values, pa.string()), "n": pa.array(range(len(values)), pa.int64())})
    out = encode(table, dialect, chunk, native)
    assert out == reference(table, dialect)
    assert read_csv(out, dialect, table.schema).equals(table)


def test_encode_buffer_is_encode() -> None:
    table = pa.table({"s": pa.array(["a,b", None, "", "x"]), "n": pa.array([1, 2, None, 4], pa.int64())})
    enc = CsvEncoder(table.schema)
    batch = table.to_batches()[0]
    buf = enc.encode_buffer(batch)
    assert isinstance(buf, pa.Buffer)
    assert buf.to_pybytes() == enc.encode(batch) == b'"a,b",1\n,2\n"",\nx,4\n'


# Batches in which no value needs quoting take Arrow's C++ CSV writer instead of the
# element-wise join; it refuses values holding what it treats as structural (", the
# delimiter, CR, LF), and the join must then make the same lines.
PLAIN = st.one_of(st.none(), st.text(st.sampled_from(["a", "b", "7", " ", ".", "é", "☃", "'", "\\", '"', ";"]),
                                     min_size=1, max_size=6))


@settings(max_examples=150, deadline=None)
@given(values=st.lists(PLAIN, min_size=1, max_size=40), dialect=st.sampled_from(DIALECTS), chunk=st.integers(1, 16),
       native=st.booleans())
def test_unquoted_batches_equal_the_reference(values: list[str | None], dialect: CsvOptions, chunk: int,
                                              native: bool) -> None:
    table = pa.table({"s": pa.array(values, pa.string()),
                      "n": pa.array([i if i % 3 else None for i in range(len(values))], pa.int64()),
                      "d": pa.array([None if i % 4 == 0 else -i / 8 for i in range(len(values))], pa.float64())})
    assert encode(table, dialect, chunk, native) == reference(table, dialect)


def test_a_batch_without_quoting_is_written_by_arrows_writer() -> None:
    table = pa.table({"s": pa.array(["plain", None, "text"]), "n": pa.array([1, None, -3], pa.int64())})
    enc = CsvEncoder(table.schema)
    columns, quoted = enc.fields(table.to_batches()[0])
    assert not quoted
    lines = _unquoted_lines(columns, ",")
    assert lines is not None and lines.to_pybytes() == b"plain,1\n,\ntext,-3\n" == reference(table, CsvOptions())


def test_arrows_writer_refuses_what_it_would_have_to_quote_and_the_join_takes_over() -> None:
    # with the quote ' a " needs no quoting in our dialect, but Arrow's writer refuses it
    o = CsvOptions(delimiter=";", quote="'", escape="\\")
    table = pa.table({"s": pa.array(['say "hi"', "x"])})
    enc = CsvEncoder(table.schema, o)
    columns, quoted = enc.fields(table.to_batches()[0])
    assert not quoted and _unquoted_lines(columns, ";") is None
    assert enc.encode(table.to_batches()[0]) == b'say "hi"\nx\n' == reference(table, o)


def test_after_a_refusal_the_encoder_joins_every_later_batch_with_the_same_bytes() -> None:
    o = CsvOptions(delimiter=";", quote="'", escape="\\")
    refused = pa.table({"s": pa.array(['a "b"', None])})
    clean = pa.table({"s": pa.array(["plain", None, "text"])})
    enc = CsvEncoder(refused.schema, o)
    enc._native = False  # the pure-Arrow encoder's own way (without the C line writer)
    assert enc.encode(refused.to_batches()[0]) == reference(refused, o)
    assert enc._writer_refused  # the refusal is remembered: no second attempt per batch
    assert enc.encode(clean.to_batches()[0]) == b"plain\n\ntext\n" == reference(clean, o)
