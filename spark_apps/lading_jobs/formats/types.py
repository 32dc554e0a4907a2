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

Type *names* (a table column's ``type``, ``to.schema[].type``) are Spark SQL DDL
type strings, parsed here without a JVM (``parse_type``) and spelled back
canonically (``type_name``); the lading logical types ``json`` and ``uuid``
(strings Spark has no type for) are extension names in the same registry
(``LOGICAL_TYPES``). ``arrow_field`` / ``type_name_from_arrow`` map names to
Arrow fields and back, so the table format and the file formats share one
mapping.
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
        # equal but for nested fields' metadata (extension names the encoders read): adopt the target's
        return arr if arr.type.equals(target, check_metadata=True) else arr.view(target)
    if pa.types.is_interval(arr.type) or arr.type.id == 21:  # YEAR_MONTH interval (never via pyarrow)
        raise TypeMappingError("year-month intervals must reach Python as months (see lading_jobs.formats.spark)")
    return pc.cast(arr, target, safe=True)


def parquet_leaves(t: pa.DataType) -> int:
    """How many Parquet leaf columns a column of Arrow type ``t`` is written as."""
    if pa.types.is_struct(t):
        return sum(parquet_leaves(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return parquet_leaves(t.key_type) + parquet_leaves(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return parquet_leaves(t.value_type)
    return 1


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
    if name in LOGICAL_TYPES:
        return LOGICAL_TYPES[name]
    try:  # a plain type name (early table parts named every column's type)
        return parse_type(name)
    except TypeMappingError:
        pass
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


# --- type names: Spark SQL DDL type strings, parsed without a JVM -------------------------

LOGICAL_TYPES: dict[str, T.DataType] = {"json": T.StringType(), "uuid": T.StringType()}
"""lading's own logical types: extension names over a Spark type (here: strings).

``json`` holds JSON text, ``uuid`` a UUID's text; Spark sees strings, parts carry
``lading.type`` = the name, so lading readers know what the column means."""

TYPE_ALIASES = {"text": "string"}
"""Names lading accepts for a column type beyond Spark's grammar (PostgreSQL habits)."""

_PRIMITIVES: dict[str, T.DataType] = {
    "boolean": T.BooleanType(), "tinyint": T.ByteType(), "byte": T.ByteType(),
    "smallint": T.ShortType(), "short": T.ShortType(), "int": T.IntegerType(), "integer": T.IntegerType(),
    "bigint": T.LongType(), "long": T.LongType(), "float": T.FloatType(), "real": T.FloatType(),
    "double": T.DoubleType(), "date": T.DateType(), "timestamp": T.TimestampType(),
    "timestamp_ltz": T.TimestampType(), "timestamp_ntz": T.TimestampNTZType(), "string": T.StringType(),
    "binary": T.BinaryType(), "void": T.NullType(), "variant": T.VariantType(),
}
_DT_UNITS = {v: k for k, v in _DT_FIELDS.items()}
_YM_UNITS = {v: k for k, v in _YM_FIELDS.items()}
_TOKEN_RE = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|([A-Za-z0-9_]+)|([<>(),:]))")
_PLAIN_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GRAMMAR = ("a Spark SQL type: boolean, tinyint, smallint, int, bigint, float, double, decimal(p,s), "
            "string, char(n), varchar(n), binary, date, timestamp, timestamp_ntz, time(p), "
            "interval day to second / year to month (or a sub-range), array<T>, map<K,V>, "
            "struct<name: T, ...>, variant, void")


class _Lexer:
    """Tokens of a type string: (kind, text) with kind in ident, quoted, string, punct."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN_RE.match(text, pos)
            if m is None or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise self.error(f"unexpected character {text[pos:].lstrip()[:1]!r}")
            if m.group(1):
                self.tokens.append(("quoted", m.group(1)[1:-1].replace("``", "`")))
            elif m.group(2):
                self.tokens.append(("string", m.group(2)[1:-1]))
            elif m.group(3):
                self.tokens.append(("ident", m.group(3)))
            elif m.group(4):
                self.tokens.append(("punct", m.group(4)))
            else:  # only spaces left
                break
            pos = m.end()
        self.i = 0

    def error(self, what: str) -> TypeMappingError:
        return TypeMappingError(f"type {self.text!r}: {what}; expected {_GRAMMAR}")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def peek_word(self) -> str | None:
        tok = self.peek()
        return tok[1].lower() if tok is not None and tok[0] == "ident" else None

    def word(self) -> str:
        tok = self.peek()
        if tok is None or tok[0] != "ident":
            raise self.error("a type name is missing" if tok is None else f"unexpected {tok[1]!r}")
        self.i += 1
        return tok[1].lower()

    def accept(self, punct: str) -> bool:
        if self.peek() == ("punct", punct):
            self.i += 1
            return True
        return False

    def expect(self, punct: str) -> None:
        if not self.accept(punct):
            tok = self.peek()
            raise self.error(f"expected {punct!r}, found {'the end' if tok is None else repr(tok[1])}")

    def integer(self) -> int:
        word = self.word()
        if not word.isdigit():
            raise self.error(f"expected a number, found {word!r}")
        return int(word)

    def name(self) -> str:
        tok = self.peek()
        if tok is None or tok[0] not in ("ident", "quoted"):
            raise self.error("a field name is missing" if tok is None else f"unexpected {tok[1]!r}")
        self.i += 1
        return tok[1]


def _parse(lx: _Lexer) -> T.DataType:
    word = lx.word()
    if word == "string" and lx.peek_word() == "collate":
        raise lx.error("collations are not supported; drop the COLLATE clause")
    if word in _PRIMITIVES:
        return _PRIMITIVES[word]
    if word in ("decimal", "dec", "numeric"):
        precision, scale = 10, 0
        if lx.accept("("):
            precision = lx.integer()
            if lx.accept(","):
                scale = lx.integer()
            lx.expect(")")
        if not 1 <= precision <= 38 or scale > precision:
            raise lx.error(f"decimal({precision},{scale}) needs precision 1..38 and scale 0..precision")
        return T.DecimalType(precision, scale)
    if word in ("char", "character", "varchar"):
        lx.expect("(")
        length = lx.integer()
        lx.expect(")")
        return T.VarcharType(length) if word == "varchar" else T.CharType(length)
    if word == "time":
        precision = 6
        if lx.accept("("):
            precision = lx.integer()
            lx.expect(")")
        if not 0 <= precision <= 6:
            raise lx.error(f"time({precision}) needs a precision 0..6")
        return T.TimeType(precision)
    if word == "interval":
        return _parse_interval(lx)
    if word == "array":
        lx.expect("<")
        element = _parse(lx)
        lx.expect(">")
        return T.ArrayType(element, True)
    if word == "map":
        lx.expect("<")
        key = _parse(lx)
        lx.expect(",")
        value = _parse(lx)
        lx.expect(">")
        return T.MapType(key, value, True)
    if word == "struct":
        return _parse_struct(lx)
    raise lx.error(f"unknown type {word!r}")


def _parse_interval(lx: _Lexer) -> T.DataType:
    start = lx.peek_word()
    if start not in _DT_UNITS and start not in _YM_UNITS:
        return T.CalendarIntervalType()  # rejected by the mapping, with the fix
    lx.word()
    end = start
    if lx.peek_word() == "to":
        lx.word()
        end = lx.word()
    units = _YM_UNITS if start in _YM_UNITS else _DT_UNITS
    if end not in units or units[end] < units[start]:
        raise lx.error(f"interval {start} to {end} is not a valid interval range")
    if units is _YM_UNITS:
        return T.YearMonthIntervalType(units[start], units[end])
    return T.DayTimeIntervalType(units[start], units[end])


def _parse_struct(lx: _Lexer) -> T.StructType:
    lx.expect("<")
    fields: list[T.StructField] = []
    if lx.accept(">"):
        return T.StructType(fields)
    while True:
        name = lx.name()
        lx.accept(":")
        dt = _parse(lx)
        nullable = True
        metadata: dict[str, str] = {}
        if lx.peek_word() == "not":
            lx.word()
            if lx.word() != "null":
                raise lx.error("expected NOT NULL")
            nullable = False
        if lx.peek_word() == "comment":
            lx.word()
            tok = lx.peek()
            if tok is None or tok[0] != "string":
                raise lx.error("COMMENT needs a quoted string")
            lx.i += 1
            metadata["comment"] = tok[1]
        fields.append(T.StructField(name, dt, nullable, metadata))
        if lx.accept(">"):
            return T.StructType(fields)
        lx.expect(",")


def parse_type(text: str) -> T.DataType:
    """A Spark SQL DDL type string as a Spark type, like ``DataType.fromDDL`` but without a JVM.

    Raises :class:`TypeMappingError` naming the string and the accepted forms."""
    lx = _Lexer(text)
    dt = _parse(lx)
    if lx.peek() is not None:
        raise lx.error(f"unexpected {lx.peek()[1]!r} after the type")  # type: ignore[index]
    return dt


def _quote_name(name: str) -> str:
    return name if _PLAIN_IDENT.fullmatch(name) else "`" + name.replace("`", "``") + "`"


def type_name(dt: T.DataType) -> str:
    """The canonical DDL spelling of a Spark type; ``parse_type`` and Spark both read it back."""
    if isinstance(dt, T.ArrayType):
        return f"array<{type_name(dt.elementType)}>"
    if isinstance(dt, T.MapType):
        return f"map<{type_name(dt.keyType)},{type_name(dt.valueType)}>"
    if isinstance(dt, T.StructType):
        return "struct<" + ",".join(f"{_quote_name(f.name)}:{type_name(f.dataType)}"
                                    + ("" if f.nullable else " NOT NULL") for f in dt.fields) + ">"
    return dt.simpleString()


def nested_nullable(dt: T.DataType) -> T.DataType:
    """``dt`` with every nested field nullable, as the Arrow mapping stores it."""
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(nested_nullable(dt.elementType), True)
    if isinstance(dt, T.MapType):
        return T.MapType(nested_nullable(dt.keyType), nested_nullable(dt.valueType), True)
    if isinstance(dt, T.StructType):
        return T.StructType([T.StructField(f.name, nested_nullable(f.dataType), True) for f in dt.fields])
    return dt


def canonical_type_name(text: str, path: str = "type") -> str:
    """A column type as lading stores it: a logical type (``json``, ``uuid``) or canonical DDL.

    Nested fields become nullable (as the mapping stores them); types the mapping
    cannot store are refused here, with the column ``path`` and the fix."""
    low = text.strip().lower()
    if low in LOGICAL_TYPES:
        return low
    try:
        dt = nested_nullable(parse_type(TYPE_ALIASES.get(low, text)))
    except TypeMappingError as e:
        raise TypeMappingError(f"column {path}: {e}") from e
    _storage_type(dt, path)
    return type_name(dt)


def spark_type_of(name: str) -> T.DataType:
    """The Spark type of a column type name (logical types: their Spark type)."""
    low = name.strip().lower()
    if low in LOGICAL_TYPES:
        return LOGICAL_TYPES[low]
    return parse_type(TYPE_ALIASES.get(low, name))


def arrow_field(name: str, type_: str, nullable: bool = True,
                metadata: dict[bytes, bytes] | None = None) -> pa.Field:
    """The Arrow field for a column of type name ``type_`` (extension names included)."""
    low = type_.strip().lower()
    if low in LOGICAL_TYPES:
        meta = {**(metadata or {}), LADING_TYPE: low.encode()}
        return pa.field(name, _storage_type(LOGICAL_TYPES[low], name), nullable=nullable, metadata=meta)
    return _field(name, spark_type_of(type_), nullable, {}, name, metadata)


def arrow_type_of(type_: str) -> pa.DataType:
    """The Arrow storage type of a column type name."""
    return arrow_field("column", type_).type


def type_name_from_arrow(field: pa.Field) -> str:
    """The column type name for an Arrow field (honours ``lading.type``, incl. logical types)."""
    ext = (field.metadata or {}).get(LADING_TYPE)
    if ext is not None and ext.decode() in LOGICAL_TYPES:
        return ext.decode()
    return type_name(nested_nullable(spark_type_from_arrow(field)))
