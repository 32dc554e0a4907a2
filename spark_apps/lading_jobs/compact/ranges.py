"""Key ranges for a sorted compaction: samples, boundaries, and which rows fall in which range.

A compaction with ``sortBy`` rewrites its groups as one sort (``compact.rangesort``):
the first sort column's values are cut into ranges of about equal row counts,
and each range becomes its own part(s), so parts cover disjoint ranges of that
column and a filter on it skips all but the parts its range touches.

The order is Arrow's (``sort_indices``, ascending): numbers, then NaN, then
nulls. Boundaries are never NaN or null, so a range is ``[lo, hi)`` over the
ordinary values, and the last range also holds every NaN and null: each row
falls in exactly one range, whatever its value. Everything here is a pure
function of Arrow arrays (no I/O); ``pack``/``unpack`` carry arrays through
the JSON line a task returns (Arrow IPC, base64), exactly, whatever the type.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SAMPLES = 1024
"""Sort keys each group reports (evenly spaced in its sorted order) for choosing boundaries."""


def splittable(t: pa.DataType) -> bool:
    """Types whose values Arrow both sorts and compares in one order (so ranges can be cut)."""
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_date(t)
            or pa.types.is_timestamp(t) or pa.types.is_boolean(t))


def _special(keys: pa.Array) -> pa.Array:
    """True where a key sorts after every boundary: null, or NaN."""
    null = pc.is_null(keys)
    if pa.types.is_floating(keys.type):
        return pc.or_kleene(null, pc.fill_null(pc.is_nan(keys), True))
    return null


def sample(sorted_keys: pa.Array, count: int = SAMPLES) -> pa.Array:
    """Up to ``count`` keys evenly spaced over ``sorted_keys`` (each stands for n/count rows)."""
    n = len(sorted_keys)
    if n == 0:
        return sorted_keys
    positions = np.unique(np.linspace(0, n - 1, min(n, count)).round().astype(np.int64))
    return sorted_keys.take(pa.array(positions))


def boundaries(samples: Sequence[tuple[pa.Array, int]], ranges: int) -> pa.Array | None:
    """Distinct ascending boundaries cutting the sampled rows into ``ranges`` parts of about equal
    row counts; ``samples`` pairs each group's sample with the rows it stands for. ``None`` when
    no group holds an ordinary (non-null, non-NaN) value or one range is asked for."""
    arrays, weights = [], []
    for keys, rows in samples:
        if len(keys) == 0:
            continue
        ordinary = keys.filter(pc.invert(_special(keys)))
        arrays.append(ordinary)
        weights.append(np.full(len(ordinary), rows / len(keys)))
    if ranges <= 1 or not arrays or sum(len(a) for a in arrays) == 0:
        return None
    keys = pa.concat_arrays(arrays)
    order = pc.sort_indices(keys).to_numpy()
    keys = keys.take(pa.array(order))
    cumulative = np.cumsum(np.concatenate(weights)[order])
    total = cumulative[-1]
    picks = [min(int(np.searchsorted(cumulative, total * j / ranges, side="left")), len(keys) - 1)
             for j in range(1, ranges)]
    cut = pc.unique(keys.take(pa.array(picks, pa.int64())))
    # the smallest key as a boundary would only make an empty first range
    cut = cut.filter(pc.greater(cut, keys[0]))
    return cut if len(cut) else None


def bounds(cuts: pa.Array | None, r: int) -> tuple[pa.Scalar | None, pa.Scalar | None]:
    """Range ``r``'s ``[lo, hi)``: ``None`` for an open end (the last range also holds NaN and null)."""
    n = 0 if cuts is None else len(cuts)
    lo = cuts[r - 1] if cuts is not None and r > 0 else None
    hi = cuts[r] if cuts is not None and r < n else None
    return lo, hi


def count(cuts: pa.Array | None) -> int:
    return 1 + (0 if cuts is None else len(cuts))


def in_range(keys: pa.Array | pa.ChunkedArray, lo: pa.Scalar | None, hi: pa.Scalar | None) -> pa.Array:
    """A mask of the keys in ``[lo, hi)``; with ``hi`` open, NaN and null too (see the module doc)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    mask = pa.array(np.ones(len(keys), dtype=bool))
    if lo is not None:
        mask = pc.and_(mask, pc.fill_null(pc.greater_equal(keys, lo), False))
    if hi is not None:
        return pc.and_(mask, pc.fill_null(pc.less(keys, hi), False))
    return pc.or_(mask, _special(keys))


def overlapping(firsts: pa.Array, lasts: pa.Array, lo: pa.Scalar | None, hi: pa.Scalar | None) -> list[int]:
    """Indexes of sorted batches (first and last key of each) that may hold keys of ``[lo, hi)``."""
    need = pa.array(np.ones(len(firsts), dtype=bool))
    if hi is not None:  # a batch starting with NaN or null holds nothing but those: the last range's
        need = pc.and_(need, pc.fill_null(pc.less(firsts, hi), False))
    if lo is not None:  # a batch ending in NaN or null reaches past every boundary
        need = pc.and_(need, pc.or_(pc.fill_null(pc.greater_equal(lasts, lo), False), _special(lasts)))
    return np.flatnonzero(need.to_numpy(zero_copy_only=False)).tolist()


def pack(array: pa.Array) -> str:
    """An array as text for a JSON line (Arrow IPC, base64): exact for every type."""
    batch = pa.record_batch([array], names=["v"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")


def unpack(text: str) -> pa.Array:
    table = pa.ipc.open_stream(pa.py_buffer(base64.b64decode(text))).read_all()
    column = table.column(0)
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
