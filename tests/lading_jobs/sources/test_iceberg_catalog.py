"""Catalog-named Iceberg inputs (``from.inputs[].iceberg: {catalog, table}``): resolved on the driver
to the metadata file the catalog names (Glue on the suite's moto server, the SQL catalog on the private
PostgreSQL: tests/support/catalogs.py), then read as a metadata-file input. A lading table registered
in the catalog is the table read: the query's answer is lading's own, at the current snapshot and by
``snapshotId``. Bad inputs — a table the catalog lacks, an expired snapshot, a catalog not declared for
the job, one that refuses — fail naming the input's field, and a CopyJob writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from postgres import postgres_dsn  # noqa: F401  (registers the fixture)
from support import catalogs as cats
from support.iceberg_readers import multiset

from lading_jobs.sources import iceberg
from lading_jobs.sources.files import query_frame
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.iceberg import catalog_binding
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import TableLog, snapshot_at
from lading_jobs.table.schema import TableSchema
from lading_spec import catalogs
from lading_spec.copyjob import IcebergTable, Input

pytestmark = [pytest.mark.spark, pytest.mark.s3]
lake = cats.lake
SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string")])


def _table(tmp_path: Path, name: str, ident: str) -> str:
    uri = f"file://{tmp_path}/{name}/"
    for i in range(3):
        rows = pa.table({"id": pa.array(range(i * 10, i * 10 + 5), pa.int64()), "name": [f"r{i}"] * 5})
        written = writer.write_parts(uri, [rows], SCHEMA, write_id=fmt.new_write_id())
        writer.commit_parts(uri, written, create=writer.NewTable(SCHEMA) if i == 0 else None)
    catalog_binding.register(uri, "lake", ident)
    return uri


def _input(ident: str, catalog: str = "lake", **time_travel: Any) -> list[Input]:
    return [Input(name="orders", iceberg=IcebergTable(catalog=catalog, table=ident, **time_travel))]


def test_a_catalog_input_reads_what_lading_reads(spark: Any, tmp_path: Path, lake: str) -> None:
    ident = cats.ident()
    uri = _table(tmp_path, "orders", ident)
    got = query_frame(spark, "SELECT id, name FROM orders WHERE id >= 10", _input(ident)).toArrow()
    want = reader.scan(uri).filter(pa.compute.greater_equal(pa.compute.field("id"), 10))
    assert multiset(got, ["id", "name"]) == multiset(want, ["id", "name"]) and len(got) == 10
    v1 = reader.scan(uri, snapshot=snapshot_at(uri, TableLog.open_existing(uri).storage, 1))
    old = query_frame(spark, "SELECT * FROM orders", _input(ident, snapshot_id=ice.snapshot_id(1))).toArrow()
    assert multiset(old, ["id", "name"]) == multiset(v1, ["id", "name"]) and len(old) == 10


def test_bad_catalog_inputs_fail_naming_the_input(spark: Any, tmp_path: Path, lake: str,
                                                  monkeypatch: pytest.MonkeyPatch, postgres_dsn: str) -> None:  # noqa: F811
    ident = cats.ident()
    _table(tmp_path, "orders", ident)
    with pytest.raises(iceberg.IcebergInputError, match=r"from.inputs\[0\].iceberg.table: catalog 'lake' has no "
                                                        r"table db\w+.missing"):
        query_frame(spark, "SELECT * FROM orders", _input(ident.replace("orders", "missing")))
    with pytest.raises(iceberg.IcebergInputError, match=r"from.inputs\[0\].iceberg.snapshotId: snapshot 424242 is "
                                                        r"not in .*expired"):
        query_frame(spark, "SELECT * FROM orders", _input(ident, snapshot_id=424242))
    with pytest.raises(iceberg.IcebergInputError, match=r"from.inputs\[0\].iceberg.catalog: catalog 'elsewhere' is "
                                                        r"not declared for this job \(declared: lake\)"):
        query_frame(spark, "SELECT * FROM orders", _input(ident, catalog="elsewhere"))
    declared = catalogs.from_env()
    monkeypatch.setenv(catalogs.ENV, json.dumps({**{n: c.to_dict() for n, c in declared.items()},
                                                 "refusing": cats.sql(postgres_dsn, user="nobody")}))
    with pytest.raises(iceberg.IcebergInputError, match=r"from.inputs\[0\].iceberg.catalog: catalog 'refusing' "
                                                        r"refused or could not be reached .*nobody"):
        query_frame(spark, "SELECT * FROM orders", _input(ident, catalog="refusing"))


def test_a_copyjob_with_a_bad_catalog_input_writes_nothing(spark: Any, tmp_path: Path, lake: str) -> None:
    from support.unload import job_doc

    from lading_jobs.main import run_job

    ident = cats.ident()
    _table(tmp_path, "orders", ident)
    dest = tmp_path / "out"
    for bad in ({"catalog": "lake", "table": ident.replace("orders", "missing")},
                {"catalog": "lake", "table": ident, "snapshotId": 424242}):
        doc = job_doc({"from": {"query": "SELECT * FROM orders", "inputs": [{"name": "orders", "iceberg": bad}]},
                       "to": {"files": f"file://{dest}/", "format": "parquet"}})
        with pytest.raises(iceberg.IcebergInputError, match=r"from.inputs\[0\].iceberg"):
            run_job(spark, doc)
        assert not dest.exists()
    doc = job_doc({"from": {"query": "SELECT * FROM orders", "inputs": [{"name": "orders",
                                                                      "iceberg": {"catalog": "lake", "table": ident}}]},
                   "to": {"files": f"file://{dest}/", "format": "parquet"}})
    assert run_job(spark, doc)["rows"] == 15


def test_a_copyjob_creates_a_table_registered_in_the_catalog(spark: Any, tmp_path: Path, lake: str) -> None:
    """``to.catalog``: the table the CopyJob creates is registered, and a reader through the catalog
    reads it; an entry held by another table is refused before anything is written."""
    from support.unload import job_doc

    from lading_jobs.main import run_job
    from lading_jobs.table.iceberg import catalog_pointer, mirror
    from lading_jobs.table.log.commits import TableError

    source = cats.ident()
    src_uri = _table(tmp_path, "orders", source)
    target = cats.ident()
    uri = f"file://{tmp_path}/copy/"
    doc = job_doc({"from": {"query": "SELECT * FROM orders WHERE id < 20",
                            "inputs": [{"name": "orders", "iceberg": {"catalog": "lake", "table": source}}]},
                   "to": {"table": uri, "catalog": {"name": "lake", "table": target}}})
    assert run_job(spark, doc)["rows"] == 10
    assert TableLog.open_existing(uri).snapshot().meta.catalog == ("lake", target)
    assert catalog_pointer.location("lake", target) == mirror.current_metadata(uri)
    assert multiset(cats.reader_rows("lake", target), ["id", "name"]) == multiset(reader.scan(uri), ["id", "name"])
    taken = job_doc({"from": {"query": "SELECT * FROM orders",
                              "inputs": [{"name": "orders", "iceberg": {"catalog": "lake", "table": source}}]},
                     "to": {"table": f"file://{tmp_path}/other/", "catalog": {"name": "lake", "table": source}}})
    with pytest.raises(TableError, match=r"to.catalog.table: catalog 'lake'.s table db\w+.orders points at .*not at "
                                         r"this table"):
        run_job(spark, taken)
    assert not (tmp_path / "other").exists()
    assert catalog_pointer.location("lake", source) == mirror.current_metadata(src_uri)
