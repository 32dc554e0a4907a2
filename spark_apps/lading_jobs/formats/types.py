"""lading's type mapping: Spark SQL ↔ Arrow ↔ Parquet, one visitor per direction.

The mapping is versioned (:data:`TYPE_MAPPING_VERSION`) and documented in
docs/formats.md. Spark types that Arrow or Parquet lack keep their identity in
field metadata under ``lading.type`` (an *extension name* such as
``interval year to month`` or ``varchar(10)``) over a plain storage type any
Parquet reader opens. Top-level columns carry stable ids as ``PARQUET:field_id``;
the schema names the lading format and type-mapping versions.

``arrow_schema`` maps Spark → Arrow; ``conform_batch`` casts what Spark's Arrow
transfer produced into the mapped types (vectorised); ``spark_schema_from_arrow``
maps back, honouring the extension names, so files and tables round trip.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

FORMAT_VERSION = "1"
TYPE_MAPPING_VERSION = "1"

# Field and schema metadata keys.
LADING_TYPE = b"lading.type"
FIELD_ID = b"PARQUET:field_id"
SCHEMA_FORMAT_VERSION = b"lading.format_version"
SCHEMA_MAPPING_VERSION = b"lading.type_mapping_version"
SPARK_CHAR_VARCHAR = "__CHAR_VARCHAR_TYPE_STRING"  # Spark's own marker on table columns

UTC = "UTC"


class TypeMappingError(ValueError):
    """A type lading cannot map; the message names the column path and the fix."""


_DT_FIELDS = {0: "day", 1: "hour", 2: "minute", 3: "second"}
_YM_FIELDS = {0: "year", 1: "month"}


def _interval_name(names: dict[int, str], start: int, end: int) -> str:
    if start == end:
        return f"interval {names[start]}"
    return f"interval {names[start]} to {names[end]}"


def extension_name(dt: T.DataType) -> str | None:
    """The ``lading.type`` name for Spark types Arrow/Parquet lack, else None."""
    if isinstance(dt, T.YearMonthIntervalType):
        return _interval_name(_YM_FIELDS, dt.startField, dt.endField)
    if isinstance(dt, T.DayTimeIntervalType):
        return _interval_name(_DT_FIELDS, dt.startField, dt.endField)
    if isinstance(dt, T.CharType):
        return f"char({dt.length})"
    if isinstance(dt, T.VarcharType):
        return f"varchar({dt.length})"
    if isinstance(dt, T.VariantType):
        return "variant"
    if isinstance(dt, T.TimeType):
        return f"time({dt.precision})"
    return None


def _storage_type(dt: T.DataType, path: str) -> pa.DataType:
    """The Arrow type a Spark type is stored as (nested fields carry their own metadata).

    Nested fields (array elements, map values, struct fields) are always nullable:
    Spark marks struct fields non-null even where the whole struct is null, and
    Arrow rejects null slots under a non-nullable child. Top-level columns keep
    Spark's nullability."""
    if isinstance(dt, T.BooleanType):
        return pa.bool_()
    if isinstance(dt, T.ByteType):
        return pa.int8()
    if isinstance(dt, T.ShortType):
        return pa.int16()
    if isinstance(dt, T.IntegerType):
        return pa.int32()
    if isinstance(dt, T.LongType):
        return pa.int64()
    if isinstance(dt, T.FloatType):
        return pa.float32()
    if isinstance(dt, T.DoubleType):
        return pa.float64()
    if isinstance(dt, T.DecimalType):
        return pa.decimal128(dt.precision, dt.scale)
    if isinstance(dt, T.StringType | T.CharType | T.VarcharType):
        return pa.string()
    if isinstance(dt, T.BinaryType):
        return pa.binary()
    if isinstance(dt, T.DateType):
        return pa.date32()
    if isinstance(dt, T.TimestampType):
        return pa.timestamp("us", tz=UTC)
    if isinstance(dt, T.TimestampNTZType):
        return pa.timestamp("us")
    if isinstance(dt, T.TimeType):
        return pa.time64("us")
    if isinstance(dt, T.DayTimeIntervalType):
        return pa.duration("us")
    if isinstance(dt, T.YearMonthIntervalType):
        return pa.int32()  # months
    if isinstance(dt, T.NullType):
        return pa.null()
    if isinstance(dt, T.VariantType):
        return pa.struct([pa.field("value", pa.binary()),
                          pa.field("metadata", pa.binary())])
    if isinstance(dt, T.ArrayType):
        return pa.list_(_field("element", dt.elementType, True, {}, f"{path}[]"))
    if isinstance(dt, T.MapType):
        key = _field("key", dt.keyType, False, {}, f"{path}.key")
        value = _field("value", dt.valueType, True, {}, f"{path}.value")
        return pa.map_(key, value)
    if isinstance(dt, T.StructType):
        return pa.struct([_field(f.name, f.dataType, True, f.metadata or {}, f"{path}.{f.name}")
                          for f in dt.fields])
    if isinstance(dt, T.CalendarIntervalType):
        raise TypeMappingError(
            f"column {path}: the legacy CalendarInterval type cannot be stored; cast it to "
            "INTERVAL DAY TO SECOND or INTERVAL YEAR TO MONTH")
    raise TypeMappingError(f"column {path}: Spark type {dt.simpleString()} has no lading mapping; "
                           "cast it to a supported type (see docs/formats.md)")


def _field(name: str, dt: T.DataType, nullable: bool, spark_meta: dict[str, object], path: str,
           extra: dict[bytes, bytes] | None = None) -> pa.Field:
    meta: dict[bytes, bytes] = dict(extra or {})
    ext = extension_name(dt)
    char_varchar = spark_meta.get(SPARK_CHAR_VARCHAR) if isinstance(dt, T.StringType) else None
    if ext is None and isinstance(char_varchar, str):
        ext = char_varchar.lower()
    if ext is not None:
        meta[LADING_TYPE] = ext.encode()
    return pa.field(name, _storage_type(dt, path), nullable=nullable, metadata=meta or None)


def arrow_schema(spark_schema: T.StructType, column_ids: dict[str, int] | None = None) -> pa.Schema:
    """Spark schema → lading's Arrow schema (field ids, extension names, versions)."""
    fields = []
    for i, f in enumerate(spark_schema.fields):
        if column_ids is not None and f.name not in column_ids:
            raise TypeMappingError(f"column {f.name}: no column id given (column_ids has {sorted(column_ids)})")
        column_id = column_ids[f.name] if column_ids is not None else i + 1
        fields.append(_field(f.name, f.dataType, f.nullable, f.metadata or {}, f.name,
                             {FIELD_ID: str(column_id).encode()}))
    return pa.schema(fields, metadata={SCHEMA_FORMAT_VERSION: FORMAT_VERSION.encode(),
                                       SCHEMA_MAPPING_VERSION: TYPE_MAPPING_VERSION.encode()})


# --- Arrow batch → mapped types ---------------------------------------------------------

def _conform_array(arr: pa.Array, target: pa.DataType) -> pa.Array:
    if arr.type.equals(target):
        return arr
    if pa.types.is_interval(arr.type) or arr.type.id == 21:  # YEAR_MONTH interval (never via pyarrow)
        raise TypeMappingError("year-month intervals must reach Python as months (see lading_jobs.formats.spark)")
    return pc.cast(arr, target, safe=True)


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Cast ``batch`` (columns by position) to ``schema``'s types; vectorised."""
    if batch.num_columns != len(schema):
        raise TypeMappingError(f"batch has {batch.num_columns} columns, schema {len(schema)}: "
                               f"{batch.schema.names} vs {schema.names}")
    columns = []
    for i, field in enumerate(schema):
        try:
            columns.append(_conform_array(batch.column(i), field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise TypeMappingError(f"column {field.name}: cannot convert {batch.column(i).type} to "
                                   f"{field.type}: {e}") from e
    return pa.RecordBatch.from_arrays(columns, schema=schema)


# --- Arrow → Spark ----------------------------------------------------------------------

_YM_RE = re.compile(r"interval (year|month)(?: to (year|month))?$")
_DT_RE = re.compile(r"interval (day|hour|minute|second)(?: to (day|hour|minute|second))?$")
_LEN_RE = re.compile(r"(char|varchar)\((\d+)\)$")
_TIME_RE = re.compile(r"time\((\d)\)$")


def _from_extension(name: str, path: str) -> T.DataType:
    ym, dt, ln, tm = _YM_RE.match(name), _DT_RE.match(name), _LEN_RE.match(name), _TIME_RE.match(name)
    if ym:
        ids = {v: k for k, v in _YM_FIELDS.items()}
        start = ids[ym.group(1)]
        return T.YearMonthIntervalType(start, ids[ym.group(2)] if ym.group(2) else start)
    if dt:
        ids = {v: k for k, v in _DT_FIELDS.items()}
        start = ids[dt.group(1)]
        return T.DayTimeIntervalType(start, ids[dt.group(2)] if dt.group(2) else start)
    if ln:
        return T.CharType(int(ln.group(2))) if ln.group(1) == "char" else T.VarcharType(int(ln.group(2)))
    if tm:
        return T.TimeType(int(tm.group(1)))
    if name == "variant":
        return T.VariantType()
    raise TypeMappingError(f"column {path}: unknown lading.type {name!r} (written by a newer lading? "
                           f"this one reads type-mapping version {TYPE_MAPPING_VERSION})")


def spark_type_from_arrow(field: pa.Field, path: str | None = None) -> T.DataType:
    """The Spark type for an Arrow field, honouring ``lading.type`` extension names."""
    path = path or field.name
    meta = field.metadata or {}
    if LADING_TYPE in meta:
        return _from_extension(meta[LADING_TYPE].decode(), path)
    t = field.type
    if pa.types.is_dictionary(t):
        return spark_type_from_arrow(pa.field(field.name, t.value_type), path)
    if pa.types.is_boolean(t):
        return T.BooleanType()
    simple: list[tuple[pa.DataType, T.DataType]] = [
        (pa.int8(), T.ByteType()), (pa.int16(), T.ShortType()), (pa.int32(), T.IntegerType()),
        (pa.int64(), T.LongType()), (pa.uint8(), T.ShortType()), (pa.uint16(), T.IntegerType()),
        (pa.uint32(), T.LongType()), (pa.uint64(), T.DecimalType(20, 0)),
        (pa.float16(), T.FloatType()), (pa.float32(), T.FloatType()), (pa.float64(), T.DoubleType()),
        (pa.date32(), T.DateType()), (pa.date64(), T.DateType()), (pa.null(), T.NullType()),
    ]
    for arrow_t, spark_t in simple:
        if t.equals(arrow_t):
            return spark_t
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise TypeMappingError(f"column {path}: decimal({t.precision},{t.scale}) exceeds Spark's "
                                   "precision 38; cast it to decimal(38, s) or double before loading")
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return T.StringType()
    if (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
            or pa.types.is_binary_view(t)):
        return T.BinaryType()
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_time(t):
        return T.TimeType(6)
    if pa.types.is_duration(t):
        return T.DayTimeIntervalType(0, 3)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_list_view(t):
        vf = t.value_field
        return T.ArrayType(spark_type_from_arrow(vf, f"{path}[]"), vf.nullable)
    if pa.types.is_map(t):
        return T.MapType(spark_type_from_arrow(t.key_field, f"{path}.key"),
                         spark_type_from_arrow(t.item_field, f"{path}.value"), t.item_field.nullable)
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, spark_type_from_arrow(f, f"{path}.{f.name}"), f.nullable)
                             for f in t])
    raise TypeMappingError(f"column {path}: Arrow type {t} has no Spark equivalent; "
                           "convert it before loading (see docs/formats.md)")


def spark_schema_from_arrow(schema: pa.Schema) -> T.StructType:
    """Arrow schema → Spark schema (the reverse of :func:`arrow_schema`)."""
    return T.StructType([T.StructField(f.name, spark_type_from_arrow(f), f.nullable) for f in schema])


def field_ids(schema: pa.Schema) -> dict[str, int]:
    """Column name → ``PARQUET:field_id`` for the top-level fields that carry one."""
    out = {}
    for f in schema:
        if f.metadata and FIELD_ID in f.metadata:
            out[f.name] = int(f.metadata[FIELD_ID])
    return out
