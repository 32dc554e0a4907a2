"""The ResultSpec interpreter: what may an expression return over one part's rows?

The one evaluator of ``table.filters.expr`` trees over statistics. Abstract interpretation
over a part's (or a row group's) statistics (seed 004): every node of a tree evaluates to a
``Spec`` — may it be NULL, may it fail (an ANSI error: overflow, an invalid cast), and an
inclusive range of its non-null values.
Columns take theirs from the part's statistics (a missing bound: unbounded; a
truncated string bound is still a bound), literals are exact, the query's current
time is the range ``Env`` gives. A function is *annotated* when this module knows
how its result moves with its arguments (``FUNCTIONS``); it then maps the ends of
its argument's range (monotone functions) or gives the range piecewise (``month``,
``day``). Any other function may return anything, NULL and errors included.

A pushed predicate (``expr.Pred``, from the filters Spark pushes into a source) is a
boolean leaf read by the inclusive rules of pushed filters (``pushed_spec``): it may be TRUE
unless the raw statistics prove no row satisfies it, FALSE unless they prove its negation
holds for no row, and it never fails; ``and`` / ``or`` / ``not`` over such leaves are the
same three-valued logic as over any other tree. Its rules are not ``_comparison``'s: they
read the raw bounds (truncation flags; infinite bounds of in-memory statistics, where
``column_spec`` reads an infinity as no bound), never skip on a NaN literal but ``> NaN``, and
answer "might" for a literal that does not fit the column; these answers are the pushed
filters' since before the two trees were one, and no pruning decision changed with them.

A filter keeps a part unless its Spec can be neither TRUE nor an error
(``might_match``): Spark would raise on an error, so a part where the filter may
fail is read and Spark decides.

Spark's semantics, corner by corner: comparisons are three-valued (NULL when a side
is NULL); floats order NaN above every number and ``-0.0 = 0.0`` (a float range
without an upper bound holds NaN); integer arithmetic under ANSI fails on overflow
(``TRY`` gives NULL, legacy wraps: anything); ``x DIV c`` truncates toward zero; decimal arithmetic with a literal follows Spark's
result types and half-up rounding, its overflow failing under ANSI and NULL otherwise.
Functions of the session time zone (``timestamp`` ↔ ``date``, ``date_trunc``,
timestamp + day-time interval, ``current_date``) are computed at the range's ends in
that zone and, unless the zone is a fixed offset, widened by ``ZONE_SLACK_MICROS``
(dates: ``ZONE_SLACK_DAYS``): local time is not monotone across an offset change,
and Java's and Python's zone data may differ by a release; the slack covers both.
"""

from __future__ import annotations

import calendar
import datetime as dt
import decimal
import math
import re
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from lading_jobs.table.filters import expr as ex
from lading_jobs.table.stats import jsonstats
from lading_jobs.table.stats.part import ColumnStats, PartStats, to_stats_domain

MICROS_PER_DAY = 86_400_000_000
ZONE_SLACK_MICROS = 26 * 3_600_000_000
"""How far a local-time conversion may stray from monotone: the largest offset change
on record (America/Sitka, 1867: a day back) plus two hours."""
ZONE_SLACK_DAYS = 2
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MIN_MICROS = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z
_MAX_MICROS = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z
NOW_CAP_MICROS = 221_845_392_000_000_000  # 9000-01-01T00:00:00Z
"""The query's instant when ``Env`` gives no upper end: some time before the year 9000, so
arithmetic on it does not look like it may overflow."""
_INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}


@dataclass(frozen=True)
class Env:
    """The query's settings: its current instant as a range of epoch microseconds (``None``:
    unbounded on that side) and the session time zone (Spark's ``spark.sql.session.timeZone``)."""

    now_lo: int | None = None
    now_hi: int | None = None
    time_zone: str = "UTC"


@dataclass(frozen=True)
class Spec:
    """What an expression may return: NULL (``nullable``), an error (``fallible``), and its
    non-null values: none (``empty``) or within ``[lo, hi]`` (``None``: unbounded)."""

    type: str
    nullable: bool = False
    fallible: bool = False
    empty: bool = False
    lo: Any = None
    hi: Any = None


def anything(type_: str) -> Spec:
    return Spec(type_, nullable=True, fallible=True)


def kind(type_: str) -> str:
    """How values of a Spark type compare here: integer, float, decimal, boolean, string,
    date, timestamp, timestamp_ntz, daytime (a day-time interval) or other."""
    if type_ in _INT_BITS:
        return "integer"
    if type_ in ("float", "double"):
        return "float"
    if type_.startswith("decimal"):
        return "decimal"
    if type_ in ("boolean", "string", "date", "timestamp", "timestamp_ntz"):
        return type_
    if type_.startswith("interval") and "year" not in type_ and "month" not in type_:
        return "daytime"
    return "other"


def int_range(type_: str) -> tuple[int, int]:
    bits = _INT_BITS[type_]
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


# -- order (Spark's: NaN above every number) ---------------------------------------------
def _key(v: Any) -> tuple[int, Any]:
    if isinstance(v, float) and math.isnan(v):
        return (1, 0.0)
    return (0, v)


def _le(a: Any, b: Any) -> bool:
    """a ≤ b, where ``None`` on either side is unbounded (always possible)."""
    return a is None or b is None or _key(a) <= _key(b)


def _lt(a: Any, b: Any) -> bool:
    return a is None or b is None or _key(a) < _key(b)


def _min(a: Any, b: Any) -> Any:
    return None if a is None or b is None else (a if _key(a) <= _key(b) else b)


def _max(a: Any, b: Any) -> Any:
    return None if a is None or b is None else (a if _key(a) >= _key(b) else b)


# -- booleans ----------------------------------------------------------------------------
def may_be_true(s: Spec) -> bool:
    return not s.empty and (s.hi is None or s.hi is True)


def may_be_false(s: Spec) -> bool:
    return not s.empty and (s.lo is None or s.lo is False)


def boolean(true: bool, false: bool, null: bool, fallible: bool) -> Spec:
    if not true and not false:
        return Spec("boolean", null, fallible, empty=True)
    return Spec("boolean", null, fallible, lo=not false, hi=true)


# -- columns and the root ----------------------------------------------------------------
def column_spec(col: ex.Col, stats: PartStats) -> Spec:
    """A column's Spec from a part's statistics; anything the statistics do not say is open."""
    if stats.rows == 0:
        return Spec(col.type, empty=True)
    cs = stats.columns.get(col.column_id)
    if cs is None:
        return Spec(col.type, nullable=True)
    nullable = cs.nulls is None or cs.nulls > 0
    if cs.nulls is not None and cs.nulls >= stats.rows:
        return Spec(col.type, nullable=True, empty=True)
    return Spec(col.type, nullable, lo=_bound(cs.min, col.type), hi=_bound(cs.max, col.type))


def _bound(v: Any, type_: str) -> Any:
    """A stats-domain bound as a value of ``type_``, or None when it is missing or mistyped."""
    k = kind(type_)
    if v is None or isinstance(v, bool) != (k == "boolean"):
        return None
    if k in ("integer", "date", "timestamp", "timestamp_ntz"):
        return v if isinstance(v, int) else None
    if k == "float":
        return float(v) if isinstance(v, int | float) and math.isfinite(v) else None
    if k == "decimal":
        try:
            d = decimal.Decimal(v) if isinstance(v, str | int) else None
        except decimal.InvalidOperation:
            return None
        return d if d is not None and d.is_finite() else None
    if k in ("string", "boolean"):
        return v if isinstance(v, str if k == "string" else bool) else None
    return None


def evaluate(node: ex.Node, stats: PartStats, env: Env) -> Spec:
    """The Spec of ``node`` over the rows ``stats`` describes."""
    if isinstance(node, ex.Col):
        return column_spec(node, stats)
    if isinstance(node, ex.Lit):
        if node.value is None:
            return Spec(node.type, nullable=True, empty=True)
        return Spec(node.type, lo=node.value, hi=node.value)
    if isinstance(node, ex.Pred):
        return pushed_spec(node, stats)
    if isinstance(node, ex.Now):
        now = Spec("timestamp", lo=env.now_lo, hi=env.now_hi if env.now_hi is not None else NOW_CAP_MICROS)
        return now if node.type == "timestamp" else _cast(now, "date", "ANSI", env)
    if isinstance(node, ex.Call):
        on_json = json_spec(node, stats)
        if on_json is not None:
            return on_json
        on_variant = variant_spec(node, stats)
        if on_variant is not None:
            return on_variant
        fn = FUNCTIONS.get(node.fn)
        if fn is None:
            return anything(node.type)
        args = [evaluate(a, stats, env) for a in node.args]
        try:
            return fn(node, args, env)
        except (ArithmeticError, ValueError, TypeError, OverflowError, decimal.InvalidOperation):
            return anything(node.type)  # outside what this module computes exactly: open
    return anything(node.type)


def might_match(node: ex.Node, stats: PartStats, env: Env | None = None) -> bool:
    """False only when the filter ``node`` can be neither TRUE nor an error for any row
    (``env``: the query's settings, by default an unknown instant in UTC)."""
    s = evaluate(node, stats, env if env is not None else Env())
    return s.fallible or may_be_true(s)


# -- pushed predicates (``expr.Pred``) --------------------------------------------------
def pushed_spec(e: ex.Pred, stats: PartStats) -> Spec:
    """A pushed predicate over a part's statistics, by the inclusive rules of pushed filters:
    it may be TRUE unless the statistics prove no row satisfies it, FALSE unless they prove
    no row fails it (its negation, ``expr.negate``), and NULL; it never raises.

    These rules read the raw ``ColumnStats`` (truncation flags, infinite in-memory bounds)
    and answer "might" for a literal that does not fit the column's type, a comparison with
    NaN (the bounds never speak for NaN) and a missing statistic."""
    return boolean(_pushed_may_hold(e, stats), _pushed_may_hold(ex.negate(e), stats), True, False)


def _pushed_may_hold(e: ex.Expr, stats: PartStats) -> bool:
    assert isinstance(e, ex.Pred)
    cs = stats.columns.get(e.column_id)
    if cs is None:
        return True
    try:
        return _pushed_might(e, cs, stats.rows)
    except (TypeError, ValueError, AttributeError, decimal.InvalidOperation):
        return True  # a literal (or a bound) that does not compare with the column: be conservative


def _stored_key(value: Any, type_: str) -> Any:
    if value is None:
        return None
    if ex.storage_kind(type_) == "decimal":
        return decimal.Decimal(str(value))
    return value


def _pushed_literal(value: Any, type_: str) -> Any:
    """A filter literal in the stats domain of the column's type; raises TypeError if it does not fit."""
    k = ex.storage_kind(type_)
    v = to_stats_domain(value, naive_utc=k == "timestamp_ntz")
    if v is None:
        raise TypeError("no stats-domain value")
    if k == "string" and not isinstance(v, str):
        raise TypeError("string column, non-string literal")
    if k == "boolean" and not isinstance(v, bool):
        raise TypeError("boolean column")
    if k in ("integer", "float") and (isinstance(v, bool) or not isinstance(v, int | float)):
        raise TypeError("numeric column")
    if k == "other":
        raise TypeError("no order known for this type")
    return _stored_key(v, type_)


def _pushed_might(e: ex.Pred, cs: ColumnStats, rows: int) -> bool:
    all_null = cs.nulls is not None and cs.nulls == rows
    if e.op == "isnull":
        return cs.nulls is None or cs.nulls > 0
    if e.op == "notnull":
        return not all_null
    if all_null:
        return False  # every comparison with NULL is NULL, never true
    if ex.is_nan(e.value) and e.op in ex.COMPARISONS and ex.storage_kind(e.column_type) == "float":
        return e.op != "gt"  # nothing is above NaN (see ``expr._nan_comparison``); bounds never speak for NaN
    lo, hi = _stored_key(cs.min, e.column_type), _stored_key(cs.max, e.column_type)
    if e.op in ("in", "notin"):
        values = [_pushed_literal(v, e.column_type) for v in e.value if v is not None]
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
        if not isinstance(prefix, str) or ex.storage_kind(e.column_type) != "string":
            return True
        if e.op == "startswith":
            if lo is not None and lo[: len(prefix)] > prefix:
                return False
            return not (hi is not None and hi[: len(prefix)] < prefix)
        # NOT startswith: cannot match when both bounds start with the prefix (then all values do).
        return not (lo is not None and hi is not None and lo.startswith(prefix) and hi.startswith(prefix))
    v = _pushed_literal(e.value, e.column_type)
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


# -- logic and comparisons ---------------------------------------------------------------
def _and(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    a, b = args
    return boolean(may_be_true(a) and may_be_true(b), may_be_false(a) or may_be_false(b),
                   (a.nullable and (b.nullable or may_be_true(b))) or (b.nullable and may_be_true(a)),
                   a.fallible or b.fallible)


def _or(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    a, b = args
    return boolean(may_be_true(a) or may_be_true(b), may_be_false(a) and may_be_false(b),
                   (a.nullable and (b.nullable or may_be_false(b))) or (b.nullable and may_be_false(a)),
                   a.fallible or b.fallible)


def _not(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    (a,) = args
    return boolean(may_be_false(a), may_be_true(a), a.nullable, a.fallible)


def _isnull(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    (a,) = args
    return boolean(a.nullable, not a.empty, False, a.fallible)


def _isnotnull(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    (a,) = args
    return boolean(not a.empty, a.nullable, False, a.fallible)


def _compare(op: str, a: Spec, b: Spec) -> tuple[bool, bool]:
    """(may be TRUE, may be FALSE) of ``x op y`` for non-null x of ``a`` and y of ``b``."""
    if op == "gt":
        return _compare("lt", b, a)
    if op == "ge":
        return _compare("le", b, a)
    if op == "lt":
        return _lt(a.lo, b.hi), _le(b.lo, a.hi)
    if op == "le":
        return _le(a.lo, b.hi), _lt(b.lo, a.hi)
    # eq: TRUE needs the ranges to meet; FALSE is impossible only when both are one same value
    single = a.lo is not None and b.lo is not None and _key(a.lo) == _key(a.hi) == _key(b.lo) == _key(b.hi)
    return _le(a.lo, b.hi) and _le(b.lo, a.hi), not single


def _comparison(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    a, b = args
    if kind(a.type) != kind(b.type) or kind(a.type) == "other" or \
            (kind(a.type) == "string" and (a.type != "string" or b.type != "string")):
        return anything("boolean")
    fallible = a.fallible or b.fallible
    if node.fn == "eqns":  # <=>: never NULL
        t, f = (False, False) if a.empty or b.empty else _compare("eq", a, b)
        return boolean(t or (a.nullable and b.nullable), f or a.nullable or b.nullable, False, fallible)
    if a.empty or b.empty:
        return boolean(False, False, a.nullable or b.nullable, fallible)
    t, f = _compare(node.fn, a, b)
    return boolean(t, f, a.nullable or b.nullable, fallible)


def _in(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    """``x IN (a, b, ...)`` is ``x = a OR x = b OR ...`` in three-valued logic."""
    value, items = args[0], args[1:]
    if not items:
        return anything("boolean")
    out: Spec | None = None
    for item in items:
        eq = _comparison(ex.call("eq"), [value, item], env)
        out = eq if out is None else _or(node, [out, eq], env)
    assert out is not None
    return out


def _coalesce(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    fallible, empty, lo, hi, nullable = False, True, None, None, True
    for s in args:
        fallible = fallible or s.fallible
        if not s.empty:
            lo, hi = (s.lo, s.hi) if empty else (_min(lo, s.lo), _max(hi, s.hi))
            empty = False
        if not s.nullable:
            nullable = False
            break
    return Spec(node.type, nullable, fallible, empty, None if empty else lo, None if empty else hi)


# -- monotone functions ------------------------------------------------------------------
def _monotone(s: Spec, type_: str, f: Callable[[Any], Any], increasing: bool = True) -> Spec:
    """``f`` of every value of ``s``, for ``f`` non-decreasing (or non-increasing) on its domain;
    a missing bound stays missing."""
    if s.empty:
        return Spec(type_, s.nullable, s.fallible, empty=True)
    a = None if s.lo is None else f(s.lo)
    b = None if s.hi is None else f(s.hi)
    if not increasing:
        a, b = b, a
    return Spec(type_, s.nullable, s.fallible, lo=a, hi=b)


def _overflowing(s: Spec, lo: Any, hi: Any, mode: str) -> Spec:
    """``s`` whose values should lie in ``[lo, hi]``: values outside overflow, which fails under
    ANSI, is NULL under TRY and wraps (anything) in legacy mode."""
    if s.empty or (s.lo is not None and s.hi is not None and lo <= s.lo and s.hi <= hi):
        return s
    if mode == "ANSI":
        return replace(s, fallible=True, lo=_clip(s.lo, lo, hi, lo), hi=_clip(s.hi, lo, hi, hi))
    if mode == "TRY":
        return replace(s, nullable=True, lo=_clip(s.lo, lo, hi, lo), hi=_clip(s.hi, lo, hi, hi))
    return anything(s.type)


def _clip(v: Any, lo: Any, hi: Any, missing: Any) -> Any:
    return missing if v is None else min(max(v, lo), hi)


def _arith(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    """``x + c``, ``x - c``, ``c - x``, ``x * c``, ``c * x`` for a literal ``c`` (integers and doubles;
    decimals, and ``x / c``: ``_decimal_arith``)."""
    a, b = args
    mode = node.params[0] if node.params else "ANSI"
    lit_left = isinstance(node.args[0], ex.Lit) and not isinstance(node.args[1], ex.Lit)
    x, c = (b, a) if lit_left else (a, b)
    if not isinstance(node.args[0 if lit_left else 1], ex.Lit) or c.empty:
        return anything(node.type) if not c.empty else Spec(node.type, True, x.fallible, empty=True)
    if kind(node.type) == "decimal" or node.fn == "div":
        return _decimal_arith(node, x, c, lit_left, mode)
    k = kind(node.type)
    if k not in ("integer", "float") or node.type == "float" or kind(x.type) != k:
        return anything(node.type)
    cv = c.lo
    if k == "float" and not math.isfinite(cv):
        return anything(node.type)
    if node.fn == "add":
        out = _monotone(x, node.type, lambda v: v + cv)
    elif node.fn == "sub":
        out = _monotone(x, node.type, (lambda v: cv - v) if lit_left else (lambda v: v - cv), not lit_left)
    else:
        out = _monotone(x, node.type, lambda v: v * cv, cv >= 0)
    if k == "integer":
        out = _overflowing(out, *int_range(node.type), mode)
    return out


_WIDE = decimal.Context(prec=200)
"""Exact for sums and products of two decimals of Spark's (at most 38 digits each)."""


def _quotient(v: decimal.Decimal, c: decimal.Decimal, scale: int) -> decimal.Decimal:
    """``v / c`` rounded half up (a tie away from zero) to ``scale`` places, exactly."""
    n1, d1 = v.as_integer_ratio()
    n2, d2 = c.as_integer_ratio()
    num, den = n1 * d2 * 10**scale, d1 * n2
    q, r = divmod(abs(num), abs(den))
    q += 2 * r >= abs(den)
    return decimal.Decimal(q if (num < 0) == (den < 0) else -q).scaleb(-scale, _WIDE)


def _decimal_arith(node: ex.Call, x: Spec, c: Spec, lit_left: bool, mode: str) -> Spec:
    """``x + c``, ``x - c``, ``c - x``, ``x * c``, ``c * x``, ``x / c`` for a decimal ``x`` and a
    decimal literal ``c``, in the result type Spark gives the node (``DecimalPrecision``: for
    ``+`` and ``-`` scale max(s1, s2), for ``*`` s1 + s2, for ``/`` max(6, s1 + p2 + 1), the scale
    cut, to no less than 6, when the precision passes 38). Spark rounds the exact sum,
    difference, product or quotient half up, once, to the result's scale: non-decreasing in the
    exact value, which is monotone in ``x``, so the ends map to the ends (swapped for ``c - x``
    and a negative ``c``). A result too wide for the precision fails under ANSI and is NULL
    otherwise (``TRY``, legacy); ``x / 0`` fails under ANSI and is NULL otherwise. ``c / x`` is
    not monotone: anything."""
    m = _DECIMAL_TYPE.match(node.type)
    if m is None or kind(x.type) != "decimal" or kind(c.type) != "decimal" or (node.fn == "div" and lit_left):
        return anything(node.type)
    cv, scale = c.lo, int(m.group(2))
    if node.fn == "div" and cv == 0:
        return Spec(node.type, x.nullable or (mode != "ANSI" and not x.empty),
                    x.fallible or (mode == "ANSI" and not x.empty), empty=True)
    f: Callable[[Any], Any]
    if node.fn == "add":
        f = lambda v: _WIDE.add(v, cv)  # noqa: E731
    elif node.fn == "sub":
        f = (lambda v: _WIDE.subtract(cv, v)) if lit_left else (lambda v: _WIDE.subtract(v, cv))
    elif node.fn == "mul":
        f = lambda v: _WIDE.multiply(v, cv)  # noqa: E731
    else:
        f = lambda v: _quotient(v, cv, scale)  # noqa: E731
    increasing = not (node.fn == "sub" and lit_left) and not (node.fn in ("mul", "div") and cv < 0)
    return _to_decimal(_monotone(x, node.type, f, increasing), node.type, mode)


def _integral_div(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    """``x DIV c`` for an integral ``x`` and an integer literal ``c`` (Spark's ``IntegralDivide``,
    a ``bigint``): the quotient truncated toward zero, so ``-7 DIV 2`` is ``-3``. Truncation is
    non-decreasing in ``x / c``, so the ends map to the ends, swapped for a negative ``c``. A NULL
    ``c`` gives NULL; ``x DIV 0`` fails under ANSI and is NULL otherwise (a NULL ``x`` stays
    NULL). ``|x DIV c| <= |x|``, so only ``c = -1`` can overflow (the smallest ``bigint``): ANSI
    fails; TRY and legacy wrap, anything. ``c DIV x`` is not monotone, and a decimal ``x`` is not
    computed here: anything."""
    a, b = args
    mode = node.params[0] if node.params else "ANSI"
    if not isinstance(node.args[1], ex.Lit) or isinstance(node.args[0], ex.Lit) or \
            node.type != "bigint" or kind(a.type) != "integer" or kind(b.type) != "integer":
        return anything(node.type)
    if b.empty:
        return Spec(node.type, True, a.fallible, empty=True)
    c = b.lo
    if c == 0:
        return Spec(node.type, a.nullable or (mode != "ANSI" and not a.empty),
                    a.fallible or (mode == "ANSI" and not a.empty), empty=True)

    def quotient(v: int) -> int:
        q = abs(v) // abs(c)
        return q if (v < 0) == (c < 0) else -q

    out = _monotone(a, node.type, quotient, c > 0)
    if c != -1:
        return out
    return _overflowing(out, *int_range(node.type), "ANSI" if mode == "ANSI" else "LEGACY")


def _negate(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    (a,) = args
    if kind(node.type) != "integer":
        return anything(node.type)
    mode = node.params[0] if node.params else "ANSI"
    return _overflowing(_monotone(a, node.type, lambda v: -v, False), *int_range(node.type), mode)


# -- casts -------------------------------------------------------------------------------
def _cast_call(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    mode = node.params[0] if node.params else "ANSI"
    return _cast(args[0], node.type, mode, env)


def _cast(s: Spec, to: str, mode: str, env: Env) -> Spec:
    src, dst = kind(s.type), kind(to)
    if s.type == to:
        return s
    if src == dst and src in ("integer",):
        return _overflowing(replace(s, type=to), *int_range(to), mode)
    if src == "integer" and to == "double":
        return _monotone(s, to, float)
    if src == "decimal" and to == "double":  # Spark may divide a long by a power of ten: 2 ulps
        out = _monotone(s, to, float)
        return replace(out, lo=None if out.lo is None else math.nextafter(math.nextafter(out.lo, -math.inf), -math.inf),
                       hi=None if out.hi is None else math.nextafter(math.nextafter(out.hi, math.inf), math.inf))
    if src == "integer" and dst == "decimal":
        return _to_decimal(replace(s, lo=_dec(s.lo), hi=_dec(s.hi)), to, mode)
    if src == "decimal" and dst == "decimal":
        return _to_decimal(s, to, mode)
    if src in ("decimal", "float") and dst == "integer":
        lo_t, hi_t = int_range(to)
        if src == "float" and (s.lo is None or s.hi is None) and mode == "LEGACY":
            return anything(to)  # NaN and ±inf cast to 0 and the type's ends
        out = _monotone(s, to, lambda v: int(v))  # truncation toward zero, as Spark
        return _overflowing(_open_ends_fail(out, s, mode), lo_t, hi_t, mode)
    if src == "date" and dst == "timestamp_ntz":
        return _monotone(s, to, lambda d: d * MICROS_PER_DAY)
    if src == "timestamp_ntz" and dst == "date":
        return _monotone(s, to, lambda m: m // MICROS_PER_DAY)
    if src == "date" and dst == "timestamp":
        return _zoned(s, to, env, lambda d, z: _local_to_micros(_day_start(d), z))
    if src == "timestamp" and dst == "date":
        return _zoned(s, to, env, lambda m, z: _date_days(_micros_to_local(m, z)))
    if src == "timestamp" and dst == "timestamp_ntz":
        return _zoned(s, to, env, lambda m, z: _naive_micros(_micros_to_local(m, z)))
    if src == "timestamp_ntz" and dst == "timestamp":
        return _zoned(s, to, env, lambda m, z: _local_to_micros(_from_naive_micros(m), z))
    return anything(to)


def _dec(v: Any) -> Any:
    return None if v is None else decimal.Decimal(v)


def _open_ends_fail(out: Spec, s: Spec, mode: str) -> Spec:
    """A float without one of its bounds may hold NaN or an infinity, which no integer holds."""
    if s.empty or (s.lo is not None and s.hi is not None):
        return out
    return replace(out, fallible=out.fallible or mode == "ANSI", nullable=out.nullable or mode != "ANSI")


_DECIMAL_TYPE = re.compile(r"decimal\((\d+),(\d+)\)$")


def _decimal_shape(to: str) -> tuple[decimal.Decimal, decimal.Decimal] | None:
    """``decimal(p,s)``'s quantum (one unit of the scale) and its largest value (exact: 38 nines and
    more, in ``_WIDE``); None for any other type name."""
    m = _DECIMAL_TYPE.match(to)
    if m is None:
        return None
    precision, scale = int(m.group(1)), int(m.group(2))
    quantum = decimal.Decimal(1).scaleb(-scale)
    return quantum, _WIDE.subtract(decimal.Decimal(1).scaleb(precision - scale), quantum)


def _to_decimal(s: Spec, to: str, mode: str) -> Spec:
    """Rounding half up to the scale is monotone; a value too wide for the precision overflows
    (ANSI: fails; TRY and legacy: NULL)."""
    shape = _decimal_shape(to)
    if shape is None:
        return anything(to)
    quantum, limit = shape
    ctx = decimal.Context(prec=100)
    out = _monotone(s, to, lambda v: v.quantize(quantum, rounding=decimal.ROUND_HALF_UP, context=ctx))
    return _overflowing(out, limit.copy_negate(), limit, mode if mode != "LEGACY" else "TRY")


# -- time zones --------------------------------------------------------------------------
_FIXED = re.compile(r"^(?:UTC|GMT|UT|Z|Etc/UTC|Etc/GMT|Etc/UCT|UCT|Etc/Universal|Universal|Zulu|Etc/Zulu)"
                    r"|(?:(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?)$")


def zone(name: str) -> tuple[dt.tzinfo, bool]:
    """The session time zone and whether it is a fixed offset (no slack needed)."""
    m = _FIXED.fullmatch(name)
    if m is not None:
        if m.group(1) is None:
            return dt.UTC, True
        offset = dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0))
        return dt.timezone(-offset if m.group(1) == "-" else offset), True
    return zoneinfo.ZoneInfo(name), False


def _zoned(s: Spec, to: str, env: Env, f: Callable[[Any, dt.tzinfo], int]) -> Spec:
    z, fixed = zone(env.time_zone)
    out = _monotone(s, to, lambda v: f(v, z))
    if fixed or out.empty:
        return out
    slack = ZONE_SLACK_DAYS if kind(to) == "date" else ZONE_SLACK_MICROS
    return replace(out, lo=None if out.lo is None else out.lo - slack, hi=None if out.hi is None else out.hi + slack)


def _micros_to_local(m: int, z: dt.tzinfo) -> dt.datetime:
    if not _MIN_MICROS + MICROS_PER_DAY <= m <= _MAX_MICROS - MICROS_PER_DAY:
        raise OverflowError("outside years 1 … 9999")
    return (_EPOCH + dt.timedelta(microseconds=m)).astimezone(z).replace(tzinfo=None)


def _local_to_micros(local: dt.datetime, z: dt.tzinfo) -> int:
    delta = local.replace(tzinfo=z) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _naive_micros(local: dt.datetime) -> int:
    return _local_to_micros(local, dt.UTC)


def _from_naive_micros(m: int) -> dt.datetime:
    return _micros_to_local(m, dt.UTC)


def _date_days(local: dt.datetime) -> int:
    return (local.date() - dt.date(1970, 1, 1)).days


def _day_start(days: int) -> dt.datetime:
    return dt.datetime.combine(dt.date(1970, 1, 1) + dt.timedelta(days=days), dt.time())


def _date(days: int) -> dt.date:
    return dt.date(1970, 1, 1) + dt.timedelta(days=days)


# -- date and time functions -------------------------------------------------------------
_TRUNC_UNITS = {"YEAR": "year", "YYYY": "year", "YY": "year", "QUARTER": "quarter", "MONTH": "month",
                "MM": "month", "MON": "month", "WEEK": "week", "DAY": "day", "DD": "day", "HOUR": "hour",
                "MINUTE": "minute", "SECOND": "second", "MILLISECOND": "millisecond",
                "MICROSECOND": "microsecond"}
_EXACT_UNITS = {"microsecond": 1, "millisecond": 1_000, "second": 1_000_000}


def _trunc_local(t: dt.datetime, unit: str) -> dt.datetime:
    if unit == "year":
        return dt.datetime(t.year, 1, 1)
    if unit == "quarter":
        return dt.datetime(t.year, (t.month - 1) // 3 * 3 + 1, 1)
    if unit == "month":
        return dt.datetime(t.year, t.month, 1)
    if unit == "week":
        return dt.datetime.combine(t.date() - dt.timedelta(days=t.weekday()), dt.time())
    if unit == "day":
        return dt.datetime.combine(t.date(), dt.time())
    if unit == "hour":
        return t.replace(minute=0, second=0, microsecond=0)
    return t.replace(second=0, microsecond=0)  # minute


def _date_trunc(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    """``date_trunc(unit, ts)``: non-decreasing in ``ts`` for every unit."""
    unit = _TRUNC_UNITS.get(str(node.params[0]).upper()) if node.params else None
    (s,) = args
    if unit is None or kind(s.type) not in ("timestamp", "timestamp_ntz"):
        return anything(node.type)
    if unit in _EXACT_UNITS:  # no zone involved
        q = _EXACT_UNITS[unit]
        return _monotone(s, node.type, lambda m: m - m % q)
    if s.type == "timestamp_ntz":
        return _monotone(s, node.type, lambda m: _naive_micros(_trunc_local(_from_naive_micros(m), unit)))
    return _zoned(s, node.type, env, lambda m, z: _local_to_micros(_trunc_local(_micros_to_local(m, z), unit), z))


def _trunc_date(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    """``trunc(date, unit)`` for year, quarter, month and week: non-decreasing."""
    unit = _TRUNC_UNITS.get(str(node.params[0]).upper()) if node.params else None
    (s,) = args
    if unit not in ("year", "quarter", "month", "week") or s.type != "date":
        return anything(node.type)
    return _monotone(s, "date", lambda d: _date_days(_trunc_local(_day_start(d), unit)))


def _date_add(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    """``date_add(d, n)`` / ``date_sub(d, n)``: non-decreasing in ``d``, monotone in ``n``."""
    d, n = args
    if d.type != "date" or kind(n.type) != "integer":
        return anything(node.type)
    sign = 1 if node.fn == "date_add" else -1
    if d.empty or n.empty:
        return Spec("date", d.nullable or n.nullable, d.fallible or n.fallible, empty=True)
    lo_n, hi_n = (n.lo, n.hi) if sign > 0 else (None if n.hi is None else -n.hi, None if n.lo is None else -n.lo)
    lo = None if d.lo is None or lo_n is None else d.lo + lo_n
    hi = None if d.hi is None or hi_n is None else d.hi + hi_n
    out = Spec("date", d.nullable or n.nullable, d.fallible or n.fallible, lo=lo, hi=hi)
    return _overflowing(out, -(1 << 31), (1 << 31) - 1, "ANSI")


def _time_add(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    """``ts + interval`` for a day-time interval literal: local time plus the interval
    (Spark adds days in the session zone), so exact in a fixed-offset zone, else with slack."""
    s, iv = args
    if kind(s.type) not in ("timestamp", "timestamp_ntz") or kind(iv.type) != "daytime" \
            or not isinstance(node.args[1], ex.Lit) or iv.empty:
        return anything(node.type)
    add = iv.lo
    if s.type == "timestamp_ntz":
        out = _monotone(s, node.type, lambda m: m + add)
    else:
        out = _zoned(s, node.type, env, lambda m, z: m + add)
    return _overflowing(out, _MIN_MICROS, _MAX_MICROS, "ANSI")


def _plus_months(t: dt.datetime, months: int) -> dt.datetime:
    """Java's ``plusMonths``: the day of month clamped to the new month's length."""
    year, month = divmod(t.year * 12 + t.month - 1 + months, 12)
    return t.replace(year=year, month=month + 1, day=min(t.day, calendar.monthrange(year, month + 1)[1]))


def _add_months(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    """``ts ± INTERVAL n MONTH`` (a year-month interval literal) and ``add_months(date, n)``:
    local date-time plus months, the day clamped; non-decreasing in the timestamp or date."""
    s, n = args
    if not isinstance(node.args[1], ex.Lit) or n.empty or s.type not in ("timestamp", "timestamp_ntz", "date"):
        return anything(node.type)
    months = n.lo
    if s.type == "date":
        out = _monotone(s, "date", lambda d: _date_days(_plus_months(_day_start(d), months)))
    elif s.type == "timestamp_ntz":
        out = _monotone(s, node.type, lambda m: _naive_micros(_plus_months(_from_naive_micros(m), months)))
    else:
        out = _zoned(s, node.type, env, lambda m, z: _local_to_micros(_plus_months(_micros_to_local(m, z), months), z))
    return out if s.lo is not None and s.hi is not None else replace(out, fallible=True)


def _year(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    (s,) = args
    if s.type != "date":
        return anything(node.type)
    return _monotone(s, node.type, lambda d: _date(d).year)


def _piecewise(node: ex.Call, s: Spec, period: Callable[[dt.date], Any], field: Callable[[dt.date], int],
               full: tuple[int, int]) -> Spec:
    """A date field non-decreasing within one ``period`` of the dates; across periods it is ``full``."""
    if s.type != "date":
        return anything(node.type)
    if s.empty:
        return Spec(node.type, s.nullable, s.fallible, empty=True)
    if s.lo is None or s.hi is None or period(_date(s.lo)) != period(_date(s.hi)):
        return Spec(node.type, s.nullable, s.fallible, lo=full[0], hi=full[1])
    return Spec(node.type, s.nullable, s.fallible, lo=field(_date(s.lo)), hi=field(_date(s.hi)))


def _month(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    """Piecewise: within one year month is non-decreasing; across years it is 1 … 12."""
    (s,) = args
    return _piecewise(node, s, lambda d: d.year, lambda d: d.month, (1, 12))


def _day(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    """Piecewise: within one month day is non-decreasing; across months it is 1 … 31."""
    (s,) = args
    return _piecewise(node, s, lambda d: d.replace(day=1), lambda d: d.day, (1, 31))


def _unix_timestamp(node: ex.Call, args: list[Spec], env: Env) -> Spec:
    """``unix_timestamp(ts)`` of a timestamp: seconds, non-decreasing (rounded down at the lower
    end and toward zero at the upper, so Java's division toward zero and a floor are both inside)."""
    s = args[0]
    if s.type != "timestamp":
        return anything(node.type)
    out = _monotone(s, node.type, lambda m: m // 1_000_000)
    if out.hi is None:
        return out
    return replace(out, hi=-((-s.hi) // 1_000_000) if s.hi < 0 else s.hi // 1_000_000)


FUNCTIONS: dict[str, Callable[[ex.Call, list[Spec], Env], Spec]] = {
    "and": _and, "or": _or, "not": _not, "isnull": _isnull, "isnotnull": _isnotnull,
    "eq": _comparison, "lt": _comparison, "le": _comparison, "gt": _comparison, "ge": _comparison,
    "eqns": _comparison, "in": _in, "coalesce": _coalesce,
    "add": _arith, "sub": _arith, "mul": _arith, "div": _arith, "idiv": _integral_div, "neg": _negate, "cast": _cast_call,
    "date_trunc": _date_trunc, "trunc": _trunc_date, "date_add": _date_add, "date_sub": _date_add,
    "time_add": _time_add, "add_months": _add_months, "year": _year, "month": _month, "day": _day, "unix_timestamp": _unix_timestamp,
}
"""The annotated functions; any other ``Call`` may return anything."""


# -- JSON paths (``table.stats.jsonstats``) -------------------------------------------------------------
_JSON_PATH = re.compile(r"\$((?:\.[A-Za-z0-9_]+)+)")
"""The JSONPath forms read from statistics (an allow-list): ``$.key.key...`` with plain keys.
Anything else (``$``, ``$['a']``, ``$.a[0]``, ``$.*``) gives "anything"."""


def json_path(text: Any) -> tuple[str, ...] | None:
    """``$.a.b`` as ``("a", "b")``; None for any other path."""
    m = _JSON_PATH.fullmatch(text) if isinstance(text, str) else None
    return None if m is None else tuple(m.group(1)[1:].split("."))


def json_spec(node: ex.Call, stats: PartStats) -> Spec | None:
    """The Spec of ``get_json_object(col, '$.a.b')``, of its cast to a number and of
    ``from_json(col, schema).a.b``, from the column's JSON statistics; None for any other call."""
    if node.fn == "from_json_field":
        try:
            path = tuple(node.params) if all(isinstance(k, str) for k in node.params) else None
            return _json_field(_json_values(node.args[0] if len(node.args) == 1 else None, path, stats), node.type)
        except (ArithmeticError, ValueError, TypeError, KeyError, AttributeError):
            return anything(node.type)
    if node.fn == "get_json_object":
        inner, cast = node, None
    elif node.fn == "cast" and len(node.args) == 1 and isinstance(node.args[0], ex.Call) \
            and node.args[0].fn == "get_json_object":
        inner, cast = node.args[0], node
    else:
        return None
    try:
        col = inner.args[0] if len(inner.args) == 1 else None
        found = _json_values(col, json_path(inner.params[0]) if len(inner.params) == 1 else None, stats)
        return _json_text(found) if cast is None else _json_number(found, cast)
    except (ArithmeticError, ValueError, TypeError, KeyError, AttributeError):
        return anything(node.type)


_Found = tuple[str, Any, bool]
"""What a JSON path holds in a part: ("none", None, nullable): no value at all (every row NULL);
("unknown", None, True); ("entry", the path's statistics, whether some row gives NULL)."""


def _json_values(col: ex.Node | None, path: tuple[str, ...] | None, stats: PartStats,
                 variant: bool = False) -> _Found:
    """Which values the key ``path`` of the ``json`` column ``col`` holds in the part (Spark: NULL
    for a NULL or invalid document, a missing key, and a JSON ``null``; an array on the way finds
    no key). ``variant``: of a ``variant`` column, whose statistics are marked ``"variant": true``
    (a JSON read never uses those, a variant read uses only those)."""
    if not isinstance(col, ex.Col) or not path:
        return "unknown", None, True
    if stats.rows == 0:
        return "none", None, False
    cs = stats.columns.get(col.column_id)
    if cs is None or not isinstance(cs.nulls, int):
        return "unknown", None, True
    if cs.nulls >= stats.rows:
        return "none", None, True
    js = cs.json
    if js is None or (js.get("variant") is True) != variant or len(path) > jsonstats.DEPTH or js.get("invalid") != 0 \
            or js.get("docs") != stats.rows - cs.nulls:
        return "unknown", None, True
    entry = next((e for e in js.get("paths", ()) if tuple(e.get("path", ())) == path), None)
    if entry is None:
        return ("none", None, True) if js.get("complete") is True else ("unknown", None, True)
    present, nulls = entry.get("present"), entry.get("null", 0)
    if not isinstance(present, int) or not isinstance(nulls, int):
        return "unknown", None, True
    return "entry", entry, cs.nulls > 0 or present < js["docs"] or nulls > 0


def _json_text(found: _Found) -> Spec:
    """``get_json_object``'s string: a string value's text; ``true``/``false``; a number's text
    only when every value is a non-negative integer below 2^53 of one length (then text order is
    numeric order); anything else (objects, arrays, mixed kinds, fractions): any string."""
    state, entry, nullable = found
    if state != "entry":
        return Spec("string", nullable=nullable, empty=state == "none")
    kinds = jsonstats.kinds(entry)
    if not kinds:
        return Spec("string", nullable=True, empty=True)
    if kinds == {"string"}:
        s = entry["string"]
        lo, hi = s.get("min"), s.get("max")
        return Spec("string", nullable, lo=lo if isinstance(lo, str) else None, hi=hi if isinstance(hi, str) else None)
    if kinds == {"boolean"}:
        b = entry["boolean"]
        return Spec("string", nullable, lo="false" if b.get("min") is not True else "true",
                    hi="true" if b.get("max") is not False else "false")
    if kinds == {"number"}:
        n = entry["number"]
        lo, hi = n.get("min"), n.get("max")
        if n.get("integers") == n.get("count") and isinstance(lo, int | float) and isinstance(hi, int | float) \
                and 0 <= lo <= hi < 2**53 and lo == int(lo) and hi == int(hi) \
                and len(str(int(lo))) == len(str(int(hi))):
            return Spec("string", nullable, lo=str(int(lo)), hi=str(int(hi)))
    return Spec("string", nullable=True)


def _json_number(found: _Found, cast: ex.Call) -> Spec:
    """``CAST(get_json_object(...) AS BIGINT | INT | SMALLINT | TINYINT | DOUBLE)``: from the number
    bounds when the path holds numbers only. Integer tokens cast exactly (overflow as any cast);
    a fraction's text may be ``1.0E20``, which no integer cast reads (ANSI: fails; TRY: NULL)."""
    to = cast.type
    mode = cast.params[0] if cast.params else "ANSI"
    if kind(to) not in ("integer", "float") or to == "float":
        return anything(to)
    state, entry, nullable = found
    if state == "none":
        return Spec(to, nullable=True, empty=True)
    if state != "entry":
        return anything(to)
    kinds = jsonstats.kinds(entry)
    if not kinds:
        return Spec(to, nullable=True, empty=True)
    if kinds != {"number"}:
        return anything(to)
    n = entry["number"]
    lo, hi = (_finite(n.get(k)) for k in ("min", "max"))
    if to == "double":
        return anything(to) if lo is None or hi is None else Spec(to, nullable, lo=lo, hi=hi)
    if n.get("integers") == n.get("count"):
        out = Spec(to, nullable, lo=None if lo is None else math.ceil(lo), hi=None if hi is None else math.floor(hi))
    else:
        out = Spec(to, nullable or mode != "ANSI", mode == "ANSI",
                   lo=None if lo is None else math.floor(lo), hi=None if hi is None else math.ceil(hi))
    return _overflowing(out, *int_range(to), mode)


def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


_FIELD_INTS = {"bigint": int_range("bigint"), "int": int_range("int")}


def _json_field(found: _Found, to: str) -> Spec:
    """``from_json(col, schema).a.b`` (no options: PERMISSIVE, never an error): a value that does
    not convert to the field's type (another kind, a fraction or an overflow for an integer
    field, a document that is no object) gives NULL, so NULL is always possible. ``string``
    fields of string values: the string bounds; ``bigint`` and ``int`` fields of numbers: the
    integers within the number bounds and the type; ``double``: the number bounds."""
    state, entry, _ = found
    if state == "none":
        return Spec(to, nullable=True, empty=True)
    kinds = jsonstats.kinds(entry) if state == "entry" else {"unknown"}
    if not kinds:
        return Spec(to, nullable=True, empty=True)
    if to == "string" and kinds == {"string"}:
        s = entry["string"]
        lo, hi = s.get("min"), s.get("max")
        return Spec(to, nullable=True, lo=lo if isinstance(lo, str) else None, hi=hi if isinstance(hi, str) else None)
    if kinds == {"number"} and (to in _FIELD_INTS or to == "double"):
        n = entry["number"]
        lo, hi = (_finite(n.get(k)) for k in ("min", "max"))
        if to == "double":
            return Spec(to, nullable=True, lo=lo, hi=hi)
        t_lo, t_hi = _FIELD_INTS[to]
        i_lo = t_lo if lo is None else max(math.ceil(lo), t_lo)
        i_hi = t_hi if hi is None else min(math.floor(hi), t_hi)
        return Spec(to, nullable=True, empty=True) if i_lo > i_hi else Spec(to, nullable=True, lo=i_lo, hi=i_hi)
    return Spec(to, nullable=True)


# -- variant paths (``variant_get``, ``try_variant_get``, ``v:a.b::type``) ---------------------------
VARIANT_KINDS = ("null", "object", "array", "boolean", "string", "number", "date", "timestamp",
                 "timestamp_ntz", "other")
"""The kinds of a variant path's statistics entry; an entry with any other key reads as anything."""
_ENTRY_KEYS = frozenset(VARIANT_KINDS) | {"path", "present"}
_SAME_KIND = ("string", "boolean", "date", "timestamp", "timestamp_ntz")


def variant_spec(node: ex.Call, stats: PartStats) -> Spec | None:
    """The Spec of ``variant_get(col, '$.a.b', type)`` / ``try_variant_get`` (a ``variant_get``
    call, parameters: the path and ``ANSI`` or ``TRY``) and of a cast of ``col:a.b`` (a
    ``variant_get`` of type ``variant``) from the column's variant statistics; None for any
    other call. A cast of a variant fails unless it is ``try_cast``, ANSI on or off."""
    if node.fn == "variant_get":
        inner, to, mode = node, node.type, node.params[1] if len(node.params) == 2 else "ANSI"
    elif node.fn == "cast" and len(node.args) == 1 and isinstance(node.args[0], ex.Call) \
            and node.args[0].fn == "variant_get" and node.args[0].type == "variant":
        inner, to, mode = node.args[0], node.type, "TRY" if node.params[:1] == ("TRY",) else "ANSI"
    else:
        return None
    try:
        col = inner.args[0] if len(inner.args) == 1 else None
        path = json_path(inner.params[0]) if inner.params else None
        state, entry, nullable = _json_values(col, path, stats, variant=True)
        if inner is node and to == "variant":  # ``v:a`` itself: only IS [NOT] NULL reads it
            return Spec(to, nullable=True, empty=state == "none")
        if state == "none":
            return Spec(to, nullable=True, empty=True)
        if state != "entry":
            return anything(to) if mode == "ANSI" else Spec(to, nullable=True)
        return variant_cast(entry, nullable, to, mode)
    except (ArithmeticError, ValueError, TypeError, KeyError, AttributeError):
        return anything(node.type)


def _variant_kinds(entry: dict[str, Any]) -> set[str] | None:
    """The kinds of non-null values a variant path holds; None when the entry has a key not known here."""
    if not set(entry) <= _ENTRY_KEYS:
        return None
    out = set()
    for k in VARIANT_KINDS[1:]:
        v = entry.get(k)
        count = v.get("count") if isinstance(v, dict) else v
        if count is None:
            continue
        if not isinstance(count, int) or isinstance(count, bool):
            return None
        if count:
            out.add(k)
    return out


def variant_cast(entry: dict[str, Any], nullable: bool, to: str, mode: str) -> Spec:
    """The values a variant path's entry gives cast to ``to`` (Spark's variant cast; ``mode``
    ``ANSI``: a value that does not convert fails, ``TRY``: NULL). ``nullable``: some row gives
    SQL NULL (a NULL document, a missing path, a variant null). Exact for: a path of one kind
    read as that kind (string, boolean, date, timestamp, timestamp_ntz: the kind's bounds);
    numbers read as bigint/int/smallint/tinyint (truncated toward zero; NaN, infinities and
    overflow do not convert), as double (NaN above every number) and as decimal(p,s) (rounded
    half up; too wide does not convert); anything read as a string never fails. Otherwise
    anything (mixed kinds, strings parsed as numbers or dates, dates and timestamps across time
    zones, kinds this module does not know)."""
    kinds = _variant_kinds(entry)
    if kinds is None:
        return anything(to) if mode == "ANSI" else Spec(to, nullable=True)
    if not kinds:
        return Spec(to, nullable=True, empty=True)
    k = kind(to)
    if kinds == {"number"} and k in ("integer", "float", "decimal") and to != "float":
        return _variant_number(entry["number"], nullable, to, mode)
    if len(kinds) == 1 and to in _SAME_KIND and kinds == {to}:
        b = entry[to]
        return Spec(to, nullable, lo=_bound(b.get("min"), to), hi=_bound(b.get("max"), to))
    if to == "string" and "other" not in kinds:
        return Spec(to, nullable=True)  # numbers, booleans, dates, objects ... have a text: no failure
    return anything(to) if mode == "ANSI" else Spec(to, nullable=True)


def _variant_number(n: dict[str, Any], nullable: bool, to: str, mode: str) -> Spec:
    lo, hi = (_finite(n.get(key)) for key in ("min", "max"))
    nan = n.get("nan", 0)
    if not isinstance(nan, int) or isinstance(nan, bool):
        return anything(to)
    if to == "double":  # int64 and decimals round to the nearest double: 2 ulps of slack for decimals
        if n.get("integers") != n.get("count"):
            lo = None if lo is None else math.nextafter(math.nextafter(lo, -math.inf), -math.inf)
            hi = None if hi is None else math.nextafter(math.nextafter(hi, math.inf), math.inf)
        return Spec(to, nullable, lo=lo, hi=None if nan else hi)
    # NaN or an infinity (an open side) converts to no integer and no decimal
    unconvertible = nan > 0 or lo is None or hi is None
    out = replace(Spec(to, nullable), fallible=unconvertible and mode == "ANSI",
                  nullable=nullable or (unconvertible and mode != "ANSI"))
    if kind(to) == "integer":
        if n.get("integers") == n.get("count"):
            out = replace(out, lo=None if lo is None else math.ceil(lo), hi=None if hi is None else math.floor(hi))
        else:  # truncation toward zero lies within floor(lo) … ceil(hi)
            out = replace(out, lo=None if lo is None else math.floor(lo), hi=None if hi is None else math.ceil(hi))
        return _overflowing(out, *int_range(to), mode)
    shape = _decimal_shape(to)
    if shape is None:
        return anything(to)
    quantum, limit = shape
    ctx = decimal.Context(prec=400)

    def outward(v: float | None, toward: float, rounding: str) -> decimal.Decimal | None:
        # a double's decimal form may stray half an ulp from it: one ulp outward, then to the scale
        return None if v is None else decimal.Decimal(math.nextafter(v, toward)).quantize(quantum, rounding, ctx)

    out = replace(out, lo=outward(lo, -math.inf, decimal.ROUND_FLOOR), hi=outward(hi, math.inf, decimal.ROUND_CEILING))
    return _overflowing(out, limit.copy_negate(), limit, mode)
