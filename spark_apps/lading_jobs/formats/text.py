"""Vectorised text primitives shared by the CSV and JSON lines codecs.

Every function maps a whole Arrow array at once (pyarrow.compute kernels, or numpy
over the raw buffers for hex and base64): no per-row Python. Renderings are the
ones docs/formats.md documents; each ``render_*`` has a ``parse_*`` inverse.
"""

from __future__ import annotations

import base64
import binascii

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MICROS_PER_SECOND = 1_000_000


LINE_BLOCK = 1024 * 1024
"""Bytes compared at a time when looking for newlines (the comparison's temporary array)."""


def line_bounds(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive, before the newline) byte offsets of every line. The newlines are
    found a block of ``LINE_BLOCK`` bytes at a time: no array as long as the input."""
    buf = np.frombuffer(data, dtype=np.uint8)
    found = [np.flatnonzero(buf[at:at + LINE_BLOCK] == 10).astype(np.int64) + at
             for at in range(0, len(buf), LINE_BLOCK)]
    newlines = np.concatenate(found) if found else np.zeros(0, np.int64)
    starts = np.concatenate([np.zeros(1, np.int64), newlines + 1])
    ends = np.concatenate([newlines, np.array([len(data)], np.int64)])
    if len(data) and data.endswith(b"\n"):  # the empty "line" after the final newline is no line
        starts, ends = starts[:-1], ends[:-1]
    elif not data:
        starts, ends = starts[:0], ends[:0]
    return starts, ends


def concat(*parts: pa.Array | str) -> pa.Array:
    """Element-wise string concatenation; a null part makes the result null."""
    return pc.binary_join_element_wise(*parts, "")


def _offsets_and_data(arr: pa.Array) -> tuple[np.ndarray, bytes]:
    """(offsets relative to the first value, the values' bytes) of a binary/string array."""
    arr = pc.if_else(arr.is_null(), pa.scalar(b"" if pa.types.is_binary(arr.type) else "", arr.type), arr) \
        if arr.null_count else arr
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    dtype: type[np.signedinteger] = np.int64 if large else np.int32
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=dtype)[arr.offset: arr.offset + len(arr) + 1].astype(np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    data = bufs[2].to_pybytes()[start:end] if bufs[2] is not None and end > start else b""
    return offsets - start, data


def _string_array(offsets: np.ndarray, data: bytes, like: pa.Array) -> pa.Array:
    """A string array from offsets and bytes, null where ``like`` is null."""
    large = len(data) > 2**31 - 1
    out = pa.Array.from_buffers(pa.large_string() if large else pa.string(), len(like),
                                [None, pa.py_buffer(offsets.astype(np.int64 if large else np.int32)),
                                 pa.py_buffer(data)])
    return pc.if_else(like.is_valid(), out, pa.scalar(None, out.type)) if like.null_count else out


def render_hex(arr: pa.Array) -> pa.Array:
    """Binary → lowercase hex text (nulls stay null)."""
    offsets, data = _offsets_and_data(arr)
    hexed = binascii.hexlify(data)
    return _string_array(offsets * 2, hexed, arr)


def parse_hex(arr: pa.Array) -> pa.Array:
    """Hex text (even length, no prefix) → binary. A value of odd length is refused (ValueError):
    unhexlifying the concatenation would shift its digits into the next value."""
    offsets, data = _offsets_and_data(arr.cast(pa.string()))
    if np.any(np.diff(offsets) % 2):
        raise ValueError("a hex value has an odd number of digits")
    raw = binascii.unhexlify(data)
    out = pa.Array.from_buffers(pa.binary(), len(arr), [None, pa.py_buffer((offsets // 2).astype(np.int32)),
                                                        pa.py_buffer(raw)])
    return pc.if_else(arr.is_valid(), out, pa.scalar(None, pa.binary()))


def render_base64(arr: pa.Array) -> pa.Array:
    """Binary → standard base64 with padding. Each value is padded to 3-byte groups so
    one ``b64encode`` over the concatenation equals the per-value encodings."""
    offsets, data = _offsets_and_data(arr)
    lengths = np.diff(offsets)
    padded = (lengths + 2) // 3 * 3
    padded_starts = np.concatenate([[0], np.cumsum(padded)])
    buf = np.zeros(int(padded_starts[-1]), dtype=np.uint8)
    if len(data):
        src = np.frombuffer(data, dtype=np.uint8)
        row_of_byte = np.repeat(np.arange(len(lengths)), lengths)
        buf[np.arange(len(src)) - offsets[:-1][row_of_byte] + padded_starts[:-1][row_of_byte]] = src
    encoded = np.frombuffer(base64.b64encode(buf.tobytes()), dtype=np.uint8).copy()
    out_offsets = padded_starts * 4 // 3
    pad = padded - lengths
    ends = out_offsets[1:]
    encoded[ends[pad >= 1] - 1] = ord("=")
    encoded[ends[pad == 2] - 2] = ord("=")
    return _string_array(out_offsets, encoded.tobytes(), arr)


def parse_base64(arr: pa.Array) -> pa.Array:
    """Standard base64 (padded, each value a multiple of 4 characters) → binary."""
    offsets, data = _offsets_and_data(arr.cast(pa.string()))
    lengths = np.diff(offsets)
    if np.any(lengths % 4):
        raise ValueError("base64 values must be padded to a multiple of 4 characters")
    chars = np.frombuffer(data, dtype=np.uint8)
    is_pad = chars == ord("=")
    row_of_char = np.repeat(np.arange(len(lengths)), lengths)
    pads = np.bincount(row_of_char[is_pad], minlength=len(lengths)) if len(chars) else np.zeros(len(lengths), int)
    decoded = np.frombuffer(base64.b64decode(np.where(is_pad, ord("A"), chars).astype(np.uint8).tobytes()),
                            dtype=np.uint8)
    out_lengths = lengths // 4 * 3 - pads
    keep = np.ones(len(decoded), dtype=bool)
    dec_ends = np.cumsum(lengths // 4 * 3)
    for k in (1, 2):
        keep[dec_ends[pads >= k] - k] = False
    raw = decoded[keep].tobytes()
    new_offsets = np.concatenate([[0], np.cumsum(out_lengths)]).astype(np.int32)
    out = pa.Array.from_buffers(pa.binary(), len(arr), [None, pa.py_buffer(new_offsets), pa.py_buffer(raw)])
    return pc.if_else(arr.is_valid(), out, pa.scalar(None, pa.binary()))


_JSON_CONTROL = [chr(c) for c in range(0x20) if chr(c) not in "\n\r\t\b\f"]


def json_quote(arr: pa.Array) -> pa.Array:
    """Strings → JSON string literals (quoted, escaped); nulls stay null."""
    arr = arr.cast(pa.string())
    if pc.any(pc.match_substring_regex(arr, r'[\\"\x00-\x1f]')).as_py():
        for raw, esc in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"),
                         ("\b", "\\b"), ("\f", "\\f")):
            arr = pc.replace_substring(arr, raw, esc)
        if pc.any(pc.match_substring_regex(arr, r"[\x00-\x1f]")).as_py():
            for ch in _JSON_CONTROL:
                arr = pc.replace_substring(arr, ch, f"\\u{ord(ch):04x}")
    return concat('"', arr, '"')


def _groups(arr: pa.Array, pattern: str, what: str) -> dict[str, pa.Array]:
    """Named regex groups of every non-null value (nulls stay null); a mismatch names the value."""
    text = arr.cast(pa.string())
    ok = pc.match_substring_regex(text, pattern)
    if not pc.all(pc.fill_null(ok, True)).as_py():
        first = pc.filter(text, pc.invert(pc.fill_null(ok, True)))[0].as_py()
        raise ValueError(f"{first!r} is not {what}")
    parts = pc.extract_regex(text, pattern)
    return dict(zip([f.name for f in parts.type], parts.flatten(), strict=True))


def _two(values: pa.Array) -> pa.Array:
    return pc.utf8_lpad(values.cast(pa.string()), 2, "0")


def render_daytime_pg(arr: pa.Array) -> pa.Array:
    """duration[us] → ``[-]H:MM:SS.ffffff`` (hours unbounded; PostgreSQL interval input)."""
    us = arr.cast(pa.int64())
    mag = pc.abs(us)
    secs = pc.divide(mag, MICROS_PER_SECOND)
    frac = pc.subtract(mag, pc.multiply(secs, MICROS_PER_SECOND))
    hours = pc.divide(secs, 3600)
    minutes = pc.divide(pc.subtract(secs, pc.multiply(hours, 3600)), 60)
    seconds = pc.subtract(secs, pc.add(pc.multiply(hours, 3600), pc.multiply(minutes, 60)))
    sign = pc.if_else(pc.less(us, 0), "-", "")
    return concat(sign, hours.cast(pa.string()), ":", _two(minutes), ":", _two(seconds), ".",
                  pc.utf8_lpad(frac.cast(pa.string()), 6, "0"))


def parse_daytime_pg(arr: pa.Array) -> pa.Array:
    """Inverse of :func:`render_daytime_pg` → duration[us]."""
    g = _groups(arr, r"^(?P<sign>-?)(?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d(?:\.\d{1,6})?)$", "an interval [-]H:MM:SS.ffffff")
    return _micros(g["sign"], g["s"], g["h"], g["m"]).cast(pa.duration("us"))


def _micros(sign: pa.Array | None, s: pa.Array, h: pa.Array | None = None, m: pa.Array | None = None) -> pa.Array:
    """int64 microseconds from decimal-seconds text plus optional hour and minute text."""
    total = pc.multiply(s.cast(pa.decimal128(18, 6)), 1_000_000).cast(pa.int64())
    if h is not None and m is not None:
        whole = pc.add(pc.multiply(h.cast(pa.int64()), 3600), pc.multiply(m.cast(pa.int64()), 60))
        total = pc.add(pc.multiply(whole, MICROS_PER_SECOND), total)
    if sign is not None:
        total = pc.if_else(pc.equal(sign, "-"), pc.negate(total), total)
    return total


def render_daytime_iso(arr: pa.Array) -> pa.Array:
    """duration[us] → ISO 8601 ``[-]PT<seconds>.<ffffff>S``."""
    us = arr.cast(pa.int64())
    mag = pc.abs(us)
    secs = pc.divide(mag, MICROS_PER_SECOND)
    frac = pc.subtract(mag, pc.multiply(secs, MICROS_PER_SECOND))
    sign = pc.if_else(pc.less(us, 0), "-", "")
    return concat(sign, "PT", secs.cast(pa.string()), ".", pc.utf8_lpad(frac.cast(pa.string()), 6, "0"), "S")


def parse_daytime_iso(arr: pa.Array) -> pa.Array:
    g = _groups(arr, r"^(?P<sign>-?)PT(?P<s>\d+(?:\.\d{1,6})?)S$", "an ISO 8601 duration [-]PT<seconds>S")
    return _micros(g["sign"], g["s"]).cast(pa.duration("us"))


def render_months_pg(arr: pa.Array) -> pa.Array:
    """int32 months → ``N months`` (PostgreSQL and DuckDB interval input)."""
    return concat(arr.cast(pa.string()), " months")


def parse_months_pg(arr: pa.Array) -> pa.Array:
    return _groups(arr, r"^(?P<n>-?\d+) months?$", "an interval 'N months'")["n"].cast(pa.int32())


def render_months_iso(arr: pa.Array) -> pa.Array:
    """int32 months → ISO 8601 ``[-]P<n>M``."""
    sign = pc.if_else(pc.less(arr, 0), "-", "")
    return concat(sign, "P", pc.abs(arr).cast(pa.string()), "M")


def parse_months_iso(arr: pa.Array) -> pa.Array:
    g = _groups(arr, r"^(?P<sign>-?)P(?P<n>\d+)M$", "an ISO 8601 duration [-]P<months>M")
    n = g["n"].cast(pa.int32())
    return pc.if_else(pc.equal(g["sign"], "-"), pc.negate(n), n)


def render_time(arr: pa.Array) -> pa.Array:
    """time64 → ``HH:MM:SS.ffffff``."""
    return arr.cast(pa.time64("us")).cast(pa.string())


def parse_time(arr: pa.Array) -> pa.Array:
    g = _groups(arr, r"^(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d(?:\.\d{1,6})?)$", "a time HH:MM:SS.ffffff")
    return _micros(None, g["s"], g["h"], g["m"]).cast(pa.time64("us"))


_SECOND_OF_DAY = np.frombuffer("".join(f"{h:02d}:{m:02d}:{s:02d}" for h in range(24) for m in range(60)
                                       for s in range(60)).encode(), np.uint8).copy().view("<u8")
_TWO_DIGITS = np.frombuffer("".join(f"{i:02d}" for i in range(100)).encode(), np.uint8).copy().view("<u2")
_MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND


def render_timestamp(arr: pa.Array, sep: str = " ", prefix: str = "", suffix: str = "") -> pa.Array:
    """``prefix`` + ``YYYY-MM-DD`` + ``sep`` + ``HH:MM:SS.ffffff`` + ``suffix`` of each value of
    a ``timestamp("us")`` array (its wall-clock digits; null stays null): the text of Arrow's
    cast to string, at about half its cost.

    Every value is the same width, so the text is one fixed-width record per value, filled
    field by field from tables: the dates of the array's range of days (Arrow's own date
    cast, once per day, not per value), the 86,400 seconds of a day, and two-digit pairs
    for the microseconds. A range of days wider than the array (or a year Arrow does not
    write in four digits) takes Arrow's cast instead."""
    n = len(arr)
    if n == arr.null_count:
        return _timestamp_cast(arr, sep, prefix, suffix)
    micros = arr.cast(pa.int64())
    if arr.null_count:  # a null's slot takes a value of the array's (its text is not shown)
        micros = pc.fill_null(micros, pc.min(micros))
    values = micros.to_numpy(zero_copy_only=False)
    days = values // _MICROS_PER_DAY
    first, last = int(days.min()), int(days.max())
    width = len(prefix) + 26 + len(suffix)
    if last - first > max(n, 4096) or n * width >= 2**31:
        return _timestamp_cast(arr, sep, prefix, suffix)
    dates = pa.array(np.arange(first, last + 1, dtype=np.int32), pa.int32()).cast(pa.date32()).cast(pa.string())
    date_offsets = np.frombuffer(dates.buffers()[1], np.int32)[:len(dates) + 1]
    if not (np.diff(date_offsets) == 10).all():
        return _timestamp_cast(arr, sep, prefix, suffix)
    date_bytes = np.frombuffer(dates.buffers()[2], np.uint8)[:10 * len(dates)].reshape(-1, 10)
    fields = ([("prefix", f"S{len(prefix)}")] if prefix else []) + [
        ("date8", "<u8"), ("date2", "<u2"), ("sep", "S1"), ("clock", "<u8"), ("dot", "S1"),
        ("micro1", "<u2"), ("micro2", "<u2"), ("micro3", "<u2")] + ([("suffix", f"S{len(suffix)}")] if suffix else [])
    out = np.empty(n, np.dtype(fields))
    day = days - first
    out["date8"] = date_bytes[:, :8].copy().view("<u8").ravel()[day]
    out["date2"] = date_bytes[:, 8:].copy().view("<u2").ravel()[day]
    rest = values - days * _MICROS_PER_DAY
    second = rest // MICROS_PER_SECOND
    out["clock"] = _SECOND_OF_DAY[second]
    micro = rest - second * MICROS_PER_SECOND
    out["micro1"] = _TWO_DIGITS[micro // 10_000]
    out["micro2"] = _TWO_DIGITS[micro // 100 % 100]
    out["micro3"] = _TWO_DIGITS[micro % 100]
    out["sep"], out["dot"] = sep.encode(), b"."
    if prefix:
        out["prefix"] = prefix.encode()
    if suffix:
        out["suffix"] = suffix.encode()
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    validity = pc.is_valid(arr).buffers()[1] if arr.null_count else None
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out), validity, arr.null_count)


def _timestamp_cast(arr: pa.Array, sep: str, prefix: str, suffix: str) -> pa.Array:
    text = arr.cast(pa.string())
    if sep != " ":
        text = pc.replace_substring(text, " ", sep, max_replacements=1)
    return concat(prefix, text, suffix) if prefix or suffix else text


def render_decimal(arr: pa.Array) -> pa.Array:
    """Decimals in plain digits with every fraction digit of the scale (``-12.340000``,
    ``0.0000000000``), as PostgreSQL writes ``numeric``: never an exponent.

    For the decimal128 arrays whose unscaled values all fit in 64 bits (any precision or
    scale ≥ 0: a ``decimal(38,10)`` column of everyday values does), at about half the cost
    of Arrow's decimal cast: the unscaled magnitude's integer text, padded to one digit more
    than the scale, a point inserted ``scale`` digits from its end, a ``-`` inserted before
    the negative ones. Other decimals of a positive scale take the same steps over the text
    of the unscaled value (``_decimal_plain``; Arrow's cast writes ``1E-7``, ``0E-10`` from
    scale 7 on); the rest take Arrow's cast."""
    t = arr.type
    n = len(arr)
    unscaled = _unscaled_int64(arr)
    if unscaled is None:
        if (pa.types.is_decimal128(t) or pa.types.is_decimal256(t)) and t.scale > 6 and n > arr.null_count:
            return _decimal_plain(arr)
        return _decimal_cast(arr)
    negative = unscaled < 0
    digits = pa.array(np.abs(unscaled), mask=np.asarray(pc.is_null(arr)) if arr.null_count else None).cast(pa.string())
    if t.scale:
        digits = pc.binary_replace_slice(pc.ascii_lpad(digits, t.scale + 1, "0"), -t.scale, -t.scale, ".")
    if negative.any():
        digits = pc.if_else(pa.array(negative), pc.binary_replace_slice(digits, 0, 0, "-"), digits)
    return digits


def _unscaled_int64(arr: pa.Array) -> np.ndarray | None:
    """The unscaled values of a decimal128 array of scale ≥ 0 as int64 (a null's slot: 0), or
    None when one does not fit (a decimal128 is 16 bytes of little-endian two's complement: it
    fits when its high word is its low word's sign; -2**63 is left out, its magnitude does not)."""
    t = arr.type
    n = len(arr)
    if not pa.types.is_decimal128(t) or t.scale < 0 or n == arr.null_count:
        return None
    words = np.frombuffer(arr.buffers()[1], np.int64)[2 * arr.offset: 2 * (arr.offset + n)]
    low, high = words[0::2], words[1::2]
    if arr.null_count:
        valid = np.asarray(pc.is_valid(arr))
        low, high = np.where(valid, low, 0), np.where(valid, high, 0)
    if t.precision > 18 and not ((high == (low >> 63)).all() and (low != np.iinfo(np.int64).min).all()):
        return None
    return low


def _decimal_cast(arr: pa.Array) -> pa.Array:
    return arr.cast(pa.string())


def _decimal_plain(arr: pa.Array) -> pa.Array:
    """Any decimal of a positive scale in plain digits: the unscaled value (the same bytes
    seen with scale 0, which Arrow writes without an exponent) with the point put back."""
    t = arr.type
    whole = (pa.decimal128 if pa.types.is_decimal128(t) else pa.decimal256)(t.precision, 0)
    text = arr.view(whole).cast(pa.string())
    negative = pc.starts_with(text, "-")
    digits = pc.ascii_lpad(pc.utf8_ltrim(text, characters="-"), t.scale + 1, "0")
    digits = pc.binary_replace_slice(digits, -t.scale, -t.scale, ".")
    return pc.if_else(negative, concat("-", digits), digits)


_PLAIN_WHOLE = 1e10
"""Whole doubles below this magnitude Arrow writes in plain digits (``9999999999``); from it on
with an exponent (``1e+10``). tests/lading_jobs/formats/test_render_oracle.py pins it."""


def render_float(arr: pa.Array, nan: str, inf: str, neg_inf: str) -> pa.Array:
    """Floats → shortest round-trip text, always spelled as a float: a whole value Arrow writes
    as an integer (``100``, ``-0``) gets ``.0`` (``100.0``, ``-0.0``), so JSON readers read a
    double (and -0.0 keeps its sign) and CSV readers infer one; ``1e+16`` already is one.
    NaN and ±infinity as the given words.

    The values are classified with numpy over the data buffer. A double column whose values
    are (nearly) all whole and under ``_PLAIN_WHOLE`` is written from their int64 text (Arrow's
    integer cast costs a third of its float one); the rest of its values (NaN, ±infinity,
    -0.0, fractions, large ones) are rendered apart and put in place. Other columns take
    Arrow's float cast, ``.0`` inserted where the text is an integer (found by scanning its
    bytes for ``e``)."""
    n = len(arr)
    if n == arr.null_count:
        return pa.nulls(n, pa.string())
    x, valid, small, rest = _small_whole(arr)
    others = int(np.count_nonzero(rest))
    if pa.types.is_float64(arr.type) and others <= n // 8:
        ints = pa.array(np.where(small, x, 0).astype(np.int64), pa.int64(), mask=~valid if arr.null_count else None)
        text = _append(ints.cast(pa.string()), ".0")
        if others:
            text = pc.replace_with_mask(text, pa.array(rest), _others_text(arr, rest, nan, inf, neg_inf))
        return text
    return _float_text(arr, nan, inf, neg_inf)


def _others_text(arr: pa.Array, rest: np.ndarray, nan: str, inf: str, neg_inf: str) -> pa.Array:
    return _float_text(arr.take(pa.array(np.flatnonzero(rest))), nan, inf, neg_inf)


def _small_whole(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A float array's values, where they are valid, where they are whole and under
    ``_PLAIN_WHOLE`` (not -0.0: written from their integer text), and the other valid ones."""
    n = len(arr)
    x = np.frombuffer(arr.buffers()[1], np.dtype(arr.type.to_pandas_dtype()))[arr.offset: arr.offset + n]
    valid = np.asarray(pc.is_valid(arr)) if arr.null_count else np.ones(n, bool)
    with np.errstate(invalid="ignore"):
        whole = np.isfinite(x) & (x == np.floor(x)) & valid
        small = whole & (np.abs(x) < _PLAIN_WHOLE) & ~((x == 0) & np.signbit(x))
    return x, valid, small, valid & ~small


def float_parts(arr: pa.Array, nan: str, inf: str, neg_inf: str) -> tuple[pa.Array | None, pa.Array | None]:
    """A float array classified once, as :func:`render_float` classifies it. For a float64 array
    whose valid values are (nearly) all whole and under ``_PLAIN_WHOLE``: ``(the text of the
    others alone, in order, None)`` (the C line writer, ``formats/_csvlines.c``, writes the whole
    ones itself as their integer and ``.0``, and takes these in turn). For any other array:
    ``(None, render_float's text of it all)``."""
    if not pa.types.is_float64(arr.type) or len(arr) == arr.null_count:
        return None, render_float(arr, nan, inf, neg_inf)
    _, _, _, rest = _small_whole(arr)
    others = int(np.count_nonzero(rest))
    if others > len(arr) // 8:
        return None, _float_text(arr, nan, inf, neg_inf)
    return (_others_text(arr, rest, nan, inf, neg_inf) if others else pa.array([], pa.string())), None


def _append(values: pa.Array, suffix: str) -> pa.Array:
    """``suffix`` after every value (nulls stay null): a slice replaced past the end is appended."""
    return pc.binary_replace_slice(values, 2**31 - 1, 2**31 - 1, suffix)


def _float_text(arr: pa.Array, nan: str, inf: str, neg_inf: str) -> pa.Array:
    """:func:`render_float` over Arrow's float cast."""
    n = len(arr)
    text = arr.cast(pa.string())
    x = np.frombuffer(arr.buffers()[1], np.dtype(arr.type.to_pandas_dtype()))[arr.offset: arr.offset + n]
    valid = np.asarray(pc.is_valid(arr)) if arr.null_count else np.ones(n, bool)
    with np.errstate(invalid="ignore"):
        whole = np.isfinite(x) & (x == np.floor(x)) & valid
    if whole.any():
        offsets = np.frombuffer(text.buffers()[1], np.int32)[text.offset: text.offset + n + 1]
        data = np.frombuffer(text.buffers()[2], np.uint8)[offsets[0]: offsets[-1]]
        exponent = np.zeros(n, bool)
        exponent[np.searchsorted(offsets, np.flatnonzero(data == ord("e")) + offsets[0], "right") - 1] = True
        integral = whole & ~exponent
        if integral.all():
            text = _append(text, ".0")
        elif integral.any():
            text = pc.if_else(pa.array(integral), _append(text, ".0"), text)
    nans, infs = np.isnan(x) & valid, np.isinf(x) & valid
    if not (nans.any() or infs.any()):
        return text
    text = pc.if_else(pa.array(nans), nan, text)
    if infs.any():
        text = pc.if_else(pa.array(infs & (x > 0)), inf, pc.if_else(pa.array(infs), neg_inf, text))
    return text


def render_bool(arr: pa.Array) -> pa.Array:
    return pc.if_else(arr, "true", "false")


def parse_bool(arr: pa.Array) -> pa.Array:
    low = pc.utf8_lower(pc.utf8_trim_whitespace(arr.cast(pa.string())))
    true = pc.is_in(low, pa.array(["t", "true", "1", "yes", "y", "on"]))
    false = pc.is_in(low, pa.array(["f", "false", "0", "no", "n", "off"]))
    bad = pc.and_(pc.is_valid(low), pc.invert(pc.or_(true, false)))
    if pc.any(bad).as_py():
        first = pc.filter(arr, bad)[0].as_py()
        raise ValueError(f"{first!r} is not a boolean (accepted: true/false, t/f, 1/0, yes/no, on/off)")
    return pc.if_else(pc.is_valid(low), true, pa.scalar(None, pa.bool_()))


def joined_buffer(arr: pa.Array) -> pa.Buffer:
    """The concatenated bytes of a string array without nulls, as a zero-copy slice of its
    data buffer (immutable; holds the array's memory alive, copies nothing)."""
    if arr.null_count:
        return pa.py_buffer(_offsets_and_data(arr)[1])
    return value_bytes(arr)


def joined_bytes(arr: pa.Array) -> bytes:
    """The concatenated bytes of a string array without nulls (one copy)."""
    if arr.null_count:
        return _offsets_and_data(arr)[1]
    return value_bytes(arr).to_pybytes()


def value_bytes(arr: pa.Array) -> pa.Buffer:
    """The bytes spanned by ``arr``'s values (slicing accounted for), zero-copy. Null slots
    normally span nothing, but Arrow does not forbid them bytes: use this to prove a byte
    is *absent*, not to read values."""
    bufs = arr.buffers()
    if len(arr) == 0 or bufs[2] is None:
        return pa.py_buffer(b"")
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    offsets = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)
    start, end = int(offsets[arr.offset]), int(offsets[arr.offset + len(arr)])
    return bufs[2].slice(start, end - start)


def list_parts(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(offsets from 0, flattened child values) of a list or map array, slicing and null
    lists accounted for (``flatten`` drops values under null lists)."""
    lengths = np.diff(arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64))
    if arr.null_count:
        lengths[arr.is_null().to_numpy(zero_copy_only=False)] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    if pa.types.is_map(arr.type):
        t = arr.type
        entries = pa.field("entries", pa.struct([t.key_field, t.item_field]), nullable=False)
        arr = pa.Array.from_buffers(pa.list_(entries), len(arr), arr.buffers()[:2], arr.null_count,
                                    arr.offset, children=[arr.values])
    return offsets, arr.flatten()


def join_lists(offsets: np.ndarray, items: pa.Array, like: pa.Array, sep: str, open_: str, close: str) -> pa.Array:
    """Per list: ``open_ + sep.join(items) + close``; null where ``like`` is null."""
    lists = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), items)
    joined = concat(open_, pc.binary_join(lists, sep), close)
    return pc.if_else(like.is_valid(), joined, pa.scalar(None, pa.string())) if like.null_count else joined
