"""A lading table registered in an Iceberg catalog: each mirror publish moves the catalog's pointer
compare-and-swap (table/iceberg/catalog_pointer.py, catalog_binding.py; docs/iceberg.md "Catalogs").

Two catalog types, each against a real server: AWS Glue on the suite's moto server (HTTP on
127.0.0.1, as pyiceberg's own Glue tests use moto), and Iceberg's SQL catalog (the JDBC catalog's
``iceberg_tables`` layout, pyiceberg's ``SqlCatalog``) on a private PostgreSQL (tests/postgres.py).

* registering points the catalog at the newest metadata file; every commit after moves it; a reader
  through the catalog (pyiceberg ``load_catalog(...).load_table``) reads exactly lading's rows;
* two writers racing on one table (threads, each committing in a loop) leave the pointer at the newest
  metadata file, whose snapshot log names every committed version in order;
* killed between the metadata file and the pointer (a child process, tests/support/crash_child.py),
  the catalog stays at the previous version, whole; ``lading table sync`` moves it;
* an entry another writer moved elsewhere is a conflict: detected, not overwritten;
* an undeclared catalog, an unreachable one and one that refuses: clear errors naming the catalog,
  nothing committed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from postgres import postgres_dsn  # noqa: F401  (registers the fixture)
from support import catalogs as cats
from support.iceberg_readers import multiset

from lading import cli
from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.iceberg import catalog_binding, catalog_pointer, mirror
from lading_jobs.table.log.commits import TableError, TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec import catalogs

pytestmark = [pytest.mark.s3]
SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string")])
lake = cats.lake  # the fixture: catalog "lake", Glue on moto or SQL on PostgreSQL
CHILD = Path(__file__).resolve().parents[3] / "support" / "crash_child.py"


def _rows(first: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + n), pa.int64()), "name": [f"n{i}" for i in range(first, first + n)]})


def _commit(uri: str, rows: pa.Table, *, create: bool = False) -> None:
    written = writer.write_parts(uri, [rows], SCHEMA, write_id=fmt.new_write_id())
    writer.commit_parts(uri, written, create=writer.NewTable(SCHEMA) if create else None)


def test_register_then_every_commit_moves_the_pointer(tmp_path: Path, lake: str) -> None:
    uri = f"file://{tmp_path}/orders/"
    _commit(uri, _rows(0, 3), create=True)
    ident = cats.ident()
    at = catalog_binding.register(uri, lake, ident)
    assert at == f"{uri}metadata/v1.metadata.json"  # v0's file, then the binding commit's own publish
    assert TableLog.open_existing(uri).snapshot().meta.catalog == (lake, ident)
    for i in range(2):
        _commit(uri, _rows(10 + 10 * i, 2))
        assert catalog_pointer.location(lake, ident) == mirror.current_metadata(uri)
    assert catalog_pointer.location(lake, ident) == f"{uri}metadata/v3.metadata.json"
    stale = f"{uri}metadata/v2.metadata.json"  # a compare-and-swap from a file the entry no longer names
    assert not catalog_pointer.swap(lake, ident, stale, f"{uri}metadata/v1.metadata.json")
    assert catalog_pointer.location(lake, ident) == f"{uri}metadata/v3.metadata.json"
    lading = lading_rows(uri)
    assert multiset(cats.reader_rows(lake, ident), ["id", "name"]) == multiset(lading, ["id", "name"])
    assert len(lading) == 7


def lading_rows(uri: str) -> pa.Table:
    from lading_jobs.table import reader

    return reader.scan(uri)


def test_racing_writers_leave_the_newest_file_naming_every_version(tmp_path: Path, lake: str) -> None:
    uri = f"file://{tmp_path}/orders/"
    _commit(uri, _rows(0, 1), create=True)
    ident = cats.ident()
    catalog_binding.register(uri, lake, ident)
    errors: list[BaseException] = []

    def writer_loop(base: int) -> None:
        try:
            for i in range(4):
                _commit(uri, _rows(base + i, 1))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer_loop, args=(b,)) for b in (100, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    log = TableLog.open_existing(uri)
    assert log.version == 9  # create, binding, 2 x 4 commits
    pointer = catalog_pointer.location(lake, ident)
    assert pointer == mirror.current_metadata(uri)  # the newest file: the pointer never went back
    from pyiceberg.table import StaticTable

    meta = StaticTable.from_metadata(str(pointer)).metadata
    versions = [int(meta.snapshot_by_id(e.snapshot_id).summary["lading.version"])  # type: ignore[union-attr]
                for e in meta.snapshot_log]
    assert versions == list(range(log.version + 1))  # every committed version, in order
    assert multiset(cats.reader_rows(lake, ident), ["id", "name"]) == multiset(lading_rows(uri), ["id", "name"])


def test_killed_between_the_file_and_the_pointer_then_sync(tmp_path: Path, lake: str) -> None:
    uri = f"file://{tmp_path}/orders/"
    _commit(uri, _rows(0, 2), create=True)
    ident = cats.ident()
    catalog_binding.register(uri, lake, ident)  # v1: the binding
    before = catalog_pointer.location(lake, ident)
    assert before == f"{uri}metadata/v1.metadata.json"
    written = writer.write_parts(uri, [_rows(50, 3)], SCHEMA, write_id=fmt.new_write_id())
    args = {"kind": "table", "table": uri, "written": [w.to_json() for w in written],
            "fault": {"method": "put_if_absent", "match": "v2.metadata.json", "action": "kill_after"}}
    done = subprocess.run([sys.executable, str(CHILD), json.dumps(args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ})
    assert done.returncode != 0, done.stdout + done.stderr  # killed
    assert (tmp_path / "orders" / "metadata" / "v2.metadata.json").exists()  # the file landed
    assert catalog_pointer.location(lake, ident) == before  # the pointer did not: the previous version
    assert len(cats.reader_rows(lake, ident)) == 2
    mirror.forget()
    assert cli.main(["table", "sync", uri]) == 0
    assert catalog_pointer.location(lake, ident) == f"{uri}metadata/v2.metadata.json"
    assert multiset(cats.reader_rows(lake, ident), ["id", "name"]) == multiset(lading_rows(uri), ["id", "name"])


def test_a_conflicting_writer_is_detected_not_overwritten(tmp_path: Path, lake: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    uri = f"file://{tmp_path}/orders/"
    _commit(uri, _rows(0, 2), create=True)
    ident = cats.ident()
    catalog_binding.register(uri, lake, ident)
    other = f"file://{tmp_path}/other/metadata/00003-abc.metadata.json"
    here = catalog_pointer.location(lake, ident)
    assert here is not None
    (tmp_path / "other" / "metadata").mkdir(parents=True)
    (tmp_path / "other" / "metadata" / "00003-abc.metadata.json").write_bytes(Path(here[len("file://"):]).read_bytes())
    assert catalog_pointer.swap(lake, ident, here, other)  # another engine commits to the entry
    _commit(uri, _rows(10, 1))  # lading's publish must not move it back
    assert catalog_pointer.location(lake, ident) == other
    assert "a metadata file lading did not write" in capsys.readouterr().err
    with pytest.raises(catalog_pointer.CatalogConflict, match="did not write"):
        catalog_binding.sync(uri)


def test_register_refuses_an_entry_of_another_table(tmp_path: Path, lake: str) -> None:
    a, b = f"file://{tmp_path}/a/", f"file://{tmp_path}/b/"
    _commit(a, _rows(0, 1), create=True)
    _commit(b, _rows(0, 1), create=True)
    ident = cats.ident()
    catalog_binding.register(a, lake, ident)
    with pytest.raises(catalog_pointer.CatalogConflict, match="did not write"):
        catalog_binding.register(b, lake, ident)
    assert TableLog.open_existing(b).snapshot().meta.catalog is None  # nothing committed


def test_undeclared_unreachable_and_refusing_catalogs(tmp_path: Path, s3_endpoint: str,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      postgres_dsn: str) -> None:  # noqa: F811
    uri = f"file://{tmp_path}/orders/"
    _commit(uri, _rows(0, 1), create=True)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    refusing = cats.sql(postgres_dsn, user="nobody")
    monkeypatch.setenv(catalogs.ENV, json.dumps({
        "gone": {"type": "glue", "properties": {"glue.endpoint": f"http://127.0.0.1:{closed}",
                                                "glue.region": "us-east-1", "glue.max-retries": "0"}},
        "refusing": refusing}))
    with pytest.raises(TableError, match="catalog 'nope' is not declared"):
        catalog_binding.register(uri, "nope", "db.orders")
    with pytest.raises(catalog_pointer.CatalogError, match="catalog 'gone' refused or could not be reached"):
        catalog_binding.register(uri, "gone", "db.orders")
    with pytest.raises(catalog_pointer.CatalogError, match="catalog 'refusing' refused") as refused:
        catalog_binding.register(uri, "refusing", "db.orders")
    assert "nobody" in str(refused.value)  # the role the database refused, named
    assert TableLog.open_existing(uri).version == 0  # nothing committed
