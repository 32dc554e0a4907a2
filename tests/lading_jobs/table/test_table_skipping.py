"""Skipping by statistics, proven at the S3 server: a table of 120 parts with time-correlated
rows; a filter selecting the newest 2 % of rows fetches at most 3 % of the parts and returns
exactly what a full scan returns. Plus the evaluator's conservative corners."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.filters import interp
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats.part import ColumnStats, PartStats, column_stats, truncate_upper

PARTS, ROWS_PER_PART = 120, 50


class CountingApp:
    """WSGI middleware counting GET requests per object key (the S3 server's view)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.gets: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] == "GET":
            with self.lock:
                self.gets.append(environ.get("PATH_INFO", ""))
        return self.app(environ, start_response)


@pytest.fixture(scope="module")
def counting_endpoint(s3_endpoint: str) -> Iterator[tuple[str, CountingApp]]:
    """A second front door to the same in-process moto backend, counting what it serves."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    counting = CountingApp(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, counting, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", counting
    server.shutdown()


@pytest.fixture(scope="module")
def big_table(s3_endpoint: str, s3_client: Any) -> str:
    """120 parts; part i holds event times [i*50, i*50+50) and logical time i (built with pyarrow)."""
    bucket = "skipping-table"
    s3_client.create_bucket(Bucket=bucket)
    uri = f"s3://{bucket}/events/"
    log = TableLog.create(uri, TableSchema.of([("ts", "bigint"), ("device", "string"), ("value", "double")]),
                          sort_by=["ts"])
    schema = log.snapshot().schema
    tables = []
    for i in range(PARTS):
        ts = list(range(i * ROWS_PER_PART, (i + 1) * ROWS_PER_PART))
        tables.append(pa.table({"ts": pa.array(ts, pa.int64()),
                                "device": [f"dev-{t % 7}" for t in ts],
                                "value": [t * 0.5 for t in ts],
                                fmt.TIME_COLUMN: pa.array([i] * ROWS_PER_PART, pa.int64())}))
    written = writer.write_parts(uri, tables, schema, write_id=fmt.new_write_id(), one_part_per_table=True,
                                 storage=st.S3Storage())
    snap = writer.commit_parts(uri, written, log=log)
    assert len(snap.parts) == PARTS
    return uri


def part_gets(counting: CountingApp) -> set[str]:
    return {p for p in counting.gets if p.endswith(".parquet")}


def newest_two_percent() -> int:
    total = PARTS * ROWS_PER_PART
    return total - total * 2 // 100  # ts >= this: the newest 2 % of rows


@pytest.mark.s3
def test_selective_filter_fetches_few_parts_pure_arrow(big_table: str,
                                                       counting_endpoint: tuple[str, CountingApp]) -> None:
    endpoint, counting = counting_endpoint
    storage = st.S3Storage(st.S3Settings(endpoint=endpoint))
    cut = newest_two_percent()
    counting.gets.clear()
    got = reader.scan(big_table, predicate=ex.Pred("ge", "ts", cut), storage=storage)
    fetched = part_gets(counting)
    assert 0 < len(fetched) <= PARTS * 3 // 100
    counting.gets.clear()
    full = reader.scan(big_table, storage=storage)
    assert len(part_gets(counting)) == PARTS
    expected = full.filter(pa.compute.greater_equal(full.column("ts"), cut)).sort_by("ts")
    assert got.sort_by("ts").equals(expected)
    assert got.num_rows == PARTS * ROWS_PER_PART * 2 // 100


@pytest.mark.spark
@pytest.mark.s3
def test_selective_filter_through_spark_fetches_few_parts(spark, big_table: str,  # type: ignore[no-untyped-def]
                                                          counting_endpoint: tuple[str, CountingApp]) -> None:
    endpoint, counting = counting_endpoint
    cut = newest_two_percent()
    counting.gets.clear()
    selective = reader.read_table(spark, big_table, endpoint=endpoint).where(f"ts >= {cut}")
    got = sorted(tuple(r) for r in selective.collect())
    fetched = part_gets(counting)
    assert 0 < len(fetched) <= PARTS * 3 // 100
    counting.gets.clear()
    everything = reader.read_table(spark, big_table, endpoint=endpoint)
    full = sorted(tuple(r) for r in everything.collect() if r["ts"] >= cut)
    assert len(part_gets(counting)) == PARTS
    assert got == full and len(got) == PARTS * ROWS_PER_PART * 2 // 100
    # Skipping by logical time: as of 5 only parts 0..5 can hold rows.
    counting.gets.clear()
    assert reader.read_table(spark, big_table, as_of=5, endpoint=endpoint).count() == 6 * ROWS_PER_PART
    assert len(part_gets(counting)) == 6
    # The pushed filter on a bigint is applied exactly by the source, so Spark does not re-check it.
    plan = selective._jdf.queryExecution().executedPlan().toString()  # noqa: SLF001
    assert "BatchScan lading" in plan and "Filter (" not in plan


# -- the evaluator's corners (pure) ------------------------------------------------------------
def stats_of(col: ColumnStats, rows: int = 10) -> PartStats:
    return PartStats(rows=rows, columns={1: col})


def bound(op: str, value: Any, type_: str = "bigint") -> ex.Pred:
    return ex.Pred(op, "c", value, 1, type_)


@pytest.mark.parametrize(("op", "value", "expected"), [
    ("eq", 5, True), ("eq", 11, False), ("lt", 3, False), ("lt", 4, True), ("le", 3, True),
    ("gt", 10, False), ("ge", 10, True), ("in", (1, 2, 20), False), ("in", (1, 7), True),
    ("ne", 5, True), ("isnull", None, True), ("notnull", None, True),
])
def test_evaluator_on_integer_bounds(op: str, value: Any, expected: bool) -> None:
    assert interp.might_match(bound(op, value), stats_of(ColumnStats(nulls=2, min=3, max=10))) is expected


def test_evaluator_is_conservative_and_handles_not() -> None:
    assert interp.might_match(bound("eq", 1), PartStats(rows=5))  # no statistics: might match
    assert interp.might_match(bound("eq", "x"), stats_of(ColumnStats(0, 3, 10)))  # literal of another type
    assert not interp.might_match(bound("isnull", None), stats_of(ColumnStats(0, 3, 10)))
    assert not interp.might_match(bound("eq", 3), stats_of(ColumnStats(10)))  # all null
    constant = stats_of(ColumnStats(0, 4, 4))
    assert not interp.might_match(ex.Not(bound("eq", 4)), constant)
    assert interp.might_match(ex.Not(bound("eq", 5)), constant)
    assert not interp.might_match(ex.Or(bound("lt", 4), bound("gt", 4)), constant)
    assert interp.might_match(ex.And(bound("ge", 4), ex.Not(bound("in", (1, 2)))), constant)
    assert not interp.might_match(ex.Not(ex.Or(bound("eq", 4), bound("eq", 9))), constant)


def test_truncated_string_bounds_stay_bounds() -> None:
    long_a, long_b = "a" * 100 + "q", "b" * 100 + "\U0010ffff"
    s = column_stats(pa.array([long_a, long_b, None]))
    assert s.min_truncated and s.max_truncated and s.nulls == 1
    assert s.min <= long_a and s.max >= long_b and len(s.max) <= fmt.STRING_STATS_LENGTH
    st_ = stats_of(s, rows=3)
    for value in (long_a, long_b):  # the real values must never be skipped
        assert interp.might_match(bound("eq", value, "string"), st_)
        assert interp.might_match(bound("startswith", value[:70], "string"), st_)
    # A truncated upper bound is not a value: NOT = must not use it as one.
    equal = stats_of(column_stats(pa.array(["z" * 80, "z" * 80])), rows=2)
    assert interp.might_match(ex.Not(bound("eq", "z" * 64, "string")), equal)
    assert not interp.might_match(bound("startswith", "c", "string"), st_)
    assert truncate_upper("\U0010ffff" * 70)[0] is None  # no upper bound exists: none is kept


def test_nan_drops_float_bounds_and_upsert_skips_only_by_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert column_stats(pa.array([1.0, float("nan")])).min is None
    uri = f"file://{tmp_path}/u/"
    log = TableLog.create(uri, TableSchema.of([("k", "bigint"), ("v", "bigint")]), "upsert", ["k"])
    schema = log.snapshot().schema
    old = pa.table({"k": pa.array([1], pa.int64()), "v": pa.array([100], pa.int64())})
    new = pa.table({"k": pa.array([1], pa.int64()), "v": pa.array([1], pa.int64())})
    for t, data in ((1, old), (2, new)):
        writer.commit_parts(uri, writer.write_parts(uri, [data], schema, write_id=fmt.new_write_id(),
                                                    logical_time=t), log=log)
    # v > 50 could skip the newer part by its stats; that would resurrect v = 100.
    assert reader.scan(uri, predicate=ex.Pred("gt", "v", 50)).num_rows == 0
    snap = log.snapshot()
    assert len(reader.plan_scan(snap, ex.bind(ex.Pred("gt", "v", 50), snap.schema))) == 2
    assert len(reader.plan_scan(snap, ex.bind(ex.Pred("eq", "k", 2), snap.schema))) == 0
