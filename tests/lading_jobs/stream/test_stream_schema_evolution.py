"""``target.schemaEvolution: addColumns`` on a StreamCopy: the same loop as a load's (the tasks report
fields the table lacks, the ranges that carried them are redone with the evolved schema) and the
schema in the batch's one commit. One topic, read by a stream without the opt-in (the field is
ignored) and by one with it; then a JSON-files stream whose second file adds a column."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from support.kafka import produce

from lading_jobs import storage as st
from lading_jobs.stream.job import run_stream
from lading_jobs.table import format as fmt
from lading_jobs.table import reader
from lading_jobs.table.log.commits import TableLog
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark]
SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}]


def job(spec: dict[str, Any], name: str) -> JobDocument:
    return JobDocument("StreamCopy", "ns", name, "uid", 1, f"{name}-1", dt.datetime.now(dt.UTC), spec)


def unreferenced(uri: str) -> set[str]:
    snap = TableLog.open_existing(uri).snapshot()
    listed = {o.uri for o in st.open_storage(uri).list_objects(uri + fmt.DATA_DIR + "/")}
    return listed - {snap.part_uri(p) for p in snap.parts}


def test_kafka_fields_the_table_lacks_become_columns_only_with_the_opt_in(
        spark: Any, kafka: str, make_topic: Any, file_uri: Any) -> None:
    topic = make_topic(partitions=2)
    produce(kafka, topic, [(0, None, json.dumps({"id": i}).encode()) for i in range(3)]
            + [(1, None, json.dumps({"id": 10 + i, "score": 1.5 * i}).encode()) for i in range(3)])
    source = {"kafka": {"bootstrapServers": [kafka], "topics": [topic], "startingOffsets": "earliest"}}
    plain, evolving = file_uri("plain/"), file_uri("evolving/")
    out = run_stream(spark, job({"source": source, "target": {"table": plain, "schema": SCHEMA}}, "plain"),
                     once=True, progress_port=None)
    assert out["rows"] == 6, out
    assert TableLog.open_existing(plain).snapshot().schema.names == ["id"]  # ignored without the opt-in

    spec = {"source": source, "target": {"table": evolving, "schema": SCHEMA, "schemaEvolution": "addColumns"}}
    out = run_stream(spark, job(spec, "evolving"), once=True, progress_port=None)
    assert out["rows"] == 6, out
    snap = TableLog.open_existing(evolving).snapshot()
    assert [(c.id, c.name, c.type, c.nullable) for c in snap.schema.columns] == [
        (1, "id", "bigint", False), (2, "score", "double", True)]
    stream_commit = json.loads(st.open_storage(evolving).read(fmt.commit_uri(evolving, snap.version)))
    assert stream_commit["operation"] == "stream" and "schema" in stream_commit and stream_commit["add"]
    got = sorted((r["id"], r["score"]) for r in reader.scan(evolving).to_pylist())
    assert got == [(0, None), (1, None), (2, None), (10, 0.0), (11, 1.5), (12, 3.0)]
    assert unreferenced(evolving) == set()  # the first round's parts of partition 1 were discarded
    assert st.open_storage(evolving).list_pending_uploads(evolving) == []


def test_a_files_stream_adds_the_column_a_later_file_carries(spark: Any, tmp_path: Path, file_uri: Any) -> None:
    landing = tmp_path / "in"
    landing.mkdir()
    (landing / "a.json").write_text(json.dumps({"id": 1}) + "\n")
    spec = {"source": {"files": {"uri": file_uri("in/"), "format": "json"}},
            "target": {"table": file_uri("t/"), "schema": SCHEMA, "schemaEvolution": "addColumns"}}
    assert run_stream(spark, job(spec, "files"), once=True, progress_port=None)["rows"] == 1
    (landing / "b.json").write_text(json.dumps({"id": 2, "tag": "new"}) + "\n")
    assert run_stream(spark, job(spec, "files"), once=True, progress_port=None)["rows"] == 1
    table = file_uri("t/")
    assert TableLog.open_existing(table).snapshot().schema.names == ["id", "tag"]
    assert sorted((r["id"], r["tag"]) for r in reader.scan(table).to_pylist()) == [(1, None), (2, "new")]
    assert unreferenced(table) == set()
