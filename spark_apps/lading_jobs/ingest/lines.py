"""Physical line numbers for the records of a text file, computed with numpy.

Error reports name the *line* of the file where a bad record starts, the number an
editor shows. Decoders hand back records, not lines: a CSV record may span
several lines (a quoted newline), blank lines produce no record, and rows the
parser rejected are reported separately by their record number. These pure
functions rebuild each record's first line from what is known: the byte offsets
of the newlines, each good record's embedded newline count, and the rejected
records' numbers and spans. Everything is vectorised; loops run once per
*rejected or blank* record, never per good one.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

# one definition of a file's lines, for the load's decoders and the JSON lines reader
from lading_jobs.formats.text import line_bounds as line_bounds

IntArray = npt.NDArray[np.int64]
_BLANK = r"^[ \t\r\n]*$"


def blank_lines(data: bytes, starts: IntArray, ends: IntArray, *, whitespace: bool = True) -> npt.NDArray[np.bool_]:
    """Which lines the decoder skips: whitespace only (JSON lines) or, with
    ``whitespace=False``, empty only (CSV, where a line of spaces is a record).

    Whitespace is found per line by one regular expression over the lines as an Arrow
    binary array that shares ``data``'s buffer (each line with the separator after it,
    itself whitespace): no array per byte of the input."""
    if not len(starts):
        return np.zeros(0, dtype=bool)
    if not whitespace:
        buf = np.frombuffer(data, dtype=np.uint8)
        length = ends - starts
        first = buf[np.minimum(starts, max(len(buf) - 1, 0))] if len(buf) else np.zeros(len(starts), np.uint8)
        return np.asarray((length == 0) | ((length == 1) & (first == 13)))
    bounds = np.append(starts.astype(np.int64), np.int64(max(int(ends[-1]), int(starts[-1]))))
    lines = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(starts),
                                             [None, pa.py_buffer(bounds), pa.py_buffer(data)])
    blank = pc.match_substring_regex(lines, _BLANK)
    return np.asarray(blank.to_numpy(zero_copy_only=False), dtype=bool)


def csv_record_lines(first_line: int, first_record: int, good_spans: IntArray,
                     rejected: list[tuple[int, int]], blanks: list[int]) -> tuple[IntArray, list[int]]:
    """First physical line (1-based) of each good record and of each rejected one.

    ``first_line``/``first_record``: line and record number of the first data record
    (after any header); ``good_spans``: lines each good record spans (1 + embedded
    newlines), in file order; ``rejected``: (record number, span) of each record the
    parser rejected, in order; ``blanks``: physical numbers of blank lines, which the
    parser skips without counting them as records.
    """
    n = len(good_spans)
    cs = np.concatenate([np.zeros(1, np.int64), np.cumsum(good_spans, dtype=np.int64)])
    out = np.empty(n, dtype=np.int64)
    rejected_lines: list[int] = []
    line, record, g, i, b = first_line, first_record, 0, 0, 0
    while True:
        while b < len(blanks) and blanks[b] < line:  # a blank line inside a quoted value
            b += 1
        next_rejected = rejected[i][0] if i < len(rejected) else None
        next_blank = blanks[b] if b < len(blanks) else None
        take = n - g
        if next_rejected is not None:
            take = min(take, next_rejected - record)
        if next_blank is not None:
            before = int(np.searchsorted(cs[:-1], next_blank - line + cs[g], side="left")) - g
            take = min(take, max(before, 0))
        take = max(take, 0)
        out[g:g + take] = line + cs[g:g + take] - cs[g]
        line += int(cs[g + take] - cs[g])
        record += take
        g += take
        while b < len(blanks) and blanks[b] < line:  # passed inside the records just taken
            b += 1
        next_blank = blanks[b] if b < len(blanks) else None
        if next_blank is not None and line == next_blank:
            line += 1
            b += 1
        elif next_rejected is not None and record >= next_rejected:
            rejected_lines.append(line)
            line += rejected[i][1]
            record += 1
            i += 1
        elif g >= n:
            while i < len(rejected):  # rejected records after the last good one
                rejected_lines.append(line)
                line += rejected[i][1]
                i += 1
            return out, rejected_lines
