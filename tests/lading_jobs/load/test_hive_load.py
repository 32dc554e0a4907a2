"""An unload with ``partitionBy`` then a load of its prefix with ``partitioning: hive`` gives
back every row and value: the partition columns come back from the ``col=value/``
directories, escaped values (``/``, ``=``, ``%``, ``:``) and NULLs included."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.loads import job, table_rows
from support.unload import job_doc

from lading_jobs.load.job import run_load
from lading_jobs.table.log.commits import TableLog
from lading_jobs.unload.job import run_unload
from lading_spec.copyjob import parse_copyjob

pytestmark = [pytest.mark.spark]

REGIONS = ["eu", "a/b", "k=v", "50%", "x:y", None, "é ü", "#[x]"]
ROWS = [{"id": i, "v": f"v{i}" if i % 5 else None, "dt": dt.date(2024, 1, 1 + i % 3),
         "region": REGIONS[i % len(REGIONS)]} for i in range(30)]
SCHEMA = [{"name": "id", "type": "int"}, {"name": "v", "type": "string"}, {"name": "dt", "type": "date"},
          {"name": "region", "type": "string"}]


def _unload(spark: Any, tmp_path: Path, fmt: str) -> str:
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(spark.createDataFrame([tuple(r.values()) for r in ROWS],
                                         "id int, v string, dt date, region string").toArrow(), src / "rows.parquet")
    out = f"file://{tmp_path}/out/"
    spec = {"from": {"query": "SELECT * FROM src", "inputs": [{"name": "src", "files": f"file://{src}/",
                                                                "format": "parquet"}]},
            "to": {"files": out, "format": fmt, "partitionBy": ["dt", "region"]}}
    run_unload(spark, job_doc(spec), parse_copyjob(spec))
    assert (tmp_path / "out" / "dt=2024-01-01" / "region=a%2Fb").is_dir()  # lading's own escaping
    assert (tmp_path / "out" / "dt=2024-01-03" / "region=__HIVE_DEFAULT_PARTITION__").is_dir()
    return out


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_an_unload_with_partition_by_loads_back_every_row_and_value(spark: Any, tmp_path: Path, fmt: str) -> None:
    out = _unload(spark, tmp_path, fmt)
    table = f"file://{tmp_path}/t/"
    spec = {"from": {"files": out, "format": fmt, "partitioning": "hive"}, "to": {"table": table, "schema": SCHEMA}}
    result = run_load(spark, job(spec))
    assert result.get("error") is None and result["rows"] == len(ROWS), result
    assert _sorted(table_rows(table)) == ROWS
    # without partitioning the directories are no columns: the rows come back without them
    plain = f"file://{tmp_path}/plain/"
    spec = {"from": {"files": out, "format": fmt}, "to": {"table": plain, "schema": SCHEMA[:2]}}
    assert run_load(spark, job(spec))["rows"] == len(ROWS)


def test_a_new_table_takes_the_partition_columns_and_their_types(spark: Any, tmp_path: Path) -> None:
    out = _unload(spark, tmp_path, "parquet")
    table = f"file://{tmp_path}/t/"
    spec = {"from": {"files": out, "format": "parquet", "partitioning": "hive"},
            "to": {"table": table, "inferSchema": True}}
    assert run_load(spark, job(spec))["rows"] == len(ROWS)
    schema = TableLog.open_existing(table).snapshot().schema
    assert [(c.name, c.type) for c in schema.columns] == [("id", "int"), ("v", "string"), ("dt", "date"),
                                                          ("region", "string")]
    assert _sorted(table_rows(table)) == ROWS
