"""``lading render``: the operator's rendering, from a file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from harness.admission import crd_check_binary
from harness.fixtures import UPSTREAM_CRDS
from lading_operator import render_cli

MANIFEST = """\
apiVersion: lading.io/v1alpha1
kind: CopyJob
metadata: {name: nightly, namespace: data}
spec:
  schedule: "0 2 * * *"
  from: {query: "SELECT 1 AS x"}
  to: {files: "s3://exports/nightly/{run_time:%Y%m%d}/", format: parquet}
  connection: {secretRef: {name: s3}}
---
apiVersion: lading.io/v1alpha1
kind: CopyJob
metadata: {name: once}
spec:
  from: {table: "s3://lake/orders"}
  to: {files: "s3://exports/orders/"}
"""


def test_renders_every_copyjob(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(MANIFEST)
    assert render_cli.main([str(path), "--run-time", "2026-01-01T00:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "&id" not in out and "*id" not in out  # no YAML anchors: diffable as plain YAML
    apps = list(yaml.safe_load_all(out))
    assert len(apps) == 2 and apps[0]["metadata"]["name"].startswith("nightly-copyjob-20260101020000u")
    assert apps[0]["metadata"]["namespace"] == "data" and apps[1]["metadata"]["namespace"] == "default"
    assert {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "AWS_ACCESS_KEY_ID",
                                                                      "optional": True}}} in apps[0]["spec"]["driver"]["env"]
    assert '"runTime":"2026-01-01T02:00:00.000000Z"' in apps[0]["spec"]["arguments"][1]


def test_invalid_spec_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(MANIFEST.replace("format: parquet", "format: xml"))
    assert render_cli.main([str(path)]) == 2
    assert "spec.to.format" in capsys.readouterr().err


def test_file_without_copyjobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "none.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert render_cli.main([str(path)]) == 1


def test_a_streamcopy_renders_its_long_running_application(capsys: pytest.CaptureFixture[str]) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    assert render_cli.main([str(examples / "streamcopy-kafka.yaml"), "-n", "data"]) == 0
    (app,) = list(yaml.safe_load_all(capsys.readouterr().out))
    assert app["metadata"]["name"].startswith("orders-from-kafka-streamcopy-")
    assert app["spec"]["restartPolicy"]["type"] == "OnFailure"
    assert app["spec"]["driver"]["ports"] == [{"name": "progress", "containerPort": 8090, "protocol": "TCP"}]
    assert app["spec"]["executor"]["secrets"][0]["name"] == "kafka-credentials"


def test_a_kind_without_its_engine_renders_nothing_without_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import dataclasses

    from lading_operator import kinds

    monkeypatch.setitem(kinds.BY_NAME, "StreamCopy", dataclasses.replace(kinds.STREAMCOPY, engine_available=False))
    path = tmp_path / "stream.yaml"
    path.write_text("apiVersion: lading.io/v1alpha1\nkind: StreamCopy\nmetadata: {name: s}\nspec: {}\n")
    assert render_cli.main([str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "later release" in captured.err


def test_policy_is_checked_as_the_operator_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(MANIFEST.replace("  connection: {secretRef: {name: s3}}\n",
                                     "  connection: {secretRef: {name: s3}}\n  spark: {image: 'evil/miner:1'}\n"))
    assert render_cli.main([str(path)]) == 2  # no policy file: the default, the operator's image only
    assert "spec.spark.image: 'evil/miner:1' is not an allowed image" in capsys.readouterr().err
    policy = tmp_path / "policy.yaml"
    policy.write_text("allowedPrefixes: {default: ['s3://']}\nimages: {namespaces: {data: ['registry.corp/']}}\n")
    assert render_cli.main([str(path), "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert "document 1: spec.spark.image: 'evil/miner:1' is not an allowed image in namespace 'data'" in err
    assert "spec.spec." not in err
    policy.write_text("images: {default: 'x'}\n")
    assert render_cli.main([str(path), "--policy", str(policy)]) == 2
    assert "--policy: LADING_POLICY_FILE=" in capsys.readouterr().err


def test_policy_allows_the_installations_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """LADING_SPARK_IMAGE (the chart's image.*) is the image every rendering uses: naming it is allowed."""
    monkeypatch.setenv("LADING_SPARK_IMAGE", "registry.example.com/data/lading:0.1.0")
    path = tmp_path / "job.yaml"
    path.write_text(MANIFEST.replace(
        "  connection: {secretRef: {name: s3}}\n",
        "  connection: {secretRef: {name: s3}}\n  spark: {image: 'registry.example.com/data/lading:0.1.0'}\n"))
    policy = tmp_path / "policy.yaml"
    policy.write_text("allowedPrefixes: {default: ['s3://']}\nimages: {namespaces: {data: ['registry.corp/']}}\n")
    assert render_cli.main([str(path), "--policy", str(policy)]) == 0, capsys.readouterr().err
    assert "image: registry.example.com/data/lading:0.1.0" in capsys.readouterr().out


def test_spark_properties_outside_the_safe_list_need_a_policy(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(MANIFEST.replace(
        "  connection: {secretRef: {name: s3}}\n",
        "  connection: {secretRef: {name: s3}}\n  spark: {sparkConf: {spark.kubernetes.node.selector.gpu: 'y'}}\n"))
    assert render_cli.main([str(path)]) == 2
    assert "spec.spark.sparkConf.spark.kubernetes.node.selector.gpu: not an allowed Spark property" in \
        capsys.readouterr().err
    policy = tmp_path / "policy.yaml"
    policy.write_text("allowedPrefixes: {default: ['s3://']}\n"
                      "sparkConf: {namespaces: {data: ['spark.kubernetes.node.selector.']}}\n")
    assert render_cli.main([str(path), "--policy", str(policy)]) == 0


def test_renders_the_compaction_example(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "compaction.yaml"
    assert render_cli.main([str(example), "-n", "data", "--run-time", "2026-01-01T00:00:00Z"]) == 0
    captured = capsys.readouterr()
    (app,) = list(yaml.safe_load_all(captured.out))
    name = yaml.safe_load(example.read_text())["metadata"]["name"]
    assert app["metadata"]["name"].startswith(f"{name}-compaction-20260101020000u")  # the next nightly slot
    assert app["metadata"]["labels"]["lading.io/kind"] == "Compaction"
    assert '"kind":"Compaction"' in app["spec"]["arguments"][1] and '"schedule"' not in app["spec"]["arguments"][1]


@pytest.mark.parametrize("text", ["07460811", "00499814", "1_000", "0o17", "0x1F", "+5", "-.5", ".inf", "1e3", "12"])
def test_number_like_strings_are_quoted(text: str) -> None:
    # PyYAML (YAML 1.1) leaves e.g. 07460811 plain; Go's YAML reads it as a number, and
    # Kubernetes refuses a label value that is not a string.
    out = yaml.dump({"v": text}, Dumper=render_cli._PlainDumper)
    assert out == f"v: '{text}'\n"
    assert yaml.safe_load(out) == {"v": text}


def test_a_run_id_of_digits_stays_a_string_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.yaml"  # job232's one-shot run id is 00499814
    path.write_text(MANIFEST.split("---\n")[1].replace("name: once", "name: job232"))
    assert render_cli.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "lading.io/run-id: '00499814'" in out


def test_the_printed_yaml_is_what_the_api_server_admits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Through the real API server's decoding (Go's YAML) and the upstream SparkApplication CRD.
    path = tmp_path / "job.yaml"
    path.write_text(MANIFEST.split("---\n")[1].replace("name: once", "name: job232"))
    assert render_cli.main([str(path)]) == 0
    app = tmp_path / "app.yaml"
    app.write_text(capsys.readouterr().out.replace("uid: ''", "uid: 6f1c8c52-5b0e-4c4e-9a55-2f7d0d3c9e11"))
    upstream = [p for p in UPSTREAM_CRDS if p.exists()][:1]
    checked = subprocess.run([crd_check_binary(), "--crd", *map(str, upstream), str(app)],
                             capture_output=True, text=True, timeout=120, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
