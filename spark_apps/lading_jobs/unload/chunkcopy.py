"""Parquet to Parquet without re-encoding what is already right: column chunks copied as stored.

A ``from.files`` Parquet → ``to.files`` Parquet conversion on the Arrow-only path
re-encodes every value: decompress, decode, encode, compress, the work DuckDB
does too. A column chunk whose stored form is already what lading would write
(the same physical and logical type, repetition and codec) need not be: its
bytes (dictionary and data pages) are copied into the output as they are,
as parquet-mr's ``ParquetFileWriter.appendRowGroups`` does. The other columns of
the row group (INT96 timestamps, floats, another codec)
are encoded by pyarrow with the path's writer options into a row group in
memory, whose chunks are then copied the same way. One source row group becomes
one output row group; the footer is lading's own (``thrift``): the schema, key-value
metadata and column orders pyarrow writes for the output schema (so readers see
the same types as the Spark path's files), each chunk's metadata from where it
came, offsets moved, page and bloom-filter index references dropped.

What is copied is trusted, so only where it is provably the same:

* a column chunk is copied when its Parquet schema element equals the one pyarrow
  writes for the output column, its type is a boolean, integer, string, binary,
  decimal or float (``_copyable_type``: values read as they are stored; dates and
  timestamps may need a calendar rebase) and its codec is the one asked for. A float
  chunk's statistics are not trusted (parquet-mr writes NaN as a bound): it is copied
  only where none of its page headers holds statistics (parquet-mr ≥ 1.11 writes
  none there, ``parquetfooter.pages_without_statistics``), with the chunk statistics
  pyarrow would write for its values in place of the source's
  (``parquetfooter.float_statistics``). An unload stores decimals as
  Spark does (precisions up to 9 and 18 as INT32 and INT64, wider ones in fixed-length
  bytes: ``parquetfile.writer_options``), so a Spark-written decimal's element is equal;
  those writers order their bounds as signed numbers, as pyarrow does;
* a file's chunks are copied only if it was written by parquet-mr ≥ 1.10 or
  parquet-cpp-arrow (writers whose statistics use the type's order, as its
  ``column_orders`` must declare) and is neither encrypted nor nested;
* a row group is copied only if it holds between an eighth of ``rowGroupSize`` and
  ``rowGroupSize`` rows (no larger row groups than asked, no runts), its decoded
  size is bounded (``MAX_GROUP_BYTES``: it is decoded whole, see below) and its
  stored size is at most half of ``maxFileSize``.

Anything else goes to the task writer (``task.TaskWriter``), exactly as on the
rest of the Arrow-only path. A row group is decoded only as far as the copy needs
it: the columns encoded again, and the copied ones whose manifest statistics the
source's footer does not give (``CopyWriter._from_footer``). A copied integer,
decimal or boolean chunk's footer statistics (null count, signed bounds) are what
computing them from its values gives (``filestats.footer_physicals``,
``chunk_exact``), and so are a string chunk's unless its writer dropped a long
bound (then it is decoded) or truncated one (marked inexact, or parquet-mr told to
truncate: still bounds, not the values); they travel into the output's footer with
the chunk anyway, so they are the manifest's too. Floats' bounds and those of the
columns encoded again are computed. A file's manifest entry is thus the same
whichever way its rows were written (truncated string bounds apart). The output's footer is measured exactly before a row group is
added, so ``maxFileSize`` stays a ceiling.

The files hold the same rows as the Spark path's, in the same order, with the same
schema, but not the same bytes (the source's pages and row groups); the manifest's
path marker says chunks are copied where they qualify.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lading_jobs import workerheap
from lading_jobs.formats import thrift
from lading_jobs.formats.filestats import FileStats, chunk_exact, footer_physicals
from lading_jobs.formats.parquetfile import dictionary_columns, writer_options
from lading_jobs.formats.parquetfooter import (  # noqa: F401 (names tests and callers use from here)
    CC_CRYPTO,
    CC_INDEXES,
    CC_META,
    CC_OFFSET,
    CC_PATH,
    CM_BLOOM,
    CM_BYTES,
    CM_CODEC,
    CM_DATA_PAGE,
    CM_DICTIONARY_PAGE,
    CM_INDEX_PAGE,
    CM_PATH,
    CM_STATISTICS,
    CM_STORED,
    CM_VALUES,
    CODECS,
    CREATED_BY,
    FMD_CREATED_BY,
    FMD_ENCRYPTION,
    FMD_GROUPS,
    FMD_KV,
    FMD_ORDERS,
    FMD_ROWS,
    FMD_SCHEMA,
    FMD_SIGNING_KEY,
    FMD_VERSION,
    MAGIC,
    RG_BYTES,
    RG_COLUMNS,
    RG_OFFSET,
    RG_ORDINAL,
    RG_ROWS,
    RG_SORTING,
    RG_STORED,
    SE_CHILDREN,
    SE_NAME,
    SE_TYPE_FIELDS,
    ST_MAX_EXACT,
    ST_MIN_EXACT,
    Chunk,
    FooterSize,
    Reference,
    chunk_start,
    edited,
    float_statistics,
    footer_bytes,
    pages_without_statistics,
    placed,
    read_footer,
    row_group,
    trusted_writer,
)
from lading_jobs.formats.parquetfooter import footer as _footer
from lading_jobs.formats.parquetfooter import footer_bytes as _footer_bytes  # noqa: F401
from lading_jobs.formats.types import conform_batch
from lading_jobs.sink import PartSink
from lading_jobs.sources import files as sources_files
from lading_jobs.storage import Storage, open_storage
from lading_jobs.unload import formatting
from lading_jobs.unload.task import TaskPlan, TaskWriter
from lading_spec.formats import ParquetOptions

MAX_GROUP_BYTES = 128 * 1024 * 1024
"""Most decoded bytes (``total_byte_size``) of a row group copied: it is held decoded at once, as the
task writer holds at most ``formats.parquetfile.MAX_PENDING_BYTES`` of Arrow data."""
MAX_GROUP_ROWS = 64 * 1024 * 1024
"""Most rows of a row group copied: pyarrow's writer never makes larger ones (it would split the
columns encoded again into two row groups), so neither does the task writer."""


def _copyable_type(t: pa.DataType) -> bool:
    """Values read as they are stored: booleans, integers, strings, binaries, decimals, and
    floats (copied with statistics of lading's own, ``CopyWriter._copy_group``)."""
    return (pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_string(t)
            or pa.types.is_binary(t) or pa.types.is_decimal128(t) or pa.types.is_float32(t)
            or pa.types.is_float64(t))


def _same_element(a: thrift.Struct, b: thrift.Struct) -> bool:
    return a.get(SE_NAME) == b.get(SE_NAME) and all(a.fields.get(k) == b.fields.get(k) for k in SE_TYPE_FIELDS)


def _renamed(chunk: Chunk, name: str, statistics: thrift.Struct | None = None) -> Chunk:
    """``chunk`` under the output's column name (``path_in_schema``), with ``statistics`` in
    place of its own if given."""
    if statistics is None and chunk.meta.get(CC_META).get(CM_PATH).values == [name.encode()]:
        return chunk
    meta, md = edited(chunk.meta)
    md.set(CM_PATH, thrift.LIST, thrift.List(thrift.BINARY, [name.encode()]))
    if statistics is not None:
        md.set(CM_STATISTICS, thrift.STRUCT, statistics)
    return Chunk(chunk.data, meta)


def _one_group_file(footer: thrift.Struct, g: int, chunks: list[Chunk]) -> bytes:
    """A Parquet file of row group ``g`` alone (``chunks``: its column chunks as stored), with the
    source's schema and metadata: what decodes the group from bytes already read. Only the top
    level is copied (``set`` replaces fields, nothing nested is edited): a copy of every group's
    metadata for each group would make a file of G groups G² work."""
    single = thrift.Struct(dict(footer.fields))
    rows = footer.get(FMD_GROUPS).values[g].get(RG_ROWS)
    single.set(FMD_ROWS, thrift.I64, rows)
    single.set(FMD_GROUPS, thrift.LIST, thrift.List(thrift.STRUCT, [row_group(chunks, rows, len(MAGIC))]))
    encoded = thrift.encode(single)
    return b"".join([MAGIC, *(c.data for c in chunks), encoded, len(encoded).to_bytes(4, "little"), MAGIC])


def _decode(uri: str, pf: pq.ParquetFile, g: int, lading: pa.Schema, whole: bool = False) -> list[pa.RecordBatch]:
    """Row group ``g``'s rows in lading's Arrow types of the input, as ``sources.files`` reads them;
    ``whole``: in one batch (a group ``_plan`` bounded, held decoded whole anyway: less CPU than
    batches of pyarrow's default size)."""
    with sources_files.named_errors(uri):
        rows = max(1, pf.metadata.row_group(g).num_rows) if whole else 65536
        return [b for b in sources_files.parquet_batches(pf, [g], lading, rows) if b.num_rows]


def _relative(cc: thrift.Struct, name: bytes) -> thrift.Struct:
    """``cc`` (a ColumnChunk) with offsets relative to its first page and nothing that points elsewhere."""
    start = chunk_start(cc)
    out, md = edited(cc)
    out.drop(CC_PATH, *CC_INDEXES)
    md.drop(CM_INDEX_PAGE, *CM_BLOOM)
    md.set(CM_PATH, thrift.LIST, thrift.List(thrift.BINARY, [name]))
    if start == md.get(CM_DATA_PAGE):  # no dictionary page before the data pages (0 is "none")
        md.drop(CM_DICTIONARY_PAGE)
    else:
        md.set(CM_DICTIONARY_PAGE, thrift.I64, 0)
    md.set(CM_DATA_PAGE, thrift.I64, md.get(CM_DATA_PAGE) - start)
    return out


class CopiedFile:
    """One output file of whole row groups of chunks, footer written by ``close``."""

    def __init__(self, sink: PartSink, reference: Reference, footer_size: FooterSize, schema: pa.Schema,
                 max_size: int) -> None:
        self.sink, self.reference, self.footer_size, self.max_size = sink, reference, footer_size, max_size
        self.groups: list[thrift.Encoded] = []  # each row group encoded once, when added
        self.group_bytes = 0
        self.rows = 0
        self.stats = FileStats(schema)
        self.last: tuple[list[Chunk], tuple[int, int], tuple[thrift.Encoded, int]] | None = None
        sink.write(MAGIC)

    def _next(self, chunks: list[Chunk], rows: int) -> tuple[thrift.Encoded, int]:
        """The row group of ``chunks`` as the next one, and the file's size once it is added and
        closed (encoded once for ``fits`` and the ``add`` after it)."""
        if self.last is not None and self.last[0] is chunks and self.last[1] == (rows, len(self.groups)):
            return self.last[2]
        out = self.footer_size.closing(self.sink.size, chunks, rows, self.rows, len(self.groups), self.group_bytes)
        self.last = (chunks, (rows, len(self.groups)), out)
        return out

    def fits(self, chunks: list[Chunk], rows: int) -> bool:
        """Whether the row group and the footer that would then close the file stay within the ceiling."""
        return self._next(chunks, rows)[1] <= self.max_size

    def add(self, chunks: list[Chunk], rows: int, stats: FileStats) -> None:
        group, _ = self._next(chunks, rows)
        self.groups.append(group)
        self.group_bytes += len(group.data)
        self.rows += rows
        for c in chunks:
            self.sink.write(c.data)
        self.stats.absorb(stats)

    def close(self) -> None:
        encoded = _footer(self.reference, self.groups, self.rows)
        self.sink.write(encoded)
        self.sink.write(len(encoded).to_bytes(4, "little") + MAGIC)
        if self.sink.size > self.max_size:
            raise RuntimeError(f"internal: Parquet file of {self.sink.size} bytes exceeds maxFileSize "
                               f"{self.max_size}; please report this")


# -- one task --------------------------------------------------------------------------------
class CopyWriter:
    """A task's files: copied row groups where they qualify, the task writer for the rest."""

    def __init__(self, plan: TaskPlan, task: int, storage: Storage) -> None:
        assert isinstance(plan.options, ParquetOptions)
        self.plan, self.task, self.storage = plan, task, storage
        self.schema, self.conform = formatting.arrow_target(plan.spark_schema_json)
        self.options: ParquetOptions = plan.options
        self.writer = TaskWriter(plan, task, storage, self.conform, self.schema,
                                 formatting.encoder_factory(plan.format, plan.options))
        # the output's footer: what pyarrow writes for this schema (dictionary choices do not show in it)
        self.reference = Reference.of(self.schema, writer_options(self.options.compression, decimals_as_integers=True),
                                      self.options.compression)
        self.footer_size = FooterSize(self.reference)
        self.dictionary: dict[str, bool] = {}  # column → dictionary-encoded when encoded (decided once per task)
        self.current: tuple[int, str, CopiedFile] | None = None  # seq, relative path, file

    # the task writer's files and ours share one sequence of file names
    def _to_writer(self, batches: list[pa.RecordBatch]) -> None:
        self._close()
        for b in batches:
            self.writer.write(b)

    def _open(self) -> tuple[int, str, CopiedFile]:
        seq, relative, sink = self.writer.next_file()
        return seq, relative, CopiedFile(sink, self.reference, self.footer_size, self.schema, self.plan.max_file_size)

    def _close(self) -> None:
        if self.current is None:
            return
        seq, relative, f = self.current
        self.current = None
        f.close()
        self.writer.record(seq, relative, f.sink, f.stats)

    def copy_file(self, uri: str, size: int, etag: str | None, row_groups: tuple[int, int] | None,
                  lading: pa.Schema, check: Any) -> None:
        """Row groups ``row_groups`` (all: None) of the file at ``uri``: each copied where it
        qualifies (``_plan``), else written by the task writer."""
        with sources_files.named_errors(uri):
            f = open_storage(uri).open_input(uri, size, etag=etag)
        with f:
            with sources_files.named_errors(uri):  # errors reading name the file; the output's do not
                pf = sources_files.open_parquet(f)
                check(uri, pf)
                footer = read_footer(f, size)
            groups = range(*row_groups) if row_groups is not None else range(pf.metadata.num_row_groups)
            for g in groups:
                plan = self._plan(footer, g) if footer is not None else None
                if footer is None or plan is None:
                    read = _decode(uri, pf, g, lading)
                    if read:
                        self._to_writer(read)
                    continue
                sources = self._read_group(f, uri, footer, g)
                self._copy_group(uri, footer, g, plan, sources, pf.metadata.row_group(g), lading)

    def _read_group(self, f: Any, uri: str, footer: thrift.Struct, g: int) -> list[Chunk]:
        """Every column chunk of row group ``g`` as stored, from one read of the group's bytes."""
        columns = footer.get(FMD_GROUPS).values[g].get(RG_COLUMNS).values
        starts = [chunk_start(cc) for cc in columns]
        ends = [s + cc.get(CC_META).get(CM_STORED) for s, cc in zip(starts, columns, strict=True)]
        first = min(starts)
        with sources_files.named_errors(uri):
            f.seek(first)
            span = pa.py_buffer(f.read(max(ends) - first))
            if len(span) != max(ends) - first:
                raise ValueError(f"row group {g} ends past the end of the file")
        return [Chunk(span.slice(s - first, e - s), _relative(cc, cc.get(CC_META).get(CM_PATH).values[0]))
                for s, e, cc in zip(starts, ends, columns, strict=True)]

    def _plan(self, footer: thrift.Struct, g: int) -> list[bool] | None:
        """Which columns of row group ``g`` are copied (True) or encoded, or None: the task writer."""
        reference = self.reference
        if (not trusted_writer(footer.get(FMD_CREATED_BY)) or footer.get(FMD_ORDERS) is None
                or footer.get(FMD_ENCRYPTION) is not None or not reference.flat()):
            return None
        elements = footer.get(FMD_SCHEMA).values[1:]
        if len(elements) != len(reference.leaves) or any(e.get(SE_CHILDREN) is not None for e in elements):
            return None
        group = footer.get(FMD_GROUPS).values[g]
        rows, decoded = group.get(RG_ROWS), group.get(RG_BYTES)
        columns = group.get(RG_COLUMNS).values
        if len(columns) != len(elements) or any(cc.get(CC_META) is None for cc in columns):
            return None
        if any(cc.get(CC_META).get(CM_VALUES) != rows for cc in columns):  # flat columns: a value a row
            return None
        stored = sum(cc.get(CC_META).get(CM_STORED) for cc in columns)
        row_group_rows = self.options.row_group_rows
        if (not row_group_rows <= 8 * rows <= 8 * row_group_rows or rows > MAX_GROUP_ROWS
                or decoded > MAX_GROUP_BYTES or 2 * stored > self.plan.max_file_size):
            return None
        if any(cc.get(CC_PATH) is not None or any(cc.get(k) is not None for k in CC_CRYPTO)
               or len(cc.get(CC_META).get(CM_PATH).values) != 1 for cc in columns):
            return None
        return [_copyable_type(field.type) and _same_element(element, leaf)
                and cc.get(CC_META).get(CM_CODEC) == reference.codec
                for element, leaf, cc, field in zip(elements, reference.leaves, columns, self.schema, strict=True)]

    def _copy_group(self, uri: str, footer: thrift.Struct, g: int, copy: list[bool], sources: list[Chunk],
                    group: pq.RowGroupMetaData, lading: pa.Schema) -> None:
        """Row group ``g`` (its chunks as stored, ``sources``; ``group``: its footer metadata as
        pyarrow reads it) as copied and encoded chunks: in the open file if it fits, else in a
        new one, else (not even alone) to the task writer, which splits the rows. Only what the
        copy needs is decoded: the columns encoded again, and the copied ones whose statistics
        the source's footer does not give exactly (``_from_footer``)."""
        rows = group.num_rows
        from_footer = self._from_footer(copy, group, sources)
        decoded = [i for i in range(len(copy)) if i not in from_footer]
        mini: list[pq.ParquetFile] = []  # the group alone, decoded from the bytes already read

        def read(columns: list[int]) -> list[pa.RecordBatch]:
            if not mini:
                with sources_files.named_errors(uri):
                    mini.append(sources_files.open_parquet(pa.BufferReader(_one_group_file(footer, g, sources))))
            return _decode(uri, mini[0], 0, pa.schema([lading.field(i) for i in columns]), whole=True)

        stats = FileStats(self.schema)
        table = None
        if decoded:
            target = pa.schema([self.schema.field(i) for i in decoded])
            table = pa.Table.from_batches([conform_batch(b, target) for b in read(decoded)], target)
            if table.num_rows != rows:
                raise ValueError(f"row group {g} decodes to {table.num_rows} rows, its footer says {rows}")
            stats.update_columns(rows, {i: table.column(k) for k, i in enumerate(decoded)})
        else:
            stats.update_columns(rows, {})
        for i in from_footer:
            stats.add_chunk(i, group.column(i).statistics, rows)
        # a float chunk is copied only with statistics of lading's own, where no page holds others
        floats = {i: float_statistics(table.column(decoded.index(i))) for i, copied in enumerate(copy)
                  if copied and pa.types.is_floating(self.schema.field(i).type)
                  and table is not None and pages_without_statistics(sources[i].data)}
        copy = [c and (i in floats or not pa.types.is_floating(self.schema.field(i).type)) for i, c in enumerate(copy)]
        encoded = self._encode(table, [i for i, c in enumerate(copy) if not c], decoded)
        if encoded is None:
            self._to_writer(read(list(range(len(copy)))))
            return
        chunks = [_renamed(sources[i], name, floats.get(i)) if copied else encoded[i]
                  for i, (copied, name) in enumerate(zip(copy, self.schema.names, strict=True))]
        if self.footer_size.closing(len(MAGIC), chunks, rows)[1] > self.plan.max_file_size:
            self._to_writer(read(list(range(len(copy)))))
            return
        if self.current is not None and not self.current[2].fits(chunks, rows):
            self._close()
        if self.current is None:
            self.current = self._open()
        self.current[2].add(chunks, rows, stats)

    def _from_footer(self, copy: list[bool], group: pq.RowGroupMetaData, sources: list[Chunk]) -> set[int]:
        """The copied columns whose statistics the source's footer gives as computing them would:
        they are not decoded. Integers, booleans and decimals (``filestats.footer_physicals``)
        with ``chunk_exact`` statistics; strings and binaries too where the writer did not mark
        a bound inexact (a truncated one: parquet-cpp-arrow says so in ``is_min_value_exact``/
        ``is_max_value_exact``; parquet-mr truncates footer bounds only when told to by
        ``parquet.statistics.truncate.length``, and then its bounds are still bounds, a prefix
        below every value and an incremented prefix above) and a string's are UTF-8. A copied
        chunk carries those statistics into the output's footer anyway, where every Parquet
        reader prunes by them, so the manifest trusts nothing the file does not already say
        (``_plan`` admits only trusted writers)."""
        out = set()
        for i, copied in enumerate(copy):
            t, column = self.schema.field(i).type, group.column(i)
            if not copied or not chunk_exact(column.statistics, group.num_rows):
                continue
            if column.physical_type in footer_physicals(t):
                out.add(i)
            elif column.physical_type == "BYTE_ARRAY" and (pa.types.is_string(t) or pa.types.is_binary(t)):
                written = sources[i].meta.get(CC_META).get(CM_STATISTICS)
                if written is None or any(written.get(f) is False for f in (ST_MAX_EXACT, ST_MIN_EXACT)):
                    continue
                if column.statistics.has_min_max and pa.types.is_string(t):
                    try:
                        column.statistics.min_raw.decode("utf-8"), column.statistics.max_raw.decode("utf-8")
                    except (UnicodeDecodeError, AttributeError):
                        continue
                out.add(i)
        return out

    def _encode(self, table: pa.Table | None, columns: list[int], decoded: list[int]) -> dict[int, Chunk] | None:
        """The chunks pyarrow writes for ``columns`` of the output (``table``: the ``decoded``
        ones, by position; one row group, in memory); None if pyarrow did not write them as one
        row group of every row (then the task writer writes the rows: a chunk of part of them
        must never be placed in this row group)."""
        if not columns:
            return {}
        assert table is not None
        part = table.select([decoded.index(i) for i in columns])
        undecided = [name for name in part.schema.names if name not in self.dictionary]
        if undecided:  # which columns get a dictionary: from the first rows of each, as the task writer
            keep = dictionary_columns(part.select(undecided))
            self.dictionary.update((name, keep if isinstance(keep, bool) else name in keep) for name in undecided)
        options = writer_options(self.options.compression, [n for n in part.schema.names if self.dictionary[n]],
                                 decimals_as_integers=True)
        buf = pa.BufferOutputStream()
        with pq.ParquetWriter(buf, part.schema, **options) as w:
            w.write_table(part, row_group_size=max(1, part.num_rows))
        data = buf.getvalue()
        footer = thrift.decode(footer_bytes(data))
        groups = footer.get(FMD_GROUPS).values
        if len(groups) != 1 or groups[0].get(RG_ROWS) != table.num_rows:
            return None
        ccs = groups[0].get(RG_COLUMNS).values
        if any(cc.get(CC_META).get(CM_VALUES) != table.num_rows for cc in ccs):  # flat columns: a value a row
            return None
        out = {}
        for i, cc in zip(columns, ccs, strict=True):
            start = chunk_start(cc)
            out[i] = Chunk(data.slice(start, cc.get(CC_META).get(CM_STORED)),
                           _relative(cc, self.schema.names[i].encode()))
        return out

    def finish(self) -> list[dict[str, Any]]:
        """The task's finished files, in sequence order (each writer closes its file before the
        other opens one)."""
        self._close()
        return self.writer.finish()

    def abort(self) -> None:
        """Abort every upload the task began, copied files' included (``TaskWriter.next_file``)."""
        self.writer.abort()


def write_split(plan: TaskPlan, pieces: Sequence[tuple[str, int, str | None, tuple[int, int] | None]],
                lading: pa.Schema, check: Any, task: int) -> Iterator[pa.RecordBatch]:
    """The task body for a split of Parquet pieces: one JSON row per finished file, as
    ``task.write_partition`` yields."""
    workerheap.settle()
    writer = CopyWriter(plan, task, open_storage(plan.destination, plan.settings))
    try:
        for uri, size, etag, row_groups in pieces:
            writer.copy_file(uri, size, etag, row_groups, lading, check)
        files = writer.finish()
    except BaseException:
        writer.abort()
        raise
    yield pa.RecordBatch.from_pydict({"file": [json.dumps(f, separators=(",", ":")) for f in files]},
                                     schema=pa.schema([("file", pa.string())]))
