"""A query into a table (``from.query`` → ``to.table``): append and replace, each one commit.

A reader thread reads the table over and over while the write runs; every read
must be the old contents or the new ones, never a mix (a replace that removed the
old parts in one commit and added the new in another would show an empty or a
doubled table).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs import storage as st
from lading_jobs.load.job import run_load
from lading_jobs.load.stores import storage_for
from lading_jobs.table.log import TableLog
from lading_spec.errors import SpecError
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark]


def job(spec: dict[str, Any], run_id: str) -> JobDocument:
    return JobDocument("CopyJob", "ns", "insert", "uid", 1, run_id, dt.datetime(2025, 1, 1, tzinfo=dt.UTC), spec)


def ids(table: str) -> list[int]:
    storage = storage_for(table, st.S3Settings.from_env())
    log = TableLog.open(table, storage)
    if log is None:
        return []
    snap = log.snapshot()
    parts = [pq.read_table(pa.BufferReader(storage.read(snap.part_uri(p)))) for p in snap.parts]
    return sorted(pa.concat_tables(parts).column("id").to_pylist()) if parts else []


def insert(table: str, query: str, if_exists: str | None = None) -> dict[str, Any]:
    return {"from": {"query": query}, "to": {"table": table, **({"ifExists": if_exists} if if_exists else {})}}


def while_reading(table: str, write: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], list[list[int]]]:
    seen: list[list[int]] = []
    done = threading.Event()

    def reader() -> None:
        while True:
            finished = done.is_set()
            seen.append(ids(table))
            if finished:
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        result = write()
    finally:
        done.set()
        thread.join()
    return result, seen


def test_append_then_replace_each_one_commit(spark: Any, file_uri: Callable[[str], str]) -> None:
    table = file_uri("t/")
    first = run_load(spark, job(insert(table, "SELECT id, id * 10 AS v FROM range(0, 40, 1, 4)"), "r1"))
    assert first["rows"] == 40 and ids(table) == list(range(40))
    old = ids(table)
    appended, seen = while_reading(table, lambda: run_load(spark, job(
        insert(table, "SELECT id, -id AS v FROM range(100, 130, 1, 3)", "append"), "r2")))
    new = old + list(range(100, 130))
    assert appended["rows"] == 30 and ids(table) == new
    assert seen and all(s in (old, new) for s in seen), [len(s) for s in seen]
    replaced, seen = while_reading(table, lambda: run_load(spark, job(
        insert(table, "SELECT id, id AS v FROM range(500, 520, 1, 2)", "replace"), "r3")))
    assert replaced["rows"] == 20 and ids(table) == list(range(500, 520))
    assert seen and all(s in (new, list(range(500, 520))) for s in seen), [len(s) for s in seen]
    refused = run_load(spark, job(insert(table, "SELECT 1 AS id, 1 AS v", "error"), "r4"))
    assert "a table exists" in refused["error"] and ids(table) == list(range(500, 520))


def test_the_query_is_sandboxed(spark: Any, file_uri: Callable[[str], str]) -> None:
    table = file_uri("t/")
    with pytest.raises(SpecError, match="java_method"):
        run_load(spark, job(insert(table, "SELECT java_method('java.lang.System', 'getenv', 'HOME') AS id"), "r1"))
    assert ids(table) == []
