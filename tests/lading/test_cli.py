"""``lading run`` on the examples (CSV, Parquet, JSON; with and without partitionBy), on the S3 server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lading import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
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


def test_run_reports_a_bad_manifest_with_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   keep_signals: None) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob", "metadata": {"name": "b"},
                                   "spec": {"from": {"query": "SELECT 1"},
                                            "to": {"files": "s3://bkt/x/", "format": "xml"}}}))
    assert cli.main(["run", str(bad), "--master", "local[2]"]) == 1
    assert "to.format" in capsys.readouterr().err


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
