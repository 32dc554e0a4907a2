"""Compaction parts fed part by part (the streamed bin-pack): whole row groups, fresh statistics."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lading_jobs import storage as st
from lading_jobs.compact.parts import CeilingPartWriter
from lading_jobs.table import format as fmt
from lading_jobs.table.schema import TableSchema

SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string")])


def test_small_pieces_make_whole_row_groups_and_the_parts_statistics_come_from_their_rows(
        file_uri: Callable[[str], str]) -> None:
    uri = file_uri("t/")
    storage = st.open_storage(uri)
    writer = CeilingPartWriter(uri, SCHEMA, "c-test", 0, table_id="tid", envelope="append", storage=storage,
                               max_size=64 * 1024**2, row_group_rows=1000)
    for piece in range(10):  # ten input parts of 300 rows each, as a streamed group hands them over
        ks = range(piece * 300, piece * 300 + 300)
        writer.write(pa.table({"k": pa.array(ks, pa.int64()), "v": [f"v{k}" for k in ks],
                               fmt.TIME_COLUMN: pa.array([piece] * 300, pa.int64()),
                               fmt.DIFF_COLUMN: pa.array([1] * 300, pa.int64())}))
    (written,) = writer.finish()
    storage.complete_upload(st.PendingUpload.from_dict(written.upload))
    md = pq.ParquetFile(storage.open_input(fmt.part_uri(uri, written.part.path))).metadata
    # no runt row group after every flush (1000, 200, 1000, 200, ... before)
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups)] == [1000, 1000, 1000]
    stats = written.part.stats
    assert stats.rows == 3000 and stats.min_time == 0
    k = stats.columns[SCHEMA.column("k").id]
    assert (k.min, k.max, k.nulls) == (0, 2999, 0)


def test_a_group_over_the_ceiling_fills_parts_to_95_percent_never_above_and_keeps_every_row(
        file_uri: Callable[[str], str]) -> None:
    uri = file_uri("t/")
    storage = st.open_storage(uri)
    limit = 256 * 1024
    writer = CeilingPartWriter(uri, SCHEMA, "c-test", 0, table_id="tid", envelope="append", storage=storage,
                               max_size=limit, row_group_rows=4096)
    rng = np.random.default_rng(7)
    pieces = []
    for piece in range(40):  # incompressible keys, strings of varied length: about 1.2 MB of Parquet
        ks = rng.integers(-2**62, 2**62, 2000)
        pieces.append(pa.table({"k": pa.array(ks, pa.int64()),
                                "v": [f"{k:x}"[: 1 + int(k) % 13] for k in ks],
                                fmt.TIME_COLUMN: pa.array([piece] * 2000, pa.int64()),
                                fmt.DIFF_COLUMN: pa.array([1] * 2000, pa.int64())}))
        writer.write(pieces[-1])
    written = writer.finish()
    sizes = [w.part.size for w in written]
    assert len(sizes) >= 3 and max(sizes) <= limit, sizes
    assert min(sizes[:-1]) >= 0.95 * limit, sizes
    parts = []
    for w in written:
        storage.complete_upload(st.PendingUpload.from_dict(w.upload))
        data = pq.read_table(storage.open_input(fmt.part_uri(uri, w.part.path)))
        assert data.num_rows == w.part.stats.rows and storage.head(fmt.part_uri(uri, w.part.path)).size == w.part.size
        k = w.part.stats.columns[SCHEMA.column("k").id]
        assert (k.min, k.max) == (min(data.column("k").to_pylist()), max(data.column("k").to_pylist()))
        assert (w.part.stats.min_time, w.part.stats.max_time) == (min(data.column(fmt.TIME_COLUMN).to_pylist()),
                                                                  max(data.column(fmt.TIME_COLUMN).to_pylist()))
        parts.append(data.select(["k", "v", fmt.TIME_COLUMN]))
    got, handed = pa.concat_tables(parts), pa.concat_tables(pieces)
    assert all(got.column(c).equals(handed.column(c)) for c in ("k", "v", fmt.TIME_COLUMN)), \
        "every row, in the order handed over"


def test_a_part_s_rows_are_not_held_until_it_closes(file_uri: Callable[[str], str]) -> None:
    """The statistics are gathered per row group as it is written, so the writer holds at most
    about a row group of Arrow data, however many the part takes (before, it kept every row
    handed to the open part, a whole ``targetFileSize`` decoded, to compute them at close)."""
    uri = file_uri("t/")
    storage = st.open_storage(uri)
    rows = 100_000
    writer = CeilingPartWriter(uri, SCHEMA, "c-test", 0, table_id="tid", envelope="append", storage=storage,
                               max_size=256 * 1024**2, row_group_rows=rows)
    piece_bytes, held = 0, []
    for piece in range(12):
        # every buffer in Arrow's pool (numpy's memory would not be counted)
        table = pa.table({"k": pc.add(pa.array(np.arange(piece * rows, (piece + 1) * rows, dtype=np.int64)), 0),
                          "v": pa.array(["x"] * rows),
                          fmt.TIME_COLUMN: pa.repeat(pa.scalar(piece, pa.int64()), rows),
                          fmt.DIFF_COLUMN: pa.repeat(pa.scalar(1, pa.int64()), rows)})
        piece_bytes = table.nbytes
        writer.write(table)
        del table
        held.append(pa.total_allocated_bytes())
    (written,) = writer.finish()
    assert written.part.stats.rows == 12 * rows
    k = written.part.stats.columns[SCHEMA.column("k").id]
    assert (k.min, k.max, k.nulls) == (0, 12 * rows - 1, 0)
    assert max(held) < 4 * piece_bytes, (held, piece_bytes)
