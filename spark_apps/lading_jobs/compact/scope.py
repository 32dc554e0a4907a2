"""``scope.filter`` (Spark SQL text) as a filter tree bound to the table, for statistics.

Spark parses and analyses the expression against the table's columns (so types
coerce exactly as in a query: ``day >= '2024-01-01'`` on a date column compares
dates); an expression Spark refuses is a ``SpecError`` naming ``scope.filter``.
The analysed Catalyst tree is then translated, with NOTs pushed to the leaves:
comparisons, ``IN``, ``IS [NOT] NULL`` and ``startswith`` of a column against
constant values become ``table.filters.expr`` predicates; constant sub-expressions are
evaluated by Spark; anything else (functions of columns, casts that may reorder
values) becomes "might match", so a part is left out only when its statistics
prove no row can match.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

from lading_jobs import sqlshape
from lading_jobs.table.filters import catalyst
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.schema import TableSchema
from lading_spec.errors import SpecError

_COMPARE = {"EqualTo": "eq", "LessThan": "lt", "LessThanOrEqual": "le", "GreaterThan": "gt",
            "GreaterThanOrEqual": "ge"}
_FLIP = {"eq": "eq", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _children(node: Any) -> list[Any]:
    seq = node.children()
    return [seq.apply(i) for i in range(seq.size())]


def _type_name(data_type: Any) -> str:
    return str(data_type.getClass().getSimpleName()).rstrip("$")


def _python_value(value: Any, data_type: Any) -> Any:
    """A Catalyst internal value of ``data_type`` as the Python value Spark would push."""
    if value is None:
        return None
    kind = _type_name(data_type)
    if kind in ("ByteType", "ShortType", "IntegerType", "LongType"):
        return int(value)
    if kind == "FloatType":  # py4j passes a Java float through its shortest text (0.1F as 0.1)
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    if kind == "DoubleType":
        return float(value)
    if kind == "BooleanType":
        return bool(value)
    if kind in ("StringType", "CharType", "VarcharType"):
        return str(value.toString())
    if kind == "DecimalType":
        return decimal.Decimal(str(value.toString()))
    if kind == "DateType":
        return dt.date(1970, 1, 1) + dt.timedelta(days=int(value))
    if kind == "TimestampType":
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(value))
    if kind == "TimestampNTZType":
        return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(value))
    raise _Untranslatable(kind)


class _Untranslatable(Exception):
    pass


def _constant(node: Any) -> Any:
    if not node.foldable():
        raise _Untranslatable(str(node.nodeName()))
    return _python_value(node.eval(None), node.dataType())


def _column(node: Any) -> str:
    """The column a side of a comparison reads, unwrapping casts that keep every value
    (``sqlshape.exact_cast``: widening ones). A cast that truncates, rounds or wraps
    (double → int, bigint → double, double → float) compares other values than the
    column's statistics hold: such a comparison is no filter (it might match)."""
    name = str(node.nodeName())
    if name == "AttributeReference":
        return str(node.name())
    if name == "Cast":
        child = node.child()
        if sqlshape.exact_cast(str(child.dataType().simpleString()), str(node.dataType().simpleString())):
            return _column(child)
    raise _Untranslatable(name)


def _leaf(node: Any) -> ex.Expr:
    name = str(node.nodeName())
    if name in _COMPARE:
        left, right = _children(node)
        try:
            return ex.Pred(_COMPARE[name], _column(left), _constant(right))
        except _Untranslatable:
            return ex.Pred(_FLIP[_COMPARE[name]], _column(right), _constant(left))
    if name in ("IsNull", "IsNotNull"):
        return ex.Pred("isnull" if name == "IsNull" else "notnull", _column(node.child()))
    if name == "In":
        items = node.list()
        return ex.Pred("in", _column(node.value()), tuple(_constant(items.apply(i)) for i in range(items.size())))
    if name == "StartsWith":
        left, right = _children(node)
        return ex.Pred("startswith", _column(left), _constant(right))
    raise _Untranslatable(name)


def _translate(node: Any, negated: bool) -> ex.Expr:
    name = str(node.nodeName())
    if name == "Not":
        return _translate(node.child(), not negated)
    if name in ("And", "Or"):
        left, right = (_translate(c, negated) for c in _children(node))
        conj = (name == "And") != negated
        return ex.And(left, right) if conj else ex.Or(left, right)
    if node.foldable() and _type_name(node.dataType()) == "BooleanType":
        value = node.eval(None)
        if value is None:
            return ex.AlwaysFalse()  # NULL filters every row, negated or not
        return ex.AlwaysTrue() if bool(value) != negated else ex.AlwaysFalse()
    try:
        leaf = _leaf(node)
    except _Untranslatable:
        return ex.AlwaysTrue()
    return ex.negate(leaf) if negated else leaf


def bind_filter(spark: Any, text: str, schema: TableSchema) -> ex.Expr:
    """``text`` analysed by Spark against ``schema``, its pushed-predicate form bound for
    ``interp.might_match``."""
    return scope_filters(spark, text, schema)[0]


def scope_filters(spark: Any, text: str, schema: TableSchema) -> tuple[ex.Expr, ex.Node]:
    """``text`` analysed by Spark against ``schema``, as two ``table.filters.expr`` trees for the
    interpreter (``table.filters.interp``): ``Pred`` leaves, bound, and the whole condition
    (``table.filters.catalyst.convert``), which also skips parts by filters over expressions
    (``date_trunc('DAY', ts) = …``, ``id * 2 + 1 < 100``)."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    from lading_jobs import sandbox
    from lading_jobs.formats import spark as spark_formats

    spark_schema = spark_formats.transfer_schema(schema.spark_schema())
    columns = [F.lit(None).cast(f.dataType).alias(f.name) for f in spark_schema.fields]
    try:
        # Tenant SQL: analysed only in a tenant session (allowed functions only), no subquery, and
        # checked again once analysed, before _translate evaluates its constants (lading_jobs.sandbox).
        tenant = sandbox.tenant_session(spark)
        with sandbox.refusals("scope.filter"):
            df = tenant.range(0).select(*columns).where(sandbox.filter_column(tenant, text, "scope.filter"))
            plan = df._jdf.queryExecution().analyzed()
        sandbox.check_resolved(tenant, plan, "scope.filter")
    except PySparkException as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SpecError("scope.filter", f"Spark cannot use {text!r} as a filter over the table's columns: "
                                        f"{first}") from e
    while str(plan.nodeName()) != "Filter":
        kids = _children(plan)
        if not kids:
            raise SpecError("scope.filter", f"{text!r} is not a filter")
        plan = kids[0]
    tree = _translate(plan.condition(), False)
    return _bind_leaves(tree, schema), _value_tree(plan, schema)


def _value_tree(plan: Any, schema: TableSchema) -> ex.Node:
    """The Filter's condition over the table's columns (``table.filters.catalyst.convert``)."""
    from lading_jobs.formats import spark as spark_formats

    spark_schema = spark_formats.transfer_schema(schema.spark_schema())
    types = {f.name: f.dataType.simpleString() for f in spark_schema.fields}
    columns: dict[int, ex.Node] = {}
    for a in _seq(plan.child().output()):
        c = schema.find(str(a.name()))
        if c is not None and types.get(c.name) == str(a.dataType().simpleString()):
            columns[int(a.exprId().id())] = ex.Col(types[c.name], c.id)
    return catalyst.substitute(catalyst.convert(plan.condition()), lambda r: columns.get(r.expr_id, ex.Opaque(r.type)))


def _seq(value: Any) -> list[Any]:
    return [value.apply(i) for i in range(value.size())]


def _bind_leaves(e: ex.Expr, schema: TableSchema) -> ex.Expr:
    """Bind each predicate; one that cannot be evaluated on statistics becomes "might match"."""
    if ex.is_call(e, "and", "or"):
        assert isinstance(e, ex.Call)
        return ex.call(e.fn, *(_bind_leaves(a, schema) for a in e.args))
    if isinstance(e, ex.Pred):
        try:
            return ex.bind(e, schema)
        except ex.NotPushable:
            return ex.AlwaysTrue()
    return e
