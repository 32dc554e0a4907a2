"""Line numbering of text records (pure, no Spark)."""

from __future__ import annotations

import numpy as np

from lading_jobs.ingest import lines as L


def test_line_bounds_and_blank_lines() -> None:
    data = b"a\n\n  \nbb\r\nc"
    starts, ends = L.line_bounds(data)
    assert [data[s:e] for s, e in zip(starts, ends, strict=True)] == [b"a", b"", b"  ", b"bb\r", b"c"]
    assert L.blank_lines(data, starts, ends).tolist() == [False, True, True, False, False]
    assert L.blank_lines(b"a\n\n  \n\r\nb", *L.line_bounds(b"a\n\n  \n\r\nb"), whitespace=False).tolist() == \
        [False, True, False, True, False]


def test_final_newline_is_not_a_line() -> None:
    starts, ends = L.line_bounds(b"x\ny\n")
    assert len(starts) == 2


def test_csv_record_lines_with_multiline_records_rejects_and_blanks() -> None:
    # header(1) | rec 2-3 | rejected 4 | blank 5 | rejected 6 | good 7 | good 8 (2 lines) | good 10
    spans = np.array([2, 1, 2, 1], dtype=np.int64)
    good, rejected = L.csv_record_lines(2, 2, spans, [(3, 1), (4, 1)], [5])
    assert good.tolist() == [2, 7, 8, 10]
    assert rejected == [4, 6]


def test_csv_record_lines_rejected_at_the_end() -> None:
    good, rejected = L.csv_record_lines(1, 1, np.array([1, 1], dtype=np.int64), [(3, 1), (4, 2)], [])
    assert good.tolist() == [1, 2]
    assert rejected == [3, 4]


def test_blank_line_inside_a_quoted_value_is_ignored() -> None:
    good, rejected = L.csv_record_lines(1, 1, np.array([3, 1], dtype=np.int64), [], [2])
    assert good.tolist() == [1, 4]


def test_a_blank_line_right_after_a_record_with_a_quoted_blank_line() -> None:
    # record 1-3 (line 2 blank inside quotes) | blank 4 | rejected 5
    good, rejected = L.csv_record_lines(1, 1, np.array([3], dtype=np.int64), [(2, 1)], [2, 4])
    assert good.tolist() == [1] and rejected == [5]
