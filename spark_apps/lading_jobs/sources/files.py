"""The "lading-files" Python data source: a file set (prefix, glob, pattern or list) in
Parquet, CSV or JSON lines, read through lading_jobs.storage as Arrow batches.

The driver lists the files once and plans splits with the one split planner
(``lading_jobs.splits``: small files packed into one task, Parquet files larger
than the budget cut into row-group ranges); each task reads its split with
``read_split`` (text decompressed as ``from.options.compression`` or its name says), decoding with
lading's readers into lading's Arrow types; the Arrow-only unload calls the same
function without Spark, so both paths read the same rows.

Every read is pinned to the version the listing saw (its ETag): a file rewritten after
the listing fails the run (``storage.ObjectChanged``) instead of mixing two versions.

One schema inference (``infer_schema``), from the first file: a Parquet file's
schema is Spark's own (the ``org.apache.spark.sql.parquet.row.metadata`` footer
entry) when Spark wrote it, else its Arrow schema with lading's extension names
honoured and INT96 columns read as timestamps with time zone (what they mean to
Spark and Hive); a CSV header gives string columns; JSON lines are inferred.
Every column is nullable, as in Spark's file sources. Every other file must have
the same columns and types: drift is refused naming the file and the column.

Options are strings: ``fileset`` is the JSON of a :class:`lading_spec.formats.FileSet`
(see :func:`fileset_to_json`), ``schema`` an optional Spark schema JSON,
``splitBytes`` the split budget the caller planned with.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from lading_jobs import pushed, splits
from lading_jobs.formats import csv as lcsv
from lading_jobs.formats import jsonl, spark, types
from lading_jobs.formats.compressed import NotDecompressible, compression_of, decompress
from lading_jobs.sources import hive
from lading_jobs.storage import ObjectInfo, Storage, open_storage
from lading_spec.copyjob import Input
from lading_spec.errors import SpecError
from lading_spec.formats import CsvOptions, FileSet, JsonOptions, ParquetOptions

NAME = "lading-files"
SPARK_ROW_METADATA = b"org.apache.spark.sql.parquet.row.metadata"


class SchemaDrift(ValueError):
    """A file of the set does not have the columns and types of the first one."""


def fileset_to_json(fs: FileSet) -> str:
    return json.dumps({"uri": fs.uri, "pattern": fs.pattern, "fileList": list(fs.file_list),
                       "format": fs.format, "options": dataclasses.asdict(fs.options),
                       "partitioning": fs.partitioning, "partitionColumns": [list(c) for c in fs.partition_columns]})


def fileset_from_json(text: str) -> FileSet:
    raw = json.loads(text)
    cls = {"csv": CsvOptions, "json": JsonOptions, "parquet": ParquetOptions}[raw["format"]]
    opts = dict(raw.get("options") or {})
    if cls is CsvOptions and isinstance(opts.get("force_quote"), list):
        opts["force_quote"] = tuple(opts["force_quote"])
    return FileSet(uri=raw.get("uri"), pattern=raw.get("pattern"), file_list=tuple(raw.get("fileList") or ()),
                   format=raw["format"], options=cls(**opts), partitioning=raw.get("partitioning"),
                   partition_columns=tuple((n, t) for n, t in raw.get("partitionColumns") or ()))


def list_files(fs: FileSet, storage: Callable[[str], Storage] = open_storage, *,
               field: str = "from") -> list[ObjectInfo]:
    """The file set's objects: a ``fileList`` as given, each of which must exist (hidden names
    too: the user named them), else the prefix or glob's objects in URI order, hidden (``.``,
    ``_``) names skipped. Loads list with this too (``storage``: their cached clients).
    ``field``: where the file set is in the spec (``from``, ``from.inputs[2]``), for errors."""
    if fs.file_list:
        found = []
        for i, uri in enumerate(fs.file_list):
            info = storage(uri).head(uri)
            if info is None:
                raise SpecError(f"{field}.fileList[{i}]", f"{uri} does not exist; fix the URI or remove it")
            found.append(info)
        return found
    assert fs.uri is not None
    if fs.partitioning == "hive":
        return [f.info for f in list_hive(fs, storage, field=field).files]
    listed = storage(fs.uri).list_matching(fs.uri, fs.pattern)
    return [o for o in listed if not o.uri.rsplit("/", 1)[-1].startswith((".", "_"))]


def hive_root(fs: FileSet) -> str:
    assert fs.uri is not None
    return fs.uri if fs.uri.endswith("/") else fs.uri + "/"


def _listed_name(fs: FileSet) -> Callable[[str], bool]:
    """Whether a listed file belongs to the set: not hidden, and ``pattern`` (if any) matching."""
    def keep(uri: str) -> bool:
        name = uri.rsplit("/", 1)[-1]
        if name.startswith((".", "_")):
            return False
        return not fs.pattern or fnmatch.fnmatchcase(name, fs.pattern) or fnmatch.fnmatchcase(uri, fs.pattern)
    return keep


def list_hive(fs: FileSet, storage: Callable[[str], Storage] = open_storage, *, prune: hive.Prune | None = None,
              field: str = "from") -> hive.Listing:
    """A Hive-partitioned file set's files and partition values, directories pruned (``sources.hive``)."""
    root = hive_root(fs)
    return hive.list_partitioned(storage(root), root, [n for n, _ in fs.partition_columns], prune=prune,
                                 keep=_listed_name(fs), field=f"{field}.files")


def hive_columns(fs: FileSet, listing: hive.Listing | None) -> list[tuple[str, str]]:
    """(name, type) of the partition columns: as given, else inferred from ``listing``."""
    if fs.partition_columns:
        return list(fs.partition_columns)
    assert listing is not None
    return hive.column_types(listing, ())


def _hive_first(fs: FileSet) -> ObjectInfo:
    """The first file of a Hive-partitioned set with given columns, one directory per level
    listed (the schema's file; the rest is listed when the read is planned, pruned)."""
    root = hive_root(fs)
    storage = open_storage(root)
    keep = _listed_name(fs)
    prefix, depth = root, len(fs.partition_columns)
    for _ in range(depth):
        dirs = [d for d in storage.list_level(prefix)[0] if not d[len(prefix):].startswith((".", "_"))]
        if not dirs:
            break
        prefix = dirs[0]
    found = [f for f in storage.list_level(prefix)[1] if keep(f.uri)]
    if not found:  # an empty first directory: the whole listing finds one, or none
        every = list_hive(fs).files
        if not every:
            raise FileNotFoundError(f"no files under {root}" + (f" with pattern {fs.pattern!r}" if fs.pattern else ""))
        return every[0].info
    return found[0]


SORT_SPLIT_BYTES = 32 * 1024**2
"""Most bytes a split holds when its task sorts it whole (an unload's ``partitionBy``)."""


def plan_splits(fs: FileSet, files: list[ObjectInfo], split_bytes: int,
                open_cost: int = splits.OPEN_COST) -> list[splits.Split]:
    """The splits a read of ``files`` takes (``lading_jobs.splits.plan``, footers read as needed)."""
    refs = [splits.FileRef(o.uri, o.size, o.etag) for o in files]
    footers = splits.footer_row_groups(lambda f: open_storage(f.uri).open_input(f.uri, f.size, etag=f.etag or None))
    return splits.plan(refs, fs.format, split_bytes, footers, open_cost=open_cost)


def split_sizes(session: SparkSession, files: list[ObjectInfo], *, sort: bool = False) -> tuple[int, int]:
    """(split budget, open cost) for reading ``files`` in ``session``: Spark's own file-scan
    settings (``spark.sql.files.maxPartitionBytes``, ``openCostInBytes``) under Spark's rule
    (``splits.budget``); ``sort``: at most ``SORT_SPLIT_BYTES``, a task holds its split whole."""
    conf = session._jsparkSession.sessionState().conf()  # type: ignore[attr-defined]
    max_bytes, open_cost = int(conf.filesMaxPartitionBytes()), int(conf.filesOpenCostInBytes())
    if sort:
        max_bytes = min(max_bytes, SORT_SPLIT_BYTES)
    cores = session.sparkContext.defaultParallelism
    return splits.budget(sum(o.size for o in files), cores, max_bytes, open_cost, files=len(files)), open_cost


def _read_text(uri: str, fs: FileSet, etag: str | None = None) -> bytes:
    """A text file's bytes, decompressed as ``from.options.compression`` or its name says
    (one reader with loads: ``formats.compressed``); a file that does not decompress fails
    naming it."""
    raw = open_storage(uri).read(uri, etag=etag)
    try:
        return decompress(raw, compression_of(fs.options), uri)
    except NotDecompressible as e:
        raise NotDecompressible(f"reading {uri}: {e}") from e


def decode_file(uri: str, fs: FileSet, schema: pa.Schema | None, etag: str | None = None) -> pa.Table:
    """A whole CSV or JSON lines file as a table (``schema`` None: inferred/strings); with
    ``etag``, only the version listed (a file rewritten since fails, ``storage.ObjectChanged``)."""
    data = _read_text(uri, fs, etag)
    try:
        if fs.format == "csv":
            assert isinstance(fs.options, CsvOptions)
            if schema is not None and fs.options.header and data.strip():
                _check_header(uri, lcsv.header_names(data, fs.options), schema.names)
            return lcsv.read_csv(data, fs.options, schema)
        return jsonl.read_jsonl(data, schema, known_keys_only=True)
    except jsonl.UnknownKey as e:
        raise SchemaDrift(_drift(uri, e.path, "is in this file but not in the first file's columns")) from e
    except SchemaDrift:
        raise
    except (ValueError, pa.ArrowInvalid) as e:
        if schema is not None and fs.format == "json":
            _check_json_types(uri, data, schema)  # name the column when its values changed type
        raise ValueError(f"reading {uri}: {e}") from e


def _check_json_types(uri: str, data: bytes, schema: pa.Schema) -> None:
    """After a JSON file failed to read as ``schema``: if this file alone infers a column
    as another kind of value (numbers where the first file had strings, ...), schema drift
    naming it. Only on that failure path; a file that does not infer says nothing here."""
    try:
        found = jsonl.read_jsonl(data).schema
    except (ValueError, pa.ArrowInvalid):
        return
    for field in found:
        expected = schema.field(field.name).type if field.name in schema.names else None
        if expected is None or pa.types.is_null(field.type):
            continue
        number = pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
        fits = (pa.types.is_floating(expected) and number) or (pa.types.is_integer(expected)
                                                               and pa.types.is_integer(field.type))
        if not fits and jsonl.read_type(schema.field(field.name)) != field.type:
            raise SchemaDrift(_drift(uri, field.name, f"holds {field.type} values here but {expected} in the "
                                                      "first file"))


def _check_header(uri: str, names: list[str], expected: list[str]) -> None:
    for name in names:
        if name not in expected:
            raise SchemaDrift(_drift(uri, name, "is a column here but not in the first file's header"))
    for name in expected:
        if name not in names:
            raise SchemaDrift(_drift(uri, name, "is missing from this file's header"))


def _drift(uri: str, column: str, what: str) -> str:
    return (f"from.files: schema drift in {uri}: column {column!r} {what}; every file of a file set must have "
            "the first file's columns and types (select matching files with pattern or fileList, or copy them "
            "in separate runs)")


# -- Parquet: the one schema inference -----------------------------------------------------
def open_parquet(source: pa.NativeFile) -> pq.ParquetFile:
    """A Parquet file opened as lading reads them: INT96 at microseconds (no overflow)."""
    return pq.ParquetFile(source, coerce_int96_timestamp_unit="us")


def _spark_footer(pf: pq.ParquetFile) -> T.StructType | None:
    """The Spark schema a Spark writer left in the footer, when it matches the file's columns."""
    meta = pf.metadata.metadata or {}
    raw = meta.get(SPARK_ROW_METADATA)
    if raw is None:
        return None
    try:
        schema = T.StructType.fromJson(json.loads(raw))
    except (ValueError, KeyError, TypeError):
        return None
    return schema if schema.names == pf.schema_arrow.names else None


def parquet_schema(pf: pq.ParquetFile) -> T.StructType:
    """A Parquet file's Spark schema (see the module doc), every column nullable."""
    spark_schema = _spark_footer(pf)
    if spark_schema is None:
        arrow = pf.schema_arrow
        int96 = {c.path for c in (pf.schema.column(i) for i in range(len(pf.schema))) if c.physical_type == "INT96"}
        fields = []
        for f in arrow:
            if f.name in int96 and pa.types.is_timestamp(f.type):
                f = f.with_type(pa.timestamp("us", tz=types.UTC))
            fields.append(f)
        spark_schema = types.spark_schema_from_arrow(pa.schema(fields, metadata=arrow.metadata))
    return T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in spark_schema.fields])


def _same_type(a: T.DataType, b: T.DataType) -> bool:
    return types.nested_nullable(a) == types.nested_nullable(b)


def check_parquet_schema(uri: str, found: T.StructType, expected: T.StructType) -> None:
    """Refuse a file whose columns or types differ from the expected (first file's) schema."""
    have = {f.name: f.dataType for f in found.fields}
    for f in expected.fields:
        if f.name not in have:
            raise SchemaDrift(_drift(uri, f.name, "is missing from this file"))
        if not _same_type(have[f.name], f.dataType):
            raise SchemaDrift(_drift(uri, f.name, f"is {have[f.name].simpleString()} here but "
                                                  f"{f.dataType.simpleString()} in the first file"))
    for name in have:
        if name not in expected.names:
            raise SchemaDrift(_drift(uri, name, "is in this file but not in the first file"))


def infer_schema(fs: FileSet, files: list[ObjectInfo]) -> T.StructType:
    """The Spark schema of the file set: the first file's (see the module doc), and for Hive
    partitioning the partition columns after it (their types given, or inferred from
    ``files``' directories: ``sources.hive``)."""
    if fs.partitioning != "hive":
        return _file_schema(fs, files)
    if not files:
        raise FileNotFoundError(f"no files under {fs.uri}" + (f" with pattern {fs.pattern!r}" if fs.pattern else ""))
    root = hive_root(fs)
    found = [hive.path_values(root, f.uri) for f in files]
    names = [n for n, _ in found[0]]
    given = list(fs.partition_columns) or [(n, hive.infer_type([p[i][1] for p in found])) for i, n in enumerate(names)]
    plain = _file_schema(dataclasses.replace(fs, partitioning=None), files[:1])
    for name, _ in given:
        if name.lower() in (n.lower() for n in plain.names):
            raise SchemaDrift(f"from.files: {files[0].uri} has a column {name!r}, which is also a partition column "
                              f"({name}=…/ directories): read its files without partitioning, or unload them with "
                              "keepPartitionColumns: false")
    return T.StructType([*plain.fields, *(T.StructField(n, types.parse_type(t), True) for n, t in given)])


def _file_schema(fs: FileSet, files: list[ObjectInfo]) -> T.StructType:
    if not files:
        raise FileNotFoundError(f"no files match {fs.uri or list(fs.file_list)}"
                                + (f" with pattern {fs.pattern!r}" if fs.pattern else ""))
    first = files[0]
    if fs.format == "parquet":
        with named_errors(first.uri), open_storage(first.uri).open_input(first.uri, first.size,
                                                                     etag=first.etag or None) as f:
            return parquet_schema(open_parquet(f))
    # the first text file with columns: an empty (or, for JSON, blank) file has none to give
    arrow = next((a for a in (decode_file(o.uri, fs, None, o.etag or None).schema for o in files) if len(a)), None)
    if arrow is None:
        raise ValueError(f"from.files: every file of {fs.uri or list(fs.file_list)} is empty: no columns to "
                         "copy (with from.options.header, the header line gives them)")
    schema = types.spark_schema_from_arrow(arrow)
    return T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])


# -- reading a split ------------------------------------------------------------------------
def read_split(split: splits.Split, fs: FileSet, schema: T.StructType) -> Iterator[pa.RecordBatch]:
    """The split's rows in lading's Arrow types for ``schema``, piece after piece, in file order."""
    if fs.partitioning == "hive":
        yield from _hive_split(split, fs, schema)
        return
    lading = types.arrow_schema(schema)
    for piece in split.pieces:
        if fs.format == "parquet":
            yield from _parquet_piece(piece, schema, lading)
        else:
            yield from decode_file(piece.uri, fs, lading, piece.etag or None).to_batches(max_chunksize=65536)


def _hive_split(split: splits.Split, fs: FileSet, schema: T.StructType) -> Iterator[pa.RecordBatch]:
    """Each piece read as a plain file of the set, its directories' values added as columns."""
    root, plain = hive_root(fs), dataclasses.replace(fs, partitioning=None, partition_columns=())
    lading = types.arrow_schema(schema)
    for piece in split.pieces:
        values = dict(hive.path_values(root, piece.uri))
        file_schema = T.StructType([f for f in schema.fields if f.name not in values])
        consts = [(f.name, types.type_name(f.dataType)) for f in schema.fields if f.name in values]
        for batch in read_split(splits.Split(split.index, (piece,)), plain, file_schema):
            filled = dict(zip([n for n, _ in consts], hive.constant_columns(
                tuple(values[n] for n, _ in consts), consts, batch.num_rows, piece.uri), strict=True))
            arrays = [filled[f.name].cast(f.type) if f.name in filled else batch.column(f.name) for f in lading]
            yield pa.RecordBatch.from_arrays(arrays, schema=lading)


@contextlib.contextmanager
def named_errors(uri: str) -> Iterator[None]:
    """Errors reading a Parquet file name it (Arrow's, like "Parquet magic bytes not found",
    do not); schema drift and storage errors already do."""
    try:
        yield
    except SchemaDrift:
        raise
    except (ValueError, OSError) as e:  # pa.ArrowInvalid is a ValueError
        raise ValueError(f"reading {uri}: {e}") from e


def _parquet_piece(piece: splits.Piece, schema: T.StructType, lading: pa.Schema) -> Iterator[pa.RecordBatch]:
    with named_errors(piece.uri), open_storage(piece.uri).open_input(piece.uri, piece.size,
                                                                 etag=piece.etag or None) as f:
        pf = open_parquet(f)
        check_parquet_schema(piece.uri, parquet_schema(pf), schema)
        row_groups = list(range(*piece.row_groups)) if piece.row_groups is not None else None
        yield from parquet_batches(pf, row_groups, lading)


def parquet_batches(pf: pq.ParquetFile, row_groups: list[int] | None, lading: pa.Schema,
                    batch_rows: int = 65536) -> Iterator[pa.RecordBatch]:
    """The rows of ``row_groups`` (None: all) of an open Parquet file, in lading's Arrow types
    ``lading``, in batches of ``batch_rows`` (pyarrow's default: a caller holding a whole row
    group anyway asks for it in one batch, about a seventh less CPU). One thread: Spark's tasks
    already fill the cores; Arrow's column-parallel decoding on top cost about a fifth more
    CPU for the same rows (bench/unload_task.py)."""
    for batch in pf.iter_batches(batch_size=batch_rows, row_groups=row_groups, columns=lading.names,
                                 use_threads=False):
        yield types.conform_batch(batch.select(lading.names), lading)


class _Split(InputPartition):
    def __init__(self, split: splits.Split) -> None:
        super().__init__(split.index)
        self.split = split


class FilesReader(DataSourceReader):
    """Plans and reads splits of the listed ``files``; a Hive-partitioned set (``files`` None)
    is listed when its read is planned, the directories its pushed filters rule out unlisted."""

    def __init__(self, fs: FileSet, schema: T.StructType, files: list[ObjectInfo] | None, split_bytes: int,
                 open_cost: int, options: dict[str, str] | None = None) -> None:
        self.fs, self.schema, self.files = fs, schema, files
        self.split_bytes, self.open_cost = split_bytes, open_cost
        self.options = options or {}
        self.filters: list[Any] = []

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:  # noqa: N802 - pyspark's name
        """Takes none (Spark applies them all); a Hive-partitioned set keeps them to prune its
        directories, unless several scans share the relation (``pushdown=false``)."""
        if self.files is None and self.options.get("pushdown") != "false":  # (keys in lower case)
            self.filters = list(filters)
        yield from filters

    def partitions(self) -> list[InputPartition]:
        files = self.files
        budget = self.split_bytes
        if files is None:
            columns = [(n, t) for n, t in json.loads(self.options["hivecolumns"])]
            listing = list_hive(self.fs, prune=hive.pruner(self.filters, columns))
            self.filters = []  # used: the reader travels to the tasks without them
            files = [f.info for f in listing.files]
            budget = splits.budget(sum(o.size for o in files), int(self.options.get("cores") or 1),
                                   int(self.options.get("maxbytes") or splits.SPLIT_BYTES), self.open_cost,
                                   files=len(files))
        return [_Split(s) for s in plan_splits(self.fs, files, budget, self.open_cost)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        from pyspark.sql.pandas.types import to_arrow_schema

        if not isinstance(partition, _Split):  # no split: pyspark stands one empty partition in
            return
        wire = to_arrow_schema(spark.transfer_schema(self.schema), timezone="UTC")
        for batch in read_split(partition.split, self.fs, self.schema):
            yield spark.wire_batch(batch, wire)


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
        given = self.options.get("schema")
        if given:
            return spark.transfer_schema(T.StructType.fromJson(json.loads(given)))
        return spark.transfer_schema(self._schema(list_files(self._fileset())))

    def reader(self, schema: T.StructType) -> DataSourceReader:
        pushed.guard_literals()  # first: before pyspark's worker reads the pushed filters
        fs = self._fileset()
        open_cost = int(self.options.get("openCost") or splits.OPEN_COST)
        if fs.partitioning == "hive" and self.options.get("schema") and self.options.get("hiveColumns"):
            return FilesReader(fs, self._schema([]), None, 0, open_cost,
                               {k.lower(): v for k, v in self.options.items()})  # Spark's keys: any case
        files = list_files(fs)
        budget = int(self.options.get("splitBytes")
                     or splits.budget(sum(o.size for o in files), 1, open_cost=open_cost, files=len(files)))
        return FilesReader(fs, self._schema(files), files, budget, open_cost)


def read_fileset(session: SparkSession, fs: FileSet, schema: T.StructType | None = None, *,
                 sort: bool = False, field: str = "from", view: str | None = None,
                 pushdown: bool = True) -> DataFrame:
    """A DataFrame over the file set, year-month intervals restored; splits planned as
    ``split_sizes`` says (``sort``: for tasks that sort their split whole).

    A Hive-partitioned set (``partitioning: hive``) is listed when its scan is planned, its
    directories pruned by the filters Spark pushes on the partition columns; here only its
    first file is found (for its schema), or with inferred partition types every directory is
    listed once. ``view`` names the relation (``reader.shared_scans``); ``pushdown=False``:
    no pruning, for a relation several scans of a query share."""
    session.dataSource.register(FilesDataSource)
    options: dict[str, str] = {}
    if fs.partitioning == "hive":
        files = [_hive_first(fs)] if fs.partition_columns else list_files(fs, field=field)
        full = schema or infer_schema(fs, files)
        names = ({n for n, _ in fs.partition_columns}
                 or {n for n, _ in hive.path_values(hive_root(fs), files[0].uri)})
        conf = session._jsparkSession.sessionState().conf()  # type: ignore[attr-defined]
        max_bytes, open_cost = int(conf.filesMaxPartitionBytes()), int(conf.filesOpenCostInBytes())
        options.update({"hiveColumns": json.dumps([[f.name, types.type_name(f.dataType)] for f in full.fields
                                                   if f.name in names]),
                        "maxBytes": str(min(max_bytes, SORT_SPLIT_BYTES) if sort else max_bytes),
                        "cores": str(session.sparkContext.defaultParallelism), "openCost": str(open_cost)})
        if not pushdown:
            options["pushdown"] = "false"
    else:
        files = list_files(fs, field=field)
        full = schema or infer_schema(fs, files)
        budget, open_cost = split_sizes(session, files, sort=sort)
        options.update({"splitBytes": str(budget), "openCost": str(open_cost)})
    if view is not None:
        options["view"] = view
    df = (session.read.format(NAME).schema(spark.transfer_schema(full)).option("fileset", fileset_to_json(fs))
          .option("schema", full.json()).options(**options).load())
    return spark.from_transfer(df, full)


def register_inputs(session: SparkSession, inputs: tuple[Input, ...] | list[Input], *,
                    sort: bool = False, shared: frozenset[str] | set[str] = frozenset(),
                    scan_filters: dict[str, Any] | None = None) -> None:
    """Register every input as a temporary view named after it (for ``from.query``); table,
    Iceberg and Delta inputs named in ``shared`` (lower case) take no pushed filter (``reader.shared_scans``),
    those in ``scan_filters`` skip parts by the query's filter on them (``reader.scan_filters``)."""
    for i, item in enumerate(inputs):
        if item.files is not None:
            read_fileset(session, item.files, sort=sort, field=f"from.inputs[{i}]", view=item.name,
                         pushdown=item.name.lower() not in shared).createOrReplaceTempView(item.name)
            continue
        if item.iceberg is not None:
            from lading_jobs.sources import iceberg

            iceberg.read_iceberg(session, item.iceberg, field=f"from.inputs[{i}].iceberg", view=item.name,
                                 pushdown=item.name.lower() not in shared).createOrReplaceTempView(item.name)
            continue
        if item.delta is not None:
            from lading_jobs.sources import delta

            delta.read_delta(session, item.delta, field=f"from.inputs[{i}].delta", view=item.name,
                             pushdown=item.name.lower() not in shared).createOrReplaceTempView(item.name)
            continue
        try:
            from lading_jobs.table import reader  # the table engineer's module
        except ImportError as e:
            raise RuntimeError(f"input {item.name!r}: table inputs need lading_jobs.table.reader, "
                               "which this build lacks") from e
        assert item.table is not None
        reader.register_table_view(session, item.name, item.table, item.as_of, pushdown=item.name.lower() not in shared,
                                   scan_filter=(scan_filters or {}).get(item.name.lower()))


def query_frame(session: SparkSession, query: str, inputs: tuple[Input, ...] | list[Input], *,
                sort: bool = False) -> DataFrame:
    """``from.query`` over its inputs, checked by the sandbox. A table input that several scans
    of the query read (a self-join, a UNION of two filters, a subquery, a CTE used twice) is
    registered again without filter pushdown, so each scan gets its own rows
    (``reader.shared_scans``); a table read once keeps its part skipping, and is registered
    again with the filter the query's plan puts on its scan (``reader.scan_filters``), which
    skips parts for filters over expressions too (``date_trunc('DAY', ts) = …``)."""
    from lading_jobs import sandbox

    names = [i.name for i in inputs]
    register_inputs(session, inputs, sort=sort)
    df = sandbox.query_frame(session, query, names)
    pruned = [i for i in inputs if i.files is not None and i.files.partitioning == "hive"]
    if not pruned and not any(i.table is not None or i.iceberg is not None or i.delta is not None for i in inputs):
        return df
    from lading_jobs.table import reader

    shared = reader.shared_scans(df)  # Hive-partitioned file sets prune by pushed filters too
    if shared:
        register_inputs(session, [i for i in inputs if i.name.lower() in shared], sort=sort, shared=shared)
        df = sandbox.query_frame(session, query, names)
    if not any(i.table is not None for i in inputs):
        return df
    filters = {view: f for view, f in reader.scan_filters(df).items() if view not in shared}
    tables = [i for i in inputs if i.table is not None and i.name.lower() in filters]
    if not tables:
        return df
    register_inputs(session, tables, sort=sort, shared=shared, scan_filters=filters)
    return sandbox.query_frame(session, query, names)
