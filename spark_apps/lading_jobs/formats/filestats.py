"""Per-column statistics of one output file (rows, min, max, null count), kept while writing.

Computed per Arrow batch with ``pyarrow.compute`` and merged, never by reading
the file back. Values are made JSON-safe for the manifest: decimals as strings
(exact), temporal values as ISO 8601, binary as hex. A float column holding NaN
has no bounds (Spark orders NaN above every number, JSON has no NaN, and a reader
pruning by a NaN-free max would skip rows: the table's statistics drop them too), and
an infinite bound is left out (JSON has no infinity). Nested
columns get a null count only. Long strings keep a truncated ``min`` (still a
lower bound) and drop ``max`` (a truncated max would not be an upper bound).

A Parquet file need not compute every bound a second time: its writer already
did, per row group, in the footer. ``footer_bound`` turns a column chunk's
footer statistics back into the value ``pyarrow.compute.min_max`` gives, for the
types where the two are provably the same (``FOOTER_EXACT``: integers, booleans,
decimals, dates, microsecond times, timestamps and durations: whole numbers the
writer compares as ``min_max`` does, stored unchanged). Floats stay computed:
Parquet writes a zero minimum as -0.0 and a zero maximum as +0.0 whatever the
rows held. Strings and binaries stay computed too: the writer drops their bounds
over 4 KiB (the Parquet file computes them once for its footer reserve and
hands them over, see ``parquetfile``). A chunk whose bounds are missing while
it holds values loses the column's bounds (``ColumnStats.lose``): conservative.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

MAX_STAT_CHARS = 256


def _orderable(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_temporal(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_boolean(t))


def json_value(value: Any) -> Any:
    """A statistic as JSON: exact for decimals, ISO 8601 for time, hex for bytes."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # plain digits at the column's scale: str() may say "0E-10"
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def bounds(column: pa.Array | pa.ChunkedArray) -> tuple[Any, Any]:
    """(min, max) of a column with values, as Python values (NaN possible for floats)."""
    if pa.types.is_duration(column.type):  # pyarrow has no min_max kernel for durations
        mm = pc.min_max(column.cast(pa.int64()))
        lo, hi = (pa.scalar(mm[k].as_py(), column.type).as_py() for k in ("min", "max"))
        return lo, hi
    mm = pc.min_max(column)
    return mm["min"].as_py(), mm["max"].as_py()


def footer_physicals(t: pa.DataType) -> tuple[str, ...]:
    """The Parquet physical types whose footer bounds equal ``bounds`` for Arrow type ``t``
    (none: they may differ, see the module doc). A decimal's are any of the three a writer
    may store it in: signed integers up to precision 9 or 18 (Spark's way, and lading's in
    unloads), fixed-length big-endian bytes."""
    if pa.types.is_boolean(t):
        return ("BOOLEAN",)
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_date32(t):
        return ("INT32",)
    if pa.types.is_int64(t) or ((pa.types.is_timestamp(t) or pa.types.is_time64(t) or pa.types.is_duration(t))
                                and t.unit == "us"):
        return ("INT64",)
    if pa.types.is_decimal128(t):
        return ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY")
    return ()


def footer_bound(raw: Any, t: pa.DataType) -> Any:
    """A footer's raw min or max (``Statistics.min_raw``) of a column of Arrow type ``t``
    (``footer_physicals(t)`` not empty) as the Python value ``bounds`` gives."""
    if pa.types.is_decimal128(t):  # the unscaled integer, or its big-endian two's complement bytes
        unscaled = int.from_bytes(raw, "big", signed=True) if isinstance(raw, bytes) else int(raw)
        data = pa.py_buffer(unscaled.to_bytes(16, "little", signed=True))
        return pa.Array.from_buffers(t, 1, [None, data])[0].as_py()
    if pa.types.is_boolean(t) or pa.types.is_integer(t):
        return pa.scalar(raw, t).as_py()
    if pa.types.is_string(t) or pa.types.is_large_string(t):  # a UTF-8 value (raises if it is not one)
        return raw.decode("utf-8") if isinstance(raw, bytes) else raw
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return bytes(raw)
    storage = pa.int32() if t.bit_width == 32 else pa.int64()
    return pa.array([raw], storage).view(t)[0].as_py()


def chunk_exact(statistics: Any, rows: int) -> bool:
    """Whether a column chunk's footer ``statistics`` of ``rows`` rows give what computing them
    from the values would (for a type of ``footer_physicals``): a null count, and bounds unless
    every value is NULL."""
    return (statistics is not None and statistics.has_null_count
            and (statistics.has_min_max or statistics.null_count == rows))


class ColumnStats:
    __slots__ = ("name", "orderable", "nulls", "min", "max", "lost", "nan")

    def __init__(self, name: str, orderable: bool) -> None:
        self.name, self.orderable = name, orderable
        self.nulls = 0
        self.min: Any = None
        self.max: Any = None
        self.lost = False
        self.nan = False

    def update(self, column: pa.Array | pa.ChunkedArray) -> None:
        self.nulls += column.null_count
        if not self.orderable or column.null_count == len(column):
            return
        self.note_nan(column)
        self.merge(*bounds(column))

    def note_nan(self, column: pa.Array | pa.ChunkedArray) -> None:
        """Remember whether a float column holds NaN (``min_max`` skips NaN)."""
        if not self.nan and pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py():
            self.nan = True

    def merge(self, lo: Any, hi: Any) -> None:
        """Widen the bounds to ``lo``/``hi`` (None, NaN: nothing to add)."""
        if isinstance(lo, float) and math.isnan(lo):
            lo = None
        if isinstance(hi, float) and math.isnan(hi):
            hi = None
        if lo is not None and (self.min is None or lo < self.min):
            self.min = lo
        if hi is not None and (self.max is None or hi > self.max):
            self.max = hi

    def lose(self) -> None:
        """Some rows' values are unknown: no bounds at all (conservative)."""
        self.lost = True

    def absorb(self, other: ColumnStats) -> None:
        """Add the statistics of other rows of this column."""
        self.nulls += other.nulls
        self.lost = self.lost or other.lost
        self.nan = self.nan or other.nan
        self.merge(other.min, other.max)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nullCount": self.nulls}
        if self.lost or self.nan:
            return out
        lo, hi = self.min, self.max
        if isinstance(lo, str | bytes) and len(lo) > MAX_STAT_CHARS:
            lo = lo[:MAX_STAT_CHARS]
        if isinstance(hi, str | bytes) and len(hi) > MAX_STAT_CHARS:
            hi = None
        for key, value in (("min", json_value(lo)), ("max", json_value(hi))):
            if value is not None:  # None, or an infinity JSON cannot hold: no bound
                out[key] = value
        return out


class FileStats:
    """Statistics of the rows written to one file (``columns=False``: the row count only)."""

    def __init__(self, schema: pa.Schema, columns: bool = True) -> None:
        self.rows = 0
        self.columns = [ColumnStats(f.name, _orderable(f.type)) for f in schema] if columns else []
        self.types = [f.type for f in schema]

    def update(self, batch: pa.RecordBatch | pa.Table, given: dict[int, tuple[Any, Any]] | None = None,
               later: frozenset[int] = frozenset()) -> None:
        """Count ``batch``. ``given``: bounds of some columns (by position) already computed by
        ``bounds``; ``later``: columns whose bounds the caller adds itself (``add_footer``):
        only their nulls are counted here."""
        self.rows += batch.num_rows
        if not self.columns:
            return
        for i, (stats, column) in enumerate(zip(self.columns, batch.columns, strict=True)):
            if i in later:
                stats.nulls += column.null_count
            elif given is not None and i in given:
                stats.nulls += column.null_count
                stats.note_nan(column)
                stats.merge(*given[i])
            else:
                stats.update(column)

    def update_columns(self, rows: int, columns: dict[int, pa.Array | pa.ChunkedArray]) -> None:
        """Count ``rows`` rows of which only ``columns`` (by position) are at hand: the other
        columns' statistics are the caller's to add (``add_chunk``)."""
        self.rows += rows
        for i, column in columns.items() if self.columns else ():
            self.columns[i].update(column)

    def add_chunk(self, position: int, statistics: Any, rows: int, nulls: bool = True) -> None:
        """Bounds of ``rows`` rows of column ``position`` from a Parquet column chunk's footer
        ``statistics`` (``pyarrow.parquet.Statistics`` or None), boxed by ``footer_bound``,
        and with ``nulls`` their null count too (then ``chunk_exact`` must hold); a chunk
        without bounds that holds values loses the column's bounds."""
        if not self.columns:
            return
        stats, s = self.columns[position], statistics
        if nulls:
            stats.nulls += s.null_count
        if s is not None and s.has_min_max:
            t = self.types[position]
            stats.merge(footer_bound(s.min_raw, t), footer_bound(s.max_raw, t))
        elif s is None or not s.has_null_count or s.null_count != rows:
            stats.lose()

    def add_footer(self, metadata: Any, columns: tuple[tuple[int, int], ...]) -> None:
        """Bounds of the ``columns`` (position, Parquet leaf index) from a written file's footer
        (``pyarrow.parquet.FileMetaData``): every row group's chunk statistics (``add_chunk``;
        the null counts are counted from the rows, ``update``'s ``later``)."""
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            for position, leaf in columns:
                self.add_chunk(position, group.column(leaf).statistics, group.num_rows, nulls=False)

    def absorb(self, other: FileStats) -> None:
        """Add the statistics of other rows of the same schema (a row group counted apart)."""
        self.rows += other.rows
        for mine, theirs in zip(self.columns, other.columns, strict=True):
            mine.absorb(theirs)

    def to_dict(self) -> dict[str, Any]:
        return {c.name: c.to_dict() for c in self.columns}
