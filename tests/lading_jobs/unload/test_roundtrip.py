"""Unloaded files read back by independent readers (DuckDB, pyarrow) equal the source."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from support.unload import job_doc, parquet_input

from lading_jobs.main import run_job

pytestmark = [pytest.mark.spark]

TEXTS = [None, "", "plain", 'with "quotes"', "comma, inside", "two\nlines", "crlf\r\nend", "ünïcødé ✓", "\\N", " "]


EDGE: dict[str, Any] = {}
"""The from.inputs entry of the edge rows (a tenant's query reads only the views its inputs name)."""


@pytest.fixture(scope="module")
def edge_view(spark: Any, tmp_path_factory: Any) -> str:
    from pyspark.sql import types as T

    schema = T.StructType([
        T.StructField("id", T.LongType(), False),
        T.StructField("txt", T.StringType()),
        T.StructField("amount", T.DecimalType(20, 4)),
        T.StructField("ts", T.TimestampType()),
        T.StructField("day", T.DateType()),
        T.StructField("flag", T.BooleanType()),
        T.StructField("ratio", T.DoubleType()),
    ])
    rows = [(i, t, None if i == 3 else decimal.Decimal(f"{i * 1234567}.{i:04d}"),
             dt.datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=dt.UTC) + dt.timedelta(days=i),
             dt.date(1999, 12, 31) + dt.timedelta(days=i), i % 2 == 0, i / 3)
            for i, t in enumerate(TEXTS)]
    df = spark.createDataFrame(rows, schema).coalesce(1)
    df.createOrReplaceTempView("edge_rows")
    EDGE.update(parquet_input(df, tmp_path_factory.mktemp("edge"), "edge_rows"))
    return "edge_rows"


def _dest(tmp_path: Path, name: str) -> str:
    return f"file://{tmp_path}/{name}/"


def _files(tmp_path: Path, name: str, suffix: str) -> list[str]:
    return sorted(str(p) for p in (tmp_path / name).rglob(f"*.{suffix}"))


def test_csv_null_and_empty_string_survive_with_gzip(spark: Any, edge_view: str, tmp_path: Path) -> None:
    spec = {"from": {"query": "SELECT id, txt, amount FROM edge_rows ORDER BY id", "inputs": [dict(EDGE)]},
            "to": {"files": _dest(tmp_path, "csv"), "format": "csv",
                   "options": {"header": True, "compression": "gzip"}}}
    assert run_job(spark, job_doc(spec))["rows"] == len(TEXTS)
    [path] = _files(tmp_path, "csv", "csv.gz")
    got = duckdb.sql(
        f"SELECT id, txt, amount FROM read_csv('{path}', header=true, allow_quoted_nulls=false, "
        "columns={'id': 'BIGINT', 'txt': 'VARCHAR', 'amount': 'DECIMAL(20,4)'}) ORDER BY id").fetchall()
    assert [r[1] for r in got] == TEXTS
    assert got[1][2] == decimal.Decimal("1234567.0001") and got[3][2] is None


def test_json_lines_are_lossless_for_decimals_and_timestamps(spark: Any, edge_view: str, tmp_path: Path) -> None:
    spec = {"from": {"query": "SELECT id, txt, amount, ts, day FROM edge_rows ORDER BY id", "inputs": [dict(EDGE)]},
            "to": {"files": _dest(tmp_path, "json"), "format": "json", "options": {"compression": "zstd"}}}
    assert run_job(spark, job_doc(spec))["rows"] == len(TEXTS)
    [path] = _files(tmp_path, "json", "jsonl.zst")
    got = duckdb.sql(f"SELECT id, txt, CAST(amount AS VARCHAR), CAST(ts AS VARCHAR), CAST(day AS VARCHAR) "
                     f"FROM read_json('{path}', format='newline_delimited', "
                     "columns={'id': 'BIGINT', 'txt': 'VARCHAR', 'amount': 'VARCHAR', 'ts': 'VARCHAR', "
                     "'day': 'VARCHAR'}) ORDER BY id").fetchall()
    assert [r[1] for r in got] == TEXTS
    assert decimal.Decimal(got[2][2]) == decimal.Decimal("2469134.0002")
    ts = dt.datetime.fromisoformat(got[0][3].replace("Z", "+00:00"))
    assert ts.replace(tzinfo=ts.tzinfo or dt.UTC) == dt.datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=dt.UTC)
    assert got[1][4] == "2000-01-01"


def test_parquet_reads_back_equal_with_field_ids(spark: Any, edge_view: str, tmp_path: Path) -> None:
    spec = {"from": {"query": "SELECT * FROM edge_rows ORDER BY id", "inputs": [dict(EDGE)]},
            "to": {"files": _dest(tmp_path, "pq"), "format": "parquet", "options": {"compression": "zstd"}}}
    assert run_job(spark, job_doc(spec))["rows"] == len(TEXTS)
    [path] = _files(tmp_path, "pq", "parquet")
    table = pq.read_table(path)
    rows = table.to_pylist()
    assert [r["txt"] for r in rows] == TEXTS
    assert rows[5]["amount"] == decimal.Decimal("6172835.0005")
    assert rows[0]["ts"] == dt.datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=dt.UTC)
    assert rows[1]["day"] == dt.date(2000, 1, 1) and rows[4]["flag"] is True
    assert table.schema.field("id").metadata[b"PARQUET:field_id"] == b"1"
    assert b"lading.type_mapping_version" in (table.schema.metadata or {})
    duck = duckdb.sql(f"SELECT count(*), sum(id) FROM read_parquet('{path}')").fetchall()[0]
    assert duck == (len(TEXTS), sum(range(len(TEXTS))))
