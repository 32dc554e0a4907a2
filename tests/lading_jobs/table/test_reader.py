"""Reads split into several key buckets (tables over ``BUCKET_BYTES``) answer as a read in one:
every part sends a key to the same bucket, whatever NULLs the part holds in its key columns
and whether it predates a column added by schema evolution. Before ``table.bucket``, a part
with one NULL in an int key column hashed 5 as 5.0 (pandas float64), so a retracted or
deleted row came back, and an updated key showed both its old and new version."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from lading_jobs.table import evolve, reader, writer
from lading_jobs.table import format as fmt
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema

N = 40


def put(log: TableLog, schema: TableSchema, columns: dict[str, pa.Array], time: int, diff: list[int],
        new_schema: TableSchema | None = None) -> None:
    n = len(diff)
    data = pa.table({**columns, fmt.TIME_COLUMN: pa.array([time] * n, pa.int64()),
                     fmt.DIFF_COLUMN: pa.array(diff, pa.int64())})
    written = writer.write_parts(log.uri, [data], new_schema or schema, write_id=fmt.new_write_id(),
                                 one_part_per_table=True, storage=log.storage)
    writer.commit_parts(log.uri, written, log=log, schema=new_schema)


def read_in_buckets(uri: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list[dict[str, object]]]:
    monkeypatch.setattr(reader, "BUCKET_BYTES", 1)  # what a table of many BUCKET_BYTES gets
    log = TableLog.open_existing(uri)
    snap = log.snapshot()
    tasks = reader.plan_tasks(snap)
    out = pa.concat_tables([reader.read_task(log.storage, snap, t) for t in tasks])
    return len(tasks), out.to_pylist()


def by_key(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    return sorted(rows, key=lambda r: repr(sorted(r.items())))


def test_a_diff_table_in_buckets_keeps_retractions_across_nulls_and_an_added_column(
        file_uri: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    uri = file_uri("diff/")
    schema = TableSchema.of([("k", "bigint"), ("n", "int"), ("flag", "boolean"), ("s", "string"),
                             ("x", "double")])
    log = TableLog.create(uri, schema, "diff")
    # inserts, no NULL anywhere
    put(log, schema, {"k": pa.array(range(N), pa.int64()), "n": pa.array([5] * N, pa.int32()),
                      "flag": pa.array([True] * N), "s": pa.array([f"s{i}" for i in range(N)]),
                      "x": pa.array([0.5] * N)}, 1, [1] * N)
    # a column added by schema evolution: older parts read it as NULL
    evolved = evolve.evolve(schema, [evolve.Found("c", "bigint", "test")], envelope="diff")
    # retract every insert (c NULL, as the old rows read), next to rows with NULLs in every column
    extra = [(100, None, True, "x", 1.0, 7), (101, 5, None, "y", 1.0, None), (102, 5, True, None, None, 8)]
    put(log, schema, {"k": pa.array(list(range(N)) + [r[0] for r in extra], pa.int64()),
                      "n": pa.array([5] * N + [r[1] for r in extra], pa.int32()),
                      "flag": pa.array([True] * N + [r[2] for r in extra]),
                      "s": pa.array([f"s{i}" for i in range(N)] + [r[3] for r in extra]),
                      "x": pa.array([0.5] * N + [r[4] for r in extra]),
                      "c": pa.array([None] * N + [r[5] for r in extra], pa.int64())},
        2, [-1] * N + [1] * len(extra), new_schema=evolved)
    want = [dict(zip(["k", "n", "flag", "s", "x", "c"], r, strict=True)) for r in extra]
    assert by_key(reader.scan(uri).to_pylist()) == by_key(want)
    buckets, rows = read_in_buckets(uri, monkeypatch)
    assert buckets > 1
    assert by_key(rows) == by_key(want)


@pytest.mark.parametrize("default", [None, 7])
def test_a_diff_table_in_buckets_retracts_rows_inserted_before_a_column_was_added(
        file_uri: Callable[[str], str], monkeypatch: pytest.MonkeyPatch, default: int | None) -> None:
    # the old part reads the added column as its default (all NULL, or 7 without a NULL); the
    # new part retracts those rows next to a row whose new column is NULL
    uri = file_uri("diff-evolved/")
    schema = TableSchema.of([("k", "bigint")])
    log = TableLog.create(uri, schema, "diff")
    put(log, schema, {"k": pa.array(range(N), pa.int64())}, 1, [1] * N)
    evolved = schema.add_column("c", "int", default=default)
    put(log, schema, {"k": pa.array(list(range(N)) + [N, N + 1], pa.int64()),
                      "c": pa.array([default] * N + [3, None], pa.int32())}, 2, [-1] * N + [1, 1],
        new_schema=evolved)
    buckets, rows = read_in_buckets(uri, monkeypatch)
    assert buckets > 1
    assert by_key(rows) == by_key([{"k": N, "c": 3}, {"k": N + 1, "c": None}])


def test_an_upsert_table_in_buckets_keeps_deletes_and_updates_next_to_null_keys(
        file_uri: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    uri = file_uri("upsert/")
    schema = TableSchema.of([("a", "bigint"), ("b", "int"), ("t", "string"), ("v", "string")])
    log = TableLog.create(uri, schema, "upsert", ["a", "b", "t"])
    keys_a, keys_b, keys_t = list(range(N)), [1] * N, [f"t{i % 3}" for i in range(N)]
    put(log, schema, {"a": pa.array(keys_a, pa.int64()), "b": pa.array(keys_b, pa.int32()),
                      "t": pa.array(keys_t), "v": pa.array(["old"] * N)}, 1, [1] * N)
    # even keys deleted, odd keys updated, next to keys with NULL in b and in t
    half = N // 2
    put(log, schema, {"a": pa.array(keys_a + [100, 101], pa.int64()), "b": pa.array(keys_b + [None, 2], pa.int32()),
                      "t": pa.array(keys_t + ["t0", None]),
                      "v": pa.array([None if i % 2 == 0 else "new" for i in range(N)] + ["x", "y"])},
        2, [-1 if i % 2 == 0 else 1 for i in range(N)] + [1, 1])
    want = [{"a": i, "b": 1, "t": f"t{i % 3}", "v": "new"} for i in range(1, N, 2)] + [
        {"a": 100, "b": None, "t": "t0", "v": "x"}, {"a": 101, "b": 2, "t": None, "v": "y"}]
    assert len(want) == half + 2
    assert by_key(reader.scan(uri).to_pylist()) == by_key(want)
    buckets, rows = read_in_buckets(uri, monkeypatch)
    assert buckets > 1
    assert by_key(rows) == by_key(want)
