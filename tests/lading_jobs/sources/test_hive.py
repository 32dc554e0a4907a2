"""Hive-partitioned file sets: lading's own ``partitionBy`` output read back with its columns,
escaped names and NULLs included, and directories pruned before they are listed.

The tree is written by lading's unload (``partitionBy``), so the escaping read back is the
one lading writes. Pruning is counted two ways: listings made by the planner (a counting
store), and, through Spark, a file that is no Parquet planted in a directory the filter rules
out (the query answering at all proves it was never opened)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import datasource as ds
from support.unload import job_doc

from lading_jobs.sources import files as sources_files
from lading_jobs.sources import hive
from lading_jobs.storage import LocalStorage, ObjectInfo
from lading_jobs.unload.job import run_unload
from lading_spec.copyjob import Input, parse_copyjob
from lading_spec.errors import SpecError
from lading_spec.formats import FileSet, ParquetOptions

REGIONS = ["eu", "a/b", "k=v", "50%", "x:y", None, "sp ace", "é"]
ROWS = [(i, REGIONS[i % len(REGIONS)], dt.date(2024, 1, 1 + i % 3), f"v{i}") for i in range(24)]


def test_unescape_and_directories() -> None:
    assert hive.unescape("a%2Fb%3Dc%25d%3A") == "a/b=c%d:"
    assert hive.unescape("100%") == "100%" and hive.unescape("%zz") == "%zz"
    assert hive.split_dir("region=__HIVE_DEFAULT_PARTITION__") == ("region", None)
    assert hive.split_dir("k%3Dx=v%2F1") == ("k=x", "v/1")
    with pytest.raises(hive.PartitionError):
        hive.split_dir("plain")


@pytest.mark.parametrize(("values", "type_"), [
    (["1", "-2", None], "int"), (["1", str(2**40)], "bigint"), (["2024-01-02", None], "date"),
    (["2024-01-02 10:00:00.000000", "2024-01-02 10:00:00"], "timestamp"), (["1.10", "2"], "string"),
    (["2024-02-30"], "string"), ([None], "string"), ([str(2**70)], "string"),
])
def test_inferred_types_never_round(values: list[str | None], type_: str) -> None:
    assert hive.infer_type(values) == type_


def _unload(spark: Any, tmp_path: Path, out: str, fmt: str = "parquet") -> None:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    pq.write_table(spark.createDataFrame(ROWS, "id int, region string, dt date, v string").toArrow(),
                   src / "rows.parquet")
    spec = {"from": {"query": "SELECT id, region, dt, v FROM src",
                     "inputs": [{"name": "src", "files": f"file://{src}/", "format": "parquet"}]},
            "to": {"files": out, "format": fmt, "partitionBy": ["dt", "region"]}}
    run_unload(spark, job_doc(spec), parse_copyjob(spec))


class CountingStorage(LocalStorage):
    def __init__(self) -> None:
        super().__init__()
        self.levels: list[str] = []

    def list_level(self, prefix: str) -> tuple[list[str], list[ObjectInfo]]:
        self.levels.append(prefix)
        return super().list_level(prefix)


@pytest.mark.spark
def test_pushed_filters_prune_directories_before_they_are_listed(spark: Any, tmp_path: Path) -> None:
    out = f"file://{tmp_path}/out/"
    _unload(spark, tmp_path, out)
    fs = FileSet(uri=out, format="parquet", options=ParquetOptions(), partitioning="hive",
                 partition_columns=(("dt", "date"), ("region", "string")))
    every = CountingStorage()
    whole = sources_files.list_hive(fs, lambda uri: every)
    assert len(whole.files) == len({(r[2], r[1]) for r in ROWS}) and whole.columns == ("dt", "region")
    assert whole.listed == 1 + 3 + 3 * len(REGIONS)  # the root, each day, each region of each day
    counted = CountingStorage()
    columns = list(fs.partition_columns)
    pruned = sources_files.list_hive(fs, lambda uri: counted, prune=hive.pruner(
        [ds.EqualTo(("dt",), dt.date(2024, 1, 2)), ds.In(("region",), ("a/b", "50%"))], columns))
    assert sorted(f.values for f in pruned.files) == [("2024-01-02", "50%"), ("2024-01-02", "a/b")]
    assert pruned.listed == 1 + 1 + 2  # the root, one day, two regions: no other directory listed
    nulls = sources_files.list_hive(fs, lambda uri: LocalStorage(), prune=hive.pruner(
        [ds.IsNull(("region",)), ds.GreaterThan(("dt",), dt.date(2024, 1, 2))], columns))
    assert [f.values for f in nulls.files] == [("2024-01-03", None)]
    kept = sources_files.list_hive(fs, lambda uri: LocalStorage(), prune=hive.pruner(
        [ds.StringContains(("v",), "x"), ds.Not(ds.EqualTo(("region",), "eu"))], columns))
    # a filter on a file column prunes nothing; NOT region = 'eu' rules out eu and NULL (never TRUE)
    assert sorted(f.values for f in kept.files) == sorted(f.values for f in whole.files
                                                          if f.values[1] not in ("eu", None))


@pytest.mark.spark
@pytest.mark.parametrize("typed", [True, False])
def test_a_query_reads_the_directories_as_columns_and_never_opens_pruned_files(
        spark: Any, tmp_path: Path, typed: bool) -> None:
    out = f"file://{tmp_path}/out/"
    _unload(spark, tmp_path, out)
    # a file no Parquet reader opens, in a directory the filter below rules out
    (tmp_path / "out" / "dt=2024-01-03" / "region=eu").mkdir(parents=True, exist_ok=True)
    (tmp_path / "out" / "dt=2024-01-03" / "region=eu" / "part-99999-00000.parquet").write_bytes(b"not parquet")
    given = (("dt", "date"), ("region", "string")) if typed else ()
    fs = FileSet(uri=out, format="parquet", options=ParquetOptions(), partitioning="hive", partition_columns=given)
    sources_files.register_inputs(spark, [Input(name="t", files=fs)])
    df = spark.sql("SELECT id, region, dt, v FROM t WHERE dt <= DATE'2024-01-02'")
    assert df.schema.simpleString() == "struct<id:int,region:string,dt:date,v:string>"
    assert sorted(tuple(r) for r in df.collect()) == sorted(r for r in ROWS if r[2] <= dt.date(2024, 1, 2))
    assert spark.sql("SELECT count(*) AS n FROM t WHERE dt = DATE'2030-01-01'").collect()[0].n == 0  # no directory
    nulls = spark.sql("SELECT id, region, dt, v FROM t WHERE region IS NULL AND v <> 'none'")
    assert sorted(tuple(r) for r in nulls.collect()) == sorted(r for r in ROWS if r[1] is None)
    escaped = spark.sql("SELECT id, region, dt, v FROM t WHERE region IN ('a/b', 'k=v', '50%', 'x:y')")
    assert sorted(tuple(r) for r in escaped.collect()) == sorted(r for r in ROWS if r[1] in ("a/b", "k=v", "50%",
                                                                                            "x:y"))
    # a self-join: two scans of one relation, each with its own filter, none pruning the other's
    # rows: the relation is read unpruned (it would now open the planted file)
    (tmp_path / "out" / "dt=2024-01-03" / "region=eu" / "part-99999-00000.parquet").unlink()
    both = sources_files.query_frame(
        spark, "SELECT a.id FROM t a JOIN t b ON a.id = b.id + 1 WHERE a.dt = DATE'2024-01-02' "
               "AND b.dt = DATE'2024-01-01' AND a.region <=> b.region", [Input(name="t", files=fs)])
    by_id = {r[0]: r for r in ROWS}
    assert sorted(r.id for r in both.collect()) == sorted(
        i for i, r in by_id.items() if r[2] == dt.date(2024, 1, 2) and i - 1 in by_id
        and by_id[i - 1][2] == dt.date(2024, 1, 1) and by_id[i - 1][1] == r[1])


def test_files_at_mixed_depths_and_stray_directories_are_named(tmp_path: Path) -> None:
    root = tmp_path / "t"
    (root / "dt=1").mkdir(parents=True)
    pq.write_table(pa.table({"a": [1]}), root / "dt=1" / "a.parquet")
    pq.write_table(pa.table({"a": [1]}), root / "b.parquet")
    fs = FileSet(uri=f"file://{root}/", format="parquet", options=ParquetOptions(), partitioning="hive")
    with pytest.raises(SpecError, match="lies below files of the set"):
        sources_files.list_files(fs)
    (root / "b.parquet").unlink()
    (root / "stray").mkdir()
    with pytest.raises(SpecError, match="'stray' is no col=value directory"):
        sources_files.list_files(fs)


def test_a_partition_column_that_is_also_a_file_column_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    (root / "a=1").mkdir(parents=True)
    pq.write_table(pa.table({"a": [1], "b": [2]}), root / "a=1" / "x.parquet")
    fs = FileSet(uri=f"file://{root}/", format="parquet", options=ParquetOptions(), partitioning="hive")
    with pytest.raises(sources_files.SchemaDrift, match="also a partition column"):
        sources_files.infer_schema(fs, sources_files.list_files(fs))


@pytest.mark.s3
def test_s3_lists_one_level_with_a_delimiter(bucket: str) -> None:
    from lading_jobs.storage import open_storage

    root = f"s3://{bucket}/levels/"
    store = open_storage(root)
    for key in ("a=1/x.parquet", "a=1/b=2/y.parquet", "a=%2F/z.parquet", "top.txt"):
        store.put(root + key, b"x")
    dirs, files = store.list_level(root)
    assert dirs == [root + "a=%2F/", root + "a=1/"] and [f.uri for f in files] == [root + "top.txt"]
    dirs, files = store.list_level(root + "a=1/")
    assert dirs == [root + "a=1/b=2/"] and [f.uri for f in files] == [root + "a=1/x.parquet"]
