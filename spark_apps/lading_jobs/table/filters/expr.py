"""One expression tree for every filter lading evaluates: nodes, how they are built, JSON.

**Nodes.** Every node carries its Spark SQL type (``simpleString``: ``bigint``,
``decimal(10,2)``, ``timestamp``, ``interval day``, ...). ``Col`` is a table column by
column id; ``Lit`` a constant in the statistics domain (``table.stats.part``: integers,
floats, booleans and strings as themselves, decimals as ``Decimal``, dates as epoch days,
timestamps and day-time intervals as microseconds; ``None`` is NULL); ``Now`` the query's
current time; ``Call`` a named function of argument nodes with constant ``params`` (a
unit, an eval mode); ``Opaque`` anything the builder does not know (it may be NULL, fail
or be any value). ``Pred`` is a *pushed* predicate, one column by name against constants
as Spark handed them over (``op`` in eq, ne, lt, le, gt, ge, in, notin, isnull, notnull,
startswith, notstartswith; ``bind`` adds the column's id and type); it is a boolean leaf of
the same tree. Logic is ``Call`` ``and`` / ``or`` / ``not`` everywhere (``And``, ``Or``,
``Not`` build them), constants TRUE and FALSE are boolean ``Lit`` (``AlwaysTrue()``,
``AlwaysFalse()``).

**Built** two ways. From Spark's plan (``table.filters.catalyst``): whole expressions such as
``date_trunc('DAY', ts) = DATE'2026-11-01'`` or ``id * 2 + 1 < 100`` become calls over
``Col``, ``Lit`` and ``Now``, and travel to the data source's planning process as JSON
(``to_json`` / ``from_json``). From the filters Spark pushes into a Python data source
(``from_spark``, ``pyspark.sql.datasource``): ``Pred`` leaves joined by ``and`` / ``or`` /
``not``, None for what the tree cannot express; ``bind`` resolves their names against one
schema.

**Evaluated** two ways, each over the whole tree. Three-valued over statistics by
``table.filters.interp`` (the one interpreter: every node's possible values over a part's or a
row group's statistics, ``Pred`` leaves by the inclusive rules written there, which
answer "might match" whenever a statistic is missing, truncated in a way that matters, or a
literal does not fit the column's type), and row-wise over Arrow batches by ``to_arrow``
(pushed trees: ``Pred``, ``and`` / ``or`` / ``not`` and boolean constants; ``row_exact``
says when Spark need not check its answer). ``negate`` pushes a NOT down to the leaves.

Only columns whose stored values have a total order this module knows (integers,
floats, booleans, strings, decimals, dates, timestamps) take pushed comparisons;
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
import json
import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.pushed import OUT_OF_RANGE as OUT_OF_RANGE
from lading_jobs.table.schema import TableSchema, arrow_type, normalize_type


@dataclass(frozen=True)
class Node:
    type: str


Expr = Node
"""The name pushed-filter code gives a tree."""


@dataclass(frozen=True)
class Col(Node):
    """A table column, by column id."""

    column_id: int


@dataclass(frozen=True)
class Lit(Node):
    """A constant in the statistics domain; ``None`` is NULL."""

    value: Any


@dataclass(frozen=True)
class Now(Node):
    """``current_timestamp()`` / ``now()`` (type ``timestamp``) or ``current_date()`` (``date``):
    one instant per query, which the interpreter knows as a range (``interp.Env``)."""


@dataclass(frozen=True)
class Call(Node):
    """A function ``fn`` of ``args``; ``params`` are constant settings (a unit, an eval mode)."""

    fn: str
    args: tuple[Node, ...]
    params: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Opaque(Node):
    """Anything: any value of ``type``, NULL, or an error."""


@dataclass(frozen=True, init=False)
class Pred(Node):
    """A pushed predicate on one column (a boolean node): ``op`` in eq, ne, lt, le, gt, ge, in,
    notin, isnull, notnull, startswith, notstartswith; ``value`` the constant (a tuple for in
    and notin) as Spark hands it over, a Python value. ``column_id`` / ``column_type`` are set
    by ``bind``; the fifth positional argument is the column type."""

    op: str
    name: str
    value: Any
    column_id: int
    column_type: str

    def __init__(self, op: str, name: str, value: Any = None, column_id: int = -1,
                 column_type: str = "") -> None:
        for field, v in (("type", "boolean"), ("op", op), ("name", name), ("value", value),
                         ("column_id", column_id), ("column_type", column_type)):
            object.__setattr__(self, field, v)


TRUE = Lit("boolean", True)
FALSE = Lit("boolean", False)


def call(fn: str, *args: Node, type: str = "boolean", params: tuple[Any, ...] = ()) -> Call:  # noqa: A002
    return Call(type, fn, tuple(args), params)


def And(left: Node, right: Node) -> Call:
    return call("and", left, right)


def Or(left: Node, right: Node) -> Call:
    return call("or", left, right)


def Not(child: Node) -> Call:
    return call("not", child)


def AlwaysTrue() -> Lit:
    return TRUE


def AlwaysFalse() -> Lit:
    return FALSE


def is_call(node: Node, *fns: str) -> bool:
    """``node`` is a ``Call`` of one of ``fns``."""
    return isinstance(node, Call) and node.fn in fns


def and_all(nodes: list[Node]) -> Node:
    """The conjunction of ``nodes`` (TRUE for none; leading TRUEs dropped)."""
    out: Node = TRUE
    for n in nodes:
        out = n if out == TRUE else call("and", out, n)
    return out


def conjuncts(node: Node) -> list[Node]:
    if is_call(node, "and"):
        assert isinstance(node, Call)
        return [c for a in node.args for c in conjuncts(a)]
    return [node]


def column_ids(node: Node) -> set[int]:
    if isinstance(node, Col | Pred):
        return {node.column_id}
    if isinstance(node, Call):
        return set().union(*(column_ids(a) for a in node.args)) if node.args else set()
    return set()


def is_trivial(node: Node) -> bool:
    """True when the tree can never skip a part: a TRUE literal, or no column at all."""
    return node == TRUE or not column_ids(node)


_NEGATED = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "in": "notin",
            "notin": "in", "isnull": "notnull", "notnull": "isnull", "startswith": "notstartswith",
            "notstartswith": "startswith"}


def negate(e: Expr) -> Expr:
    """``NOT e`` of a pushed tree (``Pred`` leaves, ``and`` / ``or`` / ``not``, TRUE and FALSE)
    with the negation pushed to the leaves (no ``not`` remains)."""
    if e == TRUE:
        return FALSE
    if e == FALSE:
        return TRUE
    if isinstance(e, Call) and e.fn == "not":
        return push_not(e.args[0])
    if isinstance(e, Call) and e.fn in ("and", "or"):
        return call("or" if e.fn == "and" else "and", *(negate(a) for a in e.args))
    assert isinstance(e, Pred), e
    return Pred(_NEGATED[e.op], e.name, e.value, e.column_id, e.column_type)


def push_not(e: Expr) -> Expr:
    """A pushed tree with every ``not`` pushed to the leaves."""
    if isinstance(e, Call) and e.fn == "not":
        return negate(e.args[0])
    if isinstance(e, Call) and e.fn in ("and", "or"):
        return Call(e.type, e.fn, tuple(push_not(a) for a in e.args), e.params)
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
    """Resolve the column names of a pushed tree's ``Pred`` leaves to ids and types; raises UnboundColumn for unknown names and
    NotPushable for comparisons on columns without a known order (see the module doc)."""
    if isinstance(e, Pred):
        c = schema.find(e.name)
        if c is None:
            raise UnboundColumn(e.name)
        type_ = normalize_type(c.type)
        if e.op not in ("isnull", "notnull") and storage_kind(type_) == "other":
            raise NotPushable(f"{e.op} on {c.name} ({type_})")
        return Pred(e.op, c.name, e.value, c.id, type_)
    if isinstance(e, Call):
        return Call(e.type, e.fn, tuple(bind(a, schema) for a in e.args), e.params)
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


# -- exact row-level evaluation in Arrow ------------------------------------------------
ROW_EXACT_TYPES = ("tinyint", "smallint", "int", "bigint", "string", "boolean", "date")


def row_exact(e: Expr) -> bool:
    """True when ``to_arrow`` evaluates ``e`` exactly as Spark would (so Spark need not re-check)."""
    if isinstance(e, Pred):
        if e.column_type not in ROW_EXACT_TYPES:
            return False
        values = e.value if e.op in ("in", "notin") else (e.value,)
        if e.op in ("isnull", "notnull"):
            return True
        return all(_fits_exactly(v, e.column_type) for v in values)
    if isinstance(e, Call):
        return all(row_exact(a) for a in e.args)
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
    """A pushed tree as a pyarrow compute expression over columns named as in the schema."""
    return _to_arrow(push_not(e))


def _to_arrow(e: Expr) -> pc.Expression:
    if e == TRUE:
        return pc.scalar(True)
    if e == FALSE:
        return pc.scalar(False)
    if isinstance(e, Call) and e.fn == "not":  # pragma: no cover - push_not removes these
        return _to_arrow(negate(e.args[0]))
    if isinstance(e, Call) and e.fn == "and":
        return _to_arrow(e.args[0]) & _to_arrow(e.args[1])
    if isinstance(e, Call) and e.fn == "or":
        return _to_arrow(e.args[0]) | _to_arrow(e.args[1])
    if not isinstance(e, Pred):
        raise TypeError(f"no row filter for {e!r}: only pushed trees run on Arrow batches")
    if storage_kind(e.column_type) != "float" or e.op in ("isnull", "notnull"):
        return _pred_to_arrow(e)
    if is_nan(e.value) and e.op in COMPARISONS:
        return _nan_comparison(e)
    return _pred_to_arrow(e) | pc.field(e.name).is_nan()  # Spark orders NaN above every number: Spark decides


COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def is_nan(value: Any) -> bool:
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
        if storage_kind(e.column_type) == "float":
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
    v = _arrow_literal(e.value, e.column_type)
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


# -- JSON ------------------------------------------------------------------------------
def _value_json(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return {"d": str(v)}
    if isinstance(v, float) and not math.isfinite(v):
        return {"f": repr(v)}
    return v


def _value_py(v: Any) -> Any:
    if isinstance(v, dict):
        return decimal.Decimal(v["d"]) if "d" in v else float(v["f"])
    return v


def to_obj(node: Node) -> Any:
    if isinstance(node, Col):
        return ["col", node.type, node.column_id]
    if isinstance(node, Lit):
        return ["lit", node.type, _value_json(node.value)]
    if isinstance(node, Now):
        return ["now", node.type]
    if isinstance(node, Call):
        return ["call", node.type, node.fn, [to_obj(a) for a in node.args], [_value_json(p) for p in node.params]]
    if isinstance(node, Pred):
        raise TypeError(f"{node!r} has no JSON form: pushed predicates stay in their process")
    return ["opaque", node.type]


def from_obj(o: Any) -> Node:
    tag, type_ = o[0], o[1]
    if tag == "col":
        return Col(type_, int(o[2]))
    if tag == "lit":
        return Lit(type_, _value_py(o[2]))
    if tag == "now":
        return Now(type_)
    if tag == "call":
        return Call(type_, o[2], tuple(from_obj(a) for a in o[3]), tuple(_value_py(p) for p in o[4]))
    return Opaque(type_)


def to_json(node: Node) -> str:
    return json.dumps(to_obj(node), separators=(",", ":"), allow_nan=False)


def from_json(text: str) -> Node:
    return from_obj(json.loads(text))
