"""The reference variant statistics (``table.stats.variantstats``): Spark's own decoding, one value at a time.

Each value is decoded by Spark's ``VariantVal.toPython`` (in a test only: the product decodes with
DuckDB over the whole column) and walked in Python down to ``DEPTH`` keys; a value's Python type
gives its kind (``int``: an integer type, ``Decimal``: a decimal, ``float``: a float or double,
``date``, an aware ``datetime``: a timestamp, a naive one: a ``timestamp_ntz``, ``bytes``: other).
Decimals are decoded with 100 digits of precision (Python's default 28 would round a decimal16).
"""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import math
from typing import Any

from lading_jobs.table.stats import jsonstats as js
from lading_jobs.table.stats.jsonstats import _bounds, float_above, float_below

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _micros(value: dt.datetime) -> int:
    delta = (value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    for t, name in ((bool, "boolean"), (dict, "object"), (list, "array"), (str, "string"), (bytes, "other")):
        if isinstance(v, t):
            return name
    if isinstance(v, int | float | decimal.Decimal):
        return "number"
    if isinstance(v, dt.datetime):
        return "timestamp" if v.tzinfo is not None else "timestamp_ntz"
    if isinstance(v, dt.date):
        return "date"
    return "other"


def _entry(path: tuple[str, ...], values: list[Any]) -> dict[str, Any]:
    from lading_jobs.table.stats import part as stx

    by: dict[str, list[Any]] = collections.defaultdict(list)
    for v in values:
        by[_kind(v)].append(v)
    out: dict[str, Any] = {"path": list(path), "present": len(values)}
    for name in ("null", "object", "array"):
        if by[name]:
            out[name] = len(by[name])
    if by["string"]:
        lo, lo_t = stx.truncate_lower(min(by["string"]))
        hi, hi_t = stx.truncate_upper(max(by["string"]))
        out["string"] = _bounds(len(by["string"]), lo, hi, lo_t, hi_t)
    if by["boolean"]:
        out["boolean"] = {"count": len(by["boolean"]), "min": min(by["boolean"]), "max": max(by["boolean"])}
    if by["number"]:
        numbers = by["number"]
        nans = sum(1 for v in numbers if isinstance(v, float) and math.isnan(v))
        exact = [decimal.Decimal(v) for v in numbers if not (isinstance(v, float) and math.isnan(v))]
        n: dict[str, Any] = {"count": len(numbers), "integers": sum(1 for v in numbers if isinstance(v, int))}
        if exact:
            lo = float_below(min(exact))
            if lo is not None:
                n["min"] = lo
            hi = float_above(max(exact))
            if hi is not None and not nans:
                n["max"] = hi
        if nans:
            n["nan"] = nans
        out["number"] = n
    for name, of in (("date", lambda d: (d - dt.date(1970, 1, 1)).days), ("timestamp", _micros),
                     ("timestamp_ntz", _micros)):
        if by[name]:
            found = [of(v) for v in by[name]]
            out[name] = {"count": len(found), "min": min(found), "max": max(found)}
    if by["other"]:
        out["other"] = {"count": len(by["other"])}
    return out


def reference_summarize(decoded: list[Any]) -> dict[str, Any]:
    """The variant statistics of the non-NULL values ``decoded`` (each ``VariantVal.toPython()``)."""
    found: dict[tuple[str, ...], list[Any]] = collections.defaultdict(list)

    def walk(prefix: tuple[str, ...], obj: dict[str, Any]) -> None:
        for k, v in obj.items():
            found[(*prefix, k)].append(v)
            if isinstance(v, dict) and len(prefix) + 1 < js.DEPTH:
                walk((*prefix, k), v)

    for doc in decoded:
        if isinstance(doc, dict):
            walk((), doc)
    paths = sorted(found)
    complete = len(paths) <= js.MAX_PATHS
    return {"docs": len(decoded), "invalid": 0, "complete": complete,
            "paths": [_entry(p, found[p]) for p in paths[:js.MAX_PATHS]], "variant": True}


def decode(variants: list[Any]) -> list[Any]:
    """The non-NULL values of a collected variant column, decoded by Spark (``VariantVal.toPython``)."""
    with decimal.localcontext(prec=100):
        return [v.toPython() for v in variants if v is not None]
