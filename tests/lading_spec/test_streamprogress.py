"""The progress document → StreamCopy status fields: what a driver says, bounded to what the CRD accepts.

The driver runs the tenant's image, so every value is checked: the operator must
never write a status the API server refuses (that would stall its reconcile loop)
nor one that grows without bound.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lading_spec.streamprogress import (
    INT64_MAX,
    MAX_ENTRIES,
    MAX_TEXT,
    parse_progress,
    status_fields,
)

KAFKA_DOC: dict[str, Any] = {
    "kind": "StreamProgress", "runId": "r", "state": "running", "source": "kafka",
    "rowsTotal": 120000, "batches": 42, "tableVersion": 57, "upper": 1767322800124,
    "lastBatch": {"time": "2026-01-02T03:04:05.123Z", "rows": 3000, "read": 3001, "bytes": 412000, "rejected": 1,
                  "durationSeconds": 0.8134, "range": "orders/0@100..1599, orders/1@90..1589",
                  "end": {"orders:0": 1600, "orders:1": 1590}},
    "lag": {"total": 7, "partitions": {"orders:0": 3, "orders:1": 4}},
    "offsets": {"orders:0": 1600, "orders:1": 1590},
    "rewrittenFiles": 0, "dataLossSkipped": [], "updatedAt": "2026-01-02T03:04:05.200Z",
}


def test_a_kafka_document_fills_every_stream_status_field() -> None:
    assert status_fields(parse_progress(json.dumps(KAFKA_DOC))) == {
        "rowsTotal": 120000, "batches": 42, "lag": 7, "lagPartitions": {"orders:0": 3, "orders:1": 4},
        "lastBatchTime": "2026-01-02T03:04:05.123Z",
        "lastBatch": {"time": "2026-01-02T03:04:05.123Z", "rows": 3000, "bytes": 412000, "rejected": 1,
                      "durationSeconds": 0.813, "range": "orders/0@100..1599, orders/1@90..1589",
                      "end": {"orders:0": 1600, "orders:1": 1590}},
        "offsets": {"orders:0": 1600, "orders:1": 1590},
    }


def test_a_files_document_says_files_pending_and_when_the_count_stopped() -> None:
    doc = {**KAFKA_DOC, "source": "files", "lag": {"total": 10000, "filesPending": 10000, "atLeast": True},
           "offsets": {"files": 12}, "lastBatch": {**KAFKA_DOC["lastBatch"], "end": {"files": 12, "marks": ["x"]}}}
    got = status_fields(doc)
    assert got["lag"] == 10000 and got["lagAtLeast"] is True and "lagPartitions" not in got
    assert got["offsets"] == {"files": 12} and got["lastBatch"]["end"] == {"files": 12}


def test_a_restarted_driver_knows_only_the_last_batch_time() -> None:
    doc = {**KAFKA_DOC, "lastBatch": {"time": "2026-01-02T03:04:05.123Z"}}
    got = status_fields(doc)
    assert got["lastBatchTime"] == "2026-01-02T03:04:05.123Z" and "lastBatch" not in got


@pytest.mark.parametrize("bad", [
    {"rowsTotal": -1}, {"rowsTotal": True}, {"rowsTotal": 2**70}, {"rowsTotal": 1.5}, {"rowsTotal": "9"},
])
def test_counters_the_schema_would_refuse_are_left_out(bad: dict[str, Any]) -> None:
    assert "rowsTotal" not in status_fields({**KAFKA_DOC, **bad})


@pytest.mark.parametrize("time", ["yesterday", "2026-01-02 03:04:05", "2026-01-02T03:04:05", 17, None,
                                  "2026-01-02T03:04:05Z" + " " * 40])
def test_a_time_that_is_not_rfc3339_with_a_zone_drops_the_last_batch(time: Any) -> None:
    got = status_fields({**KAFKA_DOC, "lastBatch": {**KAFKA_DOC["lastBatch"], "time": time}})
    assert "lastBatch" not in got and "lastBatchTime" not in got


def test_hostile_shapes_are_bounded() -> None:
    many = {f"t:{i:05d}": i for i in range(MAX_ENTRIES + 500)}
    doc = {**KAFKA_DOC, "offsets": {**many, "x" * 400: 1, "neg:0": -5, "bool:0": True},
           "lag": {"total": 2**80, "partitions": many},
           "lastBatch": {**KAFKA_DOC["lastBatch"], "range": "r" * (MAX_TEXT * 5), "durationSeconds": float("nan"),
                         "rows": -3, "end": "not a map"}}
    got = status_fields(doc)
    assert len(got["offsets"]) == MAX_ENTRIES and min(got["offsets"]) == "t:00000"
    assert all(len(k) <= 300 and 0 <= v <= INT64_MAX for k, v in got["offsets"].items())
    assert len(got["lagPartitions"]) == MAX_ENTRIES and got["lag"] == INT64_MAX
    last = got["lastBatch"]
    assert len(last["range"]) == MAX_TEXT and last["range"].endswith("…")
    assert "durationSeconds" not in last and "rows" not in last and "end" not in last
    assert len(json.dumps(got)) < 100_000


def test_a_negative_lag_reads_as_caught_up() -> None:
    assert status_fields({**KAFKA_DOC, "lag": {"total": -4}})["lag"] == 0


def test_topic_ids_reach_the_status_and_a_broker_without_them_says_unavailable() -> None:
    """The driver's topicIds (null: the broker gave none) become status.topicIds, where a missing
    ID reads "unavailable" instead of being guessed; anything else a driver might send is dropped."""
    doc = {**KAFKA_DOC, "topicIds": {"orders": "AaIeUenldlKIvEt94e7e5Q", "legacy": None, "bad": "x" * 65,
                                     "worse": 7, "": "AaIe"}}
    assert status_fields(parse_progress(json.dumps(doc)))["topicIds"] == {
        "orders": "AaIeUenldlKIvEt94e7e5Q", "legacy": "unavailable"}
    assert "topicIds" not in status_fields(parse_progress(json.dumps(KAFKA_DOC)))


def test_the_mirrors_metadata_file_reaches_status_output_and_nothing_else_does() -> None:
    """The driver's icebergMetadata (the newest metadata file of the table's Iceberg mirror after the
    last batch) becomes status.output.icebergMetadata, as a CopyJob load's and a Compaction's do;
    a value that is not a table's ``metadata/v<n>.metadata.json`` URI, or is too long, is dropped."""
    meta = "s3://lake/orders/metadata/v57.metadata.json"
    assert status_fields({**KAFKA_DOC, "icebergMetadata": meta})["output"] == {"icebergMetadata": meta}
    assert "output" not in status_fields(KAFKA_DOC)  # the mirror is off: nothing
    for bad in ("s3://lake/orders/_lading_log/00000000000000000057.json", "http://x/metadata/v1.metadata.json",
                "s3://lake/o rders/metadata/v1.metadata.json", 57, None, ["s3://a/metadata/v1.metadata.json"],
                "s3://lake/" + "x" * 5000 + "/metadata/v1.metadata.json"):
        assert "output" not in status_fields({**KAFKA_DOC, "icebergMetadata": bad}), bad
