"""``lading run`` on the examples (CSV, Parquet, JSON; with and without partitionBy), on the S3 server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from lading import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
UNLOADS = ["quickstart.yaml", "unload-csv-gzip.yaml", "unload-csv-partitioned.yaml", "unload-parquet.yaml",
           "unload-parquet-partitioned.yaml", "unload-json.yaml", "unload-json-partitioned.yaml"]


@pytest.fixture(scope="module")
def demo_bucket(s3_client: Any) -> str:
    existing = {b["Name"] for b in s3_client.list_buckets().get("Buckets", [])}
    if "lading-demo" not in existing:
        s3_client.create_bucket(Bucket="lading-demo")
    cli.write_sample_orders("s3://lading-demo/raw/orders/", rows=20_000, files=3)
    return "lading-demo"


@pytest.mark.spark
@pytest.mark.s3
@pytest.mark.parametrize("example", UNLOADS)
def test_lading_run_returns_the_query_count(example: str, spark: Any, demo_bucket: str, s3_client: Any,
                                            keep_signals: None, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["run", str(EXAMPLES / example), "--master", "local[2]"])
    out = capsys.readouterr()
    assert code == 0, out.err
    lines = out.out.strip().splitlines()
    assert lines[0].startswith("COPY ")
    rows = int(lines[0].split()[1])
    query = yaml.safe_load((EXAMPLES / example).read_text())["spec"]["from"]["query"]
    assert rows == spark.sql(query).count() > 0  # the run registered `orders` as a view
    manifest_uri = lines[1].removeprefix("manifest: ")
    bucket, key = manifest_uri.removeprefix("s3://").split("/", 1)
    manifest = json.loads(s3_client.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert manifest["totals"]["rows"] == rows
    spec = yaml.safe_load((EXAMPLES / example).read_text())["spec"]
    if spec["to"].get("partitionBy"):
        assert all("=" in f["path"].split("/")[0] for f in manifest["files"])


@pytest.mark.spark
@pytest.mark.s3
def test_lading_run_converts_files_on_the_arrow_path(spark: Any, demo_bucket: str, s3_client: Any,
                                                     keep_signals: None, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["run", str(EXAMPLES / "unload-convert.yaml"), "--master", "local[2]"])
    out = capsys.readouterr()
    assert code == 0, out.err
    lines = out.out.strip().splitlines()
    assert lines[0] == "COPY 20000"
    bucket, key = lines[1].removeprefix("manifest: ").removeprefix("s3://").split("/", 1)
    manifest = json.loads(s3_client.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert manifest["path"] == {"name": "arrow", "reason": "from.files: a format conversion"}
    assert manifest["totals"]["rows"] == 20000 and all(f["path"].endswith(".csv.gz") for f in manifest["files"])


def test_run_reports_a_bad_manifest_with_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   keep_signals: None) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob", "metadata": {"name": "b"},
                                   "spec": {"from": {"query": "SELECT 1"},
                                            "to": {"files": "s3://bkt/x/", "format": "xml"}}}))
    assert cli.main(["run", str(bad), "--master", "local[2]"]) == 1
    assert "to.format" in capsys.readouterr().err


@pytest.mark.parametrize(("metadata", "api", "needle"), [
    ({"name": "b"}, "lading.io/v9", "apiVersion"),  # kubectl and `lading render` refuse it too
    ({"name": "b", "generation": "abc"}, "lading.io/v1alpha1", "metadata.generation"),
])
def test_run_refuses_what_the_api_server_would(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               metadata: dict[str, Any], api: str, needle: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": api, "kind": "CopyJob", "metadata": metadata,
                                   "spec": {"from": {"query": "SELECT 1"}, "to": {"files": "s3://bkt/x/"}}}))
    assert cli.main(["run", str(bad)]) == 1
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_run_needs_a_lading_resource(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "cm.yaml"
    other.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert cli.main(["run", str(other)]) == 1
    assert "CopyJob" in capsys.readouterr().err


def test_job_document_ignores_operator_fields() -> None:
    manifest = yaml.safe_load((EXAMPLES / "unload-scheduled.yaml").read_text())
    doc = cli.job_document(manifest, run_id="r1")
    from lading_spec.copyjob import parse_copyjob

    parsed = parse_copyjob(doc.spec)
    assert doc.name == "orders-nightly" and doc.run_id == "r1" and parsed.target.format == "parquet"


def test_render_is_delegated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["render", str(EXAMPLES / "quickstart.yaml")])
    out = capsys.readouterr().out
    assert code == 0 and "SparkApplication" in out and "lading_jobs/main.py" in out


# --- the same YAML on a laptop and on a cluster; the CLI's own help (issue 14) ---------------

NULL_MANIFEST = """\
apiVersion: lading.io/v1alpha1
kind: CopyJob
metadata: {{name: nulls}}
spec:
  from: {{query: "SELECT id, CASE WHEN id = 1 THEN NULL ELSE 'x' END AS s FROM range(2)"}}
  to:
    files: "{dest}"
    format: csv
    options: {{{null_key}: '\\N', header: y}}
"""


@pytest.mark.spark
def test_same_yaml_on_a_laptop_and_on_a_cluster(spark: Any, tmp_path: Path, keep_signals: None,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """One file, both ways: kubectl's YAML reading (tools/crd-check) and ``lading run`` / ``lading render``."""
    from support.kubectl_yaml import crd_check_values

    dest = f"file://{tmp_path}/out/"
    quoted = tmp_path / "quoted.yaml"
    quoted.write_text(NULL_MANIFEST.format(dest=dest, null_key="'null'"))
    # kubectl: options are {"null": "\\N", "header": true}
    spec_yaml = "".join("  " + line + "\n" for line in quoted.read_text().split("spec:\n", 1)[1].splitlines())
    kubectl, output = crd_check_values(spec_yaml, tmp_path)
    assert kubectl["to"]["options"] == {"null": "\\N", "header": True}, output
    # lading render: the same options in the job document (checked against a policy that allows
    # this file:// destination: the default allows s3:// only, issue 41)
    allowing = tmp_path / "policy.yaml"
    allowing.write_text(f"allowedPrefixes:\n  default: ['file://{tmp_path}/']\n")
    assert cli.main(["render", str(quoted), "--policy", str(allowing)]) == 0, capsys.readouterr().err
    app = yaml.safe_load(capsys.readouterr().out)
    assert json.loads(app["spec"]["arguments"][1])["spec"]["to"]["options"] == kubectl["to"]["options"]
    # lading run: the CSV has the header and \N for the null
    assert cli.main(["run", str(quoted), "--master", "local[2]", "--no-progress"]) == 0, capsys.readouterr().err
    written = "".join(p.read_text() for p in (tmp_path / "out").rglob("*.csv"))
    assert written.splitlines()[0] == "id,s" and "1,\\N" in written.splitlines()

    unquoted = tmp_path / "unquoted.yaml"
    unquoted.write_text(NULL_MANIFEST.format(dest=dest, null_key="null"))
    spec_yaml = "".join("  " + line + "\n" for line in unquoted.read_text().split("spec:\n", 1)[1].splitlines())
    kubectl, output = crd_check_values(spec_yaml, tmp_path)
    assert "unsupported map key of type" in output  # kubectl refuses an unquoted null key ...
    capsys.readouterr()
    assert cli.main(["run", str(unquoted), "--master", "local[2]"]) == 1  # ... and so does lading, saying how
    assert "a key is null" in capsys.readouterr().err
    assert cli.main(["render", str(unquoted), "--policy", str(allowing)]) == 2
    assert "'null': '\\N'" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import tomllib

    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    version = tomllib.loads((EXAMPLES.parent / "pyproject.toml").read_text())["project"]["version"]
    assert capsys.readouterr().out.strip() == f"lading {version}"


def test_run_help_says_what_it_reads_needs_runs_and_returns(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = capsys.readouterr().out
    for needle in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                   "AWS_ENDPOINT_URL_S3", "LADING_SPARK_MASTER", "Java 17", "CopyJob: unload"):
        assert needle in text, needle
    codes = re.findall(r"^  (\d+) ", text, re.M)
    assert codes == ["0", "1", "2", "143"]
    from lading_jobs.result import EXIT_CANCELLED, EXIT_ERROR, EXIT_OK
    assert [EXIT_OK, EXIT_ERROR, EXIT_CANCELLED] == [0, 1, 143]


@pytest.mark.parametrize("command", [["render", "--help"], ["sample-data", "--help"], ["--help"]])
def test_help_is_plain_text(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(command)
    text = capsys.readouterr().out
    assert "``" not in text and ":func:" not in text and ":mod:" not in text
    if command[0] == "sample-data":
        assert "--rows ROWS    how many orders" in text and "--files FILES  how many Parquet files" in text
        assert "--seed" in text


@pytest.mark.spark
@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_whole_process_group_cancels_and_leaves_nothing(
        sig: int, s3_endpoint: str, s3_client: Any, bucket: str, tmp_path: Path) -> None:
    # A terminal's Ctrl-C (SIGINT), or `kill %1`/`timeout` (SIGTERM), reaches the JVM and Spark's
    # workers too. PySpark took SIGINT for its own handler (KeyboardInterrupt anywhere, 120 s,
    # staging files left), and a JVM killed with the group made the driver's abort raise before it
    # ran (pending multipart uploads left).
    manifest = tmp_path / "big.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "lading.io/v1alpha1", "kind": "CopyJob", "metadata": {"name": "big"},
        "spec": {"from": {"query": "SELECT id, repeat(CAST(id AS STRING), 60) AS pad FROM range(0, 20000000, 1, 2)"},
                 "to": {"files": f"s3://{bucket}/big/", "format": "csv", "bufferSize": "5MB"}}}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(REPO / p) for p in (".", "spark_apps", "operator")))
    proc = subprocess.Popen([sys.executable, "-m", "lading", "run", str(manifest), "--master", "local[2]",
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if s3_client.list_multipart_uploads(Bucket=bucket, Prefix="big/").get("Uploads"):
            break
        time.sleep(0.2)  # polling the S3 server for a condition, not synchronising on time
    assert proc.poll() is None, proc.communicate(timeout=30)
    os.killpg(proc.pid, sig)
    signalled = time.monotonic()
    out, err = proc.communicate(timeout=120)
    assert time.monotonic() - signalled < 30, err[-3000:]
    assert proc.returncode == 143, (out, err[-3000:])
    assert "KeyboardInterrupt" not in err, err[-3000:]  # PySpark's SIGINT handler did not take over
    assert "cancelled" in err
    assert s3_client.list_objects_v2(Bucket=bucket, Prefix="big/").get("KeyCount", 0) == 0
    assert not s3_client.list_multipart_uploads(Bucket=bucket, Prefix="big/").get("Uploads")


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["--files", "0"], 2, "--files: must be at least 1"),
    (["--rows", "-5"], 2, "--rows: must be at least 0"),
    ([], 1, "use s3://bucket/prefix/ or file:///absolute/path/"),
])
def test_sample_data_refuses_bad_arguments_without_a_traceback(args: list[str], code: int, needle: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    try:
        assert cli.main(["sample-data", "/tmp/not-a-uri/", *args]) == code
    except SystemExit as e:  # argparse's usage errors
        assert e.code == code
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


@pytest.mark.parametrize(("args", "name", "needle"), [
    (["--run-id", "../x"], "b", "--run-id"),
    ([], "b/../../c", "metadata.name"),
])
def test_run_refuses_a_run_id_that_could_reach_another_path(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             args: list[str], name: str, needle: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob", "metadata": {"name": name},
                                   "spec": {"from": {"query": "SELECT 1"}, "to": {"files": "s3://bkt/{run_id}/"}}}))
    assert cli.main(["run", str(bad), *args]) == 1
    err = capsys.readouterr().err
    assert needle in err and "cannot name a run" in err and "Traceback" not in err


CUT_SHORT = """
import os, signal, sys, time
from lading import cli
from lading_jobs import result
mode = sys.argv[1]
report = None if mode == "operator" else (lambda out: cli._report_cut_short(out, mode == "json"))
cancellation = result.Cancellation(grace_seconds=0.2, report=report)
cancellation.add_hook(lambda: time.sleep(60))  # a clean-up that outlives the grace period
cancellation.install()
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(60)
print("not reached")
"""


@pytest.mark.parametrize("mode", ["text", "json", "operator"])
def test_a_clean_up_cut_short_by_the_grace_period_is_reported_in_the_cli_words(mode: str) -> None:
    # The watchdog exits 143 when clean-up outlives the grace period. In a pod it writes the
    # operator's LADING_RESULT line; `lading run` says it as its other outcomes instead.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(REPO / p) for p in (".", "spark_apps", "operator")))
    proc = subprocess.run([sys.executable, "-c", CUT_SHORT, mode], capture_output=True, text=True, env=env,
                          timeout=50)
    assert proc.returncode == 143, proc.stderr[-2000:]
    assert "not reached" not in proc.stdout
    if mode == "operator":
        assert proc.stdout.startswith("LADING_RESULT ") and '"cancelled":true' in proc.stdout.replace(" ", "")
        return
    assert "LADING_RESULT" not in proc.stdout + proc.stderr
    assert "clean-up did not finish in time, pending uploads may remain" in proc.stderr
    assert "AbortIncompleteMultipartUpload" in proc.stderr
    if mode == "json":
        out = json.loads(proc.stdout)
        assert out["cancelled"] is True and "did not finish" in out["error"]
    else:
        assert proc.stdout == ""
