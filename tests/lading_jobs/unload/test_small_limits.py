"""Small ``maxFileSize`` limits: the footer reserve follows the footer actually written.

A 20 kB Parquet limit over three string columns was refused up front ("cannot hold a Parquet
footer (about 23563 bytes)"), the check reserving 8 KiB of statistics per string column,
while the footers written are a few kB: only the data's own bounds, measured per row group,
count now.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs.formats.parquetfile import FileTooSmall
from lading_jobs.storage import LocalStorage, PendingUpload, join
from lading_jobs.unload import formatting
from lading_jobs.unload.task import TaskPlan, TaskWriter
from lading_spec.formats import CsvOptions, ParquetOptions

KB = 1024


def _batch(rows: int) -> pa.RecordBatch:
    rng = np.random.default_rng(5)
    return pa.RecordBatch.from_pydict({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "a": pa.array([f"a-{i:06d}" for i in range(rows)]),
        "b": pa.array([rng.bytes(6).hex() for _ in range(rows)]),
        "c": pa.array([f"city-{i % 13}" for i in range(rows)]),
    })


def _write(dest: str, batch: pa.RecordBatch, limit: int, group: int) -> tuple[list[int], int]:
    options = ParquetOptions(row_group_rows=group)
    plan = TaskPlan(destination=dest, format="parquet", options=options, max_file_size=limit,
                    buffer_size=5 * 1024 * KB, partition_by=(), keep_partition_columns=False, token=None,
                    spark_schema_json="{}")
    w = TaskWriter(plan, 0, LocalStorage(), lambda b: b, batch.schema, formatting.encoder_factory("parquet", options))
    w.write(batch)
    files = w.finish()
    storage = LocalStorage()
    sizes, rows = [], 0
    for f in files:
        storage.complete_upload(PendingUpload.from_dict(f["upload"]))
        data = storage.read(join(dest, f["path"]))
        sizes.append(len(data))
        rows += pq.read_metadata(io.BytesIO(data)).num_rows
    return sizes, rows


def test_a_20_kb_parquet_limit_over_string_columns_is_written(file_uri: Callable[[str], str]) -> None:
    batch = _batch(3000)
    sizes, rows = _write(file_uri("small/"), batch, 20 * KB, 500)
    assert rows == batch.num_rows and len(sizes) > 1
    assert all(s <= 20 * KB for s in sizes), sizes


def test_a_limit_below_the_footer_is_still_refused_naming_the_field(file_uri: Callable[[str], str]) -> None:
    with pytest.raises(FileTooSmall, match="to.maxFileSize"):
        _write(file_uri("tiny/"), _batch(10), 2 * KB, 500)


@pytest.mark.parametrize("limit_kb", [20, 48, 64])
def test_parquet_files_fill_ninety_percent_of_small_limits(file_uri: Callable[[str], str], limit_kb: int) -> None:
    # rows of ~40 bytes: the per-row-group footer reserve follows the bounds written, so files
    # fill as at large limits (docs/copyjob.md, to.maxFileSize)
    sizes, rows = _write(file_uri(f"fill{limit_kb}/"), _batch(12000), limit_kb * KB, 500)
    assert rows == 12000 and all(s <= limit_kb * KB for s in sizes)
    assert all(s >= 0.9 * limit_kb * KB for s in sizes[:-1]), [round(s / (limit_kb * KB), 3) for s in sizes]


def test_text_files_fill_to_the_limit_less_one_row(file_uri: Callable[[str], str]) -> None:
    # 1.5 kB rows in a 6 kB limit: three fit (4.5 kB, 75 %), the fourth does not; the documented
    # bound is the limit less one row, not 90 %
    limit, dest = 6 * KB, file_uri("text/")
    batch = pa.RecordBatch.from_pydict({"id": pa.array(range(40), pa.int64()),
                                        "t": pa.array([f"{i:04d}" + "x" * 1500 for i in range(40)])})
    options = CsvOptions()
    plan = TaskPlan(destination=dest, format="csv", options=options, max_file_size=limit,
                    buffer_size=5 * 1024 * KB, partition_by=(), keep_partition_columns=False, token=None,
                    spark_schema_json="{}")
    w = TaskWriter(plan, 0, LocalStorage(), lambda b: b, batch.schema, formatting.encoder_factory("csv", options))
    w.write(batch)
    storage = LocalStorage()
    sizes = []
    for f in w.finish():
        storage.complete_upload(PendingUpload.from_dict(f["upload"]))
        sizes.append(len(storage.read(join(dest, f["path"]))))
    row = len(f"39,{39:04d}{'x' * 1500}\n")  # the longest line
    assert all(s <= limit for s in sizes) and all(s >= limit - row for s in sizes[:-1]), sizes
