"""The filter on a table's scan, taken from Spark's analysed plan, skips parts in a real query.

A ``from.query`` over a table input of daily parts: the parts the filter must skip are
deleted from storage before the query runs, so the query answering at all proves Spark
never fetched them, and its rows are compared with the rows computed here. Shapes that
must not skip (a filter above an aggregate, a self-join) read every part."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.unload import job_doc

from lading_jobs import storage as st
from lading_jobs.sources import files as sources_files
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import Part, TableLog
from lading_jobs.table.schema import TableSchema
from lading_jobs.unload.job import run_unload
from lading_spec.copyjob import Input, parse_copyjob

DAYS = 12
UTC = dt.UTC


def make_table(uri: str, first_day: dt.datetime, envelope: str = "append") -> list[dict[str, Any]]:
    """One part per day from ``first_day``: four rows at 00:00, 06:00, 12:00, 23:59:59.999999."""
    keys = ["id"] if envelope == "upsert" else []
    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("ts", "timestamp"), ("amount", "decimal(10,2)")]),
                          envelope=envelope, key_columns=keys)
    schema = log.snapshot().schema
    rows, tables = [], []
    for d in range(DAYS):
        day = first_day + dt.timedelta(days=d)
        times = [day, day + dt.timedelta(hours=6), day + dt.timedelta(hours=12),
                 day + dt.timedelta(days=1, microseconds=-1)]
        part = [{"id": d * 10 + i, "ts": t, "amount": decimal.Decimal(f"{d}.{i}5")} for i, t in enumerate(times)]
        rows += part
        tables.append(pa.table({"id": pa.array([r["id"] for r in part], pa.int64()),
                                "ts": pa.array([r["ts"] for r in part], pa.timestamp("us", tz="UTC")),
                                "amount": pa.array([r["amount"] for r in part], pa.decimal128(10, 2)),
                                fmt.TIME_COLUMN: pa.array([d] * len(part), pa.int64())}))
    written = writer.write_parts(uri, tables, schema, write_id=fmt.new_write_id(), one_part_per_table=True,
                                 storage=st.open_storage(uri))
    writer.commit_parts(uri, written, log=log)
    return rows


def planned(spark: Any, query: str, uri: str) -> tuple[Any, list[Part], list[Part]]:
    """The query's frame, the parts its scan filter keeps and all parts."""
    df = sources_files.query_frame(spark, query, [Input(name="events", table=uri)])
    snapshot = TableLog.open_existing(uri).snapshot()
    found = reader.scan_filters(df)
    kept = reader.plan_scan(snapshot, None, found["events"]) if "events" in found else list(snapshot.parts)
    return df, kept, list(snapshot.parts)


def delete_others(uri: str, keep: list[Part], every: list[Part]) -> None:
    root = uri.removeprefix("file://")
    for p in every:
        if p not in keep:
            os.remove(os.path.join(root, p.path))


def ids(df: Any) -> list[int]:
    return sorted(r.id for r in df.collect())


NOV1 = dt.datetime(2026, 10, 28, tzinfo=UTC)


CASES = [
    ("date_trunc('DAY', ts) = DATE'2026-11-01'", 1, lambda r: r["ts"].date() == dt.date(2026, 11, 1)),
    ("CAST(ts AS DATE) BETWEEN DATE'2026-11-02' AND DATE'2026-11-03'", 2,
     lambda r: dt.date(2026, 11, 2) <= r["ts"].date() <= dt.date(2026, 11, 3)),
    ("year(ts) = 2026 AND month(ts) = 11 AND day(ts) = 5", 1, lambda r: r["ts"].date() == dt.date(2026, 11, 5)),
    ("id * 2 + 1 < 23", 2, lambda r: r["id"] * 2 + 1 < 23),
    ("CAST(amount AS BIGINT) > 9", 2, lambda r: int(r["amount"]) > 9),
    ("unix_timestamp(ts) >= unix_timestamp(TIMESTAMP'2026-11-07 23:59:59')", 2,
     lambda r: r["ts"] >= dt.datetime(2026, 11, 7, 23, 59, 59, tzinfo=UTC)),
    ("ts + INTERVAL 1 HOUR < TIMESTAMP'2026-10-29 01:00:00' OR id IS NULL", 1,
     lambda r: r["ts"] < dt.datetime(2026, 10, 29, tzinfo=UTC)),
    # Oct 28 … 31 go back to Sep 28 … 30, Nov 1 00:00 to Oct 1 00:00
    ("ts - INTERVAL 1 MONTH < TIMESTAMP'2026-10-01 06:00:00'", 5,
     lambda r: r["ts"] < dt.datetime(2026, 11, 1, 6, tzinfo=UTC)),
    ("add_months(CAST(ts AS DATE), 1) = DATE'2026-12-01'", 1, lambda r: r["ts"].date() == dt.date(2026, 11, 1)),
    # decimal(10,2) * 1.5 is decimal(13,3); / 4 is decimal(14,6), rounded half up
    ("amount * 1.5 > 16", 1, lambda r: r["amount"] * decimal.Decimal("1.5") > 16),
    ("amount / 4 < 0.5 AND 7.5 - amount > 0", 2, lambda r: r["amount"] < 2),
    # DIV truncates toward zero: a positive divisor keeps the order, a negative one reverses it
    ("id DIV 10 + 1 = 6", 1, lambda r: r["id"] // 10 == 5),
    ("id DIV -10 = -3", 1, lambda r: 30 <= r["id"] <= 39),
    ("(id - 60) DIV 10 = 0", 2, lambda r: 51 <= r["id"] <= 69),  # -9 DIV 10 is 0, not -1
    ("CAST(id AS INT) DIV 25 = 4 AND id DIV 1 >= 0", 2, lambda r: 100 <= r["id"] <= 124),
]


@pytest.mark.parametrize("case", [0, 1])
def test_filters_over_expressions_skip_parts_spark_never_fetches(spark: Any, file_uri: Callable[[str], str],
                                                                 case: int) -> None:
    where, expected_parts, match = CASES[case]
    uri = file_uri("events/")
    rows = make_table(uri, NOV1)
    df, kept, every = planned(spark, f"SELECT id FROM events WHERE {where}", uri)
    assert len(kept) == expected_parts
    delete_others(uri, kept, every)
    assert ids(df) == sorted(r["id"] for r in rows if match(r))


def test_every_annotated_shape_skips_and_answers_right(spark: Any, file_uri: Callable[[str], str]) -> None:
    """All cases on one table (parts kept, so one table serves them all): the parts planned and
    Spark's rows."""
    uri = file_uri("events/")
    rows = make_table(uri, NOV1)
    for where, expected_parts, match in CASES[2:]:
        df, kept, _ = planned(spark, f"SELECT id FROM events WHERE {where}", uri)
        assert len(kept) == expected_parts, where
        assert ids(df) == sorted(r["id"] for r in rows if match(r)), where


def test_current_timestamp_window_skips_old_parts(spark: Any, file_uri: Callable[[str], str]) -> None:
    uri = file_uri("recent/")
    today = dt.datetime.fromtimestamp(time.time(), UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    rows = make_table(uri, today - dt.timedelta(days=DAYS - 1))
    df, kept, every = planned(spark, "SELECT id FROM events WHERE ts > current_timestamp() - INTERVAL 3 DAYS", uri)
    assert 3 <= len(kept) <= 4  # the days the window touches
    delete_others(uri, kept, every)
    before = dt.datetime.fromtimestamp(time.time(), UTC)
    got = set(ids(df))
    after = dt.datetime.fromtimestamp(time.time(), UTC)
    # Spark's instant lies between before and after
    assert {r["id"] for r in rows if r["ts"] > after - dt.timedelta(days=3)} <= got
    assert got <= {r["id"] for r in rows if r["ts"] > before - dt.timedelta(days=3)}


SHAPES = [
    # HAVING sits above the aggregate: it says nothing about which rows the scan returns
    "SELECT d AS id FROM (SELECT day(ts) AS d, count(*) AS n FROM events GROUP BY day(ts)) WHERE d = 3",
    # two scans of one table: each keeps its own rows (shared_scans), nothing is skipped
    "SELECT a.id FROM events a JOIN events b ON a.id = b.id WHERE day(a.ts) = 3 OR day(b.ts) = 4",
    # a limit under the filter: which rows it takes depends on every part
    "SELECT id FROM (SELECT * FROM events LIMIT 100) WHERE day(ts) = 3",
]


def test_shapes_that_must_not_skip(spark: Any, file_uri: Callable[[str], str]) -> None:
    uri = file_uri("shapes/")
    make_table(uri, NOV1)
    for query in SHAPES:
        df, kept, every = planned(spark, query, uri)
        assert len(kept) == len(every), query
        assert len(ids(df)) >= 1, query


def test_upsert_tables_skip_by_key_conjuncts_only(spark: Any, file_uri: Callable[[str], str]) -> None:
    uri = file_uri("upsert/")
    make_table(uri, NOV1, envelope="upsert")
    _, kept, _ = planned(spark, "SELECT id FROM events WHERE day(ts) = 3", uri)
    assert len(kept) == DAYS  # ts is no key: a skipped newer version could let an older one win
    df, kept, every = planned(spark, "SELECT id FROM events WHERE id * 2 + 1 < 23 AND day(ts) >= 1", uri)
    assert len(kept) == 2
    delete_others(uri, kept, every)
    assert ids(df) == [0, 1, 2, 3, 10]


def test_read_table_with_a_filter_skips_parts(spark: Any, file_uri: Callable[[str], str]) -> None:
    uri = file_uri("where/")
    rows = make_table(uri, NOV1)
    snapshot = TableLog.open_existing(uri).snapshot()
    keep = [p for p in snapshot.parts if p.stats.min_time == 4]  # Nov 1's part (logical time = day)
    df = reader.read_table(spark, uri, where="date_trunc('DAY', ts) = DATE'2026-11-01' AND amount >= 0")
    delete_others(uri, keep, list(snapshot.parts))
    assert ids(df) == sorted(r["id"] for r in rows if r["ts"].date() == dt.date(2026, 11, 1))


def test_the_arrow_only_unload_skips_parts_by_the_whole_filter(spark: Any, file_uri: Callable[[str], str],
                                                               tmp_path: Path) -> None:
    """A filtered projection of a table input runs without Spark SQL (``unload.arrowpath``); its
    tasks are planned with the plan's filter on the scan, not only the pushed *column op literal*
    conjuncts, which skip nothing for a ``NOT``. Every part but the last two days' is deleted
    first: the run answering at all proves it never fetched them."""
    uri = file_uri("arrowpath/")
    rows = make_table(uri, NOV1)
    every = list(TableLog.open_existing(uri).snapshot().parts)
    delete_others(uri, [p for p in every if p.stats.min_time >= DAYS - 2], every)  # logical time = day
    spec = {"from": {"query": "SELECT id, amount FROM events WHERE NOT (ts < TIMESTAMP'2026-11-07 00:00:00')",
                     "inputs": [{"name": "events", "table": uri}]},
            "to": {"files": f"file://{tmp_path}/out/", "format": "csv", "options": {"header": True}}}
    result = run_unload(spark, job_doc(spec), parse_copyjob(spec), path="arrow")
    got = sorted(int(r["id"]) for f in sorted((tmp_path / "out").glob("*.csv")) for r in csv.DictReader(f.open()))
    assert got == sorted(r["id"] for r in rows if r["ts"] >= dt.datetime(2026, 11, 7, tzinfo=UTC))
    assert result["rows"] == len(got) == 8
