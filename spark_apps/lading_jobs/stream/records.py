"""Kafka messages → table rows, with ingest's decoding and per-row error handling.

``valueFormat: json``: the values of one range are joined into JSON lines and
decoded by ingest's JSON-lines decoder (``ingest.decode``); rows are fitted to the
table by ingest's ``Conformer`` (columns by name, exact casts, NOT NULL), so a
message that does not parse or convert is a *reject* with its reason, never a
changed row. ``valueFormat: raw``: the message's own columns (key, value, topic,
partition, offset, timestamp, headers) go through the same ``Conformer``, so a
table may declare e.g. ``value`` as ``string`` and get UTF-8 checked.

Upsert tables: key columns the value lacks come from the message key (a JSON
object supplies columns by name; any other key is the text of the one key
column), a message without a value (a tombstone) is a delete marker for its
key, and of several messages for one key in a range only the last (highest
offset) is written, so rows of equal logical time never need an order inside a
part. Each reject carries its coordinates (topic, partition, offset).

With ``spec.transform`` a range is instead the decode step of ingest's transform
(``source_batches``; ``ingest.transform.run_stage`` does the rest): the view ``source``
holds, for ``raw``, the message's own columns, and for ``json`` one string per named
key (``transform.fields``, else the table's column names): the key's JSON value as
text, like a CSV field (a string unquoted, a number its digits, ``true``/``false``,
an object or array its JSON; an absent key or ``null`` is NULL). Each row's position
is its offset.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.ingest import transform as tf
from lading_jobs.ingest.conform import Conformer, FileError
from lading_jobs.ingest.decode import MAX_RAW, Decoded, Piece, decode_json
from lading_jobs.ingest.task import exact_number_columns, verbatim_columns
from lading_jobs.stream.kafka import HEADERS_TYPE, Messages
from lading_jobs.table import consolidate
from lading_jobs.table import format as fmt
from lading_jobs.table.evolve import Found
from lading_jobs.table.schema import Column, TableSchema, arrow_type

POS = "__lading_pos"
"""A column carried through conforming: each row's message index in its range."""
DIFF_IN = "__lading_diff"
"""The value's ``_lading_diff`` while it is conformed (the table's own name is reserved)."""


@dataclass
class Rows:
    """A range decoded: good rows (table columns + ``_lading_diff``) and rejects (dead-letter entries)."""

    table: pa.Table
    rejects: list[dict[str, Any]] = field(default_factory=list)
    found: list[Found] = field(default_factory=list)  # columns the table lacks (schemaEvolution)


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    text = data.decode("utf-8", errors="backslashreplace")
    return text if len(text) <= MAX_RAW else text[:MAX_RAW] + "…"


def _with_pos(schema: TableSchema, diff: bool = False) -> TableSchema:
    """``schema`` plus ``POS``, and with ``diff`` the value's ``_lading_diff`` (bigint, required)."""
    extra = [Column(schema.last_column_id + 1, POS, "bigint", False)]
    if diff:
        extra.append(Column(schema.last_column_id + 2, DIFF_IN, "bigint", False))
    return TableSchema((*schema.columns, *extra))


class _Rejects:
    def __init__(self, msgs: Messages) -> None:
        self.msgs = msgs
        self.entries: list[dict[str, Any]] = []

    def add(self, i: int, reason: str, column: str | None = None, record: str | None = None) -> None:
        m = self.msgs
        column = fmt.DIFF_COLUMN if column == DIFF_IN else column
        entry: dict[str, Any] = {"topic": m.rng.topic, "partition": m.rng.partition, "offset": m.offsets[i],
                                 "timestamp": m.timestamps[i], "key": _text(m.keys[i]), "column": column,
                                 "reason": reason,
                                 "record": record if record is not None else _text(m.values[i])}
        self.entries.append(entry)


def key_table(keys: list[bytes | None], names: list[str]) -> pa.Table:
    """Key columns from message keys as text, one row per message (NULL where the key supplies none).

    A key that is a JSON object supplies columns by name (numbers keep their text);
    any other key is the text of the single key column. Keys are small, so they are
    read one by one; the Conformer casts the text to the columns' types.
    """
    if not names:
        return pa.table({})
    cols: dict[str, list[str | None]] = {name: [None] * len(keys) for name in names}
    folded = {name.lower(): name for name in names}
    for i, k in enumerate(keys):
        if k is None:
            continue
        if k.lstrip().startswith(b"{"):
            try:
                obj = json.loads(k, parse_float=str, parse_int=str)
            except ValueError:
                continue
            if isinstance(obj, dict):
                for field_name, v in obj.items():
                    name = folded.get(str(field_name).lower())
                    if name is not None and v is not None:
                        cols[name][i] = v if isinstance(v, str) else json.dumps(v)
        elif len(names) == 1:
            try:
                cols[names[0]][i] = k.decode("utf-8")
            except UnicodeDecodeError:
                continue
    return pa.table({name: pa.array(values, pa.string()) for name, values in cols.items()})


def _has_column(table: pa.Table, name: str) -> bool:
    return name.lower() in {c.lower() for c in table.column_names}


def _key_from_message(table: pa.Table, name: str, from_key: pa.ChunkedArray) -> pa.Table:
    """``table`` with key column ``name`` taken from the message key where the value lacks it
    (under every spelling: the Conformer takes ``ID`` where ``id`` is NULL)."""
    found = sorted((c for c in table.column_names if c.lower() == name.lower()), key=lambda c: c != name)
    if not found:
        return table.append_column(name, from_key)
    col = table.column(found[0])
    lacking = pc.is_null(col)
    for other in found[1:]:
        lacking = pc.and_(lacking, pc.is_null(table.column(other)))
    if not pc.any(lacking).as_py():
        return table
    try:
        merged = pc.if_else(lacking, from_key.cast(pa.string()), col.cast(pa.string()))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return table  # a key that is not text: the value's own (NULL) stands, and is checked
    return table.set_column(table.column_names.index(found[0]), found[0], merged)


def _conform(piece: Piece, schema: TableSchema, unit: str, raw: Any, rejects: _Rejects,
             index: np.ndarray, discover: tuple[str, list[Found]] | None = None) -> pa.Table | None:
    """One piece through ingest's Conformer; rejects mapped back to their messages. With
    ``discover`` (where, found), columns the table lacks are appended to ``found``."""
    decoded = Decoded(unit=unit, pieces=[piece], raw=raw)
    conformer = Conformer(decoded, schema, discover=discover[0] if discover is not None else None)
    try:
        tables = list(conformer.tables())
    except FileError as e:
        for pos in piece.positions.tolist():
            rejects.add(int(index[pos - 1]), str(e))
        return None
    finally:
        if discover is not None:
            discover[1].extend(conformer.found)
    for r in conformer.rejects:
        rejects.add(int(index[r.position - 1]), r.reason, r.column)
    return pa.concat_tables(tables) if tables else None


def _json_pieces(msgs: Messages, rejects: _Rejects, exact: Collection[str],
                 verbatim: Collection[str] = ()) -> tuple[Decoded, np.ndarray]:
    """The non-empty values as one JSON-lines buffer, decoded as a file load decodes it; line k
    is message ``index[k-1]``. Numbers under the ``exact`` keys (the table's integer and decimal
    columns, or a transform's fields) are read from their text, never through a float, and
    strings stay strings (pyarrow would rewrite ``"2024-01-02T10:00:00+02:00"`` as a timestamp);
    numbers and nested values under the ``verbatim`` keys (text and json columns) keep their text."""
    index = []
    lines = []
    for i, v in enumerate(msgs.values):
        if v is None:
            continue
        if not v.strip():
            rejects.add(i, "empty value: expected one JSON object")
            continue
        if b"\n" in v or b"\r" in v:  # a pretty-printed object: raw newlines are only whitespace in JSON
            try:
                json.loads(v)
            except ValueError as e:
                rejects.add(i, f"not a JSON object: {e}")
                continue
            v = v.replace(b"\r", b" ").replace(b"\n", b" ")
        index.append(i)
        lines.append(v)
    if not lines:
        return Decoded(unit="line"), np.asarray(index, dtype=np.int64)
    decoded = decode_json(b"\n".join(lines), exact=exact, text=True, verbatim=verbatim)
    return decoded, np.asarray(index, dtype=np.int64)


def _values(msgs: Messages, schema: TableSchema, value_format: str, key_columns: tuple[str, ...],
            keys: pa.Table, rejects: _Rejects, discover: tuple[str, list[Found]] | None = None,
            diff: bool = False) -> Iterator[pa.Table]:
    """Conformed rows of the messages that have a value (plus ``POS``; with ``diff``, the value's
    ``_lading_diff`` as a required exact bigint: a value without it is a reject naming it)."""
    target = _with_pos(schema, diff)
    if value_format == "raw":
        raw = msgs.raw_table()
        n = raw.num_rows
        if not n:
            return
        identity = np.arange(n, dtype=np.int64)
        piece = Piece(raw.append_column(POS, pa.array(identity)), identity + 1)
        table = _conform(piece, target, "row", None, rejects, identity)
        if table is not None:
            yield table
        return
    exact = [*exact_number_columns(schema), *([fmt.DIFF_COLUMN] if diff else [])]
    decoded, index = _json_pieces(msgs, rejects, exact, verbatim_columns(schema))
    for r in decoded.rejects:
        rejects.add(int(index[r.position - 1]), r.reason, r.column)
    for piece in decoded.iter_pieces():
        at = index[piece.positions - 1]
        t = piece.table
        if diff:
            t = t.rename_columns([DIFF_IN if c == fmt.DIFF_COLUMN else c for c in t.column_names])
        for name in key_columns:
            if name in keys.column_names:
                t = _key_from_message(t, name, keys.column(name).take(pa.array(at)))
        table = _conform(Piece(t.append_column(POS, pa.array(at)), piece.positions), target, "line",
                         decoded.raw, rejects, index, discover)
        if table is not None:
            yield table


def _tombstones(msgs: Messages, schema: TableSchema, key_columns: tuple[str, ...], keys: pa.Table,
                rejects: _Rejects) -> pa.Table | None:
    """Delete markers (upsert) for the messages without a value: key columns from the key."""
    idx = np.asarray([i for i, v in enumerate(msgs.values) if v is None], dtype=np.int64)
    if not len(idx):
        return None
    key_schema = _with_pos(TableSchema(tuple(c for c in schema.columns if c.name in key_columns)))
    t = keys.take(pa.array(idx)) if keys.num_columns else pa.table({})
    keep = np.zeros(len(idx), dtype=bool)
    for name in key_columns if t.num_columns else ():
        keep |= np.asarray(pc.is_valid(t.column(name)).to_numpy(zero_copy_only=False), dtype=bool)
    for i in idx[~keep].tolist():
        rejects.add(i, "a tombstone (no value) without a key deletes nothing: the key supplies no key column")
    idx, t = idx[keep], t.filter(pa.array(keep))
    if not len(idx):
        return None
    piece = Piece(t.append_column(POS, pa.array(idx)), np.arange(1, len(idx) + 1, dtype=np.int64))
    got = _conform(piece, key_schema, "row", None, rejects, idx)
    if got is None or not got.num_rows:
        return None
    n = got.num_rows
    cols = {c.name: (got.column(c.name) if c.name in key_columns else pa.nulls(n, arrow_type(c.type)))
            for c in schema.columns}
    cols[POS] = got.column(POS)
    cols[fmt.DIFF_COLUMN] = pa.repeat(pa.scalar(-1, pa.int64()), n)
    return pa.table(cols)


def last_per_key(table: pa.Table, key_columns: tuple[str, ...]) -> pa.Table:
    """Only each key's row with the highest ``POS`` (the latest message)."""
    if table.num_rows < 2:
        return table
    latest = consolidate.rank_per_key(table, key_columns, table.column(POS), "max")
    return table.filter(pc.is_in(table.column(POS), value_set=latest))


def decode_messages(msgs: Messages, schema: TableSchema, value_format: str, envelope: str,
                    key_columns: tuple[str, ...], discover: str | None = None) -> Rows:
    """The range's rows for the table, in offset order (see the module doc), and its rejects.
    ``discover`` (the range, for messages): also report the JSON fields the table lacks."""
    rejects = _Rejects(msgs)
    found: list[Found] = []
    seek = (discover, found) if discover is not None and value_format == "json" else None
    upsert = envelope == "upsert"
    keys = key_table(msgs.keys, list(key_columns)) if upsert and value_format == "json" else pa.table({})
    tables = []
    carried = envelope == "diff" and value_format == "json"  # the value's own _lading_diff
    for t in _values(msgs, schema, value_format, key_columns if upsert else (), keys, rejects, seek, carried):
        if carried:
            t = t.rename_columns([fmt.DIFF_COLUMN if c == DIFF_IN else c for c in t.column_names])
            zero = pc.equal(t.column(fmt.DIFF_COLUMN), 0)
            for at in t.filter(zero).column(POS).to_pylist():
                rejects.add(int(at), f"{fmt.DIFF_COLUMN} is 0: a diff row says +n (n inserts) or -n (n retractions)",
                            fmt.DIFF_COLUMN)
            tables.append(t.filter(pc.invert(zero)))
            continue
        diff = pa.repeat(pa.scalar(1, pa.int64()), t.num_rows)
        if upsert and value_format == "raw":  # a raw message without a value deletes its key
            diff = pc.if_else(pc.is_null(t.column("value")) if "value" in t.column_names
                              else pa.repeat(pa.scalar(False), t.num_rows), -1, 1).cast(pa.int64())
        tables.append(t.append_column(fmt.DIFF_COLUMN, diff))
    if value_format == "json":
        if upsert:
            marks = _tombstones(msgs, schema, key_columns, keys, rejects)
            if marks is not None:
                tables.append(marks.select(tables[0].column_names).cast(tables[0].schema) if tables else marks)
        else:
            for i, v in enumerate(msgs.values):
                if v is None:
                    rejects.add(i, "a message without a value (a tombstone) deletes only in an upsert table")
    names = [c.name for c in schema.columns] + [POS, fmt.DIFF_COLUMN]
    if tables:
        table = pa.concat_tables([t.select(names) for t in tables])
    else:
        table = pa.schema([pa.field(c.name, arrow_type(c.type)) for c in schema.columns]
                          + [pa.field(POS, pa.int64()), pa.field(fmt.DIFF_COLUMN, pa.int64())]).empty_table()
    if upsert:
        table = last_per_key(table, key_columns)
    table = in_order(table).drop_columns([POS])
    rejects.entries.sort(key=lambda e: e["offset"])
    return Rows(table, rejects.entries, first_of_each(found))


def in_order(table: pa.Table) -> pa.Table:
    """``table`` in ``POS`` order; rows already in order (most ranges: pieces decode in message
    order) are not copied."""
    at = table.column(POS)
    if table.num_rows < 2 or pc.all(pc.less(at.slice(0, len(at) - 1), at.slice(1))).as_py():
        return table
    return table.sort_by(POS)


def first_of_each(found: list[Found]) -> list[Found]:
    """One report per column name and type, in the order first seen (``evolve`` merges the rest)."""
    out: dict[tuple[str, str], Found] = {}
    for f in found:
        out.setdefault((f.name, f.type), f)
    return list(out.values())


# -- a range as a transform's source ---------------------------------------------------

RAW_SOURCE = pa.schema([pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
                        pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
                        pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("headers", HEADERS_TYPE)])
"""The view ``source`` of a transform on a ``raw`` Kafka source (``Messages.raw_table``)."""


def transform_source(value_format: str, fields: tuple[str, ...], schema: TableSchema) -> pa.Schema:
    """The view ``source`` of a transform on a Kafka source (see the module doc)."""
    if value_format == "raw":
        return RAW_SOURCE
    return pa.schema([pa.field(n, pa.string()) for n in (fields or tuple(schema.names))])


def _as_text(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A decoded JSON column as the text of its values (vectorised but for objects and arrays)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    typ = arr.type
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return arr.cast(pa.string())
    if pa.types.is_null(typ):
        return pa.nulls(len(arr), pa.string())
    if pa.types.is_decimal(typ):  # exact numbers: the digits, without the scale's trailing zeros
        text = pc.replace_substring_regex(arr.cast(pa.string()), r"(\.\d*?)0+$", r"\1")
        return pc.replace_substring_regex(text, r"\.$", "")
    if pa.types.is_integer(typ) or pa.types.is_boolean(typ) or pa.types.is_floating(typ):
        return arr.cast(pa.string())
    return pa.array([None if v is None else json.dumps(v, ensure_ascii=False, default=str)
                     for v in arr.to_pylist()], pa.string())


def _text_table(table: pa.Table, source: pa.Schema) -> pa.Table:
    n = table.num_rows
    return pa.Table.from_arrays([_as_text(table.column(f.name)) if f.name in table.column_names
                                 else pa.nulls(n, pa.string()) for f in source], schema=source)


def source_batches(chunks: Iterable[Messages], value_format: str, source: pa.Schema) -> Iterator[pa.RecordBatch]:
    """One range (its chunks, ``kf.read_chunks``) as the transform's decode step: its records as rows
    of ``source`` at their offsets, chunk by chunk, the messages that do not decode as REJECT rows,
    then one SUMMARY row."""
    entries: list[dict[str, Any]] = []
    read = size = 0
    for msgs in chunks:
        read += len(msgs)
        size += msgs.bytes
        offsets = np.asarray(msgs.offsets, dtype=np.int64)
        rejects = _Rejects(msgs)
        if value_format == "raw":
            if len(msgs):
                yield from tf.data_batches(msgs.raw_table(), offsets, source)
        else:
            decoded, index = _json_pieces(msgs, rejects, source.names)
            for r in decoded.rejects:
                rejects.add(int(index[r.position - 1]), r.reason, r.column)
            for i, v in enumerate(msgs.values):
                if v is None:
                    rejects.add(i, "a message without a value (a tombstone) deletes only in an upsert table")
            for piece in decoded.iter_pieces():
                yield from tf.data_batches(_text_table(piece.table, source), offsets[index[piece.positions - 1]],
                                           source)
        entries.extend(rejects.entries)
        del msgs
    if entries:
        info = [json.dumps({"reason": e["reason"], "column": e["column"], "record": e["record"]}) for e in entries]
        yield tf.meta_batch(len(info), tf.REJECT, info, [e["offset"] for e in entries], source)
    summary = {"unit": "offset", "rowsRead": read, "bytes": size}
    yield tf.meta_batch(1, tf.SUMMARY, [json.dumps(summary)], [0], source)
