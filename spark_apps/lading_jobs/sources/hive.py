"""Hive-partitioned file sets: ``col=value/`` directories read back as columns, pruned by
the query's filters before they are listed.

An unload with ``partitionBy`` writes ``col=value/`` directories (``unload.naming``): names
and values escaped as Hive's ``FileUtils.escapePathName`` does (``%XX`` for
``"#%'*/:=?\\{[]^``, DEL and control characters), NULL, and the empty string with it, as
``__HIVE_DEFAULT_PARTITION__``. ``unescape`` is Hive's ``unescapePathName`` (a ``%`` and two
hex digits is that character; any other ``%`` stays), so every name and value comes back as
written, the empty string as NULL (Hive and Spark read it so too).

Listing (``list_partitioned``) walks the tree one level at a time (``Storage.list_level``): a
directory is entered only when the filters pushed on the partition columns may hold for its
value (the inclusive rules of ``table.filters.interp``, the other columns still unknown, so
"might match"), so a pruned directory is never listed. Files must all lie at the same depth,
under one ``col=value`` directory per partition column, in the same order.

Types: the ``partitionColumns`` given (name and a flat Spark SQL type), else inferred from
every value seen (the whole tree is then listed on the driver, once): ``int``, else
``bigint``, for integers; ``date`` for ``YYYY-MM-DD``; ``timestamp`` for ``YYYY-MM-DD
HH:MM:SS[.ffffff]`` (as the unload writes them, UTC); anything else ``string``, so no number is
rounded (``1.10`` stays ``1.10``: cast it in the query, or type it in ``partitionColumns``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.storage import ObjectInfo, Storage
from lading_spec.errors import SpecError

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_ESCAPED = re.compile(r"%([0-9A-Fa-f]{2})")
_INT = re.compile(r"[+-]?\d+$")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}$")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?$")


class PartitionError(ValueError):
    """A directory of a Hive-partitioned file set is not what the layout says."""


def unescape(text: str) -> str:
    """Hive's ``FileUtils.unescapePathName``: ``%2F`` is ``/``; a ``%`` not followed by two hex
    digits stays as it is."""
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), text)


def split_dir(segment: str) -> tuple[str, str | None]:
    """``col=value`` (one path segment, escaped) as (column, value); NULL for
    ``__HIVE_DEFAULT_PARTITION__``. Raises ``PartitionError`` for a segment without ``=``."""
    name, sep, value = segment.partition("=")
    if not sep or not name:
        raise PartitionError(f"{segment!r} is no col=value directory")
    return unescape(name), None if value == HIVE_NULL else unescape(value)


def path_values(root: str, uri: str) -> list[tuple[str, str | None]]:
    """The (column, value) pairs the directories between ``root`` and the file ``uri`` spell."""
    return [split_dir(segment) for segment in uri[len(root):].split("/")[:-1]]


@dataclass(frozen=True)
class PartitionedFile:
    """A listed file and the partition values of the directories above it, in order."""

    info: ObjectInfo
    values: tuple[str | None, ...]


@dataclass(frozen=True)
class Listing:
    columns: tuple[str, ...]  # the partition columns, outermost first
    files: tuple[PartitionedFile, ...]
    listed: int  # directory listings made (one per directory entered)


Prune = Callable[[dict[str, str | None]], bool]
"""Whether a directory whose known partition values are these may hold a matching row."""


def list_partitioned(storage: Storage, root: str, columns: Sequence[str] = (), *,
                     prune: Prune | None = None, keep: Callable[[str], bool] = lambda uri: True,
                     field: str = "from.files") -> Listing:
    """The files under ``root`` (a prefix ending in ``/``), walking ``col=value/`` directories
    level by level; ``columns``: the partition columns expected (else found from the first
    path); ``prune``: directories for which it says False are not entered; ``keep``: which
    file URIs count (hidden names and a pattern are the caller's)."""
    found: list[PartitionedFile] = []
    names: list[str] = list(columns)
    listings = 0
    depth: int | None = len(names) if names else None
    stack: list[tuple[str, tuple[str | None, ...]]] = [(root, ())]
    while stack:
        prefix, values = stack.pop()
        dirs, files = storage.list_level(prefix)
        listings += 1
        level = len(values)
        files = [f for f in files if keep(f.uri)]
        if files:
            if depth is None:
                depth = level
            if level != depth:
                raise SpecError(field, f"{files[0].uri} lies {level} directories deep, others {depth}: every file "
                                "of a Hive-partitioned file set sits under one col=value directory per partition "
                                "column")
            found += [PartitionedFile(f, values) for f in files]
        dirs = [d for d in dirs if not d[len(prefix):].startswith((".", "_"))]  # hidden, as files are
        if dirs and depth is not None and level >= depth:
            raise SpecError(field, f"{dirs[0]} lies below files of the set ({prefix}): every file of a "
                            "Hive-partitioned file set sits under one col=value directory per partition column")
        entered = []
        for d in dirs:
            segment = d[len(prefix):].rstrip("/")
            try:
                name, value = split_dir(segment)
            except PartitionError as e:
                raise SpecError(field, f"{d}: {e}; a Hive-partitioned file set holds its files under "
                                "col=value directories (partitioning: hive)") from e
            if level < len(names):
                if name != names[level]:
                    raise SpecError(field, f"{d}: partition column {name!r} where {names[level]!r} was "
                                    f"expected (partition columns, outermost first: {', '.join(names)})")
            else:
                names.append(name)
            known = dict(zip(names, (*values, value), strict=False))
            if prune is not None and not prune(known):
                continue
            entered.append((d, (*values, value)))
        stack.extend(reversed(entered))
    found.sort(key=lambda f: f.info.uri)
    return Listing(tuple(names), tuple(found), listings)


# -- types -----------------------------------------------------------------------------------
FLAT_TYPES = re.compile(r"(string|boolean|tinyint|smallint|int|bigint|float|double|date|timestamp|timestamp_ntz"
                        r"|decimal\(\d+,\s*\d+\))$")


def infer_type(values: Sequence[str | None]) -> str:
    """The type of a partition column from its values (see the module doc)."""
    seen = [v for v in values if v is not None]
    if not seen:
        return "string"
    if all(_INT.match(v) for v in seen):
        ints = [int(v) for v in seen]
        if all(-(2**31) <= i < 2**31 for i in ints):
            return "int"
        if all(-(2**63) <= i < 2**63 for i in ints):
            return "bigint"
        return "string"
    for pattern, type_ in ((_DATE, "date"), (_TIMESTAMP, "timestamp")):
        if all(pattern.match(v) for v in seen):
            try:
                parse_values(seen, type_)
            except ValueError:
                return "string"
            return type_
    return "string"


def arrow_type(type_: str) -> pa.DataType:
    from lading_jobs.formats import types

    return types.arrow_type_of(type_)


def parse_values(values: Sequence[str | None], type_: str) -> pa.Array:
    """The values (directory text, NULL as None) as an Arrow array of ``type_``; raises
    ValueError naming the first value that is not one."""
    target = arrow_type(type_)
    text = pa.array(list(values), pa.string())
    try:
        if pa.types.is_timestamp(target):
            naive = pc.cast(pc.replace_substring(text, "T", " "), pa.timestamp(target.unit))
            return naive.cast(target)  # as the unload writes them: UTC
        if pa.types.is_boolean(target):
            low = pc.utf8_lower(text)
            if not pc.all(pc.fill_null(pc.is_in(low, value_set=pa.array(["true", "false"])), True)).as_py():
                raise pa.ArrowInvalid("not true or false")
            return pc.equal(low, "true")
        return pc.cast(text, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        if len(values) > 1:
            for v in values:
                parse_values([v], type_)  # raises naming the first value that is not one
        raise ValueError(f"{values[0]!r} is not a {type_}") from e


def column_types(listing: Listing, given: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(name, type) per partition column: the given types, else inferred from the listing."""
    if given:
        return list(given)
    return [(name, infer_type([f.values[i] for f in listing.files])) for i, name in enumerate(listing.columns)]


def constant_columns(values: tuple[str | None, ...], types: Sequence[tuple[str, str]], rows: int,
                     where: str) -> list[pa.Array]:
    """One file's partition values as ``rows``-long arrays of their types; ``where`` (the
    directory) names a value that is not of its type."""
    out = []
    for value, (name, type_) in zip(values, types, strict=True):
        try:
            one = parse_values([value], type_)
        except ValueError as e:
            raise ValueError(f"{where}: partition column {name!r}: {e}") from e
        out.append(pa.repeat(one[0], rows) if one[0].is_valid else pa.nulls(rows, one.type))
    return out


# -- pruning by pushed filters --------------------------------------------------------------
def pruner(filters: Sequence[Any], types: Sequence[tuple[str, str]]) -> Prune | None:
    """A ``Prune`` from Spark's pushed filters (``pyspark.sql.datasource``) on the partition
    columns: a directory is skipped only when some filter can hold for no row of it (the
    inclusive rules of ``table.filters.interp``, conservative for anything it cannot tell); None
    when no filter is on a partition column."""
    from lading_jobs.table.filters import expr as ex
    from lading_jobs.table.filters import interp
    from lading_jobs.table.schema import TableSchema
    from lading_jobs.table.stats.part import ColumnStats, PartStats, to_stats_domain

    schema = TableSchema.of(list(types))
    bound = ex.bind_pushed(filters, schema)
    if not bound:
        return None
    predicate = ex.and_all(bound)
    by_name = {c.name: c for c in schema.columns}

    def may_hold(known: dict[str, str | None]) -> bool:
        stats = {}
        for name, value in known.items():
            c = by_name.get(name)
            if c is None:
                continue
            try:
                parsed = parse_values([value], c.type)[0].as_py()
            except ValueError:
                return True  # not of its type: the read names it
            if parsed is None:
                stats[c.id] = ColumnStats(nulls=1, min=None, max=None)
            else:
                v = to_stats_domain(parsed, naive_utc=c.type == "timestamp_ntz")
                stats[c.id] = ColumnStats(nulls=0, min=v, max=v) if v is not None else ColumnStats(0, None, None)
        return interp.might_match(predicate, PartStats(rows=1, columns=stats))

    return may_hold
