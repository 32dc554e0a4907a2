"""The Compaction spec: rewrite a table's small parts into few large ones, validated and defaulted.

``since`` is the frontier up to which updates consolidate (at most one of
``retainFor``, ``version``, ``time``; default: keep 24 hours); ``scope.filter``
limits the parts considered; ``retention`` removes parts no commit references
after a grace period. The same rules as crds/compactions.lading.io.yaml, for specs
that did not pass the API server. Every error names its field.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from lading_spec.copyjob import Connection, _connection, _mapping, _only, _str_list
from lading_spec.errors import SpecError
from lading_spec.sizes import parse_size
from lading_spec.sparkconf import check_spark_section
from lading_spec.streamcopy import parse_duration
from lading_spec.uris import check_uri

DEFAULT_TARGET_FILE_SIZE = 256 * 1024**2
DEFAULT_MIN_INPUT_FILES = 4
DEFAULT_RETAIN_FOR = 24 * 3600.0
DEFAULT_GRACE_PERIOD = 24 * 3600.0
MIN_GRACE_PERIOD = 24 * 3600.0
"""The shortest ``retention.gracePeriod`` without ``allowShortGracePeriod`` (Iceberg's
``remove_orphan_files`` default; Delta's VACUUM refuses under 168 h): longer than any write
between completing its parts and committing them, and than any reader's scan."""


@dataclass(frozen=True)
class Since:
    """Exactly one is set: keep this many seconds of history, or a version, or a time."""

    retain_for: float | None = DEFAULT_RETAIN_FOR
    version: int | None = None
    time: dt.datetime | None = None


@dataclass(frozen=True)
class Retention:
    grace_period: float = DEFAULT_GRACE_PERIOD
    dry_run: bool = False
    allow_short_grace_period: bool = False


@dataclass(frozen=True)
class CompactionSpec:
    table: str
    target_file_size: int = DEFAULT_TARGET_FILE_SIZE
    min_input_files: int = DEFAULT_MIN_INPUT_FILES
    since: Since = field(default_factory=Since)
    sort_by: tuple[str, ...] = ()
    scope_filter: str | None = None
    max_bytes_per_run: int | None = None
    retention: Retention | None = None
    schedule: str | None = None
    suspend: bool = False
    connection: Connection = field(default_factory=Connection)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _since(obj: dict[str, Any]) -> Since:
    _only(obj, "since", ("retainFor", "version", "time"))
    given = [k for k in ("retainFor", "version", "time") if obj.get(k) is not None]
    if len(given) > 1:
        raise SpecError("since", f"give at most one of since.retainFor, since.version, since.time (got {', '.join(given)})")
    if not given:
        return Since()
    if given[0] == "retainFor":
        return Since(retain_for=parse_duration(obj["retainFor"], "since.retainFor"))
    if given[0] == "version":
        version = obj["version"]
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise SpecError("since.version", f"expected a non-negative logical time, got {version!r}")
        return Since(retain_for=None, version=version)
    text = obj["time"]
    try:
        when = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError as exc:
        raise SpecError("since.time", f"expected an RFC 3339 time such as 2024-05-01T00:00:00Z, got {text!r}") from exc
    if when.tzinfo is None:
        raise SpecError("since.time", f"needs a time zone (e.g. a trailing Z), got {text!r}")
    return Since(retain_for=None, time=when.astimezone(dt.UTC))


def _retention(obj: dict[str, Any] | None) -> Retention | None:
    if obj is None:
        return None
    _only(obj, "retention", ("gracePeriod", "dryRun", "allowShortGracePeriod"))
    dry_run = obj.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise SpecError("retention.dryRun", f"must be true or false, got {dry_run!r}")
    short = obj.get("allowShortGracePeriod", False)
    if not isinstance(short, bool):
        raise SpecError("retention.allowShortGracePeriod", f"must be true or false, got {short!r}")
    grace = parse_duration(obj.get("gracePeriod", "24h"), "retention.gracePeriod")
    if grace < MIN_GRACE_PERIOD and not short:
        raise SpecError("retention.gracePeriod",
                        f"must be at least 24h, got {obj.get('gracePeriod')!r}: a shorter grace period can delete "
                        "parts a writer completed but has not committed yet, or that a reader is scanning; "
                        "set retention.allowShortGracePeriod: true only if no write or read lasts that long")
    return Retention(grace_period=grace, dry_run=dry_run, allow_short_grace_period=short)


OPERATOR_FIELDS = ("spark", "schedule", "successfulRunsHistoryLimit", "failedRunsHistoryLimit",
                   "startingDeadlineSeconds", "suspend", "activeDeadlineSeconds", "backoffLimit", "cancel")


def parse_compaction(spec: dict[str, Any]) -> CompactionSpec:
    """Validate and default a Compaction ``spec``; raise :class:`SpecError` naming the field."""
    spec = _mapping(spec, "spec")
    _only(spec, "", ("table", "targetFileSize", "minInputFiles", "since", "sortBy", "scope", "maxBytesPerRun",
                     "retention", "connection", *OPERATOR_FIELDS))
    check_spark_section(spec.get("spark"))
    if spec.get("table") is None:
        raise SpecError("table", "missing; give the lading table's URI (s3://bucket/prefix/ or file:///path/)")
    min_files = spec.get("minInputFiles", DEFAULT_MIN_INPUT_FILES)
    if isinstance(min_files, bool) or not isinstance(min_files, int) or min_files < 2:
        raise SpecError("minInputFiles", f"expected an integer ≥ 2 (compacting one part changes nothing), got {min_files!r}")
    scope = _mapping(spec.get("scope"), "scope")
    _only(scope, "scope", ("filter",))
    scope_filter = scope.get("filter")
    if scope_filter is not None and (not isinstance(scope_filter, str) or not scope_filter.strip()):
        raise SpecError("scope.filter", "expected a Spark SQL boolean expression, e.g. \"day >= '2024-01-01'\"")
    max_bytes = spec.get("maxBytesPerRun")
    schedule = spec.get("schedule")
    if schedule is not None and (not isinstance(schedule, str) or not schedule.strip()):
        raise SpecError("schedule", "expected a cron expression such as '0 2 * * *' or @daily")
    suspend = spec.get("suspend", False)
    if not isinstance(suspend, bool):
        raise SpecError("suspend", f"must be true or false, got {suspend!r}")
    return CompactionSpec(
        table=check_uri(spec["table"], "table"),
        target_file_size=parse_size(spec.get("targetFileSize", DEFAULT_TARGET_FILE_SIZE), "targetFileSize"),
        min_input_files=min_files,
        since=_since(_mapping(spec.get("since"), "since")),
        sort_by=_str_list(spec.get("sortBy"), "sortBy"),
        scope_filter=scope_filter,
        max_bytes_per_run=None if max_bytes is None else parse_size(max_bytes, "maxBytesPerRun"),
        retention=_retention(None if spec.get("retention") is None else _mapping(spec["retention"], "retention")),
        schedule=schedule,
        suspend=suspend,
        connection=_connection(_mapping(spec.get("connection"), "connection")),
        raw=spec,
    )
