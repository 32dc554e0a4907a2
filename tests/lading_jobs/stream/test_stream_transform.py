"""StreamCopy with ``spec.transform``: the load's transform stage on every micro-batch, Kafka and files.

A WHERE filters (counted as filtered, in the run's result and the batch's progress),
items compute columns (a column left out takes its default), a failing cast is a
rejected row in the dead letter with its coordinates, and exactly-once holds: a
second run over the same position loads nothing. tansu, the shared local Spark,
file:// tables.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from support.kafka import produce

from lading_jobs import storage as st
from lading_jobs.stream.job import run_stream
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.reader import read_table
from lading_spec.job import JobDocument
from lading_spec.streamprogress import status_fields

pytestmark = [pytest.mark.spark]

PAID = [{"name": "order_id", "type": "bigint", "nullable": False}, {"name": "cents", "type": "bigint"},
        {"name": "channel", "type": "string", "default": "kafka"}]


def job(spec: dict[str, Any], name: str = "tf", generation: int = 1) -> JobDocument:
    return JobDocument("StreamCopy", "ns", name, "uid", generation, f"{name}-{generation}",
                       dt.datetime.now(dt.UTC), spec)


def letters(dead: str) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(Path(dead[len("file://"):]).rglob("*.jsonl"))
            for line in f.read_text().splitlines()]


def test_kafka_json_filter_computed_columns_and_a_bad_cast_to_the_dead_letter_exactly_once(
        spark: Any, kafka: str, make_topic: Any, file_uri: Any) -> None:
    topic = make_topic(partitions=1)
    table, dead = file_uri("paid/"), file_uri("dead/")
    events = [{"id": 1, "kind": "paid", "amount": "12.50"}, {"id": 2, "kind": "refund", "amount": 3},
              {"id": 3, "kind": "paid", "amount": 0.1}, {"id": 4, "kind": "paid", "amount": "oops"},
              {"id": 5, "kind": "view"}]
    produce(kafka, topic, [(0, None, json.dumps(e).encode()) for e in events] + [(0, None, b"{broken")])
    spec = {"source": {"kafka": {"bootstrapServers": [kafka], "topics": [topic], "startingOffsets": "earliest"}},
            "target": {"table": table, "schema": PAID},
            "transform": {"fields": ["id", "kind", "amount"], "columns": ["order_id", "cents"],
                          "select": "SELECT id::bigint, CAST(amount::decimal(12,2) * 100 AS bigint) "
                                    "FROM source WHERE kind = 'paid'"},
            "maxErrorNumber": 2, "deadLetter": dead}
    seen: list[dict[str, Any]] = []
    out = run_stream(spark, job(spec), once=True, progress_port=None, on_batch=lambda r, doc: seen.append(doc))
    assert out["rows"] == 2 and out["rowsFiltered"] == 2 and out["batches"] == 1, out
    assert out["offsets"] == {f"{topic}:0": 6}
    rows = sorted((r["order_id"], r["cents"], r["channel"]) for r in read_table(spark, table).collect())
    assert rows == [(1, 1250, "kafka"), (3, 10, "kafka")]
    last = status_fields(seen[-1])["lastBatch"]
    assert (last["rows"], last["rejected"], last["filtered"]) == (2, 2, 2)
    bad = letters(dead)
    assert [(e["topic"], e["partition"], e["offset"]) for e in bad] == [(topic, 0, 3), (topic, 0, 5)]
    assert bad[0]["column"] == "cents" and "failed" in bad[0]["reason"]
    assert json.loads(bad[0]["record"]) == {"id": "4", "kind": "paid", "amount": "oops"}
    assert bad[1]["record"] == "{broken" and "not a JSON object" in bad[1]["reason"]
    # exactly once: nothing new, nothing loaded again; new messages load once
    again = run_stream(spark, job(spec), once=True, progress_port=None)
    assert again["rows"] == 0 and again["offsets"] == {f"{topic}:0": 6}
    produce(kafka, topic, [(0, None, json.dumps({"id": 6, "kind": "paid", "amount": 1}).encode())])
    third = run_stream(spark, job(spec), once=True, progress_port=None)
    assert third["rows"] == 1 and third["offsets"] == {f"{topic}:0": 7}
    assert sorted(r["order_id"] for r in read_table(spark, table).collect()) == [1, 3, 6]
    assert not st.open_storage(table).list_pending_uploads(table)


def test_kafka_raw_source_columns(spark: Any, kafka: str, make_topic: Any, file_uri: Any) -> None:
    topic = make_topic(partitions=1)
    table = file_uri("raw/")
    produce(kafka, topic, [(0, b"a", b"first"), (0, b"b", b"second"), (0, None, b"third")])
    spec = {"source": {"kafka": {"bootstrapServers": [kafka], "topics": [topic], "startingOffsets": "earliest",
                                 "valueFormat": "raw"}},
            "target": {"table": table, "schema": [{"name": "k", "type": "string"}, {"name": "v", "type": "string"},
                                                  {"name": "at", "type": "string"}]},
            "transform": {"select": "SELECT CAST(key AS STRING), upper(CAST(value AS STRING)), concat(topic, '/', "
                                    "CAST(partition AS STRING), '@', CAST(offset AS STRING)) FROM source "
                                    "WHERE key IS NOT NULL"}}
    out = run_stream(spark, job(spec, name="raw"), once=True, progress_port=None)
    assert out["rows"] == 2 and out["rowsFiltered"] == 1, out
    assert sorted((r["k"], r["v"], r["at"]) for r in read_table(spark, table).collect()) == [
        ("a", "FIRST", f"{topic}/0@0"), ("b", "SECOND", f"{topic}/0@1")]


def test_files_transform_rejects_with_file_and_line_and_a_bad_statement_stops_the_stream(
        spark: Any, tmp_path: Path, file_uri: Any) -> None:
    landing = tmp_path / "in"
    landing.mkdir()
    (landing / "a.csv").write_text("1,ann,9.5,y\n2,bob,x,y\n3,cy,1,n\n")
    table, dead = file_uri("t/"), file_uri("dead/")
    schema = [{"name": "id", "type": "int"}, {"name": "who", "type": "string"},
              {"name": "score", "type": "decimal(5,1)"}]
    spec = {"source": {"files": {"uri": file_uri("in/"), "format": "csv"}},
            "target": {"table": table, "schema": schema},
            "transform": {"select": "SELECT $1::int, upper($2), $3::decimal(5,1) * 2 FROM source WHERE $4 = 'y'"},
            "maxErrorNumber": 1, "deadLetter": dead}
    bad = {**spec, "transform": {"select": "SELECT $1, nosuch, $3 FROM source"}}
    stopped = run_stream(spark, job(bad, name="files"), once=True, progress_port=None)
    assert stopped["reason"] == "InvalidTransform" and "transform.select" in stopped["error"], stopped
    assert TableLog.open_existing(table).snapshot().rows == 0  # nothing of the batch committed
    out = run_stream(spark, job(spec, name="files", generation=2), once=True, progress_port=None)
    assert out["rows"] == 1 and out["rowsFiltered"] == 1, out
    assert [(r["id"], r["who"], r["score"]) for r in read_table(spark, table).collect()] == [(1, "ANN", Decimal("19.0"))]
    entries = letters(dead)
    assert [(e["file"].rsplit("/", 1)[-1], e["line"], e["column"]) for e in entries] == [("a.csv", 2, "score")]
    again = run_stream(spark, job(spec, name="files", generation=2), once=True, progress_port=None)
    assert again["rows"] == 0 and TableLog.open_existing(table).snapshot().rows == 1
