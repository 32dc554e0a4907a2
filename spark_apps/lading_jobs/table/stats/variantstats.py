"""Statistics of ``variant`` columns per key path: ``table.stats.jsonstats``'s form for Spark's variant binary.

A ``variant`` column reaches the writer as an Arrow ``struct<value: binary, metadata: binary>``
(the field's ``lading.type`` is ``variant``). Its statistics have the top level of a ``json``
column's (``docs``: non-NULL values, ``invalid``: 0, ``complete``, ``paths``) plus
``"variant": true``, so no reader takes them for a ``json`` column's (``jsonstats.merge`` gives
``None`` for a mix). Per key path of the objects (down to ``jsonstats.DEPTH`` keys; arrays are
not descended into), ``present`` and, per kind, a value counting in exactly one kind:

- ``null`` (variant null), ``object``, ``array``: counts, as in JSON statistics;
- ``boolean``: count and bounds; ``string``: count and bounds truncated as other string
  statistics (``minTruncated`` / ``maxTruncated``);
- ``number`` (int8 to int64, float, double, decimal4/8/16): count, ``integers`` (how many were
  of the integer types), float64 bounds rounded *outward* from the exact values
  (``jsonstats.float_below`` / ``float_above``), ``nan`` (NaN floats and doubles, left out
  when 0); a NaN (above every number, as Spark orders) or ``+inf`` leaves the maximum out,
  ``-inf`` the minimum;
- ``date``: count and bounds in days since 1970-01-01; ``timestamp`` (an instant) and
  ``timestamp_ntz`` (wall-clock, counted as UTC): count and bounds in microseconds since the epoch;
- ``other``: ``{"count": n}`` for the rest (binary, uuid, time, nanosecond timestamps, ...).

Computed by DuckDB over the whole column, no Python per value: ``variant_bytes_to_variant``
decodes each value (metadata and value concatenated), the objects are walked level by level
(``variant_keys``, then ``variant_extract`` with each key as a constant), and the kinds and
bounds are aggregated per key path in SQL (``variant_typeof`` names the stored type). Bounded
as JSON statistics: a row group's values beyond ``jsonstats.MAX_TEXT_BYTES`` bytes are not
decoded (no statistics, "anything"); paths beyond ``jsonstats.MAX_PATHS`` are not tracked
(``complete`` false). A value DuckDB cannot decode (an encoding version it does not know, a
corrupt buffer: DuckDB runs under a memory limit, so a corrupt length is an error) gives the
column no statistics; the write goes on.
"""

from __future__ import annotations

import decimal
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.table.stats import jsonstats as js

_KIND_SQL = """CASE
  WHEN t = 'VARIANT_NULL' THEN 'null' WHEN t LIKE 'OBJECT(%' THEN 'object' WHEN t LIKE 'ARRAY(%' THEN 'array'
  WHEN t IN ('BOOL_TRUE', 'BOOL_FALSE') THEN 'boolean' WHEN t = 'VARCHAR' THEN 'string'
  WHEN t IN ('INT8', 'INT16', 'INT32', 'INT64') THEN 'integer' WHEN t IN ('FLOAT', 'DOUBLE') THEN 'float'
  WHEN t LIKE 'DECIMAL(%' THEN 'decimal' WHEN t = 'DATE' THEN 'date'
  WHEN t = 'TIMESTAMP_MICROS_TZ' THEN 'timestamp' WHEN t = 'TIMESTAMP_MICROS' THEN 'timestamp_ntz'
  ELSE 'other' END"""
"""A value's kind from DuckDB's name of its stored variant type (anything not listed: ``other``)."""
_NODES_SQL = f"""
CREATE TEMP TABLE nodes AS SELECT doc, path, kind, t = 'BOOL_TRUE' AS x_true,
  CASE WHEN kind = 'string' THEN x::VARCHAR END AS s,
  CASE WHEN kind IN ('integer', 'decimal') THEN x::VARCHAR END AS exact,
  CASE WHEN kind IN ('integer', 'float', 'decimal') THEN try_cast(x AS DOUBLE) END AS d,
  CASE WHEN kind = 'date' THEN try_cast(x AS DATE) - DATE '1970-01-01' END AS days,
  CASE WHEN kind = 'timestamp' THEN epoch_us(try_cast(x AS TIMESTAMPTZ))
       WHEN kind = 'timestamp_ntz' THEN epoch_us(try_cast(x AS TIMESTAMP)) END AS micros
FROM (SELECT doc, path, x, t, {_KIND_SQL} AS kind FROM (SELECT doc, path, x, variant_typeof(x) AS t FROM ({{levels}})))
"""
"""Every member of the levels walked with its kind and its value in the form its bounds take."""
_PATHS_SQL = """
SELECT path, count(*),
  count(*) FILTER (WHERE kind = 'null'), count(*) FILTER (WHERE kind = 'object'),
  count(*) FILTER (WHERE kind = 'array'), count(*) FILTER (WHERE kind = 'other'),
  count(*) FILTER (WHERE kind = 'string'), min(s), max(s),
  count(*) FILTER (WHERE kind = 'boolean'),
  bool_and(kind = 'boolean' AND x_true) FILTER (WHERE kind = 'boolean'),
  bool_or(kind = 'boolean' AND x_true) FILTER (WHERE kind = 'boolean'),
  count(d), count(*) FILTER (WHERE kind = 'integer'), count(*) FILTER (WHERE isnan(d)),
  min(d) FILTER (WHERE NOT isnan(d)), max(d) FILTER (WHERE NOT isnan(d)),
  count(days), min(days), max(days),
  count(*) FILTER (WHERE kind = 'timestamp'), min(micros) FILTER (WHERE kind = 'timestamp'),
  max(micros) FILTER (WHERE kind = 'timestamp'),
  count(*) FILTER (WHERE kind = 'timestamp_ntz'), min(micros) FILTER (WHERE kind = 'timestamp_ntz'),
  max(micros) FILTER (WHERE kind = 'timestamp_ntz')
FROM nodes GROUP BY path
"""
"""Per key path: its counts and bounds per kind."""
_ENDS_SQL = """
WITH ends AS (SELECT path, min(d) AS lo, max(d) AS hi FROM nodes WHERE NOT isnan(d) GROUP BY path)
SELECT path,
  list(DISTINCT exact) FILTER (WHERE NOT isinf(lo) AND d <= lo + abs(lo) * 1e-14 + 1e-300 AND exact IS NOT NULL),
  list(DISTINCT d) FILTER (WHERE NOT isinf(lo) AND d <= lo + abs(lo) * 1e-14 + 1e-300 AND exact IS NULL),
  list(DISTINCT exact) FILTER (WHERE NOT isinf(hi) AND d >= hi - abs(hi) * 1e-14 - 1e-300 AND exact IS NOT NULL),
  list(DISTINCT d) FILTER (WHERE NOT isinf(hi) AND d >= hi - abs(hi) * 1e-14 - 1e-300 AND exact IS NULL)
FROM nodes JOIN ends USING (path) WHERE NOT isnan(d) GROUP BY path
"""
"""Per key path, the numbers whose float64 lies near its minimum or maximum (a few ulps: a decimal's
conversion to a double may round), exactly: integers and decimals as text, floats and doubles as
doubles (a float widens exactly): the exact least and greatest of them,
rounded outward, are the bounds."""


def is_variant_field(field: pa.Field) -> bool:
    """Whether an Arrow field of a part is a ``variant`` column (its ``lading.type``)."""
    meta = field.metadata or {}
    t = field.type
    return (meta.get(js.LADING_TYPE) == b"variant" and pa.types.is_struct(t)
            and sorted(f.name for f in t) == ["metadata", "value"]
            and all(pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type) for f in t))


def empty() -> dict[str, Any]:
    """The statistics of no values."""
    return {"docs": 0, "invalid": 0, "complete": True, "paths": [], "variant": True}


def summarize(values: pa.Array | pa.ChunkedArray) -> dict[str, Any] | None:
    """The statistics of one row group's values of a ``variant`` column (not trimmed; ``None``
    when nothing is known: more than ``js.MAX_TEXT_BYTES`` bytes, or a value DuckDB cannot decode)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    present = pc.drop_null(values)
    if not len(present):
        return empty()
    value, metadata = present.field("value"), present.field("metadata")
    size = pc.sum(pc.binary_length(value)).as_py() + pc.sum(pc.binary_length(metadata)).as_py()
    if size > js.MAX_TEXT_BYTES:
        return None
    import duckdb

    from lading_jobs.table.stats import jsonengine

    con = jsonengine._connect(duckdb)
    try:  # a memory limit: a corrupt length must fail as an error, not allocate (the kernel would kill the job)
        con.execute(f"SET memory_limit = '{max(512, 16 * size // 2**20)}MB'")
        con.register("docs", pa.table({"value": value.cast(pa.binary()), "metadata": metadata.cast(pa.binary())}))
        return _stats(con, len(present))
    except duckdb.Error:
        return None
    finally:
        con.close()


def _stats(con: Any, docs: int) -> dict[str, Any]:
    """The statistics of the registered ``docs`` (their ``docs`` non-NULL values)."""
    con.execute("CREATE TEMP TABLE n0 AS SELECT doc, []::VARCHAR[] AS path, x, variant_typeof(x) AS t "
                "FROM (SELECT row_number() OVER () AS doc, variant_bytes_to_variant(metadata || value) AS x "
                "FROM docs)")
    kept = 0
    complete = True
    for level in range(1, js.DEPTH + 1):
        pairs = con.execute(f"SELECT DISTINCT path, k FROM (SELECT path, unnest(variant_keys(x)) AS k FROM n{level - 1} "
                            "WHERE t LIKE 'OBJECT(%') ORDER BY path, k").fetchall()
        if kept + len(pairs) > js.MAX_PATHS:
            pairs, complete = pairs[:js.MAX_PATHS - kept], False
        kept += len(pairs)
        keys = sorted({k for _, k in pairs})
        con.register(f"allowed{level}", pa.table({"path": pa.array([p for p, _ in pairs], pa.list_(pa.string())),
                                                  "k": pa.array([k for _, k in pairs], pa.string())}))
        pick = " ".join(f"WHEN {_literal(k)} THEN variant_extract(x, {_literal(k)})" for k in keys)
        member = f"CASE k {pick} END" if keys else "NULL::VARIANT"
        con.execute(f"""
            CREATE TEMP TABLE n{level} AS SELECT doc, list_append(path, k) AS path, x, variant_typeof(x) AS t
            FROM (SELECT doc, path, k, {member} AS x
                  FROM (SELECT doc, path, x, unnest(variant_keys(x)) AS k FROM n{level - 1} WHERE t LIKE 'OBJECT(%')
                  SEMI JOIN allowed{level} USING (path, k))""")
    levels = " UNION ALL ".join(f"SELECT doc, path, x FROM n{level}" for level in range(1, js.DEPTH + 1))
    con.execute(_NODES_SQL.format(levels=levels))
    rows = con.execute(_PATHS_SQL).fetchall()
    ends = {tuple(r[0]): (_exact(r[1], r[2]), _exact(r[3], r[4])) for r in con.execute(_ENDS_SQL).fetchall()}
    paths = [_entry(tuple(r[0]), r, ends.get(tuple(r[0]))) for r in rows]
    return {"docs": docs, "invalid": 0, "complete": complete, "paths": sorted(paths, key=lambda e: tuple(e["path"])),
            "variant": True}


def _exact(texts: list[str] | None, doubles: list[float] | None) -> list[decimal.Decimal]:
    """Numbers as exact decimals (every float64 is one)."""
    return [decimal.Decimal(t) for t in texts or []] + [decimal.Decimal(d) for d in doubles or []]


def _entry(path: tuple[str, ...], row: tuple[Any, ...],
           ends: tuple[list[decimal.Decimal], list[decimal.Decimal]] | None) -> dict[str, Any]:
    """A path's statistics from its ``_PATHS_SQL`` row and its numbers near the extremes."""

    (_, present, nulls, objects, arrays, others, strings, s_min, s_max, flags, b_min, b_max,
     numbers, integers, nans, n_lo, n_hi, dates, d_min, d_max, stamps, t_min, t_max, ntz, z_min, z_max) = row
    out = js.scalar_entry(path, present, nulls, objects, arrays, strings, s_min, s_max)
    if flags:
        out["boolean"] = {"count": int(flags), "min": bool(b_min), "max": bool(b_max)}
    if numbers:
        number: dict[str, Any] = {"count": int(numbers), "integers": int(integers)}
        lows, highs = ends or ([], [])
        if n_lo is not None and math.isinf(n_lo):  # -inf: no bound; +inf: every number is +inf
            lows = [decimal.Decimal(n_lo)]
        if n_hi is not None and math.isinf(n_hi):
            highs = [decimal.Decimal(n_hi)]
        if lows:
            bound = js.float_below(min(lows))
            if bound is not None:
                number["min"] = bound
        if highs and not nans:
            bound = js.float_above(max(highs))
            if bound is not None:
                number["max"] = bound
        if nans:
            number["nan"] = int(nans)
        out["number"] = number
    for name, n, lo, hi in (("date", dates, d_min, d_max), ("timestamp", stamps, t_min, t_max),
                            ("timestamp_ntz", ntz, z_min, z_max)):
        if n:
            out[name] = {"count": int(n), "min": int(lo), "max": int(hi)}
    if others:
        out["other"] = {"count": int(others)}
    return out


def _literal(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"
