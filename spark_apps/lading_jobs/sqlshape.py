"""Which queries need no Spark SQL: a pure reading of Spark's analysed plan.

``unload.sparkplan.describe`` turns the analysed plan into the small tree below (``Node``,
``Col``, ``Lit``, ``Op``; literals and other constant expressions already
evaluated by Spark itself, so casts of constants follow Spark's rules, ANSI errors
included). ``recognise`` accepts exactly one shape: a chain of ``Project``,
``Filter`` and ``SubqueryAlias`` nodes, and at most one global ``Sort``, over one
input's temporary view, where

* every projected expression is a column of that input, possibly renamed;
* every filter condition is built from comparisons (``=``, ``<=>``, ``<``, ``<=``,
  ``>``, ``>=``) of a column with a constant, ``IN`` over constants, ``IS [NOT]
  NULL``, ``AND``, ``OR`` and ``NOT``, on columns of types whose comparison
  ``unload.predicate`` evaluates exactly as Spark does, with only the casts Spark inserts
  that are exact and cannot fail (an integer or decimal widened, float to double);
* every sort key (``ORDER BY``) is a column of that input, of a type whose order
  Parquet footers and Arrow compare as Spark does (``ORDERABLE``: no floats, no
  collations). The shape then carries the order; whether the rows already are in
  it is for the caller to prove (``unload.sortedness``), else Spark sorts them.

Anything else (a function, an aggregate, a join, a second sort, a cast of a string, a
collated string ...) gives a ``Refusal`` saying what, and the run stays on the
Spark SQL path. Filters above projections are moved onto the input's columns:
projections here only select and rename, so the order does not change rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Spark type simple strings a comparison may read (strings: UTF8_BINARY only).
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_FLOATING = ("float", "double")
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)$")
_OTHER = ("string", "boolean", "date", "timestamp", "timestamp_ntz", "binary")
_COMPARISONS = ("EqualTo", "EqualNullSafe", "LessThan", "LessThanOrEqual", "GreaterThan", "GreaterThanOrEqual")
_CONNECTIVES = ("And", "Or", "Not")
_NULL_TESTS = ("IsNull", "IsNotNull")


@dataclass(frozen=True)
class Col:
    """A column reference: Spark's attribute (name, expression id, type's simple string)."""

    name: str
    id: int
    type: str


@dataclass(frozen=True)
class Lit:
    """A constant, as Spark evaluated it: int, float, bool, str, bytes, a decimal's text,
    days (date), microseconds (timestamps) or None; ``type`` its simple string."""

    value: Any
    type: str


@dataclass(frozen=True)
class Op:
    """Any other expression: its Spark class name, arguments and result type (``Cast``:
    the target; ``Alias``: ``detail`` is the expression id it defines)."""

    name: str
    args: tuple[Expr, ...]
    type: str
    detail: str = ""


Expr = Col | Lit | Op


@dataclass(frozen=True)
class Node:
    """A logical plan node: Spark class name, children, expressions (Project: the list;
    Filter: the condition), output columns; ``view``: a temporary view's name."""

    name: str
    children: tuple[Node, ...] = ()
    exprs: tuple[Expr, ...] = ()
    output: tuple[Col, ...] = ()
    view: str | None = None
    detail: str = ""  # Sort: "global" (ORDER BY) or "local" (SORT BY)


@dataclass(frozen=True)
class Shape:
    """A recognised query: ``columns`` = (input column, output name) in output order;
    ``condition`` over input column names (``Col.name``), or None; ``order``: the
    ORDER BY keys as (input column, descending), or () for none."""

    input: str
    columns: tuple[tuple[str, str], ...]
    condition: Expr | None
    order: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class Refusal:
    reason: str


def recognise(plan: Node, inputs: frozenset[str] | set[str]) -> Shape | Refusal:
    """The plan's shape when it needs no SQL (see the module doc), else why not."""
    chain: list[Node] = []
    node = plan
    while node.name in ("Project", "Filter", "SubqueryAlias", "Sort"):
        chain.append(node)
        if len(node.children) != 1:
            return Refusal(f"a {node.name} with {len(node.children)} inputs")
        node = node.children[0]
    if node.name != "View" or node.view is None:
        return Refusal(f"the query reads a {node.name}, not one input as it is")
    if node.view not in inputs:
        return Refusal(f"the query reads {node.view!r}, which is not one of from.inputs")
    names = {c.id: c.name for c in node.output}  # expression id -> input column
    conditions: list[Expr] = []
    order: tuple[tuple[str, bool], ...] = ()
    for step in reversed(chain):
        if step.name == "Sort":
            if order:
                return Refusal("the query sorts twice")
            bound_order = _bind_order(step, names)
            if isinstance(bound_order, Refusal):
                return bound_order
            order = bound_order
        elif step.name == "Filter":
            bound = _bind_condition(step.exprs[0], names)
            if isinstance(bound, Refusal):
                return bound
            conditions.append(bound)
        elif step.name == "Project":
            projected: dict[int, str] = {}
            for e in step.exprs:
                source = _column_of(e, names)
                if source is None:
                    return Refusal(f"the query computes {describe(e)}; only columns (renamed or not) avoid SQL")
                out_id = e.id if isinstance(e, Col) else _alias_id(e)
                projected[out_id] = source
            names = projected
        else:  # SubqueryAlias keeps the ids
            continue
    columns = tuple((names[c.id], c.name) for c in plan.output)
    condition = None
    for c in conditions:
        condition = c if condition is None else Op("And", (condition, c), "boolean")
    return Shape(node.view, columns, condition, order)


ORDERABLE = ("tinyint", "smallint", "int", "bigint", "string", "boolean", "date", "timestamp", "timestamp_ntz")
_SPARK_ORDERS = {"ASC NULLS FIRST": False, "ASC NULLS LAST": False, "DESC NULLS LAST": True,
                 "DESC NULLS FIRST": True}


def _bind_order(step: Node, names: dict[int, str]) -> tuple[tuple[str, bool], ...] | Refusal:
    """A global sort's keys as (input column, descending); NULL placement is left to the
    caller, which takes the Arrow path only for keys without NULLs."""
    if step.detail != "global":
        return Refusal("the query has SORT BY (a sort within Spark's partitions)")
    keys = []
    for e in step.exprs:
        if not (isinstance(e, Op) and e.name == "SortOrder" and e.detail in _SPARK_ORDERS and len(e.args) == 1):
            return Refusal(f"the query sorts by {describe(e)}")
        key = e.args[0]
        if not isinstance(key, Col) or key.id not in names:
            return Refusal(f"the query sorts by {describe(key)}; only input columns avoid SQL")
        if key.type not in ORDERABLE and _DECIMAL.match(key.type) is None:
            return Refusal(f"the query sorts by {key.name} of type {key.type}")
        keys.append((names[key.id], _SPARK_ORDERS[e.detail]))
    return tuple(keys)


def _alias_id(e: Expr) -> int:
    assert isinstance(e, Op) and e.name == "Alias"
    return int(e.detail)


def _column_of(e: Expr, names: dict[int, str]) -> str | None:
    """The input column a projected expression is (an attribute, or an alias of one)."""
    if isinstance(e, Col):
        return names.get(e.id)
    if isinstance(e, Op) and e.name == "Alias" and len(e.args) == 1 and isinstance(e.args[0], Col):
        return names.get(e.args[0].id)
    return None


def describe(e: Expr) -> str:
    if isinstance(e, Col):
        return e.name
    if isinstance(e, Lit):
        return repr(e.value)
    if e.name == "Alias":
        return describe(e.args[0])
    return f"{e.name}({', '.join(describe(a) for a in e.args)})"


# -- conditions ------------------------------------------------------------------------------
def comparable(type_: str) -> bool:
    return type_ in _INTEGRAL or type_ in _FLOATING or type_ in _OTHER or _DECIMAL.match(type_) is not None


def exact_cast(source: str, target: str) -> bool:
    """Whether Spark's cast ``source`` → ``target`` keeps every value and never fails."""
    if source == target:
        return True
    if source in _INTEGRAL and target in _INTEGRAL:
        return _INTEGRAL.index(target) >= _INTEGRAL.index(source)
    if source in _INTEGRAL and target == "double":
        return source != "bigint"
    if source == "float" and target == "double":
        return True
    digits = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}
    to = _DECIMAL.match(target)
    if to is None:
        return False
    precision, scale = int(to.group(1)), int(to.group(2))
    if source in digits:
        return precision - scale >= digits[source]
    frm = _DECIMAL.match(source)
    if frm is None:
        return False
    return scale >= int(frm.group(2)) and precision - scale >= int(frm.group(1)) - int(frm.group(2))


def _bind_condition(e: Expr, names: dict[int, str]) -> Expr | Refusal:
    """``e`` with columns renamed to input columns, if every part of it is exact (module doc)."""
    if isinstance(e, Lit):
        if e.type == "boolean" or e.value is None:
            return e
        return Refusal(f"the filter has a constant {e.value!r} where a condition belongs")
    if isinstance(e, Col):
        if e.type != "boolean" or e.id not in names:
            return Refusal(f"the filter reads {e.name} as a condition")
        return Col(names[e.id], e.id, e.type)
    if e.name in _CONNECTIVES:
        args = [_bind_condition(a, names) for a in e.args]
        for a in args:
            if isinstance(a, Refusal):
                return a
        return Op(e.name, tuple(args), "boolean")  # type: ignore[arg-type]
    if e.name in _NULL_TESTS:
        col = _operand(e.args[0], names)
        return col if isinstance(col, Refusal) else Op(e.name, (col,), "boolean")
    if e.name in _COMPARISONS:
        return _comparison(e, names)
    if e.name == "In":
        value = _operand(e.args[0], names)
        if isinstance(value, Refusal):
            return value
        if not isinstance(value, Col):
            return Refusal("IN over a constant")
        items = []
        for a in e.args[1:]:
            if not isinstance(a, Lit):
                return Refusal(f"IN with a non-constant item {describe(a)}")
            if a.value is not None and a.type != value.type:
                return Refusal(f"IN of {value.type} with a {a.type} item")
            items.append(a)
        return Op("In", (value, *items), "boolean")
    return Refusal(f"the filter uses {e.name}; only comparisons with constants, IN, IS NULL, AND, OR and NOT "
                   "avoid SQL")


def _operand(e: Expr, names: dict[int, str]) -> Col | Lit | Refusal:
    """A comparison operand: a constant, or a column (through exact casts only)."""
    if isinstance(e, Lit):
        return e
    casts: list[str] = []
    while isinstance(e, Op) and e.name == "Cast" and len(e.args) == 1:
        casts.append(e.type)
        e = e.args[0]
    if not isinstance(e, Col):
        return Refusal(f"the filter computes {describe(e)}")
    if e.id not in names:
        return Refusal(f"the filter reads {e.name}, which is not an input column")
    type_ = e.type
    for target in reversed(casts):
        if not exact_cast(type_, target):
            return Refusal(f"the filter casts {e.name} from {type_} to {target}, which Spark may round or fail")
        type_ = target
    if not comparable(type_):
        return Refusal(f"the filter compares {e.name} of type {type_}")
    return Col(names[e.id], e.id, type_)


def _comparison(e: Op, names: dict[int, str]) -> Expr | Refusal:
    left, right = (_operand(a, names) for a in e.args)
    if isinstance(left, Refusal):
        return left
    if isinstance(right, Refusal):
        return right
    name = e.name
    if isinstance(left, Lit) and isinstance(right, Col):
        flipped = {"LessThan": "GreaterThan", "LessThanOrEqual": "GreaterThanOrEqual",
                   "GreaterThan": "LessThan", "GreaterThanOrEqual": "LessThanOrEqual"}
        left, right, name = right, left, flipped.get(name, name)
    if not (isinstance(left, Col) and isinstance(right, Lit)):
        return Refusal(f"{e.name} of {describe(e.args[0])} and {describe(e.args[1])}: only a column against a "
                       "constant avoids SQL")
    if right.value is not None and right.type != left.type:
        return Refusal(f"{e.name} of {left.type} and {right.type}")
    return Op(name, (left, right), "boolean")
