"""The one split planner: file packing, row-group ranges, Spark's budget rule (pure, no I/O)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from lading_jobs import splits
from lading_jobs.splits import FileRef, RowGroup

MB = 1024 * 1024


def _no_footer(f: FileRef) -> None:
    raise AssertionError(f"no footer should be read for {f.uri}")


def test_small_files_are_packed_in_order_up_to_the_budget() -> None:
    files = [FileRef(f"s3://b/f{i}", 10 * MB) for i in range(10)]
    got = splits.plan(files, "csv", 64 * MB, _no_footer, open_cost=4 * MB)
    assert [[p.uri for p in s.pieces] for s in got] == [
        [f"s3://b/f{i}" for i in range(0, 4)], [f"s3://b/f{i}" for i in range(4, 8)], ["s3://b/f8", "s3://b/f9"]]
    assert [s.index for s in got] == [0, 1, 2]
    assert all(p.row_groups is None for s in got for p in s.pieces)


def test_open_cost_bounds_the_files_per_split() -> None:
    files = [FileRef(f"s3://b/{i}", 0) for i in range(100)]  # empty files still cost an open
    got = splits.plan(files, "json", 40 * MB, _no_footer, open_cost=4 * MB)
    assert [len(s.pieces) for s in got] == [10] * 10


def test_a_large_parquet_file_becomes_row_group_ranges_with_first_rows() -> None:
    groups = [RowGroup(rows=100, bytes=30 * MB) for _ in range(7)]
    files = [FileRef("s3://b/small", MB), FileRef("s3://b/big", 210 * MB, "e1"), FileRef("s3://b/tail", MB)]
    got = splits.plan(files, "parquet", 64 * MB, lambda f: groups if f.uri.endswith("big") else _no_footer(f),
                      packed=False)
    pieces = [s.pieces[0] for s in got]
    assert [(p.uri, p.row_groups, p.first_row) for p in pieces] == [
        ("s3://b/small", None, 1), ("s3://b/big", (0, 2), 1), ("s3://b/big", (2, 4), 201),
        ("s3://b/big", (4, 6), 401), ("s3://b/big", (6, 7), 601), ("s3://b/tail", None, 1)]
    assert [p.file_index for p in pieces] == [0, 1, 1, 1, 1, 2]
    assert pieces[1].etag == "e1" and pieces[1].bytes == 60 * MB


def test_a_row_group_larger_than_the_budget_is_never_cut() -> None:
    groups = [RowGroup(10, 100 * MB), RowGroup(10, 100 * MB)]
    got = splits.pieces([FileRef("s3://b/x", 200 * MB)], "parquet", 64 * MB, lambda f: groups)
    assert [p.row_groups for p in got] == [(0, 1), (1, 2)]


def test_text_files_and_unreadable_footers_stay_whole() -> None:
    assert splits.pieces([FileRef("s3://b/x.csv", 500 * MB)], "csv", 64 * MB, _no_footer)[0].row_groups is None
    assert splits.pieces([FileRef("s3://b/x", 500 * MB)], "parquet", 64 * MB, lambda f: None)[0].row_groups is None


def test_budget_follows_spark_rule() -> None:
    assert splits.budget(1000 * MB, 2, 128 * MB) == 128 * MB  # capped
    assert splits.budget(100 * MB, 2, 128 * MB) == 50 * MB  # every core gets work
    assert splits.budget(MB, 2, 128 * MB, open_cost=4 * MB) == 4 * MB  # never below the open cost
    assert splits.budget(0, 2) >= 1


def test_many_small_files_share_tasks_as_in_spark() -> None:
    # Spark's total counts each file's open cost: 100 files of 10 kB on 2 cores give a budget of
    # min(128 MB, (1 MB + 400 MB) / 2) = 128 MB, and 31 files of 4 MB + 10 kB fit in it. Counting
    # bytes only, the budget was one open cost (4 MB) and every file became a task of its own.
    files = [FileRef(f"s3://b/{i}", 10 * 1024) for i in range(100)]
    budget = splits.budget(sum(f.size for f in files), 2, 128 * MB, 4 * MB, files=len(files))
    assert budget == 128 * MB
    got = splits.plan(files, "csv", budget, _no_footer, open_cost=4 * MB)
    assert [len(s.pieces) for s in got] == [31, 31, 31, 7]
    assert splits.budget(3 * 10 * 1024, 2, 128 * MB, 4 * MB, files=3) < 8 * MB  # 3 files still fill 2 cores


def test_footer_row_groups_reads_compressed_sizes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"x": list(range(1000))}), path, row_group_size=300)
    read = splits.footer_row_groups(lambda f: pa.OSFile(f.uri))
    got = read(FileRef(str(path), path.stat().st_size))
    assert got is not None and [g.rows for g in got] == [300, 300, 300, 100]
    assert all(g.bytes > 0 for g in got)
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    assert read(FileRef(str(tmp_path / "bad.parquet"), 11)) is None
