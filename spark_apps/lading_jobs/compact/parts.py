"""Table parts with a hard size ceiling: a compaction's outputs, as pending uploads.

The same Parquet file writer as unload files (``formats.parquetfile.ParquetFile``:
compressed size, footer included, never above the ceiling; each file but a
group's last at least 95 % of it) writing the table's part schema (column ids,
time and diff columns, table metadata) into ``data/c-<write id>/``. Statistics
are computed from the rows each part received (never by reading it back), row group by
row group as they are written (``stats.Accumulator``), so no part's rows are held until it
closes. String and binary columns named ``dictionary`` may come as dictionary arrays
(a streamed bin-pack reads them so): they are written as such, into files with the same
schema, metadata and statistics (``formats.parquetfile.dictionary_file``).
Nothing is completed here: the driver's commit does that; on an exception the
writer aborts its own uploads.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from lading_jobs import storage as st
from lading_jobs.formats.parquetfile import (
    DICTIONARY_SAMPLE_ROWS,
    FooterModel,
    ParquetFile,
    dictionary_columns,
    dictionary_file,
    writer_options,
)
from lading_jobs.sink import PartSink
from lading_jobs.table import format as fmt
from lading_jobs.table.log.commits import Part
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats import part as stx
from lading_jobs.table.writer import WrittenPart

DEFAULT_ROW_GROUP_ROWS = 256 * 1024
"""Rows per row group: small enough that near the ceiling few rows are encoded twice to measure."""
DEFAULT_BUFFER_SIZE = 16 * 1024**2


@dataclass
class _Open:
    path: str
    sink: PartSink
    file: ParquetFile
    stats: stx.Accumulator


def conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with ``schema``'s columns, in its order and types (as they are when they match;
    a dictionary column is decoded, or a plain one encoded, where ``schema`` says so)."""
    if rows.schema.equals(schema, check_metadata=False):
        return rows
    return rows.select(schema.names).cast(schema)


def spread_sample(rows: pa.Table, span: int) -> pa.Table:
    """Up to ``DICTIONARY_SAMPLE_ROWS`` rows evenly spaced over the first ``span`` rows, for
    ``dictionary_columns``. Not the first rows: in rows sorted by a column, neighbours repeat
    the few values that column repeats at all (the benchmark's key: 25 M rows drawn from 10⁹
    values, ~2.5 % of them repeated), so the first rows kept that column's dictionary, hashed for
    every row and given up once the dictionary page was full (encoding a sorted compaction's
    output took ~1.8× the CPU, docs/benchmarks.md "Issue 30, sorted"). On rows in no particular
    order it judges as the first rows did."""
    n = min(rows.num_rows, span)
    if n <= DICTIONARY_SAMPLE_ROWS:
        return rows.slice(0, n)
    return rows.take(pa.array(np.linspace(0, n - 1, DICTIONARY_SAMPLE_ROWS).astype(np.int64)))


class CeilingPartWriter:
    """Writes one group's consolidated rows into parts of at most ``max_size`` bytes."""

    def __init__(self, uri: str, schema: TableSchema, write_id: str, task: int, *, table_id: str,
                 envelope: str, storage: st.Storage, max_size: int, keep_order: tuple[int, int] | None = None,
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, buffer_size: int = DEFAULT_BUFFER_SIZE,
                 compression: str = "zstd", dictionary: tuple[str, ...] = ()) -> None:
        """``dictionary``: string or binary columns whose rows come as dictionary arrays (plain
        ones are encoded); written as such when the file comes out the same, else decoded."""
        self.uri, self.schema, self.write_id, self.task = fmt.table_root(uri), schema, write_id, task
        self.storage, self.max_size, self.keep_order = storage, max_size, keep_order
        self.arrow_schema = schema.arrow_schema(table_id=table_id, envelope=envelope)
        self.dictionary = dictionary
        self.write_schema = self.arrow_schema  # the writer's: dictionary types where they are written as such
        self.row_group_rows, self.buffer_size, self.compression = row_group_rows, buffer_size, compression
        self.ids = {c.name: c.id for c in schema.columns}
        self.decimal_ids = frozenset(c.id for c in schema.columns if c.type.startswith("decimal"))
        self.done: list[WrittenPart] = []
        self.begun: list[PartSink] = []
        self._n = 0
        self._open: _Open | None = None
        self._options: dict[str, object] | None = None
        self._footer: FooterModel | None = None
        self._ratio = [1.0]

    def _start_options(self, sample: pa.Table) -> None:
        """The writer's options, judged from rows spread over the group's first row group
        (``sample``, plain columns; ``spread_sample``)."""
        self._options = writer_options(self.compression, dictionary_columns(sample))
        as_dictionaries = dictionary_file(self.arrow_schema, self.dictionary, self._options) \
            if self.dictionary else None
        if as_dictionaries is not None:
            self.write_schema, self._options = as_dictionaries
        self._footer = FooterModel(self.write_schema, self._options)

    def _start(self) -> _Open:
        assert self._footer is not None and self._options is not None
        path = fmt.part_path(self.write_id, self.task, self._n)
        self._n += 1
        sink = PartSink(self.storage, fmt.part_uri(self.uri, path), self.buffer_size)
        self.begun.append(sink)
        # the part's statistics are the table's (by column id), gathered per row group, not the unload's
        acc = stx.Accumulator(self.arrow_schema, self.ids)
        f = ParquetFile(sink, self.write_schema, dict(self._options), self._footer, self.max_size,
                        self.row_group_rows, self._ratio, column_stats=False, observe=acc.add)
        return _Open(path, sink, f, acc)

    def write(self, rows: pa.Table) -> None:
        """Part rows (user columns, time, diff), in the order they should be stored."""
        if rows.num_rows == 0:
            return
        if self._options is None:
            self._start_options(conform(spread_sample(rows, self.row_group_rows), self.arrow_schema))
        rows = conform(rows, self.write_schema)
        rest: pa.RecordBatch | None = None
        for batch in rows.to_batches(max_chunksize=self.row_group_rows):
            rest = batch
            while rest is not None and rest.num_rows:
                if self._open is None:
                    self._open = self._start()
                rest = self._open.file.write(rest)
                if rest is not None or self._open.file.full:
                    leftover = self._close()
                    if leftover is not None:
                        rest = leftover if rest is None else rest

    def _close(self) -> pa.RecordBatch | None:
        """Close the open part; return rows handed to it that did not fit (written to the next)."""
        cur = self._open
        if cur is None:
            return None
        self._open = None
        rest = cur.file._flush()
        cur.file.close()
        upload = cur.sink.finish()
        if cur.stats.rows != cur.file.stats.rows:
            raise RuntimeError(f"internal: statistics of {cur.stats.rows} rows for a part of {cur.file.stats.rows}; "
                               "please report this")
        stats = replace(cur.stats.result(), bytes=cur.sink.size)
        seq, index = self.keep_order if self.keep_order is not None else (-1, 0)
        self.done.append(WrittenPart(upload.to_dict(), Part(cur.path, cur.sink.size, stats, seq=seq,
                                                            schema_id=self.schema.schema_id, index=index,
                                                            nested_ids=self.schema.nested)))
        if rest is not None and rest.num_rows:
            return rest.combine_chunks().to_batches()[0]
        return None

    def finish(self) -> list[WrittenPart]:
        leftover = self._close()
        while leftover is not None and leftover.num_rows:
            self.write(pa.Table.from_batches([leftover]))
            leftover = self._close()
        return self.done

    def abort(self) -> None:
        for sink in self.begun:
            with contextlib.suppress(Exception):  # best effort; retention sweeps stale uploads
                sink.abort()
        self.done = []
