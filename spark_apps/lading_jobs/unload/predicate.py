"""A recognised filter (``lading_jobs.sqlshape``) evaluated on Arrow batches exactly as Spark SQL evaluates it.

Spark's semantics, kept here vectorised:

* three-valued logic: a comparison with NULL is NULL, ``AND``/``OR`` are Kleene's,
  ``NOT NULL`` is NULL, and a row is kept only where the condition is TRUE;
* ``<=>`` is never NULL (NULL <=> NULL is TRUE);
* floating point: NaN equals NaN and is greater than every other value, and
  ``-0.0`` equals ``0.0`` (Spark's SQL ordering; IEEE says otherwise about NaN);
* ``x IN (a, b, ...)`` is TRUE when some item equals ``x``, else NULL when ``x`` or
  some item is NULL, else FALSE, equality being Spark's (floats as above);
* strings and binary compare byte by byte (UTF8_BINARY), booleans false < true.

Columns arrive in lading's Arrow types; a column Spark compares through a widening
cast is cast the same way first (``sqlshape.exact_cast`` admits only casts that keep
every value). Nothing here can fail on data: comparisons in Spark never raise.
"""

from __future__ import annotations

import decimal
import functools
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.sqlshape import Col, Expr, Lit

_SIMPLE = {
    "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
    "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
    "binary": pa.binary(),
}
_ORDER = {"LessThan": pc.less, "LessThanOrEqual": pc.less_equal, "GreaterThan": pc.greater,
          "GreaterThanOrEqual": pc.greater_equal}
Table: TypeAlias = pa.RecordBatch | pa.Table


def arrow_type(type_: str) -> pa.DataType:
    if type_ in _SIMPLE:
        return _SIMPLE[type_]
    precision, scale = type_[len("decimal("):-1].split(",")
    return pa.decimal128(int(precision), int(scale))


def scalar(lit: Lit, type_: str) -> pa.Scalar:
    t = arrow_type(type_)
    value: Any = lit.value
    if value is not None and pa.types.is_decimal(t):
        value = decimal.Decimal(str(value))
    if isinstance(value, bytearray):
        value = bytes(value)
    return pa.scalar(value, t)


def _floating(type_: str) -> bool:
    return type_ in ("float", "double")


def _column(data: Table, col: Col) -> Any:
    arr = data.column(col.name)
    target = arrow_type(col.type)
    return arr if arr.type.equals(target) else pc.cast(arr, target, safe=not pa.types.is_floating(target))


def _null_where(mask: Any, values: Any) -> Any:
    """``values`` (booleans) with NULL wherever ``mask`` is true."""
    return pc.if_else(mask, pa.scalar(None, pa.bool_()), values)


def _compare(name: str, x: Any, lit: pa.Scalar, floating: bool) -> Any:
    if name == "EqualNullSafe":
        if not lit.is_valid:
            return pc.is_null(x)
        return pc.fill_null(_compare("EqualTo", x, lit, floating), False)
    if not lit.is_valid:
        return pa.nulls(len(x), pa.bool_())
    if not floating:
        return pc.equal(x, lit) if name == "EqualTo" else _ORDER[name](x, lit)
    nan = pc.is_nan(x)  # NULL where x is NULL
    if lit.as_py() != lit.as_py():  # the constant is NaN: it equals NaN and is above everything else
        if name == "EqualTo":
            return nan
        if name == "GreaterThan":
            return pc.and_(nan, False)
        if name == "GreaterThanOrEqual":
            return nan
        if name == "LessThan":
            return pc.invert(nan)
        return pc.or_(nan, True)  # LessThanOrEqual: every non-NULL value
    if name == "EqualTo":
        return pc.equal(x, lit)  # IEEE: NaN is unequal, -0.0 == 0.0
    if name in ("GreaterThan", "GreaterThanOrEqual"):
        return pc.or_(nan, _ORDER[name](x, lit))
    return _ORDER[name](x, lit)  # IEEE: NaN < and <= are false, as in Spark


def _in(x: Any, items: list[pa.Scalar], floating: bool) -> Any:
    values = [s for s in items if s.is_valid]
    has_null = len(values) < len(items)
    if not values:
        found = pc.and_(pc.is_valid(x), False)
    elif floating:
        found = functools.reduce(pc.or_, [_compare("EqualTo", x, s, True) for s in values])
    else:
        items_array = pa.array(values)  # from the scalars: no Python value (a timestamp before year 1 has none)
        found = pc.is_in(x, value_set=items_array if items_array.type == x.type else items_array.cast(x.type))
    found = _null_where(pc.is_null(x), found)
    if has_null:
        found = _null_where(pc.invert(pc.fill_null(found, True)), found)
    return found


def evaluate(e: Expr, data: Table) -> Any:
    """The condition's value per row (a boolean array, NULL where Spark's is NULL)."""
    n = data.num_rows
    if isinstance(e, Lit):
        return pa.array([e.value] * n, pa.bool_())
    if isinstance(e, Col):
        return _column(data, e)
    if e.name == "And":
        return pc.and_kleene(evaluate(e.args[0], data), evaluate(e.args[1], data))
    if e.name == "Or":
        return pc.or_kleene(evaluate(e.args[0], data), evaluate(e.args[1], data))
    if e.name == "Not":
        return pc.invert(evaluate(e.args[0], data))
    col = e.args[0]
    assert isinstance(col, Col)
    x = _column(data, col)
    if e.name == "IsNull":
        return pc.is_null(x)
    if e.name == "IsNotNull":
        return pc.is_valid(x)
    floating = _floating(col.type)
    if e.name == "In":
        return _in(x, [scalar(a, col.type) for a in e.args[1:] if isinstance(a, Lit)], floating)
    lit = e.args[1]
    assert isinstance(lit, Lit)
    return _compare(e.name, x, scalar(lit, col.type), floating)


def apply(e: Expr | None, data: Table) -> Table:
    """The rows of ``data`` where ``e`` is TRUE (all rows when ``e`` is None)."""
    if e is None or data.num_rows == 0:
        return data
    mask = evaluate(e, data)
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    return data.filter(mask)
