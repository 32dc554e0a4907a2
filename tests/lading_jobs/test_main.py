"""The entry point as the operator runs it: a process, a job document, one result, an exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.unload import job_doc

from lading_jobs.main import execute
from lading_jobs.result import Cancellation, describe_error, exit_code
from lading_spec.job import parse_result

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "spark_apps" / "lading_jobs" / "main.py"


def _run(args: list[str], tmp_path: Path, **kw: Any) -> subprocess.Popen[str]:
    env = dict(os.environ, LADING_TERMINATION_LOG=str(tmp_path / "termination-log"), PYTHONPATH="")
    return subprocess.Popen([sys.executable, str(MAIN), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=tmp_path, **kw)


def test_a_bad_spec_is_an_error_result_naming_the_field(tmp_path: Path) -> None:
    doc = job_doc({"from": {"query": "SELECT 1"}, "to": {"files": "s3://bkt/x/", "maxFileSize": "10 mb"}})
    job_file = tmp_path / "job.json"
    job_file.write_text(doc.to_json())
    proc = _run(["--job-file", str(job_file)], tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert out.strip().splitlines()[-1].startswith("LADING_RESULT ")
    result = parse_result(out)
    assert result is not None and "to.maxFileSize" in result["error"] and "MB" in result["error"]
    assert result["runId"] == doc.run_id
    assert json.loads((tmp_path / "termination-log").read_text())["error"] == result["error"]


def test_exit_codes_and_error_descriptions() -> None:
    assert exit_code({"rows": 3}) == 0
    assert exit_code({"error": "x"}) == 1
    assert exit_code({"cancelled": True}) != 0
    assert describe_error(RuntimeError("org.apache.spark.SparkException: Job aborted due to stage failure: boom\n at x")) \
        == "boom"


@pytest.mark.parametrize("reason", ["TooManyErrors", "DataLoss", "SourceConflict", "InvalidSpec", "Superseded"])
def test_a_stream_stopped_on_purpose_exits_0_so_restart_on_failure_leaves_it_stopped(reason: str) -> None:
    # restartPolicy OnFailure (the StreamCopy's SparkApplication) restarts a driver that exits non-zero;
    # a stream that stopped on too many bad rows must stay stopped until its spec changes.
    assert exit_code({"error": "batch t/0@0..9: 3 rejected rows exceed maxErrorNumber 0", "reason": reason}) == 0
    assert exit_code({"error": "Kafka unreachable", "reason": None}) == 1  # a crash: restarted
    assert exit_code({"error": "x", "reason": "Whatever"}) == 1
    assert exit_code({"cancelled": True, "rowsTotal": 5}) == 143  # evicted: restarted


def test_a_kind_whose_engine_is_not_shipped_reports_not_implemented(spark: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from lading_jobs import engine

    monkeypatch.setitem(engine.ENGINES, "Compaction", "lading_jobs.no_such_engine")  # an image without it
    doc = job_doc({"table": "s3://bkt/t/"})
    doc = type(doc)(**{**doc.__dict__, "kind": "Compaction"})
    out = execute(doc, lambda: spark, Cancellation())
    assert out["error"] == "Compaction is not implemented in this version of the lading image"


def test_a_streamcopy_spec_is_checked_before_spark_starts() -> None:
    doc = job_doc({"table": "s3://bkt/t/"})  # a CopyJob's spec under kind StreamCopy
    doc = type(doc)(**{**doc.__dict__, "kind": "StreamCopy"})

    def no_spark() -> Any:
        raise AssertionError("Spark started for an invalid spec")

    out = execute(doc, no_spark, Cancellation())
    assert "unknown field" in out["error"] and "source, target" in out["error"], out



def test_an_invalid_streamcopy_spec_is_a_deliberate_stop_that_is_not_rerun() -> None:
    """A driver under restartPolicy OnFailure that exits 1 on a bad spec would be rerun for
    nothing: it stops with reason InvalidSpec and exits 0, as the operator's Failed expects."""
    spec = {"source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["orders"],
                                 "startingOffsets": '{"orders": {"0": -5}}'}},
            "target": {"table": "s3://bkt/t/"}}
    doc = job_doc({"table": "s3://bkt/t/"})
    doc = type(doc)(**{**doc.__dict__, "kind": "StreamCopy", "spec": spec})
    out = execute(doc, lambda: None, Cancellation())
    assert out["reason"] == "InvalidSpec" and "offset -5" in out["error"], out
    assert exit_code(out) == 0
    copyjob = execute(job_doc({"table": "s3://bkt/t/"}), lambda: None, Cancellation())
    assert "reason" not in copyjob and exit_code(copyjob) == 1  # a one-shot job's error stays an error


@pytest.mark.spark
@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.parametrize("path", ["spark", "arrow", "copy"])
def test_sigterm_mid_run_cancels_and_leaves_nothing(spark: Any, s3_endpoint: str, bucket: str,
                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    path: str) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    dest = f"s3://{bucket}/cancel/"
    source: dict[str, Any] = {"query": "SELECT id, repeat(CAST(id AS STRING), 60) AS pad FROM range(0, 20000000, 1, 2)"}
    target: dict[str, Any] = {"format": "csv"}
    if path == "copy":  # Parquet to Parquet, column chunks copied: ~640 MB of Parquet
        target = {"format": "parquet", "options": {"rowGroupSize": 30_000}}
    if path in ("arrow", "copy"):  # a format conversion of 80 links to one ~8 MB Parquet file: ~700 MB of CSV
        (tmp_path / "in").mkdir()
        pq.write_table(pa.table({"id": pa.array(range(30_000), pa.int64()),
                                 "h": pa.array([os.urandom(128).hex() for _ in range(30_000)])}),
                       tmp_path / "in" / "000.parquet")
        for i in range(1, 80):
            os.link(tmp_path / "in" / "000.parquet", tmp_path / "in" / f"{i:03d}.parquet")
        source = {"files": f"file://{tmp_path}/in/", "format": "parquet"}
    forced = "arrow" if path == "copy" else path
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--conf spark.lading.unload.path={forced} pyspark-shell")
    doc = job_doc({"from": source, "to": {"files": dest, **target, "bufferSize": "5MB"}})
    proc = _run(["--master", "local[2]", "--job", doc.to_json()], tmp_path)
    deadline = time.monotonic() + 240
    started = False
    while time.monotonic() < deadline and proc.poll() is None:
        if s3.list_multipart_uploads(Bucket=bucket, Prefix="cancel/").get("Uploads"):
            started = True
            break
        time.sleep(0.2)  # polling the S3 server for a condition, not synchronising on time
    assert started, proc.communicate(timeout=30)
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - signalled < 30, "cancellation took longer than Kubernetes' grace period"
    assert proc.returncode != 0
    result = parse_result(out)
    assert result is not None and result.get("cancelled") is True, (out[-2000:], err[-3000:])
    assert json.loads((tmp_path / "termination-log").read_text())["cancelled"] is True
    assert s3.list_objects_v2(Bucket=bucket, Prefix="cancel/").get("KeyCount", 0) == 0
    assert not s3.list_multipart_uploads(Bucket=bucket, Prefix="cancel/").get("Uploads")
    # the rerun (smaller, in this process's Spark) succeeds without manual clean-up
    small = job_doc({"from": {"query": "SELECT id FROM range(0, 1000, 1, 2)"},
                     "to": {"files": dest, "format": "csv"}})
    assert execute(small, lambda: spark, Cancellation())["rows"] == 1000
