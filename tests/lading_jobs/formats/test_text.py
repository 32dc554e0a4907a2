"""The text primitives against Arrow's own renderings (pure, no Spark)."""

from __future__ import annotations

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
