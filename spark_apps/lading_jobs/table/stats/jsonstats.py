"""Statistics of ``json`` columns per key path (seed 004): what reads use to skip parts.

A ``json`` column holds JSON text. Its plain string bounds say little about
``get_json_object(payload, '$.ts') > '2026-11'``, so a part also records, per key
path of the objects in the column (``["ts"]``, ``["user", "id"]``: nested objects
down to ``DEPTH`` keys), how often the path holds each kind of value and the bounds
of each kind (*type-split* bounds):

- ``present``: documents holding the path (any value, JSON ``null`` included);
  documents that lack it are ``docs - present``;
- ``null``, ``object``, ``array``: counts (arrays are not descended into: a path
  through an array is not a key path, and ``get_json_object`` finds no key there);
- ``string``: count and bounds, truncated as other string statistics
  (``bounds.truncate_lower`` / ``truncate_upper``; flags ``minTruncated`` /
  ``maxTruncated``);
- ``number``: count, how many were integer tokens (no fraction, no exponent), and
  float64 bounds rounded *outward* from the exact values (integers beyond 2^53 and
  decimal fractions never tighten a bound; a bound beyond float64's range is left
  out, as with ``inf``);
- ``boolean``: count and bounds.

Per column: ``docs`` (non-NULL values that parse), ``invalid`` (non-NULL values
that do not: not strict RFC 8259 JSON, ``NaN``/``Infinity``, a duplicate key, a
``\\uD800``-``\\uDFFF`` escape; readers then know nothing of any path, because
Spark's parser is more lenient), ``complete`` (every path up to ``DEPTH`` keys is
listed: a path not listed is in no document; false once trimmed or past
``MAX_PATHS``) and ``paths``.

Computing them (``table.stats.jsonengine``) takes no Python per document: pyarrow's JSON
reader over the whole column where it can, DuckDB otherwise, giving what the reference
walk with Python's ``json`` gives (exact: integers as ints, fractions as ``Decimal``;
kept in ``tests/support/jsonstats_oracle.py``); a column holding a number token DuckDB
would not give back as written gets none ("anything"). It is bounded: a row group's
values beyond ``MAX_TEXT_BYTES`` of text are not parsed and the column's JSON
statistics of that part are dropped ("anything"); paths beyond ``MAX_PATHS`` are not
tracked (``complete`` false).

Size: the JSON form of a column's statistics is kept within ``BUDGET_BYTES`` by
``trim`` (the seed's heuristics): first paths no filter can use (mixed kinds, or only
objects and arrays), then string bounds shortened to ``TRIM_STRING_LENGTH``
characters, then the widest paths (deepest first on a tie). Whatever is trimmed
reads as "anything".

``variant`` columns keep statistics of this form too (``table.stats.variantstats``), marked
``"variant": true`` with kinds of their own (``VARIANT_KINDS``: ``date``, ``timestamp``,
``timestamp_ntz`` bounds, never shortened, only dropped with their path; ``other``, no
bounds) and a ``nan`` count among numbers; ``merge`` and ``trim`` keep the mark, and a
merge of a marked and an unmarked side knows nothing.
"""

from __future__ import annotations

import decimal
import json
import math
from typing import Any

import pyarrow as pa

from lading_jobs.table.stats.bounds import truncate_lower, truncate_upper

LADING_TYPE = b"lading.type"
"""The field metadata key of lading's logical types (``formats.types.LADING_TYPE``, which imports Spark)."""
DEPTH = 4
"""Key paths of at most this many keys are recorded (``$.a.b.c.d``)."""
MAX_PATHS = 256
"""Paths tracked per column while a part is written (memory stays bounded)."""
BUDGET_BYTES = 4096
"""The JSON form of one column's JSON statistics is at most this long."""
TRIM_STRING_LENGTH = 16
MAX_TEXT_BYTES = 256 * 1024**2
"""JSON text parsed per column and row group; beyond it the column has no JSON statistics."""
KINDS = ("null", "string", "number", "boolean", "object", "array")
VARIANT_KINDS = ("date", "timestamp", "timestamp_ntz", "other")
"""The kinds only a ``variant`` column's statistics have (``table.stats.variantstats``); ``other`` counts only."""
_SURROGATE_ESCAPE = r"\\u[dD][89abAB]"
_MAX_FLOAT = 1.7976931348623157e308


def _bounds(count: int, lo: Any, hi: Any, lo_t: bool, hi_t: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"count": count, "min": lo}
    if hi is not None:
        out["max"] = hi
    if lo_t:
        out["minTruncated"] = True
    if hi_t:
        out["maxTruncated"] = True
    return out


def scalar_entry(path: tuple[str, ...], present: int, nulls: int, objects: int, arrays: int,
                 strings: int, s_min: Any, s_max: Any) -> dict[str, Any]:
    """A path's entry with its counts of ``null``/``object``/``array`` and its string bounds
    (truncated as other string statistics); the engines add the other kinds."""
    out: dict[str, Any] = {"path": list(path), "present": int(present)}
    for name, n in (("null", nulls), ("object", objects), ("array", arrays)):
        if n:
            out[name] = int(n)
    if strings:
        lo, lo_t = truncate_lower(s_min)
        hi, hi_t = truncate_upper(s_max)
        out["string"] = _bounds(int(strings), lo, hi, lo_t, hi_t)
    return out


def float_below(x: int | decimal.Decimal) -> float | None:
    """The greatest float64 ≤ ``x`` (exact), or None when ``x`` is below every finite float."""
    f = _to_float(x)
    if f == -math.inf:
        return None
    if f == math.inf:
        return _MAX_FLOAT
    return math.nextafter(f, -math.inf) if decimal.Decimal(f) > x else f


def float_above(x: int | decimal.Decimal) -> float | None:
    """The least float64 ≥ ``x`` (exact), or None when ``x`` is above every finite float."""
    f = _to_float(x)
    if f == math.inf:
        return None
    if f == -math.inf:
        return -_MAX_FLOAT
    return math.nextafter(f, math.inf) if decimal.Decimal(f) < x else f


def _to_float(x: int | decimal.Decimal) -> float:
    try:
        return float(x)
    except OverflowError:  # an int beyond float64's range
        return math.inf if x > 0 else -math.inf


def merge(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """The statistics of two row groups' (or parts') values together: counts add, bounds widen; a
    path one side lacks is in none of its documents when that side is ``complete``, else unknown."""
    if a is None or b is None or bool(a.get("variant")) != bool(b.get("variant")):
        return None  # a ``variant`` column's statistics (``table.stats.variantstats``) never mix with a ``json`` one's
    ea = {tuple(e["path"]): e for e in a.get("paths", [])}
    eb = {tuple(e["path"]): e for e in b.get("paths", [])}
    complete = bool(a.get("complete")) and bool(b.get("complete"))
    out = []
    for path in sorted(set(ea) | set(eb)):
        x, y = ea.get(path), eb.get(path)
        if x is None or y is None:
            if not (a.get("complete") if x is None else b.get("complete")):
                complete = False
                continue
            out.append(x if y is None else y)
            continue
        out.append(_merge_entry(x, y))
    merged = {"docs": int(a.get("docs", 0)) + int(b.get("docs", 0)),
              "invalid": int(a.get("invalid", 0)) + int(b.get("invalid", 0)), "complete": complete, "paths": out}
    return dict(merged, variant=True) if a.get("variant") else merged


def _merge_entry(x: dict[str, Any], y: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"path": x["path"], "present": int(x.get("present", 0)) + int(y.get("present", 0))}
    for k in ("null", "object", "array"):
        n = int(x.get(k, 0)) + int(y.get(k, 0))
        if n:
            out[k] = n
    for k in ("string", "number", "boolean", *VARIANT_KINDS):
        p, q = x.get(k), y.get(k)
        if p is None or q is None:
            one = p if p is not None else q
            if one is not None:
                out[k] = dict(one)
            continue
        m: dict[str, Any] = {"count": int(p.get("count", 0)) + int(q.get("count", 0))}
        if k == "number":
            m["integers"] = int(p.get("integers", 0)) + int(q.get("integers", 0))
            if p.get("nan") or q.get("nan"):
                m["nan"] = int(p.get("nan", 0)) + int(q.get("nan", 0))
        for end, pick, flag in (("min", min, "minTruncated"), ("max", max, "maxTruncated")):
            if end == "min" and k == "number" and (p.get("nan") == p["count"] or q.get("nan") == q["count"]):
                if end in p or end in q:  # a side of NaNs only has no least number: the other side's is
                    m[end] = p.get(end, q.get(end))
                continue
            if end in p and end in q:
                chosen = pick(p[end], q[end])
                m[end] = chosen
                if (chosen == p[end] and p.get(flag)) or (chosen == q[end] and q.get(flag)):
                    m[flag] = True
        out[k] = m
    return out


def _size(obj: Any) -> int:
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode())


def kinds(entry: dict[str, Any]) -> set[str]:
    """The kinds of non-null values a path holds."""
    out = {k for k in ("object", "array") if entry.get(k)}
    return out | {k for k in ("string", "number", "boolean", *VARIANT_KINDS) if entry.get(k, {}).get("count")}


def _usable(entry: dict[str, Any]) -> bool:
    """Whether a filter can use a path's bounds: one scalar kind (or none, all ``null``); ``other``
    (a variant's binary, uuid, ...) has no bounds."""
    k = kinds(entry)
    return len(k) == 0 or (len(k) == 1 and not k & {"object", "array", "other"})


def _shorten(entry: dict[str, Any]) -> dict[str, Any]:
    s = entry.get("string")
    if s is None or "min" not in s:
        return entry
    lo, lo_t = truncate_lower(s["min"], TRIM_STRING_LENGTH)
    out = dict(s, min=lo)
    if lo_t:
        out["minTruncated"] = True
    if "max" in s:
        hi, hi_t = truncate_upper(s["max"], TRIM_STRING_LENGTH)
        if hi is None:
            out.pop("max")
        else:
            out["max"] = hi
        if hi_t:
            out["maxTruncated"] = True
    return dict(entry, string=out)


def trim(stats: dict[str, Any], budget: int = BUDGET_BYTES) -> dict[str, Any]:
    """``stats`` within ``budget`` bytes of JSON (the seed's heuristics, see the module doc)."""
    if _size(stats) <= budget:
        return stats
    paths = [e for e in stats["paths"] if _usable(e)]
    out = dict(stats, complete=bool(stats.get("complete")) and len(paths) == len(stats["paths"]), paths=paths)
    if _size(out) <= budget:
        return out
    paths = [_shorten(e) for e in paths]
    out["paths"] = paths
    sizes = [_size(e) for e in paths]
    widest = sorted(range(len(paths)), key=lambda i: (sizes[i], len(paths[i]["path"]), i), reverse=True)
    dropped: set[int] = set()
    total = _size(out)
    for i in widest:
        if total <= budget:
            break
        dropped.add(i)
        total -= sizes[i] + 1  # its text and a comma (one byte too many for the last: checked below)
    out = dict(out, complete=False, paths=[e for j, e in enumerate(paths) if j not in dropped])
    while _size(out) > budget and out["paths"]:
        out["paths"] = out["paths"][:-1]
    return out


def is_json_field(field: pa.Field) -> bool:
    """Whether an Arrow field of a part is a ``json`` column (its ``lading.type``)."""
    meta = field.metadata or {}
    return meta.get(LADING_TYPE) == b"json" and (pa.types.is_string(field.type)
                                                       or pa.types.is_large_string(field.type))
