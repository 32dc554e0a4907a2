"""Value expressions: the small tree the ResultSpec interpreter (``table.filters.interp``) evaluates.

Where ``table.filters.expr`` holds *column op literal* predicates (what Spark pushes into a
Python data source), this tree holds whole expressions: a filter such as
``date_trunc('DAY', ts) = DATE'2026-11-01'`` or ``id * 2 + 1 < 100`` as calls of
named functions over columns, literals and the query's current time. It is built
from Spark's plan by thin code (``table.filters.catalyst``) and is our own: the
interpreter is pure functions over it, and it travels to the data source's
planning process as JSON (``to_json`` / ``from_json``).

Every node carries its Spark SQL type (``simpleString``: ``bigint``, ``decimal(10,2)``,
``timestamp``, ``interval day``, ...). Values are in the statistics domain
(``table.stats.part``): integers, floats, booleans and strings as themselves, decimals as
``Decimal``, dates as epoch days, timestamps and day-time intervals as microseconds.
``Opaque`` stands for anything the converter does not know: it may be NULL, fail
or be any value.
"""

from __future__ import annotations

import decimal
import json
import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Node:
    type: str


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


TRUE = Lit("boolean", True)


def call(fn: str, *args: Node, type: str = "boolean", params: tuple[Any, ...] = ()) -> Call:  # noqa: A002
    return Call(type, fn, tuple(args), params)


def and_all(nodes: list[Node]) -> Node:
    out: Node | None = None
    for n in nodes:
        out = n if out is None else call("and", out, n)
    return TRUE if out is None else out


def conjuncts(node: Node) -> list[Node]:
    if isinstance(node, Call) and node.fn == "and":
        return [c for a in node.args for c in conjuncts(a)]
    return [node]


def column_ids(node: Node) -> set[int]:
    if isinstance(node, Col):
        return {node.column_id}
    if isinstance(node, Call):
        return set().union(*(column_ids(a) for a in node.args)) if node.args else set()
    return set()


def is_trivial(node: Node) -> bool:
    """True when the tree can never skip a part: a TRUE literal, or no column at all."""
    return node == TRUE or not column_ids(node)


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
