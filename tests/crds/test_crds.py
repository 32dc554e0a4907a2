"""The CRDs: shape, descriptions, docs, examples, and the admission rules as the API server runs them.

Admission is ``crd-check`` (kube-apiserver 1.36's own apiextensions code, see
``harness.admission``): the CRDs must pass CRD-create validation, and every example
and spec below goes through the custom-resource create path (pruning, defaults,
schema, CEL with the runtime cost budget).
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.admission import Admission, Answer, check_crd_files, crd_check_binary
from harness.client import merge_patch
from harness.fixtures import load_crds
from lading_spec.copyjob import MIN_BUFFER_SIZE
from lading_spec.errors import SpecError
from lading_spec.sizes import parse_size

REPO = Path(__file__).resolve().parents[2]
CRD_FILES = sorted((REPO / "crds").glob("*.yaml"))
CRDS = {c["spec"]["names"]["kind"]: c for c in load_crds(CRD_FILES)}
SCHEMAS = {kind: next(v for v in crd["spec"]["versions"] if v.get("served", True))["schema"]["openAPIV3Schema"]
           for kind, crd in CRDS.items()}


def walk(node: dict[str, Any], path: str = ""):  # type: ignore[no-untyped-def]
    yield path, node
    for key, sub in (node.get("properties") or {}).items():
        yield from walk(sub, f"{path}.{key}" if path else key)
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}.<key>")


@pytest.fixture(scope="module")
def admission() -> Any:
    with Admission(CRDS.values()) as adm:
        yield adm


def admit(admission: Admission, kind: str, spec: dict[str, Any]) -> Answer:
    """A create of ``spec`` as the API server answers it."""
    obj = {"apiVersion": "lading.io/v1alpha1", "kind": kind, "metadata": {"name": "t", "namespace": "ns"},
           "spec": copy.deepcopy(spec)}
    return admission.create(obj)


def test_the_api_server_accepts_the_crds():
    out = check_crd_files(CRD_FILES)
    assert out.returncode == 0, out.stdout + out.stderr


def test_crd_check_reports_what_it_refuses(tmp_path):
    """The check is not vacuous: the root metadata description that every CRD carried is refused."""
    crd = copy.deepcopy(CRDS["Compaction"])
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"]["description"] = "x"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(crd))
    out = check_crd_files([bad])
    assert out.returncode == 1 and "properties[metadata]: Forbidden" in out.stdout


def test_three_kinds_with_the_agreed_names():
    assert set(CRDS) == {"CopyJob", "StreamCopy", "Compaction"}
    shorts = {kind: crd["spec"]["names"]["shortNames"] for kind, crd in CRDS.items()}
    assert shorts == {"CopyJob": ["lcj"], "StreamCopy": ["lsc"], "Compaction": ["lcp"]}
    for crd in CRDS.values():
        spec = crd["spec"]
        assert crd["metadata"]["name"] == f"{spec['names']['plural']}.lading.io"
        assert spec["group"] == "lading.io" and spec["scope"] == "Namespaced"
        assert spec["names"]["categories"] == ["lading"]
        (version,) = spec["versions"]
        assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
        assert version["subresources"] == {"status": {}}


READY_REASON = ("Reason", '.status.conditions[?(@.type=="Ready")].reason')


@pytest.mark.parametrize("kind, columns", [
    ("CopyJob", [("Phase", ".status.phase"), ("Rows", ".status.response.rows"),
                 ("Files", ".status.output.files"), ("Age", ".metadata.creationTimestamp"), READY_REASON]),
    ("StreamCopy", [("Phase", ".status.phase"), ("Lag", ".status.lag"),
                    ("Rows", ".status.rowsTotal"), ("Last batch", ".status.lastBatchTime"), READY_REASON]),
    ("Compaction", [("Phase", ".status.phase"), ("Parts", ".status.partsSummary"),
                    ("Rows", ".status.response.rows"), ("Consolidated", ".status.rowsConsolidated"),
                    ("Since", ".status.since"), ("Age", ".metadata.creationTimestamp"), READY_REASON]),
])
def test_printer_columns(kind, columns):
    version = CRDS[kind]["spec"]["versions"][0]
    got = [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert got == columns
    # the Ready reason (Queued, say) only with -o wide: the default view scripts parse stays as it was
    assert version["additionalPrinterColumns"][-1].get("priority") == 1
    paths = {p for p, _ in walk(SCHEMAS[kind])}
    for _, json_path in columns:
        if not json_path.startswith(".metadata"):
            assert re.sub(r"\[\?\(.*?\)\]", "[]", json_path).lstrip(".") in paths, json_path


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_field_has_a_description_and_a_type(kind):
    missing, untyped = [], []
    for path, node in walk(SCHEMAS[kind]):
        if path == "metadata":  # the API server refuses anything but its type there
            assert node == {"type": "object"}
            continue
        if not path.endswith("[]") and not path.endswith("<key>") and not node.get("description"):
            missing.append(path or "(root)")
        if "type" not in node and not (node.get("x-kubernetes-int-or-string")
                                       or node.get("x-kubernetes-preserve-unknown-fields")):
            untyped.append(path)
    assert missing == [] and untyped == []


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_status_is_spelled_out(kind):
    for path, node in walk(SCHEMAS[kind]["properties"]["status"], "status"):
        assert not node.get("x-kubernetes-preserve-unknown-fields"), path
    status = SCHEMAS[kind]["properties"]["status"]["properties"]
    for key in ("phase", "observedGeneration", "runId", "sparkApplication", "startTime",
                "completionTime", "attempts", "response", "output", "progress", "conditions",
                "lastRuns", "lastScheduleTime", "nextScheduleTime"):
        assert key in status, key
    load_counts = {"rowsRejected", "rowsFiltered"} if kind == "CopyJob" else set()  # a load's (copyjob-load.md)
    assert set(status["response"]["properties"]) == {"rows", "error", "cancelled"} | load_counts
    condition = status["conditions"]["items"]["properties"]
    assert {"type", "status", "reason", "message", "lastTransitionTime",
            "observedGeneration"} <= set(condition)


def test_kind_specific_status_and_phases():
    status = {k: SCHEMAS[k]["properties"]["status"]["properties"] for k in SCHEMAS}
    assert {"lag", "rowsTotal", "batches", "lastBatchTime", "offsets"} <= set(status["StreamCopy"])
    assert {"partsBefore", "partsAfter", "bytesBefore", "bytesAfter", "partsSummary", "rowsRead", "rowsWritten",
            "rowsConsolidated", "sinceBefore", "since", "tableVersion", "nothingToDo",
            "retention"} <= set(status["Compaction"])
    assert status["CopyJob"]["phase"]["enum"] == [
        "Pending", "Submitted", "Running", "Cancelling", "Succeeded", "Failed", "Cancelled",
        "Scheduled", "Suspended"]
    assert status["StreamCopy"]["phase"]["enum"] == [
        "Pending", "Submitted", "Running", "Suspended", "Failed"]
    # A Compaction runs through the same lifecycle as a CopyJob (cancel included).
    assert status["Compaction"]["phase"]["enum"] == status["CopyJob"]["phase"]["enum"]


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_cel_rule_has_a_message(kind):
    # crd-check (test_the_api_server_accepts_the_crds) compiles them and estimates their cost.
    rules = [r for _, node in walk(SCHEMAS[kind]) for r in node.get("x-kubernetes-validations", [])]
    assert rules
    for rule in rules:
        assert rule.get("message"), rule["rule"]


def read_values(rule: str) -> set[str]:
    """Fields a rule reads the value of (``self.x`` and ``self.x.y``, not only ``has(self.x)``)."""
    return set(re.findall(r"(?<!has\()self\.(\w+)", rule))


def test_read_values_sees_reads_not_presence():
    assert read_values("!has(self.a) || self.b == 'x' || size(self.c) > 0 || has(self.d.e)") == {"b", "c"}


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_rules_read_only_bounded_values(kind):
    """Strings, lists and maps a rule reads carry maxLength / maxItems / maxProperties (cost budget)."""
    bounds = {"string": "maxLength", "array": "maxItems", "object": "maxProperties"}
    unbounded = []
    for path, node in walk(SCHEMAS[kind]):
        for rule in node.get("x-kubernetes-validations", []):
            read = read_values(rule["rule"])
            targets = [(key, sub) for key, sub in (node.get("properties") or {}).items() if key in read]
            if "self" in re.sub(r"self\.\w+", "", rule["rule"]):  # the node itself is read
                targets.append(("", node))
            for key, sub in targets:
                kind_ = "string" if sub.get("x-kubernetes-int-or-string") else sub.get("type", "")
                bound = bounds.get(kind_)
                if bound and "properties" not in sub and bound not in sub:
                    unbounded.append(f"{path}.{key}" if key else path)
    assert unbounded == []


def test_docs_are_generated_from_the_crds():
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "gen-crd-docs"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_field_appears_in_the_docs(kind):
    text = (REPO / "docs" / "reference" / f"{kind.lower()}.md").read_text()
    for path, node in walk(SCHEMAS[kind]):
        if path.startswith(("spec", "status")) and not path.endswith(("[]", "<key>")):
            # The first row for a path is its field row (rule rows follow the field table).
            row = next(line for line in text.splitlines() if line.startswith(f"| `{path}` |"))
            if "default" in node:
                assert f"`{json.dumps(node['default'])}`" in row, path


# ---------------------------------------------------------------------------------------
# examples


def example_docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((REPO / "examples").glob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and doc.get("apiVersion") == "lading.io/v1alpha1":
                out.append((f"{path.name}#{i}", doc))
    return out


EXAMPLES = example_docs()


def test_our_examples_exist():
    names = {name.split("#")[0] for name, _ in EXAMPLES}
    assert {"streamcopy-kafka.yaml", "streamcopy-files.yaml", "compaction.yaml"} <= names


def test_every_example_is_admitted_by_crd_check():
    """``crd-check --crd ... example.yaml``: the create path, with nothing pruned or refused."""
    args = [crd_check_binary(), "-q"]
    for path in CRD_FILES:
        args += ["--crd", str(path)]
    examples = sorted((REPO / "examples").glob("*.yaml"))
    out = subprocess.run([*args, *map(str, examples)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("name, doc", EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_example_validates_against_its_crd(admission, name, doc):
    answer = admission.create(copy.deepcopy(doc), namespace="ns", field_validation="Strict")
    assert answer.allowed, f"{name}: {answer.message}"
    assert answer.warnings == [], f"{name}: {answer.warnings}"


# ---------------------------------------------------------------------------------------
# what admission rejects, and with which message

UNLOAD = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://bkt/out/"}}
LOAD = {"from": {"files": "s3://bkt/in/"}, "to": {"table": "s3://bkt/t/"}}
KAFKA = {"source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["t"]}},
         "target": {"table": "s3://bkt/t/"}}


def merged(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    return merge_patch(base, patch)  # type: ignore[no-any-return]


REJECTED = [
    ("CopyJob", merged(UNLOAD, {"from": {"table": "s3://bkt/t/"}}), "spec.from",
     "exactly one source"),
    ("CopyJob", {"from": {}, "to": {"files": "s3://bkt/o/"}}, "spec.from", "exactly one source"),
    ("CopyJob", merged(LOAD, {"from": {"fileList": ["s3://bkt/a.csv"]}}), "spec.from.fileList", "not both"),
    ("CopyJob", merged(LOAD, {"from": {"partitionColumns": [{"name": "dt", "type": "date"}]}}),
     "spec.from.partitionColumns", "partitioning: hive only"),
    ("CopyJob", merged(LOAD, {"from": {"files": None, "fileList": ["s3://bkt/dt=1/a.csv"], "partitioning": "hive"}}),
     "spec.from.partitioning", "as a prefix"),
    ("CopyJob", merged(LOAD, {"from": {"partitioning": "hive", "partitionColumns": [{"name": "dt", "type": "array<int>"}]}}),
     "spec.from.partitionColumns[0].type", "should match"),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "a", "table": "s3://bkt/t/", "partitioning": "hive"}]}}),
     "spec.from.inputs[0].partitioning", "as a prefix"),
    ("CopyJob", merged(LOAD, {"from": {"files": None, "fileList": ["s3://bkt/a.csv", "s3://bkt/b.csv",
                                                                   "s3://bkt/a.csv"]}}),
     "spec.from.fileList[2]", "Duplicate value"),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "t", "files": "s3://bkt/in/",
                                                     "fileList": ["s3://bkt/a.csv"]}]}}),
     "spec.from.inputs[0].fileList", "not both"),
    ("CopyJob", merged(UNLOAD, {"to": {"table": "s3://bkt/t/"}}), "spec.to",
     "exactly one destination"),
    ("CopyJob", merged(LOAD, {"to": {"table": None, "files": "s3://bkt/o/"}, "onError": "continue"}), "spec",
     "apply to loads"),
    ("CopyJob", {"from": {"table": "s3://bkt/s/"}, "to": {"table": "s3://bkt/t/"}}, "spec.from",
     "or from a query"),
    ("CopyJob", merged(LOAD, {"to": {"ifExists": "replace"}}), "spec.to.ifExists", "always appends"),
    ("CopyJob", merged(LOAD, {"transform": {"select": "DELETE FROM source"}}), "spec.transform.select",
     "expected SELECT"),
    ("CopyJob", merged(UNLOAD, {"transform": {"select": "SELECT 1 FROM source"}}), "spec.transform",
     "loads only"),
    ("CopyJob", merged(LOAD, {"to": {"partitionBy": ["d"]}}), "spec.to",
     "apply to files targets"),
    ("CopyJob", merged(LOAD, {"to": {"schemaEvolution": "merge"}}), "spec.to.schemaEvolution",
     'supported values: "none", "addColumns"'),
    ("CopyJob", merged(LOAD, {"to": {"schemaEvolution": "addColumns"}}), "spec.to.schemaEvolution",
     "set spec.from.options.header: true"),
    ("CopyJob", merged(LOAD, {"from": {"format": "json"}, "to": {"schemaEvolution": "addColumns"},
                              "transform": {"select": "SELECT 1 FROM source"}}), "spec.to.schemaEvolution",
     "without a spec.transform"),
    ("CopyJob", merged(UNLOAD, {"to": {"schemaEvolution": "addColumns"}}), "spec.to", "apply to table targets"),
    ("CopyJob", merged(UNLOAD, {"to": {"keyColumns": ["k"]}}), "spec.to",
     "apply to table targets"),
    ("CopyJob", merged(UNLOAD, {"to": {"icebergMirror": False}}), "spec.to", "to.icebergMirror apply to table targets"),
    ("CopyJob", merged(LOAD, {"to": {"icebergMirror": "off"}}), "spec.to.icebergMirror", "must be of type boolean"),
    ("StreamCopy", merged(KAFKA, {"target": {"icebergMirror": "off"}}), "spec.target.icebergMirror",
     "must be of type boolean"),
    ("CopyJob", merged(LOAD, {"to": {"envelope": "upsert"}}), "spec.to.keyColumns",
     "upsert needs to.keyColumns"),
    ("CopyJob", merged(UNLOAD, {"onError": "continue"}), "spec", "apply to loads"),
    ("CopyJob", merged(UNLOAD, {"to": {"format": "xml"}}), "spec.to.format",
     'supported values: "csv", "parquet", "json"'),
    ("CopyJob", merged(UNLOAD, {"to": {"maxFileSize": "10 XB"}}), "spec.to.maxFileSize",
     "should match"),
    ("CopyJob", merged(UNLOAD, {"to": {"maxFileSize": 0}}), "spec.to.maxFileSize",
     "positive number of bytes"),
    ("CopyJob", merged(UNLOAD, {"to": {"bufferSize": "4MB"}}), "spec.to.bufferSize",
     "at least 5MB"),
    ("CopyJob", merged(UNLOAD, {"to": {"files": "http://x/y"}}), "spec.to.files", "should match"),
    ("CopyJob", merged(UNLOAD, {"to": {"files": "s3://bkt/a*/"}}), "spec.to.files",
     "should match"),
    ("CopyJob", merged(UNLOAD, {"to": {"options": {"rowGroupSize": 5}}}), "spec.to.options",
     "not accepted for this format"),
    ("CopyJob", merged(UNLOAD, {"to": {"format": "parquet", "options": {"header": True}}}),
     "spec.to.options", "not accepted for this format"),
    ("CopyJob", merged(UNLOAD, {"to": {"options": {"compression": "snappy"}}}),
     "spec.to.options.compression", "csv and json accept none, gzip, zstd"),
    ("CopyJob", merged(UNLOAD, {"to": {"options": {"delimiter": "\u00e9"}}}),
     "spec.to.options.delimiter", "single ASCII character"),
    ("CopyJob", merged(LOAD, {"from": {"options": {"quote": "\u00ab"}}}),
     "spec.from.options.quote", "single ASCII character"),
    ("CopyJob", merged(UNLOAD, {"to": {"options": {"escape": "\u0000"}}}),
     "spec.to.options.escape", "single ASCII character"),
    ("StreamCopy", {"source": {"files": {"uri": "s3://bkt/in/", "format": "csv", "options": {"delimiter": "\u2502"}}},
                    "target": {"table": "s3://bkt/t/"}},
     "spec.source.files.options.delimiter", "single ASCII character"),
    ("CopyJob", merged(UNLOAD, {"to": {"options": {"forceQuote": 3}}}),
     "spec.to.options.forceQuote", "must be of type array"),
    ("CopyJob", merged(UNLOAD, {"to": {"options": {"forceQuote": "*"}}}),
     "spec.to.options.forceQuote", "must be of type array"),
    ("CopyJob", merged(UNLOAD, {"to": {"options": {"forceQuote": ["a"], "forceQuoteAll": True}}}),
     "spec.to.options.forceQuote", "not both"),
    ("CopyJob", merged(UNLOAD, {"to": {"format": "json", "options": {"forceQuoteAll": True}}}),
     "spec.to.options", "not accepted for this format"),
    ("CopyJob", merged(LOAD, {"from": {"format": "parquet", "options": {"null": "x"}}}),
     "spec.from.options", "not accepted for this format"),
    ("CopyJob", merged(LOAD, {"from": {"options": {"rowGroupSize": 5}}}),
     "spec.from.options", "not accepted for this format"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": None, "files": {
        "uri": "s3://bkt/in/", "format": "parquet", "options": {"header": True}}}}),
     "spec.source.files.options", "not accepted for this format"),
    ("CopyJob", merged(UNLOAD, {"from": {"asOf": 3}}), "spec.from.asOf", "from.table only"),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "a"}]}}), "spec.from.inputs[0]",
     "exactly one of table, files (files/fileList), iceberg or delta"),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "a", "delta": {"table": "s3://bkt/d/"},
                                                     "iceberg": {"metadata": "s3://bkt/t/metadata/v1.metadata.json"}}]}}),
     "spec.from.inputs[0]", "exactly one of table"),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "a", "delta": {
        "table": "s3://bkt/d/", "version": 3, "timestamp": "2026-01-01T00:00:00Z"}}]}}),
     "spec.from.inputs[0].delta.timestamp", "version or timestamp, not both"),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "a", "delta": {"table": "s3://bkt/d/", "version": -1}}]}}),
     "spec.from.inputs[0].delta.version", "greater than or equal"),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "a", "delta": {"table": "hdfs://x/d/"}}]}}),
     "spec.from.inputs[0].delta.table", "should match"),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "a", "table": "s3://bkt/t/", "iceberg": {
        "metadata": "s3://bkt/t/metadata/v1.metadata.json"}}]}}), "spec.from.inputs[0]", "exactly one of table"),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "a", "iceberg": {
        "metadata": "s3://bkt/t/metadata/v1.metadata.json", "snapshotId": 1, "asOf": "2026-01-01T00:00:00Z"}}]}}),
     "spec.from.inputs[0].iceberg.asOf", "snapshotId or asOf, not both"),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "a", "iceberg": {"metadata": "s3://bkt/t/"}}]}}),
     "spec.from.inputs[0].iceberg.metadata", "should match"),
    ("CopyJob", merged(UNLOAD, {"schedule": "every day"}), "spec.schedule", "should match"),
    ("CopyJob", merged(UNLOAD, {"schedule": "@daily", "ttlSecondsAfterFinished": 60}),
     "spec.ttlSecondsAfterFinished", "one-shot"),
    ("CopyJob", merged(UNLOAD, {"concurrencyPolicy": "Sometimes"}), "spec.concurrencyPolicy",
     "Allow"),
    ("CopyJob", merged(UNLOAD, {"backoffLimit": -1}), "spec.backoffLimit", "greater than"),
    ("CopyJob", merged(UNLOAD, {"spark": {"driver": {"memory": "lots"}}}),
     "spec.spark.driver.memory", "should match"),
    ("CopyJob", merged(UNLOAD, {"spark": {"podSecurityContext": {"seccompProfile": {"type": "Localhost"}}}}),
     "spec.spark.podSecurityContext.seccompProfile", "localhostProfile is set exactly when"),
    ("CopyJob", merged(UNLOAD, {"spark": {"securityContext": {"runAsUser": -1}}}),
     "spec.spark.securityContext.runAsUser", "greater than or equal to 0"),
    ("CopyJob", merged(LOAD, {"from": {"files": None, "fileList": [f"s3://bkt/in/{i:05d}-{'x' * 100}.csv"
                                                                    for i in range(900)]}}),
     "spec.from.fileList", "must fit in 96 KiB"),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "a", "fileList": ["s3://bkt/" + "x" * 1200]}]}}),
     "spec.from.inputs[0].fileList[0]", "Too long"),
    ("CopyJob", merged(UNLOAD, {"from": {"query": "SELECT " + "1, " * 11000 + "1"}}), "spec.from.query",
     "Too long"),
    ("CopyJob", merged(UNLOAD, {"connection": {"endpoint": "minio:9000"}}),
     "spec.connection.endpoint", "should match"),
    ("StreamCopy", merged(KAFKA, {"source": {"files": {"uri": "s3://bkt/in/"}}}), "spec.source",
     "exactly one source"),
    ("StreamCopy", merged(KAFKA, {"target": {"envelope": "upsert"}}), "spec.target.keyColumns",
     "upsert needs target.keyColumns"),
    ("StreamCopy", merged(KAFKA, {"maxErrorNumber": 5}), "spec.deadLetter", "deadLetter"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"consumer": {"sasl.jaas.config": "x"}}}}),
     "spec.source.kafka.consumer", "secretRef"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"consumer": {"sasl.oauthbearer.client.secret": "x"}}}}),
     "spec.source.kafka.consumer", "secretRef"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"consumer": {"ssl.key.pem": "x"}}}}),
     "spec.source.kafka.consumer", "secretRef"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"consumer": {"bootstrap.servers": "evil:9092"}}}}),
     "spec.source.kafka.consumer", "source.kafka.bootstrapServers"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"consumer": {"sasl.kerberos.kinit.cmd": "id"}}}}),
     "spec.source.kafka.consumer", "runs a program"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"consumer": {"plugin.library.paths": "/tmp/x.so"}}}}),
     "spec.source.kafka.consumer", "loads a library"),
    ("StreamCopy", merged(KAFKA, {"spark": {"sparkConf": {"spark.executorEnv.LD_PRELOAD": "/tmp/x.so"}}}),
     "spec.spark.sparkConf", "environment variables"),
    ("StreamCopy", merged(KAFKA, {"connection": {"region": "not a region!"}}), "spec.connection.region",
     "should match"),
    ("Compaction", {"table": "s3://bkt/t/", "connection": {"endpoint": "http://minio:99999"}},
     "spec.connection.endpoint", "65535"),
    ("Compaction", {"table": "s3://bkt/t/", "spark": {"sparkConf": {"spark.Hadoop.fs.s3a.access.key": "x"}}},
     "spec.spark.sparkConf", "never allowed"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"startingOffsets": "oldest"}}}),
     "spec.source.kafka.startingOffsets", "should match"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"startingOffsets": '{"orders": {"0": 4, "1": -5}}'}}}),
     "spec.source.kafka.startingOffsets", "-2 (earliest), -1 (latest) or >= 0"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"startingOffsets": '{"orders": {"0":-13}}'}}}),
     "spec.source.kafka.startingOffsets", "-2 (earliest), -1 (latest) or >= 0"),
    ("StreamCopy", merged(KAFKA, {"batching": {"maxBatchInterval": "5 minutes"}}),
     "spec.batching.maxBatchInterval", "should match"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"topics": []}}}),
     "spec.source.kafka.topics", "at least 1"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"valueFormat": "raw"}},
                                  "transform": {"select": "SELECT value FROM source", "fields": ["v"]}}),
     "spec.transform.fields", "a raw Kafka source has fixed fields"),
    ("StreamCopy", merged(KAFKA, {"target": {"envelope": "diff"},
                                  "transform": {"select": "SELECT id FROM source"}}),
     "spec.transform", "appends rows"),
    ("StreamCopy", merged(KAFKA, {"transform": {"select": "SELECT id FROM events"}}),
     "spec.transform.select", "FROM source"),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"valueFormat": "raw"}},
                                  "target": {"schemaEvolution": "addColumns"}}),
     "spec.target.schemaEvolution", "valueFormat raw has fixed columns"),
    ("StreamCopy", {"source": {"files": {"uri": "s3://bkt/in/", "format": "csv"}},
                    "target": {"table": "s3://bkt/t/", "schemaEvolution": "addColumns"}},
     "spec.target.schemaEvolution", "set spec.source.files.options.header: true"),
    ("StreamCopy", merged(KAFKA, {"target": {"schemaEvolution": "addColumns"},
                                  "transform": {"select": "SELECT 1 AS id FROM source"}}),
     "spec.target.schemaEvolution", "without a spec.transform"),
    ("Compaction", {"table": "s3://bkt/t/", "since": {"retainFor": "1h", "version": 4}},
     "spec.since", "at most one"),
    ("Compaction", {"table": "s3://bkt/t/", "minInputFiles": 1}, "spec.minInputFiles",
     "greater than or equal to 2"),
    ("Compaction", {"table": "s3://bkt/t/", "targetFileSize": "big"}, "spec.targetFileSize",
     "should match"),
    ("Compaction", {"targetFileSize": "1GB"}, "spec.table", "Required value"),
    ("Compaction", {"table": "s3://bkt/t/", "retention": {"gracePeriod": "1ms"}}, "spec.retention.gracePeriod",
     "at least 24h"),
]


@pytest.mark.parametrize("kind, spec, field, message", REJECTED,
                         ids=[f"{k}:{f}:{m[:20]}" for k, _, f, m in REJECTED])
def test_admission_rejects_naming_the_field(admission, kind, spec, field, message):
    answer = admit(admission, kind, spec)
    assert not answer.allowed, "accepted"
    assert answer.status == 422, answer.message
    assert any(f == field and message in m for f, m in answer.fields()), answer.fields()


@pytest.mark.parametrize("kind, spec", [
    ("CopyJob", UNLOAD),
    ("CopyJob", LOAD),
    ("CopyJob", {"from": {"query": "SELECT 1 AS x"}, "to": {"table": "s3://bkt/t/", "ifExists": "replace"}}),
    ("CopyJob", merged(LOAD, {"transform": {"select": "SELECT $1::int FROM source WHERE $2 = 'x'",
                                            "fields": ["a", "b"], "columns": ["id"]}})),
    ("CopyJob", merged(LOAD, {"to": {"envelope": "upsert", "keyColumns": ["id"]},
                              "onError": "continue", "maxErrors": 10})),
    ("CopyJob", merged(UNLOAD, {"to": {"format": "parquet", "maxFileSize": 1048576,
                                       "bufferSize": "5 MB", "partitionBy": ["d"],
                                       "options": {"compression": "zstd"}},
                                "schedule": "*/15 * * * *", "concurrencyPolicy": "Forbid"})),
    ("CopyJob", {"from": {"table": "s3://bkt/t/", "asOf": 7},
                 "to": {"files": "s3://bkt/o/{run_time:%Y/%m/%d}/", "format": "json"}}),
    ("CopyJob", {"from": {"files": "s3://bkt/in/", "format": "parquet"},  # a format conversion
                 "to": {"files": "s3://bkt/o/", "format": "csv", "partitionBy": ["d"]}}),
    ("CopyJob", merged(UNLOAD, {"to": {"options": {"header": True, "null": "\\N", "forceQuote": ["a", "b"]}}})),
    ("CopyJob", merged(UNLOAD, {"to": {"options": {"forceQuoteAll": True, "compression": "gzip"}}})),
    ("CopyJob", merged(LOAD, {"from": {"format": "parquet", "options": {"rowGroupSize": 10}}})),
    ("CopyJob", merged(LOAD, {"from": {"format": "parquet", "partitioning": "hive",
                                       "partitionColumns": [{"name": "dt", "type": "date"},
                                                            {"name": "amount", "type": "decimal(12, 2)"}]}})),
    ("CopyJob", merged(LOAD, {"from": {"options": {"header": True}}, "to": {"schemaEvolution": "addColumns"}})),
    ("CopyJob", merged(LOAD, {"from": {"format": "parquet"}, "to": {"schemaEvolution": "none"},
                              "transform": {"select": "SELECT $1 FROM source"}})),
    ("CopyJob", merged(LOAD, {"from": {"files": None, "fileList": [f"s3://bkt/in/{i:05d}-{'x' * 100}.csv"
                                                                    for i in range(700)]}})),
    ("CopyJob", merged(UNLOAD, {"spark": {
        "podSecurityContext": {"runAsUser": 1000, "fsGroup": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}})),
    ("StreamCopy", KAFKA),
    ("StreamCopy", merged(KAFKA, {"source": {"kafka": {"startingOffsets": '{"orders": {"0": -2, "1": -1, "2": 0, "3": 10}}'}}})),
    ("StreamCopy", merged(KAFKA, {"target": {"schemaEvolution": "addColumns"}})),
    ("StreamCopy", merged(KAFKA, {"target": {"icebergMirror": False}})),
    ("CopyJob", merged(LOAD, {"to": {"icebergMirror": False}})),
    ("CopyJob", {"from": {"query": "SELECT 1 AS x"}, "to": {"table": "s3://bkt/t/", "icebergMirror": True}}),
    ("CopyJob", merged(UNLOAD, {"from": {"inputs": [{"name": "a", "delta": {"table": "s3://bkt/lake/d/", "version": 3}},
                                                 {"name": "b", "delta": {"table": "s3://bkt/lake/e",
                                                                         "timestamp": "2026-01-01T00:00:00Z"}}]}})),
    ("Compaction", {"table": "file:///data/t/"}),
    ("Compaction", {"table": "s3://bkt/t/", "retention": {"gracePeriod": "1h30m", "allowShortGracePeriod": True}}),
    ("Compaction", {"table": "s3://bkt/t/", "retention": {"gracePeriod": "168h"}}),
])
def test_admission_accepts_good_specs(admission, kind, spec):
    answer = admit(admission, kind, spec)
    assert answer.allowed and answer.warnings == [], answer.message or answer.warnings


def test_defaults_are_applied(admission):
    spec = admit(admission, "StreamCopy", KAFKA).object["spec"]  # type: ignore[index]
    assert spec["batching"]["maxBatchInterval"] == "30s"
    assert spec["source"]["kafka"]["startingOffsets"] == "latest"
    assert spec["target"]["envelope"] == "append" and spec["maxErrorNumber"] == 0
    spec = admit(admission, "CopyJob", UNLOAD).object["spec"]  # type: ignore[index]
    assert spec["backoffLimit"] == 0 and spec["concurrencyPolicy"] == "Allow"
    assert "format" not in spec["to"]  # would clash with table targets


@pytest.mark.parametrize("value", [
    5242880, 5242879, "5MB", "4MB", "5 MB", "6MB", "64MB", "1GB", "5120kB", "5119kB", "99999kB",
    "5242880", "5242879", "5242880B", "52428800", "9999999", "5300000", "1TB", "0GB", "05MB",
])
def test_buffer_size_rule_agrees_with_parse_size(admission, value):
    try:
        expected = parse_size(value, "to.bufferSize") >= MIN_BUFFER_SIZE
    except SpecError:
        expected = False
    answer = admit(admission, "CopyJob", merged(UNLOAD, {"to": {"bufferSize": value}}))
    assert answer.allowed == expected, answer.message


# ---------------------------------------------------------------------------------------
# the CRD and the spec parsers agree (the operator reports InvalidSpec for what CEL misses)

PARSERS = {"CopyJob": "lading_spec.copyjob:parse_copyjob",
           "StreamCopy": "lading_spec.streamcopy:parse_streamcopy",
           "Compaction": "lading_spec.compaction:parse_compaction"}


def parser(kind: str):  # type: ignore[no-untyped-def]
    import importlib
    module, name = PARSERS[kind].split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("kind, spec, field, message",
                         [r for r in REJECTED if r[0] != "CopyJob"],
                         ids=[f"{k}:{f}" for k, _, f, _ in REJECTED if k != "CopyJob"])
def test_parsers_reject_what_the_crd_rejects(kind, spec, field, message):
    with pytest.raises(SpecError) as exc:
        parser(kind)(spec)
    assert field.removeprefix("spec.").startswith(exc.value.field) or \
        exc.value.field.startswith(field.removeprefix("spec."))


@pytest.mark.parametrize("name, doc", EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_examples_parse_with_the_spec_parsers(admission, name, doc):
    stored = admission.create(copy.deepcopy(doc), namespace="ns").object  # what the API server stored
    assert stored is not None
    parser(doc["kind"])(stored["spec"])
