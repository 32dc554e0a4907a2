"""Casting a column to the table's type, with the rows that do not cast found, not nulled.

ANSI semantics: a value that does not convert is an *error for that row*, never a
silent NULL. Arrow's casts are all-or-nothing per array, so ``cast_column`` casts
the whole array (the fast path: one vectorised call when every value is good) and,
only when that fails, bisects: halves that cast are kept, halves that fail are
split again, down to the single values that fail. Cost stays vectorised on good
data and grows with the number of bad values, not with the rows.

Conversions follow Spark where Arrow differs: numbers, dates and booleans are
trimmed first; booleans accept t/true/y/yes/1 and f/false/n/no/0 in any case;
a timestamp without an offset is UTC; a number cast to a timestamp is seconds since
1970-01-01 00:00:00 UTC, its fraction truncated to the microsecond, as Spark's
``CAST(1700000000 AS TIMESTAMP)`` (2023-11-14 22:13:20; Arrow took it as
microseconds), and outside years 1 to 9999 or NaN an error; a float cast to an integer truncates (but
overflow is an error); an integer cast to a float may round; a float cast to a
decimal rounds its shortest text half away from zero (2.675 is 2.68). JSON numbers bound
for integer and decimal columns arrive as exact decimals (``decode``): they cast
only when every digit fits (``2.5`` is not a ``bigint``, ``2.675`` not a
``decimal(12,2)``).
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from lading_jobs.formats import jsonl
from lading_jobs.formats.text import concat, joined_bytes, parse_base64, parse_hex

Failure = tuple[int, str]  # (row index within the array, reason)

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, UnicodeDecodeError, ValueError)
_SMALL = 8  # below this many values, test each value on its own
_TRUE = pa.array(["t", "true", "y", "yes", "1"])
_FALSE = pa.array(["f", "false", "n", "no", "0"])
# a zone offset after a time of day (a date's "-02" is none: 2024-01-02 has no offset)
_OFFSET = r"\d:\d\d(?::\d\d(?:[.,]\d+)?)?\s*(?:[zZ]|[+-]\d\d(?::?\d\d)?)$"


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_bytes(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)


def _text_to_integer(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    """Decimal digits with an optional sign, as PostgreSQL reads them: ``+5`` is 5 (Arrow
    refused it) and ``0x10`` is no integer (Arrow read it as 16)."""
    text = pc.utf8_trim_whitespace(arr)
    if pc.any(pc.fill_null(pc.match_substring_regex(text, r"^[+-]?0[xX]"), False)).as_py():
        raise pa.ArrowInvalid("hexadecimal is no integer here: write decimal digits")
    return pc.cast(pc.replace_substring_regex(text, r"^\+(\d)", r"\1"), typ)


def _text_to_float(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    """As Arrow reads it, but a value out of the type's range is an error, as in PostgreSQL:
    ``1e400`` became Infinity and ``1e-400`` zero. ``Infinity``/``inf`` (any case, signed)
    stay infinite; a written zero stays zero."""
    text = pc.utf8_trim_whitespace(arr)
    out = pc.cast(text, typ)
    infinite = pc.and_(pc.is_inf(out), pc.invert(pc.match_substring_regex(text, r"^[+-]?inf(inity)?$",
                                                                         ignore_case=True)))
    vanished = pc.and_(pc.equal(out, 0), pc.match_substring_regex(text, r"^[^eE]*[1-9]"))
    if pc.any(pc.fill_null(pc.or_(infinite, vanished), False)).as_py():
        raise pa.ArrowInvalid(f"out of range for {typ}")
    return out


def _text_to_bool(arr: pa.Array) -> pa.Array:
    low = pc.utf8_lower(pc.utf8_trim_whitespace(arr))
    is_true = pc.is_in(low, value_set=_TRUE)
    is_false = pc.is_in(low, value_set=_FALSE)
    bad = pc.and_(pc.is_valid(low), pc.invert(pc.or_(is_true, is_false)))
    if pc.any(bad).as_py():
        first = pc.filter(arr, bad)[0].as_py()
        raise pa.ArrowInvalid(f"{first!r} is not a boolean (true/false, t/f, yes/no, y/n, 1/0)")
    return pc.if_else(pc.is_valid(low), is_true, pa.scalar(None, pa.bool_()))


def _text_to_timestamp_utc(arr: pa.Array, typ: pa.TimestampType) -> pa.Array:
    text = pc.utf8_trim_whitespace(arr)
    has_offset = pc.fill_null(pc.match_substring_regex(text, _OFFSET), False)
    naive_type = pa.timestamp(typ.unit)
    if not pc.any(has_offset).as_py():
        return pc.cast(text, naive_type).cast(typ)
    aware = pc.cast(pc.if_else(has_offset, text, pa.scalar(None, pa.string())), typ)
    naive = pc.cast(pc.if_else(has_offset, pa.scalar(None, pa.string()), text), naive_type).cast(typ)
    return pc.if_else(has_offset, aware, naive)


def _float_to_decimal(arr: pa.Array, typ: pa.Decimal128Type | pa.Decimal256Type) -> pa.Array:
    """A float as the decimal its shortest text says, rounded half away from zero to the
    column's scale, as Spark (``Double.toString``, HALF_UP) and PostgreSQL (float8 to
    numeric) take it: 2.675 is 2.68, 1.005 is 1.01. Arrow's own cast rounds the binary
    value (2.67499999…: 2.67). A ``float`` is taken as the double it is, as Spark does
    (2.675f is 2.6749999523…: 2.67). Overflow and NaN are errors. The text is read with one
    digit more than the scale (cut there, which keeps the digit the rounding looks at)."""
    wide = pa.decimal256(typ.precision + 1, typ.scale + 1)
    exact = pc.cast(pc.cast(pc.cast(arr, pa.float64()), pa.string()), wide, safe=False)  # a float: as a double
    return pc.round(exact, ndigits=typ.scale, round_mode="half_towards_infinity").cast(typ)


_UNITS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_FIRST_SECOND, _LAST_SECOND = -62_135_596_800, 253_402_300_799  # 0001-01-01 00:00:00, 9999-12-31 23:59:59


def _seconds_to_timestamp(arr: pa.Array, typ: pa.TimestampType) -> pa.Array:
    """Numbers as seconds since the epoch, as Spark's ``CAST(n AS TIMESTAMP)`` takes them: a
    fraction is truncated toward zero to the unit (a float multiplied as a double, as Spark
    does; a decimal exactly). Outside years 1 to 9999 (Spark's timestamp range), NaN and
    infinities raise, so the value is a failure, never a wrapped or clamped time."""
    per = _UNITS_PER_SECOND[typ.unit]
    out_of_range = pa.ArrowInvalid("seconds since 1970 out of the timestamp range (years 1 to 9999)")

    def outside(values: pa.Array, low: int | float, high: int | float) -> bool:
        return bool(pc.any(pc.fill_null(pc.or_(pc.less(values, low), pc.greater(values, high)), False)).as_py())

    if pa.types.is_floating(arr.type):
        seconds = pc.cast(arr, pa.float64())
        if pc.any(pc.fill_null(pc.invert(pc.is_finite(seconds)), False)).as_py():
            raise pa.ArrowInvalid("NaN and infinities are no time")
        if outside(seconds, _FIRST_SECOND, _LAST_SECOND + 1):
            raise out_of_range
        units = pc.cast(pc.trunc(pc.multiply(seconds, float(per))), pa.int64())
    elif pa.types.is_decimal(arr.type):
        if arr.type.precision > 60:  # beyond any time anyway; keeps the product within decimal256
            raise out_of_range
        scaled = pc.multiply(pc.cast(arr, pa.decimal256(arr.type.precision, arr.type.scale)),
                             pa.scalar(decimal.Decimal(per), pa.decimal256(10, 0)))
        units = pc.cast(pc.round(scaled, ndigits=0, round_mode="towards_zero"), pa.int64())
    elif pa.types.is_integer(arr.type):
        seconds = pc.cast(arr, pa.int64())  # a uint64 past int64 raises
        if outside(seconds, _FIRST_SECOND, _LAST_SECOND):
            raise out_of_range
        units = pc.multiply_checked(seconds, per)
    else:
        raise pa.ArrowInvalid(f"{arr.type} is no number of seconds")
    if outside(units, _FIRST_SECOND * per, (_LAST_SECOND + 1) * per - 1):
        raise out_of_range
    return pc.cast(units, pa.timestamp(typ.unit)).cast(typ)


def convert(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    """Convert every value of ``arr`` to ``typ`` or raise (the all-or-nothing step)."""
    if arr.type == typ:
        return arr
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), typ)
    if _is_bytes(arr.type) and _is_text(typ):
        return arr.cast(typ)  # validates UTF-8
    if _is_text(arr.type) and not _is_text(typ) and not _is_bytes(typ):
        if pa.types.is_boolean(typ):
            return _text_to_bool(arr)
        if pa.types.is_timestamp(typ) and typ.tz is not None:
            return _text_to_timestamp_utc(arr, typ)
        if pa.types.is_integer(typ):
            return _text_to_integer(arr, typ)
        if pa.types.is_floating(typ):
            return _text_to_float(arr, typ)
        return pc.cast(pc.utf8_trim_whitespace(arr), typ)
    if pa.types.is_timestamp(typ) and (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)
                                       or pa.types.is_decimal(arr.type)):
        return _seconds_to_timestamp(arr, typ)
    if pa.types.is_floating(arr.type) and pa.types.is_integer(typ):
        return pc.cast(pc.trunc(arr), typ)  # truncates like Spark; overflow and NaN still fail
    if pa.types.is_integer(arr.type) and pa.types.is_floating(typ):
        return pc.cast(arr, typ, safe=False)  # rounds, cannot overflow
    if pa.types.is_floating(arr.type) and pa.types.is_decimal(typ):
        return _float_to_decimal(arr, typ)
    if pa.types.is_integer(arr.type) and pa.types.is_decimal(typ):  # via the widest decimal, then checked
        return pc.cast(arr, pa.decimal128(38, typ.scale)).cast(typ)
    if pa.types.is_timestamp(arr.type) and pa.types.is_timestamp(typ) and arr.type.tz is None and typ.tz:
        return pc.cast(arr, pa.timestamp(typ.unit)).cast(typ)
    return pc.cast(arr, typ)


def _plain(value: decimal.Decimal) -> str:
    """``2.50000`` → ``2.5``, ``1E+3`` → ``1000``: a number without its padding zeros."""
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _reason(arr: pa.Array, error: Exception, typ: pa.DataType, type_name: str | None) -> str:
    try:
        value = arr[0].as_py()
    except _ARROW_ERRORS:
        value = arr.cast(pa.binary())[0].as_py() if _is_text(arr.type) else None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")  # shown as the text it is
        except UnicodeDecodeError:
            return "invalid UTF-8"
    if isinstance(error, UnicodeDecodeError) or "UTF8" in str(error) or "UTF-8" in str(error):
        return "invalid UTF-8"
    if isinstance(value, decimal.Decimal):  # a number read exactly (JSON): show it as written
        value = _plain(value)
    shown = _shown(value) if isinstance(value, str) else value
    return f"{shown!r} is not a valid {type_name or typ}: {error}"


def bisect(arr: pa.Array, fn: Callable[[pa.Array], pa.Array], typ: pa.DataType,
           offset: int = 0, type_name: str | None = None) -> tuple[list[pa.Array], list[Failure]]:
    """Apply ``fn`` to ``arr``; where it fails, find the failing values by halving."""
    try:
        return [fn(arr)], []
    except _ARROW_ERRORS as error:
        if len(arr) == 1:
            return [pa.nulls(1, typ)], [(offset, _reason(arr, error, typ, type_name))]
        if len(arr) <= _SMALL:
            chunks: list[pa.Array] = []
            failures: list[Failure] = []
            for i in range(len(arr)):
                c, f = bisect(arr.slice(i, 1), fn, typ, offset + i, type_name)
                chunks += c
                failures += f
            return chunks, failures
        mid = len(arr) // 2
        left, lf = bisect(arr.slice(0, mid), fn, typ, offset, type_name)
        right, rf = bisect(arr.slice(mid), fn, typ, offset + mid, type_name)
        return left + right, lf + rf


def bisected(arr: pa.Array, fn: Callable[[pa.Array], pa.Array], typ: pa.DataType,
             type_name: str | None = None) -> tuple[pa.Array, list[Failure]]:
    """``bisect`` as one array: ``fn(arr)`` with NULL where a value failed, and the failures."""
    chunks, failures = bisect(arr, fn, typ, type_name=type_name)
    return (pa.concat_arrays(chunks) if len(chunks) != 1 else chunks[0]), failures


def text_to_bytes(arr: pa.Array, spelling: str) -> pa.Array:
    """Binary values written as text: ``hex`` is PostgreSQL's bytea ``\\x0102`` (CSV),
    ``base64`` lading's JSON. Raises ValueError on a value not so written."""
    text = arr.cast(pa.string())
    if spelling == "hex":
        if not pc.all(pc.fill_null(pc.starts_with(text, "\\x"), True)).as_py():
            raise ValueError("binary values are written as bytea hex such as \\x0102")
        return parse_hex(pc.utf8_slice_codeunits(text, 2))
    return parse_base64(text)


def _shown(value: str) -> str:
    """A value as a rejection shows it: at most 80 characters."""
    return value[:80] + "…" if len(value) > 80 else value


def _failures_where(arr: pa.Array, bad: pa.Array, reason: Callable[[str], str]) -> list[Failure]:
    """A failure for each value of ``arr`` where ``bad`` is true, ``reason`` saying why."""
    return [(i, reason(arr[i].as_py())) for i in np.flatnonzero(bad.to_numpy(zero_copy_only=False)).tolist()]


_CHAR = re.compile(r"(?:var)?char\((\d+)\)$", re.IGNORECASE)


def _char_limit(type_name: str) -> int | None:
    match = _CHAR.match(type_name.strip())
    return int(match.group(1)) if match else None


def fit_length(arr: pa.Array, limit: int, type_name: str) -> tuple[pa.Array, list[Failure]]:
    """A ``varchar(n)``/``char(n)`` column's values within ``n`` characters, as PostgreSQL (and
    Spark's write check) take them: a longer value whose excess is all spaces is cut to ``n``,
    any other is a failure (its row rejected, naming the column). Values that fit are kept."""
    lengths = pc.utf8_length(arr)
    over = pc.fill_null(pc.greater(lengths, limit), False)
    if not pc.any(over).as_py():
        return arr, []
    fits_trimmed = pc.less_equal(pc.utf8_length(pc.utf8_rtrim(arr, characters=" ")), limit)
    cut = pc.and_(over, fits_trimmed)
    bad = pc.and_(over, pc.invert(fits_trimmed))
    out = pc.if_else(cut, pc.utf8_slice_codeunits(arr, 0, limit), arr)
    failures = _failures_where(arr, bad, lambda v: f"{_shown(v)!r} is longer than {type_name} allows "
                                                   f"({len(v)} characters)")
    return pc.if_else(bad, pa.scalar(None, arr.type), out), failures


def canonical_uuid(arr: pa.Array) -> tuple[pa.Array, list[Failure]]:
    """UUIDs in PostgreSQL's output form (lower case, 8-4-4-4-12), from any form it reads
    (upper case, braces, hyphens or none), so one UUID is one key; any other text is a failure."""
    digits = pc.replace_substring(pc.replace_substring_regex(pc.utf8_lower(pc.utf8_trim_whitespace(arr)),
                                                             r"^\{(.*)\}$", r"\1"), "-", "")
    valid = pc.match_substring_regex(digits, r"^[0-9a-f]{32}$")
    bad = pc.fill_null(pc.and_(arr.is_valid(), pc.invert(valid)), False)
    parts = [pc.utf8_slice_codeunits(digits, a, b) for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))]
    out = pc.if_else(pc.fill_null(valid, False), pc.binary_join_element_wise(*parts, "-"), pa.scalar(None, arr.type))
    return out, _failures_where(arr, bad, lambda v: f"{_shown(v)!r} is not a valid uuid")


_JSON_STRING = r'"(?:[^"\\]|\\.)*"'
_ANY_KEYS = pj.ParseOptions(explicit_schema=pa.schema([]), unexpected_field_behavior="ignore")


def _json_lines_read(lines: pa.Array) -> int:
    """How many rows pyarrow's JSON reader finds in ``lines`` (objects, one per line), building
    no column (every key ignored: values of any type may follow each other); raises if invalid."""
    data = joined_bytes(lines)
    read = pj.ReadOptions(use_threads=False, block_size=max(1 << 20, min(len(data) + 1, 1 << 30)))
    return int(pj.read_json(pa.BufferReader(data), read_options=read, parse_options=_ANY_KEYS).num_rows)


def _checked_json(arr: pa.Array) -> pa.Array:
    """``arr`` if every value is one JSON text (RFC 8259, as PostgreSQL's ``json`` takes it), else raise.

    Each value is parsed by pyarrow's reader twice, as ``{"v":V}`` and as ``{"v":[V]}``: the
    first accepts ``V`` followed by more members (``1,"w":2``), the second a list (``1,2``),
    both only a single value. A raw line break becomes a tab first (whitespace outside a
    string, invalid inside one, as the line break is). NaN and Infinity, which the reader
    accepts, are refused outside strings."""
    values = pc.drop_null(arr)
    if not len(values):
        return arr
    one_line = pc.replace_substring_regex(values, "[\r\n]", "\t")
    try:
        ok = all(_json_lines_read(concat(head, one_line, tail)) == len(values)
                 for head, tail in (('{"v":', "}\n"), ('{"v":[', "]}\n")))
    except pa.ArrowInvalid:
        ok = False
    if not ok:
        raise pa.ArrowInvalid("not a JSON text")
    if pc.any(pc.match_substring_regex(values, "NaN|Infinity")).as_py():
        bare = pc.replace_substring_regex(values, _JSON_STRING, '""')
        if pc.any(pc.match_substring_regex(bare, "NaN|Infinity")).as_py():
            raise pa.ArrowInvalid("NaN and Infinity are no JSON numbers")
    return arr


def _as_json_text(arr: pa.Array) -> pa.Array:
    """A ``json`` column's text from what JSON lines gave: an object, array, number or boolean
    as its JSON text (lading's encoding); strings are kept, as the JSON text they hold."""
    if _is_text(arr.type) or _is_bytes(arr.type) or pa.types.is_null(arr.type):
        return arr
    return jsonl.value_json(arr, pa.field("value", arr.type))[0]


def cast_column(arr: pa.Array | pa.ChunkedArray, typ: pa.DataType,
                type_name: str | None = None, binary_text: str | None = None) -> tuple[pa.Array, list[Failure]]:
    """``arr`` as ``typ``, with NULL where a value failed, and the failures (index, reason).

    ``type_name`` is the column's type as users wrote it (``decimal(12,2)``), for messages.
    ``binary_text``: how the source spells binary values as text (``text_to_bytes``); a
    binary column is decoded from it, never stored as the text's own bytes. ``type_name``
    ``varchar(n)``/``char(n)`` holds lengths (``fit_length``), ``uuid`` one form
    (``canonical_uuid``), ``json`` one JSON text per value (``_checked_json``; a nested value
    becomes its JSON text).
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if type_name == "json":
        arr = _as_json_text(arr)
    if binary_text is not None and _is_bytes(typ) and (_is_text(arr.type) or _is_bytes(arr.type)):
        return bisected(arr, lambda a: text_to_bytes(a, binary_text).cast(typ), typ, type_name)
    failures: list[Failure] = []
    if _is_bytes(arr.type) and not _is_bytes(typ):
        arr, failures = bisected(arr, lambda a: a.cast(pa.string()), pa.string())
    out, more = bisected(arr, lambda a: convert(a, typ), typ, type_name)
    failures += more
    if type_name is not None and (limit := _char_limit(type_name)) is not None:
        out, more = fit_length(out, limit, type_name)
        failures += more
    elif type_name == "uuid":
        out, more = canonical_uuid(out)
        failures += more
    elif type_name == "json":
        out, more = bisected(out, _checked_json, typ, type_name)
        failures += more
    return out, failures
