"""The "lading-files" Python data source: a file set (prefix, glob, pattern or list) in
Parquet, CSV or JSON lines, read through lading_jobs.storage as Arrow batches.

The driver lists the files once and plans one input partition per file (Parquet
files larger than ``PARQUET_SPLIT_BYTES`` split into row-group ranges); each task
reads its file with pyarrow (``.gz``/``.zst`` text decompressed by extension),
decodes it with lading's readers, and yields record batches in the Arrow types
Spark expects. The schema comes from the ``schema`` option, else from the first
file: its Parquet schema (lading extension names honoured), its CSV header
(strings), or JSON inference.

Options are strings: ``fileset`` is the JSON of a :class:`lading_spec.formats.FileSet`
(see :func:`fileset_to_json`), ``schema`` an optional Spark schema JSON.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from lading_jobs.formats import csv as lcsv
from lading_jobs.formats import jsonl, spark, types
from lading_jobs.storage import ObjectInfo, open_storage
from lading_spec.copyjob import Input
from lading_spec.formats import CsvOptions, FileSet, JsonOptions, ParquetOptions

NAME = "lading-files"
PARQUET_SPLIT_BYTES = 256 * 1024**2
_COMPRESSION = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}


def fileset_to_json(fs: FileSet) -> str:
    return json.dumps({"uri": fs.uri, "pattern": fs.pattern, "fileList": list(fs.file_list),
                       "format": fs.format, "options": dataclasses.asdict(fs.options)})


def fileset_from_json(text: str) -> FileSet:
    raw = json.loads(text)
    cls = {"csv": CsvOptions, "json": JsonOptions, "parquet": ParquetOptions}[raw["format"]]
    opts = dict(raw.get("options") or {})
    if cls is CsvOptions and isinstance(opts.get("force_quote"), list):
        opts["force_quote"] = tuple(opts["force_quote"])
    return FileSet(uri=raw.get("uri"), pattern=raw.get("pattern"), file_list=tuple(raw.get("fileList") or ()),
                   format=raw["format"], options=cls(**opts))


def list_files(fs: FileSet) -> list[ObjectInfo]:
    """The file set's objects in URI order; hidden (``.``, ``_``) names are skipped."""
    found: list[ObjectInfo] = []
    if fs.uri is not None:
        found = open_storage(fs.uri).list_matching(fs.uri, fs.pattern)
    for uri in fs.file_list:
        info = open_storage(uri).head(uri)
        if info is None:
            raise FileNotFoundError(f"fileList: {uri} does not exist")
        found.append(info)
    return [o for o in found if not o.uri.rsplit("/", 1)[-1].startswith((".", "_"))]


def _compression(uri: str) -> str | None:
    for ext, codec in _COMPRESSION.items():
        if uri.endswith(ext):
            return codec
    return None


def _read_text(uri: str) -> bytes:
    raw = open_storage(uri).read(uri)
    codec = _compression(uri)
    if codec is None:
        return raw
    return pa.input_stream(pa.BufferReader(raw), compression=codec).read()


def decode_file(uri: str, fs: FileSet, schema: pa.Schema | None) -> pa.Table:
    """A whole CSV or JSON lines file as a table (``schema`` None: inferred/strings)."""
    data = _read_text(uri)
    try:
        if fs.format == "csv":
            assert isinstance(fs.options, CsvOptions)
            return lcsv.read_csv(data, fs.options, schema)
        return jsonl.read_jsonl(data, schema)
    except (ValueError, pa.ArrowInvalid) as e:
        raise ValueError(f"reading {uri}: {e}") from e


def infer_schema(fs: FileSet, files: list[ObjectInfo]) -> T.StructType:
    """The Spark schema of the first file."""
    if not files:
        raise FileNotFoundError(f"no files match {fs.uri or list(fs.file_list)}"
                                + (f" with pattern {fs.pattern!r}" if fs.pattern else ""))
    first = files[0]
    if fs.format == "parquet":
        with open_storage(first.uri).open_input(first.uri, first.size) as f:
            arrow = pq.read_schema(f)
    else:
        arrow = decode_file(first.uri, fs, None).schema
    return types.spark_schema_from_arrow(arrow)


class _Split(InputPartition):
    def __init__(self, uri: str, size: int, row_groups: list[int] | None = None) -> None:
        super().__init__(uri)
        self.uri, self.size, self.row_groups = uri, size, row_groups


class FilesReader(DataSourceReader):
    def __init__(self, fs: FileSet, schema: T.StructType, files: list[ObjectInfo]) -> None:
        self.fs, self.schema, self.files = fs, schema, files

    def partitions(self) -> list[InputPartition]:
        out: list[InputPartition] = []
        for o in self.files:
            if self.fs.format == "parquet" and o.size > PARQUET_SPLIT_BYTES:
                with open_storage(o.uri).open_input(o.uri, o.size) as f:
                    meta = pq.ParquetFile(f).metadata
                group, size = [], 0
                for i in range(meta.num_row_groups):
                    group.append(i)
                    size += meta.row_group(i).total_byte_size
                    if size >= PARQUET_SPLIT_BYTES:
                        out.append(_Split(o.uri, o.size, group))
                        group, size = [], 0
                if group:
                    out.append(_Split(o.uri, o.size, group))
            else:
                out.append(_Split(o.uri, o.size))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        from pyspark.sql.pandas.types import to_arrow_schema

        assert isinstance(partition, _Split)
        lading = types.arrow_schema(self.schema)
        wire = to_arrow_schema(spark.transfer_schema(self.schema), timezone="UTC")
        for batch in self._batches(partition, lading):
            yield pa.RecordBatch.from_arrays(
                [batch.column(f.name).cast(w.type) for f, w in zip(lading, wire, strict=True)], schema=wire)

    def _batches(self, part: _Split, lading: pa.Schema) -> Iterator[pa.RecordBatch]:
        if self.fs.format == "parquet":
            with open_storage(part.uri).open_input(part.uri, part.size) as f:
                pf = pq.ParquetFile(f)
                names = set(pf.schema_arrow.names)
                missing = [n for n in lading.names if n not in names]
                if missing:
                    raise ValueError(f"{part.uri} has no column {missing[0]!r}")
                for batch in pf.iter_batches(row_groups=part.row_groups, columns=lading.names):
                    yield types.conform_batch(batch.select(lading.names), lading)
            return
        table = decode_file(part.uri, self.fs, lading)
        yield from table.to_batches(max_chunksize=65536)


class FilesDataSource(DataSource):
    """``spark.read.format("lading-files").option("fileset", fileset_to_json(fs)).load()``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def _fileset(self) -> FileSet:
        return fileset_from_json(self.options["fileset"])

    def _schema(self, files: list[ObjectInfo]) -> T.StructType:
        given = self.options.get("schema")
        if given:
            return T.StructType.fromJson(json.loads(given))
        return infer_schema(self._fileset(), files)

    def schema(self) -> T.StructType:
        return spark.transfer_schema(self._schema(list_files(self._fileset())))

    def reader(self, schema: T.StructType) -> DataSourceReader:
        files = list_files(self._fileset())
        return FilesReader(self._fileset(), self._schema(files), files)


def read_fileset(session: SparkSession, fs: FileSet, schema: T.StructType | None = None) -> DataFrame:
    """A DataFrame over the file set, year-month intervals restored."""
    session.dataSource.register(FilesDataSource)
    files = list_files(fs)
    full = schema or infer_schema(fs, files)
    df = (session.read.format(NAME).option("fileset", fileset_to_json(fs))
          .option("schema", full.json()).load())
    return spark.from_transfer(df, full)


def register_inputs(session: SparkSession, inputs: tuple[Input, ...] | list[Input]) -> None:
    """Register every input as a temporary view named after it (for ``from.query``)."""
    for item in inputs:
        if item.files is not None:
            read_fileset(session, item.files).createOrReplaceTempView(item.name)
            continue
        try:
            from lading_jobs.table import reader  # the table engineer's module
        except ImportError as e:
            raise RuntimeError(f"input {item.name!r}: table inputs need lading_jobs.table.reader, "
                               "which this build lacks") from e
        assert item.table is not None
        reader.register_table_view(session, item.name, item.table, item.as_of)

