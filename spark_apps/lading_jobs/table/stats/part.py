"""Per-part statistics, computed from the Arrow batches while they are written.

Per part: rows, bytes, time range and diff range; per column id: null count and
a lower and upper bound of the non-null values. Bounds are kept in a JSON-friendly
*stats domain*: integers and booleans as themselves, floats as floats (no bounds
when a NaN is present), strings truncated to ``STRING_STATS_LENGTH`` characters
(the lower bound is a prefix, still ≤ every value; the upper bound is a prefix
with its last character incremented, still ≥ every value, and flagged
``maxTruncated`` / ``minTruncated`` so no one mistakes it for a value), decimals
as strings, dates as epoch days, timestamps as epoch microseconds. Other types
(nested, intervals, binary, time, variant) keep only their null count. ``json``
columns also keep statistics per key path (``table.stats.jsonstats``), and so do ``variant``
columns (``table.stats.variantstats``: the same form, marked ``"variant": true``). Any column's
statistics may be missing; readers then assume any value.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import math
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.table import format as fmt
from lading_jobs.table.stats import jsonengine, jsonstats, variantstats
from lading_jobs.table.stats.bounds import truncate_lower, truncate_upper


@dataclass(frozen=True)
class ColumnStats:
    nulls: int | None = None
    min: Any = None
    max: Any = None
    min_truncated: bool = False
    max_truncated: bool = False
    json: dict[str, Any] | None = None
    """A ``json`` or ``variant`` column's statistics per key path (``table.stats.jsonstats``,
    ``table.stats.variantstats``); None: unknown."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: strict RFC 8259, so an infinite float bound is omitted (see ``finite``)."""
        out: dict[str, Any] = {}
        if self.nulls is not None:
            out["nulls"] = self.nulls
        if finite(self.min):
            out["min"] = self.min
        if finite(self.max):
            out["max"] = self.max
        if self.min_truncated:
            out["minTruncated"] = True
        if self.max_truncated:
            out["maxTruncated"] = True
        if self.json is not None:
            out["json"] = jsonstats.trim(self.json)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ColumnStats:
        js = d.get("json")
        return cls(d.get("nulls"), d.get("min"), d.get("max"), bool(d.get("minTruncated")),
                   bool(d.get("maxTruncated")), js if isinstance(js, dict) else None)


@dataclass(frozen=True)
class PartStats:
    rows: int
    bytes: int = 0
    min_time: int | None = None
    max_time: int | None = None
    min_diff: int | None = None
    max_diff: int | None = None
    columns: dict[int, ColumnStats] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "bytes": self.bytes, "minTime": self.min_time, "maxTime": self.max_time,
                "minDiff": self.min_diff, "maxDiff": self.max_diff,
                "columns": {str(k): v.to_dict() for k, v in sorted(self.columns.items())}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PartStats:
        return cls(int(d["rows"]), int(d.get("bytes", 0)), d.get("minTime"), d.get("maxTime"),
                   d.get("minDiff"), d.get("maxDiff"),
                   {int(k): ColumnStats.from_dict(v) for k, v in (d.get("columns") or {}).items()})


def finite(bound: Any) -> bool:
    """Whether a bound is written to JSON: present and not an infinite (or NaN) float.

    JSON has no infinities (RFC 8259), and a reader that maps them to ±1.797e308 would skip a
    part holding ``inf`` for ``x > 1e308``. A missing lower bound means "no lower bound", which
    is what -inf says; a missing upper bound is +inf's meaning; a lower bound of +inf (every
    value is +inf) or an upper bound of -inf only lose pruning when left out, never a row."""
    return bound is not None and not (isinstance(bound, float) and not math.isfinite(bound))


def to_stats_domain(value: Any, naive_utc: bool = False) -> Any:
    """A Python value (a Spark filter literal, an Arrow scalar's ``as_py()``) in the stats domain.

    ``naive_utc``: a naive datetime is a wall-clock value (``timestamp_ntz``), counted as UTC,
    as the writer's statistics count them; otherwise it is in the local zone (as Spark hands
    ``timestamp`` literals)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC) if naive_utc else value.astimezone()
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return None


def comparable(value: Any, numeric_strings: bool) -> Any:
    """A stats-domain value made comparable: decimal columns keep bounds as strings."""
    return decimal.Decimal(value) if numeric_strings and isinstance(value, str) else value


def column_stats(array: pa.ChunkedArray | pa.Array) -> ColumnStats:
    """Statistics of one column's values; bounds only for types with a total order we keep."""
    t = array.type
    nulls = array.null_count
    if nulls == len(array) or not _has_bounds(t):
        return ColumnStats(nulls=nulls)
    if pa.types.is_floating(t) and pc.any(pc.is_nan(array)).as_py():
        return ColumnStats(nulls=nulls)
    mm = pc.min_max(array)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        lo_s, lo_t = truncate_lower(lo)
        hi_s, hi_t = truncate_upper(hi)
        return ColumnStats(nulls, lo_s, hi_s, lo_t, hi_t)
    if pa.types.is_timestamp(t):
        lo, hi = (_micros(v, t) for v in (mm["min"], mm["max"]))
        return ColumnStats(nulls, lo, hi)
    return ColumnStats(nulls, to_stats_domain(lo), to_stats_domain(hi))


def _micros(scalar: pa.Scalar, t: pa.TimestampType) -> int:
    value = scalar.cast(pa.timestamp(t.unit, tz=t.tz)).value
    factor = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 0}[t.unit]
    return int(value * factor) if factor else int(value // 1000)


def _has_bounds(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_decimal(t)
            or pa.types.is_date32(t) or pa.types.is_timestamp(t))


def merge_column(a: ColumnStats, b: ColumnStats, decimal_bounds: bool = False, *,
                 a_rows: int | None = None, b_rows: int | None = None) -> ColumnStats:
    """Statistics of the union of two value sets (``decimal_bounds``: bounds are decimal strings).

    ``a_rows`` / ``b_rows`` are the rows each side describes. A side without bounds
    widens the union to "no bounds" unless it is known to hold only NULLs (its
    ``nulls`` equals its rows): a side with values but no bounds (a NaN, a type
    without order, statistics dropped) may hold anything. Without the row counts
    every side without bounds counts as holding values (conservative).
    """
    nulls = None if a.nulls is None or b.nulls is None else a.nulls + b.nulls
    js = jsonstats.merge(a.json, b.json)
    if _only_nulls(a, a_rows):
        return ColumnStats(nulls, b.min, b.max, b.min_truncated, b.max_truncated, js)
    if _only_nulls(b, b_rows):
        return ColumnStats(nulls, a.min, a.max, a.min_truncated, a.max_truncated, js)
    lo, lo_t = _pick(a.min, a.min_truncated, b.min, b.min_truncated, min, decimal_bounds)
    hi, hi_t = _pick(a.max, a.max_truncated, b.max, b.max_truncated, max, decimal_bounds)
    return ColumnStats(nulls, lo, hi, lo_t, hi_t, js)


def _only_nulls(c: ColumnStats, rows: int | None) -> bool:
    """Whether ``c`` is known to describe NULLs only (so it does not widen bounds)."""
    return rows is not None and c.nulls is not None and c.nulls == rows


def _pick(x: Any, xt: bool, y: Any, yt: bool, choose: Any, numeric: bool) -> tuple[Any, bool]:
    """The bound of the union and its truncation flag, as ``column_stats`` of all the values
    gives them: on a tie the bound is a value if either side's is (an untruncated string equal
    to the other side's truncated bound is the union's extreme itself), and an upper bound that
    no string of the allowed length can give (None, truncated) stays so."""
    if x is None or y is None:
        return None, (x is None and xt) or (y is None and yt)
    cx, cy = comparable(x, numeric), comparable(y, numeric)
    if cx == cy:
        return x, xt and yt
    return (x, xt) if choose(cx, cy) == cx else (y, yt)


def has_path_stats(field: pa.Field) -> bool:
    """Whether a part's column keeps statistics per key path: a ``json`` or a ``variant`` column."""
    return jsonstats.is_json_field(field) or variantstats.is_variant_field(field)


def path_stats(values: pa.Array | pa.ChunkedArray) -> dict[str, Any] | None:
    """The statistics per key path of a ``json`` column's values (text) or a ``variant`` one's (structs)."""
    if pa.types.is_struct(values.type):
        return variantstats.summarize(values)
    return jsonengine.summarize(values)


def table_stats(table: pa.Table, column_ids: dict[str, int], json_columns: frozenset[str] = frozenset()) -> PartStats:
    """Statistics of a part's rows (``column_ids`` maps user column names to ids; ``json_columns``
    names the ``json`` and ``variant`` ones (``has_path_stats``), which also get statistics per key path)."""
    cols = {cid: column_stats(table.column(name)) for name, cid in column_ids.items()}
    for name in json_columns:
        cid = column_ids[name]
        cols[cid] = dataclasses.replace(cols[cid], json=path_stats(table.column(name)))
    times = pc.min_max(table.column(fmt.TIME_COLUMN)) if table.num_rows else None
    diffs = pc.min_max(table.column(fmt.DIFF_COLUMN)) if table.num_rows else None
    return PartStats(
        rows=table.num_rows,
        min_time=times["min"].as_py() if times else None,
        max_time=times["max"].as_py() if times else None,
        min_diff=diffs["min"].as_py() if diffs else None,
        max_diff=diffs["max"].as_py() if diffs else None,
        columns=cols,
    )


def merge(a: PartStats, b: PartStats, decimal_ids: frozenset[int] = frozenset()) -> PartStats:
    def lo(x: int | None, y: int | None) -> int | None:
        return y if x is None else x if y is None else min(x, y)

    def hi(x: int | None, y: int | None) -> int | None:
        return y if x is None else x if y is None else max(x, y)

    cols = {k: merge_column(a.columns[k], b.columns[k], k in decimal_ids, a_rows=a.rows, b_rows=b.rows)
            if k in a.columns and k in b.columns else ColumnStats()
            for k in set(a.columns) | set(b.columns)}
    return PartStats(a.rows + b.rows, a.bytes + b.bytes, lo(a.min_time, b.min_time), hi(a.max_time, b.max_time),
                     lo(a.min_diff, b.min_diff), hi(a.max_diff, b.max_diff), cols)


class Accumulator:
    """A part's statistics gathered row group by row group, equal to ``table_stats`` of all its rows.

    A writer that hands its rows over in row groups need not keep them until the part
    closes (a compaction part holds ``targetFileSize`` of decoded rows) to compute the
    statistics once: each row group adds its null counts, NaN flags and the minimum and
    maximum of each column, as Arrow values, and ``result`` takes the extremes of those
    and turns them into the stats domain exactly as ``column_stats`` does (truncating a
    string bound once, at the end, so the truncation flags are the whole part's too). A
    string or binary column's ``min_max`` the writer computed already (its footer reserve)
    may be given with the row group; such a column may come as a dictionary array. The one
    difference: a float bound of zero may have the other sign than ``table_stats`` over the
    whole part finds (-0.0 and 0.0 are tied).
    """

    def __init__(self, schema: pa.Schema, column_ids: dict[str, int]) -> None:
        self.positions = {name: schema.get_field_index(name) for name in column_ids}
        self.column_ids = column_ids
        self.types = {name: schema.field(name).type for name in column_ids}
        self.rows = 0
        self.nulls = dict.fromkeys(column_ids, 0)
        self.nan = dict.fromkeys(column_ids, False)
        self.extremes: dict[str, list[pa.Scalar]] = {name: [] for name in column_ids}
        self.json: dict[str, dict[str, Any] | None] = {
            name: path_stats(pa.array([], schema.field(name).type)) for name in column_ids
            if has_path_stats(schema.field(name))}
        self.times: list[int] = []
        self.diffs: list[int] = []

    def add(self, table: pa.Table, bounds: dict[int, tuple[pa.Scalar, pa.Scalar]] | None = None) -> None:
        """One row group's rows (``bounds``: ``min_max`` of some columns, by position in the schema)."""
        if table.num_rows == 0:
            return
        self.rows += table.num_rows
        for name in self.json:
            self.json[name] = jsonstats.merge(self.json[name], path_stats(table.column(name)))
        for name, t in self.types.items():
            column = table.column(name)
            if pa.types.is_dictionary(column.type) and not (bounds and self.positions[name] in bounds):
                column = column.cast(t)  # a dictionary column's values (its bounds usually come with it)
            nulls = column.null_count
            self.nulls[name] += nulls
            if nulls == len(column) or not _has_bounds(t) or self.nan[name]:
                continue
            if pa.types.is_floating(t) and pc.any(pc.is_nan(column)).as_py():
                self.nan[name] = True
                self.extremes[name] = []
                continue
            known = bounds.get(self.positions[name]) if bounds is not None else None
            if known is None:
                mm = pc.min_max(column)
                known = (mm["min"], mm["max"])
            self.extremes[name] += known
        for column, out in ((fmt.TIME_COLUMN, self.times), (fmt.DIFF_COLUMN, self.diffs)):
            mm = pc.min_max(table.column(column))
            out += (mm["min"].as_py(), mm["max"].as_py())

    def result(self) -> PartStats:
        cols = {}
        for name, cid in self.column_ids.items():
            nulls = self.nulls[name]
            js = self.json.get(name)
            if nulls == self.rows or not self.extremes[name]:
                cols[cid] = ColumnStats(nulls=nulls, json=js)
                continue
            found = column_stats(pa.array(self.extremes[name], self.types[name]))
            cols[cid] = ColumnStats(nulls, found.min, found.max, found.min_truncated, found.max_truncated, js)
        return PartStats(
            rows=self.rows,
            min_time=min(self.times) if self.times else None,
            max_time=max(self.times) if self.times else None,
            min_diff=min(self.diffs) if self.diffs else None,
            max_diff=max(self.diffs) if self.diffs else None,
            columns=cols,
        )
