"""The C line writer (``_csvlines``) against the pure-Arrow encoder, byte for byte.

``CsvEncoder`` writes lines with ``_csvlines`` where the module is built (scripts/build-native:
bootstrap, the image) and with pyarrow.compute otherwise; both must give the same bytes for every
type, value range, dialect and slicing, so the pure encoder (itself pinned to PostgreSQL by
test_csv_quoting.py, test_render_oracle.py and the round trips) is the oracle here. Then the C
module's own guard rails: buffers shorter than their rows, string offsets out of order or past
their data, and an output too small are refused, never read or written past.
"""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lading_jobs.formats import _csvlines, csv, text
from lading_spec.formats import CsvOptions

DIALECTS = [
    CsvOptions(),
    CsvOptions(null="NULL"),
    CsvOptions(null="1"),  # a number can equal the null string: plain columns are checked too
    CsvOptions(null="true"),
    CsvOptions(delimiter=";", quote="'", escape="\\"),
    CsvOptions(delimiter="|", null="\\N", force_quote=("s", "i64", "ts")),
    CsvOptions(delimiter="-"),  # a character of numbers and dates: every plain value is checked
    CsvOptions(force_quote="*"),
]
ALPHABET = st.sampled_from([",", '"', "'", "\\", ".", "\r", "\n", ";", "|", "-", "N", "U", "L", "1", "x", " ", "é", "☃"])
TEXT = st.one_of(st.none(), st.text(ALPHABET, max_size=6), st.sampled_from(["", "\\.", "NULL", "\\N", "1", "true"]))
DAY = st.integers(-800_000, 3_000_000)  # beyond years 1..9999 both ways: those take value_text
MICROS = st.integers(-800_000 * 86_400_000_000, 3_000_000 * 86_400_000_000)


def _decimals(precision: int, scale: int) -> st.SearchStrategy[decimal.Decimal | None]:
    return st.one_of(st.none(), st.decimals(min_value=-(10 ** (precision - scale)) + 1,
                                            max_value=10 ** (precision - scale) - 1, places=scale,
                                            allow_nan=False, allow_infinity=False))


COLUMNS = {
    "s": (pa.string(), TEXT),
    "ls": (pa.large_string(), TEXT),
    "i8": (pa.int8(), st.one_of(st.none(), st.integers(-128, 127))),
    "u8": (pa.uint8(), st.one_of(st.none(), st.integers(0, 255))),
    "i16": (pa.int16(), st.one_of(st.none(), st.integers(-2**15, 2**15 - 1))),
    "u32": (pa.uint32(), st.one_of(st.none(), st.integers(0, 2**32 - 1))),
    "i64": (pa.int64(), st.one_of(st.none(), st.integers(-2**63, 2**63 - 1))),
    "u64": (pa.uint64(), st.one_of(st.none(), st.integers(0, 2**64 - 1))),
    "b": (pa.bool_(), st.one_of(st.none(), st.booleans())),
    "d": (pa.date32(), st.one_of(st.none(), DAY)),
    "ts": (pa.timestamp("us"), st.one_of(st.none(), MICROS)),
    "tstz": (pa.timestamp("us", "UTC"), st.one_of(st.none(), MICROS)),
    "tsms": (pa.timestamp("ms", "Europe/Paris"), st.one_of(st.none(), st.integers(-2**50, 2**50))),
    "dec2": (pa.decimal128(12, 2), _decimals(12, 2)),
    "dec38": (pa.decimal128(38, 10), _decimals(38, 10)),
    "dec0": (pa.decimal128(38, 0), _decimals(38, 0)),
    "decneg": (pa.decimal128(5, -2), st.one_of(st.none(), st.integers(-99999, 99999))),
    "f": (pa.float64(), st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))),
    # mostly whole doubles (the C code writes those; the others' text comes from render_float)
    "fw": (pa.float64(), st.one_of(st.none(), *[st.integers(-10**10, 10**10).map(float)] * 12,
                                   st.sampled_from([-0.0, 0.5, -1e-7, float("nan"), float("inf"), -float("inf"),
                                                    1e10, -1e10, 9999999999.0, 1e16, 2.0**53 + 2]))),
    "bin": (pa.binary(), st.one_of(st.none(), st.binary(max_size=4))),
}


def _array(name: str, values: list) -> pa.Array:
    t, _ = COLUMNS[name]
    if name in ("d", "ts", "tstz", "tsms"):
        storage = pa.int32() if name == "d" else pa.int64()
        return pa.array(values, storage).view(t)
    if name == "decneg":
        return pa.array([None if v is None else decimal.Decimal(v).scaleb(2) for v in values], t)
    return pa.array(values, t)


def pure(schema: pa.Schema, o: CsvOptions) -> csv.CsvEncoder:
    enc = csv.CsvEncoder(schema, o)
    enc._native = False
    return enc


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    names = draw(st.lists(st.sampled_from(sorted(COLUMNS)), min_size=1, max_size=6, unique=True))
    rows = draw(st.integers(1, 30))
    return pa.table({n: _array(n, draw(st.lists(COLUMNS[n][1], min_size=rows, max_size=rows))) for n in names})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=tables(), dialect=st.sampled_from(DIALECTS), data=st.data())
def test_same_bytes_as_the_pure_encoder(table: pa.Table, dialect: CsvOptions, data: st.DataObject) -> None:
    if dialect.force_quote != "*":
        dialect = CsvOptions(**{**dialect.__dict__, "force_quote": tuple(c for c in dialect.force_quote
                                                                         if c in table.schema.names)})
    start = data.draw(st.integers(0, table.num_rows - 1))
    batch = table.slice(start, data.draw(st.integers(1, table.num_rows - start))).combine_chunks().to_batches()[0]
    native = csv.CsvEncoder(table.schema, dialect)
    assert native._native
    try:
        expected = pure(table.schema, dialect).encode(batch)
    except pa.ArrowInvalid:  # a value the pure encoder cannot render either (a cast that would lose data)
        with pytest.raises(pa.ArrowInvalid):
            native.encode(batch)
        return
    assert native.encode(batch) == expected


def test_the_module_is_built() -> None:
    """CI and the image build it (scripts/build-native); a silent fallback would lose its speed."""
    assert csv._csvlines is _csvlines
    assert csv.CsvEncoder(pa.schema([("a", pa.int64())]))._native


def test_every_kind_at_its_edges() -> None:
    """The extremes of each kind the C code renders, beside their pure-Arrow text."""
    table = pa.table({
        "i64": pa.array([-2**63, 2**63 - 1, 0, -1, None], pa.int64()),
        "u64": pa.array([2**64 - 1, 0, 10, 99, None], pa.uint64()),
        "d": pa.array([-719_162, 2_932_896, 0, -1, None], pa.int32()).view(pa.date32()),
        "ts": pa.array([-719_162 * 86_400_000_000, 2_932_897 * 86_400_000_000 - 1, 0, -1, None],
                       pa.int64()).view(pa.timestamp("us", "UTC")),
        "dec": pa.array([decimal.Decimal("-" + "9" * 28 + "." + "9" * 10), decimal.Decimal("0E-10"),
                         decimal.Decimal("-0.0000000001"), decimal.Decimal("12345678901234567890.5"), None],
                        pa.decimal128(38, 10)),
        "dec38": pa.array([decimal.Decimal("-0." + "9" * 38), decimal.Decimal("0." + "0" * 37 + "1"),
                           decimal.Decimal(0), None, None], pa.decimal128(38, 38)),
        "b": pa.array([True, False, None, True, False]),
        "s": pa.array(["", "\\.", 'a"b', "x\ny", None]),
    })
    batch = table.to_batches()[0]
    got = csv.CsvEncoder(table.schema).encode(batch)
    assert got == pure(table.schema, CsvOptions()).encode(batch)
    first = got.split(b"\n")[0].decode()
    assert first == ("-9223372036854775808,18446744073709551615,0001-01-01,0001-01-01 00:00:00.000000+00,"
                     "-9999999999999999999999999999.9999999999,-0.99999999999999999999999999999999999999,true,\"\"")
    assert got.split(b"\n")[1].decode().startswith("9223372036854775807,0,9999-12-31,9999-12-31 23:59:59.999999+00,"
                                                   "0.0000000000,0.00000000000000000000000000000000000001,false,\"\\.\"")


def test_null_slots_that_span_bytes() -> None:
    """Arrow allows a null's slot bytes; they are never written (the null string is)."""
    offsets = pa.array([0, 3, 6, 9], pa.int32()).buffers()[1]
    validity = pa.array([True, False, True]).buffers()[1]
    arr = pa.StringArray.from_buffers(3, offsets, pa.py_buffer(b"abc,,,ghi"), validity, 1)
    batch = pa.RecordBatch.from_arrays([arr, pa.array([1, 2, 3])], names=["s", "n"])
    assert csv.CsvEncoder(batch.schema).encode(batch) == b"abc,1\n,2\nghi,3\n"
    assert csv.CsvEncoder(batch.schema).encode(batch.slice(1)) == b",2\nghi,3\n"


def _call(columns: list[tuple], rows: int, out_size: int = 1 << 16) -> int:
    return _csvlines.encode(pa.allocate_buffer(out_size), rows, ord(","), b"", ord('"'), ord('"'), b',"\r\n', columns)


def test_guard_rails_refuse_what_does_not_add_up() -> None:
    ints = pa.array([1, 2, 3], pa.int64()).buffers()[1]
    good = pa.array(["ab", "c", ""])
    _, offsets, data = good.buffers()
    assert _call([(1, 1, None, 0, ints, None, 8, 1, b"")], 3) == len(b"1\n2\n3\n")
    with pytest.raises(ValueError, match="shorter than its rows"):
        _call([(1, 1, None, 0, ints, None, 8, 1, b"")], 4)
    with pytest.raises(ValueError, match="shorter than its rows"):
        _call([(1, 1, None, 1, ints, None, 8, 1, b"")], 3)  # an offset past the end
    with pytest.raises(ValueError, match="shorter than its rows"):
        _call([(0, 0, pa.py_buffer(b""), 0, offsets, data, 1, 0, b"")], 3)  # a validity bitmap too short
    backwards = pa.array([0, 2, 1, 3], pa.int32()).buffers()[1]
    with pytest.raises(ValueError, match="offsets"):
        _call([(0, 0, None, 0, backwards, data, 1, 0, b"")], 3)
    past = pa.array([0, 2, 3, 99], pa.int32()).buffers()[1]
    with pytest.raises(ValueError, match="offsets"):
        _call([(0, 0, None, 0, past, data, 1, 0, b"")], 3)
    with pytest.raises(ValueError, match="kind"):
        _call([(9, 1, None, 0, ints, None, 8, 1, b"")], 3)
    with pytest.raises(ValueError, match="quoting"):
        _call([(1, 0, None, 0, ints, None, 8, 1, b"")], 3)
    with pytest.raises(ValueError, match="width"):
        _call([(1, 1, None, 0, ints, None, 3, 1, b"")], 3)
    with pytest.raises(ValueError, match="scale"):
        _call([(4, 1, None, 0, ints, None, 39, 0, b"")], 0)
    with pytest.raises(ValueError, match="years"):  # the caller checks ranges; the C code still refuses
        _call([(2, 1, None, 0, pa.array([10**9], pa.int32()).buffers()[1], None, 0, 0, b"")], 1)
    with pytest.raises(TypeError):
        _call([(1, 1, None, 0, "not a buffer", None, 8, 1, b"")], 3)


def test_an_output_too_small_is_never_overrun() -> None:
    """-1, and not one byte past its end: the caller then takes the pure encoder."""
    values = pa.array(["x" * 50] * 4).buffers()
    for size in range(0, 215, 7):
        out = bytearray(size) + b"\xa5" * 8
        got = _csvlines.encode(memoryview(out)[:size], 4, ord(","), b"", ord('"'), ord('"'), b',"\r\n',
                               [(0, 0, None, 0, values[1], values[2], 1, 0, b"")])
        assert got == (204 if size >= 204 else -1)
        assert out[size:] == b"\xa5" * 8


def test_a_wide_batch_in_a_real_dialect_matches(tmp_path: object) -> None:
    """Timestamps with a zone, dates and decimals in a semicolon dialect, quoted where forced."""
    table = pa.table({
        "when": pa.array([dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=dt.UTC), None], pa.timestamp("us", "UTC")),
        "day": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)]),
        "amount": pa.array([decimal.Decimal("-0.50"), decimal.Decimal("1234567890.12")], pa.decimal128(12, 2)),
        "name": pa.array(["O'Brien; Ltd", None]),
    })
    o = CsvOptions(delimiter=";", quote="'", escape="\\", force_quote=("day",))
    batch = table.to_batches()[0]
    got = csv.CsvEncoder(table.schema, o).encode(batch)
    assert got == pure(table.schema, o).encode(batch)
    assert got == b"2024-02-29 23:59:59.999999+00;'0001-01-01';-0.50;'O\\'Brien; Ltd'\n;'9999-12-31';1234567890.12;\n"


def test_doubles_mostly_whole_are_written_by_the_c_code() -> None:
    """Whole values under 1e10 as their integer and ``.0``; -0.0, fractions, large values, NaN and
    infinities from render_float's text, taken in turn; the same bytes as the pure encoder."""
    values = [float(v) for v in range(-40, 40)] + [-0.0, 0.25, 1e10, -9999999999.0, float("nan"), float("inf"),
                                                     -float("inf"), None, 3e-9, 1e22]
    arr = pa.array(values, pa.float64())
    field = pa.field("f", pa.float64())
    native = csv._native_kind(arr, field)
    assert native is not None and native[0] == csv._FLOAT and native[2] == 8  # 8 values rendered apart
    table = pa.table({"f": arr, "g": arr.slice(3).to_pylist() + [1.0, 2.0, 3.0]})
    for o in (CsvOptions(), CsvOptions(force_quote="*"), CsvOptions(null="NULL")):
        for batch in (table.to_batches()[0], table.to_batches()[0].slice(5, 70)):
            got = csv.CsvEncoder(table.schema, o).encode(batch)
            assert got == pure(table.schema, o).encode(batch)
    lines = csv.CsvEncoder(table.schema).encode(table.to_batches()[0]).decode().split("\n")
    assert [line.split(",")[0] for line in lines[78:87]] == ["38.0", "39.0", "-0.0", "0.25", "1e+10",
                                                              "-9999999999.0", "NaN", "Infinity", "-Infinity"]


def test_a_float_column_whose_rendered_values_do_not_add_up_is_refused() -> None:
    values = pa.array([1.0, 0.5, 2.0]).buffers()[1]
    rendered = pa.array(["0.5"])
    _, offsets, data = rendered.buffers()
    args = (ord(","), b"", ord('"'), ord('"'), b',"\r\n')
    out = bytearray(100)
    assert _csvlines.encode(out, 3, *args, [(6, 1, None, 0, values, offsets, 1, 0, data)]) == len(b"1.0\n0.5\n2.0\n")
    with pytest.raises(ValueError, match="do not match"):  # one rendered value too many
        _csvlines.encode(out, 3, *args, [(6, 1, None, 0, values, pa.array(["0.5", "x"]).buffers()[1], 2, 0,
                                          pa.array(["0.5", "x"]).buffers()[2])])
    with pytest.raises(ValueError, match="do not match"):  # one too few
        _csvlines.encode(out, 3, *args, [(6, 1, None, 0, values, offsets, 0, 0, data)])
    with pytest.raises(ValueError, match="outnumber"):
        _csvlines.encode(out, 3, *args, [(6, 1, None, 0, values, offsets, 4, 0, data)])
    with pytest.raises(ValueError, match="shorter"):
        _csvlines.encode(out, 3, *args, [(6, 1, None, 0, values, offsets, 3, 0, data)])


def test_doubles_mostly_fractional_are_classified_once_and_rendered_whole() -> None:
    """A double column that is not mostly whole comes back from ``_native_kind`` as render_float's
    text of it all, which the C code copies as a string column: the same bytes as the pure encoder."""
    arr = pa.array([0.1 * i for i in range(50)] + [None, -0.0, float("nan"), 7.0], pa.float64())
    native = csv._native_kind(arr, pa.field("f", pa.float64()))
    assert isinstance(native, pa.Array) and native.equals(text.render_float(arr, "NaN", "Infinity", "-Infinity"))
    table = pa.table({"f": arr})
    for o in (CsvOptions(), CsvOptions(force_quote="*"), CsvOptions(null="NULL")):
        batch = table.to_batches()[0]
        assert csv.CsvEncoder(table.schema, o).encode(batch) == pure(table.schema, o).encode(batch)


def test_a_dialect_numbers_are_spelled_with_renders_no_column_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a delimiter a number can contain ('.'), every value's quotes are checked from its text:
    ``_native_kind`` (casts, classifications) is not even asked, unless the column is forced."""
    table = pa.table({"f": pa.array([0.5, 1.0, None], pa.float64()), "d": pa.array([1, 22, 333], pa.int64())})
    o = CsvOptions(delimiter=".")
    want = pure(table.schema, o).encode(table.to_batches()[0])
    assert want == b'"0.5".1\n"1.0".22\n.333\n'

    def refused(arr: pa.Array, field: pa.Field) -> None:
        raise AssertionError(f"_native_kind asked for {field.name}")

    monkeypatch.setattr(csv, "_native_kind", refused)
    assert csv.CsvEncoder(table.schema, o).encode(table.to_batches()[0]) == want
