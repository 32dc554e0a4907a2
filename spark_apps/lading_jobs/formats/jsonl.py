"""JSON lines, lossless: one JSON object per row, keys in column order.

Encoding (docs/formats.md): integers as numbers; floats as numbers, NaN and
±infinity as the strings "NaN", "Infinity", "-Infinity"; decimals as strings
(exact); dates "YYYY-MM-DD"; timestamps RFC 3339 with microseconds, "Z" for
instants and no offset for timestamp_ntz; times "HH:MM:SS.ffffff"; binary as
base64; day-time intervals ISO 8601 "[-]PT<seconds>.<ffffff>S"; year-month
intervals "[-]P<months>M"; arrays as arrays, structs as objects, maps as objects
(non-string keys as their JSON text in a string); NULL as null.

The encoder builds one JSON fragment string array per column with
pyarrow.compute and joins them element-wise: no per-row Python. ``read_jsonl``
reverses it with pyarrow's JSON reader plus vectorised conversions; only files
holding maps or non-finite floats take a row-wise path (documented).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from lading_jobs.formats import text
from lading_jobs.formats.types import LADING_TYPE
from lading_spec.formats import JsonOptions


def _ext(field: pa.Field) -> str:
    meta = field.metadata or {}
    return meta.get(LADING_TYPE, b"").decode()


def _quoted(arr: pa.Array) -> pa.Array:
    return text.concat('"', arr, '"')


def value_json(arr: pa.Array, field: pa.Field) -> tuple[pa.Array, bool]:
    """(JSON text per value, null where the value is null; whether the text is a JSON string)."""
    t = arr.type
    ext = _ext(field)
    if ext.startswith("interval year") or ext.startswith("interval month"):
        return _quoted(text.render_months_iso(arr)), True
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string()), False
    if pa.types.is_boolean(t):
        return text.render_bool(arr), False
    if pa.types.is_integer(t):
        return arr.cast(pa.string()), False
    if pa.types.is_floating(t):
        return text.render_float(arr, '"NaN"', '"Infinity"', '"-Infinity"'), False
    if pa.types.is_decimal(t):
        return _quoted(text.render_decimal(arr)), True
    if pa.types.is_date(t):
        return _quoted(arr.cast(pa.string())), True
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return text.json_quote(arr), True
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _quoted(text.render_base64(arr.cast(pa.binary()))), True
    if pa.types.is_timestamp(t):
        naive = arr.cast(pa.timestamp(t.unit)).cast(pa.timestamp("us"))
        return text.render_timestamp(naive, "T", '"', 'Z"' if t.tz is not None else '"'), True
    if pa.types.is_time(t):
        return _quoted(text.render_time(arr)), True
    if pa.types.is_duration(t):
        return _quoted(text.render_daytime_iso(arr.cast(pa.duration("us")))), True
    if pa.types.is_map(t):
        offsets, entries = text.list_parts(arr)
        keys, items = entries.flatten()
        key_text, key_is_string = value_json(keys, t.key_field)
        if not key_is_string:
            key_text = text.json_quote(key_text)
        pairs = text.concat(key_text, ":", fragments(items, t.item_field))
        return text.join_lists(offsets, pairs, arr, ",", "{", "}"), False
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        offsets, values = text.list_parts(arr)
        return text.join_lists(offsets, fragments(values, t.value_field), arr, ",", "[", "]"), False
    if pa.types.is_struct(t):
        return _object(arr.flatten(), list(t), arr), False
    raise TypeError(f"column {field.name}: Arrow type {t} has no JSON encoding")


def fragments(arr: pa.Array, field: pa.Field) -> pa.Array:
    """JSON text per value, ``null`` for nulls (never a null slot)."""
    value, _ = value_json(arr, field)
    return pc.fill_null(value, "null")


def _object(children: list[pa.Array], fields: list[pa.Field], like: pa.Array | None, close: str = "}") -> pa.Array:
    if not fields:
        out = pc.if_else(pc.is_valid(like), "{}", "{}") if like is not None else pa.array([], pa.string())
        return out.cast(pa.string())
    parts: list[pa.Array | str] = []
    for i, (child, f) in enumerate(zip(children, fields, strict=True)):
        key = json.dumps(f.name, ensure_ascii=False)
        parts.append(("{" if i == 0 else ",") + key + ":")
        parts.append(fragments(child, f))
    parts.append(close)
    out = text.concat(*parts)
    if like is not None and like.null_count:
        out = pc.if_else(like.is_valid(), out, pa.scalar(None, pa.string()))
    return out


class JsonEncoder:
    """Encodes record batches of ``schema`` as JSON lines (UTF-8, ``\\n`` after every row)."""

    def __init__(self, schema: pa.Schema, options: JsonOptions | None = None) -> None:
        self.schema = schema
        self.options = options or JsonOptions()

    def encode(self, batch: pa.RecordBatch) -> bytes:
        if batch.num_rows == 0:
            return b""
        if not self.schema.names:
            return b"{}\n" * batch.num_rows
        lines = _object(list(batch.columns), list(self.schema), None, close="}\n")
        return text.joined_bytes(lines)


# --- reading ----------------------------------------------------------------------------

def read_type(field: pa.Field) -> pa.DataType:
    """The type pyarrow's JSON reader parses a lading-encoded value into."""
    t = field.type
    if _ext(field).startswith(("interval year", "interval month")):
        return pa.string()
    if pa.types.is_boolean(t) or pa.types.is_null(t):
        return t
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_map(t):
        return pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", read_type(t.item_field))]))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(pa.field("element", read_type(t.value_field)))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, read_type(f)) for f in t])
    return pa.string()


def _has(t: pa.DataType, pred: Any) -> bool:
    if pred(t):
        return True
    if pa.types.is_map(t):
        return _has(t.key_type, pred) or _has(t.item_type, pred)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _has(t.value_type, pred)
    if pa.types.is_struct(t):
        return any(_has(f.type, pred) for f in t)
    return False


def _from_read(arr: pa.Array, field: pa.Field) -> pa.Array:
    """Convert what the JSON reader produced back into ``field``'s type."""
    t = field.type
    ext = _ext(field)
    if ext.startswith(("interval year", "interval month")):
        return text.parse_months_iso(arr)
    if pa.types.is_map(t):
        offsets, entries = text.list_parts(arr)
        keys_text, items = entries.flatten()
        keys = _parse_key(keys_text, t.key_field)
        values = _from_read(items, t.item_field)
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, values, type=t,
                                       mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        offsets, values = text.list_parts(arr)
        child = _from_read(values, t.value_field)
        out = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), child,
                                       mask=arr.is_null() if arr.null_count else None)
        return out.cast(t)
    if pa.types.is_struct(t) and t.num_fields == 0:  # {}: no children to carry the length
        return arr.cast(t)
    if pa.types.is_struct(t):
        children = [_from_read(c, f) for c, f in zip(arr.flatten(), t, strict=True)]
        return pa.StructArray.from_arrays(children, fields=list(t),
                                          mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return text.parse_base64(arr).cast(t)
    if pa.types.is_time(t):
        return text.parse_time(arr).cast(t)
    if pa.types.is_duration(t):
        return text.parse_daytime_iso(arr).cast(t)
    if pa.types.is_timestamp(t):
        return arr.cast(t)
    return arr.cast(t)


def _parse_key(keys: pa.Array, field: pa.Field) -> pa.Array:
    t = field.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return keys.cast(t)
    if _ext(field) or not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
        return _from_read(keys, field)
    if pa.types.is_boolean(t):
        return text.parse_bool(keys)
    return keys.cast(t)


class UnknownKey(ValueError):
    """A JSON object holds a key its schema lacks (``path``: ``a`` or ``a.b`` for a nested one)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"key {path!r} is not a column of the schema")
        self.path = path


def _unknown_key(value: Any, t: pa.DataType, path: str = "") -> str | None:
    """The first key of ``value`` (nested too) that the struct ``t`` lacks, else None."""
    if isinstance(value, dict) and pa.types.is_struct(t):
        for key, child in value.items():
            if t.get_field_index(key) < 0:
                return path + key
            found = _unknown_key(child, t.field(key).type, f"{path}{key}.")
            if found:
                return found
    elif isinstance(value, list) and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        for item in value:
            found = _unknown_key(item, t.value_type, path)
            if found:
                return found
    return None


def _first_unknown_key(values: Iterable[Any], read_schema: pa.Schema) -> str | None:
    """The first key, over ``values`` (parsed lines), that ``read_schema`` lacks, else None."""
    struct = pa.struct(list(read_schema))
    return next((found for value in values if (found := _unknown_key(value, struct)) is not None), None)


def _parsed_lines(data: bytes) -> Iterator[Any]:
    return (json.loads(line) for line in data.splitlines() if line.strip())


_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}  # as lading writes them


def _rowwise(data: bytes, read_schema: pa.Schema, known_keys_only: bool = False) -> pa.Table:
    """The slow path (maps, non-finite floats): Python's json per line."""
    def fix(value: Any, t: pa.DataType) -> Any:
        if value is None:
            return None
        if pa.types.is_floating(t) and isinstance(value, str):
            return _NON_FINITE[value] if value in _NON_FINITE else float(value)
        if pa.types.is_list(t):
            vt = t.value_type
            if pa.types.is_struct(vt) and isinstance(value, dict):  # a map, read as entries
                kt = vt.field("value").type
                return [{"key": k, "value": fix(v, kt)} for k, v in value.items()]
            return [fix(v, vt) for v in value]
        if pa.types.is_struct(t):
            return {f.name: fix(value.get(f.name), f.type) for f in t}
        return value

    struct = pa.struct(list(read_schema))
    values = list(_parsed_lines(data))
    if known_keys_only and (found := _first_unknown_key(values, read_schema)) is not None:
        raise UnknownKey(found)
    return pa.Table.from_pylist([fix(value, struct) for value in values], schema=read_schema)


def _infer_non_finite(raw: bytes) -> pa.Table | None:
    """Inference when pyarrow's refused a column mixing numbers with "NaN", "Infinity" or
    "-Infinity" (how lading writes non-finite floats): such columns are doubles. Row-wise,
    only after that refusal; None if no column is of that kind (the refusal stands)."""
    rows = list(_parsed_lines(raw))
    kinds: dict[str, set[str]] = {}
    for row in rows:
        for key, value in row.items():
            kind = ("number" if isinstance(value, int | float) and not isinstance(value, bool)
                    else "non-finite" if isinstance(value, str) and value in _NON_FINITE
                    else "null" if value is None else "other")
            kinds.setdefault(key, set()).add(kind)
    floats = {k for k, seen in kinds.items() if "number" in seen and seen <= {"number", "non-finite", "null"}}
    if not floats:
        return None
    for row in rows:
        for key in floats & row.keys():
            value = row[key]
            row[key] = _NON_FINITE[value] if isinstance(value, str) else None if value is None else float(value)
    return pa.Table.from_pylist(rows)


class NotAnObject(ValueError):
    """A line of a JSON lines file holds a value that is no object (``null``, ``5``, ``[1]``)."""


def non_object_lines(raw: bytes, bounds: tuple[np.ndarray, np.ndarray] | None = None) -> list[tuple[int, int, int]]:
    """(line number from 1, start, end) of each line holding something other than a JSON object.

    pyarrow's reader must never see one: it read a ``null`` line as a row of NULLs and
    crashed the process (SIGSEGV, pyarrow 26) on data of only such lines. Blank lines are
    not listed. Only lines that do not start with ``{`` are looked at one by one.
    ``bounds``: the lines' ``text.line_bounds``, when the caller has them."""
    starts, ends = bounds if bounds is not None else text.line_bounds(raw)
    out = []
    for i in np.flatnonzero(np.frombuffer(raw, np.uint8)[starts] != ord("{")).tolist():
        start, end = int(starts[i]), int(ends[i])
        line = raw[start:end].strip()
        if line and not line.startswith(b"{"):
            out.append((i + 1, start, end))
    return out


def blanked(raw: bytes, lines: list[tuple[int, int, int]]) -> bytes:
    """``raw`` with the ``lines`` (from ``non_object_lines``) turned into blanks of the same
    length, so every other line keeps its number and offsets."""
    if not lines:
        return raw
    buf = bytearray(raw)
    for _, start, end in lines:
        buf[start:end] = b" " * (end - start)
    return bytes(buf)


def check_objects(raw: bytes) -> None:
    """Raise ``NotAnObject`` naming the first line that is no JSON object (``non_object_lines``)."""
    bad = non_object_lines(raw)
    if bad:
        line, start, end = bad[0]
        shown = raw[start:end].strip()[:60].decode("utf-8", "replace")
        raise NotAnObject(f"line {line} is not a JSON object ({shown!r}); JSON lines hold one object per line")


def read_jsonl(data: bytes | pa.NativeFile, schema: pa.Schema | None = None, *,
               known_keys_only: bool = False) -> pa.Table:
    """Read JSON lines; with ``schema``, values are decoded per lading's encoding and cast.

    Without ``schema`` the types are inferred, strings staying strings (pyarrow would read
    ``"2024-01-01"`` as a timestamp and rewrite it); an empty file has no columns.
    ``known_keys_only``: a key ``schema`` lacks (nested too) raises :class:`UnknownKey`
    instead of being dropped. A missing key is NULL, as in any JSON reader. A line that
    is no object raises :class:`NotAnObject`."""
    raw = data if isinstance(data, bytes) else data.read()
    if not raw.strip():
        return schema.empty_table() if schema is not None else pa.table({})
    check_objects(raw)
    if schema is None:
        try:
            table = pj.read_json(pa.BufferReader(raw))
        except pa.ArrowInvalid as e:
            if "changed from" not in str(e) or (table := _infer_non_finite(raw)) is None:
                raise
            return table
        temporal = [pa.field(f.name, pa.string()) for f in table.schema if pa.types.is_temporal(f.type)]
        if not temporal:
            return table
        return pj.read_json(pa.BufferReader(raw), parse_options=pj.ParseOptions(explicit_schema=pa.schema(temporal)))
    read_schema = pa.schema([pa.field(f.name, read_type(f)) for f in schema])
    slow = any(_has(f.type, pa.types.is_map) for f in schema)
    table = None
    if not slow:
        try:
            table = pj.read_json(pa.BufferReader(raw), parse_options=pj.ParseOptions(
                explicit_schema=read_schema, unexpected_field_behavior="error" if known_keys_only else "ignore"))
        except pa.ArrowInvalid as e:
            if "unexpected field" in str(e):
                raise UnknownKey(_first_unknown_key(_parsed_lines(raw), read_schema) or "?") from e
            if "changed from" not in str(e) or not any(_has(f.type, pa.types.is_floating) for f in schema):
                raise
    if table is None:
        table = _rowwise(raw, read_schema, known_keys_only)
    columns = [_from_read(table.column(f.name).combine_chunks(), f) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)
