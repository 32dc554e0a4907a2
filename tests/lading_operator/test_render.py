"""Rendering SparkApplications: the API server admits them under the upstream CRD
(crd-check, kube-apiserver's own create path), and the job contract holds (what the
operator renders parses in the Spark app)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.admission import Admission
from lading_operator import kinds, names, render
from lading_spec.compaction import parse_compaction
from lading_spec.copyjob import parse_copyjob
from lading_spec.errors import SpecError
from lading_spec.job import parse_job_document

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = [REPO / "shared/upstream/sparkoperator.k8s.io_sparkapplications.yaml",
            REPO.parent / "shared/upstream/sparkoperator.k8s.io_sparkapplications.yaml"]

UNLOAD = {
    "from": {"query": "SELECT * FROM orders WHERE amount > 10",
             "inputs": [{"name": "orders", "files": "s3://raw/orders/", "format": "parquet"}]},
    "to": {"files": "s3://exports/orders/{run_time:%Y%m%d}/", "format": "csv", "maxFileSize": "64MB"},
    "connection": {"secretRef": {"name": "s3-creds"}, "endpoint": "http://minio:9000", "region": "eu-west-1"},
    "spark": {"image": "registry.local/lading:dev", "driver": {"cores": 2, "memory": "2g"},
              "executor": {"cores": 2, "memory": "4g", "instances": 3},
              "sparkConf": {"spark.sql.shuffle.partitions": 8}},
    "backoffLimit": 2, "activeDeadlineSeconds": 600, "schedule": "@daily",
}
LOAD = {"from": {"files": "s3://in/events/", "format": "json"},
        "to": {"table": "s3://lake/events", "envelope": "append"}}


@pytest.fixture(scope="module")
def upstream() -> Any:
    path = next(p for p in UPSTREAM if p.exists())
    with Admission([yaml.safe_load(path.read_text())]) as adm:
        yield adm


def admitted(upstream: Admission, app: dict[str, Any]) -> tuple[bool, str]:
    """Created as the API server would (Strict: an unknown field is an error, not dropped)."""
    answer = upstream.create(app, field_validation="Strict")
    return answer.allowed, answer.message


def run(name: str = "orders-export", attempt: int = 1) -> render.RunIdentity:
    return render.RunIdentity(kind="CopyJob", namespace="data", name=name, uid="0b6c-uid", generation=4,
                              run_id="20260101020000", run_time=dt.datetime(2026, 1, 1, 2, tzinfo=dt.UTC),
                              attempt=attempt)


def example_specs(kind: str = "CopyJob") -> list[tuple[str, dict[str, Any]]]:
    out = [("inline-unload", UNLOAD), ("inline-load", LOAD)] if kind == "CopyJob" else []
    for path in sorted((REPO / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == kind:
                out.append((f"{path.name}:{doc['metadata']['name']}", doc["spec"]))
    return out


def compaction_run() -> render.RunIdentity:
    return render.RunIdentity(kind="Compaction", namespace="data", name="orders-nightly", uid="7a1d-uid",
                              generation=2, run_id="20260101020000",
                              run_time=dt.datetime(2026, 1, 1, 2, tzinfo=dt.UTC))


RUNNING_KINDS = [k for k in kinds.ALL if k.engine_available]
EXAMPLES = [(kind, label, spec) for kind in RUNNING_KINDS for label, spec in example_specs(kind.name)]


@pytest.mark.parametrize(("kind", "label", "spec"), EXAMPLES, ids=[f"{k.name}-{label}" for k, label, _ in EXAMPLES])
def test_rendered_app_validates_against_upstream_schema(upstream: Admission, kind: kinds.Kind, label: str,
                                                        spec: dict[str, Any]) -> None:
    identity = run() if kind is kinds.COPYJOB else compaction_run()
    app = render.build_sparkapplication(spec, identity, operator_fields=kind.operator_fields)
    ok, message = admitted(upstream, app)
    assert ok, message
    for required in ("sparkVersion", "type", "mainApplicationFile", "driver", "executor"):
        assert app["spec"][required]
    assert names.DNS1035.match(app["metadata"]["name"]) and len(app["metadata"]["name"]) <= 63


def test_schema_check_is_not_vacuous(upstream: Admission) -> None:
    app = render.build_sparkapplication(LOAD, run())
    del app["spec"]["sparkVersion"]
    ok, message = admitted(upstream, app)
    assert not ok and "spec.sparkVersion: Required value" in message
    app = render.build_sparkapplication(LOAD, run())
    app["spec"]["restartPolicy"]["type"] = "Sometimes"
    assert not admitted(upstream, app)[0]
    app = render.build_sparkapplication(LOAD, run())
    app["spec"]["driver"]["colour"] = "red"
    assert "unknown field" in admitted(upstream, app)[1]


def test_shape_identity_and_credentials_by_reference() -> None:
    app = render.build_sparkapplication(UNLOAD, run(attempt=2))
    meta, spec = app["metadata"], app["spec"]
    assert meta["name"] == "orders-export-copyjob-20260101020000-2"
    assert meta["labels"] == {"lading.io/kind": "CopyJob", "lading.io/name": "orders-export",
                              "lading.io/run-id": "20260101020000", "lading.io/attempt": "2"}
    assert meta["ownerReferences"] == [{"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob",
                                        "name": "orders-export", "uid": "0b6c-uid", "controller": True,
                                        "blockOwnerDeletion": True}]
    assert spec["type"] == "Python" and spec["mode"] == "cluster"
    assert spec["restartPolicy"] == {"type": "Never"}
    assert spec["mainApplicationFile"] == "local:///opt/lading/spark_apps/lading_jobs/main.py"
    assert spec["image"] == "registry.local/lading:dev"
    assert spec["sparkConf"] == {"spark.sql.shuffle.partitions": "8", "spark.sql.runSQLOnFiles": "false",
                                 "spark.sql.variable.substitute": "false", "spark.ui.killEnabled": "false",
                                 "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",
                                 "spark.kubernetes.driver.reusePersistentVolumeClaim": "false"}
    for role in ("driver", "executor"):
        pod = spec[role]
        # only the credentials, each by its key: the Secret's other keys never become variables
        assert "envFrom" not in pod
        assert [e for e in pod["env"] if "valueFrom" in e] == [
            {"name": k, "valueFrom": {"secretKeyRef": {"name": "s3-creds", "key": k, "optional": True}}}
            for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                      "LADING_CATALOG_PASSWORD")]  # a SQL catalog's database password (docs/security.md)
        assert {"name": "AWS_ENDPOINT_URL_S3", "value": "http://minio:9000"} in pod["env"]
        assert "AWS_ENDPOINT_URL" not in {e["name"] for e in pod["env"]}  # STS reads it: IRSA token leak
        assert {"name": "AWS_REGION", "value": "eu-west-1"} in pod["env"]
        assert pod["serviceAccount"] == "lading-spark"
        assert pod["labels"]["lading.io/run-id"] == "20260101020000"
    assert spec["executor"]["instances"] == 3 and spec["executor"]["memory"] == "4g"
    assert spec["driver"]["cores"] == 2
    text = json.dumps(app)
    assert "testing" not in text  # no credential value; the key names only inside the references above
    refs_dropped = json.dumps({**spec, "driver": {**spec["driver"], "env": []}, "executor": {**spec["executor"], "env": []}})
    assert "AWS_SECRET_ACCESS_KEY" not in refs_dropped


def test_defaults_without_spark_or_connection() -> None:
    spec = render.build_sparkapplication(LOAD, run())["spec"]
    assert spec["image"] == render.DEFAULT_IMAGE
    assert "envFrom" not in spec["driver"]
    # the only variable: no file:// path is open to the job (lading_spec.localfiles)
    assert spec["driver"]["env"] == spec["executor"]["env"] == [{"name": "LADING_FILE_PREFIXES", "value": "[]"}]
    assert spec["driver"]["serviceAccount"] == "lading-spark"


def test_the_namespaces_file_prefixes_reach_every_pod() -> None:
    """The policy's file:// prefixes of the namespace are the only local paths the job opens."""
    spec = render.build_sparkapplication(LOAD, run(), file_prefixes=("file:///data/n/",))["spec"]
    for role in ("driver", "executor"):
        assert {"name": "LADING_FILE_PREFIXES", "value": '["file:///data/n/"]'} in spec[role]["env"]


def test_spark_pods_get_the_restricted_security_context_by_default() -> None:
    spec = render.build_sparkapplication(LOAD, run())["spec"]
    for role in ("driver", "executor"):
        assert spec[role]["podSecurityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
        assert spec[role]["securityContext"] == {
            "runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}}


def test_a_resource_sets_security_context_fields_over_the_restricted_defaults() -> None:
    pod_level = {"runAsUser": 1000, "fsGroup": 2000,
                 "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/spark.json"}}
    spec = {**LOAD, "spark": {"podSecurityContext": pod_level}}
    app = render.build_sparkapplication(spec, run())["spec"]
    assert app["driver"]["podSecurityContext"] == app["executor"]["podSecurityContext"] == {
        "runAsNonRoot": True, **pod_level}
    assert app["driver"]["securityContext"] == dict(render.RESTRICTED_SECURITY_CONTEXT)  # the other level stays
    spec = {**LOAD, "spark": {"securityContext": {"readOnlyRootFilesystem": True}}}
    assert render.build_sparkapplication(spec, run())["spec"]["executor"]["securityContext"] == {
        **render.RESTRICTED_SECURITY_CONTEXT, "readOnlyRootFilesystem": True}


def test_rendering_is_pure() -> None:
    assert render.build_sparkapplication(UNLOAD, run()) == render.build_sparkapplication(UNLOAD, run())


def test_contract_rendered_arguments_parse_in_the_spark_app() -> None:
    """Imports both sides on purpose: the operator's rendering and the app's parsing."""
    app = render.build_sparkapplication(UNLOAD, run())
    args = app["spec"]["arguments"]
    assert args[0] == "--job"
    doc = parse_job_document(args[1])
    assert (doc.kind, doc.namespace, doc.name, doc.uid, doc.generation, doc.run_id) == \
        ("CopyJob", "data", "orders-export", "0b6c-uid", 4, "20260101020000")
    assert doc.run_time == dt.datetime(2026, 1, 1, 2, tzinfo=dt.UTC)
    parsed = parse_copyjob(doc.spec)
    assert parsed.target.files == "s3://exports/orders/{run_time:%Y%m%d}/"
    assert parsed.target.max_file_size == 64 * 1000**2 or parsed.target.max_file_size == 64 * 1024**2
    assert parsed.connection.secret_name == "s3-creds"
    # Operator-only fields stay with the operator.
    assert "spark" not in doc.spec and "schedule" not in doc.spec and "backoffLimit" not in doc.spec


def test_contract_a_rendered_compaction_parses_in_the_spark_app() -> None:
    """The Compaction example as the operator renders it, read back as the Spark app reads it."""
    from lading_jobs import main  # the Spark side, imported on purpose

    (_, spec), = example_specs("Compaction")
    spec = {**spec, "backoffLimit": 2, "activeDeadlineSeconds": 900, "suspend": False,
            "spark": {"executor": {"instances": 2}}}
    app = render.build_sparkapplication(spec, compaction_run(), operator_fields=kinds.COMPACTION.operator_fields)
    assert app["metadata"]["name"] == "orders-nightly-compaction-20260101020000-1"
    assert app["metadata"]["labels"]["lading.io/kind"] == "Compaction"
    assert app["spec"]["executor"]["instances"] == 2
    args = app["spec"]["arguments"]
    assert args[0] == "--job" and main._parse_args(args).job == args[1]
    doc = parse_job_document(args[1])
    assert (doc.kind, doc.namespace, doc.name, doc.uid, doc.generation, doc.run_id) == \
        ("Compaction", "data", "orders-nightly", "7a1d-uid", 2, "20260101020000")
    # The engine main.py dispatches to by the document's kind validates it as parse_compaction does.
    compaction = main.engine_for(doc.kind)
    assert compaction is not None and compaction.kind == "Compaction"
    parsed = compaction.validate(doc)
    whole = parse_compaction(spec)  # what the operator validated, operator-only fields included
    for name in ("table", "target_file_size", "min_input_files", "since", "sort_by", "scope_filter",
                 "max_bytes_per_run", "retention", "connection"):
        assert getattr(parsed, name) == getattr(whole, name), name
    assert parsed.table == spec["table"] and parsed.sort_by == tuple(spec["sortBy"])
    assert parsed.retention is not None and parsed.retention.grace_period == 24 * 3600
    assert parsed.connection.secret_name == "s3-credentials"
    # Operator-only fields stay with the operator; everything else reaches the engine.
    assert not set(doc.spec) & set(kinds.COMPACTION.operator_fields)
    assert set(doc.spec) == set(spec) - set(kinds.COMPACTION.operator_fields)


@pytest.mark.parametrize(("spark", "field"), [
    ({"driver": {"memory": "lots"}}, "spark.driver.memory"),
    ({"executor": {"instances": 0}}, "spark.executor.instances"),
    ({"driver": {"gpus": 1}}, "spark.driver.gpus"),
    ({"image": ""}, "spark.image"),
    ({"imagePullPolicy": "Sometimes"}, "spark.imagePullPolicy"),
    ({"serviceAccount": "Bad_Name"}, "spark.serviceAccount"),
    ({"colour": "red"}, "spark.colour"),
    ({"securityContext": {"privileged": True}}, "spark.securityContext.privileged"),
    ({"securityContext": {"capabilities": {"add": "NET_ADMIN"}}}, "spark.securityContext.capabilities"),
    ({"podSecurityContext": {"runAsUser": -1}}, "spark.podSecurityContext.runAsUser"),
    ({"podSecurityContext": {"seccompProfile": {"type": "Localhost"}}}, "spark.podSecurityContext.seccompProfile"),
    ({"podSecurityContext": "restricted"}, "spark.podSecurityContext"),
    ({"sparkConf": {"spark.sql.runSQLOnFiles": "true"}}, "spark.sparkConf.spark.sql.runSQLOnFiles"),
    ({"sparkConf": {"spark.sql.variable.substitute": "TRUE"}}, "spark.sparkConf.spark.sql.variable.substitute"),
    ({"sparkConf": {"spark.kubernetes.namespace": "kube-system"}}, "spark.sparkConf.spark.kubernetes.namespace"),
    ({"sparkConf": {"spark.kubernetes.authenticate.driver.serviceAccountName": "admin"}},
     "spark.sparkConf.spark.kubernetes.authenticate.driver.serviceAccountName"),
])
def test_bad_spark_options_name_the_field(spark: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as e:
        render.parse_spark_options(spark)
    assert e.value.field == field


# --- the job document is one command-line argument (Linux: 128 KiB) --------------------

def file_list(count: int, length: int = 120) -> list[str]:
    stem = "s3://landing/events/"
    return [f"{stem}{i:06d}-" + "x" * (length - len(stem) - 12) + ".json" for i in range(count)]


def test_the_argument_limit_is_linuxs() -> None:
    """MAX_ARGUMENT_BYTES is what exec accepts: one byte more and exec fails (E2BIG)."""
    import subprocess

    subprocess.run(["true", "x" * render.MAX_ARGUMENT_BYTES], check=True)
    with pytest.raises(OSError) as exc:
        subprocess.run(["true", "x" * (render.MAX_ARGUMENT_BYTES + 1)], check=True)
    assert exc.value.errno == 7  # E2BIG


def test_a_file_list_that_fits_renders_within_the_limit() -> None:
    spec = {**LOAD, "from": {"fileList": file_list(750), "format": "json"}}  # 92 KiB: the CRD admits it
    render.check_job_size(spec)
    arg = render.build_sparkapplication(spec, run())["spec"]["arguments"][1]
    assert 90_000 < len(arg.encode()) <= render.MAX_ARGUMENT_BYTES


@pytest.mark.parametrize(("source", "field"), [
    ({"fileList": file_list(1200), "format": "json"}, "from.fileList"),
    ({"query": "SELECT * FROM a JOIN b USING (id)",
      "inputs": [{"name": "a", "files": "s3://lake/a/"}, {"name": "b", "fileList": file_list(1200)}]},
     "from.inputs[1].fileList"),
])
def test_a_job_document_too_long_for_one_argument_names_the_field(source: dict[str, Any], field: str) -> None:
    to = LOAD["to"] if "fileList" in source else {"files": "s3://exports/out/"}
    spec = {"from": source, "to": to}
    with pytest.raises(SpecError) as exc:
        render.check_job_size(spec)
    assert exc.value.field == field and "131,071" in exc.value.message and "pattern" in exc.value.message
    with pytest.raises(SpecError):
        render.build_sparkapplication(spec, run())
    # the operator refuses it before any run: InvalidSpec naming the field
    from lading_operator import kinds, reconcile
    verdict = reconcile.validate(kinds.COPYJOB, spec, "data", None, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert verdict is not None and verdict[0] == "InvalidSpec" and verdict[1].startswith(f"spec.{field}: ")


def test_sandbox_settings_are_always_rendered() -> None:
    """A tenant's query reads only its inputs: SQL on paths and ${env:...} substitution stay off."""
    for spec in (LOAD, UNLOAD, {**UNLOAD, "spark": {"sparkConf": {"spark.sql.runSQLOnFiles": "false"}}}):
        conf = render.build_sparkapplication(spec, run())["spec"]["sparkConf"]
        assert conf["spark.sql.runSQLOnFiles"] == "false" and conf["spark.sql.variable.substitute"] == "false"


def test_the_driver_owns_no_volume_claims_unless_the_spec_says_so() -> None:
    """By default the chart's Spark Role grants no PersistentVolumeClaims: a driver that owned its
    executors' volumes (Spark's default) would list them before each round of executor requests
    and delete them at stop, both refused. A spec may turn ownership back on (as its policy allows)."""
    keys = ("spark.kubernetes.driver.ownPersistentVolumeClaim", "spark.kubernetes.driver.reusePersistentVolumeClaim")
    for spec in (LOAD, UNLOAD, CONVERT):
        conf = render.build_sparkapplication(spec, run())["spec"]["sparkConf"]
        assert [conf[k] for k in keys] == ["false", "false"]
    owned = {**UNLOAD, "spark": {"sparkConf": {keys[0]: "true", keys[1]: "true"}}}
    conf = render.build_sparkapplication(owned, run())["spec"]["sparkConf"]
    assert [conf[k] for k in keys] == ["true", "true"]


CONVERT = {"from": {"files": "s3://raw/orders/", "format": "parquet"},
           "to": {"files": "s3://exports/orders/", "format": "csv"}}


@pytest.mark.parametrize("source", [CONVERT["from"], {"fileList": ["s3://raw/a.parquet"], "format": "parquet"},
                                    {"table": "s3://lake/orders/", "asOf": 5}])
def test_an_arrow_only_copy_runs_its_jvms_with_the_first_tier_compiler(upstream: Admission,
                                                                       source: dict[str, Any]) -> None:
    app = render.build_sparkapplication({**CONVERT, "from": source}, run())
    assert app["spec"]["driver"]["javaOptions"] == app["spec"]["executor"]["javaOptions"] == "-XX:TieredStopAtLevel=1"
    ok, message = admitted(upstream, app)
    assert ok, message


@pytest.mark.parametrize(("spec", "why"), [
    (UNLOAD, "a query: Spark SQL may do the row work"),
    (LOAD, "a load into a table"),
    ({**CONVERT, "spark": {"sparkConf": {"spark.lading.unload.path": "spark"}}}, "the Spark path is forced"),
    ({**CONVERT, "spark": {"sparkConf": {"spark.lading.unload.path": " Spark "}}}, "forced, as the job reads it"),
    ({**CONVERT, "spark": {"sparkConf": {"spark.executor.extraJavaOptions": "-XX:+UseG1GC"}}},
     "the resource sets JVM options itself"),
    ({**CONVERT, "spark": {"sparkConf": {"spark.driver.defaultJavaOptions": "-XX:+UseG1GC"}}},
     "default JVM options of its own too"),
])
def test_other_copies_keep_the_jvms_default_compilers(spec: dict[str, Any], why: str) -> None:
    app = render.build_sparkapplication(spec, run())
    assert "javaOptions" not in app["spec"]["driver"] and "javaOptions" not in app["spec"]["executor"], why


def test_only_copyjobs_get_the_first_tier_compiler() -> None:
    assert not render.arrow_only_copy("Compaction", CONVERT, {})
    assert not render.arrow_only_copy("StreamCopy", CONVERT, {})
    assert render.arrow_only_copy("CopyJob", CONVERT, {})
