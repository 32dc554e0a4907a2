"""StreamCopy spec validation: defaults, accepted forms, and errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lading_spec.errors import SpecError
from lading_spec.streamcopy import FilesSource, KafkaSource, parse_duration, parse_streamcopy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KAFKA = {"source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["orders"]}},
         "target": {"table": "s3://bkt/t/"}}


def with_(base: dict, **changes: object) -> dict:
    out = {**base}
    out.update(changes)
    return out


def test_kafka_defaults():
    spec = parse_streamcopy(KAFKA)
    assert isinstance(spec.source, KafkaSource)
    assert spec.source.starting_offsets == "latest" and spec.source.value_format == "json"
    assert spec.target.envelope == "append" and spec.batching.max_batch_interval == 30.0
    assert spec.max_error_number == 0 and spec.dead_letter is None and not spec.suspend
    assert spec.source.fail_on_data_loss is True


def test_the_iceberg_mirror_switch_is_unset_unless_given():
    assert parse_streamcopy(KAFKA).target.iceberg_mirror is None  # a new table gets the mirror; an old one keeps its
    off = parse_streamcopy({**KAFKA, "target": {"table": "s3://bkt/t/", "icebergMirror": False}})
    assert off.target.iceberg_mirror is False


def test_files_defaults_and_late_arrival():
    spec = parse_streamcopy({**KAFKA, "source": {"files": {"uri": "s3://bkt/in/"}}})
    assert isinstance(spec.source, FilesSource) and spec.source.late_arrival == 3600
    spec = parse_streamcopy({**KAFKA, "source": {"files": {"uri": "s3://bkt/in/", "lateArrival": "10m"}}})
    assert isinstance(spec.source, FilesSource) and spec.source.late_arrival == 600


def test_fail_on_data_loss_false():
    spec = parse_streamcopy(kafka_with(failOnDataLoss=False))
    assert isinstance(spec.source, KafkaSource) and spec.source.fail_on_data_loss is False


def test_examples_parse():
    kafka = parse_streamcopy(yaml.safe_load((EXAMPLES / "streamcopy-kafka.yaml").read_text())["spec"])
    assert isinstance(kafka.source, KafkaSource)
    assert kafka.source.secret_name == "kafka-credentials" and kafka.source.starting_offsets == "earliest"
    assert kafka.target.key_columns == ("order_id",) and [c.name for c in kafka.target.schema][0] == "order_id"
    assert kafka.batching.max_batch_interval == 60 and kafka.batching.max_batch_bytes == 256 * 1024**2
    files = parse_streamcopy(yaml.safe_load((EXAMPLES / "streamcopy-files.yaml").read_text())["spec"])
    assert isinstance(files.source, FilesSource)
    assert files.source.format == "json" and files.source.pattern == "*.json.gz"


def test_starting_offsets_json():
    spec = parse_streamcopy({**KAFKA, "source": {"kafka": {
        "bootstrapServers": ["k:9092"], "topics": ["orders"],
        "startingOffsets": '{"orders": {"0": 42, "1": -2}}'}}})
    assert isinstance(spec.source, KafkaSource)
    assert spec.source.starting_offsets == {"orders": {"0": 42, "1": -2}}


@pytest.mark.parametrize("text, seconds", [("30s", 30), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25),
                                           ("1.5h", 5400)])
def test_durations(text, seconds):
    assert parse_duration(text, "x") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["30", "5 minutes", "", "0s", "1d", 30])
def test_bad_durations(text):
    with pytest.raises(SpecError) as exc:
        parse_duration(text, "batching.maxBatchInterval")
    assert exc.value.field == "batching.maxBatchInterval"


def kafka_with(**kafka: object) -> dict:
    return {**KAFKA, "source": {"kafka": {**KAFKA["source"]["kafka"], **kafka}}}


@pytest.mark.parametrize("spec, field, words", [
    ({"target": {"table": "s3://bkt/t/"}, "source": {}}, "source", "exactly one"),
    ({**KAFKA, "source": {**KAFKA["source"], "files": {"uri": "s3://bkt/in/"}}}, "source", "exactly one"),
    (kafka_with(bootstrapServers=[]), "source.kafka.bootstrapServers", "non-empty"),
    (kafka_with(bootstrapServers=["kafka"]), "source.kafka.bootstrapServers[0]", "host:port"),
    (kafka_with(topics=[]), "source.kafka.topics", "at least one"),
    (kafka_with(topics=["bad topic"]), "source.kafka.topics[0]", "topic name"),
    (kafka_with(startingOffsets="oldest"), "source.kafka.startingOffsets", "earliest, latest"),
    (kafka_with(startingOffsets='{"orders": 3}'), "source.kafka.startingOffsets", "partition"),
    (kafka_with(startingOffsets='{"orders": {"0": 42, "1": -5}}'), "source.kafka.startingOffsets",
     "orders partition 1: offset -5 is not one Kafka knows; give -2 (earliest), -1 (latest) or an offset >= 0"),
    (kafka_with(startingOffsets='{"orders": {"0": -3}}'), "source.kafka.startingOffsets", "-2 (earliest)"),
    ({**kafka_with(valueFormat="raw"), "target": {"table": "s3://bkt/t/", "envelope": "diff"}}, "target.envelope",
     "_lading_diff field; valueFormat: raw has no fields"),
    (kafka_with(consumer={"sasl.jaas.config": "secret"}), "source.kafka.consumer.sasl.jaas.config", "Secret"),
    (kafka_with(valueFormat="avro"), "source.kafka.valueFormat", "json, raw"),
    (kafka_with(group="x"), "source.kafka.group", "unknown field"),
    (kafka_with(failOnDataLoss="no"), "source.kafka.failOnDataLoss", "true or false"),
    ({**KAFKA, "source": {"files": {"uri": "s3://bkt/in/", "lateArrival": "1d"}}}, "source.files.lateArrival",
     "duration"),
    ({**KAFKA, "source": {"files": {"uri": "http://x/"}}}, "source.files.uri", "s3://"),
    ({**KAFKA, "source": {"files": {"uri": "s3://bkt/in/", "format": "xml"}}}, "source.files.format", "csv"),
    ({**KAFKA, "source": {"files": {"uri": "s3://bkt/in/", "options": {"header": True}}}},
     "source.files.options.header", "unknown json option"),
    ({**KAFKA, "target": {"table": "s3://bkt/t/", "envelope": "upsert"}}, "target.keyColumns", "key columns"),
    ({**KAFKA, "target": {"table": "s3://bkt/t/", "schema": [{"name": "a"}]}}, "target.schema[0].type", "Spark SQL"),
    ({**KAFKA, "target": {}}, "target.table", "missing"),
    ({**KAFKA, "target": {"table": "s3://bkt/t/", "icebergMirror": 0}}, "target.icebergMirror", "true or false"),
    (with_(KAFKA, maxErrorNumber=5), "deadLetter", "dead-letter"),
    (with_(KAFKA, maxErrorNumber=-1), "maxErrorNumber", "non-negative"),
    (with_(KAFKA, batching={"maxBatchRows": 0}), "batching.maxBatchRows", "≥ 1"),
    (with_(KAFKA, batching={"maxBatchBytes": "12 XB"}), "batching.maxBatchBytes", "unit"),
    (with_(KAFKA, suspend="yes"), "suspend", "true or false"),
    (with_(KAFKA, schedule="@daily"), "schedule", "unknown field"),
    (with_(kafka_with(valueFormat="raw"), transform={"select": "SELECT value FROM source", "fields": ["v"]}),
     "transform.fields", "fixed fields"),
    (with_({**KAFKA, "target": {"table": "s3://bkt/t/", "envelope": "diff"}},
           transform={"select": "SELECT id FROM source"}), "transform", "appends rows"),
    (with_({**KAFKA, "target": {"table": "s3://bkt/t/", "schema": [{"name": "id", "type": "bigint"}]}},
           transform={"select": "SELECT 1 FROM source", "columns": ["nope"]}), "transform.columns[0]",
     "not a column of target.schema"),
    (with_(KAFKA, transform={"select": "SELECT a FROM source GROUP BY a"}), "transform.select", "only a WHERE"),
    (with_(KAFKA, transform={"select": "SELECT a FROM source", "where": "x"}), "transform.where", "unknown field"),
])
def test_errors_name_the_field(spec, field, words):
    with pytest.raises(SpecError) as exc:
        parse_streamcopy(spec)
    assert exc.value.field == field and words in exc.value.message, str(exc.value)
