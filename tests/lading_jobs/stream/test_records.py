"""A Kafka range as a transform's decode step (``records.source_batches``), without Spark or a broker:
what the view ``source`` holds for json and raw values, rejects at their offsets, the summary."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pyarrow as pa

from lading_jobs.ingest import transform as tf
from lading_jobs.stream.kafka import Messages
from lading_jobs.stream.positions import Range
from lading_jobs.stream.records import RAW_SOURCE, source_batches, transform_source
from lading_jobs.table.schema import TableSchema


def messages(values: list[bytes | None], start: int = 40) -> Messages:
    n = len(values)
    return Messages(Range("ev", 2, start, start + n), [b"k"] * n, values, list(range(start, start + n)),
                    [1_767_322_800_000 + i for i in range(n)], [None] * n, bytes=sum(len(v or b"") for v in values))


def split(batches: list[pa.RecordBatch]) -> tuple[list[dict[str, Any]], list[tuple[int, dict[str, Any]]],
                                                   dict[str, Any]]:
    table = pa.Table.from_batches(batches)
    rows = table.to_pylist()
    data = [{k: v for k, v in r.items() if not k.startswith("_lading")} | {"offset@": r[tf.POS]}
            for r in rows if r[tf.KIND] == tf.DATA]
    rejects = [(r[tf.POS], json.loads(r[tf.INFO])) for r in rows if r[tf.KIND] == tf.REJECT]
    summaries = [json.loads(r[tf.INFO]) for r in rows if r[tf.KIND] == tf.SUMMARY]
    assert len(summaries) == 1
    return data, rejects, summaries[0]


def test_json_keys_are_text_exact_numbers_and_strings_kept_as_written() -> None:
    schema = TableSchema.of([("x", "bigint")])
    source = transform_source("json", ("id", "amount", "at", "tags", "ok", "missing"), schema)
    assert source.names == ["id", "amount", "at", "tags", "ok", "missing"]
    assert all(f.type == pa.string() for f in source)
    values = [json.dumps({"id": 1, "amount": 2.675, "at": "2026-01-02T03:04:05Z", "tags": {"a": [1, 2]},
                          "ok": True, "other": 5}).encode(),
              b'{"id": 12345678901234567890, "amount": 1234567890123456789.12, "at": null}',
              b"{not json",
              None,
              json.dumps({"id": "x7", "amount": 10}).encode()]
    data, rejects, summary = split(list(source_batches([messages(values)], "json", source)))
    assert data == [
        {"id": "1", "amount": "2.675", "at": "2026-01-02T03:04:05Z", "tags": '{"a": [1, 2]}', "ok": "true",
         "missing": None, "offset@": 40},
        {"id": "12345678901234567890", "amount": "1234567890123456789.12", "at": None, "tags": None, "ok": None,
         "missing": None, "offset@": 41},
        {"id": "x7", "amount": "10", "at": None, "tags": None, "ok": None, "missing": None, "offset@": 44},
    ]
    assert [(at, r["reason"].split(":")[0]) for at, r in rejects] == [
        (42, "not a JSON object"), (43, "a message without a value (a tombstone) deletes only in an upsert table")]
    assert rejects[0][1]["record"] == "{not json"
    assert summary == {"unit": "offset", "rowsRead": 5, "bytes": sum(len(v or b"") for v in values)}


def test_json_strings_that_look_like_times_stay_as_written() -> None:
    source = transform_source("json", ("id", "at"), TableSchema.of([("x", "bigint")]))
    values = [json.dumps({"id": i, "at": t}).encode() for i, t in
              enumerate(["2026-01-02T03:04:05+02:00", "2026-01-02 03:04:05"])]
    rows = pa.Table.from_batches(list(source_batches([messages(values, start=0)], "json", source))).to_pylist()
    assert [r["at"] for r in rows if r[tf.KIND] == tf.DATA] == ["2026-01-02T03:04:05+02:00", "2026-01-02 03:04:05"]
    assert [r[tf.POS] for r in rows if r[tf.KIND] == tf.DATA] == [0, 1]


def test_without_fields_a_json_source_has_the_tables_columns_and_raw_its_fixed_columns() -> None:
    schema = TableSchema.of([("order_id", "bigint"), ("note", "string")])
    assert transform_source("json", (), schema).names == ["order_id", "note"]
    assert transform_source("raw", (), schema) == RAW_SOURCE
    data, rejects, summary = split(list(source_batches([messages([b"v0", None])], "raw", RAW_SOURCE)))
    assert [(d["value"], d["offset"], d["topic"], d["partition"], d["offset@"]) for d in data] == [
        (b"v0", 40, "ev", 2, 40), (None, 41, "ev", 2, 41)]
    assert not rejects and summary["rowsRead"] == 2


def test_json_values_load_exactly_as_a_file_load_reads_them() -> None:
    # Values were decoded without the load's exact numbers and text strings: 9007199254740993 was stored
    # as ...992, 1234567890123456789.12 as ...800.00, 2.675 as 2.68 and 3.5 as 3 (file loads reject
    # both), and a string column got '2024-01-02T10:00:00+02:00' rewritten as '2024-01-02 08:00:00'.
    from lading_jobs.stream.records import decode_messages

    schema = TableSchema.of([("id", "bigint"), ("amount", "decimal(22,2)"), ("s", "string")])
    values = [b'{"id": 9007199254740993, "amount": 1234567890123456789.12, "s": "2024-01-02T10:00:00+02:00"}',
              b'{"id": 2, "amount": 2.675, "s": "x"}', b'{"id": 3.5, "amount": 1, "s": "2024-01-02"}',
              b'{"id": 4, "amount": 0.5, "s": "2024-01-02"}']
    rows = decode_messages(messages(values), schema, "json", "append", ())
    assert [{k: v for k, v in r.items() if k in schema.names} for r in rows.table.to_pylist()] == [
        {"id": 9007199254740993, "amount": Decimal("1234567890123456789.12"), "s": "2024-01-02T10:00:00+02:00"},
        {"id": 4, "amount": Decimal("0.50"), "s": "2024-01-02"}]
    assert [(r["offset"], r["column"]) for r in rows.rejects] == [(41, "amount"), (42, "id")]
    assert rows.rejects[0]["reason"].startswith("'2.675' is not a valid decimal(22,2)")


def test_json_numbers_and_nested_values_in_text_and_json_columns_keep_their_text() -> None:
    # They went through pyarrow's types: 1.10 was stored as '1.1', -0 as '0', 1e5 as '100000', a
    # 30-digit number lost digits to a double, and [1, 2.50] became '[1,2.5]'.
    from lading_jobs.stream.records import decode_messages

    schema = TableSchema.of([("id", "bigint"), ("s", "string"), ("doc", "json")])
    values = [b'{"id": 1, "s": 1.10, "doc": [1, 2.50]}', b'{"id": 2, "s": 123456789012345678901234567890, "doc": -0}',
              b'{"id": 3, "s": "text", "doc": {"a": 1e5}}']
    rows = decode_messages(messages(values), schema, "json", "append", ())
    assert [(r["id"], r["s"], r["doc"]) for r in rows.table.to_pylist()] == [
        (1, "1.10", "[1, 2.50]"), (2, "123456789012345678901234567890", "-0"), (3, "text", '{"a": 1e5}')]
    assert not rows.rejects


def test_json_field_names_of_any_case_load_the_same_whichever_messages_share_a_batch() -> None:
    # {"id":1,"name":"a"} and {"ID":2,"Name":"b"} in one range loaded (1,a),(NULL,NULL) without a reject;
    # one message per range loaded both. An upsert key spelled otherwise is no longer filled from the key.
    from lading_jobs.stream.records import decode_messages

    schema = TableSchema.of([("id", "bigint"), ("name", "string")])
    values = [b'{"id": 1, "name": "a"}', b'{"ID": 2, "Name": "b"}', b'{"Id": 3, "NAME": "c"}']
    together = decode_messages(messages(values), schema, "json", "append", ()).table.to_pylist()
    apart = [r for i, v in enumerate(values)
             for r in decode_messages(messages([v], 40 + i), schema, "json", "append", ()).table.to_pylist()]
    assert together == apart == [{"id": 1, "name": "a", "_lading_diff": 1}, {"id": 2, "name": "b", "_lading_diff": 1},
                                 {"id": 3, "name": "c", "_lading_diff": 1}]
    keyed = Messages(Range("ev", 2, 0, 3), [b"9", b"9", b"7"], [b'{"id": 1, "name": "a"}', b'{"ID": 2, "name": "b"}',
                                                                 b'{"name": "c"}'], [0, 1, 2], [0, 0, 0], [None] * 3)
    rows = decode_messages(keyed, schema, "json", "upsert", ("id",)).table.to_pylist()
    assert sorted((r["id"], r["name"]) for r in rows) == [(1, "a"), (2, "b"), (7, "c")]
