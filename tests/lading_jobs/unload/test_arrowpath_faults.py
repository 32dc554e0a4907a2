"""The Arrow-only unload path under the writer's limits and failures, against the moto S3 server.

The path shares the task writer and the publish protocol with the Spark SQL path
(tests/lading_jobs/unload/test_unload.py, test_publish*.py); these cases prove the
path itself keeps them: ``maxFileSize`` is a ceiling for the files its tasks roll,
a task failing after others left pending uploads leaves nothing behind and the
rerun succeeds, and a successful run sweeps its lost attempts' pending uploads. Cancellation by SIGTERM mid-run: tests/lading_jobs/test_main.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.unload import job_doc, s3_keys, s3_pending, spark_conf

from lading_jobs.main import execute
from lading_jobs.result import Cancellation
from lading_jobs.storage import S3Storage
from lading_jobs.unload import arrowpath, naming

pytestmark = [pytest.mark.spark, pytest.mark.s3]
MB = 1024 * 1024


def random_rows(first: int, rows: int) -> pa.Table:
    """``rows`` rows of an id and 256 characters of random hex (incompressible: ~270 CSV bytes a row)."""
    hexes = os.urandom(rows * 128).hex()
    return pa.table({"id": pa.array(range(first, first + rows), pa.int64()),
                     "h": pa.array([hexes[i * 256:(i + 1) * 256] for i in range(rows)])})


def forced_arrow(spark: Any) -> Any:
    return spark_conf(spark, **{arrowpath.CONF: arrowpath.ARROW})


def test_max_file_size_is_a_ceiling_on_the_arrow_path(spark: Any, s3_client: Any, bucket: str,
                                                       tmp_path: Path) -> None:
    pq.write_table(random_rows(0, 50_000), tmp_path / "in.parquet", row_group_size=10_000)  # ~13 MB
    limit = 6 * MB
    spec = {"from": {"files": f"file://{tmp_path}/", "format": "parquet"},
            "to": {"files": f"s3://{bucket}/big/", "format": "csv", "maxFileSize": "6MB"}}
    with forced_arrow(spark):
        result = execute(job_doc(spec), lambda: spark, Cancellation())
    assert result.get("rows") == 50_000, result
    manifest = json.loads(s3_client.get_object(Bucket=bucket, Key="big/_lading_manifest.json")["Body"].read())
    assert manifest["path"]["name"] == "arrow"
    by_task: dict[int, list[dict[str, Any]]] = {}
    for f in manifest["files"]:
        size = s3_client.head_object(Bucket=bucket, Key=f"big/{f['path']}")["ContentLength"]
        assert size == f["bytes"] <= limit
        by_task.setdefault(f["task"], []).append(f)
    assert sum(len(files) for files in by_task.values()) >= 3  # every task rolled at least once
    for files in by_task.values():
        assert all(f["bytes"] >= 0.9 * limit for f in files[:-1]), [f["bytes"] for f in files]
    assert s3_pending(s3_client, bucket) == []


def test_a_failing_arrow_task_leaves_nothing_and_the_rerun_succeeds(spark: Any, s3_client: Any, bucket: str,
                                                                    tmp_path: Path) -> None:
    # Three small files make three tasks on two cores: the third (a schema drift) fails after a
    # first task finished with its files as pending uploads, which the run must abort.
    pq.write_table(random_rows(0, 3000), tmp_path / "0-a.parquet")
    pq.write_table(random_rows(3000, 3000), tmp_path / "1-c.parquet")
    drift = random_rows(6000, 10)
    pq.write_table(drift.set_column(0, "id", drift.column("id").cast(pa.string())), tmp_path / "2-z.parquet")
    dest = f"s3://{bucket}/fail/"
    spec = {"from": {"files": f"file://{tmp_path}/", "format": "parquet"}, "to": {"files": dest, "format": "csv"}}
    with forced_arrow(spark):
        result = execute(job_doc(spec, run_id="run-fails"), lambda: spark, Cancellation())
    assert "2-z.parquet" in result.get("error", "") and "id" in result["error"], result
    assert "rows" not in result
    assert s3_keys(s3_client, bucket) == []
    assert s3_pending(s3_client, bucket) == []

    (tmp_path / "2-z.parquet").unlink()
    with forced_arrow(spark):
        ok = execute(job_doc(spec, run_id="run-fails"), lambda: spark, Cancellation())
    assert ok.get("rows") == 6000, ok
    assert s3_pending(s3_client, bucket) == []
    manifest = json.loads(s3_client.get_object(Bucket=bucket, Key="fail/_lading_manifest.json")["Body"].read())
    assert manifest["path"]["name"] == "arrow"
    assert sorted(s3_keys(s3_client, bucket)) == sorted(["fail/_lading_manifest.json"]
                                                        + [f"fail/{f['path']}" for f in manifest["files"]])


@pytest.mark.parametrize("path", [arrowpath.ARROW, arrowpath.SPARK])
def test_a_compressed_input_that_does_not_decompress_fails_the_run_naming_it(spark: Any, s3_client: Any, bucket: str,
                                                                            tmp_path: Path, path: str) -> None:
    # A truncated gzip file among good ones: the run fails on either path with an error naming the
    # file and saying what is wrong with it, and publishes nothing. Before, the error was Arrow's
    # "Truncated compressed stream", with no file named.
    import gzip

    for k in range(2):
        (tmp_path / f"part-{k}.csv.gz").write_bytes(gzip.compress(b"id,h\n" + b"%d,x\n" % k))
    whole = gzip.compress(b"id,h\n" + b"".join(b"%d,y\n" % i for i in range(5000)))
    (tmp_path / "part-2.csv.gz").write_bytes(whole[:-9])
    spec = {"from": {"files": f"file://{tmp_path}/", "format": "csv", "options": {"header": True}},
            "to": {"files": f"s3://{bucket}/bad/", "format": "parquet"}}
    with spark_conf(spark, **{arrowpath.CONF: path}):
        result = execute(job_doc(spec), lambda: spark, Cancellation())
    assert "rows" not in result, result
    assert f"reading file://{tmp_path}/part-2.csv.gz: not valid gzip data (corrupt or truncated)" in result["error"]
    assert s3_keys(s3_client, bucket) == []
    assert s3_pending(s3_client, bucket) == []


def test_after_success_the_arrow_path_sweeps_pending_uploads_of_its_run(spark: Any, s3_client: Any, bucket: str,
                                                                          tmp_path: Path) -> None:
    pq.write_table(random_rows(0, 1000), tmp_path / "in.parquet")
    dest, prefix = f"s3://{bucket}/s/", "s/"
    storage = S3Storage()
    lost = storage.begin_upload(dest + naming.file_name(7, 0, "csv", naming.run_token("run-1")))  # a lost attempt's
    other = storage.begin_upload(dest + naming.file_name(7, 0, "csv", naming.run_token("run-2")))  # another run's
    storage.upload_part(lost, b"1,x\n")
    spec = {"from": {"files": f"file://{tmp_path}/", "format": "parquet"},
            "to": {"files": dest, "format": "csv", "ifExists": "append"}}
    with forced_arrow(spark):
        assert execute(job_doc(spec, run_id="run-1"), lambda: spark, Cancellation()).get("rows") == 1000
    assert s3_pending(s3_client, bucket) == [prefix + naming.file_name(7, 0, "csv", naming.run_token("run-2"))]
    storage.abort_upload(other)


@pytest.mark.slow  # three runs, one a Spark sort (range sampling and a shuffle): ~20 s idle, 60 s under load
def test_rows_out_of_order_inside_a_row_group_fall_back_to_spark(spark: Any, s3_client: Any, bucket: str,
                                                                  tmp_path: Path) -> None:
    # The footers show the three files in ORDER BY order, but two rows inside the last file's row
    # group are swapped: its task finds out while the other two tasks finish with pending uploads.
    # Those are aborted, Spark sorts the rows instead, and nothing else is left behind.
    def rows(keys: list[int]) -> pa.Table:
        return pa.table({"id": pa.array(keys, pa.int64()), "h": [f"h{k}" for k in keys]})

    pq.write_table(rows(list(range(0, 100))), tmp_path / "0.parquet")
    pq.write_table(rows(list(range(100, 200))), tmp_path / "1.parquet")
    keys = list(range(200, 300))
    keys[50], keys[51] = keys[51], keys[50]
    pq.write_table(rows(keys), tmp_path / "2.parquet")

    def spec(prefix: str) -> dict[str, Any]:
        return {"from": {"query": "SELECT id, h FROM src ORDER BY id",
                         "inputs": [{"name": "src", "files": f"file://{tmp_path}/", "format": "parquet"}]},
                "to": {"files": f"s3://{bucket}/{prefix}/", "format": "csv"}}

    result = execute(job_doc(spec("order")), lambda: spark, Cancellation())
    assert result.get("rows") == 300, result
    manifest = json.loads(s3_client.get_object(Bucket=bucket, Key="order/_lading_manifest.json")["Body"].read())
    assert manifest["path"] == {"name": "spark", "reason": "from.query: a projection of input 'src', in order, until "
                                "the rows proved unsorted: the rows are not in order (within a row group)"}
    assert s3_pending(s3_client, bucket) == []
    assert sorted(s3_keys(s3_client, bucket)) == sorted(["order/_lading_manifest.json"]
                                                        + [f"order/{f['path']}" for f in manifest["files"]])
    ids = [int(line.split(",")[0]) for f in manifest["files"] for line in
           s3_client.get_object(Bucket=bucket, Key=f"order/{f['path']}")["Body"].read().decode().splitlines()]
    assert ids == list(range(300))

    with forced_arrow(spark):  # the Arrow path was demanded: an error naming the setting, nothing written
        failed = execute(job_doc(spec("forced")), lambda: spark, Cancellation())
    assert arrowpath.CONF in failed.get("error", "") and "not sorted" in failed["error"], failed
    assert s3_keys(s3_client, bucket, "forced/") == [] and s3_pending(s3_client, bucket) == []


@pytest.mark.parametrize("path", [arrowpath.ARROW, arrowpath.SPARK])
def test_escaped_partition_directories_are_where_the_manifest_says_on_file_storage(spark: Any, tmp_path: Path,
                                                                                   path: str) -> None:
    # Hive escapes '/' and '%' in a partition value (k=a%2Fb, k=50%25). On file:// those names
    # are directories as written, as Spark makes them; before, the URI was percent-decoded and
    # the files of k=a/b landed in k=a/b/, a directory the manifest does not name.
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text('k,v\na/b,1\n50%,2\n"",3\n,4\na/b,5\n')
    dest = tmp_path / "out"
    spec = {"from": {"files": f"file://{tmp_path}/in/", "format": "csv", "options": {"header": True}},
            "to": {"files": f"file://{dest}/", "format": "csv", "partitionBy": ["k"]}}
    with spark_conf(spark, **{arrowpath.CONF: path}):
        result = execute(job_doc(spec), lambda: spark, Cancellation())
    assert result.get("rows") == 5, result
    manifest = json.loads((dest / "_lading_manifest.json").read_text())
    assert manifest["path"]["name"] == path
    named = {f["path"] for f in manifest["files"]}
    assert {p.split("/")[0] for p in named} == {"k=a%2Fb", "k=50%25", "k=__HIVE_DEFAULT_PARTITION__"}  # "" too, as Hive
    on_disk = {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() and p.name != "_lading_manifest.json"}
    assert on_disk == named
    assert sorted((dest / "k=a%2Fb").iterdir())[0].read_text().splitlines() == ["1", "5"]


@pytest.mark.parametrize("path", [arrowpath.ARROW, arrowpath.SPARK])
def test_replace_on_file_storage_keeps_what_it_published(spark: Any, tmp_path: Path, path: str) -> None:
    # On file://, listings came back percent-quoted: replace's sweep of the old files did not know
    # its own new ones (k=a%2Fb, a destination holding '=' or '+') and deleted them, and
    # ifExists: error saw its own intent file as someone else's. Run twice: the second replaces.
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("k,v\na/b,1\nc,2\n")
    dest = tmp_path / "day=2024-01-01+x"
    spec = {"from": {"files": f"file://{tmp_path}/in/", "format": "csv", "options": {"header": True}},
            "to": {"files": f"file://{dest}/", "format": "csv", "partitionBy": ["k"], "ifExists": "error"}}
    with spark_conf(spark, **{arrowpath.CONF: path}):
        assert execute(job_doc(spec), lambda: spark, Cancellation()).get("rows") == 2
        spec["to"]["ifExists"] = "replace"
        (tmp_path / "in" / "a.csv").write_text("k,v\na/b,3\nd,4\n")
        result = execute(job_doc(spec), lambda: spark, Cancellation())
    assert result.get("rows") == 2, result
    manifest = json.loads((dest / "_lading_manifest.json").read_text())
    named = {f["path"] for f in manifest["files"]}
    on_disk = {str(p.relative_to(dest)) for p in dest.rglob("*")
               if p.is_file() and p.name != "_lading_manifest.json" and ".lading-staging" not in p.parts}
    assert on_disk == named and {p.split("/")[0] for p in named} == {"k=a%2Fb", "k=d"}
    assert [line for p in sorted(named) for line in (dest / p).read_text().splitlines()] == ["3", "4"]


@pytest.mark.parametrize("partition", [False, True])
def test_column_names_spark_would_parse_copy_identically_on_both_paths(spark: Any, tmp_path: Path,
                                                                         partition: bool) -> None:
    # 'a.b' is one column, not a field of a struct; 'ID' and 'id' are two. The Arrow path copied
    # them; the Spark path failed ([UNRESOLVED_COLUMN] in mapInArrow, [AMBIGUOUS_REFERENCE]).
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("a.b,x y,ID,id\n1,p,q,r\n2,s,t,u\n1,v,w,x\n")
    outputs = {}
    for path in (arrowpath.ARROW, arrowpath.SPARK):
        dest = tmp_path / path
        spec = {"from": {"files": f"file://{tmp_path}/in/", "format": "csv", "options": {"header": True}},
                "to": {"files": f"file://{dest}/", "format": "csv", "options": {"header": True},
                       **({"partitionBy": ["a.b"]} if partition else {})}}
        with spark_conf(spark, **{arrowpath.CONF: path}):
            result = execute(job_doc(spec), lambda: spark, Cancellation())
        assert result.get("rows") == 3, (path, result)
        manifest = json.loads((dest / "_lading_manifest.json").read_text())
        assert manifest["path"]["name"] == path
        outputs[path] = sorted((f["path"], (dest / f["path"]).read_text()) for f in manifest["files"])
    assert outputs[arrowpath.ARROW] == outputs[arrowpath.SPARK]
    if partition:
        assert {p.split("/")[0] for p, _ in outputs[arrowpath.SPARK]} == {"a.b=1", "a.b=2"}


@pytest.mark.parametrize("path", [arrowpath.ARROW, arrowpath.SPARK, "auto"])
def test_a_missing_partition_column_is_named_on_every_path(spark: Any, tmp_path: Path, path: str) -> None:
    # With the Arrow path forced, the error said "this copy needs Spark SQL" instead.
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("k,v\n1,2\n")
    spec = {"from": {"files": f"file://{tmp_path}/in/", "format": "csv", "options": {"header": True}},
            "to": {"files": f"file://{tmp_path}/out/", "format": "csv", "partitionBy": ["nope"]}}
    with spark_conf(spark, **{arrowpath.CONF: path}):
        result = execute(job_doc(spec), lambda: spark, Cancellation())
    assert result.get("error", "").startswith("to.partitionBy: column 'nope' is not in the output; columns: k, v")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.csv"))
