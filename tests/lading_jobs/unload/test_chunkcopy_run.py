"""Parquet to Parquet with copied column chunks, in runs: the same CopyJob on both paths holds the same rows.

The input is written by Spark's own Parquet writer (parquet-mr), so its chunks are
parquet-mr's pages (copied where they qualify: floats with statistics of lading's
own, INT64 decimals as an unload stores them too) beside INT96 timestamps (encoded
again). Both paths must give the same rows bit for bit
in the same order, the same schema and the same manifest (apart from the bytes
that hold the rows and the path marker); Spark and DuckDB must read the copy as
they read the Spark path's files. Faults on S3: a failing task leaves nothing and
the rerun succeeds. The no-Spark cases: test_chunkcopy.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from support.unload import job_doc, s3_keys, s3_pending, spark_conf

from lading_jobs.formats import thrift
from lading_jobs.main import execute
from lading_jobs.result import Cancellation
from lading_jobs.unload import arrowpath, chunkcopy
from lading_jobs.unload.job import run_unload
from lading_spec.copyjob import parse_copyjob

pytestmark = [pytest.mark.spark]

ROWS = 12_000
FLAT = ("id", "b", "i8", "i16", "i64", "f32", "f64", "dec", "s", "vc", "ch", "js", "u", "bin", "d", "ts", "ntz")
QUERY = f"""
SELECT r, {', '.join(FLAT)}, concat(s, CAST(r AS STRING)) AS rs,
       CASE r % 5 WHEN 0 THEN CAST('NaN' AS DOUBLE) WHEN 1 THEN -0.0D WHEN 2 THEN 0.0D WHEN 3 THEN NULL
                  ELSE r / 7.0D END AS fz
FROM (SELECT * FROM ({{every}})) e JOIN (SELECT id AS r FROM range(0, {ROWS})) ON e.id = r % 3 + 1
"""


@pytest.fixture(scope="module")
def spark_written(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rows as three files written by Spark (parquet-mr), several row groups each."""
    from support import every_type

    root = tmp_path_factory.mktemp("chunkcopy-in") / "src"
    (spark.sql(QUERY.format(every=every_type.QUERY)).repartition(3, "r").sortWithinPartitions("r")
     .write.option("parquet.block.size", 96 * 1024).parquet(str(root)))
    files = sorted(root.glob("*.parquet"))
    assert len(files) == 3 and all(pq.read_metadata(f).num_row_groups >= 2 for f in files)
    assert pq.read_metadata(files[0]).created_by.startswith("parquet-mr")
    return root


def bits(table: pa.Table) -> pa.Table:
    """Floats as their bit patterns: equal tables then hold NaN and -0.0 where the other does."""
    cols = []
    for c in table.columns:
        c = c.combine_chunks()
        if pa.types.is_float64(c.type):
            c = c.view(pa.int64())
        elif pa.types.is_float32(c.type):
            c = c.view(pa.int32())
        cols.append(c)
    return pa.table(cols, names=table.column_names)


def outputs(dest: Path) -> tuple[dict[str, Any], pa.Table]:
    manifest = json.loads((dest / "_lading_manifest.json").read_text())
    table = pa.concat_tables([pq.read_table(dest / f["path"]) for f in manifest["files"]])
    return manifest, table


def same_chunk(a: Path, b: Path, name: str) -> bool:
    """Whether column ``name``'s first chunk is the same bytes in files ``a`` and ``b``."""
    def chunk(p: Path) -> bytes:
        c = pq.read_metadata(p).row_group(0).column(pq.read_schema(p).names.index(name))
        start = c.dictionary_page_offset or c.data_page_offset
        return p.read_bytes()[start:start + c.total_compressed_size]

    return chunk(a) == chunk(b)


def test_a_spark_written_input_copies_to_the_same_rows_on_both_paths(spark: Any, spark_written: Path,
                                                                       tmp_path: Path) -> None:
    runs = {}
    for path in ("spark", "arrow"):
        spec = {"from": {"files": f"file://{spark_written}/", "format": "parquet"},
                "to": {"files": f"file://{tmp_path / path}/", "format": "parquet",
                       "options": {"rowGroupSize": 1000}}}
        result = run_unload(spark, job_doc(spec), parse_copyjob(spec), path=path)
        assert result["rows"] == ROWS
        runs[path] = outputs(tmp_path / path)
    (arrow, copied), (spark_m, written) = runs["arrow"], runs["spark"]
    assert arrow["path"] == {"name": "arrow", "reason": "from.files: a format conversion; "
                                                        "Parquet column chunks copied where they qualify"}
    assert copied.schema.equals(written.schema, check_metadata=True)
    assert bits(copied).equals(bits(written))

    def rows_not_bytes(m: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in m.items() if k not in ("runId", "destination", "startTime", "endTime",
                                                      "durationSeconds", "path", "files", "totals")}
        out["files"] = [{k: v for k, v in f.items() if k not in ("uri", "bytes", "crc32")} for f in m["files"]]
        out["rows"] = m["totals"]["rows"]
        return out

    assert rows_not_bytes(arrow) == rows_not_bytes(spark_m)

    # the string, decimal(38,10) and float columns' chunks are parquet-mr's bytes; the INT96 timestamps' are not
    src = sorted(spark_written.glob("*.parquet"))[0]
    out = tmp_path / "arrow" / arrow["files"][0]["path"]
    assert pq.read_metadata(out).created_by == chunkcopy.CREATED_BY.decode()
    assert {name: same_chunk(src, out, name) for name in ("s", "rs", "ts", "dec", "f32", "f64", "fz")} == {
        "s": True, "rs": True, "ts": False, "dec": True, "f32": True, "f64": True, "fz": True}
    # the floats' chunk statistics are not parquet-mr's (NaN may be its bound) but, field for
    # field, what pyarrow writes for each row group's values: NaN left out, zeros signed
    footer = thrift.decode(chunkcopy._footer_bytes(out.read_bytes()))
    names = pq.read_schema(out).names
    for g, group in enumerate(footer.get(chunkcopy.FMD_GROUPS).values):
        for name in ("f32", "f64", "fz"):
            values = pq.ParquetFile(out).read_row_group(g, columns=[name]).column(0)
            buf = pa.BufferOutputStream()
            pq.write_table(pa.table({name: values}), buf, use_dictionary=False)
            expected = thrift.decode(chunkcopy._footer_bytes(buf.getvalue())).get(chunkcopy.FMD_GROUPS).values[0]
            stats = [gr.get(chunkcopy.RG_COLUMNS).values[i].get(chunkcopy.CC_META).get(chunkcopy.CM_STATISTICS)
                     for gr, i in ((group, names.index(name)), (expected, 0))]
            assert stats[0].fields == stats[1].fields, (g, name)
    # parquet-mr's bounds of the copied decimals are signed, as pyarrow's are: each row group's
    # footer holds the minimum and maximum of its values (a negative one among them)
    md, dec = pq.read_metadata(out), pq.read_schema(out).names.index("dec")
    negative = False
    for g in range(md.num_row_groups):
        values = pq.ParquetFile(out).read_row_group(g, columns=["dec"]).column(0)
        stats = md.row_group(g).column(dec).statistics
        if values.null_count == len(values):
            continue
        bounds = pc.min_max(values)
        assert (stats.min, stats.max) == (bounds["min"].as_py(), bounds["max"].as_py()), g
        negative = negative or stats.min < 0 < stats.max
    assert negative

    # Spark and DuckDB read the copy as they read the Spark path's files
    def spark_rows(p: Path) -> list[Any]:
        return sorted(spark.read.parquet(str(p)).selectExpr("r", "s", "rs", "dec", "ts", "f64", "bin").collect())

    assert spark_rows(tmp_path / "arrow") == spark_rows(tmp_path / "spark")
    import duckdb

    def duck(p: Path) -> Any:
        return duckdb.sql(f"SELECT count(*), sum(r), count(s), min(rs), max(rs), sum(length(rs)), max(ts), "
                          f"sum(i64 % 1000) FROM read_parquet('{p}/*.parquet')").fetchall()

    assert duck(tmp_path / "arrow") == duck(tmp_path / "spark")


def test_a_rename_or_filter_is_not_a_copy(spark: Any, spark_written: Path, tmp_path: Path) -> None:
    spec = {"from": {"query": "SELECT r AS k, s FROM src WHERE r > 100",
                     "inputs": [{"name": "src", "files": f"file://{spark_written}/", "format": "parquet"}]},
            "to": {"files": f"file://{tmp_path}/", "format": "parquet"}}
    run_unload(spark, job_doc(spec), parse_copyjob(spec))
    manifest, table = outputs(tmp_path)
    assert manifest["path"] == {"name": "arrow", "reason": "from.query: a filtered projection of input 'src'"}
    assert table.num_rows == ROWS - 101
    assert pq.read_metadata(tmp_path / manifest["files"][0]["path"]).created_by.startswith("parquet-cpp-arrow")


@pytest.mark.s3
def test_a_failing_copy_task_leaves_nothing_and_the_rerun_succeeds(spark: Any, s3_client: Any, bucket: str,
                                                                   tmp_path: Path) -> None:
    # three files, three tasks on two cores: the third (an id of another type) fails after a first
    # task finished with its copied files as pending uploads, which the run must abort
    ids = pa.array(range(9000), pa.int64())
    table = pa.table({"id": ids, "h": pa.array([f"{i:08x}" * 8 for i in range(9000)])})
    pq.write_table(table.slice(0, 3000), tmp_path / "0-a.parquet")
    pq.write_table(table.slice(3000, 3000), tmp_path / "1-c.parquet")
    drift = table.slice(6000, 3000)
    pq.write_table(drift.set_column(0, "id", drift.column("id").cast(pa.string())), tmp_path / "2-z.parquet")
    spec = {"from": {"files": f"file://{tmp_path}/", "format": "parquet"},
            "to": {"files": f"s3://{bucket}/copy/", "format": "parquet", "options": {"rowGroupSize": 3000}}}
    with spark_conf(spark, **{arrowpath.CONF: arrowpath.ARROW}):
        result = execute(job_doc(spec, run_id="copy-fails"), lambda: spark, Cancellation())
    assert "2-z.parquet" in result.get("error", "") and "id" in result["error"], result
    assert s3_keys(s3_client, bucket) == []
    assert s3_pending(s3_client, bucket) == []

    (tmp_path / "2-z.parquet").unlink()
    with spark_conf(spark, **{arrowpath.CONF: arrowpath.ARROW}):
        ok = execute(job_doc(spec, run_id="copy-fails"), lambda: spark, Cancellation())
    assert ok.get("rows") == 6000, ok
    assert s3_pending(s3_client, bucket) == []
    manifest = json.loads(s3_client.get_object(Bucket=bucket, Key="copy/_lading_manifest.json")["Body"].read())
    assert "copied" in manifest["path"]["reason"]
    keys = sorted(s3_keys(s3_client, bucket))
    assert keys == sorted(["copy/_lading_manifest.json"] + [f"copy/{f['path']}" for f in manifest["files"]])
    body = s3_client.get_object(Bucket=bucket, Key=f"copy/{manifest['files'][0]['path']}")["Body"].read()
    md = pq.read_metadata(pa.BufferReader(body))
    assert md.created_by == chunkcopy.CREATED_BY.decode() and md.num_rows == 3000
