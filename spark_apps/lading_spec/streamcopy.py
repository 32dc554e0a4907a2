"""The StreamCopy spec: continuous, exactly-once loading of a table, validated and defaulted.

``source`` is exactly one of ``kafka`` (brokers, topics, starting offsets, consumer
properties, credentials by Secret) or ``files`` (a prefix watched for new files);
``target`` is the lading table; ``batching`` says when a micro-batch is cut. The
same rules as the CRD (crds/streamcopies.lading.io.yaml), for specs that did not
pass the API server (``lading run``) and for what CEL cannot say. Every error
names its field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from lading_spec import kafkacreds
from lading_spec.copyjob import (
    Column,
    Connection,
    SchemaEvolution,
    _columns,
    _connection,
    _mapping,
    _only,
    _str_list,
    check_schema_evolution_source,
    parse_iceberg_mirror,
    parse_schema_evolution,
)
from lading_spec.errors import SpecError
from lading_spec.formats import FileFormat, FormatOptions, parse_format, parse_options
from lading_spec.sizes import parse_size
from lading_spec.sparkconf import check_spark_section
from lading_spec.transform import Transform, parse_transform
from lading_spec.uris import check_uri

Envelope = Literal["append", "upsert", "diff"]
DEFAULT_MAX_BATCH_INTERVAL = 30.0
DEFAULT_LATE_ARRIVAL = 3600.0
_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# source.kafka.consumer: librdkafka has about 150 properties, and some of them run a program
# (sasl.kerberos.kinit.cmd), load a library (plugin.library.paths, ssl.engine.location, ssl.providers),
# reach a URL nobody validated (sasl.oauthbearer.token.endpoint.url) or carry a credential. A list of
# bad keys would miss the next one, so the spec may set only these: where and how to connect (the
# protocol and SASL mechanism, TLS verification), and timeouts, fetch sizes and other tuning. The CRD
# (crds/streamcopies.lading.io.yaml) holds the same list; docs/streamcopy.md lists it for users.
CONSUMER_PROPERTIES = frozenset({
    "client.id", "client.rack", "group.id", "security.protocol", "sasl.mechanism", "sasl.mechanisms",
    "ssl.ca.location", "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification",
    "ssl.cipher.suites", "ssl.curves.list", "ssl.sigalgs.list",
    "socket.timeout.ms", "socket.keepalive.enable", "socket.nagle.disable", "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes", "socket.connection.setup.timeout.ms", "connections.max.idle.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "retry.backoff.ms", "retry.backoff.max.ms",
    "broker.address.family", "broker.address.ttl", "client.dns.lookup", "metadata.max.age.ms",
    "topic.metadata.refresh.interval.ms", "topic.metadata.refresh.fast.interval.ms", "topic.metadata.refresh.sparse",
    "api.version.request.timeout.ms", "message.max.bytes", "receive.message.max.bytes",
    "fetch.wait.max.ms", "fetch.min.bytes", "fetch.max.bytes", "fetch.message.max.bytes", "max.partition.fetch.bytes",
    "fetch.error.backoff.ms", "fetch.queue.backoff.ms", "queued.min.messages", "queued.max.messages.kbytes",
    "isolation.level", "check.crcs", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
})
# Properties that run a program, load code, reach an address or take an identity lading does not
# validate, or replace lading's brokers: refused in the spec *and* in the credentials Secret (the
# Spark app checks the Secret's keys, lading_jobs.stream.kafka.consumer_config).
ESCAPE_PROPERTY = re.compile(r"url|cmd|command|plugin|interceptor|engine|provider|librar|kerberos|unsecure"
                             r"|metadata\.authentication|assertion", re.I)
BROKER_PROPERTIES = ("bootstrap.servers", "metadata.broker.list")
# Set by lading on every consumer (offsets live in the table, never in the consumer group).
LADING_CONSUMER_PROPERTIES = ("enable.auto.commit", "auto.commit.enable", "enable.auto.offset.store",
                              "auto.offset.reset", "enable.partition.eof")
SECRET_HINT = "put it in the Secret named by source.kafka.secretRef (one key per property)"
# Where the Kafka credentials Secret (source.kafka.secretRef) is mounted in the driver and
# executor pods, one file per consumer property (the operator renders the mount, the engine reads it).
KAFKA_PROPERTIES_DIR = "/etc/lading/kafka"
KAFKA_PROPERTIES_DIR_ENV = "LADING_KAFKA_PROPERTIES_DIR"
_BROKER = re.compile(r"^[^\s:]+:\d{1,5}$")
_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def parse_duration(value: Any, path: str) -> float:
    """``30s``, ``5m``, ``1h30m``, ``250ms`` → seconds (> 0), or raise naming ``path``."""
    if not isinstance(value, str) or not _DURATION.match(value):
        raise SpecError(path, f"expected a duration such as 30s, 5m or 1h30m (units ms, s, m, h), got {value!r}")
    seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(value))
    if seconds <= 0:
        raise SpecError(path, f"must be longer than zero, got {value!r}")
    return seconds


def _positive_int(value: Any, path: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(path, f"expected an integer ≥ {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class KafkaSource:
    bootstrap_servers: tuple[str, ...]
    topics: tuple[str, ...]
    starting_offsets: str | dict[str, dict[str, int]] = "latest"
    value_format: Literal["json", "raw"] = "json"
    consumer: dict[str, str] = field(default_factory=dict)
    secret_name: str | None = None
    fail_on_data_loss: bool = True


@dataclass(frozen=True)
class FilesSource:
    uri: str
    pattern: str | None = None
    format: FileFormat = "json"
    options: FormatOptions | None = None
    late_arrival: float = DEFAULT_LATE_ARRIVAL


@dataclass(frozen=True)
class TableTarget:
    table: str
    envelope: Envelope = "append"
    key_columns: tuple[str, ...] = ()
    schema: tuple[Column, ...] = ()
    sort_by: tuple[str, ...] = ()
    schema_evolution: SchemaEvolution = "none"
    iceberg_mirror: bool | None = None  # target.icebergMirror: None leaves an existing table's switch as it is


@dataclass(frozen=True)
class Batching:
    max_batch_interval: float = DEFAULT_MAX_BATCH_INTERVAL
    max_batch_rows: int | None = None
    max_batch_bytes: int | None = None


@dataclass(frozen=True)
class StreamCopySpec:
    source: KafkaSource | FilesSource
    target: TableTarget
    batching: Batching = field(default_factory=Batching)
    max_error_number: int = 0
    dead_letter: str | None = None
    suspend: bool = False
    connection: Connection = field(default_factory=Connection)
    transform: Transform | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _starting_offsets(value: Any, path: str) -> str | dict[str, dict[str, int]]:
    if value in ("earliest", "latest"):
        return str(value)
    if isinstance(value, str) and value.startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise SpecError(path, f"not valid JSON: {exc}") from exc
        ok = isinstance(parsed, dict) and all(
            isinstance(parts, dict) and all(isinstance(o, int) and not isinstance(o, bool) for o in parts.values())
            for parts in parsed.values())
        if not ok:
            raise SpecError(path, 'expected {"topic": {"partition": offset}}, e.g. {"orders": {"0": 42}}')
        for t, parts in parsed.items():
            for p, o in parts.items():
                if o < -2:
                    raise SpecError(path, f"{t} partition {p}: offset {o} is not one Kafka knows; give -2 "
                                          "(earliest), -1 (latest) or an offset >= 0")
        return {str(t): {str(p): int(o) for p, o in parts.items()} for t, parts in parsed.items()}
    raise SpecError(path, f"got {value!r}; accepted: earliest, latest, or a JSON object of offsets per topic and partition")


def escape_property_error(key: str) -> str | None:
    """Why the consumer property ``key`` may come from neither the spec nor the Secret, or ``None``.

    These would let a tenant escape what lading validates: other brokers than
    ``source.kafka.bootstrapServers``, a program or library to run, a URL or
    identity to use. The Spark app applies this to the Secret's keys too.
    """
    if key.lower() in BROKER_PROPERTIES:
        return "never allowed here: lading connects to source.kafka.bootstrapServers; list the brokers there"
    if ESCAPE_PROPERTY.search(key):
        return ("never allowed: this property runs a program, loads a library or reaches an address or identity "
                "that lading does not validate (Kerberos kinit, plugins, OpenSSL engines and providers, "
                "OAUTHBEARER token endpoints and metadata services, unsecured JWTs)")
    return None


def consumer_property_error(key: str) -> str | None:
    """Why ``key`` may not be set in ``source.kafka.consumer`` (and what to do instead), or ``None``."""
    why = escape_property_error(key)
    if why:
        return why
    if kafkacreds.is_credential_property(key):
        return f"credentials do not belong in the spec: {SECRET_HINT}"
    if key in LADING_CONSUMER_PROPERTIES:
        return "lading sets this property itself (offsets are kept in the table, never in the consumer group)"
    if key not in CONSUMER_PROPERTIES:
        return ("not a consumer property lading accepts here: the spec may set the protocol and SASL mechanism, "
                "TLS verification, timeouts and fetch sizes (the list: CONSUMER_PROPERTIES, docs/streamcopy.md); "
                f"a credential? {SECRET_HINT}")
    return None


def _kafka(obj: dict[str, Any]) -> KafkaSource:
    path = "source.kafka"
    _only(obj, path, ("bootstrapServers", "topics", "startingOffsets", "valueFormat", "failOnDataLoss", "consumer",
                      "secretRef"))
    servers = obj.get("bootstrapServers")
    if not isinstance(servers, list) or not servers:
        raise SpecError(f"{path}.bootstrapServers", "expected a non-empty list of host:port brokers")
    for i, server in enumerate(servers):
        if not isinstance(server, str) or not _BROKER.match(server):
            raise SpecError(f"{path}.bootstrapServers[{i}]", f"expected host:port, got {server!r}")
        why = kafkacreds.broker_address_error(server)
        if why:
            raise SpecError(f"{path}.bootstrapServers[{i}]", why)
    topics = _str_list(obj.get("topics"), f"{path}.topics")
    if not topics:
        raise SpecError(f"{path}.topics", "expected at least one topic")
    for i, topic in enumerate(topics):
        if not _TOPIC.match(topic):
            raise SpecError(f"{path}.topics[{i}]", f"{topic!r} is not a Kafka topic name (letters, digits, . _ -)")
    value_format = obj.get("valueFormat", "json")
    if value_format not in ("json", "raw"):
        raise SpecError(f"{path}.valueFormat", f"got {value_format!r}; accepted: json, raw")
    consumer = _mapping(obj.get("consumer"), f"{path}.consumer")
    for key, val in consumer.items():
        why = consumer_property_error(str(key))
        if why:
            raise SpecError(f"{path}.consumer.{key}", why)
        if not isinstance(val, str):
            raise SpecError(f"{path}.consumer.{key}", f"values are strings; quote {val!r}")
    secret = _mapping(obj.get("secretRef"), f"{path}.secretRef")
    _only(secret, f"{path}.secretRef", ("name",))
    if secret.get("name"):
        weakening = kafkacreds.weakening_error(consumer)
        if weakening:
            raise SpecError(f"{path}.consumer.{weakening[0]}", weakening[1])
    fail_on_data_loss = obj.get("failOnDataLoss", True)
    if not isinstance(fail_on_data_loss, bool):
        raise SpecError(f"{path}.failOnDataLoss", f"must be true or false, got {fail_on_data_loss!r}")
    return KafkaSource(
        bootstrap_servers=tuple(servers), topics=topics,
        starting_offsets=_starting_offsets(obj.get("startingOffsets", "latest"), f"{path}.startingOffsets"),
        value_format=value_format, consumer=dict(consumer), secret_name=secret.get("name"),
        fail_on_data_loss=fail_on_data_loss,
    )


def _files(obj: dict[str, Any]) -> FilesSource:
    path = "source.files"
    _only(obj, path, ("uri", "pattern", "format", "options", "lateArrival"))
    if obj.get("uri") is None:
        raise SpecError(f"{path}.uri", "missing; give the prefix to watch (s3://bucket/prefix/ or file:///path/)")
    pattern = obj.get("pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise SpecError(f"{path}.pattern", f"expected a glob such as '*.json', got {pattern!r}")
    fmt = parse_format(obj.get("format", "json"), f"{path}.format")
    return FilesSource(uri=check_uri(obj["uri"], f"{path}.uri"), pattern=pattern, format=fmt,
                       options=parse_options(fmt, obj.get("options"), f"{path}.options"),
                       late_arrival=parse_duration(obj.get("lateArrival", "1h"), f"{path}.lateArrival"))


def _target(obj: dict[str, Any]) -> TableTarget:
    _only(obj, "target", ("table", "envelope", "keyColumns", "schema", "sortBy", "schemaEvolution", "icebergMirror"))
    if obj.get("table") is None:
        raise SpecError("target.table", "missing; give the lading table's URI")
    envelope = obj.get("envelope", "append")
    if envelope not in ("append", "upsert", "diff"):
        raise SpecError("target.envelope", f"got {envelope!r}; accepted: append, upsert, diff")
    keys = _str_list(obj.get("keyColumns"), "target.keyColumns")
    if envelope == "upsert" and not keys:
        raise SpecError("target.keyColumns", "an upsert table needs key columns")
    try:
        schema = _columns(obj.get("schema"))
    except SpecError as exc:  # _columns names to.schema (CopyJob's field)
        raise SpecError(exc.field.replace("to.schema", "target.schema", 1), exc.message) from exc
    return TableTarget(table=check_uri(obj["table"], "target.table"), envelope=envelope, key_columns=keys,
                       schema=schema, sort_by=_str_list(obj.get("sortBy"), "target.sortBy"),
                       schema_evolution=parse_schema_evolution(obj.get("schemaEvolution", "none"),
                                                               "target.schemaEvolution"),
                       iceberg_mirror=parse_iceberg_mirror(obj.get("icebergMirror"), "target.icebergMirror"))


def _batching(obj: dict[str, Any]) -> Batching:
    _only(obj, "batching", ("maxBatchInterval", "maxBatchRows", "maxBatchBytes"))
    rows = obj.get("maxBatchRows")
    size = obj.get("maxBatchBytes")
    return Batching(
        max_batch_interval=parse_duration(obj.get("maxBatchInterval", "30s"), "batching.maxBatchInterval"),
        max_batch_rows=None if rows is None else _positive_int(rows, "batching.maxBatchRows"),
        max_batch_bytes=None if size is None else parse_size(size, "batching.maxBatchBytes"),
    )


def parse_streamcopy(spec: dict[str, Any]) -> StreamCopySpec:
    """Validate and default a StreamCopy ``spec``; raise :class:`SpecError` naming the field."""
    spec = _mapping(spec, "spec")
    _only(spec, "", ("source", "target", "batching", "maxErrorNumber", "deadLetter", "suspend", "spark",
                     "connection", "transform"))
    check_spark_section(spec.get("spark"))
    source_obj = _mapping(spec.get("source"), "source")
    _only(source_obj, "source", ("kafka", "files"))
    given = [k for k in ("kafka", "files") if source_obj.get(k) is not None]
    if len(given) != 1:
        raise SpecError("source", f"give exactly one of source.kafka or source.files (got {', '.join(given) or 'none'})")
    source: KafkaSource | FilesSource = (
        _kafka(_mapping(source_obj["kafka"], "source.kafka")) if given[0] == "kafka"
        else _files(_mapping(source_obj["files"], "source.files")))
    if "target" not in spec:
        raise SpecError("target", "missing; give target.table")
    max_errors = spec.get("maxErrorNumber", 0)
    if isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 0:
        raise SpecError("maxErrorNumber", f"expected a non-negative integer, got {max_errors!r}")
    dead_letter = spec.get("deadLetter")
    if dead_letter is not None:
        check_uri(dead_letter, "deadLetter")
    elif max_errors > 0:
        raise SpecError("deadLetter", "maxErrorNumber > 0 needs a dead-letter prefix for the rejected rows")
    suspend = spec.get("suspend", False)
    if not isinstance(suspend, bool):
        raise SpecError("suspend", f"must be true or false, got {suspend!r}")
    target = _target(_mapping(spec["target"], "target"))
    if target.envelope == "diff" and isinstance(source, KafkaSource) and source.value_format == "raw":
        raise SpecError("target.envelope", "a diff table from Kafka reads each change's +n/-n from the JSON value's "
                        "_lading_diff field; valueFormat: raw has no fields: use valueFormat: json")
    if target.schema_evolution != "none":
        if spec.get("transform") is not None:
            raise SpecError("target.schemaEvolution", "a transform's SELECT names the table's columns itself; "
                            "add the new columns to the table (target.schema) and to the SELECT instead")
        if isinstance(source, KafkaSource) and source.value_format == "raw":
            raise SpecError("target.schemaEvolution", "addColumns needs named fields, and valueFormat: raw has "
                            "fixed columns; use valueFormat: json or leave schemaEvolution unset")
        if isinstance(source, FilesSource):
            check_schema_evolution_source(source.format, source.options, "target.schemaEvolution",
                                          "source.files.options")
    return StreamCopySpec(
        source=source,
        target=target,
        batching=_batching(_mapping(spec.get("batching"), "batching")),
        max_error_number=max_errors,
        dead_letter=dead_letter,
        suspend=suspend,
        connection=_connection(_mapping(spec.get("connection"), "connection")),
        transform=_transform(spec.get("transform"), source, target),
        raw=spec,
    )


def _transform(value: Any, source: KafkaSource | FilesSource, target: TableTarget) -> Transform | None:
    """``spec.transform``: the load's (``lading_spec.transform``), checked against the source and target."""
    transform = parse_transform(value)
    if transform is None:
        return None
    if isinstance(source, KafkaSource):
        if source.value_format == "raw" and transform.fields:
            raise SpecError("transform.fields", "a raw Kafka source has fixed fields (key, value, topic, partition, "
                            "offset, timestamp, headers); remove transform.fields and use those names")
        if target.envelope != "append":
            raise SpecError("transform", f"a transform on a Kafka source appends rows; target.envelope is "
                            f"{target.envelope!r} (use append, or drop the transform)")
    if target.schema:
        known = {c.name.lower() for c in target.schema}
        for i, name in enumerate(transform.columns):
            if name.lower() not in known:
                raise SpecError(f"transform.columns[{i}]", f"{name!r} is not a column of target.schema")
    return transform
