"""The CopyJob spec: ``COPY <from> TO <to>``, validated and defaulted.

``from`` is exactly one of ``query`` (Spark SQL over named ``inputs``), ``table``
(a lading table, optionally ``asOf``) or ``files``; ``to`` is exactly one of
``files`` (an unload; from files: a format conversion) or ``table`` (a load, which
reads ``from.files``). A query's input is a file set, a lading table, an Iceberg table
(``iceberg: {metadata, snapshotId | asOf}``) or a Delta table (``delta: {table, version |
timestamp}``). Every error names its field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from lading_spec import catalogs
from lading_spec.errors import SpecError
from lading_spec.formats import (
    CsvOptions,
    FileFormat,
    FileSet,
    FormatOptions,
    parse_format,
    parse_options,
)
from lading_spec.sizes import parse_size
from lading_spec.sparkconf import check_spark_section
from lading_spec.templates import check_template
from lading_spec.transform import Transform, parse_transform
from lading_spec.uris import check_endpoint, check_uri

IfExists = Literal["error", "replace", "append"]
OnError = Literal["abort", "skipFile", "continue"]
Envelope = Literal["append", "upsert", "diff"]
DEFAULT_MAX_FILE_SIZE = 256 * 1024**2
DEFAULT_BUFFER_SIZE = 64 * 1024**2
MIN_BUFFER_SIZE = 5 * 1024**2  # S3's smallest multipart part
MAX_PARTS = 10_000  # S3's most parts in one multipart upload


@dataclass(frozen=True)
class IcebergTable:
    """An Iceberg table read from one metadata file, at its current snapshot or the one
    ``snapshot_id`` names or the one current at ``as_of_ms`` (milliseconds since the epoch).
    A catalog-named input has ``catalog`` and ``table`` (``namespace.name``) instead, and its
    metadata file is the one the catalog names when the job starts (``sources.iceberg.resolve``)."""

    metadata: str = ""
    snapshot_id: int | None = None
    as_of_ms: int | None = None
    catalog: str | None = None
    table: str | None = None


@dataclass(frozen=True)
class DeltaInput:
    """A Delta table (its directory, the parent of ``_delta_log/``), at its newest version, at
    ``version``, or at the newest version committed at or before ``timestamp_ms``
    (milliseconds since the epoch)."""

    table: str
    version: int | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class Input:
    """A named input a query can use: a file set, a lading table, an Iceberg or a Delta table."""

    name: str
    files: FileSet | None = None
    table: str | None = None
    as_of: int | None = None
    iceberg: IcebergTable | None = None
    delta: DeltaInput | None = None


@dataclass(frozen=True)
class Source:
    query: str | None = None
    inputs: tuple[Input, ...] = ()
    table: str | None = None
    as_of: int | None = None
    files: FileSet | None = None

    @property
    def kind(self) -> Literal["query", "table", "files"]:
        if self.query is not None:
            return "query"
        return "table" if self.table is not None else "files"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = True
    default: Any = None


SchemaEvolution = Literal["none", "addColumns"]
SCHEMA_EVOLUTION_MODES = ("none", "addColumns")


def parse_schema_evolution(value: Any, path: str) -> SchemaEvolution:
    """``schemaEvolution``: ``none`` (columns the table lacks are ignored) or ``addColumns``."""
    if value not in SCHEMA_EVOLUTION_MODES:
        raise SpecError(path, f"got {value!r}; accepted: none (columns the table lacks are ignored), addColumns "
                              "(they become new nullable columns, in the same commit as the rows)")
    return value  # type: ignore[no-any-return]


def check_schema_evolution_source(fmt: str, options: FormatOptions | None, path: str, options_path: str) -> None:
    """``addColumns`` needs named columns: refuse headerless CSV, whose fields match by position."""
    if fmt == "csv" and not (isinstance(options, CsvOptions) and options.header):
        raise SpecError(path, f"addColumns needs column names, and CSV without a header matches fields by "
                              f"position; set {options_path}.header: true (a header line names the columns) "
                              "or leave schemaEvolution unset")


@dataclass(frozen=True)
class Target:
    files: str | None = None
    format: FileFormat = "csv"
    options: FormatOptions | None = None
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    buffer_size: int = DEFAULT_BUFFER_SIZE
    partition_by: tuple[str, ...] = ()
    keep_partition_columns: bool = False
    if_exists: IfExists = "error"
    table: str | None = None
    schema: tuple[Column, ...] = ()
    infer_schema: bool = False
    envelope: Envelope = "append"
    key_columns: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    schema_evolution: SchemaEvolution = "none"
    iceberg_mirror: bool | None = None  # to.icebergMirror: None leaves an existing table's switch as it is
    catalog: tuple[str, str] | None = None  # to.catalog: (catalog name, namespace.name) the table is registered as

    @property
    def kind(self) -> Literal["files", "table"]:
        return "files" if self.files is not None else "table"


# connection.region (it becomes AWS_REGION): a region name, as the CRD's pattern.
REGION = re.compile(r"^[a-z0-9-]{1,63}$")


@dataclass(frozen=True)
class Connection:
    """Where S3 is and which Secret holds its credentials (never the credentials)."""

    secret_name: str | None = None
    endpoint: str | None = None
    region: str | None = None


@dataclass(frozen=True)
class LoadOptions:
    on_error: OnError = "abort"
    max_errors: int | None = None
    max_error_ratio: float | None = None
    rejected_rows: str | None = None
    validate_only: bool = False
    force: bool = False


@dataclass(frozen=True)
class CopyJobSpec:
    source: Source
    target: Target
    connection: Connection = field(default_factory=Connection)
    load: LoadOptions = field(default_factory=LoadOptions)
    transform: Transform | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(path, f"expected a mapping, got {type(value).__name__}")
    return value


def _only(obj: dict[str, Any], path: str, known: tuple[str, ...]) -> None:
    for key in obj:
        if key not in known:
            raise SpecError(f"{path}.{key}" if path else key, f"unknown field; accepted: {', '.join(known)}")


def _str_list(value: Any, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SpecError(path, f"expected a list of names, got {value!r}")
    if len(set(value)) != len(value):
        raise SpecError(path, f"names repeat in {value!r}")
    return tuple(value)


def _as_of(value: Any, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(path, f"expected a non-negative logical time, got {value!r}")
    return value


def _iceberg(value: Any, path: str) -> IcebergTable:
    """``from.inputs[i].iceberg``: ``metadata`` (a ``….metadata.json`` URI), optional
    ``snapshotId`` or ``asOf`` (an RFC 3339 instant with its zone)."""
    obj = _mapping(value, path)
    _only(obj, path, ("metadata", "snapshotId", "asOf", "catalog", "table"))
    catalog, table, metadata = obj.get("catalog"), obj.get("table"), obj.get("metadata")
    if catalog is not None or table is not None:
        if metadata is not None:
            raise SpecError(f"{path}.metadata", "give metadata (a metadata file) or catalog and table, not both")
        if not isinstance(catalog, str) or not catalogs.NAME.match(catalog):
            raise SpecError(f"{path}.catalog", f"expected the name of a catalog the cluster admin declared "
                            f"(policy.catalogs), got {catalog!r}")
        why = catalogs.identifier_error(table)
        if why:
            raise SpecError(f"{path}.table", why)
        metadata = ""
    elif metadata is None:
        raise SpecError(f"{path}.metadata", "missing; give the URI of the table's metadata file "
                        "(s3://…/metadata/vN.metadata.json), or catalog and table")
    else:
        check_uri(metadata, f"{path}.metadata")
        if not metadata.endswith(".metadata.json"):
            raise SpecError(f"{path}.metadata", f"expected an Iceberg metadata file (…/metadata/vN.metadata.json), "
                            f"got {metadata!r}")
    snapshot_id = obj.get("snapshotId")
    if snapshot_id is not None and (isinstance(snapshot_id, bool) or not isinstance(snapshot_id, int)):
        raise SpecError(f"{path}.snapshotId", f"expected an Iceberg snapshot id (an integer), got {snapshot_id!r}")
    as_of = obj.get("asOf")
    if as_of is not None and snapshot_id is not None:
        raise SpecError(f"{path}.asOf", "give snapshotId or asOf, not both")
    return IcebergTable(metadata=metadata, snapshot_id=snapshot_id,
                        as_of_ms=None if as_of is None else _instant_ms(as_of, f"{path}.asOf"),
                        catalog=catalog, table=table)


def _delta(value: Any, path: str) -> DeltaInput:
    """``from.inputs[i].delta``: ``table`` (the table's directory URI), optional ``version``
    (a non-negative integer) or ``timestamp`` (an RFC 3339 instant with its zone)."""
    obj = _mapping(value, path)
    _only(obj, path, ("table", "version", "timestamp"))
    table = obj.get("table")
    if table is None:
        raise SpecError(f"{path}.table", "missing; give the URI of the Delta table's directory (the one holding "
                        "_delta_log/), such as s3://bucket/lake/orders/")
    check_uri(table, f"{path}.table")
    if "/_delta_log" in table:
        raise SpecError(f"{path}.table", f"give the table's directory, not its log: {table.split('/_delta_log')[0]}/")
    version = obj.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise SpecError(f"{path}.version", f"expected a Delta table version (a non-negative integer), got {version!r}")
    when = obj.get("timestamp")
    if when is not None and version is not None:
        raise SpecError(f"{path}.timestamp", "give version or timestamp, not both")
    return DeltaInput(table=table if table.endswith("/") else table + "/", version=version,
                      timestamp_ms=None if when is None else _instant_ms(when, f"{path}.timestamp"))


def iceberg_table_root(metadata: str) -> str:
    """The directory of the Iceberg table whose metadata file is ``metadata`` (the parent of its
    ``metadata/`` directory): every file a read of it opens must lie under it, and the
    operator's policy checks it as the prefix the job reads."""
    directory = metadata.rsplit("/", 1)[0]
    return directory.removesuffix("/metadata") + "/"


def _instant_ms(value: Any, path: str) -> int:
    """An RFC 3339 instant with its zone (``2026-03-01T00:00:00Z``) as milliseconds since the epoch."""
    text = value if isinstance(value, str) else None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise SpecError(path, f"expected an instant with its zone, such as 2026-03-01T00:00:00Z, got {value!r}")
    return int(when.timestamp() * 1000)


def _file_set(obj: dict[str, Any], path: str, default_format: FileFormat = "parquet") -> FileSet:
    uri = obj.get("files")
    file_list = obj.get("fileList")
    if uri is None and not file_list:
        raise SpecError(f"{path}.files", "give a prefix or glob (files) or an explicit fileList")
    if uri is not None and file_list is not None:
        raise SpecError(f"{path}.fileList", "give files (a prefix or glob) or fileList (explicit URIs), not both")
    if uri is not None:
        check_uri(uri, f"{path}.files", allow_glob=True)
    listed: tuple[str, ...] = ()
    if file_list is not None:
        if not isinstance(file_list, list) or not file_list:
            raise SpecError(f"{path}.fileList", "expected a non-empty list of URIs")
        listed = tuple(check_uri(u, f"{path}.fileList[{i}]") for i, u in enumerate(file_list))
        first: dict[str, int] = {}
        for i, u in enumerate(listed):
            if (j := first.setdefault(u, i)) != i:
                raise SpecError(f"{path}.fileList[{i}]", f"{u} is also fileList[{j}]; each file is read once: "
                                "remove the duplicate")
    pattern = obj.get("pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise SpecError(f"{path}.pattern", f"expected a glob such as '*.csv', got {pattern!r}")
    fmt = parse_format(obj.get("format", default_format), f"{path}.format")
    partitioning, columns = _partitioning(obj, path, uri)
    return FileSet(uri=uri, pattern=pattern, file_list=listed, format=fmt,
                   options=parse_options(fmt, obj.get("options"), f"{path}.options"),
                   partitioning=partitioning, partition_columns=columns)


_FLAT_TYPE = re.compile(r"(string|boolean|tinyint|smallint|int|bigint|float|double|date|timestamp|timestamp_ntz"
                        r"|decimal\(\d+,\s*\d+\))$", re.IGNORECASE)


def _partitioning(obj: dict[str, Any], path: str,
                  uri: str | None) -> tuple[Literal["hive"] | None, tuple[tuple[str, str], ...]]:
    """``partitioning: hive`` and its optional ``partitionColumns`` ([{name, type}], outermost first)."""
    kind = obj.get("partitioning")
    raw = obj.get("partitionColumns")
    if kind is None:
        if raw is not None:
            raise SpecError(f"{path}.partitionColumns", "applies with partitioning: hive only; add it or remove "
                            "partitionColumns")
        return None, ()
    if kind != "hive":
        raise SpecError(f"{path}.partitioning", f"got {kind!r}; accepted: hive (col=value/ directories)")
    if uri is None or any(c in uri for c in "*?["):
        raise SpecError(f"{path}.partitioning", "Hive partitioning reads the col=value/ directories under a "
                        "prefix: give files as a prefix (no glob, no fileList); pattern still selects file names")
    columns: list[tuple[str, str]] = []
    if raw is not None:
        if not isinstance(raw, list) or not raw:
            raise SpecError(f"{path}.partitionColumns", "expected a list of {name, type}, outermost directory first")
        for i, item in enumerate(raw):
            at = f"{path}.partitionColumns[{i}]"
            item = _mapping(item, at)
            _only(item, at, ("name", "type"))
            name, type_ = item.get("name"), item.get("type")
            if not isinstance(name, str) or not name:
                raise SpecError(f"{at}.name", "expected the column name its directories spell (name=value/)")
            if any(name == n for n, _ in columns):
                raise SpecError(f"{at}.name", f"{name!r} is named twice")
            if not isinstance(type_, str) or not _FLAT_TYPE.match(type_.strip()):
                raise SpecError(f"{at}.type", f"expected a flat Spark SQL type (string, boolean, tinyint, smallint, "
                                f"int, bigint, float, double, decimal(p,s), date, timestamp, timestamp_ntz), got "
                                f"{type_!r}")
            columns.append((name, re.sub(r"\s+", "", type_.strip().lower())))
    return "hive", tuple(columns)


def _source(obj: dict[str, Any]) -> Source:
    _only(obj, "from", ("query", "inputs", "table", "asOf", "files", "pattern", "fileList", "format", "options",
                        "partitioning", "partitionColumns"))
    given = [k for k in ("query", "table", "files") if obj.get(k) is not None]
    if obj.get("fileList") and "files" not in given:
        given.append("files")
    if len(given) != 1:
        raise SpecError("from", f"give exactly one of query, table or files (got {', '.join(given) or 'none'})")
    if obj.get("query") is not None:
        query = obj["query"]
        if not isinstance(query, str) or not query.strip():
            raise SpecError("from.query", "expected a Spark SQL SELECT statement")
        inputs = []
        names: set[str] = set()
        for i, raw in enumerate(obj.get("inputs") or []):
            path = f"from.inputs[{i}]"
            raw = _mapping(raw, path)
            _only(raw, path, ("name", "files", "pattern", "fileList", "format", "options", "partitioning",
                              "partitionColumns", "table", "asOf", "iceberg", "delta"))
            name = raw.get("name")
            if not isinstance(name, str) or not name.isidentifier():
                raise SpecError(f"{path}.name", f"expected a SQL identifier, got {name!r}")
            if name in names:
                raise SpecError(f"{path}.name", f"input {name!r} is named twice")
            names.add(name)
            sources = [k for k in ("table", "files", "iceberg", "delta") if raw.get(k) is not None]
            if raw.get("fileList") and "files" not in sources:
                sources.append("files")
            if len(sources) > 1:
                raise SpecError(f"{path}.{sources[1]}", f"an input reads exactly one of table, files, iceberg or "
                                f"delta (got {', '.join(sources)})")
            for kind, when in (("iceberg", "iceberg.snapshotId or iceberg.asOf"),
                               ("delta", "delta.version or delta.timestamp")):
                if raw.get(kind) is None:
                    continue
                extra = [k for k in ("files", "fileList", "table", "asOf", "pattern", "format", "options",
                                     "partitioning", "partitionColumns") if k in raw]
                if extra:
                    raise SpecError(f"{path}.{extra[0]}", f"a{'n' if kind == 'iceberg' else ''} {kind} input reads "
                                    f"its table alone: give {kind} or files or table (time travel: {when})")
            if raw.get("iceberg") is not None:
                inputs.append(Input(name=name, iceberg=_iceberg(raw["iceberg"], f"{path}.iceberg")))
            elif raw.get("delta") is not None:
                inputs.append(Input(name=name, delta=_delta(raw["delta"], f"{path}.delta")))
            elif raw.get("table") is not None:
                if raw.get("partitioning") is not None or raw.get("partitionColumns") is not None:
                    raise SpecError(f"{path}.partitioning", "applies to file inputs (files) only: a table input "
                                    "reads its own layout")
                inputs.append(Input(name=name, table=check_uri(raw["table"], f"{path}.table"),
                                    as_of=_as_of(raw.get("asOf"), f"{path}.asOf")))
            else:
                inputs.append(Input(name=name, files=_file_set(raw, path)))
        return Source(query=query, inputs=tuple(inputs))
    if obj.get("table") is not None:
        return Source(table=check_uri(obj["table"], "from.table"), as_of=_as_of(obj.get("asOf"), "from.asOf"))
    return Source(files=_file_set(obj, "from", default_format="csv"))


def _columns(value: Any) -> tuple[Column, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SpecError("to.schema", "expected a list of {name, type, nullable, default}")
    columns = []
    for i, raw in enumerate(value):
        path = f"to.schema[{i}]"
        raw = _mapping(raw, path)
        _only(raw, path, ("name", "type", "nullable", "default"))
        if isinstance(raw.get("name"), bool):
            raise SpecError(f"{path}.name", f"expected a column name, got {str(raw['name']).lower()}: YAML, as "
                            "kubectl reads it, takes an unquoted y, yes, on, n, no or off for a boolean; "
                            "quote the name (name: \"y\")")
        if not isinstance(raw.get("name"), str) or not raw["name"]:
            raise SpecError(f"{path}.name", "expected a column name")
        if not isinstance(raw.get("type"), str) or not raw["type"]:
            raise SpecError(f"{path}.type", "expected a Spark SQL type such as bigint, decimal(12,2), string")
        columns.append(Column(raw["name"], raw["type"], bool(raw.get("nullable", True)), raw.get("default")))
    return tuple(columns)


def _target(obj: dict[str, Any]) -> Target:
    _only(obj, "to", ("files", "format", "options", "maxFileSize", "bufferSize", "partitionBy",
                      "keepPartitionColumns", "ifExists", "table", "schema", "inferSchema",
                      "envelope", "keyColumns", "sortBy", "schemaEvolution", "icebergMirror", "catalog"))
    given = [k for k in ("files", "table") if obj.get(k) is not None]
    if len(given) != 1:
        raise SpecError("to", f"give exactly one of files or table (got {', '.join(given) or 'none'})")
    for key in ("schemaEvolution", "icebergMirror", "catalog"):
        if obj.get("files") is not None and key in obj:
            raise SpecError(f"to.{key}", "applies to table targets (to.table) only")
    if obj.get("files") is not None:
        files = obj["files"]
        check_uri(files, "to.files", template=True)
        check_template(files, "to.files")
        fmt = parse_format(obj.get("format", "csv"), "to.format")
        max_file_size = parse_size(obj.get("maxFileSize", DEFAULT_MAX_FILE_SIZE), "to.maxFileSize")
        buffer_size = parse_size(obj.get("bufferSize", DEFAULT_BUFFER_SIZE), "to.bufferSize")
        if buffer_size < MIN_BUFFER_SIZE:
            raise SpecError("to.bufferSize", "must be at least 5MB (S3's smallest multipart part)")
        parts = max_file_size // buffer_size + 1  # every part but the last holds at least bufferSize
        if parts > MAX_PARTS:
            least = -(-max_file_size // (MAX_PARTS - 1) // 1024**2)  # MiB, rounded up
            raise SpecError("to.bufferSize", f"a file of to.maxFileSize ({max_file_size} bytes) may take {parts} parts "
                            f"of {buffer_size} bytes, and S3 allows {MAX_PARTS} per file; raise to.bufferSize to "
                            f"at least {least}MB or lower to.maxFileSize")
        if_exists = obj.get("ifExists", "error")
        if if_exists not in ("error", "replace", "append"):
            raise SpecError("to.ifExists", f"got {if_exists!r}; accepted: error, replace, append")
        return Target(
            files=files,
            format=fmt,
            options=parse_options(fmt, obj.get("options"), "to.options"),
            max_file_size=max_file_size,
            buffer_size=buffer_size,
            partition_by=_str_list(obj.get("partitionBy"), "to.partitionBy"),
            keep_partition_columns=bool(obj.get("keepPartitionColumns", False)),
            if_exists=if_exists,
        )
    for key in ("format", "options", "maxFileSize", "bufferSize", "partitionBy", "keepPartitionColumns"):
        if key in obj:
            raise SpecError(f"to.{key}", "applies to files targets only (to.files), not to to.table")
    table_if_exists = obj.get("ifExists", "append")
    if table_if_exists not in ("error", "replace", "append"):
        raise SpecError("to.ifExists", f"got {table_if_exists!r}; accepted: append, replace, error")
    envelope = obj.get("envelope", "append")
    if envelope not in ("append", "upsert", "diff"):
        raise SpecError("to.envelope", f"got {envelope!r}; accepted: append, upsert, diff")
    keys = _str_list(obj.get("keyColumns"), "to.keyColumns")
    if envelope == "upsert" and not keys:
        raise SpecError("to.keyColumns", "an upsert table needs key columns")
    return Target(
        table=check_uri(obj["table"], "to.table"),
        schema=_columns(obj.get("schema")),
        infer_schema=bool(obj.get("inferSchema", False)),
        envelope=envelope,
        key_columns=keys,
        sort_by=_str_list(obj.get("sortBy"), "to.sortBy"),
        if_exists=table_if_exists,
        schema_evolution=parse_schema_evolution(obj.get("schemaEvolution", "none"), "to.schemaEvolution"),
        iceberg_mirror=parse_iceberg_mirror(obj.get("icebergMirror"), "to.icebergMirror"),
        catalog=_target_catalog(obj.get("catalog"), obj.get("icebergMirror")),
    )


def _target_catalog(value: Any, mirror: Any) -> tuple[str, str] | None:
    """``to.catalog``: ``{name, table}``, the declared catalog and ``namespace.name`` the table is
    registered as (its pointer then follows every mirror publish: docs/iceberg.md)."""
    if value is None:
        return None
    obj = _mapping(value, "to.catalog")
    _only(obj, "to.catalog", ("name", "table"))
    name = obj.get("name")
    if not isinstance(name, str) or not catalogs.NAME.match(name):
        raise SpecError("to.catalog.name", f"expected the name of a catalog the cluster admin declared "
                        f"(policy.catalogs), got {name!r}")
    why = catalogs.identifier_error(obj.get("table"))
    if why:
        raise SpecError("to.catalog.table", why)
    if mirror is False:
        raise SpecError("to.catalog", "a catalog points at the table's Iceberg mirror; drop icebergMirror: false")
    return (name, str(obj["table"]))


def parse_iceberg_mirror(value: Any, path: str) -> bool | None:
    """``icebergMirror``: true or false (the table's Iceberg mirror on or off; docs/iceberg.md), or
    absent (None: a new table gets the mirror, an existing one keeps its switch)."""
    if value is None or isinstance(value, bool):
        return value
    raise SpecError(path, f"must be true or false, got {value!r} (true: publish Iceberg metadata after each "
                          "commit; false: none)")


def _connection(obj: dict[str, Any]) -> Connection:
    _only(obj, "connection", ("secretRef", "endpoint", "region"))
    secret = _mapping(obj.get("secretRef"), "connection.secretRef")
    _only(secret, "connection.secretRef", ("name",))
    endpoint = obj.get("endpoint")
    if endpoint is not None:
        check_endpoint(endpoint, "connection.endpoint")
    region = obj.get("region")
    if region is not None and (not isinstance(region, str) or not REGION.fullmatch(region)):
        raise SpecError("connection.region", f"expected an S3 region name such as us-east-1 (lower-case letters, "
                                             f"digits and '-', at most 63), got {region!r}")
    return Connection(secret_name=secret.get("name"), endpoint=endpoint, region=region)


def _load(obj: dict[str, Any], is_load: bool) -> LoadOptions:
    keys = ("onError", "maxErrors", "maxErrorRatio", "rejectedRows", "validateOnly", "force")
    present = [k for k in keys if k in obj]
    if present and not is_load:
        raise SpecError(present[0], "applies to loads only (from.files into to.table)")
    on_error = obj.get("onError", "abort")
    if on_error not in ("abort", "skipFile", "continue"):
        raise SpecError("onError", f"got {on_error!r}; accepted: abort, skipFile, continue")
    max_errors = obj.get("maxErrors")
    if max_errors is not None and (isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 0):
        raise SpecError("maxErrors", f"expected a non-negative integer, got {max_errors!r}")
    ratio = obj.get("maxErrorRatio")
    if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1):
        raise SpecError("maxErrorRatio", f"expected a number from 0 to 1, got {ratio!r}")
    rejected = obj.get("rejectedRows")
    if rejected is not None:
        check_uri(rejected, "rejectedRows")
    return LoadOptions(on_error=on_error, max_errors=max_errors,
                       max_error_ratio=None if ratio is None else float(ratio),
                       rejected_rows=rejected, validate_only=bool(obj.get("validateOnly", False)),
                       force=bool(obj.get("force", False)))


# Fields of spec that belong to the operator (scheduling, Spark sizing, lifecycle);
# the Spark app ignores them.
OPERATOR_FIELDS = ("spark", "schedule", "concurrencyPolicy", "successfulRunsHistoryLimit",
                   "failedRunsHistoryLimit", "startingDeadlineSeconds", "suspend",
                   "activeDeadlineSeconds", "backoffLimit", "cancel", "ttlSecondsAfterFinished")


def parse_copyjob(spec: dict[str, Any]) -> CopyJobSpec:
    """Validate and default a CopyJob ``spec``; raise :class:`SpecError` naming the field."""
    spec = _mapping(spec, "spec")
    _only(spec, "", ("from", "to", "connection", "onError", "maxErrors", "maxErrorRatio",
                     "rejectedRows", "validateOnly", "force", "transform", *OPERATOR_FIELDS))
    check_spark_section(spec.get("spark"))
    if "from" not in spec:
        raise SpecError("from", "missing; give from.query, from.table or from.files")
    if "to" not in spec:
        raise SpecError("to", "missing; give to.files or to.table")
    source = _source(_mapping(spec["from"], "from"))
    target = _target(_mapping(spec["to"], "to"))
    if target.kind == "table" and source.kind == "table":
        raise SpecError("from.table", "a table into a table is a query: from.query 'SELECT * FROM t' with "
                        "from.inputs [{name: t, table: ...}]")
    if source.kind == "files" and target.kind == "table" and "ifExists" in _mapping(spec["to"], "to"):
        raise SpecError("to.ifExists", "a load (from.files) always appends; ifExists applies to a query into a "
                        "table (from.query) or to files targets")
    if source.kind == "query" and target.kind == "table" and (target.schema or target.infer_schema):
        raise SpecError("to.schema" if target.schema else "to.inferSchema",
                        "a query into a table takes its columns from the query (a new table) or from the table")
    if target.kind == "table" and not target.schema and not target.infer_schema:
        pass  # an existing table supplies its own schema; checked by the job
    transform = parse_transform(spec.get("transform"))
    if transform is not None and (source.kind != "files" or target.kind != "table"):
        raise SpecError("transform", "applies to loads only (from.files into to.table); a query is from.query")
    if transform is not None and target.infer_schema:
        raise SpecError("to.inferSchema", "a transform needs the table's schema: give to.schema (or load into an "
                        "existing table)")
    if target.schema_evolution != "none":
        if source.kind != "files":
            raise SpecError("to.schemaEvolution", "applies to loads (from.files into to.table); a query into a "
                            "table takes its columns from the query or the table")
        if transform is not None:
            raise SpecError("to.schemaEvolution", "a transform's SELECT names the table's columns itself; "
                            "add the new columns to the table (to.schema) and to the SELECT instead")
        assert source.files is not None
        check_schema_evolution_source(source.files.format, source.files.options, "to.schemaEvolution",
                                      "from.options")
    if transform is not None and target.schema:
        known = {c.name.lower() for c in target.schema}
        for i, name in enumerate(transform.columns):
            if name.lower() not in known:
                raise SpecError(f"transform.columns[{i}]", f"{name!r} is not a column of to.schema")
    return CopyJobSpec(
        source=source,
        target=target,
        connection=_connection(_mapping(spec.get("connection"), "connection")),
        load=_load(spec, is_load=source.kind == "files" and target.kind == "table"),
        transform=transform,
        raw=spec,
    )
