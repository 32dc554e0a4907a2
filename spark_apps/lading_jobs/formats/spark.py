"""Carry the Spark types Arrow transfer cannot, by rewriting them as SQL on the way.

Spark ships ``INTERVAL YEAR TO MONTH`` to Python as an Arrow YEAR_MONTH interval,
which pyarrow cannot open, and a Python data source cannot yield one (nor a char or
varchar: ``transfer_schema`` declares those as strings). So before a
DataFrame crosses into Python (``to_transfer``) every year-month interval, nested
ones included, becomes an ``int`` number of months; after a Python data source
hands rows back (``from_transfer``) the months become intervals again. Both are
plain Spark SQL projections: no rows pass through Python here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T


def has_ym(dt: T.DataType) -> bool:
    if isinstance(dt, T.YearMonthIntervalType):
        return True
    if isinstance(dt, T.ArrayType):
        return has_ym(dt.elementType)
    if isinstance(dt, T.MapType):
        return has_ym(dt.keyType) or has_ym(dt.valueType)
    if isinstance(dt, T.StructType):
        return any(has_ym(f.dataType) for f in dt.fields)
    return False


def transfer_type(dt: T.DataType) -> T.DataType:
    """``dt`` with every year-month interval replaced by ``int`` (months), and char/varchar by
    ``string`` (Spark's Arrow transfer has no char/varchar; DataFrames hold them as strings)."""
    if isinstance(dt, T.YearMonthIntervalType):
        return T.IntegerType()
    if isinstance(dt, T.CharType | T.VarcharType):
        return T.StringType()
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(transfer_type(dt.elementType), dt.containsNull)
    if isinstance(dt, T.MapType):
        return T.MapType(transfer_type(dt.keyType), transfer_type(dt.valueType), dt.valueContainsNull)
    if isinstance(dt, T.StructType):
        return T.StructType([T.StructField(f.name, transfer_type(f.dataType), f.nullable, f.metadata)
                             for f in dt.fields])
    return dt


def transfer_schema(schema: T.StructType) -> T.StructType:
    out = transfer_type(schema)
    assert isinstance(out, T.StructType)
    return out


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _lit(name: str) -> str:
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _rewrite(expr: str, dt: T.DataType, depth: int, leaf: str) -> str:
    """SQL turning ``expr`` of type ``dt`` into its transfer form (leaf='to') or back ('from')."""
    if not has_ym(dt):
        return expr
    if isinstance(dt, T.YearMonthIntervalType):
        if leaf == "to":
            return f"CAST(CAST({expr} AS INTERVAL MONTH) AS INT)"
        return f"CAST(make_ym_interval(0, {expr}) AS {dt.simpleString()})"
    var = f"x{depth}"
    if isinstance(dt, T.ArrayType):
        return f"transform({expr}, {var} -> {_rewrite(var, dt.elementType, depth + 1, leaf)})"
    if isinstance(dt, T.MapType):
        out = expr
        if has_ym(dt.keyType):
            out = f"transform_keys({out}, ({var}, v{depth}) -> {_rewrite(var, dt.keyType, depth + 1, leaf)})"
        if has_ym(dt.valueType):
            out = f"transform_values({out}, (k{depth}, {var}) -> {_rewrite(var, dt.valueType, depth + 1, leaf)})"
        return out
    assert isinstance(dt, T.StructType)
    parts = ", ".join(f"{_lit(f.name)}, {_rewrite(f'{expr}.{quote(f.name)}', f.dataType, depth + 1, leaf)}"
                      for f in dt.fields)
    return f"CASE WHEN {expr} IS NULL THEN NULL ELSE named_struct({parts}) END"


def map_in_arrow(df: DataFrame, fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
                 schema: T.StructType | str) -> DataFrame:
    """``df.mapInArrow(fn, schema)`` whatever ``df``'s column names: Spark resolves the names
    of the plan it builds as SQL text, so a column ``a.b`` failed as a field of ``a`` and
    ``ID`` beside ``id`` as ambiguous. The columns cross as ``_c0``, ``_c1``… and ``fn``
    sees its batches under their own names again."""
    names = list(df.columns)

    def named(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return fn(pa.RecordBatch.from_arrays(b.columns, names=names) for b in batches)

    return df.toDF(*(f"_c{i}" for i in range(len(names)))).mapInArrow(named, schema)


def to_transfer(df: DataFrame) -> DataFrame:
    """``df`` with year-month intervals as int months, ready for Arrow transfer to Python."""
    if not has_ym(df.schema):
        return df
    return df.selectExpr(*[f"{_rewrite(quote(f.name), f.dataType, 0, 'to')} AS {quote(f.name)}"
                           for f in df.schema.fields])


def from_transfer(df: DataFrame, schema: T.StructType) -> DataFrame:
    """Reverse :func:`to_transfer`: ``df`` holds ``transfer_schema(schema)``; return ``schema``."""
    if not has_ym(schema):
        return df
    return df.selectExpr(*[f"{_rewrite(quote(f.name), f.dataType, 0, 'from')} AS {quote(f.name)}"
                           for f in schema.fields])


def _filler(t: pa.DataType) -> pa.Scalar:
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return pa.scalar(b"", t)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.scalar("", t)
    return pa.scalar(0).cast(t)


def _wire_array(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """``arr`` cast to ``target``; struct children Spark declares non-null (a variant's
    value and metadata) get a filler under NULL parents, where Arrow has nulls."""
    if pa.types.is_struct(target) and pa.types.is_struct(arr.type) and arr.type.num_fields == target.num_fields:
        children = []
        for child, field in zip(arr.flatten(), target, strict=True):
            child = _wire_array(child, field.type)
            if not field.nullable and child.null_count:
                child = pc.fill_null(child, _filler(field.type))
            children.append(child)
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    return arr.cast(target)


def wire_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """:func:`to_wire` for one record batch."""
    return pa.RecordBatch.from_arrays([_wire_array(c, f.type) for c, f in zip(batch.columns, schema, strict=True)],
                                      schema=schema)


def to_wire(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` (lading's Arrow types) in the Arrow schema a Python data source must yield
    for ``schema`` = ``to_arrow_schema(transfer_schema(...))``; columns by position."""
    columns = []
    for column, field in zip(table.columns, schema, strict=True):
        columns.append(pa.chunked_array([_wire_array(c, field.type) for c in column.chunks], field.type))
    return pa.Table.from_arrays(columns, schema=schema)
