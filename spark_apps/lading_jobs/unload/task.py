"""What one Spark task does: Arrow batches in, pending uploads and statistics out.

``write_partition`` is the body of the ``mapInArrow`` function. Batches arrive
in the task's order (sorted by partition columns first when ``partitionBy`` is
set); each run of equal partition values goes to files under its Hive-style
directory. A file is rolled when full; finished files stay *pending* uploads.
The task returns one JSON row per file (upload id, part ETags, rows, bytes,
CRC-32, column statistics). On any exception the task aborts every upload it
began, then re-raises: a failed task leaves nothing behind by itself (the
driver's sweep covers tasks that were killed outright).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs import workerheap
from lading_jobs.formats.filestats import FileStats
from lading_jobs.formats.parquetfile import (
    FooterModel,
    ParquetFile,
    dictionary_columns,
    writer_options,
)
from lading_jobs.sink import PartSink
from lading_jobs.storage import S3Settings, Storage, join, open_storage
from lading_jobs.unload import naming
from lading_jobs.unload.compress import compressor
from lading_jobs.unload.textfile import TextFile
from lading_spec.formats import CsvOptions, FormatOptions, JsonOptions, ParquetOptions

OUTPUT_SCHEMA = "file string"
SEQ_COLUMN = "__lading_seq"


@dataclass(frozen=True)
class TaskPlan:
    """Everything a task needs, shipped from the driver (plain, picklable data; no secrets)."""

    destination: str
    format: str
    options: FormatOptions
    max_file_size: int
    buffer_size: int
    partition_by: tuple[str, ...]
    keep_partition_columns: bool
    token: str | None  # run token in file names (appends), else None
    spark_schema_json: str
    settings: S3Settings = field(default_factory=S3Settings)


@dataclass
class _Open:
    key: tuple[str | None, ...]
    sink: PartSink
    file: Any  # TextFile | ParquetFile
    seq: int
    relative: str


def _file_schema(plan: TaskPlan, arrow_schema: pa.Schema) -> pa.Schema:
    if plan.partition_by and not plan.keep_partition_columns:
        keep = [i for i, f in enumerate(arrow_schema) if f.name not in plan.partition_by]
        return pa.schema([arrow_schema.field(i) for i in keep], metadata=arrow_schema.metadata)
    return arrow_schema


def _partition_strings(batch: pa.RecordBatch, columns: tuple[str, ...]) -> list[pa.Array]:
    out = []
    for name in columns:
        col = batch.column(name)
        if pa.types.is_timestamp(col.type):
            col = pc.strftime(col, format="%Y-%m-%d %H:%M:%S")
        elif pa.types.is_floating(col.type):  # -0.0 is 0.0 (SQL equality, and the sort's): one
            col = pc.add(col, pa.scalar(0.0, col.type))  # directory, not a new file at each switch
        out.append(pc.cast(col, pa.string()))
    return out


def _runs(keys: list[pa.Array], n: int) -> list[tuple[int, int]]:
    """[start, end) row ranges of equal partition values (input sorted by them)."""
    if not keys or n == 0:
        return [(0, n)] if n else []
    change = None
    for k in keys:
        a, b = k.slice(1), k.slice(0, n - 1)
        neq = pc.fill_null(pc.not_equal(a, b), False)
        nulls_differ = pc.not_equal(pc.is_null(a), pc.is_null(b))
        diff = pc.or_(neq, nulls_differ)
        change = diff if change is None else pc.or_(change, diff)
    assert change is not None
    starts = [0] + [int(i) + 1 for i in pc.indices_nonzero(change).to_pylist()] + [n]
    return list(zip(starts[:-1], starts[1:], strict=True))


class TaskWriter:
    def __init__(self, plan: TaskPlan, task: int, storage: Storage, conform: Any, arrow_schema: pa.Schema,
                 encoder_factory: Any) -> None:
        self.plan, self.task, self.storage = plan, task, storage
        self.conform = conform
        self.schema = arrow_schema
        self.file_schema = _file_schema(plan, arrow_schema)
        self.ext = naming.extension(plan.format, plan.options)
        self.encoder_factory = encoder_factory
        self.seq = 0
        self.current: _Open | None = None
        self.done: list[dict[str, Any]] = []
        self.begun: list[PartSink] = []
        self.ratio = [1.0]
        self.footer: FooterModel | None = None  # Parquet: set from the task's first rows (_parquet_setup)
        self.pq_options: dict[str, Any] = {}
        if plan.format != "parquet":
            self.encoder = encoder_factory(self.file_schema)
            opts = plan.options
            assert isinstance(opts, CsvOptions | JsonOptions)
            self.compress = compressor(opts.compression)
            self.header = self.encoder.header() if isinstance(opts, CsvOptions) and opts.header else b""

    def _parquet_setup(self, sample: pa.RecordBatch) -> None:
        """Writer options (which columns get a dictionary) and the footer model, once per task."""
        assert isinstance(self.plan.options, ParquetOptions)
        self.pq_options = writer_options(self.plan.options.compression, dictionary_columns(sample),
                                         decimals_as_integers=True)
        self.footer = FooterModel(self.file_schema, self.pq_options)

    def next_file(self, key: tuple[str | None, ...] = ()) -> tuple[int, str, PartSink]:
        """The next file's sequence number, relative path and begun upload (aborted with the
        task's); the open file, if any, is finished first. Another writer of the task's files
        (``chunkcopy``) takes its names here too, so the task's files share one sequence."""
        self.close_file()
        seq = self.seq
        self.seq += 1
        rel_dir = naming.partition_dir(self.plan.partition_by, key) if self.plan.partition_by else ""
        relative = rel_dir + naming.file_name(self.task, seq, self.ext, self.plan.token)
        sink = PartSink(self.storage, join(self.plan.destination, relative), self.plan.buffer_size)
        self.begun.append(sink)
        return seq, relative, sink

    def _open(self, key: tuple[str | None, ...]) -> _Open:
        seq, relative, sink = self.next_file(key)
        if self.plan.format == "parquet":
            assert self.footer is not None and isinstance(self.plan.options, ParquetOptions)
            f: Any = ParquetFile(sink, self.file_schema, self.pq_options, self.footer, self.plan.max_file_size,
                                 self.plan.options.row_group_rows, self.ratio)
        else:
            f = TextFile(sink, self.encoder, self.header, self.compress, self.plan.max_file_size, self.file_schema)
        return _Open(key, sink, f, seq, relative)

    def _close(self) -> None:
        cur = self.current
        if cur is None:
            return
        self.current = None
        if isinstance(cur.file, ParquetFile):
            rest = cur.file._flush()
            cur.file.close()
            self._finish(cur)
            if rest is not None and rest.num_rows:
                for b in rest.to_batches():
                    self._write_rows(cur.key, b)
            return
        self._finish(cur)

    def _finish(self, cur: _Open) -> None:
        self.record(cur.seq, cur.relative, cur.sink, cur.file.stats, cur.key)

    def record(self, seq: int, relative: str, sink: PartSink, stats: FileStats,
               key: tuple[str | None, ...] = ()) -> None:
        """Send the written file's last part (it stays a pending upload) and list it among the
        task's finished files with its rows and ``stats``."""
        upload = sink.finish()
        self.done.append({
            "task": self.task, "seq": seq, "path": relative, "upload": upload.to_dict(),
            "rows": stats.rows, "bytes": sink.size, "crc32": sink.crc32,
            "partition": dict(zip(self.plan.partition_by, key, strict=True)),
            "columns": stats.to_dict(),
        })

    def _write_rows(self, key: tuple[str | None, ...], batch: pa.RecordBatch) -> None:
        if self.current is not None and self.current.key != key:
            self._close()
        rest: pa.RecordBatch | None = batch
        while rest is not None and rest.num_rows:
            if self.current is None:
                if self.plan.format == "parquet" and self.footer is None:
                    self._parquet_setup(rest)
                self.current = self._open(key)
            rest = self.current.file.write(rest)
            if rest is not None or self.current.file.full:
                self._close()

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if SEQ_COLUMN in batch.schema.names:
            batch = batch.drop_columns([SEQ_COLUMN])
        batch = self.conform(batch)
        if not self.plan.partition_by:
            self._write_rows((), batch)
            return
        keys = _partition_strings(batch, self.plan.partition_by)
        if not self.plan.keep_partition_columns:
            contents = batch.drop_columns(list(self.plan.partition_by))
        else:
            contents = batch
        for start, end in _runs(keys, batch.num_rows):
            key = tuple(k[start].as_py() for k in keys)
            self._write_rows(key, contents.slice(start, end - start))

    def close_file(self) -> None:
        """Finish the open file and any its leftover rows went on to: nothing is left open."""
        while self.current is not None:
            self._close()

    def finish(self) -> list[dict[str, Any]]:
        self._close()
        return self.done

    def abort(self) -> None:
        for sink in self.begun:
            with contextlib.suppress(Exception):  # best effort; the driver sweeps what is left
                sink.abort()


def write_partition(plan: TaskPlan, batches: Iterator[pa.RecordBatch], task: int) -> Iterator[pa.RecordBatch]:
    """The task body: write every batch, yield one JSON row per finished file."""
    from lading_jobs.unload import formatting

    workerheap.settle()
    storage = open_storage(plan.destination, plan.settings)
    writer: TaskWriter | None = None
    try:
        for batch in batches:
            if writer is None:
                arrow_schema, conform = formatting.arrow_target(plan.spark_schema_json)
                writer = TaskWriter(plan, task, storage, conform, arrow_schema,
                                    formatting.encoder_factory(plan.format, plan.options))
            writer.write(batch)
        files = writer.finish() if writer is not None else []
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    yield pa.RecordBatch.from_pydict({"file": [json.dumps(f, separators=(",", ":")) for f in files]},
                                     schema=pa.schema([("file", pa.string())]))
