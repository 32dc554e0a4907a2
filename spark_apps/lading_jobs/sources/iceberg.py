"""The "lading-iceberg" Python data source: an Iceberg table, from one metadata file, as a
query input (``from.inputs[]: {name, iceberg: {metadata, snapshotId | asOf}}``).

Planning is on the driver with pyiceberg: the metadata file, the manifest list and the
manifests are read through lading's own storage (``LadingFileIO``: lading's endpoint and
credential rules, never a client pyiceberg configures), every file confined to the table's
directory (the parent of ``metadata/``, the prefix the operator's policy checked). The
scan is planned with the filters Spark pushes (``table.filters.expr.from_spark``, the table input's
conversion, then ``to_iceberg``): pyiceberg prunes manifests and data files by partition
values and column metrics. Every filter is returned to Spark, so pruning can only skip
files, never decide a row. Each Spark task reads one data file (with the position deletes
that apply to it) through pyiceberg's ``ArrowScan``, which maps columns by field id
(renamed, dropped and added columns read right) and applies position deletes exactly.

Refused, naming the input, before anything is written: a metadata file that does not
exist, a snapshot the metadata no longer has (expired), an instant before the first
snapshot, equality deletes (named), and a column of an Iceberg type lading has no type for.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import posixpath
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyiceberg import expressions as ie
from pyiceberg import types as it
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile
from pyiceberg.manifest import DataFileContent, ManifestContent
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromByteStream
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from lading_jobs import storage as st
from lading_jobs.formats import spark as spark_formats
from lading_jobs.formats import types as format_types
from lading_jobs.sources import lake
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.stats.part import to_stats_domain
from lading_spec.copyjob import IcebergTable, iceberg_table_root

NAME = "lading-iceberg"


class IcebergInputError(ValueError):
    """An Iceberg input lading cannot read as asked; the message names the input's field."""


# -- files through lading's storage -----------------------------------------------------------
def _normalise(location: str) -> str:
    """An Iceberg file location as a lading URI (``s3a://``/``s3n://`` are ``s3://``; a bare
    absolute path is ``file://``); ``.`` and ``..`` segments resolved, so the confinement
    check sees where the file really is."""
    for scheme in ("s3a://", "s3n://"):
        if location.startswith(scheme):
            location = "s3://" + location[len(scheme):]
    if location.startswith("/"):
        location = "file://" + location
    scheme, sep, rest = location.partition("://")
    if not sep:
        return location
    return f"{scheme}://{posixpath.normpath(rest)}" + ("/" if rest.endswith("/") else "")


class _File(InputFile):
    def __init__(self, io: LadingFileIO, location: str) -> None:
        super().__init__(location)
        self.io, self.uri = io, io.confine(location)
        self._size: int | None = None

    def __len__(self) -> int:
        if self._size is None:
            info = self.io.storage(self.uri).head(self.uri)
            if info is None:
                raise FileNotFoundError(f"{self.uri} does not exist")
            self._size = info.size
        return self._size

    def exists(self) -> bool:
        return self.io.storage(self.uri).head(self.uri) is not None

    def open(self, seekable: bool = True) -> InputStream:
        return self.io.storage(self.uri).open_input(self.uri, len(self))  # type: ignore[return-value]


@dataclasses.dataclass
class LadingFileIO(FileIO):
    """A read-only pyiceberg FileIO over lading's storage, confined to ``root``."""

    root: str
    settings: st.S3Settings
    field: str

    def __post_init__(self) -> None:
        super().__init__({})

    def storage(self, uri: str) -> st.Storage:
        return st.open_storage(uri, self.settings)

    def confine(self, location: str) -> str:
        uri = _normalise(location)
        if not uri.startswith(self.root):
            raise IcebergInputError(f"{self.field}: the table's metadata names {location}, outside the table's "
                                    f"directory {self.root}; lading reads an Iceberg table's files only under the "
                                    "directory of its metadata file (the prefix the policy allows)")
        return uri

    def new_input(self, location: str) -> InputFile:
        return _File(self, location)

    def new_output(self, location: str) -> OutputFile:
        raise IcebergInputError(f"{self.field}: an Iceberg input is read only (asked to write {location})")

    def delete(self, location: str | InputFile | OutputFile) -> None:
        raise IcebergInputError(f"{self.field}: an Iceberg input is read only (asked to delete {location})")


# -- the table, a snapshot, a schema --------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Opened:
    """A loaded input: its metadata, the snapshot read (None: an empty table) and its schema."""

    ref: IcebergTable
    field: str
    io: LadingFileIO
    metadata: TableMetadata
    snapshot: Snapshot | None
    schema: Schema

    def table(self) -> Table:
        from pyiceberg.catalog.noop import NoopCatalog

        return Table(("lading", "input"), self.metadata, self.ref.metadata, self.io, NoopCatalog("lading"))


def resolve(ref: IcebergTable, field: str) -> IcebergTable:
    """A catalog-named input (``catalog``, ``table``) as the metadata file its catalog names now
    (once, on the driver: every task reads that file); an input by metadata file as it is."""
    if ref.catalog is None:
        return ref
    from lading_jobs.table.iceberg import catalog_pointer

    try:
        location = catalog_pointer.location(ref.catalog, str(ref.table))
    except catalog_pointer.CatalogError as e:
        raise IcebergInputError(f"{field}.catalog: {e}") from e
    if location is None:
        raise IcebergInputError(f"{field}.table: catalog {ref.catalog!r} has no table {ref.table}; give a table "
                                "the catalog lists (namespace.name)")
    if not location.endswith(".metadata.json"):
        raise IcebergInputError(f"{field}.table: catalog {ref.catalog!r} names {location!r} for {ref.table}, not an "
                                "Iceberg metadata file")
    return dataclasses.replace(ref, metadata=location)


def open_table(ref: IcebergTable, field: str, settings: st.S3Settings | None = None) -> Opened:
    """Read ``ref``'s metadata file and choose its snapshot; clear errors naming ``field``."""
    io = LadingFileIO(iceberg_table_root(_normalise(ref.metadata)), settings or st.S3Settings.from_env(), field)
    uri = io.confine(ref.metadata)
    data = io.storage(uri).read(uri) if io.storage(uri).head(uri) is not None else None
    if data is None:
        raise IcebergInputError(f"{field}.metadata: {uri} does not exist; give the URI of the table's current "
                                "metadata file (its catalog's metadata_location)")
    try:
        metadata = FromByteStream.table_metadata(pa.BufferReader(data))  # type: ignore[arg-type]
    except Exception as e:  # pydantic's ValidationError, JSON errors: not a metadata file
        raise IcebergInputError(f"{field}.metadata: {uri} is not Iceberg table metadata: {e}") from e
    snapshot = _snapshot(metadata, ref, field)
    schema = metadata.schema()
    if snapshot is not None and snapshot.schema_id is not None:
        schema = next((s for s in metadata.schemas if s.schema_id == snapshot.schema_id), schema)
    return Opened(ref, field, io, metadata, snapshot, schema)


def _snapshot(metadata: TableMetadata, ref: IcebergTable, field: str) -> Snapshot | None:
    if ref.snapshot_id is not None:
        found = metadata.snapshot_by_id(ref.snapshot_id)
        if found is None:
            known = ", ".join(str(s.snapshot_id) for s in metadata.snapshots[-5:]) or "none"
            raise IcebergInputError(f"{field}.snapshotId: snapshot {ref.snapshot_id} is not in {ref.metadata} (expired, "
                                    f"or of another table); its newest snapshots: {known}")
        return found
    if ref.as_of_ms is not None:
        chosen = None
        for entry in metadata.snapshot_log:
            if entry.timestamp_ms <= ref.as_of_ms:
                chosen = entry.snapshot_id
        found = metadata.snapshot_by_id(chosen) if chosen is not None else None
        if found is None:
            first = metadata.snapshot_log[0].timestamp_ms if metadata.snapshot_log else None
            raise IcebergInputError(f"{field}.asOf: {ref.metadata} has no snapshot current at that instant"
                                    + (f" (its history starts at {first} ms since the epoch)" if first else
                                       " (it has no snapshot history)")
                                    + "; give a later asOf, or snapshotId")
        return found
    return metadata.current_snapshot()


def _spark_type(t: it.IcebergType, path: str, field: str) -> T.DataType:
    simple: dict[type, T.DataType] = {
        it.BooleanType: T.BooleanType(), it.IntegerType: T.IntegerType(), it.LongType: T.LongType(),
        it.FloatType: T.FloatType(), it.DoubleType: T.DoubleType(), it.DateType: T.DateType(),
        it.TimestampType: T.TimestampNTZType(), it.TimestamptzType: T.TimestampType(),
        it.StringType: T.StringType(), it.BinaryType: T.BinaryType(), it.FixedType: T.BinaryType(),
    }
    if type(t) in simple:
        return simple[type(t)]
    if isinstance(t, it.DecimalType):
        return T.DecimalType(t.precision, t.scale)
    if isinstance(t, it.StructType):
        return T.StructType([T.StructField(f.name, _spark_type(f.field_type, f"{path}.{f.name}", field), True)
                             for f in t.fields])
    if isinstance(t, it.ListType):
        return T.ArrayType(_spark_type(t.element_type, f"{path}.element", field), True)
    if isinstance(t, it.MapType):
        return T.MapType(_spark_type(t.key_type, f"{path}.key", field),
                         _spark_type(t.value_type, f"{path}.value", field), True)
    raise IcebergInputError(f"{field}: column {path!r} is of Iceberg type {t}, which lading has no type for "
                            "(it reads boolean, int, long, float, double, decimal, date, timestamp, timestamptz, "
                            "string, binary, fixed, struct, list, map); leave the column out of the table's "
                            "schema, or copy the table with an engine that converts it")


def spark_schema(schema: Schema, field: str) -> T.StructType:
    """The Spark schema of an Iceberg schema (every column nullable, as file inputs are)."""
    return T.StructType([T.StructField(f.name, _spark_type(f.field_type, f.name, field), True)
                         for f in schema.fields])


# -- filters ----------------------------------------------------------------------------------
def _iceberg_literal(value: Any, t: it.IcebergType) -> Any:
    """A Spark filter literal as the value pyiceberg binds to a column of type ``t``, or
    None when it does not translate exactly (the filter then prunes nothing): only a literal
    of the column's own kind, so no conversion can round it."""
    if isinstance(t, it.TimestampType | it.TimestamptzType):
        ok = isinstance(value, dt.datetime)
        return to_stats_domain(value, naive_utc=isinstance(t, it.TimestampType)) if ok else None
    if isinstance(t, it.DateType):
        return to_stats_domain(value) if isinstance(value, dt.date) and not isinstance(value, dt.datetime) else None
    if isinstance(t, it.DecimalType):  # at the column's scale (pyiceberg binds no other), when exactly so
        if not isinstance(value, decimal.Decimal) or not value.is_finite():
            return None
        scaled = value.quantize(decimal.Decimal(1).scaleb(-t.scale), context=decimal.Context(prec=60))
        return scaled if scaled == value else None
    if isinstance(t, it.FloatType | it.DoubleType):
        return value if isinstance(value, int | float) and not isinstance(value, bool) and value == value else None
    if isinstance(t, it.IntegerType | it.LongType):
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(t, it.StringType):
        return value if isinstance(value, str) else None
    if isinstance(t, it.BooleanType):
        return value if isinstance(value, bool) else None
    return None


def to_iceberg(e: ex.Expr, schema: Schema) -> ie.BooleanExpression | None:
    """A lading filter (unbound, by column name) as a pyiceberg expression, or None."""
    if isinstance(e, ex.Call) and e.fn == "not":
        child = to_iceberg(e.args[0], schema)
        return None if child is None else ie.Not(child)
    if isinstance(e, ex.Call) and e.fn in ("and", "or"):
        left, right = to_iceberg(e.args[0], schema), to_iceberg(e.args[1], schema)
        if left is None or right is None:
            return None if e.fn == "or" or (left is None and right is None) else (left or right)
        return ie.And(left, right) if e.fn == "and" else ie.Or(left, right)
    if not isinstance(e, ex.Pred):
        return None
    found = schema.find_field(e.name, case_sensitive=False) if _has(schema, e.name) else None
    if found is None or not found.field_type.is_primitive:
        return None
    name = found.name
    if e.op in ("isnull", "notnull"):
        unary: Any = ie.IsNull if e.op == "isnull" else ie.NotNull  # pydantic models: mypy sees no __init__
        return unary(name)  # type: ignore[no-any-return]
    values = e.value if e.op == "in" else (e.value,)
    converted = [_iceberg_literal(v, found.field_type) for v in values]
    if any(v is None for v in converted):
        return None
    if e.op == "in":
        member: Any = ie.In
        return member(name, converted)  # type: ignore[no-any-return]
    ops = {"eq": ie.EqualTo, "gt": ie.GreaterThan, "ge": ie.GreaterThanOrEqual, "lt": ie.LessThan,
           "le": ie.LessThanOrEqual, "startswith": ie.StartsWith}
    return ops[e.op](name, converted[0]) if e.op in ops else None


def _has(schema: Schema, name: str) -> bool:
    try:
        schema.find_field(name, case_sensitive=False)
    except ValueError:
        return False
    return True


def _bindable(e: ie.BooleanExpression, schema: Schema) -> bool:
    try:
        ie.visitors.bind(schema, e, case_sensitive=False)
    except (ValueError, TypeError):
        return False
    return True


def row_filter(filters: Sequence[Any], schema: Schema) -> ie.BooleanExpression:
    """The conjunction of the pushed Spark filters pyiceberg can prune by (others: no pruning)."""
    out: ie.BooleanExpression = ie.AlwaysTrue()
    for f in filters:
        lading = ex.from_spark(f)
        converted = to_iceberg(lading, schema) if lading is not None else None
        if converted is not None and _bindable(converted, schema):
            out = ie.And(out, converted)
    return out


# -- planning --------------------------------------------------------------------------------
def plan(opened: Opened, where: ie.BooleanExpression | None = None) -> list[FileScanTask]:
    """The data files (each with its position deletes) a read with ``where`` must open."""
    if opened.snapshot is None:
        return []
    where = where if where is not None else ie.AlwaysTrue()
    scan = opened.table().scan(row_filter=where, snapshot_id=opened.snapshot.snapshot_id, case_sensitive=False)
    try:
        return list(scan.plan_files())
    except ValueError as e:
        if "equality deletes" not in str(e):
            raise
        raise IcebergInputError(f"{opened.field}: snapshot {opened.snapshot.snapshot_id} of {opened.ref.metadata} "
                                f"has equality delete files, which lading does not apply yet: "
                                f"{', '.join(equality_deletes(opened)[:5])}; compact the table (rewrite its data "
                                "files) first, or read an earlier snapshot") from e


def equality_deletes(opened: Opened) -> list[str]:
    """The equality delete files of the input's snapshot."""
    assert opened.snapshot is not None
    found = []
    for manifest in opened.snapshot.manifests(opened.io):
        if manifest.content != ManifestContent.DELETES:
            continue
        for entry in manifest.fetch_manifest_entry(opened.io, discard_deleted=True):
            if entry.data_file.content == DataFileContent.EQUALITY_DELETES:
                found.append(entry.data_file.file_path)
    return found


def data_file_count(opened: Opened) -> int:
    """How many data files the input's snapshot holds (what an unfiltered read opens)."""
    return len(plan(opened))


# -- the data source -------------------------------------------------------------------------
def _options_ref(options: dict[str, str]) -> tuple[IcebergTable, str]:
    raw = json.loads(options["input"])
    return IcebergTable(raw["metadata"], raw.get("snapshotId"), raw.get("asOfMs")), raw["field"]


class IcebergReader(lake.KeepsFilters, DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        ref, field = _options_ref(options)
        self.opened = open_table(ref, field, st.S3Settings.from_env(options.get("endpoint") or None))
        self.columns = spark_schema(self.opened.schema, field)
        self.filters: list[Any] = []

    def partitions(self) -> Sequence[InputPartition]:
        return lake.tasks(plan(self.opened, row_filter(self.filters, self.opened.schema)))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        from pyiceberg.io.pyarrow import ArrowScan

        assert isinstance(partition, lake.Task)
        if partition.item is None:
            return
        lading, wire = lake.schemas(self.columns)
        scan = ArrowScan(self.opened.metadata, self.opened.io, self.opened.schema, ie.AlwaysTrue())
        for batch in scan.to_record_batches([partition.item]):
            batch = pa.RecordBatch.from_arrays(batch.columns, names=lading.names)
            yield spark_formats.wire_batch(format_types.conform_batch(batch, lading), wire)


class IcebergDataSource(DataSource):
    """``spark.read.format("lading-iceberg").option("input", …)``: see ``read_iceberg``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> T.StructType:
        ref, field = _options_ref(dict(self.options))
        opened = open_table(ref, field, st.S3Settings.from_env(self.options.get("endpoint") or None))
        return spark_formats.transfer_schema(spark_schema(opened.schema, field))

    def reader(self, schema: T.StructType) -> DataSourceReader:
        from lading_jobs import pushed

        pushed.guard_literals()  # first: before pyspark's worker reads the pushed filters
        return IcebergReader(dict(self.options))


def read_iceberg(session: SparkSession, ref: IcebergTable, *, field: str, view: str | None = None,
                 pushdown: bool = True, endpoint: str | None = None) -> DataFrame:
    """A DataFrame over the Iceberg table's chosen snapshot. The input is opened here first, so
    a bad input fails naming ``field`` before the query runs; ``view``/``pushdown`` as for
    table inputs (``reader.shared_scans``). A catalog-named input is resolved here, once."""
    ref = resolve(ref, field)
    opened = open_table(ref, field, st.S3Settings.from_env(endpoint))
    columns = spark_schema(opened.schema, field)
    plan(opened)  # refuses equality deletes now, before anything is written
    session.dataSource.register(IcebergDataSource)
    options = {"input": json.dumps({"metadata": ref.metadata, "field": field, "asOfMs": ref.as_of_ms,
                                    "snapshotId": opened.snapshot.snapshot_id if opened.snapshot else None})}
    if view is not None:
        options["view"] = view
    if not pushdown:
        options["pushdown"] = "false"
    if endpoint:
        options["endpoint"] = endpoint
    df = session.read.format(NAME).schema(spark_formats.transfer_schema(columns)).options(**options).load()
    return spark_formats.from_transfer(df, columns)
