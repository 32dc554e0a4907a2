"""A table's schema: columns with stable ids, so names can change and come back safely.

Columns are identified by an integer id that is never reused. Parts store each
column with its id as the Parquet field id; a reader maps a part's columns to
the current schema by id, never by name: a column dropped and re-added under
the same name is a different column, and rows written before it existed read
its default. Types are type names of lading's one type mapping
(``lading_jobs.formats.types``, docs/formats.md): any Spark SQL DDL type it maps
(``bigint``, ``decimal(12,2)``, ``array<struct<a:int>>``, ``interval day to
second``, ``varchar(10)``, ...) plus the logical types ``json`` and ``uuid``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T

from lading_jobs.formats import types as ftypes
from lading_jobs.table import format as fmt


class SchemaError(ValueError):
    """A schema operation or type is invalid; the message names the column and the fix."""


def normalize_type(type_name: str, column: str = "type") -> str:
    """Canonical spelling of a type name; raises SchemaError (naming ``column``) for unknown ones."""
    try:
        return ftypes.canonical_type_name(type_name, column)
    except ftypes.TypeMappingError as e:
        raise SchemaError(str(e)) from e


def arrow_type(type_name: str) -> pa.DataType:
    """The Arrow type parts store for a column type (extension types: their storage type)."""
    return ftypes.arrow_type_of(normalize_type(type_name))


def spark_type(type_name: str) -> str:
    """The Spark SQL type (DDL) readers expose for a column type."""
    return ftypes.type_name(ftypes.spark_type_of(normalize_type(type_name)))


def type_from_arrow(f: pa.Field | pa.DataType) -> str:
    """The column type for an Arrow field or type (used when inferring a schema from data)."""
    field_ = f if isinstance(f, pa.Field) else pa.field("column", f)
    try:
        return normalize_type(ftypes.type_name_from_arrow(field_), field_.name)
    except ftypes.TypeMappingError as e:
        raise SchemaError(str(e)) from e


def type_from_spark(f: T.StructField) -> str:
    """The column type for a Spark field (Spark's char/varchar marker on strings honoured)."""
    marker = (f.metadata or {}).get(ftypes.SPARK_CHAR_VARCHAR)
    dt_ = f.dataType
    name = marker if isinstance(dt_, T.StringType) and isinstance(marker, str) else ftypes.type_name(dt_)
    return normalize_type(name, f.name)


def default_scalar(value: Any, type_name: str) -> pa.Scalar:
    """A column default (a JSON value) as an Arrow scalar of the column's storage type."""
    target = arrow_type(type_name)
    if value is None:
        return pa.scalar(None, type=target)
    if pa.types.is_decimal(target):
        return pa.scalar(decimal.Decimal(str(value)), type=target)
    if pa.types.is_date(target) and isinstance(value, str):
        return pa.scalar(dt.date.fromisoformat(value), type=target)
    if pa.types.is_timestamp(target) and isinstance(value, str):
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if target.tz and parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        return pa.scalar(parsed, type=target)
    if pa.types.is_duration(target) and isinstance(value, int | float):
        return pa.scalar(dt.timedelta(seconds=value), type=target)
    if pa.types.is_nested(target):
        return pa.scalar(value, type=target)
    return pa.scalar(value).cast(target)


def child_path(parent: str, name: str) -> str:
    """The path of a nested field inside a column: struct fields by name (``.`` and ``\\``
    escaped), a list's ``element``, a map's ``key`` and ``value``; "" is the column itself."""
    part = name.replace("\\", "\\\\").replace(".", "\\.")
    return f"{parent}.{part}" if parent else part


@functools.lru_cache(maxsize=1024)
def nested_paths(type_name: str) -> tuple[str, ...]:
    """Every nested field of a column type, in pre-order (``array<struct<a:int>>``: ``element``,
    ``element.a``); none for a primitive type. Cached: every schema built checks its columns'."""
    out: list[str] = []

    def walk(t: pa.DataType, path: str) -> None:
        for name, child in _children(t):
            out.append(child_path(path, name))
            walk(child.type, out[-1])

    walk(arrow_type(type_name), "")
    return tuple(out)


def _children(t: pa.DataType) -> list[tuple[str, pa.Field]]:
    """A nested Arrow type's child fields under their path names (list ``element``, map ``key``/``value``)."""
    if pa.types.is_struct(t):
        return [(t.field(i).name, t.field(i)) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [("key", t.key_field), ("value", t.item_field)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [("element", t.value_field)]
    return []


def _with_ids(t: pa.DataType, path: str, ids: dict[str, int]) -> pa.DataType:
    """``t`` with ``PARQUET:field_id`` on every nested field whose path ``ids`` holds."""
    children = _children(t)
    if not children:
        return t
    fields = []
    for name, f in children:
        p = child_path(path, name)
        meta = dict(f.metadata or {})
        if p in ids:
            meta[fmt.FIELD_ID_KEY] = str(ids[p]).encode()
        fields.append(pa.field(f.name, _with_ids(f.type, p, ids), f.nullable, meta or None))
    if pa.types.is_struct(t):
        return pa.struct(fields)
    if pa.types.is_map(t):
        return pa.map_(fields[0], fields[1], keys_sorted=t.keys_sorted)
    return pa.large_list(fields[0]) if pa.types.is_large_list(t) else pa.list_(fields[0])


@dataclass(frozen=True)
class Column:
    id: int
    name: str
    type: str
    nullable: bool = True
    default: Any = None  # a JSON value; what rows written before the column existed read
    field_ids: tuple[tuple[str, int], ...] = ()
    """Ids of the nested fields (``nested_paths``), from the table's id counter, as Iceberg wants them;
    written as the Parquet field ids of nested fields. ``TableSchema`` hands out missing ones."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type, "nullable": self.nullable}
        if self.default is not None:
            out["default"] = self.default
        if self.field_ids:
            out["fieldIds"] = dict(self.field_ids)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Column:
        ids = tuple((str(k), int(v)) for k, v in (d.get("fieldIds") or {}).items())
        return cls(int(d["id"]), d["name"], d["type"], bool(d.get("nullable", True)), d.get("default"), ids)

    def arrow_field(self) -> pa.Field:
        """Stored nullable (a NOT NULL column is enforced on write), with its id as field id (and
        its nested fields' ids as theirs)."""
        f = ftypes.arrow_field(self.name, self.type, True, {fmt.FIELD_ID_KEY: str(self.id).encode()})
        return f.with_type(_with_ids(f.type, "", dict(self.field_ids))) if self.field_ids else f


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return value


@dataclass(frozen=True)
class TableSchema:
    """Ordered columns plus the last id handed out (ids are never reused)."""

    columns: tuple[Column, ...]
    last_column_id: int = 0
    schema_id: int = 0
    _by_name: dict[str, Column] = field(default_factory=dict, compare=False, repr=False)
    # not an init field, so dataclasses.replace (a new schema id) starts with an empty cache
    _arrow: dict[tuple[bool, str, str], pa.Schema] = field(default_factory=dict, init=False, compare=False,
                                                           repr=False)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for c in self.columns:
            if c.name.lower() in seen:
                raise SchemaError(f"column {c.name!r} appears twice; column names must be unique")
            if c.name.startswith(fmt.RESERVED_PREFIX):
                raise SchemaError(f"column {c.name!r}: names starting with {fmt.RESERVED_PREFIX} are reserved")
            normalize_type(c.type, c.name)
            seen.add(c.name.lower())
        last = max([self.last_column_id, *(c.id for c in self.columns),
                    *(i for c in self.columns for _, i in c.field_ids)])
        columns = []
        for c in self.columns:  # nested fields without an id (new, or a log written before them) get one
            paths = nested_paths(c.type) if "<" in c.type else ()
            have = dict(c.field_ids)
            if tuple(p for p, _ in c.field_ids) != paths:
                ids = []
                for p in paths:
                    if p not in have:
                        last += 1
                        have[p] = last
                    ids.append((p, have[p]))
                c = replace(c, field_ids=tuple(ids))
            columns.append(c)
        object.__setattr__(self, "columns", tuple(columns))
        object.__setattr__(self, "last_column_id", last)
        self._by_name.update({c.name.lower(): c for c in self.columns})

    @classmethod
    def of(cls, columns: Iterable[tuple[str, str] | tuple[str, str, bool] | Column]) -> TableSchema:
        """``TableSchema.of([("a", "string"), ("b", "int")])``: ids 1, 2, ...."""
        out = []
        for i, c in enumerate(columns, start=1):
            if isinstance(c, Column):
                out.append(replace(c, id=i))
            else:
                out.append(Column(i, c[0], normalize_type(c[1], c[0]), bool(c[2]) if len(c) > 2 else True))
        return cls(tuple(out), len(out))

    @classmethod
    def from_spec(cls, columns: Iterable[Any]) -> TableSchema:
        """From ``lading_spec.copyjob.Column`` objects (name, type, nullable, default)."""
        return cls(tuple(Column(i, c.name, normalize_type(c.type, f"to.schema[{i - 1}].type ({c.name})"),
                                c.nullable, _json_default(c.default))
                         for i, c in enumerate(columns, start=1)), 0)

    @classmethod
    def from_arrow(cls, schema: pa.Schema) -> TableSchema:
        """From an Arrow schema (``lading.type`` extension names honoured)."""
        cols = [f for f in schema if not f.name.startswith(fmt.RESERVED_PREFIX)]
        return cls(tuple(Column(i, f.name, type_from_arrow(f), f.nullable)
                         for i, f in enumerate(cols, start=1)), len(cols))

    @classmethod
    def from_spark(cls, schema: T.StructType) -> TableSchema:
        """From a Spark schema (a DataFrame's): every type the mapping supports."""
        cols = [f for f in schema.fields if not f.name.startswith(fmt.RESERVED_PREFIX)]
        return cls(tuple(Column(i, f.name, type_from_spark(f), f.nullable)
                         for i, f in enumerate(cols, start=1)), len(cols))

    def column(self, name: str) -> Column:
        c = self._by_name.get(name.lower())
        if c is None:
            raise SchemaError(f"no column {name!r}; columns: {', '.join(x.name for x in self.columns)}")
        return c

    def find(self, name: str) -> Column | None:
        return self._by_name.get(name.lower())

    def by_id(self, column_id: int) -> Column | None:
        return next((c for c in self.columns if c.id == column_id), None)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def nested(self) -> bool:
        """Whether a column has nested fields (parts then carry their ids: ``Part.nested_ids``)."""
        return any(c.field_ids for c in self.columns)

    # -- evolution --------------------------------------------------------------------
    def add_column(self, name: str, type_name: str, default: Any = None, nullable: bool = True) -> TableSchema:
        """A new column with a fresh id; existing rows read ``default``."""
        if self.find(name) is not None:
            raise SchemaError(f"column {name!r} already exists; drop or rename it first")
        t = normalize_type(type_name, name)
        if default is not None:
            default_scalar(_json_default(default), t)  # validates it casts
        new = Column(self.last_column_id + 1, name, t, nullable, _json_default(default))
        return TableSchema((*self.columns, new), new.id, self.schema_id + 1)

    def drop_column(self, name: str) -> TableSchema:
        target = self.column(name)
        return TableSchema(tuple(c for c in self.columns if c.id != target.id), self.last_column_id,
                           self.schema_id + 1)

    def rename_column(self, name: str, new_name: str) -> TableSchema:
        target = self.column(name)
        if self.find(new_name) is not None and self.find(new_name) != target:
            raise SchemaError(f"cannot rename {name!r} to {new_name!r}: that name is taken")
        return TableSchema(tuple(replace(c, name=new_name) if c.id == target.id else c for c in self.columns),
                           self.last_column_id, self.schema_id + 1)

    # -- serialization ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"schemaId": self.schema_id, "lastColumnId": self.last_column_id,
                "columns": [c.to_dict() for c in self.columns]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableSchema:
        return cls(tuple(Column.from_dict(c) for c in d["columns"]), int(d.get("lastColumnId", 0)),
                   int(d.get("schemaId", 0)))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TableSchema:
        return cls.from_dict(json.loads(text))

    # -- Arrow and Spark --------------------------------------------------------------
    def arrow_schema(self, *, internal: bool = True, table_id: str = "", envelope: str = "") -> pa.Schema:
        """The Arrow schema of a part (user columns, then ``_lading_time``, ``_lading_diff``).

        Built once per argument set (the schema is immutable; every part read asks for it).
        """
        cached = self._arrow.get((internal, table_id, envelope))
        if cached is None:
            cached = self._arrow[(internal, table_id, envelope)] = self._build_arrow(internal, table_id, envelope)
        return cached

    def _build_arrow(self, internal: bool, table_id: str, envelope: str) -> pa.Schema:
        fields = [c.arrow_field() for c in self.columns]
        if internal:
            fields += [
                pa.field(fmt.TIME_COLUMN, pa.int64(), nullable=False,
                         metadata={fmt.FIELD_ID_KEY: str(fmt.TIME_FIELD_ID).encode()}),
                pa.field(fmt.DIFF_COLUMN, pa.int64(), nullable=False,
                         metadata={fmt.FIELD_ID_KEY: str(fmt.DIFF_FIELD_ID).encode()}),
            ]
        meta = {fmt.META_FORMAT_VERSION: str(fmt.FORMAT_VERSION).encode(),
                ftypes.SCHEMA_MAPPING_VERSION: ftypes.TYPE_MAPPING_VERSION.encode(),
                fmt.META_SCHEMA_ID: str(self.schema_id).encode()}
        if table_id:
            meta[fmt.META_TABLE_ID] = table_id.encode()
        if envelope:
            meta[fmt.META_ENVELOPE] = envelope.encode()
        return pa.schema(fields, metadata=meta)

    def spark_ddl(self) -> str:
        return ", ".join(f"`{c.name.replace('`', '``')}` {spark_type(c.type)}" for c in self.columns)

    def spark_schema(self) -> T.StructType:
        """The Spark schema readers expose (every field nullable, as parts store them)."""
        return T.StructType([T.StructField(c.name, ftypes.spark_type_of(c.type), True) for c in self.columns])


def field_id(f: pa.Field) -> int | None:
    meta = f.metadata or {}
    raw = meta.get(fmt.FIELD_ID_KEY)
    return int(raw) if raw is not None else None


def conform(table: pa.Table | pa.RecordBatch, schema: TableSchema, *, keep_internal: bool = True,
            dictionaries: bool = False) -> pa.Table:
    """Map a part's columns to ``schema`` by field id.

    Columns the part lacks read the column's default; columns the schema no longer
    has are dropped; types are cast to the current type. Columns without a field id
    (plain Arrow input) are matched by name. ``dictionaries``: a dictionary column of
    the current type stays one (its field's type says so), for a writer that takes it.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    by_id: dict[int, int] = {}
    by_name: dict[str, int] = {}
    for i, f in enumerate(table.schema):
        fid = field_id(f)
        if fid is not None:
            by_id[fid] = i
        else:
            by_name[f.name.lower()] = i
    arrays = []
    target = schema.arrow_schema(internal=keep_internal)
    n = table.num_rows
    kept: dict[int, pa.DataType] = {}
    for i, (c, f) in enumerate(zip(schema.columns, target, strict=False)):
        idx = by_id.get(c.id, by_name.get(c.name.lower()) if not by_id else None)
        if idx is None:
            arrays.append(pa.repeat(default_scalar(c.default, c.type), n))
        else:
            col = table.column(idx)
            if dictionaries and pa.types.is_dictionary(col.type) and col.type.value_type == f.type:
                kept[i] = col.type
                arrays.append(col)
            else:
                arrays.append(col if col.type == f.type else col.cast(f.type))
    if keep_internal:
        for name, fid in ((fmt.TIME_COLUMN, fmt.TIME_FIELD_ID), (fmt.DIFF_COLUMN, fmt.DIFF_FIELD_ID)):
            idx = by_id.get(fid, table.schema.get_field_index(name))
            if idx is None or idx < 0:
                raise SchemaError(f"part lacks the {name} column; it is not a lading part")
            arrays.append(table.column(idx))
    if kept:
        target = pa.schema([f.with_type(kept[i]) if i in kept else f for i, f in enumerate(target)], target.metadata)
    return pa.Table.from_arrays(arrays, schema=target)
