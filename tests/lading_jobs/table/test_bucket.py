"""Key buckets depend on a key's values in the table's column types only: never on the part's
null pattern, chunking, dictionary encoding, slicing or the older physical type it was
written in (pandas-based hashing gave 5 and 5.0, from an int column with a NULL, two buckets)."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import pytest

from lading_jobs.table import bucket as kb

NAN = float("nan")

# (table type, values of one key without NULLs) per identity column type
CASES = [
    (pa.int8(), [1, -2, 3]), (pa.int16(), [1, -2, 300]), (pa.int32(), [5, -7, 2**31 - 1]),
    (pa.int64(), [5, -7, 2**63 - 1]), (pa.bool_(), [True, False, True]),
    (pa.float32(), [1.5, -2.25, 0.0]), (pa.float64(), [5.0, -0.5, 1e300]),
    (pa.string(), ["a", "", "é" * 40]), (pa.binary(), [b"a", b"", b"\x00" * 9]),
    (pa.decimal128(10, 2), [decimal.Decimal("1.50"), decimal.Decimal("-0.01"), decimal.Decimal("99999999.99")]),
    (pa.date32(), [dt.date(2024, 2, 29), dt.date(1, 1, 1), dt.date(1582, 10, 10)]),
    (pa.timestamp("us", tz="UTC"), [dt.datetime(2024, 1, 1, tzinfo=dt.UTC), dt.datetime(1900, 1, 1, tzinfo=dt.UTC),
                                    dt.datetime(1970, 1, 1, tzinfo=dt.UTC)]),
    (pa.timestamp("us"), [dt.datetime(2024, 1, 1), dt.datetime(1900, 1, 1), dt.datetime(1970, 1, 1)]),
    (pa.time64("us"), [dt.time(1, 2, 3), dt.time(0), dt.time(23, 59)]),
    (pa.duration("us"), [dt.timedelta(seconds=5), dt.timedelta(0), dt.timedelta(days=-1)]),
]


def hashes(values: list[object] | pa.Array | pa.ChunkedArray, type_: pa.DataType) -> list[int]:
    col = values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values, type_)
    return kb.column_hashes(col, type_).tolist()


@pytest.mark.parametrize(("type_", "values"), CASES, ids=[str(t) for t, _ in CASES])
def test_a_value_hashes_alike_with_or_without_nulls_around_it(type_: pa.DataType, values: list[object]) -> None:
    plain = hashes(values, type_)
    assert hashes([None, *values, None], type_)[1:-1] == plain
    assert hashes([None, *values], type_)[0] == hashes([None], type_)[0] == hashes([None, None], type_)[1]
    assert len(set(plain)) == len(set(values))  # distinct values, distinct hashes (for these)


@pytest.mark.parametrize(("type_", "values"), CASES, ids=[str(t) for t, _ in CASES])
def test_chunking_slicing_and_dictionaries_do_not_change_a_hash(type_: pa.DataType, values: list[object]) -> None:
    plain = hashes(values, type_)
    arr = pa.array([None, *values, None], type_)
    assert hashes(arr.slice(1, len(values)), type_) == plain
    assert hashes(pa.chunked_array([arr.slice(1, 1), arr.slice(2, len(values) - 1)], type_), type_) == plain
    assert hashes(pa.chunked_array([pa.array([], type_), arr.slice(1, len(values))]), type_) == plain
    if not pa.types.is_boolean(type_):
        assert hashes(arr.dictionary_encode().slice(1, len(values)), type_) == plain


def test_an_older_physical_type_hashes_as_the_table_type() -> None:
    # a part written when the column was int (or float) reads as the table's bigint (double)
    assert hashes(pa.array([5, None, 7], pa.int32()), pa.int64()) == hashes([5, None, 7], pa.int64())
    assert hashes(pa.array([1.5, None], pa.float32()), pa.float64()) == hashes([1.5, None], pa.float64())
    assert hashes(pa.array(["x", None], pa.large_string()), pa.string()) == hashes(["x", None], pa.string())
    # a column a part lacks reads as typed NULLs, or as an untyped NULL array
    assert hashes(pa.nulls(3, pa.int64()), pa.int64()) == hashes(pa.nulls(3), pa.int64()) == hashes([None] * 3,
                                                                                                     pa.int64())


def test_float_keys_equal_under_group_by_hash_equal() -> None:
    nan_payload = np.array([0x7FF8000000000001], np.uint64).view(np.float64)[0]
    h = hashes(pa.array([0.0, -0.0, NAN, nan_payload, -NAN], pa.float64()), pa.float64())
    assert h[0] == h[1] and h[2] == h[3] == h[4]


def test_string_hashes_see_every_byte_and_the_length() -> None:
    values = ["", "\x00", "\x00\x00", "ab", "ba", "a", "aa", "a" * 1000, "a" * 999 + "b"]
    assert len(set(hashes(values, pa.string()))) == len(values)
    assert hashes(values, pa.string()) == hashes([v.encode() for v in values], pa.binary())


def test_strings_hash_alike_across_slices_of_the_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    values = [f"key-{i}" * (i % 7) for i in range(500)]
    whole = hashes(values, pa.string())
    monkeypatch.setattr(kb, "_SLICE_BYTES", 16)  # many slices, some rows longer than a slice
    assert hashes(values, pa.string()) == whole


def test_several_columns_combine_in_order_and_buckets_spread() -> None:
    a = pa.array(range(20_000), pa.int64())
    b = pa.array([f"s{i % 13}" for i in range(20_000)])
    h = kb.key_hashes([a, b], [pa.int64(), pa.string()])
    assert len(set(h.tolist())) == 20_000
    assert not np.array_equal(kb.key_hashes([b, a], [pa.string(), pa.int64()]), h)
    counts = np.bincount(kb.bucket_of([a, b], [pa.int64(), pa.string()], 8), minlength=8)
    assert counts.min() > 20_000 / 8 * 0.9, counts


def test_nested_types_are_refused() -> None:
    with pytest.raises(TypeError, match="cannot bucket"):
        kb.column_hashes(pa.array([[1], [2]]), pa.list_(pa.int64()))
