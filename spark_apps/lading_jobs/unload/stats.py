"""Per-column statistics of one output file (rows, min, max, null count), kept while writing.

Computed per Arrow batch with ``pyarrow.compute`` and merged, never by reading
the file back. Values are made JSON-safe for the manifest: decimals as strings
(exact), temporal values as ISO 8601, binary as hex, NaN left out. Nested
columns get a null count only. Long strings keep a truncated ``min`` (still a
lower bound) and drop ``max`` (a truncated max would not be an upper bound).
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
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


class ColumnStats:
    __slots__ = ("name", "orderable", "nulls", "min", "max")

    def __init__(self, name: str, orderable: bool) -> None:
        self.name, self.orderable = name, orderable
        self.nulls = 0
        self.min: Any = None
        self.max: Any = None

    def update(self, column: pa.Array | pa.ChunkedArray) -> None:
        self.nulls += column.null_count
        if not self.orderable or column.null_count == len(column):
            return
        if pa.types.is_duration(column.type):  # pyarrow has no min_max kernel for durations
            mm = pc.min_max(column.cast(pa.int64()))
            lo, hi = (pa.scalar(mm[k].as_py(), column.type).as_py() for k in ("min", "max"))
        else:
            mm = pc.min_max(column)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if isinstance(lo, float) and math.isnan(lo):
            lo = None
        if isinstance(hi, float) and math.isnan(hi):
            hi = None
        if lo is not None and (self.min is None or lo < self.min):
            self.min = lo
        if hi is not None and (self.max is None or hi > self.max):
            self.max = hi

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nullCount": self.nulls}
        lo, hi = self.min, self.max
        if isinstance(lo, str | bytes) and len(lo) > MAX_STAT_CHARS:
            lo = lo[:MAX_STAT_CHARS]
        if isinstance(hi, str | bytes) and len(hi) > MAX_STAT_CHARS:
            hi = None
        if lo is not None:
            out["min"] = json_value(lo)
        if hi is not None:
            out["max"] = json_value(hi)
        return out


class FileStats:
    """Statistics of the rows written to one file (``columns=False``: the row count only)."""

    def __init__(self, schema: pa.Schema, columns: bool = True) -> None:
        self.rows = 0
        self.columns = [ColumnStats(f.name, _orderable(f.type)) for f in schema] if columns else []

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.rows += batch.num_rows
        if not self.columns:
            return
        for stats, column in zip(self.columns, batch.columns, strict=True):
            stats.update(column)

    def to_dict(self) -> dict[str, Any]:
        return {c.name: c.to_dict() for c in self.columns}
