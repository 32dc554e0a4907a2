"""The reference JSON statistics (``table.stats.jsonstats``): one document at a time in Python.

This was the writer's ``summarize`` until the statistics were computed over whole Arrow
columns by DuckDB. It stays as the documented reference, exact by construction (Python's
``json`` with integers as ints and fractions as ``Decimal``, no ``NaN``/``Infinity``, no
duplicate keys, a walk of each object down to ``DEPTH`` keys), and the property test checks
that the product gives the same statistics for every column it does not give up on (``None``).
"""

from __future__ import annotations

import collections
import decimal
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.table.stats import jsonstats as js
from lading_jobs.table.stats.jsonstats import _bounds, float_above, float_below


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
    from lading_jobs.table.stats import part as stx

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


def reference_summarize(values: pa.Array | pa.ChunkedArray) -> dict[str, Any] | None:
    """The JSON statistics of one row group's values of a ``json`` column (not trimmed;
    ``None`` when its text is beyond ``js.MAX_TEXT_BYTES``: nothing is known). The values may come
    as a dictionary array (a streamed bin-pack hands string columns over that way)."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    present = pc.drop_null(values)
    if len(present) and pc.sum(pc.binary_length(present)).as_py() > js.MAX_TEXT_BYTES:
        return None
    suspicious = pc.match_substring_regex(present, js._SURROGATE_ESCAPE) if len(present) else None
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
            if len(paths) >= js.MAX_PATHS:
                complete = False
                continue
            found = paths[path] = []
        found.append(value)
        if type(value) is dict and value and len(path) < js.DEPTH:
            complete = _walk(value, path, paths) and complete
    return complete
