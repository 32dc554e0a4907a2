"""The ORDER BY proof and check of the Arrow-only path (pure pyarrow, no Spark)."""

from __future__ import annotations

import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs.unload import sortedness
from lading_jobs.unload.sortedness import Check, NotSorted, before


def test_before_is_lexicographic_with_a_direction_per_key() -> None:
    assert before((1, "b"), (2, "a"), (False, False))
    assert before((1, "a"), (1, "a"), (False, False))  # ties are in order
    assert not before((1, "b"), (1, "a"), (False, False))
    assert before((2, "a"), (1, "z"), (True, False))
    assert before((1, "a"), (1, "b"), (True, False)) and not before((1, "b"), (1, "a"), (True, False))
    assert before(("é",), ("☃",), (False,))  # code point order = UTF-8 byte order, as Spark compares


def _footer_groups(tmp_path: Path, groups: list[list[int | None]], keys: tuple[str, ...] = ("k",),
                   desc: tuple[bool, ...] = (False,)) -> list[tuple[str, tuple, tuple]] | str:  # type: ignore[type-arg]
    with pq.ParquetWriter(tmp_path / "f.parquet", pa.schema([("k", pa.int64()), ("d", pa.decimal128(5, 1))])) as w:
        for g in groups:
            w.write_table(pa.table({"k": pa.array(g, pa.int64()),
                                    "d": pa.array([None if v is None else decimal.Decimal(-v) for v in g],
                                                  pa.decimal128(5, 1))}))
    return sortedness.footer_groups(pq.read_metadata(tmp_path / "f.parquet"), keys, desc, "f")


def test_footer_bounds_prove_row_groups_in_order_or_say_why_not(tmp_path: Path) -> None:
    groups = _footer_groups(tmp_path, [[0, 5], [5, 9], [10, 12]])
    assert not isinstance(groups, str)
    assert [(g[1], g[2]) for g in groups] == [((0,), (5,)), ((5,), (9,)), ((10,), (12,))]
    assert sortedness.unproven(groups, (False,)) is None
    overlapping = _footer_groups(tmp_path, [[0, 6], [5, 9]])
    assert not isinstance(overlapping, str)
    assert sortedness.unproven(overlapping, (False,)) == "the bounds of f row group 0 and f row group 1 overlap " \
                                                         "or are out of order"
    descending = _footer_groups(tmp_path, [[9, 5], [5, 0]], desc=(True,))
    assert not isinstance(descending, str) and sortedness.unproven(descending, (True,)) is None
    # a tie on the first key is settled by the next key's bounds: decimals d = -k descend
    tied = _footer_groups(tmp_path, [[0, 5], [5, 9]], ("k", "d"), (False, True))
    assert not isinstance(tied, str) and sortedness.unproven(tied, (False, True)) is None
    assert _footer_groups(tmp_path, [[0, None]]) == "f row group 0 has NULLs in 'k'"
    assert _footer_groups(tmp_path, [[0]], ("x",)) == "f has no top-level column 'x'"


def test_the_check_finds_rows_out_of_order_within_and_between_batches() -> None:
    def batch(ks: list[int | None], ss: list[str]) -> pa.RecordBatch:
        return pa.RecordBatch.from_pydict({"s": ss, "k": pa.array(ks, pa.int64())})

    check = Check([1, 0], [False, True])  # ORDER BY k, s DESC
    check(batch([1, 1, 2], ["b", "a", "z"]))
    check(batch([], []))
    check(batch([2, 3], ["z", "a"]))
    assert (check.first, check.last) == ((1, "b"), (3, "a"))
    report = check.report()
    assert report is not None
    later = Check([1, 0], [False, True])
    later(batch([3], ["a"]))
    earlier = Check([1, 0], [False, True])
    earlier(batch([2], ["a"]))
    assert sortedness.across_tasks([report, later.report()], (False, True)) is None  # type: ignore[list-item]
    assert sortedness.across_tasks([report, earlier.report()], (False, True)) is not None  # type: ignore[list-item]
    with pytest.raises(NotSorted, match="within"):
        Check([1, 0], [False, True])(batch([1, 1], ["a", "b"]))
    with pytest.raises(NotSorted, match="between two batches"):
        check(batch([3], ["b"]))
    with pytest.raises(NotSorted, match="NULL"):
        Check([1], [False])(batch([None], ["a"]))
