"""The text primitives against Arrow's own renderings (pure, no Spark)."""

from __future__ import annotations

import decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as s

from lading_jobs.formats import text

DAY = 86_400 * 1_000_000
YEAR_1, YEAR_10000 = -62_135_596_800 * 1_000_000, 253_402_300_800 * 1_000_000  # 0001-01-01, 10000-01-01


def _arrow_text(arr: pa.Array, sep: str, prefix: str, suffix: str) -> pa.Array:
    cast = arr.cast(pa.string())
    return pc.binary_join_element_wise(prefix, pc.replace_substring(cast, " ", sep, max_replacements=1), suffix, "")


@settings(max_examples=300, deadline=None)
@given(center=s.integers(YEAR_1 - 400 * DAY, YEAR_10000 + 400 * DAY), spread=s.sampled_from([0, 1, DAY, 300 * DAY]),
       seed=s.integers(0, 2**32 - 1), size=s.integers(1, 3000), nulls=s.booleans(), start=s.integers(0, 50),
       style=s.sampled_from([(" ", "", ""), (" ", "", "+00"), ("T", '"', 'Z"'), ("T", '"', '"')]))
def test_timestamp_text_is_arrows_cast(center: int, spread: int, seed: int, size: int, nulls: bool, start: int,
                                       style: tuple[str, str, str]) -> None:
    # Dates come from a table of the array's days and times from tables of seconds and digit pairs;
    # before year 1000, before 1970 (floor division), around year 10000 and in slices, the text must
    # still be Arrow's, which the CSV and JSON lines encoders wrote before.
    rng = np.random.default_rng(seed)
    values = rng.integers(center - spread, center + spread + 1, size + start)
    arr = pa.array(values, pa.timestamp("us"), mask=(rng.random(len(values)) < 0.2) if nulls else None)
    arr = arr.slice(start)
    try:
        expected = _arrow_text(arr, *style)
    except pa.ArrowInvalid:  # beyond what Arrow can print
        return
    assert text.render_timestamp(arr, *style).equals(expected)


def test_timestamps_within_the_arrays_days_take_the_tables_not_arrows_cast(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: Any) -> Any:
        raise AssertionError("took Arrow's cast")

    monkeypatch.setattr(text, "_timestamp_cast", refused)
    arr = pa.array([1_704_067_200_123_456 + i * 1_000_003 for i in range(10_000)] + [None], pa.timestamp("us"))
    got = text.render_timestamp(arr, suffix="+00")
    assert got[0].as_py() == "2024-01-01 00:00:00.123456+00" and got[-1].as_py() is None
    assert got.null_count == 1 and set(pc.utf8_length(got).drop_null().to_pylist()) == {29}


@settings(max_examples=400, deadline=None)
@given(precision=s.integers(1, 38), data=s.data(), seed=s.integers(0, 2**32 - 1), size=s.integers(1, 2000),
       nulls=s.booleans(), start=s.integers(0, 50))
def test_decimal_text_is_arrows_cast(precision: int, data: Any, seed: int, size: int, nulls: bool,
                                     start: int) -> None:
    # Every precision and scale, small and extreme magnitudes, both signs, nulls and slices: the text
    # must be Arrow's cast, which the CSV and JSON lines encoders wrote before, in plain digits
    # where Arrow writes an exponent (1E-7 for scale 7 is 0.0000001, as PostgreSQL writes it).
    scale = data.draw(s.integers(0, precision))
    rng = np.random.default_rng(seed)
    limit = min(10**precision - 1, 2**63 - 1)  # beyond 64 bits Arrow's cast renders anyway
    small = rng.integers(-min(limit, 1000), min(limit, 1000) + 1, size + start)
    big = rng.integers(-limit, limit, size + start, endpoint=True)
    unscaled = np.where(np.arange(size + start) % 3 == 0, big, small)
    unscaled[:4] = [limit, -limit, 0, -1][: len(unscaled)]
    mask = rng.random(len(unscaled)) < 0.2 if nulls else None
    arr = pa.array(unscaled, pa.int64(), mask=mask).cast(pa.decimal128(19, 0)).cast(pa.decimal128(precision, 0))
    arr = arr.view(pa.decimal128(precision, scale))
    arr = arr.slice(start)
    assert text.render_decimal(arr).equals(plain(arr))


def test_decimals_of_up_to_18_digits_and_scale_6_take_the_fast_rendering(monkeypatch: pytest.MonkeyPatch) -> None:
    arr = pa.array([-1, 0, 5, None, 10**16 - 1, -(10**16 - 1)], pa.int64()).cast(pa.decimal128(19, 0)) \
        .cast(pa.decimal128(16, 0)).view(pa.decimal128(16, 6))
    expected = arr.cast(pa.string())
    assert expected.to_pylist() == ["-0.000001", "0.000000", "0.000005", None, "9999999999.999999",
                                    "-9999999999.999999"]

    def refused(*args: Any) -> Any:
        raise AssertionError("took Arrow's cast")

    monkeypatch.setattr(text, "_decimal_cast", refused)
    assert text.render_decimal(arr).equals(expected)


@pytest.mark.parametrize(("precision", "scale"), [(p, sc) for p in [*range(1, 20), 38] for sc in range(min(p, 9) + 1)])
def test_every_small_scale_renders_as_arrows_cast(precision: int, scale: int) -> None:
    # around where Arrow switches to exponents (scale 7 and more, few digits: 0E-7, 1E-7)
    limit = min(10**precision - 1, 2**63 - 1)
    values = sorted({v for v in (0, 1, -1, 9, -9, 10, -10, 99, 123_456, -1_234_567, limit, -limit, limit // 7)
                     if abs(v) <= limit})
    arr = pa.array([*values, None], pa.int64()).cast(pa.decimal128(19, 0)).cast(pa.decimal128(precision, 0))
    arr = arr.view(pa.decimal128(precision, scale))
    assert text.render_decimal(arr).equals(plain(arr))


def plain(arr: pa.Array) -> pa.Array:
    """Arrow's text of each decimal, written in plain digits (Python's ``f`` format keeps every digit)."""
    return pa.array([None if v is None else format(decimal.Decimal(v), "f") for v in arr.cast(pa.string()).to_pylist()],
                    pa.string())


@pytest.mark.parametrize(("value", "type_", "expected"), [
    ("0E-10", pa.decimal128(20, 10), "0.0000000000"), ("-1.000E-7", pa.decimal128(20, 10), "-0.0000001000"),
    ("9999999999999999999999999999.9999999999", pa.decimal128(38, 10), "9999999999999999999999999999.9999999999"),
    ("-1E-38", pa.decimal128(38, 38), "-0." + "0" * 37 + "1"), ("1E-7", pa.decimal256(40, 7), "0.0000001"),
])
def test_decimals_are_written_in_plain_digits_at_every_scale(value: str, type_: pa.DataType, expected: str) -> None:
    assert text.render_decimal(pa.array([decimal.Decimal(value), None], type_)).to_pylist() == [expected, None]


@pytest.mark.parametrize("type_", [pa.float64(), pa.float32()])
def test_floats_are_always_spelled_as_floats(type_: pa.DataType) -> None:
    arr = pa.array([-0.0, 0.0, 100.0, -3.0, 1e16, 1.5, 1e-7, None, float("nan"), float("-inf")], type_)
    got = text.render_float(arr, "NaN", "Infinity", "-Infinity").to_pylist()
    assert got == ["-0.0", "0.0", "100.0", "-3.0", "1e+16", "1.5", "1e-7", None, "NaN", "-Infinity"]
