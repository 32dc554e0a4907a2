"""One Parquet output file with a hard size ceiling, footer included.

Rows are buffered into row groups of ``rowGroupSize`` rows (default ~1 M: small
row groups make files larger) and written by pyarrow into a ``PartSink``. The
footer's size is bounded before it exists: the exact footer of an empty file
with this schema, plus, per row group, a bound on each leaf column's metadata
(a byte-array column's statistics are the group's minimum and maximum value,
each at most 4096 bytes, Arrow's ``max_statistics_size``). A row group is written unmeasured only when its
estimate (Arrow bytes × the largest Parquet/Arrow ratio seen) is well inside
the room left; near the ceiling the candidate row group is first encoded into
memory to learn its exact size (encoding is deterministic, so the real write
takes the same bytes) and shrunk until it fits.

Column statistics are not computed twice: the byte-array bounds the footer
reserve needs are the statistics' bounds too (one ``min_max`` per row group),
and integer, decimal and temporal bounds are read from the footer the writer
wrote (``filestats.FileStats.add_footer``), where they equal what computing them
would give; floats are computed (see ``filestats``).

String and binary columns may also be handed over as dictionary arrays (a
compaction reads them so from parts that stored them dictionary-encoded,
``dictionary_file``): their dictionaries are unified per row group and written as
they are, indices and all, without turning every value back into a string and
hashing it again. The file is what the plain columns give: the Arrow schema stored
in it is the plain one (``stored_schema``), its key-value metadata and statistics are
the same (a row group's dictionary page may also hold a value only a neighbouring
row group uses).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lading_jobs.formats.filestats import FileStats, footer_physicals
from lading_jobs.formats.types import parquet_leaves
from lading_jobs.sink import PartSink

FULL_SLACK = 0.05
SAFE_FRACTION = 0.6  # write unmeasured only if the estimate is below this share of the room
MAX_STAT = 4096  # Arrow's max_statistics_size: larger min/max are not written
MAX_PENDING_BYTES = 128 * 1024 * 1024  # Arrow bytes held before a row group is written anyway


class FileTooSmall(ValueError):
    """The limit cannot hold a single row plus the footer."""


DICTIONARY_SAMPLE_ROWS = 8192
DICTIONARY_MIN_SAMPLE = 1024
DICTIONARY_PAGE_BYTES = 1024 * 1024
"""pyarrow's ``dictionary_pagesize_limit`` (its default): past it a column chunk's dictionary is
abandoned and the rest of its values are written plain."""


def _sampled(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_timestamp(t)
            or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_duration(t))


def _stored_width(t: pa.DataType) -> int:
    """Bytes one value of ``t`` (``_sampled``) takes in a Parquet dictionary page: a decimal's
    fixed-length bytes are as few as its precision needs, as pyarrow writes them."""
    if pa.types.is_decimal(t):
        return next(n for n in range(1, 33) if 2 ** (8 * n - 1) > 10**t.precision)
    return max(1, t.bit_width // 8)


def estimated_distinct(values: pa.Array) -> float:
    """How many distinct values the column the non-null sample ``values`` comes from has
    (Chao's bias-corrected estimator, from how many values the sample holds once and twice:
    ``d + f1 (f1 - 1) / (2 (f2 + 1))``); a sample without repeats gives about its size squared."""
    counts = pc.value_counts(values).field("counts")
    once = pc.sum(pc.equal(counts, 1)).as_py() or 0
    twice = pc.sum(pc.equal(counts, 2)).as_py() or 0
    return len(counts) + once * (once - 1) / (2 * (twice + 1))


def dictionary_columns(sample: pa.RecordBatch | pa.Table) -> bool | list[str]:
    """The columns worth dictionary encoding, judged from a task's first rows.

    Parquet writers try a dictionary for every column and fall back to plain
    encoding once the dictionary page is full (``DICTIONARY_PAGE_BYTES``); for a
    column of (nearly) distinct values (ids, event times, amounts) that hashing is
    wasted: it made pyarrow's Parquet encoding about twice as slow on the
    benchmark's data, and the abandoned dictionary page makes the file larger. A
    numeric or temporal column is written plain when its first 8192 non-null
    values say its distinct values (``estimated_distinct``) would not fit in one
    dictionary page: a sample without any repeat, or with a few repeated values
    (NaN, infinities, a default) among mostly distinct ones. Every other column
    (strings included: a short sample says little about their cardinality) keeps
    the dictionary. ``True`` means all of them (also for nested schemas, whose
    leaf paths are left to pyarrow).
    """
    if any(pa.types.is_nested(f.type) for f in sample.schema):
        return True
    head = sample.slice(0, DICTIONARY_SAMPLE_ROWS)
    keep: list[str] = []
    for field, column in zip(sample.schema, head.columns, strict=True):
        if _sampled(field.type):
            values = column.drop_null()
            if (len(values) >= DICTIONARY_MIN_SAMPLE
                    and estimated_distinct(values) * _stored_width(field.type) > DICTIONARY_PAGE_BYTES):
                continue
        keep.append(field.name)
    return True if len(keep) == len(sample.schema) else keep


def writer_options(compression: str, use_dictionary: bool | list[str] = True,
                   decimals_as_integers: bool = False) -> dict[str, Any]:
    """pyarrow's writer options for lading's Parquet files. ``decimals_as_integers``: decimals of
    precision up to 9 and 18 stored as INT32 and INT64 (as Spark's own writer and the Parquet
    spec's recommendation store them; unloads, so a Spark-written source's decimal chunks are
    copied as they are, ``unload.chunkcopy``), else all in fixed-length bytes (tables: the parts
    lading's loads and compactions write, whose chunks compactions copy)."""
    return {
        "compression": "NONE" if compression == "none" else compression.upper(),
        "use_dictionary": use_dictionary,
        "write_statistics": True,
        "write_page_index": False,
        "store_schema": True,
        "store_decimal_as_integer": decimals_as_integers,
    }


STORED_METADATA = "stored_metadata"
"""An options entry (not pyarrow's): key-value metadata the file gets instead of the writer schema's own."""
ARROW_SCHEMA_KEY = "ARROW:schema"


def parquet_writer(where: Any, schema: pa.Schema, options: dict[str, Any], **extra: Any) -> pq.ParquetWriter:
    """``pq.ParquetWriter`` with ``options`` (``writer_options``, maybe ``stored_schema``'s)."""
    opts = dict(options)
    stored = opts.pop(STORED_METADATA, None)
    writer = pq.ParquetWriter(where, schema, **opts, **extra)
    if stored is not None:
        writer.add_key_value_metadata(stored)
    return writer


def _byte_array(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t)


def dictionary_file(schema: pa.Schema, names: Sequence[str], options: dict[str, Any]
                    ) -> tuple[pa.Schema, dict[str, Any]] | None:
    """The writer schema and options that take the string or binary columns ``names`` as dictionary
    arrays (int32 indices, as pyarrow's Parquet reader returns them) and still write the file
    ``schema`` and ``options`` write: the plain Arrow schema and ``schema``'s metadata are stored
    (``stored_schema``). ``None`` when there is no such column, or when the two files' Parquet
    schemas or metadata would differ (checked on empty files: then write the plain columns)."""
    wanted = set(names)
    fields = [f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in wanted and _byte_array(f.type) else f
              for f in schema]
    if all(a.type == b.type for a, b in zip(fields, schema, strict=True)):
        return None
    dict_schema = pa.schema(fields)
    dict_options = {**options, "store_schema": False, STORED_METADATA: stored_schema(schema)}
    try:
        plain, dictionary = (_empty_metadata(s, o) for s, o in ((schema, options), (dict_schema, dict_options)))
    except (pa.ArrowException, ValueError):
        return None
    if not plain.schema.equals(dictionary.schema) or plain.metadata != dictionary.metadata:
        return None
    return dict_schema, dict_options


def stored_schema(schema: pa.Schema) -> dict[bytes, bytes]:
    """The key-value metadata pyarrow stores for ``schema`` (``store_schema=True``): the Arrow schema,
    serialized and base64-encoded, and the schema's own metadata."""
    return {ARROW_SCHEMA_KEY.encode(): base64.b64encode(schema.serialize().to_pybytes()), **(schema.metadata or {})}


def _empty_metadata(schema: pa.Schema, options: dict[str, Any]) -> pq.FileMetaData:
    buf = pa.BufferOutputStream()
    parquet_writer(buf, schema, options).close()
    return pq.read_metadata(pa.BufferReader(buf.getvalue()))


def unify(table: pa.Table) -> pa.Table:
    """``table`` with one dictionary per dictionary column (what Parquet writes as one dictionary page)."""
    return table.unify_dictionaries() if any(pa.types.is_dictionary(f.type) for f in table.schema) else table


def _referenced(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary column's values that its indices reference (each once): a plain array for ``min_max``."""
    return pa.chunked_array([chunk.dictionary.take(pc.unique(chunk.indices).drop_null()) for chunk in column.chunks],
                            column.type.value_type)


class FooterModel:
    """Exact empty-file size and a per-row-group bound for one schema (computed once per task)."""

    def __init__(self, schema: pa.Schema, options: dict[str, Any]) -> None:
        buf = pa.BufferOutputStream()
        parquet_writer(buf, schema, options).close()
        data = buf.getvalue()
        self.empty_size = len(data)
        md = pq.read_metadata(pa.BufferReader(data))
        fixed = 96
        self.nested_byte_arrays = 0
        for i in range(len(md.schema)):
            col = md.schema.column(i)
            if col.physical_type == "BYTE_ARRAY":
                if "." in col.path:
                    self.nested_byte_arrays += 1
                stat = 0  # counted per row group from the data (see reserve)
            else:
                stat = max(16, col.length or 0)
            fixed += 256 + 4 * stat + 2 * len(col.path)
        self.fixed_per_row_group = fixed
        self.top_byte_arrays = [i for i, f in enumerate(schema) if _byte_array(f.type)
                                or (pa.types.is_dictionary(f.type) and _byte_array(f.type.value_type))]
        self.footer_columns = _footer_columns(schema, md)

    def bounds(self, table: pa.Table) -> dict[int, tuple[pa.Scalar, pa.Scalar]]:
        """``min_max`` of every top-level byte-array column holding values, by position."""
        out = {}
        for i in self.top_byte_arrays:
            column = table.column(i)
            if column.null_count != len(column):
                mm = pc.min_max(_referenced(column) if pa.types.is_dictionary(column.type) else column)
                out[i] = (mm["min"], mm["max"])
        return out

    def reserve(self, table: pa.Table, bounds: dict[int, tuple[pa.Scalar, pa.Scalar]] | None = None) -> int:
        """A bound on the footer bytes one row group of ``table`` adds.

        A byte-array column chunk's statistics hold the group's minimum and maximum
        value once each (``min_value``/``max_value``; pyarrow writes neither the
        deprecated ``min``/``max`` for them nor values over ``MAX_STAT`` bytes), so
        the reserve is the byte lengths of the two values Arrow's byte-wise
        ``min_max`` (Parquet's order for strings and binary) finds, each capped
        at ``MAX_STAT``. Nested leaves keep the coarse bound."""
        stats = 2 * MAX_STAT * self.nested_byte_arrays
        for pair in (self.bounds(table) if bounds is None else bounds).values():
            for value in pair:
                stats += min(MAX_STAT, len(value.as_buffer()) if value.is_valid else 0)
        return self.fixed_per_row_group + stats

    def least(self) -> int:
        """The smallest footer a file with one row group can have its reserve for: the empty
        file's plus one row group's, byte-array statistics not counted (they are the data's,
        measured when a row group is written, where a row that does not fit is refused)."""
        return self.empty_size + self.fixed_per_row_group + 2 * MAX_STAT * self.nested_byte_arrays


def _footer_columns(schema: pa.Schema, md: pq.FileMetaData) -> tuple[tuple[int, int], ...]:
    """(position, leaf index) of the top-level columns whose bounds come from the footer: the
    types of ``filestats.footer_physicals``, where the file's own schema says the leaf is that column,
    of one of those physical types (anything unexpected: the bounds are computed)."""
    out = []
    leaf = 0
    for i, field in enumerate(schema):
        expected = footer_physicals(field.type)
        if leaf >= len(md.schema):
            return ()
        col = md.schema.column(leaf)
        if col.path == field.name and col.physical_type in expected:
            out.append((i, leaf))
        leaf += parquet_leaves(field.type)
    return tuple(out) if leaf == len(md.schema) else ()


def _encoded_size(table: pa.Table, schema: pa.Schema, options: dict[str, Any]) -> int:
    """The bytes ``table`` takes as one row group (file size minus magic, footer, length)."""
    buf = pa.BufferOutputStream()
    with parquet_writer(buf, schema, options) as w:
        w.write_table(table, row_group_size=max(1, table.num_rows))
    data = buf.getvalue()
    footer_len = int.from_bytes(data[-8:-4].to_pybytes(), "little")
    return len(data) - 4 - footer_len - 8


class ParquetFile:
    def __init__(self, sink: PartSink, schema: pa.Schema, options: dict[str, Any], footer: FooterModel,
                 max_size: int, row_group_rows: int, ratio: list[float], column_stats: bool = True,
                 observe: Callable[[pa.Table, dict[int, tuple[pa.Scalar, pa.Scalar]]], None] | None = None) -> None:
        """``column_stats=False``: count rows only (a caller that computes its own statistics);
        ``observe`` is called with each row group written and its byte-array bounds (``FooterModel.bounds``)."""
        self.sink, self.schema, self.options, self.footer = sink, schema, options, footer
        self.max_size, self.row_group_rows = max_size, row_group_rows
        self.ratio = ratio  # shared per task: [largest parquet bytes / arrow bytes seen]
        self.observe = observe
        self.stats = FileStats(schema, columns=column_stats)
        self.later = frozenset(p for p, _ in footer.footer_columns) if column_stats else frozenset()
        self.collected: list[pq.FileMetaData] = []
        self.row_groups = 0
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.pending_bytes = 0
        self.is_full = False
        self.footer_reserved = footer.empty_size
        if footer.least() >= max_size:
            raise FileTooSmall(f"to.maxFileSize: {max_size} bytes cannot hold a Parquet footer for this "
                               f"schema (about {footer.least()} bytes); raise it")
        self.writer = parquet_writer(pa.PythonFile(sink, mode="w"), schema, options, metadata_collector=self.collected)

    @property
    def rows(self) -> int:
        return self.stats.rows + self.pending_rows

    @property
    def full(self) -> bool:
        return self.is_full

    def _room(self, candidate: pa.Table | None = None,
              bounds: dict[int, tuple[pa.Scalar, pa.Scalar]] | None = None) -> int:
        """Bytes a next row group (``candidate``, its byte-array ``bounds``) may take, its footer share set aside."""
        extra = self.footer.reserve(candidate, bounds) if candidate is not None else self.footer.fixed_per_row_group
        return self.max_size - self.sink.size - self.footer_reserved - extra

    def write(self, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        """Buffer ``batch``; write row groups as they fill; return rows that did not fit."""
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        self.pending_bytes += batch.nbytes
        est = self.pending_bytes * self.ratio[0]
        near_ceiling = est >= SAFE_FRACTION * self._room()
        if self.pending_rows >= self.row_group_rows or self.pending_bytes >= MAX_PENDING_BYTES or near_ceiling:
            # Enough rows for a row group: write the whole row groups and keep the rest pending (small
            # input batches would otherwise leave a runt row group at every flush), unless the ceiling
            # is near, where every pending row is measured now.
            rest = self._flush(keep_tail=not near_ceiling and self.pending_bytes < MAX_PENDING_BYTES)
            if rest is not None:
                return rest.combine_chunks().to_batches()[0] if rest.num_rows else None
        return None

    def _write_group(self, table: pa.Table, bounds: dict[int, tuple[pa.Scalar, pa.Scalar]]) -> None:
        before = self.sink.size
        self.writer.write_table(table, row_group_size=max(1, table.num_rows))
        self.row_groups += 1
        self.footer_reserved += self.footer.reserve(table, bounds)
        self.stats.update(table, {i: (lo.as_py(), hi.as_py()) for i, (lo, hi) in bounds.items()}, self.later)
        if self.observe is not None:
            self.observe(table, bounds)
        if table.nbytes:
            self.ratio[0] = max(self.ratio[0], (self.sink.size - before) / table.nbytes)

    def _flush(self, keep_tail: bool = False) -> pa.Table | None:
        """Write the pending rows as row groups; return the rows left over once the file is full.

        ``keep_tail``: write only whole row groups of ``row_group_rows``; the rows after
        the last whole one stay pending for the next.
        """
        if not self.pending:
            return None
        table = unify(pa.Table.from_batches(self.pending, self.schema))
        self.pending, self.pending_rows, self.pending_bytes = [], 0, 0
        tail: pa.Table | None = None
        if keep_tail and table.num_rows > self.row_group_rows:
            whole = table.num_rows - table.num_rows % self.row_group_rows
            table, tail = table.slice(0, whole), table.slice(whole)
        rest = self._write_groups(table)
        if tail is not None and tail.num_rows:
            if rest is not None:
                return pa.concat_tables([rest, tail])
            self.pending = tail.to_batches()
            self.pending_rows, self.pending_bytes = tail.num_rows, tail.nbytes
        return rest

    def _write_groups(self, table: pa.Table) -> pa.Table | None:
        """Write ``table`` as row groups; return the rows left over once the file is full."""
        while table.num_rows:
            take = min(table.num_rows, self.row_group_rows)
            head = table.slice(0, take)
            bounds = self.footer.bounds(head)
            room = self._room(head, bounds)
            if head.nbytes * self.ratio[0] < SAFE_FRACTION * room:
                self._write_group(head, bounds)
                table = table.slice(take)
                continue
            size = _encoded_size(head, self.schema, self.options)
            while size > room:
                if take == 1:
                    if self.row_groups == 0:
                        raise FileTooSmall(f"to.maxFileSize: one row takes {size} bytes in Parquet, more than "
                                           f"the {room} bytes the limit leaves beside the footer; raise it")
                    self.is_full = True
                    return table
                take = max(1, min(take - 1, int(take * room / size * 0.97)))
                head = table.slice(0, take)
                bounds = self.footer.bounds(head)
                room = self._room(head, bounds)
                size = _encoded_size(head, self.schema, self.options)
            self._write_group(head, bounds)
            table = table.slice(take)
            if self._room() < FULL_SLACK * self.max_size:
                self.is_full = True
                return table
        return None

    def close(self) -> None:
        """Write what is pending and the footer (rows left over here are a bug: they were checked)."""
        rest = self._flush()
        if rest is not None and rest.num_rows:
            raise RuntimeError("internal: rows left over at close of a Parquet file")
        self.writer.close()
        if self.later:
            self.stats.add_footer(self.collected[-1], self.footer.footer_columns)
        if self.sink.size > self.max_size:
            raise RuntimeError(f"internal: Parquet file of {self.sink.size} bytes exceeds maxFileSize "
                               f"{self.max_size}; please report this")
