"""Which columns a compaction part tries a dictionary for is judged from rows spread over the first
row group (``parts.spread_sample``), not from the first rows: a sorted rewrite's output holds a key
that repeats a few values side by side, which the first rows took for a low-cardinality column
(the writer then hashed every row into a dictionary and gave it up when the page was full).

``test_a_sorted_key_with_a_few_repeats_is_written_plain`` fails on the code before (its ``k`` chunks
carried a dictionary page)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lading_jobs import storage as st
from lading_jobs.compact.parts import CeilingPartWriter, spread_sample
from lading_jobs.table import format as fmt
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats import part as stx

SCHEMA = TableSchema.of([("k", "bigint"), ("c", "bigint"), ("id", "bigint")])
ROWS = 60_000


def write_sorted(uri: str) -> tuple[pq.ParquetFile, pa.Table, stx.PartStats]:
    """``ROWS`` rows sorted by ``k``: random keys of which ~3 % repeat (side by side once sorted),
    ``c`` of 300 values (each ~200 times), ``id`` distinct in random order."""
    rng = np.random.default_rng(5)
    k = np.sort(rng.integers(0, 2_000_000, ROWS))
    assert 0 < ROWS - len(np.unique(k)) < ROWS // 20
    rows = pa.table({"k": pa.array(k), "c": pa.array(rng.integers(0, 300, ROWS)),
                     "id": pa.array(rng.permutation(ROWS).astype(np.int64)),
                     fmt.TIME_COLUMN: pa.array(np.ones(ROWS, np.int64)),
                     fmt.DIFF_COLUMN: pa.array(np.ones(ROWS, np.int64))})
    storage = st.open_storage(uri)
    writer = CeilingPartWriter(uri, SCHEMA, "c-test", 0, table_id="tid", envelope="append", storage=storage,
                               max_size=64 * 1024**2, row_group_rows=32_768)
    writer.write(rows)
    (written,) = writer.finish()
    storage.complete_upload(st.PendingUpload.from_dict(written.upload))
    return pq.ParquetFile(storage.open_input(fmt.part_uri(uri, written.part.path))), rows, written.part.stats


def dictionary_pages(f: pq.ParquetFile, name: str) -> list[bool]:
    i = f.schema_arrow.get_field_index(name)
    return [f.metadata.row_group(g).column(i).has_dictionary_page for g in range(f.metadata.num_row_groups)]


def test_a_sorted_key_with_a_few_repeats_is_written_plain(file_uri: Callable[[str], str]) -> None:
    f, _, _ = write_sorted(file_uri("t/"))
    assert dictionary_pages(f, "k") == [False, False]
    assert dictionary_pages(f, "id") == [False, False], "distinct values, as before"
    assert dictionary_pages(f, "c") == [True, True], "a column of few values keeps its dictionary"


def test_the_rows_and_statistics_are_those_written(file_uri: Callable[[str], str]) -> None:
    f, rows, stats = write_sorted(file_uri("t/"))
    back = f.read()
    assert back.select(rows.column_names).equals(rows.cast(back.select(rows.column_names).schema))
    ids = {c.name: c.id for c in SCHEMA.columns}
    assert stats.columns == stx.table_stats(back, ids).columns and stats.rows == ROWS


def test_the_sample_is_spread_over_the_first_row_group() -> None:
    t = pa.table({"x": pa.array(np.arange(100_000))})
    assert spread_sample(t, 50).column("x").to_pylist() == list(range(50))
    spread = spread_sample(t, 65_536).column("x").to_numpy()
    assert len(spread) == 8192 and spread[0] == 0 and spread[-1] == 65_535
    assert np.all(np.diff(spread) >= 7)
