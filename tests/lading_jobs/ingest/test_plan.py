"""Load planning: the one split planner (lading_jobs.splits) cuts big Parquet files and packs small files."""

from __future__ import annotations

from lading_jobs import storage as st
from lading_jobs.ingest.plan import plan_load

KB = 1024


def test_many_small_files_make_fewer_larger_spark_tasks() -> None:
    files = [st.ObjectInfo(f"s3://b/in/{i:04d}.csv", 100 * KB, f"e{i}") for i in range(1000)]
    tasks, groups = plan_load(files, "csv", st.S3Settings(), cores=2)
    assert [t.uri for t in tasks] == [o.uri for o in files]  # one file task each, named by its file
    assert [t.etag for t in tasks[:2]] == ["e0", "e1"]
    assert sorted(i for g in groups for i in g) == list(range(1000))  # each once, in order
    assert all(g == list(range(g[0], g[-1] + 1)) for g in groups)
    # Spark's rule: the total counts 4 MB of open cost per file (100 MB + 4,000 MB over 2 cores), so
    # the budget is the 256 MB chunk size, and 62 files of 4 MB + 100 kB fit in it: 17 Spark tasks
    assert [len(g) for g in groups] == [62] * 16 + [8]


def test_a_hundred_tiny_files_make_a_few_tasks() -> None:
    files = [st.ObjectInfo(f"s3://b/in/{i:03d}.csv", 10 * KB, "") for i in range(100)]
    _, groups = plan_load(files, "csv", st.S3Settings(), cores=2)
    assert [len(g) for g in groups] == [50, 50]  # (1 MB + 400 MB) / 2 cores each; a task per file before


def test_a_few_small_files_keep_a_task_each() -> None:
    files = [st.ObjectInfo(f"s3://b/in/{i}.json", 10 * KB, "") for i in range(3)]
    _, groups = plan_load(files, "json", st.S3Settings(), cores=2)
    assert groups == [[0], [1], [2]]  # every core gets work
