"""The task writer without Spark: hard size ceiling, fill, statistics, abort (file:// storage)."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs.formats.parquetfile import dictionary_columns
from lading_jobs.storage import LocalStorage, PendingUpload, join
from lading_jobs.unload import formatting
from lading_jobs.unload.task import TaskPlan, TaskWriter
from lading_spec.formats import CsvOptions, FormatOptions, JsonOptions, ParquetOptions

MB = 1024 * 1024


def _batches(n_batches: int, rows: int, seed: int = 7) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(seed)
    out = []
    for b in range(n_batches):
        ids = np.arange(b * rows, (b + 1) * rows, dtype=np.int64)
        text = [None if i % 17 == 0 else f"row-{i}-" + "x" * int(rng.integers(5, 60)) for i in ids]
        out.append(pa.RecordBatch.from_pydict({
            "id": pa.array(ids),
            "amount": pa.array(rng.normal(size=rows)),
            "note": pa.array(text, pa.string()),
            "noise": pa.array([rng.bytes(16).hex() for _ in range(rows)]),
        }))
    return out


def _writer(dest: str, fmt: str, options: FormatOptions, max_size: int, schema: pa.Schema) -> TaskWriter:
    plan = TaskPlan(destination=dest, format=fmt, options=options, max_file_size=max_size,
                    buffer_size=5 * MB, partition_by=(), keep_partition_columns=False, token=None,
                    spark_schema_json="{}")
    return TaskWriter(plan, 3, LocalStorage(), lambda b: b, schema, formatting.encoder_factory(fmt, options))


def _write_all(w: TaskWriter, batches: list[pa.RecordBatch], dest: str) -> tuple[list[dict[str, Any]], list[int]]:
    """Write every batch, complete every file; the files' records and their sizes as stored."""
    for b in batches:
        w.write(b)
    files = w.finish()
    storage = LocalStorage()
    for f in files:
        storage.complete_upload(PendingUpload.from_dict(f["upload"]))
    return files, [storage.head(join(dest, f["path"])).size for f in files]  # type: ignore[union-attr]


@pytest.mark.parametrize(("fmt", "options"), [
    ("csv", CsvOptions()),
    ("csv", CsvOptions(compression="gzip")),
    ("json", JsonOptions(compression="zstd")),
    ("parquet", ParquetOptions()),
    ("parquet", ParquetOptions(compression="zstd", row_group_rows=20_000)),
])
def test_files_respect_the_ceiling_and_fill_it(file_uri: Callable[[str], str], fmt: str,
                                                options: FormatOptions) -> None:
    dest = file_uri("out/")
    batches = _batches(12, 20_000)
    limit = 1 * MB
    files, sizes = _write_all(_writer(dest, fmt, options, limit, batches[0].schema), batches, dest)
    storage = LocalStorage()
    assert len(files) >= 3
    assert sizes == [f["bytes"] for f in files]
    assert all(s <= limit for s in sizes), sizes
    assert all(s >= 0.9 * limit for s in sizes[:-1]), sizes
    assert [f["path"] for f in files] == sorted(f["path"] for f in files)
    assert files[0]["path"] == f"part-00003-00000.{files[0]['path'].split('.', 1)[1]}"
    assert sum(f["rows"] for f in files) == 240_000
    # statistics are those of the rows in each file, in order
    assert files[0]["columns"]["id"]["min"] == 0
    assert files[-1]["columns"]["id"]["max"] == 239_999
    assert sum(f["columns"]["note"]["nullCount"] for f in files) == sum(1 for i in range(240_000) if i % 17 == 0)
    for a, b in zip(files, files[1:], strict=False):
        assert a["columns"]["id"]["max"] + 1 == b["columns"]["id"]["min"]
    # the rows read back equal what was written
    first = storage.read(join(dest, files[0]["path"]))
    if fmt == "parquet":
        table = pq.read_table(io.BytesIO(first))
        assert table.column("id").to_pylist() == list(range(files[0]["rows"]))
        assert pq.read_metadata(io.BytesIO(first)).num_rows == files[0]["rows"]
    elif isinstance(options, CsvOptions) and options.compression == "gzip":
        assert gzip.decompress(first).count(b"\n") >= files[0]["rows"]


def test_a_row_larger_than_the_limit_is_an_error_naming_the_field(file_uri: Callable[[str], str]) -> None:
    batch = pa.RecordBatch.from_pydict({"s": ["y" * 2000]})
    w = _writer(file_uri("big/"), "csv", CsvOptions(), 1000, batch.schema)
    with pytest.raises(ValueError, match="to.maxFileSize"):
        w.write(batch)
    w.abort()
    assert LocalStorage().list_pending_uploads(file_uri("big/")) == []


def test_abort_removes_every_pending_upload(file_uri: Callable[[str], str]) -> None:
    dest = file_uri("ab/")
    batches = _batches(3, 20_000)
    w = _writer(dest, "json", JsonOptions(), 1 * MB, batches[0].schema)
    for b in batches:
        w.write(b)
    assert LocalStorage().list_pending_uploads(dest)
    w.abort()
    assert LocalStorage().list_pending_uploads(dest) == []
    assert list(LocalStorage().list_objects(dest)) == []


def test_manifest_statistics_are_json(file_uri: Callable[[str], str]) -> None:
    batch = _batches(1, 1000)[0]
    w = _writer(file_uri("st/"), "parquet", ParquetOptions(), 10 * MB, batch.schema)
    w.write(batch)
    [f] = w.finish()
    json.dumps(f)
    assert f["columns"]["note"]["nullCount"] == sum(1 for i in range(1000) if i % 17 == 0)
    assert f["columns"]["id"] == {"nullCount": 0, "min": 0, "max": 999}


def _one_parquet_file(dest: str, batch: pa.RecordBatch, max_size: int) -> bytes:
    """``batch`` written by a task writer as one Parquet file under ``dest``, published; its bytes."""
    w = _writer(dest, "parquet", ParquetOptions(), max_size, batch.schema)
    w.write(batch)
    [f] = w.finish()
    storage = LocalStorage()
    storage.complete_upload(PendingUpload.from_dict(f["upload"]))
    return storage.read(join(dest, f["path"]))


def test_parquet_dictionary_only_where_the_first_rows_repeat(file_uri: Callable[[str], str]) -> None:
    n = 20_000
    ids = np.arange(n, dtype=np.int64)
    batch = pa.RecordBatch.from_pydict({
        "id": pa.array(ids),  # distinct: plain
        "qty": pa.array((ids % 100).astype(np.int32)),  # repeats: dictionary
        "at": pa.array(ids * 1_000_000, pa.timestamp("us", tz="UTC")),  # distinct: plain
        "code": pa.array([f"c{i}" for i in ids]),  # strings keep the dictionary whatever the sample says
        "late": pa.array([None] * 9000 + list(range(n - 9000)), pa.int64()),  # first rows all NULL: no evidence
    })
    assert dictionary_columns(batch) == ["qty", "code", "late"]
    assert dictionary_columns(batch.slice(0, 500)) is True  # too few values to judge
    assert dictionary_columns(pa.RecordBatch.from_pydict({"l": pa.array([[1]] * 2000)})) is True  # nested
    data = _one_parquet_file(file_uri("dict/"), batch, 10 * MB)
    meta = pq.read_metadata(io.BytesIO(data))
    has_dict = {meta.schema.column(i).name: meta.row_group(0).column(i).has_dictionary_page
                for i in range(meta.num_columns)}
    assert has_dict == {"id": False, "qty": True, "at": False, "code": True, "late": True}
    assert pq.read_table(io.BytesIO(data)).equals(pa.Table.from_batches([batch]))


def test_parquet_dictionary_not_where_the_first_rows_say_it_would_overflow(file_uri: Callable[[str], str]) -> None:
    """A column of distinct values but for a few repeated specials (NaN, ±inf, a default) gets no
    dictionary: pyarrow would hash values until its 1 MiB dictionary page filled, then abandon it
    (the rule before issue 44 kept one: the sample held a repeat). A column of a few thousand
    values repeating keeps it."""
    n = 200_000
    ids = np.arange(n, dtype=np.int64)
    amounts = ((ids * 7919) % 200_001 - 100_000).astype(np.float64)
    amounts[ids % 100 == 1], amounts[ids % 100 == 2], amounts[ids % 100 == 3] = np.nan, np.inf, 0.0
    rng = np.random.default_rng(5)
    batch = pa.RecordBatch.from_pydict({
        "amount": pa.array(amounts),  # distinct but for NaN, inf and 0.0: plain
        "price": pa.array([None if i % 9 == 0 else (i * 104_729) % 10**12 for i in ids.tolist()],
                          pa.int64()).cast(pa.decimal128(38, 10)),  # distinct decimals, repeated NULLs: plain
        "cents": pa.array(rng.integers(0, 5000, n)),  # ~5,000 values (40 KB of dictionary): dictionary
        "ratio": pa.array(rng.integers(0, 60_000, n) / 7),  # 60,000 doubles (480 KB): dictionary
    })
    assert dictionary_columns(batch) == ["cents", "ratio"]
    data = _one_parquet_file(file_uri("dict-overflow/"), batch, 100 * MB)
    meta = pq.read_metadata(io.BytesIO(data))
    chunks = {meta.schema.column(i).name: meta.row_group(0).column(i) for i in range(meta.num_columns)}
    assert {k: c.has_dictionary_page for k, c in chunks.items()} == {
        "amount": False, "price": False, "cents": True, "ratio": True}
    assert chunks["ratio"].total_uncompressed_size < 8 * n * 0.6  # the dictionary paid: plain is 8 bytes a value
    back = pq.read_table(io.BytesIO(data))
    assert back.drop_columns(["amount"]).equals(pa.Table.from_batches([batch]).drop_columns(["amount"]))
    assert np.array_equal(back.column("amount").to_numpy(), amounts, equal_nan=True)


def test_parquet_with_wide_strings_fills_files_to_ninety_percent(file_uri: Callable[[str], str]) -> None:
    """20 string columns, one 4,000-character value per row group, 8 MiB files. Fails on 1b6c3cc
    (fill 66-68 %: the footer reserve was 4 x the longest value per column and row group, while
    the footer holds only the group's min and max, once each)."""
    rng = np.random.default_rng(11)
    group, cols, limit = 2000, 20, 8 * MB
    batches = []
    for _ in range(14):
        rows = 4 * group
        columns = {}
        for c in range(cols):
            values = np.char.mod("%012x", rng.integers(0, 2**48, rows)).astype(object)
            values[::group] = "z" * 4000  # one wide value in every row group
            columns[f"s{c:02d}"] = pa.array(values, pa.string())
        batches.append(pa.RecordBatch.from_pydict(columns))
    dest = file_uri("wide/")
    w = _writer(dest, "parquet", ParquetOptions(row_group_rows=group), limit, batches[0].schema)
    files, sizes = _write_all(w, batches, dest)
    storage = LocalStorage()
    assert len(files) >= 3, sizes
    assert all(s <= limit for s in sizes), sizes
    assert all(s >= 0.9 * limit for s in sizes[:-1]), [round(s / limit, 3) for s in sizes]
    assert sum(pq.read_metadata(io.BytesIO(storage.read(join(dest, f["path"])))).num_rows for f in files) == 14 * 4 * group


def test_negative_and_positive_zero_share_one_partition_directory(file_uri: Callable[[str], str]) -> None:
    # -0.0 and 0.0 sort as equals, so they arrive interleaved; their keys were "-0" and "0", and
    # every switch closed one file and opened another (400 rows made 112 files).
    dest = file_uri("zeros/")
    for t in (pa.float64(), pa.float32()):
        batch = pa.RecordBatch.from_pydict({"z": pa.array([-0.0, 0.0] * 50 + [1.5] * 10, t),
                                            "v": pa.array(range(110), pa.int64())})
        plan = TaskPlan(destination=dest, format="csv", options=CsvOptions(), max_file_size=64 * MB,
                        buffer_size=5 * MB, partition_by=("z",), keep_partition_columns=False, token=None,
                        spark_schema_json="{}")
        schema = pa.schema([("v", pa.int64())])
        writer = TaskWriter(plan, 0, LocalStorage(), lambda b: b, schema, formatting.encoder_factory("csv",
                                                                                                     CsvOptions()))
        files, _ = _write_all(writer, [batch], dest)
        assert [(f["path"].split("/")[0], f["rows"]) for f in files] == [("z=0", 100), ("z=1.5", 10)], t


def test_a_nul_character_in_a_partition_value_is_escaped() -> None:
    from lading_jobs.unload import naming

    assert naming.partition_dir(("k",), ("a\x00\x01b",)) == "k=a%00%01b/"
