"""The "lading-delta" Python data source: a Delta table as a query input
(``from.inputs[]: {name, delta: {table, version | timestamp}}``).

Planning is on the driver with ``deltalake`` (delta-rs, over delta-kernel): it reads the
table's log (commits and checkpoints, v2 checkpoints included) at the version asked for and
hands over the version's add actions — each data file with its partition values and its
statistics (row count, null counts, min and max per column) — and the deletion vectors of
the files that have them, as the positions deleted. The filters Spark pushes are the table
input's own (``table.expr.from_spark``, bound to the input's columns), and each file's
partition values and statistics become a ``PartStats`` that the inclusive metrics evaluator
(``table.expr.might_match``) prunes by; every filter is returned to Spark, so pruning can only
skip files, never decide a row. Bounds are taken conservatively (``_column_stats``): Delta
writers keep timestamps to the millisecond and may truncate strings, and a float bound says
nothing about NaN.

Each Spark task reads one data file through lading's own storage (boto3/pyarrow, lading's
endpoint), as Arrow batches: columns found by their physical name or Parquet field id when
the table maps columns (``delta.columnMapping.mode`` ``name`` or ``id``; nested fields
too), given their logical names; a column a file lacks (added later) reads NULL; partition
columns from the add action; the deleted positions dropped.

deltalake reads the log and deletion vectors with its own client: for ``s3://`` bound to
lading's S3 endpoint and region, credentials from the environment as boto3 takes them; for
``file://`` only where file:// is unrestricted (``lading run``): under a pod's
``policy.allowedPrefixes`` lading opens every local path without following links, which a
library that opens files itself cannot promise.

Refused, naming the input, before anything is written: a table that does not exist, a
version the log does not have, a timestamp before the table's first version, a version whose
files a VACUUM removed, a reader feature lading lacks (``READER_FEATURES``), a data file
outside the table's directory, and a column of a type lading has no type for (variant).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import posixpath
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from lading_jobs import pushed
from lading_jobs import storage as st
from lading_jobs.formats import spark as spark_formats
from lading_jobs.formats import types as format_types
from lading_jobs.sources import lake
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.filters import interp
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats.part import ColumnStats, PartStats, to_stats_domain
from lading_spec.copyjob import DeltaInput

NAME = "lading-delta"

READER_FEATURES = frozenset({"columnMapping", "deletionVectors", "timestampNtz", "v2Checkpoint",
                             "vacuumProtocolCheck", "variantType", "variantType-preview"})
"""The Delta reader features lading reads (``variantType``: the feature, not a variant column,
which is refused by name). Others — ``typeWidening`` (files of narrower types), shredded
variants, catalog-managed commits, and any a later protocol adds — are refused naming them."""

STRING_PREFIX = 32
"""Delta Spark keeps a string column's min/max as a prefix of this many characters: a max
this long or longer may be truncated, so it bounds nothing."""

TIMESTAMP_SLACK_MICROS = 1000
"""Delta writers keep timestamp statistics to the millisecond (truncated): a bound is
widened by one millisecond each way."""

EXACT_DECIMAL_DIGITS = 15
"""Delta keeps decimal statistics as JSON numbers, which a reader may parse as doubles: only a
decimal column of at most this precision keeps its bounds (every such value survives a double)."""


class DeltaInputError(ValueError):
    """A Delta input lading cannot read as asked; the message names the input's field."""


# -- the table's columns -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Node:
    """How a column's values are found in a data file: by ``key`` (its physical name, or its
    Parquet field id in ``id`` mode) and, for nested types, how their children are."""

    name: str
    key: str | int
    children: tuple[Node, ...] = ()
    kind: str = "leaf"  # leaf, struct, list, map


def _node(name: str, type_json: Any, metadata: dict[str, Any], mode: str) -> Node:
    if mode == "id":
        key: str | int = int(metadata["delta.columnMapping.id"])
    elif mode == "name":
        key = str(metadata["delta.columnMapping.physicalName"])
    else:
        key = name
    if isinstance(type_json, dict) and type_json.get("type") == "struct":
        children = tuple(_node(f["name"], f["type"], f.get("metadata") or {}, mode) for f in type_json["fields"])
        return Node(name, key, children, "struct")
    if isinstance(type_json, dict) and type_json.get("type") == "array":
        return Node(name, key, (_node("element", type_json["elementType"], {}, "none"),), "list")
    if isinstance(type_json, dict) and type_json.get("type") == "map":
        return Node(name, key, (_node("key", type_json["keyType"], {}, "none"),
                                _node("value", type_json["valueType"], {}, "none")), "map")
    return Node(name, key)


def _check_type(t: T.DataType, path: str, field: str) -> None:
    if isinstance(t, T.StructType):
        for f in t.fields:
            _check_type(f.dataType, f"{path}.{f.name}", field)
    elif isinstance(t, T.ArrayType):
        _check_type(t.elementType, f"{path}.element", field)
    elif isinstance(t, T.MapType):
        _check_type(t.keyType, f"{path}.key", field)
        _check_type(t.valueType, f"{path}.value", field)
    elif not isinstance(t, T.BooleanType | T.ByteType | T.ShortType | T.IntegerType | T.LongType | T.FloatType
                        | T.DoubleType | T.DecimalType | T.StringType | T.BinaryType | T.DateType
                        | T.TimestampType | T.TimestampNTZType):
        raise DeltaInputError(f"{field}: column {path!r} is of Delta type {t.simpleString()}, which lading has no "
                              "type for as an input (it reads boolean, byte, short, integer, long, float, double, "
                              "decimal, string, binary, date, timestamp, timestamp_ntz, struct, array, map); "
                              "select the table without it with an engine that reads it")


def _clean(t: T.DataType) -> T.DataType:
    """``t`` without Delta's field metadata (column mapping ids and names), every field nullable."""
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, _clean(f.dataType), True) for f in t.fields])
    if isinstance(t, T.ArrayType):
        return T.ArrayType(_clean(t.elementType), True)
    if isinstance(t, T.MapType):
        return T.MapType(_clean(t.keyType), _clean(t.valueType), True)
    return t


# -- the opened version ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DataFile:
    """One data file of the version: what a task reads, and the statistics planning prunes by."""

    uri: str
    size: int
    partition: tuple[tuple[str, Any], ...]  # logical name, typed value (None: NULL)
    deleted: tuple[int, ...]  # the deletion vector's positions (rows of the file that are gone)
    stats: PartStats


@dataclasses.dataclass(frozen=True)
class Opened:
    """A Delta input at one version: its columns, how to find them in files, its data files."""

    ref: DeltaInput
    field: str
    root: str
    version: int
    columns: T.StructType
    nodes: tuple[Node, ...]
    mode: str
    partition_columns: tuple[str, ...]
    files: tuple[DataFile, ...]
    prunable: TableSchema


def _root(uri: str) -> str:
    return uri if uri.endswith("/") else uri + "/"


def _storage_options(root: str, settings: st.S3Settings) -> dict[str, str]:
    if not root.startswith("s3://"):
        return {}
    out = {"AWS_REGION": settings.region or "us-east-1"}
    if settings.endpoint:
        st.refuse_link_local(settings.endpoint)  # deltalake dials it itself: the metadata service never
        out["AWS_ENDPOINT_URL"] = settings.endpoint
        if settings.endpoint.startswith("http://"):
            out["AWS_ALLOW_HTTP"] = "true"
    return out


def _library_uri(root: str) -> str:
    """The table's URI as deltalake takes it (a local path for ``file://``)."""
    return root.removeprefix("file://").rstrip("/") if root.startswith("file://") else root.rstrip("/")


def _check_local(root: str, field: str) -> None:
    storage = st.open_storage(root)
    if isinstance(storage, st.LocalStorage) and storage.prefixes is not None:
        raise DeltaInputError(f"{field}.table: a file:// Delta table is read only where file:// is unrestricted "
                              "(lading run): deltalake reads its log and deletion vectors itself, and under "
                              "policy.allowedPrefixes lading opens every local file without following links, "
                              "which that library cannot promise; put the table on s3://")


def _load(ref: DeltaInput, root: str, field: str, options: dict[str, str],
          settings: st.S3Settings | None = None) -> Any:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    where = _library_uri(root)
    try:
        table = DeltaTable(where, version=ref.version, storage_options=options or None)
    except TableNotFoundError as e:
        raise DeltaInputError(f"{field}.table: {root} is not a Delta table (no _delta_log/ commits found there): "
                              f"{str(e).splitlines()[0]}; give the directory that holds _delta_log/") from e
    except Exception as e:  # deltalake's DeltaError/DeltaProtocolError: the log, a version, a feature
        text = str(e)
        if ref.version is not None and ("version" in text.lower() or "LogSegment" in text):
            newest = _newest(where, options)
            raise DeltaInputError(f"{field}.version: version {ref.version} of {root} cannot be read ({text}); "
                                  + (f"its newest version is {newest}" if newest is not None else
                                     "the log does not have it (removed by log cleanup, or not yet written)")) from e
        if "not supported" in text.lower() or "unsupported" in text.lower():
            raise DeltaInputError(f"{field}: {root} needs a Delta reader feature lading cannot read ({text}); "
                                  f"lading reads {', '.join(sorted(READER_FEATURES))}") from e
        raise DeltaInputError(f"{field}.table: {root} cannot be read as a Delta table: {text}") from e
    if ref.timestamp_ms is not None:
        when = dt.datetime.fromtimestamp(ref.timestamp_ms / 1000, dt.UTC)
        # read before load_as_version: after it, deltalake 1.6.6 numbers history() from the loaded version
        times = {h.get("version"): h.get("timestamp") for h in table.history()}
        table.load_as_version(when)  # the newest version at or before ``when``, else the oldest one
        committed = times.get(table.version())
        if isinstance(committed, int) and committed > ref.timestamp_ms:
            # deltalake, like Delta Lake, dates a commit by its file's modification time, which may
            # fall a millisecond or more before the commitInfo time: refuse only when both are later
            committed = min(committed, _commit_modified_ms(root, int(table.version()), settings) or committed)
        if isinstance(committed, int) and committed > ref.timestamp_ms:
            raise DeltaInputError(f"{field}.timestamp: {root} has no version committed at or before "
                                  f"{when.isoformat()} (its oldest readable version, {table.version()}, was committed "
                                  f"at {dt.datetime.fromtimestamp(committed / 1000, dt.UTC).isoformat()}); give a "
                                  "later timestamp, or a version")
    return table


def _commit_modified_ms(root: str, version: int, settings: st.S3Settings | None) -> int | None:
    """The modification time (epoch ms) of ``version``'s commit file, where the store says."""
    info = st.open_storage(root, settings).head(f"{root.rstrip('/')}/_delta_log/{version:020d}.json")
    return None if info is None or info.modified is None else int(info.modified * 1000)


def _newest(where: str, options: dict[str, str]) -> int | None:
    from deltalake import DeltaTable

    try:
        return int(DeltaTable(where, storage_options=options or None).version())
    except Exception:  # the newest version itself may be unreadable: then say nothing of it
        return None


def _confine(root: str, path: str, field: str) -> str:
    """A data file's URI from the log's (URL-encoded, usually relative) path; refused outside ``root``."""
    decoded = unquote(path)
    uri = decoded if "://" in decoded else root + decoded
    scheme, _, rest = uri.partition("://")
    uri = f"{scheme}://{posixpath.normpath(rest)}"
    if not uri.startswith(root):
        raise DeltaInputError(f"{field}: the table's log names the data file {path}, outside the table's directory "
                              f"{root}; lading reads a Delta table's files only under its directory (the prefix "
                              "the policy allows)")
    return uri


def open_table(ref: DeltaInput, field: str, settings: st.S3Settings | None = None) -> Opened:
    """Read the Delta log at the version asked for; clear errors naming ``field``."""
    root = _root(ref.table)
    settings = settings or st.S3Settings.from_env()
    if root.startswith("file://"):
        _check_local(root, field)
    options = _storage_options(root, settings)
    table = _load(ref, root, field, options, settings)
    version = int(table.version())
    features = set(table.protocol().reader_features or ())
    lacking = sorted(features - READER_FEATURES)
    if lacking:
        raise DeltaInputError(f"{field}: version {version} of {root} needs the Delta reader feature"
                              f"{'s' if len(lacking) > 1 else ''} {', '.join(lacking)}, which lading does not read "
                              f"(it reads {', '.join(sorted(READER_FEATURES))}); read an earlier version, or "
                              "rewrite the table without it")
    schema_json = json.loads(table.schema().to_json())
    configuration = table.metadata().configuration or {}
    mode = str(configuration.get("delta.columnMapping.mode") or "none").lower()
    if mode not in ("none", "name", "id"):
        raise DeltaInputError(f"{field}: {root} maps columns in mode {mode!r}, which lading does not read "
                              "(none, name, id)")
    parsed = T._parse_datatype_json_value(schema_json)  # type: ignore[attr-defined]
    assert isinstance(parsed, T.StructType)
    for f in parsed.fields:
        _check_type(f.dataType, f.name, field)
    columns = T.StructType([T.StructField(f.name, _clean(f.dataType), True) for f in parsed.fields])
    nodes = tuple(_node(f["name"], f["type"], f.get("metadata") or {}, mode) for f in schema_json["fields"])
    partition_columns = tuple(table.metadata().partition_columns)
    prunable = _prunable(columns)
    physical = {f["name"]: str((f.get("metadata") or {}).get("delta.columnMapping.physicalName") or f["name"])
                if mode != "none" else f["name"] for f in schema_json["fields"]}
    files = _files(table, root, field, columns, physical, partition_columns, prunable)
    return Opened(ref, field, root, version, columns, nodes, mode, partition_columns, files, prunable)


def _prunable(columns: T.StructType) -> TableSchema:
    """The top-level columns with an order the evaluator knows, as a schema to bind filters to."""
    out: list[tuple[str, str]] = []
    for f in columns.fields:
        if isinstance(f.dataType, T.StructType | T.ArrayType | T.MapType | T.BinaryType):
            continue
        if f.name.startswith("_lading") or any(f.name.lower() == n.lower() for n, _ in out):
            continue
        out.append((f.name, format_types.type_name(f.dataType)))
    return TableSchema.of(out)


def _files(table: Any, root: str, field: str, columns: T.StructType, physical: dict[str, str],
           partition_columns: tuple[str, ...], prunable: TableSchema) -> tuple[DataFile, ...]:
    """The version's data files; ``physical``: the name its statistics give each column."""
    actions = pa.table(table.get_add_actions(flatten=False)).to_pylist()
    deleted: dict[str, tuple[int, ...]] = {}
    if "deletionVectors" in set(table.protocol().reader_features or ()):
        for row in pa.table(table.deletion_vectors()).to_pylist():
            gone = tuple(i for i, keep in enumerate(row["selection_vector"]) if not keep)
            deleted[_confine(root, row["filepath"] if "://" in row["filepath"] else "file://" + row["filepath"],
                             field)] = gone
    types = {f.name: f.dataType for f in columns.fields}
    out = []
    for action in actions:
        uri = _confine(root, action["path"], field)
        rows = action.get("num_records")
        partition = action.get("partition") or {}
        values = tuple((name, partition.get(name)) for name in partition_columns)
        stats: dict[int, ColumnStats] = {}
        for column in prunable.columns:
            if column.name in partition_columns:
                value = partition.get(column.name)
                stats[column.id] = ColumnStats(nulls=(rows if value is None else 0) if rows is not None else None,
                                               min=None if value is None else _domain(value, types[column.name]),
                                               max=None if value is None else _domain(value, types[column.name]))
                continue
            stats[column.id] = _column_stats(action, physical.get(column.name, column.name), types[column.name])
        out.append(DataFile(uri, int(action["size_bytes"]), values, deleted.pop(uri, ()),
                            PartStats(rows=-1 if rows is None else int(rows), columns=stats)))
    if deleted:  # every deletion vector belongs to a file of the version
        raise DeltaInputError(f"{field}: deletion vectors of {root} name files the version does not have: "
                              f"{', '.join(sorted(deleted)[:3])}")
    return tuple(out)


def _domain(value: Any, t: T.DataType) -> Any:
    return to_stats_domain(value, naive_utc=isinstance(t, T.TimestampNTZType))


def _column_stats(action: dict[str, Any], key: str, t: T.DataType) -> ColumnStats:
    """A column's statistics from an add action, conservatively (see the module doc)."""
    nulls = (action.get("null_count") or {}).get(key)
    lo = (action.get("min") or {}).get(key)
    hi = (action.get("max") or {}).get(key)
    if isinstance(t, T.FloatType | T.DoubleType):
        hi = None  # Spark orders NaN above every number: a max that left NaN out bounds nothing
        lo = lo if isinstance(lo, float) and lo == lo else None
    elif isinstance(t, T.StringType):
        hi = hi if isinstance(hi, str) and len(hi) < STRING_PREFIX else None
        lo = lo if isinstance(lo, str) else None
    elif isinstance(t, T.DecimalType):
        if t.precision > EXACT_DECIMAL_DIGITS:
            lo = hi = None
        lo = lo if isinstance(lo, decimal.Decimal) else None
        hi = hi if isinstance(hi, decimal.Decimal) else None
    lo, hi = _domain(lo, t), _domain(hi, t)
    if isinstance(t, T.TimestampType | T.TimestampNTZType):
        lo = lo - TIMESTAMP_SLACK_MICROS if isinstance(lo, int) else None
        hi = hi + TIMESTAMP_SLACK_MICROS if isinstance(hi, int) else None
    return ColumnStats(nulls=nulls if isinstance(nulls, int) else None, min=lo, max=hi)


def check_files_exist(opened: Opened) -> None:
    """Every data file of a version read by time travel is still there (a VACUUM removes the
    files older versions name): one listing of the table's directory."""
    storage = st.open_storage(opened.root)
    present = {o.uri for o in storage.list_objects(opened.root)}
    gone = [f.uri for f in opened.files if f.uri not in present]
    if gone:
        raise DeltaInputError(f"{opened.field}: version {opened.version} of {opened.root} names {len(gone)} data "
                              f"file(s) that no longer exist, such as {gone[0]}: a VACUUM removed them; read a newer "
                              "version")


# -- filters and planning ------------------------------------------------------------------------
def bound_filter(filters: Sequence[Any], schema: TableSchema) -> ex.Expr:
    """The conjunction of the pushed Spark filters the evaluator can bind (others: no pruning)."""
    return ex.and_all(ex.bind_pushed(filters, schema))


def plan(opened: Opened, where: ex.Expr | None = None) -> list[DataFile]:
    """The data files a read with ``where`` (bound to ``opened.prunable``) must open."""
    if where is None or where == ex.TRUE:
        return list(opened.files)
    return [f for f in opened.files if interp.might_match(where, f.stats)]


# -- reading one file ----------------------------------------------------------------------------
def _find(t: pa.DataType | pa.Schema, key: str | int) -> int | None:
    fields = list(t) if isinstance(t, pa.Schema) else [t.field(i) for i in range(t.num_fields)]
    for i, f in enumerate(fields):
        if isinstance(key, int):
            raw = (f.metadata or {}).get(b"PARQUET:field_id")
            if raw is not None and int(raw) == key:
                return i
        elif f.name == key:
            return i
    return None


def _logical(arr: pa.Array, node: Node, target: pa.DataType) -> pa.Array:
    """``arr`` (as the file stores the column) with its nested fields found by their keys and
    named logically; a nested field the file lacks reads NULL. Leaves keep the file's type
    (``conform_batch`` casts them)."""
    if node.kind == "struct" and pa.types.is_struct(arr.type) and pa.types.is_struct(target):
        children, fields = [], []
        for i, child in enumerate(node.children):
            want = target.field(i)
            found = _find(arr.type, child.key)
            value = (_logical(arr.field(found), child, want.type) if found is not None
                     else pa.nulls(len(arr), want.type))
            children.append(value)
            fields.append(pa.field(want.name, value.type))
        return pa.StructArray.from_arrays(children, fields=fields, mask=arr.is_null())
    if node.kind == "list" and (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)) \
            and pa.types.is_list(target):
        values = _logical(arr.values, node.children[0], target.value_type)
        return pa.ListArray.from_arrays(arr.offsets, values, mask=arr.is_null())
    if node.kind == "map" and pa.types.is_map(arr.type) and pa.types.is_map(target):
        keys = _logical(arr.keys, node.children[0], target.key_type)
        items = _logical(arr.items, node.children[1], target.item_type)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, mask=arr.is_null())
    return arr


def read_file(opened: Opened, data: DataFile, lading: pa.Schema,
              settings: st.S3Settings | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of one data file as batches of ``lading`` (the input's Arrow schema), deletion
    vector applied."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    storage = st.open_storage(data.uri, settings or st.S3Settings.from_env())
    partition = dict(data.partition)
    deleted = pa.array(data.deleted, pa.int64()) if data.deleted else None
    with storage.open_input(data.uri, data.size) as source:
        parquet = pq.ParquetFile(source)
        file_schema = parquet.schema_arrow
        located = {n.name: _find(file_schema, n.key) for n in opened.nodes}
        wanted = sorted({i for n in opened.nodes if n.name not in partition and (i := located[n.name]) is not None})
        offset = 0
        batches = parquet.iter_batches(batch_size=65536, columns=[file_schema.field(i).name for i in wanted],
                                       use_threads=False) if wanted else _row_counts(parquet)
        for batch in batches:
            rows = batch.num_rows
            arrays = []
            for node, target in zip(opened.nodes, lading, strict=True):
                if node.name in partition:
                    arrays.append(pa.repeat(pa.scalar(partition[node.name], target.type), rows))
                elif located[node.name] is None:
                    arrays.append(pa.nulls(rows, target.type))
                else:
                    column = batch.column(file_schema.field(located[node.name]).name)
                    arrays.append(_logical(column, node, target.type))
            out = format_types.conform_batch(pa.RecordBatch.from_arrays(arrays, names=lading.names), lading)
            if deleted is not None:
                positions = pa.array(range(offset, offset + rows), pa.int64())
                out = out.filter(pc.invert(pc.is_in(positions, value_set=deleted)))
            offset += rows
            if out.num_rows:
                yield out


def _row_counts(parquet: Any) -> Iterator[pa.RecordBatch]:
    """One batch of a placeholder column per row group, for a file none of whose columns is read
    (every column a partition column, or added after the file was written)."""
    for i in range(parquet.num_row_groups):
        yield pa.record_batch([pa.nulls(parquet.metadata.row_group(i).num_rows)], names=["_"])


# -- the data source -------------------------------------------------------------------------
def _options_ref(options: dict[str, str]) -> tuple[DeltaInput, str]:
    raw = json.loads(options["input"])
    return DeltaInput(raw["table"], raw.get("version"), None), raw["field"]


class DeltaReader(lake.KeepsFilters, DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        ref, field = _options_ref(options)
        self.settings = st.S3Settings.from_env(options.get("endpoint") or None)
        self.opened = open_table(ref, field, self.settings)
        self.filters: list[Any] = []

    def partitions(self) -> Sequence[InputPartition]:
        return lake.tasks(plan(self.opened, bound_filter(self.filters, self.opened.prunable)))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        assert isinstance(partition, lake.Task)
        if partition.item is None:
            return
        lading, wire = lake.schemas(self.opened.columns)
        for batch in read_file(self.opened, partition.item, lading, self.settings):
            yield spark_formats.wire_batch(batch, wire)


class DeltaDataSource(DataSource):
    """``spark.read.format("lading-delta").option("input", …)``: see ``read_delta``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> T.StructType:
        ref, field = _options_ref(dict(self.options))
        opened = open_table(ref, field, st.S3Settings.from_env(self.options.get("endpoint") or None))
        return spark_formats.transfer_schema(opened.columns)

    def reader(self, schema: T.StructType) -> DataSourceReader:
        pushed.guard_literals()  # first: before pyspark's worker reads the pushed filters
        return DeltaReader(dict(self.options))


def read_delta(session: SparkSession, ref: DeltaInput, *, field: str, view: str | None = None,
               pushdown: bool = True, endpoint: str | None = None) -> DataFrame:
    """A DataFrame over the Delta table's chosen version. The input is opened here first (and,
    for time travel, its files checked to exist), so a bad input fails naming ``field``
    before the query runs; the version is then pinned for the scan's own planning.
    ``view``/``pushdown`` as for table inputs (``reader.shared_scans``)."""
    opened = open_table(ref, field, st.S3Settings.from_env(endpoint))
    if ref.version is not None or ref.timestamp_ms is not None:
        check_files_exist(opened)
    session.dataSource.register(DeltaDataSource)
    options = {"input": json.dumps({"table": opened.root, "field": field, "version": opened.version})}
    if view is not None:
        options["view"] = view
    if not pushdown:
        options["pushdown"] = "false"
    if endpoint:
        options["endpoint"] = endpoint
    df = (session.read.format(NAME).schema(spark_formats.transfer_schema(opened.columns)).options(**options)
          .load())
    return spark_formats.from_transfer(df, opened.columns)
