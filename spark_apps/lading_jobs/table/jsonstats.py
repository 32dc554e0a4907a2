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
  (``stats.truncate_lower`` / ``truncate_upper``; flags ``minTruncated`` /
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

Parsing is per value (Python's ``json``, exact: integers as ints, fractions as
``Decimal``): pyarrow has no JSON function that keeps mixed types per key. So it is
bounded: a row group's values beyond ``MAX_TEXT_BYTES`` of text are not parsed and
the column's JSON statistics of that part are dropped ("anything"); paths beyond
``MAX_PATHS`` are not tracked (``complete`` false).

Size: the JSON form of a column's statistics is kept within ``BUDGET_BYTES`` by
``trim`` (the seed's heuristics): first paths no filter can use (mixed kinds, or only
objects and arrays), then string bounds shortened to ``TRIM_STRING_LENGTH``
characters, then the widest paths (deepest first on a tie). Whatever is trimmed
reads as "anything".
"""

from __future__ import annotations

import collections
import decimal
import json
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

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
_SURROGATE_ESCAPE = r"\\u[dD][89abAB]"
_MAX_FLOAT = 1.7976931348623157e308


class _Invalid(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Invalid("duplicate key")
    return out


def _constant(name: str) -> Any:
    raise _Invalid(name)


_DECODER = json.JSONDecoder(parse_float=decimal.Decimal, parse_constant=_constant, object_pairs_hook=_pairs)
"""Exact numbers (integers as ints, fractions as ``Decimal``), no ``NaN``/``Infinity``, no duplicate keys."""


def _entry(path: tuple[str, ...], values: list[Any]) -> dict[str, Any]:
    """A path's statistics from the values it holds (the kinds counted by ``type`` in C; bounds by
    ``min``/``max`` over each kind's values)."""
    from lading_jobs.table import stats as stx

    counts = collections.Counter(map(type, values))
    out: dict[str, Any] = {"path": list(path), "present": len(values)}
    for name, t in (("null", type(None)), ("object", dict), ("array", list)):
        if counts[t]:
            out[name] = counts[t]

    def of(*types: type) -> list[Any]:
        return values if sum(counts[t] for t in types) == len(values) else [v for v in values if type(v) in types]

    if counts[str]:
        strings = of(str)
        lo, lo_t = stx.truncate_lower(min(strings))
        hi, hi_t = stx.truncate_upper(max(strings))
        out["string"] = _bounds(counts[str], lo, hi, lo_t, hi_t)
    numbers = counts[int] + counts[decimal.Decimal]
    if numbers:
        found = of(int, decimal.Decimal)
        out["number"] = {"count": numbers, "integers": counts[int]}
        n_lo, n_hi = float_below(min(found)), float_above(max(found))
        if n_lo is not None:
            out["number"]["min"] = n_lo
        if n_hi is not None:
            out["number"]["max"] = n_hi
    if counts[bool]:
        flags = of(bool)
        out["boolean"] = {"count": counts[bool], "min": min(flags), "max": max(flags)}
    return out


def _bounds(count: int, lo: Any, hi: Any, lo_t: bool, hi_t: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"count": count, "min": lo}
    if hi is not None:
        out["max"] = hi
    if lo_t:
        out["minTruncated"] = True
    if hi_t:
        out["maxTruncated"] = True
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


def summarize(values: pa.Array | pa.ChunkedArray) -> dict[str, Any] | None:
    """The JSON statistics of one row group's values of a ``json`` column (not trimmed;
    ``None`` when its text is beyond ``MAX_TEXT_BYTES``: nothing is known). The values may come
    as a dictionary array (a streamed bin-pack hands string columns over that way)."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    present = pc.drop_null(values)
    if len(present) and pc.sum(pc.binary_length(present)).as_py() > MAX_TEXT_BYTES:
        return None
    suspicious = pc.match_substring_regex(present, _SURROGATE_ESCAPE) if len(present) else None
    paths: dict[tuple[str, ...], list[Any]] = {}
    docs = invalid = 0
    complete = True
    texts = present.to_pylist()
    flags = suspicious.to_pylist() if suspicious is not None else []
    for text, flag in zip(texts, flags, strict=True):
        if flag:
            invalid += 1
            continue
        try:
            doc = _DECODER.decode(text)
        except (ValueError, RecursionError, _Invalid):
            invalid += 1
            continue
        docs += 1
        if type(doc) is dict:
            complete = _walk(doc, (), paths) and complete
    return {"docs": docs, "invalid": invalid, "complete": complete,
            "paths": [_entry(k, v) for k, v in sorted(paths.items())]}


def _walk(obj: dict[str, Any], prefix: tuple[str, ...], paths: dict[tuple[str, ...], list[Any]]) -> bool:
    """Collect ``obj``'s values under ``prefix`` + key; False when some path was not recorded."""
    complete = True
    for key, value in obj.items():
        path = (*prefix, key)
        found = paths.get(path)
        if found is None:
            if len(paths) >= MAX_PATHS:
                complete = False
                continue
            found = paths[path] = []
        found.append(value)
        if type(value) is dict and value and len(path) < DEPTH:
            complete = _walk(value, path, paths) and complete
    return complete


# -- merging and trimming ------------------------------------------------------------------------
def merge(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """The statistics of two row groups' (or parts') values together: counts add, bounds widen; a
    path one side lacks is in none of its documents when that side is ``complete``, else unknown."""
    if a is None or b is None:
        return None
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
    return {"docs": int(a.get("docs", 0)) + int(b.get("docs", 0)),
            "invalid": int(a.get("invalid", 0)) + int(b.get("invalid", 0)), "complete": complete, "paths": out}


def _merge_entry(x: dict[str, Any], y: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"path": x["path"], "present": int(x.get("present", 0)) + int(y.get("present", 0))}
    for k in ("null", "object", "array"):
        n = int(x.get(k, 0)) + int(y.get(k, 0))
        if n:
            out[k] = n
    for k in ("string", "number", "boolean"):
        p, q = x.get(k), y.get(k)
        if p is None or q is None:
            one = p if p is not None else q
            if one is not None:
                out[k] = dict(one)
            continue
        m: dict[str, Any] = {"count": int(p.get("count", 0)) + int(q.get("count", 0))}
        if k == "number":
            m["integers"] = int(p.get("integers", 0)) + int(q.get("integers", 0))
        for end, pick, flag in (("min", min, "minTruncated"), ("max", max, "maxTruncated")):
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
    return out | {k for k in ("string", "number", "boolean") if entry.get(k, {}).get("count")}


def _usable(entry: dict[str, Any]) -> bool:
    """Whether a filter can use a path's bounds: one scalar kind (or none, all ``null``)."""
    k = kinds(entry)
    return len(k) == 0 or (len(k) == 1 and not k & {"object", "array"})


def _shorten(entry: dict[str, Any]) -> dict[str, Any]:
    from lading_jobs.table import stats as stx

    s = entry.get("string")
    if s is None or "min" not in s:
        return entry
    lo, lo_t = stx.truncate_lower(s["min"], TRIM_STRING_LENGTH)
    out = dict(s, min=lo)
    if lo_t:
        out["minTruncated"] = True
    if "max" in s:
        hi, hi_t = stx.truncate_upper(s["max"], TRIM_STRING_LENGTH)
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
