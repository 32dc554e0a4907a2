"""How ``table.stats.jsonstats`` statistics are computed: over a whole Arrow column, in C++, no Python per document.

The project's rule is Arrow batches end to end; the statistics of a ``json`` column are
the same as a walk of each document with Python's ``json`` would give (integers as ints,
fractions as ``Decimal``, no ``NaN``/``Infinity``, no duplicate keys; the walk is kept as
the reference in ``tests/support/jsonstats_oracle.py`` and a property test compares them):

1. **Checks** (pyarrow, RE2, whole column): string tokens are blanked (``_STRING_TOKEN``);
   the text left over flags what the engines accept and RFC 8259 does not (a trailing comma,
   ``NaN``/``Infinity``, a comment: ``_LENIENT``), and number tokens DuckDB would not give
   back as written (``_INEXACT``: 16 or more digits with a fraction or exponent, an exponent
   below -99, 1000 digits or more). A column with such a number gets no JSON statistics
   (``None``, "anything"): the one place where the result differs from the reference's, and
   on the safe side.
2. **Fast path** (``arrow_stats``): the documents joined by newlines are read by
   ``pyarrow.json.read_json`` (one C++ pass, types inferred per key). It refuses mixed kinds
   per key, duplicate keys, a document that is not an object; the batch then takes the
   general path. Kinds come from the Arrow types (struct: object, list: array, …), string,
   boolean and integer bounds from ``min_max``; what Arrow cannot tell (JSON ``null`` from a
   missing key, integer tokens among floats, exact float tokens) comes from one DuckDB pass
   of ``json_extract`` over the paths concerned (a list of constant JSON pointers: one parse
   per document).
3. **General path** (``_engine_stats``): DuckDB walks the documents level by level down to
   ``DEPTH`` keys (``json_keys``, then ``json_extract`` per member by JSON pointer), finds
   duplicate keys (``json_tree`` only for documents with objects below the levels walked) and
   aggregates per key path in SQL.
"""

from __future__ import annotations

import decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.table.stats import jsonstats as js
from lading_jobs.table.stats.bounds import truncate_lower, truncate_upper

_STRING_TOKEN = r'"(?:[^"\\]|\\.)*"'
"""A JSON string token (RE2): the text outside them is structure, numbers and literals."""
_LENIENT = r",\s*[\]}]|[a-df-zA-DF-Z/]"
"""What DuckDB's parser accepts and RFC 8259 does not, outside strings once ``true``/``false``/``null``
are blanked: a trailing comma, ``NaN``/``Infinity`` (any letter but an exponent's), a comment."""
_INEXACT = "|".join([r"\d{1000}", r"\d{16,}[.eE]", *(rf"\d{{{i}}}\.\d{{{16 - i},}}" for i in range(1, 16)),
                     r"[eE]-0*[1-9]\d\d"])
"""A number token DuckDB may not give back exactly: 16 or more digits with a fraction or an exponent
(it prints the nearest double, not the token), an exponent below -99 (subnormals), 1000 digits or more
(Python's ``int`` refuses 4300)."""


_NUMBER = "type IN ('BIGINT', 'UBIGINT', 'DOUBLE')"
_LEVEL_SQL = """
CREATE TEMP TABLE k{up} AS SELECT doc, path, pos, value, json_keys(value) AS keys FROM n{up} WHERE type = 'OBJECT';
CREATE TEMP TABLE n{level} AS
  SELECT doc, list_append(path, key) AS path, list_append(pos, i) AS pos, v AS value, json_type(v) AS type
  FROM (SELECT doc, path, pos, key, i,
          json_extract(value, '/' || replace(replace(key, '~', '~0'), '/', '~1')) AS v
        FROM (SELECT doc, path, pos, value, unnest(keys) AS key, generate_subscripts(keys, 1) AS i FROM k{up}));
"""
"""One level down: the keys of every object of level ``up`` (in document order, duplicates kept) and
each member's value by JSON pointer (``~`` and ``/`` escaped), one scalar call per member."""
_GOOD_SQL = """
CREATE TEMP TABLE checked AS SELECT doc, count(*) AS objects, bool_or(len(keys) <> len(list_distinct(keys))) AS dup
  FROM ({keys}) GROUP BY doc;
CREATE TEMP TABLE deep AS
  SELECT n0.doc, n0.value FROM n0 LEFT JOIN checked USING (doc) WHERE n0.objects > coalesce(checked.objects, 0);
CREATE TEMP TABLE good AS
  SELECT doc FROM n0
  EXCEPT SELECT doc FROM checked WHERE dup
  EXCEPT SELECT doc FROM (SELECT d.doc, t.parent, t.key FROM deep d, json_tree(d.value) t WHERE t.parent IS NOT NULL)
         GROUP BY doc, parent, key HAVING count(*) > 1;
CREATE TEMP TABLE nodes AS SELECT * FROM ({levels}) SEMI JOIN good USING (doc);
"""
"""The strict documents: no duplicate key (DuckDB keeps them, Python's ``json`` refuses them) in an
object of the levels walked, nor, for a document with more objects (``{`` outside strings) than
those, anywhere (``json_tree``, one document at a time in C++, only for such documents)."""
_PATHS_SQL = f"""
SELECT path, min(list_prepend(doc, pos)), count(*),
  count(*) FILTER (WHERE type = 'NULL'), count(*) FILTER (WHERE type = 'OBJECT'),
  count(*) FILTER (WHERE type = 'ARRAY'), count(*) FILTER (WHERE type = 'VARCHAR'),
  min(value ->> '$') FILTER (WHERE type = 'VARCHAR'), max(value ->> '$') FILTER (WHERE type = 'VARCHAR'),
  count(*) FILTER (WHERE {_NUMBER}),
  count(*) FILTER (WHERE type IN ('BIGINT', 'UBIGINT') OR (type = 'DOUBLE' AND regexp_full_match(value, '-?[0-9]+'))),
  count(*) FILTER (WHERE type = 'BOOLEAN'),
  bool_and(value = 'true') FILTER (WHERE type = 'BOOLEAN'), bool_or(value = 'true') FILTER (WHERE type = 'BOOLEAN')
FROM nodes GROUP BY path
"""
"""Per key path: where it first appears (document, then key positions: the order a walk of the
documents meets it), its counts and bounds per kind (an integer token beyond 64 bits comes as a
``DOUBLE`` kept as written)."""
_CANDIDATES_SQL = f"""
WITH num AS (SELECT path, value, try_cast(value AS DOUBLE) AS d FROM nodes WHERE {_NUMBER}),
     ends AS (SELECT path, min(d) AS lo, max(d) AS hi FROM num GROUP BY path)
SELECT path, list(DISTINCT value) FILTER (WHERE d = lo), list(DISTINCT value) FILTER (WHERE d = hi)
FROM num JOIN ends USING (path) GROUP BY path
"""
"""Per key path, the number tokens nearest its float64 minimum and maximum: their exact least and
greatest value give the bounds (rounded outward, ``js.float_below`` / ``js.float_above``)."""


def _entry_of(path: tuple[str, ...], row: tuple[Any, ...], ends: tuple[list[str], list[str]] | None) -> dict[str, Any]:
    """A path's statistics from its ``_PATHS_SQL`` row."""
    (_, _, present, nulls, objects, arrays, strings, s_min, s_max, numbers, integers, flags, b_min, b_max) = row
    out = js.scalar_entry(path, present, nulls, objects, arrays, strings, s_min, s_max)
    if numbers:
        assert ends is not None
        out["number"] = {"count": int(numbers), "integers": int(integers)}
        n_lo = js.float_below(min(decimal.Decimal(a) for a in ends[0]))
        n_hi = js.float_above(max(decimal.Decimal(a) for a in ends[1]))
        if n_lo is not None:
            out["number"]["min"] = n_lo
        if n_hi is not None:
            out["number"]["max"] = n_hi
    if flags:
        out["boolean"] = {"count": int(flags), "min": bool(b_min), "max": bool(b_max)}
    return out


def summarize(values: pa.Array | pa.ChunkedArray) -> dict[str, Any] | None:
    """The JSON statistics of one row group's values of a ``json`` column (not trimmed;
    ``None`` when nothing is known: text beyond ``js.MAX_TEXT_BYTES``, or a number token the
    engine cannot bound exactly, see the module doc). The values may come as a dictionary
    array (a streamed bin-pack hands string columns over that way)."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    present = pc.drop_null(values)
    if isinstance(present, pa.ChunkedArray):
        present = present.combine_chunks() if present.num_chunks else pa.array([], present.type)
    if not len(present):
        return {"docs": 0, "invalid": 0, "complete": True, "paths": []}
    if pc.sum(pc.binary_length(present)).as_py() > js.MAX_TEXT_BYTES:
        return None
    if _plain(present):
        fast = arrow_stats(present)
        if fast is not None:
            return fast
    return general_stats(present)


def general_stats(present: pa.Array) -> dict[str, Any] | None:
    """The statistics of non-NULL JSON texts by the general path (module doc, 1 and 3)."""
    outside = pc.replace_substring_regex(present, _STRING_TOKEN, '""')  # the text outside string tokens
    if pc.any(pc.match_substring_regex(outside, _INEXACT)).as_py():
        return None
    lenient = pc.match_substring_regex(pc.replace_substring_regex(outside, "true|false|null", "0"), _LENIENT)
    skip = pc.or_(pc.match_substring_regex(present, js._SURROGATE_ESCAPE), lenient)
    docs = pa.table({"doc": pa.array(range(len(present)), pa.int64()), "text": present, "skip": skip,
                     "objects": pc.count_substring(outside, "{")})
    return _engine_stats(docs)


def _plain(present: pa.Array) -> bool:
    """Whether the fast path may read the column (cheap checks, stopping at the first that fails):
    every document one object with no space around it (a line of ``pyarrow.json``; pyarrow crashes
    on a line that is ``null``), no control character but a newline, return or tab (pretty-printed
    text: read with ``newlines_in_values``; inside a string pyarrow refuses them), and nothing pyarrow accepts that RFC 8259 does not or that DuckDB does not give back exactly:
    ``NaN``/``Inf`` (even in a string: the general path looks closer), a surrogate escape (pyarrow
    takes a valid pair, the reference refuses every one), a number ``_INEXACT`` may match."""
    checks = (lambda: pc.invert(pc.starts_with(present, "{")), lambda: pc.invert(pc.ends_with(present, "}")),
              lambda: pc.match_substring_regex(present, r"[\x00-\x08\x0b\x0c\x0e-\x1f]"), lambda: pc.match_substring(present, "NaN"),
              lambda: pc.match_substring(present, "Inf"),
              lambda: pc.match_substring_regex(present, js._SURROGATE_ESCAPE),
              lambda: pc.match_substring_regex(present, _INEXACT))
    return not any(pc.any(check()).as_py() for check in checks)


def arrow_stats(present: pa.Array) -> dict[str, Any] | None:
    """The statistics by ``pyarrow.json`` (module doc, 2) of a column ``_plain`` lets through, or None:
    the general path decides (a document pyarrow refuses, a line that held two)."""
    import pyarrow.json as pj

    lines = pc.binary_join_element_wise(present, "", "\n")  # each document and a newline
    size = pc.sum(pc.binary_length(lines)).as_py()
    text = lines.buffers()[2].slice(0, size)
    read = pj.ReadOptions(use_threads=False, block_size=size + 1)
    pretty = pc.any(pc.match_substring_regex(present, "[\n\r]")).as_py()
    try:
        table = pj.read_json(text, read_options=read, parse_options=pj.ParseOptions(newlines_in_values=pretty))
        schema = pa.schema([_as_text(f) for f in table.schema])
        if schema != table.schema:  # ISO 8601 strings were read as timestamps: read them as strings
            table = pj.read_json(text, read_options=read, parse_options=pj.ParseOptions(
                explicit_schema=schema, newlines_in_values=pretty))
    except pa.ArrowInvalid:
        return None
    if table.num_rows != len(present):
        return None
    found: list[tuple[tuple[str, ...], pa.Array]] = []

    def walk(prefix: tuple[str, ...], names: list[str], arrays: list[pa.Array]) -> None:
        for name, array in zip(names, arrays, strict=True):
            found.append(((*prefix, name), array))
            if pa.types.is_struct(array.type) and len(prefix) + 1 < js.DEPTH:
                walk((*prefix, name), [f.name for f in array.type], array.flatten())

    try:  # one block: one chunk per column (pyarrow cannot concatenate some list<null> chunks)
        walk((), table.column_names, [c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in table.columns])
    except pa.ArrowException:
        return None
    if len(found) > js.MAX_PATHS or any("\x00" in k for path, _ in found for k in path):
        return None
    asked = [i for i, (_, a) in enumerate(found) if a.null_count or pa.types.is_floating(a.type)]
    nulls, numbers = _pointer_stats(present, [found[i][0] for i in asked],
                                    [pa.types.is_floating(found[i][1].type) for i in asked])
    out = []
    for i, (path, array) in enumerate(found):
        e = _arrow_entry(path, array, nulls.get(asked.index(i), 0) if i in asked else 0,
                         numbers.get(asked.index(i)) if i in asked else None)
        if e is None:
            return None
        out.append(e)
    return {"docs": len(present), "invalid": 0, "complete": True, "paths": sorted(out, key=lambda e: tuple(e["path"]))}


def _as_text(field: pa.Field) -> pa.Field:
    """``field`` with timestamps (pyarrow's reading of ISO 8601 strings) as strings, at any depth."""
    t = field.type
    if pa.types.is_timestamp(t):
        return field.with_type(pa.string())
    if pa.types.is_struct(t):
        return field.with_type(pa.struct([_as_text(f) for f in t]))
    if pa.types.is_list(t):
        return field.with_type(pa.list_(_as_text(t.value_field)))
    return field


def _arrow_entry(path: tuple[str, ...], array: pa.Array, nulls: int,
                 numbers: tuple[int, int, list[str], list[str]] | None) -> dict[str, Any] | None:
    """A path's statistics from its Arrow values (``nulls``: JSON ``null`` among the Arrow nulls;
    ``numbers``: count, integer tokens and the tokens nearest the extremes, for a float column)."""
    t, values = array.type, len(array) - array.null_count
    out: dict[str, Any] = {"path": list(path), "present": values + nulls}
    if nulls:
        out["null"] = nulls
    if not values or pa.types.is_null(t):
        return out
    if pa.types.is_struct(t) or pa.types.is_list(t):
        out["object" if pa.types.is_struct(t) else "array"] = values
    elif pa.types.is_string(t):
        ends = pc.min_max(array)
        lo, lo_t = truncate_lower(ends["min"].as_py())
        hi, hi_t = truncate_upper(ends["max"].as_py())
        out["string"] = js._bounds(values, lo, hi, lo_t, hi_t)
    elif pa.types.is_boolean(t):
        ends = pc.min_max(array)
        out["boolean"] = {"count": values, "min": ends["min"].as_py(), "max": ends["max"].as_py()}
    elif pa.types.is_integer(t):
        ends = pc.min_max(array)
        out["number"] = _number(values, values, [str(ends["min"].as_py())], [str(ends["max"].as_py())])
    elif pa.types.is_floating(t) and numbers is not None and numbers[0] == values:
        out["number"] = _number(*numbers)
    else:
        return None
    return out


def _number(count: int, integers: int, lows: list[str], highs: list[str]) -> dict[str, Any]:
    """Number statistics from the tokens nearest the float64 extremes (exact least and greatest,
    rounded outward)."""
    out: dict[str, Any] = {"count": count, "integers": integers}
    lo = js.float_below(min(decimal.Decimal(a) for a in lows))
    hi = js.float_above(max(decimal.Decimal(a) for a in highs))
    if lo is not None:
        out["min"] = lo
    if hi is not None:
        out["max"] = hi
    return out


def _pointer_stats(present: pa.Array, paths: list[tuple[str, ...]], numeric: list[bool]
                   ) -> tuple[dict[int, int], dict[int, tuple[int, int, list[str], list[str]]]]:
    """Per asked path (by position): JSON ``null`` count, and for a ``numeric`` one (count, integer
    tokens, tokens nearest the float64 minimum, maximum), by DuckDB aggregates over ``json_extract``
    with constant JSON pointers (one parse per document; a second pass picks the tokens at the
    float64 extremes of the numeric paths)."""
    if not paths:
        return {}, {}
    import duckdb

    pointers = ", ".join(_literal("".join("/" + k.replace("~", "~0").replace("/", "~1") for k in p)) for p in paths)
    source = f"(SELECT json_extract(text, [{pointers}]) AS vs FROM docs)"
    num = [i for i, n in enumerate(numeric) if n]

    def v(i: int) -> str:
        return f"vs[{i + 1}]"

    def is_number(i: int) -> str:
        return f"json_type({v(i)}) IN ('BIGINT', 'UBIGINT', 'DOUBLE')"

    first = [f"count(*) FILTER (WHERE {v(i)}::VARCHAR = 'null')" for i in range(len(paths))]
    for i in num:
        first += [f"count(*) FILTER (WHERE {is_number(i)})",
                  f"count(*) FILTER (WHERE json_type({v(i)}) IN ('BIGINT', 'UBIGINT') OR (json_type({v(i)}) = 'DOUBLE'"
                  f" AND regexp_full_match({v(i)}::VARCHAR, '-?[0-9]+')))",
                  f"min(try_cast({v(i)} AS DOUBLE)) FILTER (WHERE {is_number(i)})",
                  f"max(try_cast({v(i)} AS DOUBLE)) FILTER (WHERE {is_number(i)})"]
    con = _connect(duckdb)
    try:
        con.register("docs", pa.table({"text": present}))
        row = con.execute(f"SELECT {', '.join(first)} FROM {source}").fetchone()
        assert row is not None
        counts = {i: row[len(paths) + 4 * j: len(paths) + 4 * j + 4] for j, i in enumerate(num)}
        second = [f"list(DISTINCT {v(i)}::VARCHAR) FILTER (WHERE {is_number(i)} AND try_cast({v(i)} AS DOUBLE) = "
                  f"{_literal(repr(end))}::DOUBLE)" for i in num if counts[i][0] for end in counts[i][2:]]
        ends = con.execute(f"SELECT {', '.join(second)} FROM {source}").fetchone() if second else ()
    finally:
        con.close()
    assert ends is not None
    numbers, k = {}, 0
    for i in num:
        if counts[i][0]:
            numbers[i] = (int(counts[i][0]), int(counts[i][1]), list(ends[k]), list(ends[k + 1]))
            k += 2
    return {i: int(row[i]) for i in range(len(paths)) if row[i]}, numbers


def _literal(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _engine_stats(docs: pa.Table) -> dict[str, Any] | None:
    """The statistics of ``docs`` (``doc``, ``text``, ``skip``: not strict JSON, ``objects``: ``{``
    outside strings) by DuckDB over the whole Arrow column (read zero-copy): the documents level by
    level down to ``js.DEPTH`` keys, aggregated per key path in SQL."""
    import duckdb

    con = _connect(duckdb)
    try:
        con.register("docs", docs)
        con.execute("CREATE TEMP TABLE n0 AS SELECT doc, objects, []::VARCHAR[] AS path, []::BIGINT[] AS pos, "
                    "text AS value, json_type(text) AS type FROM docs WHERE NOT skip AND json_valid(text)")
        for level in range(1, js.DEPTH + 1):
            con.execute(_LEVEL_SQL.format(up=level - 1, level=level))
        con.execute(f"CREATE TEMP TABLE k{js.DEPTH} AS SELECT doc, json_keys(value) AS keys FROM n{js.DEPTH} "
                    "WHERE type = 'OBJECT'")
        keys = " UNION ALL ".join(f"SELECT doc, keys FROM k{level}" for level in range(js.DEPTH + 1))
        levels = " UNION ALL ".join(f"SELECT doc, path, pos, value, type FROM n{level}"
                                    for level in range(1, js.DEPTH + 1))
        con.execute(_GOOD_SQL.format(keys=keys, levels=levels))
        good = con.execute("SELECT count(*) FROM good").fetchone()
        rows = con.execute(_PATHS_SQL).fetchall()
        candidates = {tuple(r[0]): (r[1], r[2]) for r in con.execute(_CANDIDATES_SQL).fetchall()}
    finally:
        con.close()
    assert good is not None
    listed = sorted(rows, key=lambda r: r[1])
    out = [_entry_of(tuple(r[0]), r, candidates.get(tuple(r[0]))) for r in listed[:js.MAX_PATHS]]
    return {"docs": int(good[0]), "invalid": len(docs) - int(good[0]), "complete": len(listed) <= js.MAX_PATHS,
            "paths": sorted(out, key=lambda e: tuple(e["path"]))}


def _connect(duckdb: Any) -> Any:
    """An in-memory DuckDB connection of one thread that never installs or loads an extension by
    itself (JSON is built into the wheel; a job reaches no extension repository)."""
    return duckdb.connect(config={"threads": 1, "autoinstall_known_extensions": False,
                                  "autoload_known_extensions": False})
