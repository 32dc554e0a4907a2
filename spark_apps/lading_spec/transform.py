"""A load's transform (``spec.transform``): ``COPY INTO t (cols) SELECT … FROM source WHERE …``.

The seed's StarRocks-style COPY, in Spark SQL. ``select`` is one statement,
``SELECT <items> FROM source [WHERE <condition>]``: ``source`` is the files being
loaded, one row per record. Items are Spark SQL expressions (an ``AS`` alias is
allowed and ignored: items map to the target columns by position), a field may
be written ``$k`` (its position, from 1) and a run of fields ``$a..$b`` (an item
of its own, expanded to ``$a, …, $b``). ``fields`` names the fields by position
(the seed's ``WITH FIELDS``; headerless CSV), ``columns`` is the target column
list (the columns not listed take their default or NULL; without it the items
fill the table's columns in order).

This module is pure: it splits the statement at its top level (outside quotes,
comments and brackets) and checks its shape; Spark parses the expressions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lading_spec.errors import SpecError

SOURCE = "source"
"""The name of the view over the files, as the statement's FROM names it."""
MAX_FIELD = 10_000
_RANGE = re.compile(r"^\$(\d+)\s*\.\.\s*\$(\d+)$")
_FIELD = re.compile(r"\$(\d+)")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Transform:
    """A parsed transform; ``items`` already expanded, aliases removed, ``$k`` not yet resolved."""

    items: tuple[str, ...]
    where: str | None = None
    columns: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    select: str = ""

    def field_refs(self) -> int:
        """The highest ``$k`` the statement uses (0: none)."""
        found = [int(m) for text in (*self.items, self.where or "") for m in _refs(text)]
        return max(found, default=0)


def _scan(sql: str) -> list[tuple[int, int, str]]:
    """Top-level tokens of ``sql`` as (start, end, kind): kind is ``word``, ``comma``, ``dollar`` or
    ``other``; quoted text, comments and bracketed spans are skipped (their words are not top level)."""
    out: list[tuple[int, int, str]] = []
    i, n, depth = 0, len(sql), 0
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            j = i + 1
            while j < n and sql[j] != ch:
                j += 2 if sql[j] == "\\" and ch != "`" else 1
            if j >= n:
                raise SpecError("transform.select", f"an unclosed {ch} quote starts at character {i + 1}")
            i = j + 1
            continue
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            if j < 0:
                raise SpecError("transform.select", f"an unclosed /* comment starts at character {i + 1}")
            i = j + 2
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                raise SpecError("transform.select", f"an unmatched {ch} at character {i + 1}")
        elif depth == 0 and ch == ",":
            out.append((i, i + 1, "comma"))
        elif depth == 0 and ch == ";":
            raise SpecError("transform.select", "give one SELECT statement, without ';'")
        elif depth == 0 and (ch.isalpha() or ch == "_"):
            j = i
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            out.append((i, j, "word"))
            i = j
            continue
        i += 1
    if depth:
        raise SpecError("transform.select", "a bracket is not closed")
    return out


def _refs(text: str) -> list[str]:
    """The ``$k`` numbers in ``text`` outside quotes and comments."""
    return [m.group(1) for start, end in _code_spans(text) for m in _FIELD.finditer(text, start, end)]


def _code_spans(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that are code (not quoted text or comments)."""
    spans: list[tuple[int, int]] = []
    i, n, start = 0, len(text), 0
    while i < n:
        ch = text[i]
        if ch in "'\"`" or text.startswith(("--", "/*"), i):
            spans.append((start, i))
            if ch in "'\"`":
                j = i + 1
                while j < n and text[j] != ch:
                    j += 2 if text[j] == "\\" and ch != "`" else 1
                i = j + 1
            else:
                end = text.find("\n" if ch == "-" else "*/", i + 2)
                i = n if end < 0 else end + (1 if ch == "-" else 2)
            start = i
            continue
        i += 1
    spans.append((start, n))
    return spans


def resolve_fields(text: str, names: list[str]) -> str:
    """``text`` with each ``$k`` replaced by the k-th source column, back-quoted."""
    out, last = [], 0
    for start, end in _code_spans(text):
        for m in _FIELD.finditer(text, start, end):
            k = int(m.group(1))
            if not 1 <= k <= len(names):
                raise SpecError("transform.select", f"${k} is not a field: the source has {len(names)} "
                                                    f"field(s) ({', '.join(names[:5])}{', …' if len(names) > 5 else ''})")
            out.append(text[last:m.start()])
            out.append("`" + names[k - 1].replace("`", "``") + "`")
            last = m.end()
    out.append(text[last:])
    return "".join(out)


def _strip_alias(item: str, tokens: list[tuple[int, int, str]], base: int) -> str:
    """``expr AS name`` → ``expr`` (an alias at the item's top level)."""
    words = [(s - base, e - base) for s, e, kind in tokens if kind == "word"]
    if len(words) >= 2:
        (s1, e1), (_s2, e2) = words[-2], words[-1]
        if item[s1:e1].lower() == "as" and not item[e2:].strip():
            return item[:s1].rstrip()
    return item


def _items(text: str, tokens: list[tuple[int, int, str]], base: int) -> list[str]:
    items: list[str] = []
    start = 0
    bounds = [s - base for s, _, kind in tokens if kind == "comma"] + [len(text)]
    for end in bounds:
        item = text[start:end].strip()
        if not item:
            raise SpecError("transform.select", "an empty item in the SELECT list (two commas, or a trailing comma)")
        mine = [t for t in tokens if start + base <= t[0] < end + base]
        item_base = base + start + (len(text[start:end]) - len(text[start:end].lstrip()))
        item = _strip_alias(item, mine, item_base)
        span = _RANGE.match(item)
        if span:
            a, b = int(span.group(1)), int(span.group(2))
            if not 1 <= a <= b <= MAX_FIELD:
                raise SpecError("transform.select", f"the range {item} must go up from $1 (at most ${MAX_FIELD})")
            items += [f"${k}" for k in range(a, b + 1)]
        elif item == "*" or item.endswith(".*"):
            raise SpecError("transform.select", "'*' is not accepted: list the items (a run of fields is $1..$n)")
        else:
            items.append(item)
        start = end + 1
    return items


def _distinct_from(words: list[tuple[int, int, str]], k: int) -> bool:
    """Whether the FROM at ``words[k]`` is the operator ``IS [NOT] DISTINCT FROM``, not a clause."""
    return k >= 2 and words[k - 1][2] == "distinct" and words[k - 2][2] in ("is", "not")


def parse_select(sql: str) -> tuple[list[str], str | None]:
    """``SELECT <items> FROM source [WHERE <condition>]`` → (items, condition)."""
    tokens = _scan(sql)
    words = [(s, e, sql[s:e].lower()) for s, e, kind in tokens if kind == "word"]
    if not words or words[0][2] != "select" or sql[:words[0][0]].strip():
        raise SpecError("transform.select", "expected SELECT <expressions> FROM source [WHERE <condition>]")
    froms = [w for k, w in enumerate(words) if w[2] == "from" and not _distinct_from(words, k)]
    if len(froms) != 1:
        raise SpecError("transform.select", "expected one FROM source (subqueries go in brackets)")
    f_start, f_end, _ = froms[0]
    after = [w for w in words if w[0] >= f_end]
    if not after or after[0][2] != SOURCE or sql[f_end:after[0][0]].strip():
        raise SpecError("transform.select", f"the statement reads FROM {SOURCE} (the files being loaded)")
    rest = after[1:]
    where: str | None = None
    tail = sql[after[0][1]:].strip()
    if rest:
        if rest[0][2] != "where" or sql[after[0][1]:rest[0][0]].strip():
            raise SpecError("transform.select", f"after FROM {SOURCE} only a WHERE may follow (a load transform "
                            f"maps each record to at most one row: no JOIN, GROUP BY, ORDER BY or LIMIT); got "
                            f"{tail[:40]!r}")
        if any(w[2] in ("group", "order", "limit", "having", "union", "join") for w in rest[1:]):
            raise SpecError("transform.select", "only WHERE may follow FROM source (no GROUP BY, ORDER BY, LIMIT, "
                            "UNION or JOIN at the top level)")
        where = sql[rest[0][1]:].strip()
        if not where:
            raise SpecError("transform.select", "WHERE needs a condition")
    elif tail:
        raise SpecError("transform.select", f"unexpected text after FROM {SOURCE}: {tail[:40]!r}")
    base = words[0][1]
    select_list = sql[base:f_start]
    inside = [t for t in tokens if base <= t[0] < f_start]
    if not select_list.strip():
        raise SpecError("transform.select", "the SELECT list is empty")
    if inside and inside[0][2] == "word" and sql[inside[0][0]:inside[0][1]].lower() == "distinct":
        raise SpecError("transform.select", "SELECT DISTINCT is not a per-record transform")
    return _items(select_list, inside, base), where


def _names(value: Any, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise SpecError(path, f"expected a non-empty list of names, got {value!r}")
    if len({v.lower() for v in value}) != len(value):
        raise SpecError(path, f"names repeat in {value!r}")
    return tuple(value)


def parse_transform(value: Any) -> Transform | None:
    """Validate ``spec.transform`` (``select``, optional ``columns`` and ``fields``)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SpecError("transform", f"expected a mapping with select (and columns, fields), got {value!r}")
    for key in value:
        if key not in ("select", "columns", "fields"):
            raise SpecError(f"transform.{key}", "unknown field; accepted: select, columns, fields")
    sql = value.get("select")
    if not isinstance(sql, str) or not sql.strip():
        raise SpecError("transform.select", "expected a Spark SQL statement: SELECT <expressions> FROM source "
                        "[WHERE <condition>]")
    items, where = parse_select(sql)
    columns = _names(value.get("columns"), "transform.columns")
    fields = _names(value.get("fields"), "transform.fields")
    for i, name in enumerate(fields):
        if not _IDENT.match(name):
            raise SpecError(f"transform.fields[{i}]", f"expected a SQL identifier (letters, digits, _), got {name!r}")
    if columns and len(columns) != len(items):
        raise SpecError("transform.columns", f"lists {len(columns)} column(s) but the SELECT gives {len(items)} "
                        "item(s) (after expanding $a..$b); give one item per column")
    out = Transform(items=tuple(items), where=where, columns=columns, fields=fields, select=sql)
    if fields and out.field_refs() > len(fields):
        raise SpecError("transform.select", f"${out.field_refs()} is past the {len(fields)} field(s) named in "
                        "transform.fields")
    return out
