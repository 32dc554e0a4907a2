"""The Iceberg view of a lading table, as pure functions: types, schema, metrics, exactness.

The mirror (``mirror.py``) publishes Iceberg v2 metadata beside the log; everything it
decides is here, with no I/O:

* ``iceberg_type`` / ``iceberg_schema``: lading's type mapping (docs/formats.md) in
  Iceberg's types, field ids = lading column ids; nested fields (struct fields, list elements,
  map keys and values) by their ids from the log (``Column.field_ids``). A type Iceberg cannot
  express (intervals, ``void``, ``variant``, also inside a nested type) is an ``Unmirrorable``
  naming the column. ``name_mapping``: ``schema.name-mapping.default``, names to those ids.
* ``with_lading_columns``: the metadata's ``schemas`` with lading's own columns (``_lading_time``,
  ``_lading_diff``, in every part under ids 2147483000 and 2147483001) recorded in a schema of their
  own that no snapshot uses, and ``LADING_LAST_COLUMN_ID`` the least ``last-column-id``: every id in
  a part is then one the metadata assigned, as Iceberg records a dropped column (its data stays in
  the files, no reader returns it), so a reader that checks field ids strictly takes the parts, and
  no reader shows the columns (``SELECT *`` reads a snapshot's schema). ``accounting_lading_columns``:
  the successor of a metadata file written before, recording them (``lading table sync``).
* ``data_file``: a part as an Iceberg data file, its column metrics taken from lading's
  statistics (never from the part): value and null counts, bounds in Iceberg's single-value
  binary encoding, strings truncated to 16 characters as Iceberg's default metrics mode does
  (the lower bound a prefix, the upper bound a prefix with its last character incremented).
* ``inexact``: why an Iceberg reader of the snapshot would not return lading's rows, even with
  the delete files the mirror writes for upsert and diff tables (``table.iceberg.deletes``) and its copy
  files of rows counting more than once (``table.iceberg.copies``): a retraction in an append table, a
  column whose default older parts read, a nested column in a part written without nested field
  ids; or None. The mirror publishes no snapshot for such a version.
"""

from __future__ import annotations

import decimal
import re
import threading
import uuid
from collections.abc import Iterable
from typing import Any

from pyiceberg import types as it
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadataV2
from pyiceberg.table.name_mapping import MappedField, NameMapping, create_mapping_from_schema
from pyiceberg.table.snapshots import MetadataLogEntry
from pyiceberg.typedef import Record
from pyspark.sql import types as T

from lading_jobs.formats import types as ftypes
from lading_jobs.table import format as fmt
from lading_jobs.table.log.commits import Part, Snapshot
from lading_jobs.table.schema import Column, TableSchema, child_path
from lading_jobs.table.stats import part as stx

METRICS_STRING_LENGTH = 16
"""Iceberg's default metrics mode, ``truncate(16)``: string bounds of at most 16 characters."""

_PRIMITIVES: dict[str, it.PrimitiveType] = {
    "boolean": it.BooleanType(), "tinyint": it.IntegerType(), "smallint": it.IntegerType(),
    "int": it.IntegerType(), "bigint": it.LongType(), "float": it.FloatType(), "double": it.DoubleType(),
    "string": it.StringType(), "json": it.StringType(), "uuid": it.StringType(), "binary": it.BinaryType(),
    "date": it.DateType(), "timestamp": it.TimestamptzType(), "timestamp_ntz": it.TimestampType(),
}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
_TEXT = re.compile(r"(var)?char\(\d+\)")
_TIME = re.compile(r"time\(\d\)")


class Unmirrorable(ValueError):
    """A column whose type the Iceberg mirror cannot express; the message names it and the fix."""


def iceberg_type(column: Column) -> it.IcebergType:
    """The Iceberg type of a lading column type (docs/formats.md, "Iceberg"); ``Unmirrorable`` if none.
    A nested type's fields get the column's nested field ids (``Column.field_ids``); every struct
    field, list element and map value optional (parts store them nullable), map keys required."""
    if not column.field_ids:
        return _primitive(column, column.type)
    ids = dict(column.field_ids)

    def field_id(path: str) -> int:
        if path not in ids:  # TableSchema hands out every id; a log edited by hand may lack one
            raise Unmirrorable(f"column {column.name!r} (id {column.id}): its nested field {path!r} has no "
                               "field id in the table's schema; a schema commit (any column change) assigns it")
        return ids[path]

    def convert(t: T.DataType, path: str) -> it.IcebergType:
        if isinstance(t, T.StructType):
            fields = []
            for f in t.fields:
                p = child_path(path, f.name)
                fields.append(it.NestedField(field_id(p), f.name, convert(f.dataType, p), required=False))
            return it.StructType(*fields)
        if isinstance(t, T.ArrayType):
            p = child_path(path, "element")
            return it.ListType(field_id(p), convert(t.elementType, p), element_required=False)
        if isinstance(t, T.MapType):
            k, v = child_path(path, "key"), child_path(path, "value")
            return it.MapType(field_id(k), convert(t.keyType, k), field_id(v), convert(t.valueType, v),
                              value_required=False)
        return _primitive(column, ftypes.type_name(t))

    return convert(ftypes.spark_type_of(column.type), "")


def _primitive(column: Column, t: str) -> it.PrimitiveType:
    """The Iceberg type of lading's primitive type ``t`` (column ``column``'s, or inside it)."""
    if t in _PRIMITIVES:
        return _PRIMITIVES[t]
    if m := _DECIMAL.fullmatch(t):
        return it.DecimalType(int(m.group(1)), int(m.group(2)))
    if _TEXT.fullmatch(t):
        return it.StringType()
    if _TIME.fullmatch(t):
        return it.TimeType()
    if t.startswith(("array<", "map<", "struct<")):
        why = "its nested fields have no field ids in the table's schema"
    elif t.startswith("interval"):
        why = "Iceberg has no interval type"
    else:
        why = f"Iceberg v2 has no {t} type"
    if t != column.type:
        why = f"it holds {t}: {why}"
    raise Unmirrorable(f"column {column.name!r} (id {column.id}) has the type {column.type}, which the Iceberg mirror "
                       f"cannot express: {why}; the table stays readable through lading, and the mirror resumes "
                       "once the column is dropped")


def iceberg_schema(schema: TableSchema) -> Schema:
    """The Iceberg schema of a lading schema: same ids, names and order; every field optional
    (parts store every column nullable; NOT NULL is enforced when writing). The same object for the
    same ``schema`` object (a publish asks three times; built once): treat it as immutable."""
    cached = _SCHEMAS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    fields = [it.NestedField(c.id, c.name, iceberg_type(c), required=False) for c in schema.columns]
    out = Schema(*fields, schema_id=schema.schema_id)
    with _SCHEMAS_LOCK:  # a publish and an early round may ask on two threads
        if len(_SCHEMAS) >= 16:
            _SCHEMAS.pop(next(iter(_SCHEMAS)))
        _SCHEMAS[id(schema)] = (schema, out)  # the schema is kept alive with it: its id is not reused meanwhile
    return out


_SCHEMAS: dict[int, tuple[TableSchema, Schema]] = {}
_SCHEMAS_LOCK = threading.Lock()


def name_mapping(schema: Schema) -> str:
    """Iceberg's ``schema.name-mapping.default`` of a schema: each field's name to its id, nested
    fields too (``element``, ``key``, ``value``), for readers of files without field ids; plus the
    parts' ``_lading_time`` and ``_lading_diff`` (pyiceberg maps every column of such a file)."""
    mapped = list(create_mapping_from_schema(schema))
    mapped += [MappedField.model_validate({"field-id": fid, "names": [name]})
               for name, fid in ((fmt.TIME_COLUMN, fmt.TIME_FIELD_ID), (fmt.DIFF_COLUMN, fmt.DIFF_FIELD_ID))]
    return NameMapping(mapped).model_dump_json()


LADING_SCHEMA_ID = fmt.TIME_FIELD_ID
"""The Iceberg schema id of the schema holding lading's own columns (``with_lading_columns``): far
above any lading schema id (they count schema changes from 0), so it never collides with one."""
LADING_LAST_COLUMN_ID = max(fmt.TIME_FIELD_ID, fmt.DIFF_FIELD_ID)
"""The least ``last-column-id`` of the mirror's metadata: the ids of lading's own columns are assigned.
Below Iceberg's reserved range (2147483447 up), as a table's field ids must be."""


def lading_columns_schema() -> Schema:
    """lading's own columns as the parts hold them (int64, not null), under their part field ids."""
    return Schema(it.NestedField(fmt.TIME_FIELD_ID, fmt.TIME_COLUMN, it.LongType(), required=True),
                  it.NestedField(fmt.DIFF_FIELD_ID, fmt.DIFF_COLUMN, it.LongType(), required=True),
                  schema_id=LADING_SCHEMA_ID)


def with_lading_columns(schemas: Iterable[Schema]) -> list[Schema]:
    """``schemas`` (a metadata file's, in order) with ``lading_columns_schema`` first: the ids every
    part carries for lading's own columns are then assigned by the metadata. No snapshot and no
    ``current-schema-id`` names it, so readers never return those columns. Metadata files written
    before it existed get it at their table's next publish."""
    rest = [s for s in schemas if s.schema_id != LADING_SCHEMA_ID]
    return [lading_columns_schema(), *rest]


def accounting_lading_columns(meta: TableMetadataV2, meta_uri: str, now_ms: int,
                              log_max: int) -> TableMetadataV2 | None:
    """The successor of metadata file ``meta_uri`` (``meta``) when it lacks ``lading_columns_schema``
    (written before the mirror recorded it): the same snapshots, current schema and properties, the
    schema recorded, ``last-column-id`` raised, ``meta_uri`` appended to the ``metadata-log`` (its
    newest ``log_max`` entries kept). None when ``meta`` has it. Pure."""
    if any(s.schema_id == LADING_SCHEMA_ID for s in meta.schemas):
        return None
    entries = [*meta.metadata_log, MetadataLogEntry.model_validate({"metadata-file": meta_uri,
                                                                    "timestamp-ms": meta.last_updated_ms})]
    return meta.model_copy(update={
        "schemas": with_lading_columns(meta.schemas),
        "last_column_id": max(meta.last_column_id, LADING_LAST_COLUMN_ID),
        "metadata_log": entries[-log_max:], "last_updated_ms": max(meta.last_updated_ms, now_ms)})


def table_uuid(table_id: str) -> uuid.UUID:
    """The Iceberg table UUID of a lading table id (its hex, or a name-based UUID of it)."""
    try:
        return uuid.UUID(hex=table_id)
    except ValueError:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"lading:{table_id}")


def snapshot_id(version: int) -> int:
    """The Iceberg snapshot id (and sequence number) of lading version ``version``: version + 1."""
    return version + 1


def version_of(snapshot_id_: int) -> int:
    return snapshot_id_ - 1


# -- metrics ----------------------------------------------------------------------------------
def _bound_value(t: it.PrimitiveType, value: Any, lower: bool) -> Any:
    """A stats-domain bound as the Python value ``to_bytes`` encodes for ``t``; None to leave it out."""
    if isinstance(t, it.StringType):
        if not isinstance(value, str):
            return None
        return (stx.truncate_lower(value, METRICS_STRING_LENGTH)[0] if lower
                else stx.truncate_upper(value, METRICS_STRING_LENGTH)[0])
    if isinstance(t, it.DecimalType):
        return decimal.Decimal(str(value)).quantize(decimal.Decimal(1).scaleb(-t.scale))
    if isinstance(t, it.FloatType | it.DoubleType):
        if not isinstance(value, int | float) or isinstance(value, bool) or not stx.finite(value):
            return None
        value = float(value)
        if value == 0.0:  # Iceberg orders -0.0 below 0.0; lading's min/max may have kept either zero
            return -0.0 if lower else 0.0
        return value
    if isinstance(t, it.BooleanType):
        return value if isinstance(value, bool) else None
    if isinstance(t, it.IntegerType | it.LongType | it.DateType | it.TimestampType | it.TimestamptzType):
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None


def column_metrics(part: Part, schema: TableSchema) -> dict[str, dict[int, Any]]:
    """Value counts, null counts and bounds (Iceberg binary encoding) of a part, by column id, from
    its lading statistics. A column the part lacks is left out (Iceberg readers read NULL, counted
    as unknown); a bound lading does not have, or that is not of the column's type, is left out."""
    out: dict[str, dict[int, Any]] = {"value_counts": {}, "null_value_counts": {}, "lower_bounds": {},
                                      "upper_bounds": {}}
    for c in schema.columns:
        cs = part.stats.columns.get(c.id)
        if cs is None or c.field_ids:
            continue  # nested columns: no metrics (optional in Iceberg; lading keeps none per leaf)
        t = _primitive(c, c.type)
        out["value_counts"][c.id] = part.rows
        if cs.nulls is not None:
            out["null_value_counts"][c.id] = cs.nulls
        for key, value, lower in (("lower_bounds", cs.min, True), ("upper_bounds", cs.max, False)):
            if value is None:
                continue
            try:
                encoded = _bound_value(t, value, lower)
                if encoded is not None:
                    out[key][c.id] = to_bytes(t, encoded)
            except (ValueError, TypeError, ArithmeticError, OverflowError):
                continue  # a bound that does not fit the type: leave it out ("might match")
    return out


def data_file(table_root: str, part: Part, schema: TableSchema) -> DataFile:
    """A part as an Iceberg v2 data file (unpartitioned), pointing at the part itself."""
    m = column_metrics(part, schema)
    return DataFile.from_args(
        content=DataFileContent.DATA, file_path=table_root + part.path, file_format=FileFormat.PARQUET,
        partition=Record(), record_count=part.rows, file_size_in_bytes=part.size,
        value_counts=m["value_counts"], null_value_counts=m["null_value_counts"],
        lower_bounds=m["lower_bounds"], upper_bounds=m["upper_bounds"], spec_id=0)


# -- exactness ----------------------------------------------------------------------------------
def unmirrorable_ids(schema: TableSchema) -> frozenset[int]:
    """Ids of the columns whose type Iceberg cannot express."""
    out = set()
    for c in schema.columns:
        try:
            iceberg_type(c)
        except Unmirrorable:
            out.add(c.id)
    return frozenset(out)


def _diff_problem(envelope: str, p: Part) -> str | None:
    """Why the diffs of part ``p``'s rows cannot be read exactly by a reader that counts each row
    once, given the delete files (``table.iceberg.deletes``) and copy files (``table.iceberg.copies``: a row
    counting k > 1 times is read k times) the mirror writes: upsert tables, none (a row is in or
    out, by its key's winner); diff tables, none; append tables (no delete files), a diff below 1."""
    if not p.rows or envelope == "upsert":
        return None
    if p.stats.min_diff is None or p.stats.max_diff is None:
        return "rows whose diffs its statistics do not record, which an Iceberg reader would count once per row"
    if envelope != "diff" and p.stats.min_diff < 1:
        return "a retraction or delete marker, which an Iceberg reader would count once per row"
    return None


def inexact(snapshot: Snapshot, unreadable: frozenset[int] = frozenset(),
            only: Iterable[Part] | None = None) -> str | None:
    """Why an Iceberg reader of this version's data files would not return exactly lading's rows,
    or None when it would. Decided from the log and the statistics alone (no part is read);
    anything the statistics leave open counts as inexact. ``unreadable``: ids of columns of a type
    Iceberg cannot express, dropped or not: a part still holding one is refused by Iceberg
    readers (pyiceberg converts every column of a file), so it is not mirrored either.

    ``only``: the parts to look at, when the others are known to pass (the version before was
    mirrored exactly with the same schema and ``unreadable``: each part's answer depends on nothing
    else, so a commit's added parts decide it); every live part otherwise."""
    try:
        iceberg_schema(snapshot.schema)
    except Unmirrorable as e:
        return str(e)
    defaults = [c for c in snapshot.schema.columns if c.default is not None]
    nested = [c for c in snapshot.schema.columns if c.field_ids]
    for p in (snapshot.parts if only is None else only):
        held = sorted(unreadable & p.stats.columns.keys()) if unreadable else ()
        if held:
            return (f"part {p.path} holds column id {held[0]}, of a type Iceberg cannot express (dropped "
                    "from the schema, but still in the part): Iceberg readers refuse the file; a compaction "
                    "that rewrites the part lets the mirror resume")
        why = _diff_problem(snapshot.envelope, p)
        if why is not None:
            return f"part {p.path} holds {why}"
        held_nested = [c for c in nested if c.id in p.stats.columns] if not p.nested_ids and p.rows else ()
        if held_nested:
            c = held_nested[0]
            return (f"part {p.path} was written before lading gave nested fields Parquet field ids, and holds the "
                    f"nested column {c.name!r} (id {c.id}): DuckDB's Iceberg reader maps nested fields by id only "
                    "and would read it as NULL; a compaction that rewrites the part (with ids) lets the mirror resume")
        for c in defaults:
            if p.rows and c.id not in p.stats.columns:
                return (f"column {c.name!r} (id {c.id}) was added with the default {c.default!r}, which part "
                        f"{p.path} (written before it) reads in lading, while Iceberg v2 readers read NULL")
    return None
