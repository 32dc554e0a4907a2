"""Compaction spec validation: defaults, the since frontier, retention, and named errors."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from lading_spec.compaction import Since, parse_compaction
from lading_spec.errors import SpecError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASE = {"table": "s3://bkt/t/"}


def test_defaults():
    spec = parse_compaction(BASE)
    assert spec.target_file_size == 256 * 1024**2 and spec.min_input_files == 4
    assert spec.since == Since(retain_for=24 * 3600.0)
    assert spec.retention is None and spec.scope_filter is None and spec.max_bytes_per_run is None


def test_example_parses():
    spec = parse_compaction(yaml.safe_load((EXAMPLES / "compaction.yaml").read_text())["spec"])
    assert spec.since.retain_for == 168 * 3600 and spec.min_input_files == 2
    assert spec.max_bytes_per_run == 50 * 1024**3 and spec.sort_by == ("id",)
    assert spec.retention is not None and spec.retention.grace_period == 24 * 3600
    assert spec.schedule == "0 2 * * *" and spec.scope_filter and "created_at" in spec.scope_filter
    assert spec.table == "s3://lading-demo/tables/orders/"  # the table examples/copyjob-load-parquet.yaml loads


@pytest.mark.parametrize("since, expected", [
    ({"version": 17}, Since(retain_for=None, version=17)),
    ({"time": "2024-05-01T00:00:00Z"},
     Since(retain_for=None, time=dt.datetime(2024, 5, 1, tzinfo=dt.UTC))),
    ({"retainFor": "90m"}, Since(retain_for=5400.0)),
    ({}, Since()),
])
def test_since(since, expected):
    assert parse_compaction({**BASE, "since": since}).since == expected


@pytest.mark.parametrize("spec, field, words", [
    ({}, "table", "missing"),
    ({"table": "bucket/t"}, "table", "s3://"),
    ({**BASE, "targetFileSize": "big"}, "targetFileSize", "size"),
    ({**BASE, "minInputFiles": 1}, "minInputFiles", "≥ 2"),
    ({**BASE, "since": {"retainFor": "1h", "version": 3}}, "since", "at most one"),
    ({**BASE, "since": {"retainFor": "7d"}}, "since.retainFor", "units ms, s, m, h"),
    ({**BASE, "since": {"version": -1}}, "since.version", "non-negative"),
    ({**BASE, "since": {"time": "yesterday"}}, "since.time", "RFC 3339"),
    ({**BASE, "since": {"time": "2024-05-01T00:00:00"}}, "since.time", "time zone"),
    ({**BASE, "scope": {"filter": " "}}, "scope.filter", "boolean expression"),
    ({**BASE, "scope": {"partitions": ["a"]}}, "scope.partitions", "unknown field"),
    ({**BASE, "maxBytesPerRun": 0}, "maxBytesPerRun", "positive"),
    ({**BASE, "retention": {"gracePeriod": "soon"}}, "retention.gracePeriod", "duration"),
    ({**BASE, "retention": {"dryRun": "no"}}, "retention.dryRun", "true or false"),
    ({**BASE, "retention": {"gracePeriod": "1ms"}}, "retention.gracePeriod", "at least 24h"),
    ({**BASE, "retention": {"gracePeriod": "23h59m"}}, "retention.gracePeriod", "allowShortGracePeriod: true"),
    ({**BASE, "retention": {"allowShortGracePeriod": "yes"}}, "retention.allowShortGracePeriod", "true or false"),
    ({**BASE, "concurrencyPolicy": "Forbid"}, "concurrencyPolicy", "unknown field"),
    ({**BASE, "connection": {"endpoint": "minio:9000"}}, "connection.endpoint", "http"),
])
def test_errors_name_the_field(spec, field, words):
    with pytest.raises(SpecError) as exc:
        parse_compaction(spec)
    assert exc.value.field == field and words in exc.value.message, str(exc.value)


def test_a_grace_period_under_24h_needs_the_explicit_override():
    assert parse_compaction({**BASE, "retention": {"gracePeriod": "24h"}}).retention.grace_period == 86400
    short = parse_compaction({**BASE, "retention": {"gracePeriod": "1h", "allowShortGracePeriod": True}})
    assert short.retention.grace_period == 3600 and short.retention.allow_short_grace_period
