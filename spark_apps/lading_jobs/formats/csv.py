"""CSV as PostgreSQL ``COPY ... (FORMAT csv)`` writes and reads it.

Dialect: delimiter ``,``, quote ``"``, escape ``"`` (all configurable), NULL as an
unquoted empty field (or ``options.null``), the empty string as ``""``, a value
quoted when it holds the delimiter, quote, escape, CR or LF, when it equals the
null string, when it is ``\\.`` (PostgreSQL's end-of-data marker), or when its
column is in ``forceQuote``; ``\\n`` ends every row. Values render so that
PostgreSQL loads them back into the same values (docs/formats.md lists each type):
booleans ``true``/``false``, exact decimals, ``YYYY-MM-DD HH:MM:SS.ffffff`` with
``+00`` for instants, bytea hex ``\\x…``, intervals ``[-]H:MM:SS.ffffff`` and
``N months``, arrays/structs/maps as JSON text.

Encoding is column-at-a-time with pyarrow.compute: each column becomes a string
array of field texts, quoted where needed. When no value of the batch was quoted,
Arrow's C++ CSV writer (no quoting) makes the lines in one pass; otherwise, or when
that writer refuses a text, one element-wise join (the delimiter as separator) makes
them, whose Arrow buffer is the output. Both give the same bytes.
Whether a column needs any per-value quoting test is first decided by scanning
its bytes for the characters that would call for it (most columns hold none).
Timestamps are formatted as naive UTC plus a literal offset (pyarrow's
time-zone-aware formatting is the slow path DESIGN.md measured).
docs/benchmarks.md ("Unload") has the profile these choices come from.

Where the C module ``_csvlines`` is built (scripts/build-native; the image and bootstrap build
it), the lines are written by it in one pass over the columns' own buffers instead:
integers, dates, timestamps, decimal128, booleans and the whole values of mostly-whole doubles
rendered there, strings copied and quoted there, every other column rendered to text here
first (``value_text``) and then copied like a string. The same bytes either way
(tests/lading_jobs/formats/test_csv_native.py compares
the two on every type and dialect); this module decides, per column, what the C code may
take (value ranges, dialect), and the C code checks every buffer against the rows.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from lading_jobs.formats import jsonl, text
from lading_jobs.formats.types import LADING_TYPE
from lading_spec.formats import CsvOptions

try:  # the one-pass line writer (scripts/build-native); without it the pure-Arrow encoder below
    from lading_jobs.formats import _csvlines
except ImportError:  # pragma: no cover - the image and scripts/bootstrap build it
    _csvlines = None  # type: ignore[assignment]

# Characters any non-string rendering can contain; if the dialect's special
# characters avoid them, such columns never need a quoting check.
_PLAIN_ALPHABET = set("0123456789abcdefxtrulsNIny+-.: \\mo")
# Rows per chunk of Arrow's CSV writer (its default, 1,024, measured ~5 % more CPU).
_WRITER_ROWS = 16384


def _ext(field: pa.Field) -> str:
    return (field.metadata or {}).get(LADING_TYPE, b"").decode()


def _is_ym(field: pa.Field) -> bool:
    return _ext(field).startswith(("interval year", "interval month"))


def _nested(t: pa.DataType) -> bool:
    return pa.types.is_nested(t)


def value_text(arr: pa.Array, field: pa.Field) -> pa.Array:
    """The PostgreSQL-loadable text of each value (null where the value is null)."""
    t = arr.type
    if _is_ym(field):
        return text.render_months_pg(arr)
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string())
    if pa.types.is_boolean(t):
        return text.render_bool(arr)
    if pa.types.is_floating(t):
        return text.render_float(arr, "NaN", "Infinity", "-Infinity")
    if pa.types.is_decimal(t):
        return text.render_decimal(arr)
    if pa.types.is_integer(t) or pa.types.is_date(t):
        return arr.cast(pa.string())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return arr.cast(pa.string())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return text.concat("\\x", text.render_hex(arr.cast(pa.binary())))
    if pa.types.is_timestamp(t):
        naive = arr.cast(pa.timestamp(t.unit)).cast(pa.timestamp("us"))
        return text.render_timestamp(naive, suffix="+00" if t.tz is not None else "")
    if pa.types.is_time(t):
        return text.render_time(arr)
    if pa.types.is_duration(t):
        return text.render_daytime_pg(arr.cast(pa.duration("us")))
    if _nested(t):
        return jsonl.value_json(arr, field)[0]
    raise TypeError(f"column {field.name}: Arrow type {t} has no CSV encoding")


# _csvlines's column kinds and quoting modes (see its source)
_STRING, _INTEGER, _DATE, _TIMESTAMP, _DECIMAL, _BOOLEAN, _FLOAT = range(7)
_CHECK, _NEVER, _FORCE = range(3)
# the most bytes one value of each fixed-width kind renders to; timestamps add their suffix
_WIDTH = {_INTEGER: 20, _DATE: 10, _TIMESTAMP: 26, _DECIMAL: 42, _BOOLEAN: 5, _FLOAT: 14}
_FIRST_DAY, _LAST_DAY = -719_162, 2_932_896  # 0001-01-01 and 9999-12-31: _csvlines writes four-digit years
_MICROS_PER_DAY = 86_400_000_000


def _in_years(values: pa.Array, per_day: int) -> bool:
    """Whether every valid value of an int32/int64 view of dates or timestamps (``per_day``
    units a day) falls in years 1..9999."""
    low, high = pc.min_max(values).values()
    return low.as_py() is None or (_FIRST_DAY * per_day <= low.as_py() and high.as_py() < (_LAST_DAY + 1) * per_day)


def _native_kind(arr: pa.Array, field: pa.Field) -> tuple[int, pa.Array, int, int, bytes | pa.Array] | pa.Array | None:
    """What ``_csvlines`` renders of this column itself: (kind, the array it reads, p1, p2,
    text: a timestamp's suffix, or for doubles of mostly small whole values the text of the
    others); for other doubles their text, rendered whole (``text.float_parts``: classified
    once); ``None`` when ``value_text`` must render it first (other floats, binary, times,
    intervals, nested values, decimals of a negative scale or 256 bits, years outside 1..9999)."""
    t = arr.type
    if _is_ym(field):
        return None
    if pa.types.is_float64(t):
        rest, whole = text.float_parts(arr, "NaN", "Infinity", "-Infinity")
        return whole if rest is None else (_FLOAT, arr, len(rest), 0, rest)
    if pa.types.is_integer(t):
        return _INTEGER, arr, t.bit_width // 8, int(pa.types.is_signed_integer(t)), b""
    if pa.types.is_boolean(t):
        return _BOOLEAN, arr, 0, 0, b""
    if pa.types.is_date32(t):
        days = arr.view(pa.int32())
        return (_DATE, days, 0, 0, b"") if _in_years(days, 1) else None
    if pa.types.is_timestamp(t):
        naive = arr.cast(pa.timestamp(t.unit)).cast(pa.timestamp("us")) if (t.unit, t.tz) != ("us", None) else arr
        micros = naive.view(pa.int64())
        if not _in_years(micros, _MICROS_PER_DAY):
            return None
        return _TIMESTAMP, micros, 0, 0, b"+00" if t.tz is not None else b""
    if pa.types.is_decimal128(t) and t.scale >= 0:
        return _DECIMAL, arr, t.scale, 0, b""
    return None


def _plain(field: pa.Field) -> bool:
    t = field.type
    return not (pa.types.is_string(t) or pa.types.is_large_string(t) or _nested(t))


def _contains(data: bytes, needle: bytes) -> bool:
    """``needle in data``, first testing its first byte alone (memchr speed; a longer
    needle takes CPython's general search, several times slower on most data)."""
    return needle[:1] in data and needle in data


class CsvEncoder:
    """Encodes record batches of ``schema`` as PostgreSQL-compatible CSV bytes."""

    def __init__(self, schema: pa.Schema, options: CsvOptions | None = None) -> None:
        self.schema = schema
        self.options = o = options or CsvOptions()
        if o.force_quote == "*":
            self.forced = set(schema.names)
        else:
            unknown = [c for c in o.force_quote if c not in schema.names]
            if unknown:
                raise ValueError(f"to.options.forceQuote: no column {unknown[0]!r}; columns: {', '.join(schema.names)}")
            self.forced = set(o.force_quote)
        specials = {o.delimiter, o.quote, o.escape, "\r", "\n"}
        self._special_re = "[" + "".join(re.escape(c) for c in sorted(specials)) + "]"
        self._special_bytes = [c.encode() for c in sorted(specials)]
        # one byte each (ASCII): the rows holding one are found from the column's bytes (``_rows_holding``)
        self._special_codes = [ord(c) for c in sorted(specials)] if all(ord(c) < 128 for c in specials) else None
        self._null_bytes = o.null.encode()
        self._writer_refused = False  # Arrow's CSV writer refused a batch of this encoder's data
        self._plain_safe = not (specials & _PLAIN_ALPHABET) and (o.null == "" or not set(o.null) <= _PLAIN_ALPHABET)
        # _csvlines writes the lines when its module is built and the dialect's characters are one ASCII byte each
        self._native = _csvlines is not None and all(len(c) == 1 and ord(c) < 128 for c in (o.delimiter, o.quote, o.escape))
        self._specials = "".join(sorted(specials)).encode()

    def _native_lines(self, batch: pa.RecordBatch) -> pa.Buffer | None:
        """The batch's lines from ``_csvlines``: each column handed over as its buffers, rendered
        there when it can be (``_native_kind``), else as the text ``value_text`` makes of it. ``None``
        when a column's buffers do not suit it (a null count without a validity bitmap)."""
        assert _csvlines is not None
        o, rows = self.options, batch.num_rows
        null = self._null_bytes
        columns, bound = [], rows * (batch.num_columns + 1)  # delimiters and newlines
        for i, field in enumerate(self.schema):
            arr = batch.column(i)
            forced = field.name in self.forced
            # rendered in C only where no value needs quotes checked (a dialect whose characters no
            # number, date or time is spelled with) or every value is quoted anyway
            native = _native_kind(arr, field) if forced or self._plain_safe else None
            extra = None  # a float column's rendered values: their offsets (``suffix``: their bytes)
            if isinstance(native, pa.Array):  # a double column render_float wrote whole
                kind, p1, p2, suffix = _STRING, 0, 0, b""
                arr, mode = native, _FORCE if forced else _NEVER
                bound += 2 * text.value_bytes(arr).size + rows * (2 + len(null))
            elif native is not None:
                kind, arr, p1, p2, text_of = native
                mode = _FORCE if forced else _NEVER
                if isinstance(text_of, pa.Array):  # read from offset 0 by the C code
                    rendered = text_of if text_of.offset == 0 else pa.concat_arrays([text_of])
                    extra, suffix = rendered.buffers()[1], rendered.buffers()[2] or b""
                    bound += rows * (_WIDTH[kind] + 2 + len(null)) + len(suffix)
                else:
                    suffix = text_of
                    bound += rows * (_WIDTH[kind] + len(suffix) + 2 + len(null))
            else:
                kind, p1, p2, suffix = _STRING, int(not _plain(field)), 0, b""
                arr = arr if pa.types.is_string(arr.type) else value_text(arr, field)
                if not pa.types.is_string(arr.type):
                    arr = arr.cast(pa.string())
                mode = _FORCE if forced else _NEVER if _plain(field) and self._plain_safe else _CHECK
                bound += 2 * text.value_bytes(arr).size + rows * (2 + len(null))
            buffers = arr.buffers()
            if arr.null_count and buffers[0] is None:
                return None
            validity = buffers[0] if arr.null_count else None
            data = (buffers[2] if buffers[2] is not None else b"") if kind == _STRING else extra
            columns.append((kind, mode, validity, arr.offset, buffers[1], data, p1, p2, suffix))
        out = pa.allocate_buffer(bound)
        written = _csvlines.encode(out, rows, ord(o.delimiter), null, ord(o.quote), ord(o.escape), self._specials,
                                   columns)
        return out.slice(0, written) if written >= 0 else None

    def _quote(self, values: pa.Array) -> pa.Array:
        o = self.options
        if o.escape != o.quote:
            values = pc.replace_substring(values, o.escape, o.escape + o.escape)
        values = pc.replace_substring(values, o.quote, o.escape + o.quote)
        return text.concat(o.quote, values, o.quote)

    def _quote_where(self, values: pa.Array, needs: pa.Array, count: int) -> pa.Array:
        """``values`` with the ``count`` values where ``needs`` is true quoted: only those are
        escaped and quoted (then put in place) when they are a minority, as in most text columns."""
        if 2 * count > len(values):
            return pc.if_else(needs, self._quote(values), values)
        needs = pc.fill_null(needs, False)  # null only where the value is: it stays null
        return pc.replace_with_mask(values, needs, self._quote(pc.filter(values, needs)))

    def _rows_holding(self, values: pa.Array, data: bytes) -> pa.Array:
        """Where a value holds a special character (one ASCII byte each): the positions of those
        bytes in the column's data (``data``: its values' bytes), mapped to rows by the offsets;
        several times cheaper than a regular expression over every value. Null slots are
        false (they may span bytes, but are never quoted)."""
        n = len(values)
        offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset: values.offset + n + 1]
        buf = np.frombuffer(data, np.uint8)
        codes = self._special_codes
        assert codes is not None
        hit = buf == codes[0]
        for code in codes[1:]:
            hit |= buf == code
        rows = np.zeros(n, bool)
        rows[np.searchsorted(offsets, np.flatnonzero(hit) + offsets[0], "right") - 1] = True
        if values.null_count:
            rows &= np.asarray(pc.is_valid(values))
        return pa.array(rows)

    def _needs_quotes(self, values: pa.Array, field: pa.Field) -> pa.Array | None:
        """Where a value must be quoted: it holds a special character, equals the null
        string, or (text columns) is ``\\.``; ``None`` when it is nowhere.

        Each per-value test runs only if the column's bytes, scanned at memchr speed,
        contain what it looks for; most columns hold no special character at all.
        """
        o = self.options
        data = text.value_bytes(values).to_pybytes()
        checks = []
        if any(c in data for c in self._special_bytes):
            bytewise = self._special_codes is not None and pa.types.is_string(values.type)
            checks.append(self._rows_holding(values, data) if bytewise
                          else pc.match_substring_regex(values, self._special_re))
        if o.null == "" or _contains(data, self._null_bytes):
            checks.append(pc.equal(values, o.null))
        if not _plain(field) and _contains(data, b"\\."):
            checks.append(pc.equal(values, "\\."))
        if not checks:
            return None
        needs = checks[0]
        for more in checks[1:]:
            needs = pc.or_(needs, more)
        return needs

    def _field(self, values: pa.Array, field: pa.Field, forced: bool) -> tuple[pa.Array, bool]:
        """Quote where the dialect needs it; NULL becomes the null string, unquoted.
        Also whether any value was quoted."""
        if forced:
            needs: pa.Array | None = pc.is_valid(values)
        elif _plain(field) and self._plain_safe:
            needs = None
        else:
            needs = self._needs_quotes(values, field)
        count = (pc.sum(needs).as_py() or 0) if needs is not None else 0
        quoted = count > 0
        if quoted:
            assert needs is not None
            values = self._quote_where(values, needs, count)
        return (self._nulls_as_text(values) if values.null_count else values), quoted

    def _nulls_as_text(self, values: pa.Array) -> pa.Array:
        """``values`` with each NULL as the null string. The default null string is empty, and a
        null slot normally spans no bytes: then the array without its validity bitmap already
        reads so (no copy of the text, which ``fill_null`` makes)."""
        if self.options.null == "" and pa.types.is_string(values.type):
            n = len(values)
            offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset: values.offset + n + 1]
            empty = offsets[1:] == offsets[:-1]
            if empty.all() or empty[np.asarray(pc.is_null(values))].all():
                return pa.StringArray.from_buffers(n, values.buffers()[1], values.buffers()[2], None, 0,
                                                   values.offset)
        return pc.fill_null(values, self.options.null)

    def fields(self, batch: pa.RecordBatch) -> tuple[list[pa.Array], bool]:
        """The final (quoted) field text of every column, and whether any value was quoted."""
        out = [self._field(value_text(batch.column(i), f), f, f.name in self.forced) for i, f in enumerate(self.schema)]
        return [values for values, _ in out], any(quoted for _, quoted in out)

    def header(self) -> bytes:
        names = pa.array(self.schema.names, pa.string())
        quoted, _ = self._field(names, pa.field("header", pa.string()), False)
        return (self.options.delimiter.join(quoted.to_pylist()) + "\n").encode()

    def encode(self, batch: pa.RecordBatch) -> bytes:
        """The CSV bytes of ``batch``'s rows (no header), ``\\n`` after each row."""
        return self.encode_buffer(batch).to_pybytes()

    def encode_buffer(self, batch: pa.RecordBatch) -> pa.Buffer:
        """:meth:`encode` without the final copy: the joined lines' own (immutable) buffer."""
        if batch.num_rows == 0:
            return pa.py_buffer(b"")
        if batch.num_columns == 0:
            return pa.py_buffer(b"\n" * batch.num_rows)
        try:
            if self._native:
                lines = self._native_lines(batch)
                if lines is not None:
                    return lines
            columns, quoted = self.fields(batch)
            if not quoted and not self._writer_refused:
                lines = _unquoted_lines(columns, self.options.delimiter)
                if lines is not None:
                    return lines
                self._writer_refused = True  # the data holds what that writer refuses: join from now on
            # one element-wise join, the delimiter as its separator; the newline rides on the last column
            columns[-1] = text.concat(columns[-1], "\n")
            return text.joined_buffer(pc.binary_join_element_wise(*columns, self.options.delimiter))
        except pa.ArrowCapacityError:  # > 2 GiB of text in one batch: halve it
            half = batch.num_rows // 2
            return pa.py_buffer(self.encode(batch.slice(0, half)) + self.encode(batch.slice(half)))


def _unquoted_lines(columns: list[pa.Array], delimiter: str) -> pa.Buffer | None:
    """The lines of final field texts none of which is quoted, from Arrow's C++ CSV
    writer: the same bytes as the element-wise join, in one pass instead of two.

    ``None`` when a text holds a character that writer treats as structural (``"``, the
    delimiter, CR, LF): it refuses those unquoted, so the join makes the lines instead.
    Unquoted texts reach it holding such a character only as a ``"`` in a dialect whose
    quote and escape are other characters (in values or in the null string), or as a
    line break in the null string (``lading_spec.formats`` refuses a null string
    holding the delimiter or the quote)."""
    if len(delimiter) != 1:
        return None
    sink = pa.BufferOutputStream()
    try:
        pacsv.write_csv(pa.RecordBatch.from_arrays(columns, names=[str(i) for i in range(len(columns))]), sink,
                        pacsv.WriteOptions(include_header=False, delimiter=delimiter, quoting_style="none",
                                           batch_size=_WRITER_ROWS))
    except pa.ArrowInvalid:
        return None
    return sink.getvalue()


# --- reading ----------------------------------------------------------------------------

def _quoted_section(quote: bytes, escape: bytes) -> re.Pattern[bytes]:
    """One quoted section as PostgreSQL reads it: inside, ``escape`` before the quote or itself
    makes that character literal; any other ``escape`` is itself (atomic: no backtracking)."""
    q, e = re.escape(quote), re.escape(escape)
    return re.compile(rb"%s(?>[^%s%s]++|%s[%s%s]|%s)*+%s" % (q, q, e, e, q, e, e, q))


def pg_escapes(data: bytes, o: CsvOptions) -> bytes:
    """``data`` in the same dialect with the escape spelled as a doubled quote, when
    ``o.escape`` differs from ``o.quote``: PostgreSQL honours the escape only inside quotes
    (``a\\b`` unquoted is ``a\\b``, and the null string ``\\N`` is NULL), while pyarrow's
    ``escape_char`` acts everywhere (it read ``ab`` and ``N``). Inside each quoted section
    ``escape quote`` becomes ``quote quote`` and ``escape escape`` one ``escape``; the rest is
    untouched, line breaks included (line numbers hold). Read the result with
    ``_parse_options``, which then parses doubled quotes. Data without the escape
    character (memchr-fast test) is left as is; otherwise the work is one regular
    expression scan plus a replacement per quoted section. Then quotes are placed where
    pyarrow reads them as PostgreSQL does (``pg_quoting``), and text holding a quote ends
    with a line break: at the end of a file without one, pyarrow read an empty last field
    of a record holding a quoted field as '' instead of NULL."""
    quote, escape = o.quote.encode(), o.escape.encode()
    if not (o.escape == o.quote or len(quote) != 1 or len(escape) != 1 or escape not in data):
        pair = re.compile(re.escape(escape) + b"(.)", re.DOTALL)
        doubled = {quote: quote + quote, escape: escape}

        def section(m: re.Match[bytes]) -> bytes:
            return pair.sub(lambda p: doubled.get(p.group(1), p.group(0)), m.group(0))

        data = _quoted_section(quote, escape).sub(section, data)
    data = pg_quoting(data, o)
    if data and not data.endswith(b"\n") and quote in data:
        data += b"\n"
    return data


_BLOCK = 1 << 22  # bytes of CSV classified at a time by pg_quoting


def pg_quoting(data: bytes, o: CsvOptions) -> bytes:
    """``data`` (quotes doubled inside quoted sections) with each record whose quotes pyarrow
    would read otherwise than PostgreSQL rewritten the way both read alike.

    PostgreSQL opens a quoted section at any quote outside one, so ``ab"c,d"e`` is one
    field, ``abc,de``, and ``"ab"c`` is ``abc``; pyarrow opens one only at a field's
    start and takes a quote inside an unquoted field as a character (``ab"c`` and
    ``d"e``, two fields). Quotes toggle in order, so which quote opens and which closes is
    its count's parity: an opener must start a field (after a delimiter, a line break, the
    start, or the closer of a doubled quote) and a closer must end one (before a
    delimiter, a line break or the end) or be doubled. A record breaking that (rare) is
    re-spelled, field by field, as PostgreSQL reads it, each field holding a quote
    quoted whole; its line breaks stay, so line numbers hold. Data without the quote,
    or with one left open (an error its readers report), is returned as is."""
    quote, delimiter = o.quote.encode(), o.delimiter.encode()
    if len(quote) != 1 or len(delimiter) != 1 or quote not in data:
        return data
    buf = np.frombuffer(data, np.uint8)
    q, d = quote[0], delimiter[0]
    irregular: list[np.ndarray] = []
    total = 0
    for _, quotes, seen in _quotes_by_block(buf, q):
        total = seen + len(quotes)
        first = seen % 2  # 1: the block starts inside a quoted section
        openers, closers = quotes[first::2], quotes[1 - first::2]
        before = buf[np.maximum(openers - 1, 0)]
        opens_field = (openers == 0) | (before == d) | (before == 10) | (before == q)
        after = buf[np.minimum(closers + 1, len(buf) - 1)]
        closes_field = (closers == len(buf) - 1) | (after == d) | (after == 10) | (after == 13) | (after == q)
        irregular += [openers[~opens_field], closers[~closes_field]]
    bad = np.concatenate(irregular)
    if not len(bad) or total % 2:
        return data
    outside = np.concatenate([newlines[(np.searchsorted(quotes, newlines) + seen) % 2 == 0]
                              for lo, quotes, seen in _quotes_by_block(buf, q)
                              for newlines in [np.flatnonzero(buf[lo:lo + _BLOCK] == 10) + lo]])
    records = np.unique(np.searchsorted(outside, bad))  # record k: after outside[k-1], up to outside[k]
    out, at = [], 0
    for k in records.tolist():
        start = int(outside[k - 1]) + 1 if k else 0
        end = int(outside[k]) if k < len(outside) else len(data)
        out += [data[at:start], _as_postgresql_reads(data[start:end], q, d)]
        at = end
    out.append(data[at:])
    return b"".join(out)


def _quotes_by_block(buf: np.ndarray, q: int) -> Iterator[tuple[int, np.ndarray, int]]:
    """Per block of ``_BLOCK`` bytes (blocks bound the index arrays of a file full of quotes):
    its offset, the positions of its quotes, and how many quotes came before it."""
    seen = 0
    for lo in range(0, len(buf), _BLOCK):
        quotes = np.flatnonzero(buf[lo:lo + _BLOCK] == q) + lo
        yield lo, quotes, seen
        seen += len(quotes)


def _as_postgresql_reads(record: bytes, q: int, d: int) -> bytes:
    """One record (quotes balanced) re-spelled field by field: a field without quotes as is,
    any other as its PostgreSQL value, quoted, inner quotes doubled."""
    cr = record.endswith(b"\r")
    if cr:
        record = record[:-1]
    fields: list[bytes] = []
    value, quoted = bytearray(), False
    for section, delimiter, run in _record_tokens(q, d).findall(record):
        if delimiter:
            fields.append(_field(value, quoted, q))
            value, quoted = bytearray(), False
        elif run:
            value += run
        else:  # a quoted section (perhaps empty)
            value += section.replace(bytes([q, q]), bytes([q]))
            quoted = True
    fields.append(_field(value, quoted, q))
    return bytes([d]).join(fields) + (b"\r" if cr else b"")


@functools.lru_cache(maxsize=8)
def _record_tokens(q: int, d: int) -> re.Pattern[bytes]:
    """A quoted section (its inside), a delimiter, or a run of anything else."""
    qq, dd = re.escape(bytes([q])), re.escape(bytes([d]))
    return re.compile(rb"%s((?:[^%s]|%s%s)*)%s|(%s)|([^%s%s]+)" % (qq, qq, qq, qq, qq, dd, qq, dd), re.DOTALL)


def _field(value: bytearray, quoted: bool, q: int) -> bytes:
    if not quoted:
        return bytes(value)
    mark = bytes([q])
    return mark + bytes(value).replace(mark, mark + mark) + mark


def unterminated_quote_line(escaped: bytes, o: CsvOptions) -> int | None:
    """The line where a quoted field opens that no quote closes, in ``pg_escapes`` output;
    None if every one closes. Quotes toggle in order (a doubled quote closes and reopens),
    so an odd count leaves the last one open. pyarrow takes such a field to the end of the
    file: the rest of the file became one value and its rows vanished."""
    quote = o.quote.encode()
    if escaped.count(quote) % 2 == 0:
        return None
    return escaped.count(b"\n", 0, escaped.rindex(quote)) + 1


def _parse_options(o: CsvOptions, columns: int = 0) -> pacsv.ParseOptions:
    """``columns`` 1: a blank line is a row (its one field empty: NULL with the default null
    string), as PostgreSQL reads it and as the encoder writes a one-column NULL; with more
    columns a blank line holds no row and is skipped. The data must have passed
    :func:`pg_escapes` (escapes spelled as doubled quotes)."""
    return pacsv.ParseOptions(delimiter=o.delimiter, quote_char=o.quote, double_quote=True, escape_char=False,
                              newlines_in_values=True, ignore_empty_lines=columns != 1)


def _convert_options(o: CsvOptions, names: list[str] | None) -> pacsv.ConvertOptions:
    return pacsv.ConvertOptions(
        column_types={n: pa.string() for n in names} if names else None,
        null_values=[o.null], strings_can_be_null=True, quoted_strings_can_be_null=False)


def header_names(raw: bytes, o: CsvOptions) -> list[str]:
    reader = pacsv.open_csv(pa.BufferReader(pg_escapes(raw, o)), parse_options=_parse_options(o),
                            convert_options=pacsv.ConvertOptions(null_values=[o.null]))
    names = list(reader.schema.names)
    reader.close()
    return names


def parse_text(values: pa.Array, field: pa.Field) -> pa.Array:
    """Inverse of :func:`value_text`: field text (NULL as null) → ``field``'s type."""
    t = field.type
    values = values.cast(pa.string())
    try:
        if _is_ym(field):
            return text.parse_months_pg(values)
        if pa.types.is_null(t):
            return pa.nulls(len(values))
        if pa.types.is_boolean(t):
            return text.parse_bool(values)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            prefixed = pc.starts_with(values, "\\x")
            if not pc.all(pc.fill_null(prefixed, True)).as_py():
                raise ValueError("binary values must be bytea hex such as \\x0102")
            return text.parse_hex(pc.utf8_slice_codeunits(values, 2)).cast(t)
        if pa.types.is_time(t):
            return text.parse_time(values).cast(t)
        if pa.types.is_duration(t):
            return text.parse_daytime_pg(values).cast(t)
        if _nested(t):
            lines = text.concat('{"v":', pc.fill_null(values, "null"), "}\n")
            table = jsonl.read_jsonl(text.joined_bytes(lines), pa.schema([field.with_name("v")]))
            return table.column(0).combine_chunks()
        return values.cast(t)
    except (pa.ArrowInvalid, ValueError) as e:
        raise ValueError(f"column {field.name}: cannot read as {t}: {e}") from e


def read_csv(data: bytes | pa.NativeFile, options: CsvOptions | None = None,
             schema: pa.Schema | None = None) -> pa.Table:
    """Read lading/PostgreSQL CSV; NULL (unquoted null string) stays distinct from ``""``.

    Without ``schema`` every column is a string. With ``schema``, columns are matched by
    header name when ``options.header`` is true, by position otherwise, and parsed back
    into the schema's types.
    """
    o = options or CsvOptions()
    raw = data if isinstance(data, bytes) else data.read()
    escaped = pg_escapes(raw, o)
    if (line := unterminated_quote_line(escaped, o)) is not None:
        raise ValueError(f"line {line}: a quoted field opens here and is never closed; close it, or write a "
                         "quote inside a field doubled and the field quoted")
    if o.header:
        names = header_names(raw, o) if raw.strip() else (schema.names if schema is not None else [])
        # the reader takes the header record itself: skip_rows would skip one line, not one
        # record, and a header name holding a quoted line break would leave a junk row
        read = pacsv.ReadOptions()
        column_names = names
    else:
        if schema is not None:
            names = list(schema.names)
        else:
            first = header_names(raw, o) if raw.strip() else []
            names = [f"column_{i + 1}" for i in range(len(first))]
        read = pacsv.ReadOptions(column_names=[f"c{i}" for i in range(len(names))])
        column_names = read.column_names
    if not raw.strip():
        strings = pa.table({n: pa.array([], pa.string()) for n in names})
    else:
        table = pacsv.read_csv(pa.BufferReader(escaped), read_options=read, parse_options=_parse_options(o, len(names)),
                               convert_options=_convert_options(o, column_names))
        strings = pa.Table.from_arrays(table.columns, names=names)
    if schema is None:
        return strings
    if o.header:
        missing = [f.name for f in schema if f.name not in names]
        if missing:
            raise ValueError(f"CSV header has no column {missing[0]!r}; header: {', '.join(names)}")
    elif len(names) != len(schema) or strings.num_columns != len(schema):
        raise ValueError(f"CSV rows have {strings.num_columns} fields, the schema {len(schema)} columns")
    columns = [parse_text(strings.column(f.name).combine_chunks(), f) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)
