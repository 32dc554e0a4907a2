"""Reading a version (time travel) past retention is refused when the read is planned, naming the
grace period, instead of failing in a task with a bare FileNotFoundError. Versions superseded within
the grace period, and old ones whose parts are all still there, read as before. Fails on 3610912:
planning succeeded and the scan raised FileNotFoundError naming a part."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import Change, TableError, TableLog
from lading_jobs.table.schema import TableSchema

SCHEMA = TableSchema.of([("k", "string"), ("v", "bigint")])
DAY_MS = 24 * 3600 * 1000


def _age_commit(uri: str, version: int, ms: int) -> None:
    """Commit ``version`` as if written ``ms`` ago (its timestamp: what a two-day-old table's says)."""
    path = Path(uri.removeprefix("file://"), fmt.LOG_DIR, fmt.commit_name(version))
    entry = json.loads(path.read_bytes())
    entry["timestamp"] = int(time.time() * 1000) - ms
    path.write_text(json.dumps(entry))


@pytest.fixture
def table(file_uri: Callable[[str], str]) -> tuple[str, str]:
    """Version 2 holds two parts; commit 3 (two days old) removed the first: (uri, its path)."""
    uri = file_uri("t/")
    log = TableLog.create(uri, SCHEMA)
    for i in range(2):
        data = pa.table({"k": [f"k{i}"], "v": pa.array([i], pa.int64())})
        writer.commit_parts(uri, writer.write_parts(uri, [data], SCHEMA, write_id=fmt.new_write_id()), log=log)
    first = sorted(log.snapshot().parts, key=lambda p: p.order)[0].path
    log.commit(Change(operation="delete", remove=(first,)))
    log.commit(Change(operation="noop"))
    return uri, first


def test_a_version_whose_parts_retention_deleted_is_refused_when_planned(table: tuple[str, str]) -> None:
    uri, first = table
    _age_commit(uri, 3, 2 * DAY_MS)
    assert reader._open_snapshot({"path": uri, "version": "2"})[0].rows == 2  # noqa: SLF001 - parts still there
    Path(uri.removeprefix("file://"), first).unlink()  # what retention does after the grace period
    with pytest.raises(TableError, match=r"version 2 .* grace period \(retention.gracePeriod, at least 24h"):
        reader._open_snapshot({"path": uri, "version": "2"})  # noqa: SLF001 - the data source's planning
    assert reader._open_snapshot({"path": uri, "version": "3"})[0].rows == 1  # noqa: SLF001


def test_a_version_superseded_within_the_grace_period_is_not_checked(table: tuple[str, str]) -> None:
    uri, first = table
    Path(uri.removeprefix("file://"), first).unlink()  # (only a short-grace override could do this)
    snapshot, _ = reader._open_snapshot({"path": uri, "version": "2"})  # noqa: SLF001
    assert snapshot.version == 2
