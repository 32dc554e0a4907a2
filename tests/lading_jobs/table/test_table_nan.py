"""NaN in float statistics never hides rows: a part whose row groups mix NaN and NaN-free
values keeps no bounds for the column, so filters that match the NaN group's rows (or NaN
itself, which Spark orders above every number) still read the part.
Fails on 1b6c3cc: the merged statistics kept the NaN-free group's bounds [5.0, 6.0]."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from support.unload import job_doc

from lading_jobs import storage as st
from lading_jobs.main import run_job
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats import part as stx

NAN = float("nan")
SCHEMA = TableSchema.of([("id", "bigint"), ("x", "double")])


def _stats(values: list[float | None]) -> stx.PartStats:
    table = pa.table({"x": pa.array(values, pa.float64()), fmt.TIME_COLUMN: pa.array([1] * len(values), pa.int64()),
                      fmt.DIFF_COLUMN: pa.array([1] * len(values), pa.int64())})
    return stx.table_stats(table, {"x": 1})


def test_merging_a_nan_group_drops_the_bounds_but_an_all_null_group_does_not() -> None:
    with_nan, clean, nulls = _stats([1.0, NAN]), _stats([5.0, 6.0]), _stats([None, None])
    assert with_nan.columns[1].min is None and with_nan.columns[1].max is None
    for merged in (stx.merge(with_nan, clean), stx.merge(clean, with_nan)):
        assert merged.columns[1].min is None and merged.columns[1].max is None
        assert merged.columns[1].nulls == 0
    kept = stx.merge(nulls, clean).columns[1]
    assert (kept.min, kept.max, kept.nulls) == (5.0, 6.0, 2)
    # without row counts a side without bounds may hold values: no bounds (conservative)
    assert stx.merge_column(clean.columns[1], nulls.columns[1]).max is None


@pytest.fixture
def nan_table(file_uri: Callable[[str], str]) -> str:
    """One part, two row groups: [1.0, NaN] and [5.0, 6.0]."""
    uri = file_uri("nan/")
    log = TableLog.create(uri, SCHEMA)
    data = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "x": pa.array([1.0, NAN, 5.0, 6.0])})
    written = writer.write_parts(uri, [data], log.snapshot().schema, write_id=fmt.new_write_id(),
                                 row_group_rows=2, storage=st.open_storage(uri))
    snap = writer.commit_parts(uri, written, log=log)
    assert len(snap.parts) == 1
    return uri


@pytest.mark.spark
@pytest.mark.parametrize(("condition", "ids"), [("x = 1.0", [1]), ("x < 1.5", [1]), ("x > 10", [2]),
                                                ("x >= 1.0 AND x <= 1.0", [1])])
def test_filters_through_format_lading_see_the_rows_of_the_nan_group(spark: Any, nan_table: str, condition: str,
                                                                    ids: list[int]) -> None:
    df = reader.read_table(spark, nan_table).where(condition)
    assert sorted(r["id"] for r in df.collect()) == ids


@pytest.mark.spark
def test_a_copyjob_query_over_the_table_counts_the_nan_group(spark: Any, nan_table: str,
                                                              file_uri: Callable[[str], str]) -> None:
    doc = job_doc({"from": {"query": "SELECT id, x FROM t WHERE x = 1.0",
                            "inputs": [{"name": "t", "table": nan_table}]},
                   "to": {"files": file_uri("out/"), "format": "json"}})
    result = run_job(spark, doc)
    assert result["rows"] == 1, result


@pytest.mark.parametrize("arrow_type", [pa.float64(), pa.float32()])
def test_in_over_floats_matches_negative_zero_as_zero(arrow_type: pa.DataType) -> None:
    # SQL's -0.0 = 0.0; Arrow's is_in hashes values and told them apart, so the table source's row
    # filter dropped the -0.0 rows before Spark could re-check them (x IN (0.0, 5.0) lost a third).
    from lading_jobs.table.filters.expr import Pred, to_arrow

    data = pa.table({"x": pa.array([-0.0, 0.0, 5.0, NAN, None, 1.0], arrow_type)})
    type_ = "double" if arrow_type == pa.float64() else "float"
    for values, expected in [((0.0, 5.0), [-0.0, 0.0, 5.0]), ((-0.0,), [-0.0, 0.0]), ((0.0, NAN), [-0.0, 0.0])]:
        kept = data.filter(to_arrow(Pred("in", "x", values, column_type=type_))).column("x").to_pylist()
        assert [v for v in kept if v == v] == expected  # NaN rows are kept for Spark to decide, as before
    kept = data.filter(to_arrow(Pred("notin", "x", (0.0,), column_type=type_))).column("x").to_pylist()
    assert [v for v in kept if v == v] == [5.0, 1.0]


@pytest.mark.spark
def test_a_query_with_in_over_a_table_keeps_negative_zero_rows(spark: Any, file_uri: Callable[[str], str]) -> None:
    uri = file_uri("zeros/")
    log = TableLog.create(uri, SCHEMA)
    data = pa.table({"id": pa.array(range(6), pa.int64()), "x": pa.array([-0.0, 0.0, 5.0, -0.0, 0.0, 5.0])})
    written = writer.write_parts(uri, [data], log.snapshot().schema, write_id=fmt.new_write_id(),
                                 storage=st.open_storage(uri))
    writer.commit_parts(uri, written, log=log)
    df = reader.read_table(spark, uri).where("x IN (0.0, 5.0)")
    assert sorted(r["id"] for r in df.collect()) == [0, 1, 2, 3, 4, 5]
