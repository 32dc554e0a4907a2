"""Filters over JSON paths, taken from Spark's analysed plan, skip parts in a real query.

A ``from.query`` over a table input with a ``json`` column, one part per day: the parts the
filter must skip are deleted before the query runs, so its answering at all proves Spark never
fetched them; its rows are compared with the rows computed here. Also pins, against this Spark,
the ``get_json_object`` semantics the interpreter and the property test's oracle assume."""

from __future__ import annotations

import json
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


def make_table(uri: str) -> list[dict[str, Any]]:
    """One part per day of November: three documents each, ``n`` = day × 10 + i."""
    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("payload", "json")]))
    rows, tables = [], []
    for d in range(DAYS):
        part = [{"id": d * 10 + i, "day": f"2026-11-{d + 1:02d}", "n": d * 10 + i} for i in range(3)]
        rows += part
        docs = [json.dumps({"day": r["day"], "n": r["n"], "user": {"name": f"u{r['id']}"}}) for r in part]
        tables.append(pa.table({"id": pa.array([r["id"] for r in part], pa.int64()), "payload": docs,
                                fmt.TIME_COLUMN: pa.array([d] * 3, pa.int64())}))
    written = writer.write_parts(uri, tables, log.snapshot().schema, write_id=fmt.new_write_id(),
                                 one_part_per_table=True)
    writer.commit_parts(uri, written, log=log)
    return rows


def test_json_path_filters_skip_parts_spark_never_fetches(spark: Any, file_uri: Callable[[str], str]) -> None:
    uri = file_uri("events/")
    rows = make_table(uri)
    cases = [("get_json_object(payload, '$.day') = '2026-11-03'", 1, lambda r: r["day"] == "2026-11-03"),
             ("CAST(get_json_object(payload, '$.n') AS BIGINT) >= 41", 2, lambda r: r["n"] >= 41),
             ("get_json_object(payload, '$.user.name') > 'u5'", 1, lambda r: f"u{r['id']}" > "u5"),
             ("from_json(payload, 'n BIGINT, user STRUCT<name: STRING>').user.name = 'u31'", 1,
              lambda r: r["id"] == 31)]
    snapshot = TableLog.open_existing(uri).snapshot()
    plans = []
    for where, expected_parts, match in cases:
        df = sources_files.query_frame(spark, f"SELECT id FROM events WHERE {where}", [Input(name="events", table=uri)])
        found = reader.scan_filters(df)
        kept = reader.plan_scan(snapshot, None, found["events"])
        assert len(kept) == expected_parts, where
        plans.append((df, kept, sorted(r["id"] for r in rows if match(r))))
    # the parts no query keeps are deleted: each query answers from the parts it planned
    answer_from_kept_parts(uri, snapshot, plans)


def test_get_json_object_semantics_the_interpreter_assumes(spark: Any) -> None:
    row = spark.sql("""SELECT
        get_json_object('{"a": null}', '$.a') AS json_null,
        get_json_object('{"a": true}', '$.a') AS boolean,
        get_json_object('{"a": 1e20}', '$.a') AS fraction,
        get_json_object('{"a": 10000000000000000000000}', '$.a') AS big,
        get_json_object('{"a": [{"b": 1}]}', '$.a.b') AS through_array,
        get_json_object('{"a": "x\\\\u00e9"}', '$.a') AS text,
        get_json_object('{"a": {"b": [1, 2]}}', '$.a') AS object,
        get_json_object('{"a": 1', '$.b') AS invalid,
        from_json('{"K": 5}', 'k BIGINT').k AS other_case,
        from_json('{"k": 1.5}', 'k BIGINT').k AS fraction_as_bigint,
        from_json('{"k": 3000000000}', 'k INT').k AS beyond_int,
        from_json('[1]', 'k BIGINT').k AS no_object""").collect()[0]
    assert row.json_null is None
    assert row.boolean == "true"
    assert row.fraction == "1.0E20"
    assert row.big == "10000000000000000000000"
    assert row.through_array is None
    assert row.text == "x\u00e9"
    assert row.object == '{"b":[1,2]}'
    assert row.invalid is None
    assert row.other_case is None and row.fraction_as_bigint is None and row.beyond_int is None
    assert row.no_object is None
