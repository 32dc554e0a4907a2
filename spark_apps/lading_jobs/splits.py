"""Split planning, one planner for every reader of file sets: loads, the ``lading-files``
data source (query inputs, Spark path) and the Arrow-only unload.

A *split* is one task's input: one or more *pieces*, each a whole file or a range
of a Parquet file's row groups. ``plan`` is pure; it takes the listed files and,
for Parquet files larger than the budget, their row groups' sizes (``footer_row_groups``
reads them from footers), and returns splits in listing order:

* a Parquet file larger than the budget becomes consecutive row-group ranges of
  about the budget each (a row group is never cut; its first row is kept so
  readers can number rows as the file does);
* smaller files are packed, in order, into one split while its weight stays
  within the budget, each file weighing its size plus ``open_cost`` (as Spark's
  ``spark.sql.files.openCostInBytes``): many small files make fewer, larger
  tasks, and a split never holds unboundedly many files;
* CSV and JSON-lines files are never cut (a quoted value may span lines, and a
  compressed file has no seekable boundaries).

The budget (``budget``) follows Spark's own rule for file scans: at most
``max_bytes``, and no more than the total (each file counting ``open_cost`` more than
its bytes) divided by the cores, so a small input still occupies every core and
many small files still share tasks. Weights are bytes as stored (compressed): what a task
reads. Callers that hold a whole split in memory (a sort for ``partitionBy``)
plan with a smaller ``max_bytes``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SPLIT_BYTES = 128 * 1024**2
"""Default most bytes (as stored) one split reads; Spark's ``spark.sql.files.maxPartitionBytes``."""
OPEN_COST = 4 * 1024**2
"""What opening one more file costs, in bytes of reading (Spark's ``openCostInBytes``)."""


@dataclass(frozen=True)
class FileRef:
    """A listed file: what planning needs of it."""

    uri: str
    size: int
    etag: str = ""


@dataclass(frozen=True)
class RowGroup:
    rows: int
    bytes: int  # compressed, as stored


@dataclass(frozen=True)
class Piece:
    """A whole file, or the row groups ``[start, stop)`` of a Parquet file."""

    uri: str
    size: int  # the file's size
    etag: str
    file_index: int  # the file's position in the listing
    row_groups: tuple[int, int] | None = None
    first_row: int = 1  # the file's row number of the piece's first row (1-based)
    bytes: int = 0  # bytes this piece reads (the file's size, or its row groups' share)


@dataclass(frozen=True)
class Split:
    index: int
    pieces: tuple[Piece, ...]

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.pieces)


def budget(total_bytes: int, cores: int, max_bytes: int = SPLIT_BYTES, open_cost: int = OPEN_COST,
           files: int = 0) -> int:
    """Spark's split size (``FilePartition.maxSplitBytes``): ``min(max_bytes, max(open_cost,
    total / cores))``, where the total counts every one of the ``files`` with ``open_cost`` more
    than its bytes, as Spark does: without that, many small files would get a budget of one open
    cost each and a split apiece, one task per file."""
    total = total_bytes + files * open_cost
    per_core = math.ceil(total / max(1, cores)) if total else 0
    return max(1, min(max_bytes, max(open_cost, per_core)))


def ranges(groups: Sequence[RowGroup], split_bytes: int) -> list[tuple[int, int, int, int]]:
    """``[(start, stop, first_row, bytes)]``: consecutive row groups of about ``split_bytes``."""
    out: list[tuple[int, int, int, int]] = []
    start, size, row, first_row = 0, 0, 1, 1
    for i, g in enumerate(groups):
        if i > start and size + g.bytes > split_bytes:
            out.append((start, i, first_row, size))
            start, size, first_row = i, 0, row
        size += g.bytes
        row += g.rows
    out.append((start, len(groups), first_row, size))
    return out


def pieces(files: Sequence[FileRef], fmt: str, split_bytes: int,
           row_groups: Callable[[FileRef], Sequence[RowGroup] | None]) -> list[Piece]:
    """Every file as pieces: whole, or (Parquet larger than ``split_bytes``) row-group ranges.

    ``row_groups(file)`` returns the file's row groups, or None when its footer
    cannot be read (the file is then one piece; reading it reports the error)."""
    out: list[Piece] = []
    for n, f in enumerate(files):
        groups = row_groups(f) if fmt == "parquet" and f.size > split_bytes else None
        chunks = ranges(groups, split_bytes) if groups else []
        if len(chunks) <= 1:
            out.append(Piece(f.uri, f.size, f.etag, n, bytes=f.size))
            continue
        out += [Piece(f.uri, f.size, f.etag, n, (start, stop), first, size) for start, stop, first, size in chunks]
    return out


def pack_indices(weights: Sequence[int], split_bytes: int, open_cost: int = OPEN_COST) -> list[list[int]]:
    """Consecutive items (by their weights in bytes) grouped into splits of at most ``split_bytes``,
    each item also costing ``open_cost``; an item heavier than the budget is a split of its own."""
    out: list[list[int]] = []
    weight = 0
    for i, b in enumerate(weights):
        w = b + open_cost
        if not out or weight + w > split_bytes:
            out.append([])
            weight = 0
        out[-1].append(i)
        weight += w
    return out


def pack(items: Sequence[Piece], split_bytes: int, open_cost: int = OPEN_COST) -> list[Split]:
    """Consecutive pieces into splits of at most ``split_bytes`` (``pack_indices``)."""
    groups = pack_indices([p.bytes for p in items], split_bytes, open_cost)
    return [Split(i, tuple(items[j] for j in group)) for i, group in enumerate(groups)]


def plan(files: Sequence[FileRef], fmt: str, split_bytes: int,
         row_groups: Callable[[FileRef], Sequence[RowGroup] | None], *, open_cost: int = OPEN_COST,
         packed: bool = True) -> list[Split]:
    """The splits reading ``files`` (in ``fmt``) takes; ``packed=False``: one piece per split."""
    found = pieces(files, fmt, split_bytes, row_groups)
    if not packed:
        return [Split(i, (p,)) for i, p in enumerate(found)]
    return pack(found, split_bytes, open_cost)


def footer_row_groups(open_input: Callable[[FileRef], object]) -> Callable[[FileRef], list[RowGroup] | None]:
    """``row_groups`` for ``plan``: a file's row groups read from its Parquet footer
    (``open_input(file)`` gives a pyarrow-readable file), None if it is unreadable."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def read(f: FileRef) -> list[RowGroup] | None:
        try:
            meta = pq.read_metadata(open_input(f))
        except (pa.ArrowInvalid, OSError, RuntimeError):
            return None  # the task reports the file as unreadable
        out = []
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            out.append(RowGroup(rg.num_rows, sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))))
        return out

    return read
