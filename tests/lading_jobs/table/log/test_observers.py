"""Commit observers (issue 45): the log names no observer; the table package registers the mirror.

A handle opened with ``observers=()`` commits and publishes no Iceberg metadata (and, in a fresh
interpreter, never imports the mirror or pyiceberg); a table opened the default way publishes
every version, as before; an observer sees ``prepare`` before the conditional write and
``after_commit`` once it landed, with what its ``prepare`` returned.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg.observer import MIRROR
from lading_jobs.table.log.commits import Snapshot, TableLog, registered_observers
from lading_jobs.table.schema import TableSchema

SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string")])


def _rows(first: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + n), pa.int64()), "name": [f"n{i}" for i in range(n)]})


def _append(uri: str, log: TableLog, first: int, n: int) -> int:
    written = writer.write_parts(uri, [_rows(first, n)], SCHEMA, write_id=fmt.new_write_id())
    return writer.commit_parts(uri, written, log=log).version


def test_a_commit_with_no_observer_publishes_no_iceberg_metadata(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/t/"
    log = TableLog.create(uri, SCHEMA, observers=())
    assert log.observers == ()
    assert _append(uri, log, 0, 3) == 1
    assert _append(uri, TableLog.open_existing(uri, observers=()), 3, 2) == 2
    assert not (tmp_path / "t" / mirror.METADATA_DIR).exists()
    assert reader.scan(uri).num_rows == 5


def test_the_log_alone_never_loads_the_mirror(tmp_path: Path) -> None:
    code = f"""if True:
        import json, sys
        from lading_jobs.table.log.commits import TableLog
        from lading_jobs.table.schema import TableSchema
        log = TableLog.create("file://{tmp_path}/t/", TableSchema.of([("id", "bigint")]), observers=())
        print(json.dumps(sorted(sys.modules)))"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert "lading_jobs.table.log.commits" in loaded
    assert not {"lading_jobs.table.iceberg.mirror", "pyiceberg"} & loaded
    assert not (tmp_path / "t" / mirror.METADATA_DIR).exists()


def test_the_default_table_opening_publishes_it(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/t/"
    assert registered_observers() == (MIRROR,)
    log = TableLog.create(uri, SCHEMA)
    assert log.observers == (MIRROR,)
    assert _append(uri, TableLog.open_existing(uri), 0, 3) == 1
    mirror.flush(uri)
    assert mirror.describe(uri)["mirroredVersion"] == 1
    assert (tmp_path / "t" / mirror.METADATA_DIR / "v1.metadata.json").exists()


class _Recorder:
    """An observer noting what it is told, and whether the commit existed when it was."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.seen: list[tuple[Any, ...]] = []

    def prepare(self, log: TableLog, entry: dict[str, Any], snapshot: Any) -> Any:
        landed = Path(fmt.commit_uri(self.uri, entry["version"]).removeprefix("file://")).exists()
        self.seen.append(("prepare", entry["version"], landed, snapshot().version))
        return self

    def after_commit(self, log: TableLog, entry: dict[str, Any], snapshot: Snapshot, prepared: Any) -> None:
        landed = Path(fmt.commit_uri(self.uri, entry["version"]).removeprefix("file://")).exists()
        self.seen.append(("after", entry["version"], landed, snapshot.version, prepared is self))

    def abandon(self) -> None:
        self.seen.append(("abandon",))


def test_an_observer_starts_beside_the_write_and_runs_after_it_landed(tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/t/"
    recorder = _Recorder(uri)
    log = TableLog.create(uri, SCHEMA, observers=(recorder,))
    assert _append(uri, log, 0, 3) == 1
    assert recorder.seen == [("after", 0, True, 0, False), ("prepare", 1, False, 1), ("after", 1, True, 1, True)]
    assert not (tmp_path / "t" / mirror.METADATA_DIR).exists()
