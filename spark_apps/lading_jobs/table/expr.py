"""Filter expressions: a small immutable tree, bound to column ids, evaluated against statistics.

``from_spark`` turns Spark's pushed filters (``pyspark.sql.datasource``) into the
tree (None for what it cannot express); ``bind`` resolves names to column ids
and types of one schema; ``might_match`` is the inclusive metrics evaluator: for
a part's (or a row group's) statistics it answers *rows might match* or *no row
can match*, and answers "might" whenever a statistic is missing, truncated in a
way that matters, or a literal does not fit the column's type. ``NOT`` is pushed
down by ``negate`` before evaluation. ``to_arrow`` builds the same predicate as a
pyarrow compute expression for exact row-level filtering.

Only columns whose stored values have a total order this module knows (integers,
floats, booleans, strings, decimals, dates, timestamps) take comparisons;
``bind`` refuses any other comparison (nested types, intervals, binary, time,
variant) with ``NotPushable``, so Spark evaluates it and no part is skipped on it.

Two corners follow Spark rather than Arrow or Python. A NaN literal compares as
Spark orders floats (NaN above every number, NaN = NaN), not as IEEE (every
comparison false). Date and timestamp literals up to the 1582 calendar switch
are not taken from Spark at all (``from_spark`` returns None): Spark hands them
over through the hybrid Julian/Gregorian calendar, which moves 1582-10-05 …
1582-10-14 to 1582-10-15, while parts store proleptic Gregorian values.

Nor are literals pyspark cannot hand over exactly: a decimal of 28 significant
digits or more (pyspark builds pushed decimals in Python's default context, which
rounds to 28 digits, so ``9999999999999999999999999999.9999999999`` arrives as
``1.000000000000000000000000000E+28``), and a date or timestamp outside Python's
years 1 … 9999 (``OUT_OF_RANGE``, see ``lading_jobs.pushed``). Spark
evaluates those filters itself; they skip nothing.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.pushed import OUT_OF_RANGE as OUT_OF_RANGE
from lading_jobs.table.schema import TableSchema, arrow_type, normalize_type
from lading_jobs.table.stats import ColumnStats, PartStats, to_stats_domain


@dataclass(frozen=True)
class Expr:
    pass


@dataclass(frozen=True)
class AlwaysTrue(Expr):
    pass


@dataclass(frozen=True)
class AlwaysFalse(Expr):
    pass


@dataclass(frozen=True)
class Pred(Expr):
    """A predicate on one column: ``op`` in eq, ne, lt, le, gt, ge, in, notin, isnull, notnull,
    startswith, notstartswith. ``column_id``/``type`` are set by ``bind``."""

    op: str
    name: str
    value: Any = None
    column_id: int = -1
    type: str = ""


@dataclass(frozen=True)
class Not(Expr):
    child: Expr


@dataclass(frozen=True)
class And(Expr):
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Or(Expr):
    left: Expr
    right: Expr


_NEGATED = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "in": "notin",
            "notin": "in", "isnull": "notnull", "notnull": "isnull", "startswith": "notstartswith",
            "notstartswith": "startswith"}


def and_all(exprs: list[Expr]) -> Expr:
    out: Expr = AlwaysTrue()
    for e in exprs:
        out = e if isinstance(out, AlwaysTrue) else And(out, e)
    return out


def negate(e: Expr) -> Expr:
    """``NOT e`` with the negation pushed to the leaves (no ``Not`` remains)."""
    if isinstance(e, AlwaysTrue):
        return AlwaysFalse()
    if isinstance(e, AlwaysFalse):
        return AlwaysTrue()
    if isinstance(e, Not):
        return push_not(e.child)
    if isinstance(e, And):
        return Or(negate(e.left), negate(e.right))
    if isinstance(e, Or):
        return And(negate(e.left), negate(e.right))
    assert isinstance(e, Pred)
    return Pred(_NEGATED[e.op], e.name, e.value, e.column_id, e.type)


def push_not(e: Expr) -> Expr:
    if isinstance(e, Not):
        return negate(e.child)
    if isinstance(e, And):
        return And(push_not(e.left), push_not(e.right))
    if isinstance(e, Or):
        return Or(push_not(e.left), push_not(e.right))
    return e


def from_spark(f: Any) -> Expr | None:
    """A ``pyspark.sql.datasource`` filter as an Expr, or None if it is not supported."""
    from pyspark.sql import datasource as ds

    simple = {ds.EqualTo: "eq", ds.GreaterThan: "gt", ds.GreaterThanOrEqual: "ge", ds.LessThan: "lt",
              ds.LessThanOrEqual: "le", ds.In: "in", ds.StringStartsWith: "startswith"}
    if isinstance(f, ds.Not):
        child = from_spark(f.child)
        return None if child is None else Not(child)
    attribute = getattr(f, "attribute", None)
    if attribute is None or len(attribute) != 1:
        return None
    name = attribute[0]
    for cls, op in simple.items():
        if isinstance(f, cls):
            if f.value is OUT_OF_RANGE:
                return None
            value = tuple(f.value) if op == "in" else f.value
            if op == "in" and any(isinstance(v, list | dict) for v in value):
                return None
            if isinstance(value, list | dict):
                return None
            if not all(spark_literal_is_exact(v) for v in (value if op == "in" else (value,))):
                return None
            return Pred(op, name, value)
    if isinstance(f, ds.IsNull):
        return Pred("isnull", name)
    if isinstance(f, ds.IsNotNull):
        return Pred("notnull", name)
    return None


# Spark converts date and timestamp literals for Python through java.sql.Date/Timestamp, in
# the hybrid Julian/Gregorian calendar: the days 1582-10-05 … 1582-10-14 do not exist there
# and arrive as 1582-10-15 (a timestamp as 1582-10-15 in the session time zone, which in UTC
# may be the 16th; the timestamp bound leaves a day for any zone). Parts hold proleptic
# Gregorian values, so such a literal would compare with the wrong day: Spark keeps these
# filters and compares them itself, and they skip nothing.
FIRST_EXACT_SPARK_DATE = dt.date(1582, 10, 16)
FIRST_EXACT_SPARK_TIMESTAMP = dt.datetime(1582, 10, 17, tzinfo=dt.UTC)


# pyspark turns a pushed decimal into Python in the default decimal context (28 digits): one
# of 28 significant digits or more may have been rounded (and its scale changed with it).
SPARK_DECIMAL_DIGITS = 28


def spark_literal_is_exact(value: Any) -> bool:
    """False for a date before ``FIRST_EXACT_SPARK_DATE`` or a timestamp before
    ``FIRST_EXACT_SPARK_TIMESTAMP`` (naive: as UTC), whose value Spark may have moved; for a
    decimal pyspark may have rounded (``SPARK_DECIMAL_DIGITS``); for ``OUT_OF_RANGE``."""
    if value is OUT_OF_RANGE:
        return False
    if isinstance(value, decimal.Decimal):
        return value.is_finite() and len(value.as_tuple().digits) < SPARK_DECIMAL_DIGITS
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return aware >= FIRST_EXACT_SPARK_TIMESTAMP
    if isinstance(value, dt.date):
        return value >= FIRST_EXACT_SPARK_DATE
    return True


class NotPushable(LookupError):
    """A filter this module does not evaluate (Spark keeps it; nothing is skipped on it)."""


class UnboundColumn(NotPushable):
    pass


@functools.lru_cache(maxsize=1024)
def storage_kind(type_: str) -> str:
    """How a column type's stored values compare: integer, float, boolean, string, decimal,
    date, timestamp, timestamp_ntz, or ``other`` (no order this module knows)."""
    t = arrow_type(type_)
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    return "other"


def bind(e: Expr, schema: TableSchema) -> Expr:
    """Resolve column names to ids and types; raises UnboundColumn for unknown names and
    NotPushable for comparisons on columns without a known order (see the module doc)."""
    if isinstance(e, Pred):
        c = schema.find(e.name)
        if c is None:
            raise UnboundColumn(e.name)
        type_ = normalize_type(c.type)
        if e.op not in ("isnull", "notnull") and storage_kind(type_) == "other":
            raise NotPushable(f"{e.op} on {c.name} ({type_})")
        return Pred(e.op, c.name, e.value, c.id, type_)
    if isinstance(e, Not):
        return Not(bind(e.child, schema))
    if isinstance(e, And):
        return And(bind(e.left, schema), bind(e.right, schema))
    if isinstance(e, Or):
        return Or(bind(e.left, schema), bind(e.right, schema))
    return e


def bind_pushed(filters: Any, schema: TableSchema) -> list[Expr]:
    """Spark's pushed filters that ``from_spark`` takes, each bound to ``schema``; a filter it
    does not take or that does not bind (``NotPushable``) is left out: it prunes nothing."""
    bound = []
    for f in filters:
        e = from_spark(f)
        if e is None:
            continue
        try:
            bound.append(bind(e, schema))
        except LookupError:  # NotPushable (UnboundColumn among them)
            continue
    return bound


def column_ids(e: Expr) -> set[int]:
    if isinstance(e, Pred):
        return {e.column_id}
    if isinstance(e, Not):
        return column_ids(e.child)
    if isinstance(e, And | Or):
        return column_ids(e.left) | column_ids(e.right)
    return set()


# -- the inclusive metrics evaluator -----------------------------------------------------
def might_match(e: Expr, stats: PartStats) -> bool:
    """False only when the statistics prove no row can satisfy ``e`` (bound, any NOTs)."""
    return _eval(push_not(e), stats)


def _eval(e: Expr, stats: PartStats) -> bool:
    if isinstance(e, AlwaysTrue):
        return True
    if isinstance(e, AlwaysFalse):
        return False
    if isinstance(e, And):
        return _eval(e.left, stats) and _eval(e.right, stats)
    if isinstance(e, Or):
        return _eval(e.left, stats) or _eval(e.right, stats)
    if isinstance(e, Not):  # pragma: no cover - push_not removes these
        return True
    assert isinstance(e, Pred)
    cs = stats.columns.get(e.column_id)
    if cs is None:
        return True
    try:
        return _eval_pred(e, cs, stats.rows)
    except (TypeError, ValueError, decimal.InvalidOperation):
        return True  # a literal that does not compare with the column: be conservative


def _key(value: Any, type_: str) -> Any:
    if value is None:
        return None
    if storage_kind(type_) == "decimal":
        return decimal.Decimal(str(value))
    return value


def _literal(value: Any, type_: str) -> Any:
    """A filter literal in the stats domain of the column's type; raises TypeError if it does not fit."""
    kind = storage_kind(type_)
    v = to_stats_domain(value, naive_utc=kind == "timestamp_ntz")
    if v is None:
        raise TypeError("no stats-domain value")
    if kind == "string" and not isinstance(v, str):
        raise TypeError("string column, non-string literal")
    if kind == "boolean" and not isinstance(v, bool):
        raise TypeError("boolean column")
    if kind in ("integer", "float") and (isinstance(v, bool) or not isinstance(v, int | float)):
        raise TypeError("numeric column")
    if kind == "other":
        raise TypeError("no order known for this type")
    return _key(v, type_)


def _eval_pred(e: Pred, cs: ColumnStats, rows: int) -> bool:
    all_null = cs.nulls is not None and cs.nulls == rows
    if e.op == "isnull":
        return cs.nulls is None or cs.nulls > 0
    if e.op == "notnull":
        return not all_null
    if all_null:
        return False  # every comparison with NULL is NULL, never true
    if _is_nan(e.value) and e.op in _COMPARISONS and storage_kind(e.type) == "float":
        return e.op != "gt"  # nothing is above NaN (see _nan_comparison); bounds never speak for NaN
    lo, hi = _key(cs.min, e.type), _key(cs.max, e.type)
    if e.op in ("in", "notin"):
        values = [_literal(v, e.type) for v in e.value if v is not None]
        if e.op == "in":
            if not values:
                return False
            return any(_in_range(v, lo, hi) for v in values)
        # NOT IN: no row matches only when every value is one of the excluded ones.
        if None in e.value:
            return False  # x NOT IN (..., NULL) is never true
        return not (lo is not None and lo == hi and not cs.min_truncated and not cs.max_truncated and lo in values)
    if e.op in ("startswith", "notstartswith"):
        prefix = e.value
        if not isinstance(prefix, str) or storage_kind(e.type) != "string":
            return True
        if e.op == "startswith":
            if lo is not None and lo[: len(prefix)] > prefix:
                return False
            return not (hi is not None and hi[: len(prefix)] < prefix)
        # NOT startswith: cannot match when both bounds start with the prefix (then all values do).
        return not (lo is not None and hi is not None and lo.startswith(prefix) and hi.startswith(prefix))
    v = _literal(e.value, e.type)
    if e.op == "eq":
        return _in_range(v, lo, hi)
    if e.op == "ne":
        return not (lo is not None and lo == hi == v and not cs.min_truncated and not cs.max_truncated)
    if e.op == "lt":
        return lo is None or lo < v
    if e.op == "le":
        return lo is None or lo <= v
    if e.op == "gt":
        return hi is None or hi > v
    if e.op == "ge":
        return hi is None or hi >= v
    return True


def _in_range(v: Any, lo: Any, hi: Any) -> bool:
    return (lo is None or lo <= v) and (hi is None or v <= hi)


# -- exact row-level evaluation in Arrow ------------------------------------------------
ROW_EXACT_TYPES = ("tinyint", "smallint", "int", "bigint", "string", "boolean", "date")


def row_exact(e: Expr) -> bool:
    """True when ``to_arrow`` evaluates ``e`` exactly as Spark would (so Spark need not re-check)."""
    if isinstance(e, Pred):
        if e.type not in ROW_EXACT_TYPES:
            return False
        values = e.value if e.op in ("in", "notin") else (e.value,)
        if e.op in ("isnull", "notnull"):
            return True
        return all(_fits_exactly(v, e.type) for v in values)
    if isinstance(e, Not):
        return row_exact(e.child)
    if isinstance(e, And | Or):
        return row_exact(e.left) and row_exact(e.right)
    return True


def _fits_exactly(v: Any, type_: str) -> bool:
    if v is None:
        return False
    if type_ == "string":
        return isinstance(v, str)
    if type_ == "boolean":
        return isinstance(v, bool)
    if type_ == "date":
        return isinstance(v, dt.date) and not isinstance(v, dt.datetime)
    return isinstance(v, int) and not isinstance(v, bool)


def to_arrow(e: Expr) -> pc.Expression:
    """The predicate as a pyarrow compute expression over columns named as in the schema."""
    return _to_arrow(push_not(e))


def _to_arrow(e: Expr) -> pc.Expression:
    if isinstance(e, AlwaysTrue):
        return pc.scalar(True)
    if isinstance(e, AlwaysFalse):
        return pc.scalar(False)
    if isinstance(e, Not):  # pragma: no cover - push_not removes these
        return _to_arrow(negate(e.child))
    if isinstance(e, And):
        return _to_arrow(e.left) & _to_arrow(e.right)
    if isinstance(e, Or):
        return _to_arrow(e.left) | _to_arrow(e.right)
    assert isinstance(e, Pred)
    if storage_kind(e.type) != "float" or e.op in ("isnull", "notnull"):
        return _pred_to_arrow(e)
    if _is_nan(e.value) and e.op in _COMPARISONS:
        return _nan_comparison(e)
    return _pred_to_arrow(e) | pc.field(e.name).is_nan()  # Spark orders NaN above every number: Spark decides


_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _nan_comparison(e: Pred) -> pc.Expression:
    """``column op NaN`` as Spark evaluates it: NaN is above every number and equal to itself
    (IEEE comparisons, Arrow's, are false for every row). NULL rows are false, never true:
    after ``push_not`` no ``NOT`` can turn that into true."""
    f = pc.field(e.name)
    if e.op in ("lt", "ne"):
        return f.is_valid() & ~f.is_nan()
    if e.op == "le":
        return f.is_valid()
    if e.op == "gt":
        return pc.scalar(False)
    return f.is_nan()  # eq, ge


def _pred_to_arrow(e: Pred) -> pc.Expression:
    f = pc.field(e.name)
    op = e.op
    if op == "isnull":
        return f.is_null()
    if op == "notnull":
        return f.is_valid()
    if op in ("in", "notin"):
        values = pa.array([v for v in e.value if v is not None])
        if storage_kind(e.type) == "float":
            # is_in hashes values, so -0.0 would not be 0.0 (SQL equality); adding +0.0 turns
            # -0.0 into 0.0 and keeps every other value, NaN included
            f, values = pc.add(f, 0.0), pc.add(values.cast(pa.float64()), 0.0)
        expr = f.isin(values)
        if op == "in":
            return expr
        if None in e.value:
            return pc.scalar(False)  # x NOT IN (..., NULL) is never true
        return f.is_valid() & ~expr  # NULL NOT IN (...) is NULL, not true
    if op in ("startswith", "notstartswith"):
        expr = pc.starts_with(f, pattern=e.value)
        return expr if op == "startswith" else f.is_valid() & ~expr
    v = _arrow_literal(e.value, e.type)
    if v is None:
        return pc.scalar(True)  # cannot compare in Arrow: keep the rows, Spark filters them
    return {"eq": f == v, "ne": f != v, "lt": f < v, "le": f <= v, "gt": f > v, "ge": f >= v}[op]


def _arrow_literal(value: Any, type_: str) -> pc.Expression | None:
    """``value`` as a scalar comparable with the column's stored values, or None."""
    kind = storage_kind(type_)
    if isinstance(value, dt.datetime) and kind in ("timestamp", "timestamp_ntz"):
        if kind == "timestamp_ntz":
            value = value.replace(tzinfo=None)
        elif value.tzinfo is None:
            value = value.astimezone(dt.UTC)  # Spark hands naive datetimes in the local zone
        return pc.scalar(pa.scalar(value, type=arrow_type(type_)))
    if kind in ("timestamp", "timestamp_ntz", "other"):
        return None
    return pc.scalar(value)
