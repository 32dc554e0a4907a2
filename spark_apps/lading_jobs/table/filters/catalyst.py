"""Spark's plans to ``table.filters.expr`` trees: the filter that sits on a table's scan.

Two thin steps, through py4j. ``convert`` turns one Catalyst expression into the
tree the interpreter knows: comparisons, logic, ``IN``, the annotated functions
(``table.filters.interp.FUNCTIONS``), literals (a constant sub-expression is evaluated by
Spark), ``current_timestamp()`` / ``now()`` / ``current_date()`` as ``Now``,
``get_json_object(col, path)`` (its constant path as a parameter), ``from_json(col,
schema).a.b`` without options (the field names as parameters), ``variant_get`` /
``try_variant_get`` and ``col:a.b`` (``VariantGet``: its path and ``ANSI`` or ``TRY`` as
parameters; ``col:a.b::int`` is a ``Cast`` of a ``VariantGet`` of type ``variant``);
anything else becomes ``Opaque`` (it may return anything, NULL and errors included).
Spark's ``RuntimeReplaceable`` expressions (``to_date``, ``BETWEEN``, ``ts - INTERVAL``)
are read through their replacement.

``scan_filters`` walks an *analysed* plan from the top and carries every filter
down to the scans it constrains: through projections (substituting aliases),
subquery aliases, views, sorts and distincts, into both sides of an inner join and
into the preserved side of an outer, semi or anti join. Anything else (aggregates,
windows, limits, unions, CTE references) stops the filters above it. A relation
read more than once in the plan (subqueries included) gets nothing: its rows would
be shared by scans with different filters. The analysed plan, not the optimised
one, because the optimiser replaces ``current_timestamp()`` by that optimisation's
instant, and the query that finally runs takes its own, later one.
"""

from __future__ import annotations

import contextlib
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lading_jobs.table.filters import expr as ex

_COMPARE = {"EqualTo": "eq", "LessThan": "lt", "LessThanOrEqual": "le", "GreaterThan": "gt",
            "GreaterThanOrEqual": "ge", "EqualNullSafe": "eqns"}
_UNARY = {"IsNull": "isnull", "IsNotNull": "isnotnull", "Not": "not", "Year": "year", "Month": "month",
          "DayOfMonth": "day"}
_ARITH = {"Add": "add", "Subtract": "sub", "Multiply": "mul", "Divide": "div", "IntegralDivide": "idiv"}
_TIME = {"CurrentTimestamp": "timestamp", "Now": "timestamp", "CurrentDate": "date"}
_PASS_THROUGH = ("SubqueryAlias", "View", "Sort", "Distinct", "Deduplicate", "RepartitionByExpression",
                 "Repartition", "ResolvedHint")


@dataclass(frozen=True)
class Ref(ex.Node):
    """An attribute of some plan node's output, by Catalyst expression id (resolved by ``scan_filters``)."""

    expr_id: int


def _seq(value: Any) -> list[Any]:
    return [value.apply(i) for i in range(value.size())]


def _name(node: Any) -> str:
    return str(node.getClass().getSimpleName()).rstrip("$")


def _type(node: Any) -> str:
    return str(node.dataType().simpleString())


def _has_time(node: Any) -> bool:
    return _name(node) in _TIME or _name(node) == "LocalTimestamp" or any(_has_time(c) for c in _seq(node.children()))


def literal(value: Any, type_: str) -> Any:
    """A Catalyst internal value as a ``table.filters.expr`` literal value (the statistics domain)."""
    import decimal

    if value is None:
        return None
    if type_ in ("tinyint", "smallint", "int", "bigint", "date", "timestamp", "timestamp_ntz") \
            or type_.startswith("interval"):
        return int(value)
    if type_ == "float":  # py4j hands a Java float over as its shortest text
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    if type_ == "double":
        return float(value)
    if type_ == "boolean":
        return bool(value)
    if type_ == "string":
        return str(value.toString())
    if type_.startswith("decimal"):
        return decimal.Decimal(str(value.toString()))
    raise _Unknown(type_)


class _Unknown(Exception):
    pass


def convert(node: Any, common: dict[int, ex.Node] | None = None) -> ex.Node:
    """One Catalyst expression as a ``table.filters.expr`` tree, attributes as ``Ref``."""
    try:
        return _convert(node, common or {})
    except _Unknown:
        return ex.Opaque(_type(node))


def _eval_mode(node: Any) -> str:
    try:
        return str(node.evalMode().toString())
    except Exception:  # noqa: BLE001 - py4j: the node has no eval mode
        return "ANSI"


def _convert(node: Any, common: dict[int, ex.Node]) -> ex.Node:  # noqa: C901 - one case per node class
    name, type_ = _name(node), _type(node)
    kids = _seq(node.children())
    if name == "AttributeReference":
        return Ref(type_, int(node.exprId().id()))
    if name in _TIME:
        return ex.Now(_TIME[name])
    if name == "Literal" or (node.foldable() and node.deterministic() and not _has_time(node)):
        try:
            return ex.Lit(type_, literal(node.eval(None), type_))
        except _Unknown:
            return ex.Opaque(type_)
    if name in _COMPARE:
        return ex.call(_COMPARE[name], *(convert(c, common) for c in kids))
    if name in ("And", "Or"):
        return ex.call(name.lower(), *(convert(c, common) for c in kids))
    if name in _UNARY:
        return ex.call(_UNARY[name], convert(kids[0], common), type=type_)
    if name == "In":
        return ex.call("in", convert(node.value(), common), *(convert(c, common) for c in _seq(node.list())))
    if name in _ARITH:
        return ex.call(_ARITH[name], *(convert(c, common) for c in kids), type=type_, params=(_eval_mode(node),))
    if name == "UnaryMinus":
        mode = "ANSI" if bool(node.failOnError()) else "LEGACY"
        return ex.call("neg", convert(kids[0], common), type=type_, params=(mode,))
    if name == "Cast":
        return ex.call("cast", convert(kids[0], common), type=type_, params=(_eval_mode(node),))
    if name in ("TimestampAddInterval", "TimeAdd"):
        return ex.call("time_add", convert(kids[0], common), convert(kids[1], common), type=type_)
    if name in ("TimestampAddYMInterval", "DateAddYMInterval", "AddMonths"):
        return ex.call("add_months", *(convert(c, common) for c in kids), type=type_)
    if name in ("DateAdd", "DateSub"):
        return ex.call("date_add" if name == "DateAdd" else "date_sub", *(convert(c, common) for c in kids), type=type_)
    if name == "TruncTimestamp" and kids[0].foldable():
        return ex.call("date_trunc", convert(kids[1], common), type=type_, params=(str(kids[0].eval(None)),))
    if name == "TruncDate" and kids[1].foldable():
        return ex.call("trunc", convert(kids[0], common), type=type_, params=(str(kids[1].eval(None)),))
    if name == "UnixTimestamp" and kids:
        return ex.call("unix_timestamp", convert(kids[0], common), type=type_)
    if name == "Coalesce":
        return ex.call("coalesce", *(convert(c, common) for c in kids), type=type_)
    if name == "GetStructField":
        return _from_json_field(node, type_, common)
    if name == "GetJsonObject" and kids[1].foldable() and _type(kids[1]) == "string":
        path = kids[1].eval(None)
        if path is None:
            return ex.Opaque(type_)
        return ex.call("get_json_object", convert(kids[0], common), type=type_, params=(str(path.toString()),))
    if name == "VariantGet" and kids[1].foldable() and _type(kids[1]) == "string":
        path = kids[1].eval(None)
        if path is None:
            return ex.Opaque(type_)
        mode = "ANSI" if bool(node.failOnError()) else "TRY"
        return ex.call("variant_get", convert(kids[0], common), type=type_, params=(str(path.toString()), mode))
    if name == "Alias":
        return convert(kids[0], common)
    if name == "With":  # a common sub-expression (BETWEEN's operand): its definitions, then its body
        defs = dict(common)
        for d in _seq(node.defs()):
            defs[int(d.id().id())] = convert(d.child(), defs)
        return convert(node.child(), defs)
    if name == "CommonExpressionRef":
        found = common.get(int(node.id().id()))
        return found if found is not None else ex.Opaque(type_)
    replacement = _replacement(node)
    if replacement is not None:
        return convert(replacement, common)
    return ex.Opaque(type_)


def _from_json_field(node: Any, type_: str, common: dict[int, ex.Node]) -> ex.Node:
    """``from_json(col, schema).a.b`` (fields of a ``JsonToStructs`` without options) as a
    ``from_json_field`` call with the field names as parameters; any other field access: Opaque."""
    names: list[str] = []
    cur = node
    while _name(cur) == "GetStructField":
        child = cur.child()
        names.append(str(child.dataType().fields()[int(cur.ordinal())].name()))
        cur = child
    if _name(cur) != "JsonToStructs" or not bool(cur.options().isEmpty()):
        return ex.Opaque(type_)
    return ex.call("from_json_field", convert(cur.child(), common), type=type_, params=tuple(reversed(names)))


def _replacement(node: Any) -> Any:
    try:
        return node.replacement()
    except Exception:  # noqa: BLE001 - py4j: not a RuntimeReplaceable
        return None


# -- filters on scans -----------------------------------------------------------------------
def substitute(node: ex.Node, f: Callable[[Ref], ex.Node]) -> ex.Node:
    if isinstance(node, Ref):
        return f(node)
    if isinstance(node, ex.Call):
        return ex.Call(node.type, node.fn, tuple(substitute(a, f) for a in node.args), node.params)
    return node


def _refs(node: ex.Node) -> set[int]:
    if isinstance(node, Ref):
        return {node.expr_id}
    if isinstance(node, ex.Call):
        return set().union(*(_refs(a) for a in node.args)) if node.args else set()
    return set()


def _lookup(aliases: dict[int, ex.Node]) -> Callable[[Ref], ex.Node]:
    return lambda r: aliases.get(r.expr_id, r)


def _output_ids(plan: Any) -> set[int]:
    return {int(a.exprId().id()) for a in _seq(plan.output())}


COLUMNS_OPTION = "columnIds"
"""The relation option (JSON ``{name in lower case: [column id, Spark type]}``) by which
``scan_filters`` knows a lading table's columns (``reader.read_table`` sets it)."""


def _relation_view(node: Any) -> str | None:
    if _name(node) != "DataSourceV2Relation":
        return None
    view = node.options().get("view")
    return None if view is None else str(view).lower()


def _all_relations(plan: Any, counts: dict[str, int]) -> None:
    stack = [plan]
    while stack:
        node = stack.pop()
        stack.extend(_seq(node.children()))
        stack.extend(_seq(node.innerChildren()))
        with contextlib.suppress(Exception):  # py4j: a node without subqueries
            stack.extend(_seq(node.subqueries()))
        view = _relation_view(node)
        if view is not None:
            counts[view] = counts.get(view, 0) + 1


def scan_filters(plan: Any) -> dict[str, tuple[ex.Node, str | None]]:
    """Per view (lower case) scanned exactly once in the analysed ``plan``: the conjunction of
    the filters that constrain its rows, over its columns (``COLUMNS_OPTION``), and the
    relation's ``version`` option (the commit whose column ids the tree names); views with
    no such filter are left out."""
    counts: dict[str, int] = {}
    _all_relations(plan, counts)
    found: dict[str, list[ex.Node]] = {}
    versions: dict[str, str | None] = {}

    def at_relation(node: Any, pending: list[ex.Node]) -> None:
        view = _relation_view(node)
        if view is None or counts.get(view) != 1 or not pending:
            return
        raw = node.options().get(COLUMNS_OPTION)
        if raw is None:
            return
        known = json.loads(str(raw))
        by_id: dict[int, ex.Node] = {}
        for a in _seq(node.output()):
            hit = known.get(str(a.name()).lower())
            if hit is not None and hit[1] == _type(a):
                by_id[int(a.exprId().id())] = ex.Col(hit[1], hit[0])
        trees = [substitute(p, lambda r: by_id.get(r.expr_id, ex.Opaque(r.type))) for p in pending]
        trees = [t for t in trees if not ex.is_trivial(t)]
        if trees:
            found[view] = trees
            version = node.options().get("version")
            versions[view] = None if version is None else str(version)

    stack: list[tuple[Any, list[ex.Node]]] = [(plan, [])]
    while stack:
        node, pending = stack.pop()
        name = _name(node)
        kids = _seq(node.children())
        if name == "Filter":
            stack.append((kids[0], pending + ex.conjuncts(convert(node.condition()))))
        elif name == "Project":
            aliases: dict[int, ex.Node] = {}
            for e in _seq(node.projectList()):
                if _name(e) == "Alias":
                    aliases[int(e.exprId().id())] = convert(e.child())
            stack.append((kids[0], [substitute(p, _lookup(aliases)) for p in pending]))
        elif name in _PASS_THROUGH and len(kids) == 1:
            stack.append((kids[0], pending))
        elif name == "Join":
            left, right = kids
            join_type = str(node.joinType().toString())
            inner = join_type in ("Inner", "Cross")
            extra = ex.conjuncts(convert(node.condition().get())) if inner and node.condition().isDefined() else []
            left_ids, right_ids = _output_ids(left), _output_ids(right)
            take_left = inner or join_type in ("LeftOuter", "LeftSemi", "LeftAnti")
            take_right = inner or join_type == "RightOuter"
            stack.append((left, [p for p in pending + extra if take_left and _refs(p) <= left_ids]))
            stack.append((right, [p for p in pending + extra if take_right and _refs(p) <= right_ids]))
        else:
            at_relation(node, pending)
            stack.extend((k, []) for k in kids)
    return {view: (ex.and_all(trees), versions[view]) for view, trees in found.items()}
