"""Property: filters over JSON paths never skip a part holding a row the filter keeps.

Random ``json`` columns (nested objects, arrays, keys missing or ``null``, mixed kinds per key,
integers beyond 2^53 and int64, fractions, unicode strings, SQL NULLs, documents that are not
strict JSON) split into parts whose statistics the writer's own code computes
(``stats.table_stats`` → the commit's JSON form → ``PartStats.from_dict``); random filters
of ``get_json_object``, its casts and ``from_json`` fields. The oracle evaluates every row as
Spark does, written here independently of the interpreter (``get_json_object``: NULL for a NULL or invalid document, a
missing key, an array on the way and a JSON ``null``; a string's text; ``true``/``false``; an
integer's digits; a fraction as Java prints a double; objects and arrays as JSON text; casts of
that text as Spark casts strings, ANSI or TRY; ``from_json`` fields: NULL for what does not
convert, as Spark's PERMISSIVE mode). A document that is not strict JSON may pass
(Spark's parser is more lenient). A part holding a row that is TRUE or raises must be kept;
the fraction of parts skipped is printed (``pytest -s``)."""

from __future__ import annotations

import decimal
import json
import math
import re
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.filter_trees import boolean_trees
from support.hypothesis_budget import examples

from lading_jobs.table import format as fmt
from lading_jobs.table.filters import expr as vx
from lading_jobs.table.filters import interp as ip
from lading_jobs.table.stats import part as stx

PAYLOAD = vx.Col("string", 1)
I64 = (-(2**63), 2**63 - 1)
I32 = (-(2**31), 2**31 - 1)
KEYS = ["a", "b", "ts"]
PATHS = ["$.a", "$.b", "$.ts", "$.a.b", "$.a.ts", "$.b.a.ts", "$.zz", "$", "$.a[0]"]
STRINGS = ["", "a", "b", "2026-11-01", "2026-11-30T23:59:59Z", "2026-12", "é", "\U0010ffff", "null", "true",
           "42", "9", "1.5", "a" * 70, "a" * 70 + "b", " 7 "]
NUMBERS = ["0", "-0", "7", "42", "99", "100", "-5", str(2**53), str(2**53 + 1), str(I64[1]), str(I64[1] + 1),
           str(-(2**63) - 1), "1" + "0" * 30, "1.5", "-2.5", "0.1", "1e20", "1E-7", "2.0", "1e400", "-1e400"]


class Raw(str):
    """A number token, kept as its JSON text."""


scalars = st.one_of(st.none(), st.booleans(), st.sampled_from(STRINGS), st.text(max_size=4),
                    st.sampled_from(NUMBERS).map(Raw), st.integers(-120, 120).map(lambda i: Raw(str(i))))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.dictionaries(st.sampled_from(KEYS), inner, max_size=3), st.lists(inner, max_size=2)), max_leaves=6)
documents = st.one_of(st.dictionaries(st.sampled_from(KEYS), values, max_size=3), values)


def encode(v: Any) -> str:
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{encode(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(encode(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


texts = st.one_of(documents.map(encode), st.none(),
                  st.sampled_from(['{"a": NaN}', '{"a": "x", "a": "y"}', '{"a": "\\ud800"}', '{"a": 1', "{'a': 2}",
                                   '{"a": "2026-11-01"} x']))
tables = st.lists(st.lists(texts, min_size=1, max_size=5), min_size=1, max_size=5)


# -- filters -----------------------------------------------------------------------------------------
HOLE = "<a value of the data>"


def get(path: str) -> vx.Call:
    return vx.call("get_json_object", PAYLOAD, type="string", params=(path,))


FIELDS = [("a",), ("ts",), ("a", "b"), ("a", "ts"), ("b", "a", "ts"), ("zz",)]


def expressions() -> st.SearchStrategy[vx.Node]:
    paths = st.sampled_from(PATHS)
    return st.one_of(paths.map(get), st.builds(lambda p, to, mode: vx.call("cast", get(p), type=to, params=(mode,)),
                                               paths, st.sampled_from(["bigint", "int", "double"]),
                                               st.sampled_from(["ANSI", "TRY"])),
                     st.builds(lambda f, to: vx.call("from_json_field", PAYLOAD, type=to, params=f),
                               st.sampled_from(FIELDS), st.sampled_from(["bigint", "int", "double", "string"])))


LITERALS = {"string": st.sampled_from(STRINGS + ["2026-11", "1e20", "1.0E20", "z", "-0", "0"]),
            "bigint": st.sampled_from([0, 7, 42, 100, -5, 2**53, I64[1], I64[0], 1]),
            "int": st.sampled_from([0, 7, 42, 100, -5, I32[1]]),
            "double": st.sampled_from([0.0, 1.5, 7.0, 1e20, -1e308, 2.0**53, 0.1])}


def comparison() -> st.SearchStrategy[vx.Node]:
    def with_other(e: vx.Node) -> st.SearchStrategy[vx.Node]:
        lit = st.one_of(st.just(HOLE), st.just(HOLE), LITERALS[e.type]).map(lambda v: vx.Lit(e.type, v))
        return st.builds(lambda op, x: vx.call(op, e, x), st.sampled_from(["eq", "lt", "le", "gt", "ge", "eqns"]), lit)
    return expressions().flatmap(with_other)


def leaf() -> st.SearchStrategy[vx.Node]:
    nulls = st.builds(lambda fn, e: vx.call(fn, e), st.sampled_from(["isnull", "isnotnull"]), expressions())
    return st.one_of(comparison(), comparison(), nulls)


filters = boolean_trees(leaf(), max_leaves=3)


# -- the oracle: Spark's semantics, row by row ---------------------------------------------------------
class SparkError(Exception):
    pass


class Lenient(Exception):
    """A document that is not strict JSON: Spark's parser may find anything in it."""


ANY = object()
"""What ``get_json_object`` gives for a document that is not strict JSON, or a path this oracle
does not evaluate: any string or NULL (a comparison with it may be anything, unless its other
side is NULL)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({k for k, _ in pairs}) != len(pairs):
        raise Lenient("duplicate key")
    return dict(pairs)


def _reject(name: str) -> Any:
    raise Lenient(name)


def parse(text: str) -> Any:
    if re.search(r"\\u[dD][89abAB]", text):
        raise Lenient("surrogate")
    try:
        return json.loads(text, parse_float=decimal.Decimal, parse_constant=_reject, object_pairs_hook=_pairs)
    except ValueError as e:
        raise Lenient(str(e)) from e


def java_double(d: decimal.Decimal) -> str:
    """``Double.toString`` of the double nearest ``d`` (Jackson copies a fraction as a double)."""
    f = float(d)
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    if f == 0:
        return "-0.0" if math.copysign(1, f) < 0 else "0.0"
    if 1e-3 <= abs(f) < 1e7:
        return repr(f)  # positional in this range, with ".0" for whole values, as Java
    exact = decimal.Decimal(repr(abs(f)))  # the shortest digits that round-trip
    digits = "".join(map(str, exact.as_tuple().digits)).rstrip("0") or "0"
    return f"{'-' if f < 0 else ''}{digits[0]}.{digits[1:] or '0'}E{exact.adjusted()}"


def get_json_object(text: str | None, path: str) -> str | None:
    if text is None:
        return None
    m = re.fullmatch(r"\$((?:\.[A-Za-z0-9_]+)+)", path)
    doc = parse(text)
    if m is None:
        raise Lenient("a path this oracle does not evaluate")
    for key in m.group(1)[1:].split("."):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    if doc is None:
        return None
    if isinstance(doc, bool):
        return "true" if doc else "false"
    if isinstance(doc, int):
        return str(doc)
    if isinstance(doc, decimal.Decimal):
        return java_double(doc)
    if isinstance(doc, str):
        return doc
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, default=str)


def from_json_field(text: str | None, path: tuple[str, ...], to: str) -> Any:
    """``from_json(text, schema).a.b`` (PERMISSIVE): NULL for what does not convert to ``to``."""
    if text is None:
        return None
    try:
        doc = parse(text)
    except Lenient:
        return ANY
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    if doc is None:
        return None
    if to == "string":
        if isinstance(doc, str):
            return doc
        return ANY  # Spark prints other values as text; the interpreter knows nothing of it
    if isinstance(doc, bool) or not isinstance(doc, int | decimal.Decimal):
        return None
    if to == "double":
        return float(doc)
    lo, hi = I64 if to == "bigint" else I32
    return doc if isinstance(doc, int) and lo <= doc <= hi else None


def cast(text: str, to: str, mode: str) -> Any:
    """Spark's cast of a string to ``to`` (ANSI: an error for bad text; TRY: NULL)."""
    t = text.strip()
    try:
        if to == "double":
            if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?", t):
                raise SparkError("invalid")
            return float(t.rstrip("dDfF"))
        if not re.fullmatch(r"[+-]?\d+(\.\d*)?", t):
            raise SparkError("invalid")
        v = int(t.split(".")[0])
        lo, hi = I64 if to == "bigint" else I32
        if not lo <= v <= hi:
            raise SparkError("overflow")
        return v
    except SparkError:
        if mode == "ANSI":
            raise
        return None


def order(v: Any) -> tuple[int, Any]:
    return (1, 0.0) if isinstance(v, float) and math.isnan(v) else (0, v)


def conc(node: vx.Node, text: str | None) -> Any:
    if isinstance(node, vx.Lit):
        return node.value
    assert isinstance(node, vx.Call)
    fn = node.fn
    if fn == "from_json_field":
        return from_json_field(text, node.params, node.type)
    if fn == "get_json_object":
        try:
            return get_json_object(text, node.params[0])
        except Lenient:
            return ANY
    if fn == "cast":
        inner = conc(node.args[0], text)
        return inner if inner is None or inner is ANY else cast(inner, node.type, node.params[0])
    if fn in ("and", "or", "not"):
        found = truths(node, text)
        if len(found) != 1:
            raise Lenient("any truth value")
        return next(iter(found))
    if fn in ("isnull", "isnotnull"):
        a = conc(node.args[0], text)
        if a is ANY:
            raise Lenient("any value")
        return (a is None) == (fn == "isnull")
    a, b = (conc(x, text) for x in node.args)
    if (a is ANY or b is ANY) and (fn == "eqns" or (a is not None and b is not None)):
        raise Lenient("any value")
    if fn == "eqns":
        return (a is None and b is None) or (a is not None and b is not None and order(a) == order(b))
    if a is None or b is None:
        return None
    x, y = order(a), order(b)
    return {"eq": x == y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[fn]


def truths(node: vx.Node, text: str | None) -> set[bool | None]:
    """The truth values a condition may take (all three where a lenient document decides)."""
    if isinstance(node, vx.Call) and node.fn in ("and", "or"):
        a, b = (truths(x, text) for x in node.args)
        return {three_valued(node.fn, x, y) for x in a for y in b}
    if isinstance(node, vx.Call) and node.fn == "not":
        return {None if x is None else not x for x in truths(node.args[0], text)}
    try:
        return {conc(node, text)}
    except Lenient:
        return {True, False, None}


def three_valued(fn: str, a: bool | None, b: bool | None) -> bool | None:
    if fn == "and":
        return False if a is False or b is False else (None if a is None or b is None else True)
    return True if a is True or b is True else (None if a is None or b is None else False)


def row_may_pass(tree: vx.Node, text: str | None) -> bool:
    try:
        return True in truths(tree, text)
    except (SparkError, Lenient):
        return True


def fill(tree: vx.Node, texts: list[str | None], data: Any) -> vx.Node:
    if not isinstance(tree, vx.Call):
        return tree
    args = [fill(a, texts, data) for a in tree.args]
    for i, a in enumerate(args):
        if isinstance(a, vx.Lit) and a.value == HOLE:
            try:
                v = conc(args[1 - i], data.draw(st.sampled_from(texts)))
            except (SparkError, Lenient):
                v = None
            v = None if v is ANY else v
            args[i] = vx.Lit(a.type, v)
    return vx.Call(tree.type, tree.fn, tuple(args), tree.params)


def stats_of(texts: list[str | None]) -> stx.PartStats:
    table = pa.table({"payload": pa.array(texts, pa.string()), fmt.TIME_COLUMN: [0] * len(texts),
                      fmt.DIFF_COLUMN: [1] * len(texts)})
    stats = stx.table_stats(table, {"payload": 1}, frozenset({"payload"}))
    return stx.PartStats.from_dict(json.loads(json.dumps(stats.to_dict(), allow_nan=False)))


SKIPPED = [0, 0]


# ~0.25 CPU-s an example, the suite's costliest property: 75 by default (was 150: 35 CPU-s),
# LADING_HYPOTHESIS_PROFILE=thorough for 600 (tests/support/hypothesis_budget.py)
@settings(max_examples=examples(ci=75, thorough=600), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(parts=tables, data=st.data())
def test_no_part_with_a_passing_row_is_skipped(parts: list[list[str | None]], data: Any) -> None:
    tree = fill(data.draw(filters), [t for p in parts for t in p], data)
    for texts in parts:
        stats = stats_of(texts)
        keep = ip.might_match(tree, stats, ip.Env())
        SKIPPED[0] += 1
        SKIPPED[1] += not keep
        if not keep:
            for text in texts:
                assert not row_may_pass(tree, text), (tree, text, stats)


def test_print_fraction_skipped() -> None:
    if SKIPPED[0]:
        print(f"\njson interp property: {SKIPPED[1]} of {SKIPPED[0]} parts skipped ({SKIPPED[1] / SKIPPED[0]:.0%})")
