"""Key buckets: which of ``n`` read tasks keeps a row of an upsert or diff table.

Every task of a consolidating read fetches all planned parts and keeps the rows
whose key falls in its bucket, so all rows of one key must land in the same
bucket whichever part holds them. The bucket is therefore a function of the key's
*values in the table's column types* only: each key column is first cast to the
type the table schema gives it (so an older part written before a type change,
a dictionary-encoded column, or a column a part lacks and reads as its default,
all look alike), then hashed value by value with NULL as its own value. Nothing
depends on the null pattern, chunking or physical type of the part (pandas-based
hashing did: an int column with a NULL became float64, and 5 and 5.0 hashed
apart, bringing retracted and deleted rows back).

Equal keys in the sense of the consolidation (Arrow's group-by) hash equal; the
reverse need not hold (floats: -0.0 and 0.0, and every NaN, share a hash), as a
collision only puts two keys in the same task. Hashing is vectorised (numpy over
Arrow buffers); nested types never identify rows (``log.validate_identity_types``)
and are refused here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_NULL = np.uint64(0x6A09E667F3BCC909)
"""The hash of a NULL key value (any type)."""
_COMBINE = np.uint64(0x9E3779B97F4A7C15)
_BYTE_BASE = np.uint64(0x100000001B3)
_SLICE_BYTES = 1 << 22
"""Strings and binaries are hashed in row slices of about this many bytes (bounded memory)."""


def bucket_of(columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[pa.DataType],
              buckets: int) -> np.ndarray:
    """Per row, its key's bucket in ``range(buckets)``; ``columns[i]`` is read as ``types[i]``."""
    return key_hashes(columns, types) % np.uint64(buckets)


def key_hashes(columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[pa.DataType]) -> np.ndarray:
    """A uint64 hash per row of the key ``columns`` (equal lengths), each cast to ``types[i]``."""
    if len(columns) != len(types) or not columns:
        raise ValueError(f"key_hashes: {len(columns)} columns, {len(types)} types")
    out: np.ndarray | None = None
    for col, type_ in zip(columns, types, strict=True):
        h = column_hashes(col, type_)
        out = h if out is None else _mix(out * _COMBINE + h)
    assert out is not None
    return out


def column_hashes(col: pa.Array | pa.ChunkedArray, type_: pa.DataType) -> np.ndarray:
    """A uint64 hash per value of ``col`` cast to ``type_``; every NULL hashes to the same value."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    pieces = [_array_hashes(c, type_) for c in chunks if len(c)]
    return np.concatenate(pieces) if pieces else np.zeros(0, np.uint64)


def _array_hashes(arr: pa.Array, type_: pa.DataType) -> np.ndarray:
    if not arr.type.equals(type_):
        arr = arr.cast(type_)  # decodes dictionaries, widens older parts' types
    n = len(arr)
    if arr.null_count == n:
        return np.full(n, _NULL, np.uint64)
    values = _value_hashes(arr)
    if arr.null_count == 0:
        return values
    valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), dtype=bool)
    return np.where(valid, values, _NULL)


def _value_hashes(arr: pa.Array) -> np.ndarray:
    """Hashes of the values (slots under NULL hash to anything; the caller masks them)."""
    t = arr.type
    if pa.types.is_boolean(t):
        return _mix(np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=np.uint64) + 1)
    if pa.types.is_floating(t):
        v = np.asarray(pc.fill_null(arr, 0).to_numpy(zero_copy_only=False), dtype=np.float64) + 0.0  # -0.0 → 0.0
        v[np.isnan(v)] = np.nan  # one NaN
        return _mix(v.view(np.uint64))
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) \
            or pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return _bytes_hashes(arr.cast(pa.large_binary()))
    if pa.types.is_nested(t) or pa.types.is_null(t) or t.bit_width % 8:
        raise TypeError(f"cannot bucket rows by a key of type {t}")
    return _fixed_width_hashes(arr)


def _fixed_width_hashes(arr: pa.Array) -> np.ndarray:
    """Integers, decimals, dates, times, timestamps, durations, intervals: their stored bytes."""
    width = arr.type.bit_width // 8
    n = len(arr)
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(n, np.uint64)
    raw = np.frombuffer(buf, dtype=np.uint8)[arr.offset * width:(arr.offset + n) * width]
    if width <= 8:
        return _mix(raw.view(f"<u{width}").astype(np.uint64))
    words = raw.view("<u8").reshape(n, width // 8)
    out = np.zeros(n, np.uint64)
    for i in range(words.shape[1]):
        out = _mix(out * _COMBINE + words[:, i])
    return out


def _bytes_hashes(arr: pa.Array) -> np.ndarray:
    """A polynomial hash of each value's bytes (``arr`` is large_binary), mixed with its length."""
    n = len(arr)
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset:arr.offset + n + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    out = np.empty(n, np.uint64)
    start = 0
    while start < n:  # one pass per slice of about _SLICE_BYTES bytes, never per row
        stop = int(np.searchsorted(offsets, offsets[start] + _SLICE_BYTES, side="right")) - 1
        stop = min(n, max(stop, start + 1))
        lo, hi = int(offsets[start]), int(offsets[stop])
        starts, lens = offsets[start:stop] - lo, lengths[start:stop]
        position = np.arange(hi - lo, dtype=np.int64) - np.repeat(starts, lens)
        terms = (data[lo:hi].astype(np.uint64) + 1) * _powers(int(lens.max()))[position]
        sums = np.concatenate((np.zeros(1, np.uint64), np.cumsum(terms, dtype=np.uint64)))
        out[start:stop] = sums[starts + lens] - sums[starts]  # modulo 2**64, as the sums
        start = stop
    return _mix(out * _COMBINE + lengths.astype(np.uint64))


def _powers(k: int) -> np.ndarray:
    """``_BYTE_BASE ** i`` modulo 2**64 for i in range(max(k, 1))."""
    p = np.full(max(k, 1), _BYTE_BASE, np.uint64)
    p[0] = 1
    return np.cumprod(p, dtype=np.uint64)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, element-wise (uint64 arithmetic wraps)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))
