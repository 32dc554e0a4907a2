"""Decoding one input file into Arrow pieces, with the records that would not decode.

A decoder turns a file's bytes into *pieces*: Arrow tables of columns as read
(CSV fields as raw bytes, JSON and Parquet with their own types), each row tagged
with where it came from (physical line for CSV and JSON lines, 1-based row for
Parquet). Records that cannot be decoded (a CSV row with the wrong number of
fields, a JSON line that does not parse, a Parquet row group that cannot be read)
become ``Reject``s naming their line or row and holding the raw record. A file
that cannot be read at all (truncated Parquet, corrupt compression) has a
file-level ``error`` and no pieces.

Good data takes one vectorised pyarrow call per file; only the failing parts of
a file are bisected to find the bad records.
"""

from __future__ import annotations

import csv as pycsv
import io
import json
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from lading_jobs.formats import jsonl
from lading_jobs.formats.compressed import compression_of, decompress
from lading_jobs.formats.csv import pg_escapes, unterminated_quote_line
from lading_jobs.ingest import lines as L
from lading_spec.formats import CsvOptions, FormatOptions

MAX_RAW = 4096  # characters of a raw record kept in a rejected-rows entry


@dataclass
class Reject:
    """One record that did not load; ``count`` > 1 for an unreadable block of rows."""

    position: int  # line (text formats) or row (Parquet), 1-based
    reason: str
    column: str | None = None
    record: str | None = None
    count: int = 1


@dataclass
class Piece:
    table: pa.Table
    positions: np.ndarray  # one per row: line or row number


BINARY_TEXT = {"csv": "hex", "json": "base64"}
"""How each text format spells a binary value: PostgreSQL's bytea hex (``\\x0102``) in CSV,
base64 (as lading writes it) in JSON lines; Parquet holds binary values as they are."""


@dataclass
class Decoded:
    """A decoded file. ``pieces`` may be lazy (Parquet reads one row group at a time):
    iterate it once, through ``iter_pieces``, which also counts the rows read."""

    unit: str  # "line" or "row"
    by_position: bool = False  # columns are matched by position (headerless CSV)
    text: bool = False  # fields are raw text whatever they hold (CSV): a new column is a string
    binary_text: str | None = None  # how text spells a binary value: "hex" (CSV's \x0102) or "base64" (JSON)
    pieces: Iterable[Piece] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    error: str | None = None
    raw: Callable[[int], str | None] = field(default=lambda position: None)
    rows_decoded: int = 0

    def iter_pieces(self) -> Iterator[Piece]:
        for piece in self.pieces:
            self.rows_decoded += piece.table.num_rows
            yield piece

    def record(self, table: pa.Table, index: int, position: int) -> str | None:
        """What a rejected row shows as its record: the raw line at ``position`` (text formats),
        else row ``index`` of ``table`` as JSON (Parquet)."""
        return self.raw(position) if self.unit == "line" else row_json(table, index)

    @property
    def rows_read(self) -> int:
        """Records read so far (all of them once ``iter_pieces`` is exhausted)."""
        return self.rows_decoded + sum(r.count for r in self.rejects)


def row_json(table: pa.Table, index: int) -> str:
    """One row as JSON, for a rejected-rows entry (formats without a raw text)."""
    record = table.slice(index, 1).to_pylist()[0]
    return _text(json.dumps(record, default=str, ensure_ascii=False).encode())


def _text(data: bytes) -> str:
    text = data.decode("utf-8", errors="backslashreplace")
    return text if len(text) <= MAX_RAW else text[:MAX_RAW] + "…"


class _Raw(Protocol):
    def __call__(self, line: int, span: int = 1) -> str: ...


def _line_source(data: bytes) -> tuple[np.ndarray, np.ndarray, _Raw]:
    starts, ends = L.line_bounds(data)

    def raw(line: int, span: int = 1) -> str:
        last = min(line - 1 + span - 1, len(ends) - 1)
        return _text(data[starts[line - 1]:ends[last]]).rstrip("\r")

    return starts, ends, raw


# -- CSV -----------------------------------------------------------------------------

def _is_utf8(data: bytes) -> bool:
    buf = pa.py_buffer(data)
    offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int64).tobytes())
    try:
        pa.LargeBinaryArray.from_buffers(pa.large_binary(), 1, [None, offsets, buf]).cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    return True


def _mask_invalid_utf8(data: bytes) -> tuple[bytes, np.ndarray]:
    """``data`` with every byte of an invalid UTF-8 sequence replaced by ``?``, and their offsets."""
    masked = data.decode("utf-8", "surrogateescape").encode("utf-8", "replace")  # one '?' per bad byte
    diff = np.frombuffer(data, np.uint8) != np.frombuffer(masked, np.uint8)
    return masked, np.flatnonzero(diff).astype(np.int64)


def _dialect(opts: CsvOptions) -> dict[str, Any]:
    """Python's csv dialect for text that has passed ``pg_escapes`` (escapes as doubled quotes)."""
    return {"delimiter": opts.delimiter, "quotechar": opts.quote, "doublequote": True}


def _non_utf8_column(record: bytes, names: list[str], opts: CsvOptions) -> str | None:
    """The first column of a (rejected) record whose value is not UTF-8."""
    text = pg_escapes(record, opts).decode("utf-8", "surrogateescape")
    fields = next(pycsv.reader(io.StringIO(text, newline=""), **_dialect(opts)), [])
    for name, value in zip(names, fields, strict=False):
        if any("\udc80" <= ch <= "\udcff" for ch in value):
            return name
    return None


class MultilineHeader(ValueError):
    """A header record whose quoted name holds a line break: loads read one-line headers."""


def _header(data: bytes, opts: CsvOptions) -> list[str]:
    # utf-8-sig: a byte order mark (Excel writes one) is no part of the first name
    first = pg_escapes(data.split(b"\n", 1)[0].rstrip(b"\r"), opts).decode("utf-8-sig")
    try:
        names = next(pycsv.reader([first], strict=True, **_dialect(opts)), [])
    except pycsv.Error as e:  # a quote left open at the end of the line
        raise MultilineHeader("line 1: a header name holds a line break (a quote is left open at the end of "
                              "the line); loads read one-line headers: rename the column") from e
    out: list[str] = []
    for i, name in enumerate(names):
        name = name.strip() or f"_c{i}"
        out.append(name if name not in out else f"{name}_{i}")
    return out


def decode_csv(data: bytes, opts: CsvOptions, columns: list[str]) -> Decoded:
    """PostgreSQL CSV: an unquoted empty field (or ``null``) is NULL, ``""`` is ''.

    With ``header`` the first line names the columns (matched by name); without,
    fields are matched to ``columns`` by position.
    """
    out = Decoded(unit="line", by_position=not opts.header, text=True, binary_text=BINARY_TEXT["csv"])
    if opts.header:
        try:
            names = _header(data, opts)
        except UnicodeDecodeError:
            out.error = "line 1: the header is not valid UTF-8"
            return out
        except MultilineHeader as e:
            out.error = str(e)
            return out
        if not names:
            out.error = "line 1: the header is empty; set from.options.header: false if the file has none"
            return out
    else:
        names = list(columns)
    if opts.header and b"\n" not in data:
        return out  # the header alone, without a line break: no rows (pyarrow could not skip it)
    invalid: list[tuple[int, int, str, str]] = []

    def on_invalid(row: Any) -> str:
        text = row.text or ""
        invalid.append((int(row.number) if row.number is not None and row.number >= 0 else -1,
                        1 + text.count("\n"), text,
                        f"expected {row.expected_columns} fields, found {row.actual_columns}"))
        return "skip"

    original = data
    bad_offsets = np.zeros(0, dtype=np.int64)
    if not _is_utf8(data):  # pyarrow cannot report a malformed row whose text is not UTF-8
        data, bad_offsets = _mask_invalid_utf8(data)
    parse = pacsv.ParseOptions(
        delimiter=opts.delimiter, quote_char=opts.quote, double_quote=True, escape_char=False,
        newlines_in_values=True, ignore_empty_lines=len(names) != 1, invalid_row_handler=on_invalid)
    read = pacsv.ReadOptions(column_names=names, skip_rows=1 if opts.header else 0, use_threads=False,
                             block_size=max(1 << 20, min(len(data) + 1, 1 << 30)))
    convert = pacsv.ConvertOptions(column_types={n: pa.binary() for n in names}, null_values=[opts.null],
                                   strings_can_be_null=True, quoted_strings_can_be_null=False)
    escaped = pg_escapes(data, opts)  # the escape honoured inside quotes only, as PostgreSQL does
    if (line := unterminated_quote_line(escaped, opts)) is not None:
        out.error = (f"line {line}: a quoted field opens here and is never closed (PostgreSQL: unterminated "
                     "CSV quoted field); close it, or write a quote inside a field doubled and the field quoted")
        return out
    try:
        table = pacsv.read_csv(io.BytesIO(escaped), read_options=read, parse_options=parse, convert_options=convert)
    except (pa.ArrowInvalid, OSError) as e:
        out.error = f"not readable as CSV: {e}"
        return out
    starts, ends, raw = _line_source(original)
    spans = np.ones(table.num_rows, dtype=np.int64)
    for col in table.columns:
        spans += pc.fill_null(pc.count_substring(col, "\n"), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    blank = L.blank_lines(data, starts, ends, whitespace=False)
    first_line = 2 if opts.header else 1
    # a blank line holds no row, except in a one-column file: there it is one empty field (NULL
    # with the default null string), as PostgreSQL reads it and as lading writes a NULL
    blanks = [int(i) + 1 for i in np.flatnonzero(blank) if i + 1 >= first_line] if len(names) != 1 else []
    # pyarrow numbers records from 1, counting the header row but not blank lines
    good_lines, rejected_lines = L.csv_record_lines(
        first_line, first_line, spans, [(n, s) for n, s, _, _ in invalid], blanks)
    for line, (_, span, _, reason) in zip(rejected_lines, invalid, strict=False):
        out.rejects.append(Reject(line, reason, record=raw(line, span)))
    if len(bad_offsets):  # rows holding an invalid byte: rejected here, their text was masked
        bad_lines = np.unique(np.searchsorted(starts, bad_offsets, side="right"))  # 1-based lines
        first_bad = np.searchsorted(bad_lines, good_lines, side="left")
        hit = (first_bad < len(bad_lines)) & (bad_lines[np.minimum(first_bad, len(bad_lines) - 1)]
                                              < good_lines + spans)
        for line, span in zip(good_lines[hit].tolist(), spans[hit].tolist(), strict=True):
            record = original[starts[line - 1]:ends[min(line + span - 2, len(ends) - 1)]]
            out.rejects.append(Reject(line, "invalid UTF-8", column=_non_utf8_column(record, names, opts),
                                      record=raw(line, span)))
        table, good_lines, spans = table.filter(pa.array(~hit)), good_lines[~hit], spans[~hit]
        out.rejects.sort(key=lambda r: r.position)
    out.pieces = [Piece(table, good_lines)]

    def raw_record(line: int) -> str:  # looked up only for rejected rows: no per-row work up front
        i = int(np.searchsorted(good_lines, line))
        return raw(line, int(spans[i]) if i < len(good_lines) and good_lines[i] == line else 1)

    out.raw = raw_record
    return out


# -- JSON lines ----------------------------------------------------------------------

EXACT_NUMBER = pa.decimal256(76, 38)
"""How JSON numbers bound for integer and decimal columns are read: from their text, exactly."""


class InexactNumber(ValueError):
    """A JSON number that cannot be read exactly (more than 38 digits before or after the point)."""


def _read_json(data: bytes, exact: Collection[str] = (), text: bool = False,
               verbatim: Collection[str] = (), rows: tuple[np.ndarray, np.ndarray] | None = None) -> pa.Table:
    """JSON lines as a table. Numbers under a key in ``exact`` (lower-case names of the
    integer and decimal columns they load into) are read from their text as
    ``EXACT_NUMBER``, never through float64: pyarrow infers float64 for
    ``1234567890123456789.12``, for ``2.675`` and for an integer column holding one
    fraction, losing digits that the cast to the column could not restore. ``text``:
    strings stay strings (pyarrow would read ``"2024-01-01 10:00:00"`` as a timestamp).
    ``verbatim``: lower-case names of the text and json columns, whose values that are
    not strings are kept as the text the line spells them in (``_verbatim``, given ``rows``:
    the start and end in ``data`` of each line that holds an object)."""
    block = max(1 << 20, min(len(data) + 1, 1 << 30))
    read = pajson.ReadOptions(use_threads=False, block_size=block)
    table = pajson.read_json(io.BytesIO(data), read_options=read)
    lossy = [(f.name, EXACT_NUMBER) for f in table.schema if f.name.lower() in exact and pa.types.is_floating(f.type)]
    lossy += [(f.name, pa.string()) for f in table.schema if text and pa.types.is_temporal(f.type)]
    if lossy:
        parse = pajson.ParseOptions(explicit_schema=pa.schema(lossy))
        try:
            table = pajson.read_json(io.BytesIO(data), read_options=read, parse_options=parse)
        except pa.ArrowInvalid as e:
            raise InexactNumber(f"a number cannot be read exactly: {e}") from e
    if verbatim:
        assert rows is not None, "verbatim columns need the lines' bounds"
        return _verbatim(data, table, verbatim, rows)
    return table


class UnreadableLine(ValueError):
    """A line pyarrow's JSON reader took that Python's JSON scanner refuses."""


_NEGATIVE_ZERO = re.compile(rb"-0(?![0-9.eE])")  # the one integer whose int64 loses its spelling
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_SCANNER = json.JSONDecoder()


def _spelled_differently(data: bytes, t: pa.DataType) -> bool:
    """Whether values of type ``t`` read from ``data`` may not print as the line spells them:
    floats (``1.10``, ``1e5``), nested values (spacing, ``1.0``), and ``-0`` among integers."""
    if pa.types.is_integer(t):
        return _NEGATIVE_ZERO.search(data) is not None
    return pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_nested(t)


def _verbatim(data: bytes, table: pa.Table, keys: Collection[str], rows: tuple[np.ndarray, np.ndarray]) -> pa.Table:
    """``table`` with each column under ``keys`` that holds numbers or nested values replaced
    by those values' text as the lines spell it, as Spark's JSON reader gives a string column
    (``1.10`` stays ``1.10``, ``[1, 2.50]`` keeps its spacing, a number beyond a double's
    digits keeps them all) and as PostgreSQL keeps a ``json`` value. Columns of strings, and
    of integers without ``-0``, stay as read; the others' values are found after their key by
    a regular expression over the bytes (``_as_spelled``), or, where the key is not found once
    per value, by a Python scan of every line's members."""
    names = [f.name for f in table.schema if f.name.lower() in keys and _spelled_differently(data, f.type)]
    if not names:
        return table
    starts, ends = rows
    if len(starts) != table.num_rows:
        raise UnreadableLine("not one JSON object per line")
    scan = []
    for name in names:
        column = _as_spelled(data, name, table.column(name), starts, ends)
        if column is None:
            scan.append(name)
        else:
            table = table.set_column(table.schema.get_field_index(name), name, column)
    if scan:
        members = [_members(data[a:b].decode("utf-8", "surrogateescape"), scan)
                   for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        for name in scan:
            column = pa.array([_spelled_bytes(m.get(name)) for m in members], pa.binary()).view(pa.string())
            table = table.set_column(table.schema.get_field_index(name), name, column)
    return table


_NUMBER = rb"(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"


def _as_spelled(data: bytes, name: str, column: pa.ChunkedArray, starts: np.ndarray,
                ends: np.ndarray) -> pa.Array | None:
    """The text of each value under key ``name``, found after ``"name":`` in ``data`` (numbers
    by the expression, nested values by Python's JSON scanner from there), or ``None`` when
    the matches do not line up one to one with the column's values (the key also names a
    member of a nested object, or is spelled with escapes): the caller scans the lines.

    Each match must lie on the line of a row whose value is not NULL, one per such row (text
    inside a JSON string cannot match: its quotes are escaped), and a number must read as
    that row's value."""
    nested = pa.types.is_nested(column.type)
    key = re.escape(json.dumps(name, ensure_ascii=False).encode()) + rb"[ \t\n\r]*:[ \t\n\r]*"
    found = list(re.finditer(key + (rb"(?=[\[{])" if nested else _NUMBER), data))
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    if len(found) != int(valid.sum()):
        return None
    at = np.fromiter((m.start() for m in found), np.int64, len(found))
    rows = np.flatnonzero(valid)
    if not np.array_equal(np.searchsorted(starts, at, side="right") - 1, rows):
        return None
    if nested:
        line_ends = ends[rows].tolist()
        texts = pa.array([_value_text(data[m.end():end]) for m, end in zip(found, line_ends, strict=True)],
                         pa.binary())
    else:
        texts = pa.array([m.group(1) for m in found], pa.binary())
        read = column.drop_null().cast(pa.float64())
        if not pc.all(pc.equal(pc.cast(texts.view(pa.string()), pa.float64()), read)).as_py():
            return None
    return texts.take(pa.array(np.cumsum(valid) - 1, mask=~valid)).view(pa.string())


def _value_text(rest: bytes) -> bytes:
    """The JSON value at the start of ``rest`` (the line after a key's colon), as spelled."""
    text = rest.decode("utf-8", "surrogateescape")
    try:
        _, end = _SCANNER.raw_decode(text)
    except ValueError as e:
        raise UnreadableLine(str(e)) from e
    return text[:end].encode("utf-8", "surrogateescape")


def _spelled_bytes(value: str | None) -> bytes | None:
    return None if value is None or value == "null" else value.encode("utf-8", "surrogateescape")


def _skip_space(line: str, i: int) -> int:
    return _JSON_SPACE.match(line, i).end()  # type: ignore[union-attr]  # always matches


def _members(line: str, names: Collection[str]) -> dict[str, str]:
    """The text of the values of the top-level members ``names`` of the object on ``line``."""
    out: dict[str, str] = {}
    try:
        i = _skip_space(line, 0)
        if line[i] != "{":
            raise UnreadableLine("not a JSON object")
        i = _skip_space(line, i + 1)
        if line[i] == "}":
            return out
        while True:
            if line[i] != '"':
                raise UnreadableLine(f"expected a key at character {i + 1}")
            key, i = json.decoder.scanstring(line, i + 1)  # type: ignore[attr-defined]
            i = _skip_space(line, i)
            if line[i] != ":":
                raise UnreadableLine(f"expected ':' at character {i + 1}")
            start = _skip_space(line, i + 1)
            _, end = _SCANNER.raw_decode(line, start)
            if key in names:
                out[key] = line[start:end]
                if len(out) == len(names):  # pyarrow refuses a key given twice: no later one counts
                    return out
            i = _skip_space(line, end)
            if line[i] == "}":
                return out
            if line[i] != ",":
                raise UnreadableLine(f"expected ',' or '}}' at character {i + 1}")
            i = _skip_space(line, i + 1)
    except (IndexError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise UnreadableLine(str(e)) from e


def decode_json(data: bytes, exact: Collection[str] = (), text: bool = False,
                verbatim: Collection[str] = ()) -> Decoded:
    """One JSON object per line; blank lines are skipped; each bad line is rejected on its own.

    ``exact``: lower-case names of the integer and decimal columns, ``text``: strings stay
    strings, ``verbatim``: names of the text and json columns (see ``_read_json``)."""
    exact = frozenset(name.lower() for name in exact)
    verbatim = frozenset(name.lower() for name in verbatim)
    pieces: list[Piece] = []
    out = Decoded(unit="line", pieces=pieces, binary_text=BINARY_TEXT["json"])
    starts, ends, raw = _line_source(data)
    solid = np.flatnonzero(~L.blank_lines(data, starts, ends))
    out.raw = raw
    data, solid = _reject_non_objects(data, (starts, ends), solid, out)
    try:
        table = _read_json(data, exact, text, verbatim, (starts[solid], ends[solid]))
        if table.num_rows == len(solid):
            pieces.append(Piece(table, solid.astype(np.int64) + 1))
            return out
    except (pa.ArrowInvalid, UnicodeDecodeError, InexactNumber, UnreadableLine):
        pass

    def parse(lo: int, hi: int) -> None:  # lines solid[lo:hi]
        first, last = int(solid[lo]), int(solid[hi - 1])
        chunk = data[starts[first]:ends[last]]
        lines = solid[lo:hi]
        try:
            table = _read_json(chunk, exact, text, verbatim, (starts[lines] - starts[first], ends[lines] - starts[first]))
            if table.num_rows != hi - lo:
                raise pa.ArrowInvalid("not one JSON object per line")
            pieces.append(Piece(table, lines.astype(np.int64) + 1))
            return
        except (pa.ArrowInvalid, UnicodeDecodeError, InexactNumber, UnreadableLine) as e:
            if hi - lo == 1:
                reason = ("invalid UTF-8" if isinstance(e, UnicodeDecodeError) else str(e)
                          if isinstance(e, InexactNumber) else f"not a JSON object: {e}")
                out.rejects.append(Reject(first + 1, reason, record=raw(first + 1)))
                return
        mid = (lo + hi) // 2
        parse(lo, mid)
        parse(mid, hi)

    if len(solid):
        parse(0, len(solid))
    out.rejects.sort(key=lambda r: r.position)
    return out


def _reject_non_objects(data: bytes, bounds: tuple[np.ndarray, np.ndarray], solid: np.ndarray,
                        out: Decoded) -> tuple[bytes, np.ndarray]:
    """Reject the lines that are no JSON object (``null``, ``5``, ``[1]``) before pyarrow sees
    them (``jsonl.non_object_lines``); they become blanks of the same length (offsets hold)."""
    bad = jsonl.non_object_lines(data, bounds) if len(solid) else []
    if not bad:
        return data, solid
    for line, _, _ in bad:
        out.rejects.append(Reject(line, "not a JSON object (one object per line)", record=out.raw(line)))
    return jsonl.blanked(data, bad), np.setdiff1d(solid, np.array([line - 1 for line, _, _ in bad], np.int64))


# -- Parquet -------------------------------------------------------------------------

def decode_parquet(source: pa.NativeFile | bytes, row_groups: tuple[int, int] | None = None,
                   first_row: int = 1) -> Decoded:
    """Row groups as lazy pieces; an unreadable row group rejects its rows, a bad footer the file.

    Given a file opened for ranged reads, only the footer is read here, and one row
    group at a time as the pieces are consumed. ``row_groups`` limits the read to
    ``[start, stop)`` (a chunk of a big file), whose first row is ``first_row``.
    """
    out = Decoded(unit="row")
    try:
        pf = pq.ParquetFile(pa.BufferReader(source) if isinstance(source, bytes) else source)
    except (pa.ArrowInvalid, OSError) as e:
        out.error = f"not a readable Parquet file (truncated or corrupt?): {e}"
        return out

    start, stop = row_groups or (0, pf.metadata.num_row_groups)

    def pieces() -> Iterator[Piece]:
        first = first_row
        for i in range(start, min(stop, pf.metadata.num_row_groups)):
            n = pf.metadata.row_group(i).num_rows
            try:
                table = pf.read_row_group(i, use_threads=False)  # Spark's tasks are the parallelism
            except (pa.ArrowInvalid, OSError) as e:
                out.rejects.append(Reject(first, f"row group {i} (rows {first}-{first + n - 1}) is unreadable: "
                                                 f"{e}", count=n))
            else:
                yield Piece(table, np.arange(first, first + table.num_rows, dtype=np.int64))
            first += n

    out.pieces = pieces()
    return out


def decode(data: bytes | pa.NativeFile, fmt: str, options: FormatOptions, columns: list[str],
           uri: str, row_groups: tuple[int, int] | None = None, first_row: int = 1,
           exact_numbers: Collection[str] = (), verbatim: Collection[str] = ()) -> Decoded:
    """Decode one file in ``fmt`` (csv, json: its bytes; parquet: its bytes or a ranged-read file,
    optionally only the row groups ``[start, stop)``). ``exact_numbers``: the integer and
    decimal columns, whose JSON numbers are read from their text; ``verbatim``: the text and
    json columns, whose JSON numbers and nested values keep their text (``decode_json``)."""
    if fmt == "parquet":
        return decode_parquet(data, row_groups, first_row)
    assert isinstance(data, bytes)
    compression = compression_of(options)
    try:
        data = decompress(data, compression, uri)
    except OSError as e:  # NotDecompressible
        return Decoded(unit="line", error=f"cannot decompress ({compression}): {e}")
    if b"\r" in data and b"\n" not in data:  # lines ended by CR alone (classic Mac OS): PostgreSQL reads
        data = data.replace(b"\r", b"\n")  # them; every count below is of LF (same length, offsets hold)
    one_column_lines = fmt == "csv" and len(columns) == 1 and not (isinstance(options, CsvOptions) and options.header)
    if not data.strip() and not (one_column_lines and data):  # there, blank lines are rows of NULL
        return Decoded(unit="line")  # an empty file loads no rows and is no error
    if fmt == "csv":
        return decode_csv(data, options if isinstance(options, CsvOptions) else CsvOptions(), columns)
    return decode_json(data, exact_numbers, text=True, verbatim=verbatim)  # strings stay strings: conform parses them
