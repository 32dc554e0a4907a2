"""COPY FROM Parquet into a table with a column of every mapped type (nested, intervals,
char/varchar, json/uuid, variant): from ``to.schema`` type names, and from the file's own
schema (``inferSchema``, extension names honoured); the table reads back equal to the source."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq
import pytest
from support import every_type

from lading_jobs import storage as st
from lading_jobs.load.job import run_load
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.errors import SpecError
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark]


def _job(spec: dict[str, Any], run_id: str) -> JobDocument:
    return JobDocument("CopyJob", "ns", "load", "uid", 1, run_id, dt.datetime(2025, 1, 1, tzinfo=dt.UTC), spec)


@pytest.fixture(scope="module")
def parquet_input(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Parquet file of the every-type rows, written from a lading table's parts (lading's mapping)."""
    root = tmp_path_factory.mktemp("load-types").as_uri() + "/"
    TableLog.create(root + "src/", TableSchema.of(every_type.COLUMNS))
    writer.append(spark, every_type.source(spark), root + "src/", logical_time=1, create=False)
    buf = io.BytesIO()
    pq.write_table(reader.scan(root + "src/"), buf)
    st.open_storage(root).put(root + "in/every.parquet", buf.getvalue())
    return root


def test_load_parquet_into_a_table_of_every_type(spark: Any, parquet_input: str) -> None:
    root = parquet_input
    schema = [{"name": n, "type": t} for n, t in every_type.COLUMNS]
    spec = {"from": {"files": root + "in/", "format": "parquet"}, "to": {"table": root + "given/", "schema": schema}}
    result = run_load(spark, _job(spec, "r1"))
    assert result.get("rows") == 3, result
    snap = TableLog.open_existing(root + "given/").snapshot()
    assert [(c.name, c.type) for c in snap.schema.columns] == every_type.COLUMNS
    assert every_type.rows(reader.read_table(spark, root + "given/")) == every_type.rows(every_type.source(spark))


def test_infer_schema_takes_every_type_from_the_file(spark: Any, parquet_input: str) -> None:
    root = parquet_input
    spec = {"from": {"files": root + "in/", "format": "parquet"}, "to": {"table": root + "inferred/", "inferSchema": True}}
    assert run_load(spark, _job(spec, "r2")).get("rows") == 3
    snap = TableLog.open_existing(root + "inferred/").snapshot()
    expected = [(n, "string" if t == "void" else t) for n, t in every_type.COLUMNS]  # all-NULL columns: string
    assert [(c.name, c.type) for c in snap.schema.columns] == expected  # json, uuid, varchar, intervals kept
    assert every_type.rows(reader.read_table(spark, root + "inferred/")) == every_type.rows(every_type.source(spark))


def test_unknown_and_unstorable_types_in_to_schema_name_the_column(spark: Any, file_uri: Callable[[str], str]) -> None:
    root = file_uri("bad-types/")
    st.open_storage(root).put(root + "in/x.csv", b"1\n")
    for type_, message in (("array<int", "expected '>'"), ("interval", "legacy CalendarInterval"),
                           ("string collate utf8_lcase", "collations are not supported")):
        spec = {"from": {"files": root + "in/", "format": "csv"},
                "to": {"table": root + "t/", "schema": [{"name": "id", "type": "int"}, {"name": "x", "type": type_}]}}
        with pytest.raises(SpecError, match=r"to.schema: column to.schema\[1\].type \(x\): .*" + message):
            run_load(spark, _job(spec, "r-" + str(len(type_))))
