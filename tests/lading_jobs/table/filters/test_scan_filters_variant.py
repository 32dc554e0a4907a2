"""Filters over ``variant`` paths, taken from Spark's analysed plan, skip parts in a real query.

A ``from.query`` over a table input with a ``variant`` column written by lading's writer (the
column's per-path statistics recorded in the commit), one part per day: the parts the filter
must skip are deleted before the query runs, so its answering at all proves Spark never
fetched them; its rows are compared with the rows computed here. A filter that may raise on
a part's values (``variant_get`` of a string path as ``int``) keeps every part."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from support.planned_parts import answer_from_kept_parts

from lading_jobs.sources import files as sources_files
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.copyjob import Input

DAYS = 6
VARIANT = pa.struct([pa.field("value", pa.binary()), pa.field("metadata", pa.binary())])


def variants(spark: Any, docs: list[dict[str, Any]]) -> pa.Array:
    """``docs`` as Spark's variant binary (``to_variant_object`` keeps each field's type: ``n`` an
    int, ``at`` a date)."""
    df = spark.createDataFrame([(i, d["day"], d["n"], d["user"]["name"], d["at"]) for i, d in enumerate(docs)],
                               "i INT, day STRING, n INT, name STRING, at DATE")
    rows = df.selectExpr("i", "to_variant_object(named_struct('day', day, 'n', n, "
                              "'user', named_struct('name', name), 'at', at)) AS v").orderBy("i").collect()
    return pa.array([{"value": r.v.value, "metadata": r.v.metadata} for r in rows], VARIANT)


def make_table(spark: Any, uri: str) -> list[dict[str, Any]]:
    """One part per day of November: three documents each, ``n`` = day × 10 + i."""
    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("payload", "variant")]))
    rows, tables = [], []
    for d in range(DAYS):
        part = [{"id": d * 10 + i, "day": f"2026-11-{d + 1:02d}", "n": d * 10 + i,
                 "user": {"name": f"u{d * 10 + i}"}, "at": dt.date(2026, 11, d + 1)} for i in range(3)]
        rows += part
        tables.append(pa.table({"id": pa.array([r["id"] for r in part], pa.int64()),
                                "payload": variants(spark, part),
                                fmt.TIME_COLUMN: pa.array([d] * 3, pa.int64())}))
    written = writer.write_parts(uri, tables, log.snapshot().schema, write_id=fmt.new_write_id(),
                                 one_part_per_table=True)
    writer.commit_parts(uri, written, log=log)
    return rows


def planned(df: Any, snapshot: Any) -> list[Any]:
    """The parts the query's scan filter on ``events`` keeps (all without one)."""
    found = reader.scan_filters(df)
    return reader.plan_scan(snapshot, None, found["events"]) if "events" in found else list(snapshot.parts)


def test_variant_path_filters_skip_parts_spark_never_fetches(spark: Any, file_uri: Callable[[str], str]) -> None:
    uri = file_uri("events/")
    rows = make_table(spark, uri)
    snapshot = TableLog.open_existing(uri).snapshot()
    assert all(p.stats.columns for p in snapshot.parts)
    cases = [("variant_get(payload, '$.n', 'int') >= 41", 2, lambda r: r["n"] >= 41),
             ("CAST(payload:n AS BIGINT) < 12", 2, lambda r: r["n"] < 12),
             ("try_variant_get(payload, '$.day', 'string') = '2026-11-03'", 1, lambda r: r["day"] == "2026-11-03"),
             ("payload:user.name::string > 'u5'", 1, lambda r: r["user"]["name"] > "u5"),
             ("variant_get(payload, '$.at', 'date') = DATE'2026-11-04'", 1, lambda r: r["at"] == dt.date(2026, 11, 4))]
    plans = []
    for where, expected_parts, match in cases:
        df = sources_files.query_frame(spark, f"SELECT id FROM events WHERE {where}", [Input(name="events", table=uri)])
        kept = planned(df, snapshot)
        assert len(kept) == expected_parts, where
        plans.append((df, kept, sorted(r["id"] for r in rows if match(r))))
    # a cast that fails on some value (the day strings as int) keeps every part: Spark raises there
    df = sources_files.query_frame(spark, "SELECT id FROM events WHERE variant_get(payload, '$.day', 'int') = 3",
                                   [Input(name="events", table=uri)])
    assert len(planned(df, snapshot)) == DAYS
    # the parts no query keeps are deleted: each query answers from the parts it planned
    answer_from_kept_parts(uri, snapshot, plans)
