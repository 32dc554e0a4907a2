"""Spark's analysed plan of a DataFrame, read over py4j into ``lading_jobs.sqlshape``'s small tree.

The thin side of the query check: it walks the JVM's ``LogicalPlan`` and its
expressions and copies what ``sqlshape.recognise`` looks at (class names, column
names and expression ids, types as simple strings, temporary views' names). A
constant made of literals, casts and negations only is evaluated by Spark here,
so its value is Spark's; one that fails (an ANSI cast error) becomes an ``Op``
named ``Unevaluable``, which the recogniser refuses: the Spark SQL path then
reports the error itself. Other constant expressions (``current_timestamp()``,
functions) are left as they are and refused: their value is Spark's to take at
run time.
"""

from __future__ import annotations

import decimal
from typing import Any

from lading_jobs.sqlshape import Col, Expr, Lit, Node, Op

MAX_NODES = 2000  # a plan this large is certainly not a projection over one input
CONSTANT_PARTS = ("Literal", "Cast", "UnaryMinus")
"""Expressions a constant may be built of for it to be evaluated here."""


def _seq(x: Any) -> list[Any]:
    return [x.apply(i) for i in range(x.size())]


def _simple_name(obj: Any) -> str:
    return str(obj.getClass().getSimpleName()).rstrip("$")


def _value(v: Any) -> Any:
    """A JVM value as Python (py4j converts numbers, booleans, strings and byte arrays)."""
    if v is None or isinstance(v, bool | int | float | str | bytes | bytearray):
        return bytes(v) if isinstance(v, bytearray) else v
    cls = _simple_name(v)
    if cls == "UTF8String":
        return str(v.toString())
    if cls == "Decimal":
        big = v.toJavaBigDecimal()  # py4j may already hand back a Python decimal
        return str(big) if isinstance(big, decimal.Decimal) else str(big.toPlainString())
    raise TypeError(f"a constant of JVM class {cls}")


class _Budget:
    def __init__(self) -> None:
        self.left = MAX_NODES

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise OverflowError("plan too large")


def expression(e: Any, budget: _Budget | None = None) -> Expr:
    budget = budget or _Budget()
    budget.take()
    name = _simple_name(e)
    type_ = str(e.dataType().simpleString()) if name != "Alias" else ""
    if name == "AttributeReference":
        return Col(str(e.name()), int(e.exprId().id()), type_)
    if name == "Alias":
        return Op("Alias", (expression(e.child(), budget),), str(e.child().dataType().simpleString()),
                  str(e.exprId().id()))
    if name == "SortOrder":  # detail: e.g. "ASC NULLS FIRST"
        return Op("SortOrder", (expression(e.child(), budget),), type_,
                  f"{e.direction().sql()} {e.nullOrdering().sql()}")
    if e.foldable() and _constant(e):
        try:
            return Lit(_value(e.eval(None)), type_)
        except Exception:  # noqa: BLE001 - Spark's own error surfaces on the Spark SQL path
            return Op("Unevaluable", (), type_)
    return Op(name, tuple(expression(c, budget) for c in _seq(e.children())), type_)


def _constant(e: Any) -> bool:
    """Whether ``e`` is built of literals, casts and negations only."""
    return _simple_name(e) in CONSTANT_PARTS and all(_constant(c) for c in _seq(e.children()))


def _output(plan: Any) -> tuple[Col, ...]:
    return tuple(Col(str(a.name()), int(a.exprId().id()), str(a.dataType().simpleString()))
                 for a in _seq(plan.output()))


def node(plan: Any, budget: _Budget | None = None) -> Node:
    """The plan as a ``Node`` tree (a ``View``'s inside is not read: it is the input)."""
    budget = budget or _Budget()
    budget.take()
    name = _simple_name(plan)
    if name == "View":
        temp = bool(plan.isTempView())
        return Node("View", output=_output(plan), view=str(plan.desc().identifier().table()) if temp else None)
    exprs: tuple[Expr, ...] = ()
    detail = ""
    if name == "Project":
        exprs = tuple(expression(e, budget) for e in _seq(plan.projectList()))
    elif name == "Filter":
        exprs = (expression(plan.condition(), budget),)
    elif name == "Sort":
        exprs = tuple(expression(e, budget) for e in _seq(plan.order()))
        detail = "global" if getattr(plan, "global")() else "local"
    children = tuple(node(c, budget) for c in _seq(plan.children()))
    return Node(name, children, exprs, _output(plan), detail=detail)


def describe(df: Any) -> Node | None:
    """The analysed plan of ``df``, or None when it is too large to be a simple query."""
    try:
        return node(df._jdf.queryExecution().analyzed())
    except OverflowError:
        return None
