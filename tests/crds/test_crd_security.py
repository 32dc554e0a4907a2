"""Admission refuses what would leak or escalate, through the real API server code (tools/crd-check).

Only the fields this file is about are asserted: an instance is "refused on
FIELD" when the create answers an error for that field path, and "accepted on
FIELD" when it answers none for it (other fields' errors do not matter here).
One ``crd-check --serve`` (harness.admission: the API server's create path) answers every
instance of the module: a crd-check process per instance started, loaded and compiled the
CRDs' rules ~330 times (a quarter of a second each).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.admission import Admission
from harness.fixtures import load_crds

REPO = Path(__file__).resolve().parents[2]
PLURALS = {"CopyJob": "copyjobs", "StreamCopy": "streamcopies", "Compaction": "compactions"}
SPECS: dict[str, dict[str, Any]] = {
    "CopyJob": {"from": {"query": "SELECT 1"}, "to": {"files": "s3://bkt/out/"}},
    "StreamCopy": {"source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["t"]}},
                   "target": {"table": "s3://bkt/t/"}},
    "Compaction": {"table": "s3://bkt/t/"},
}


@pytest.fixture(scope="module")
def adm() -> Iterator[Admission]:
    with Admission(load_crds([REPO / "crds" / f"{plural}.lading.io.yaml" for plural in PLURALS.values()])) as a:
        yield a


def field_errors(kind: str, spec: dict[str, Any], field: str, adm: Admission) -> list[str]:
    """The create's errors about ``field`` for one instance of ``kind``, as ``FIELD: MESSAGE``."""
    obj = {"apiVersion": "lading.io/v1alpha1", "kind": kind, "metadata": {"name": "t", "namespace": "team-a"},
           "spec": spec}
    answer = adm.create(obj)
    assert answer.allowed or answer.status == 422, (answer.status, answer.message)
    return [f"{f}: {message}" for f, message in answer.fields() if f == field]


@pytest.mark.parametrize("kind", sorted(PLURALS))
@pytest.mark.parametrize(("endpoint", "refused"), [
    ("http://minio:9000", False),
    ("https://s3.eu-west-1.example.com/base/", False),
    ("http://user:secret@minio:9000", True),
    ("http://evil.example\\@minio:9000", True),
    ("http://minio:9000/?x=1", True),
    ("http://minio:9000#x", True),
    ("minio:9000", True),
    ("http://minio:99999", True),
    ("http://minio:65536", True),
    ("http://minio:65535", False),
    ("http://minio:0080/base", False),
    ("http://minio:123456789012345678901234567890", True),
    ("http://minio:abc", True),
    ("http://[::1]:9000", False),
    ("http://[::1]:70000", True),
])
def test_endpoint_admission(kind: str, endpoint: str, refused: bool, adm: Admission) -> None:
    spec = {**SPECS[kind], "connection": {"endpoint": endpoint}}
    errors = field_errors(kind, spec, "spec.connection.endpoint", adm)
    assert bool(errors) is refused, errors


@pytest.mark.parametrize("kind", sorted(PLURALS))
@pytest.mark.parametrize(("key", "refused"), [
    ("spark.sql.shuffle.partitions", False),
    ("spark.kubernetes.driver.annotation.example.com/team", False),  # the policy decides, not admission
    ("spark.kubernetes.namespace", True),
    ("spark.kubernetes.authenticate.driver.serviceAccountName", True),
    ("spark.kubernetes.driver.secrets.other-team", True),
    ("spark.kubernetes.executor.secretKeyRef.AWS_SECRET_ACCESS_KEY", True),
    ("spark.kubernetes.container.image", True),
    ("spark.kubernetes.driver.podTemplateFile", True),
    ("spark.kubernetes.executor.volumes.hostPath.root.mount.path", True),
    ("spark.kubernetes.executor.volumes.nfs.data.options.server", True),
    ("spark.kubernetes.executor.volumes.persistentVolumeClaim.data.options.claimName", False),
    ("spark.jars.packages", True),
    ("spark.executor.instances", True),
    ("spark.kubernetes.namespace=kube-system#", True),  # '=' would split into another key
    ("hive.metastore.uris", True),
    ("spark.kubernetes.driverEnv.AWS_SECRET_ACCESS_KEY", True),
    ("spark.executorEnv.LD_PRELOAD", True),
    ("spark.executorEnv.ld_preload", True),
    ("spark.kubernetes.driverEnv.JAVA_TOOL_OPTIONS", True),
    ("spark.executorEnv.PATH", True),
    ("spark.executorEnv.TZ", False),  # the policy decides, not admission
    ("spark.Hadoop.fs.s3a.access.key", True),
    ("spark.HADOOP.fs.s3a.secret.key", True),
    ("spark.Kubernetes.Namespace", True),
    ("spark.kubernetes.driver.PodTemplateFile", True),
])
def test_spark_conf_admission(kind: str, key: str, refused: bool, adm: Admission) -> None:
    spec = {**SPECS[kind], "spark": {"sparkConf": {key: "x"}}}
    errors = field_errors(kind, spec, "spec.spark.sparkConf", adm)
    assert bool(errors) is refused, errors


@pytest.mark.parametrize("kind", sorted(PLURALS))
@pytest.mark.parametrize(("key", "value", "refused"), [
    ("spark.driver.extraJavaOptions", "-XX:+UseG1GC -Duser.timezone=UTC -Xss4m", False),
    ("spark.driver.extraJavaOptions", '"-java\\agent:/path/agent.jar"', True),
    ("spark.executor.extraJavaOptions", "-Xss4m\u2028-javaagent:/path/agent.jar", True),
    ("spark.executor.defaultJavaOptions", "'-XX:OnError=sh'", True),
    ("spark.Driver.DefaultJavaOptions", "-Xss4m\t-javaagent:/a.jar", True),
    ("spark.yarn.am.extraJavaOptions", "-java\\agent:/a.jar", True),
    ("spark.driver.extraClassPath", "/tmp/x.jar", True),
    ("spark.executor.extraLibraryPath", "/tmp", True),
])
def test_jvm_option_characters_at_admission(kind: str, key: str, value: str, refused: bool, adm: Admission) -> None:
    """Quotes, backslashes and any whitespace but the space are refused before the operator sees them
    (which options are allowed is lading_spec.jvmoptions' check)."""
    spec = {**SPECS[kind], "spark": {"sparkConf": {key: value}}}
    errors = field_errors(kind, spec, "spec.spark.sparkConf", adm)
    assert bool(errors) is refused, errors


ENV_PAYLOADS = ["BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "BASH_FUNC_x", "IFS",
                "GLIBC_TUNABLES", "GCONV_PATH", "HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS", "MALLOC_TRACE", "TMPDIR",
                "NLSPATH", "OPENSSL_CONF", "NSS_WRAPPER_HOSTS", "ALL_PROXY", "all_proxy", "FTP_PROXY", "LD_AUDIT",
                "JDK_JAVA_OPTIONS", "PYTHONSTARTUP", "SPARK_JAVA_OPT_0", "AWS_ROLE_ARN"]


@pytest.mark.parametrize("kind", sorted(PLURALS))
@pytest.mark.parametrize(("key", "refused"), [
    *((f"spark.kubernetes.driverEnv.{name}", True) for name in ENV_PAYLOADS),
    ("spark.executorEnv.BASH_ENV", True), ("spark.yarn.appMasterEnv.BASH_ENV", True),
    ("spark.ExecutorEnv.BASH_ENV", True), ("spark.executorEnv.A.B", True), ("spark.executorEnv.1X", True),
    ("spark.executorEnv.TZ", False), ("spark.kubernetes.driverEnv.TEAM_NAME", False),
])
def test_unsafe_variables_at_admission(kind: str, key: str, refused: bool, adm: Admission) -> None:
    spec = {**SPECS[kind], "spark": {"sparkConf": {key: "$(touch /tmp/pwned)"}}}
    errors = field_errors(kind, spec, "spec.spark.sparkConf", adm)
    assert bool(errors) is refused, errors


@pytest.mark.parametrize("kind", sorted(PLURALS))
@pytest.mark.parametrize(("spark", "field"), [
    ({"podSecurityContext": {"runAsUser": 0}}, "spec.spark.podSecurityContext.runAsUser"),
    ({"securityContext": {"runAsUser": 0}}, "spec.spark.securityContext.runAsUser"),
    ({"podSecurityContext": {"runAsNonRoot": False}}, "spec.spark.podSecurityContext.runAsNonRoot"),
    ({"securityContext": {"capabilities": {"add": ["SYS_ADMIN", "NET_ADMIN", "SYS_PTRACE"], "drop": ["ALL"]}}},
     "spec.spark.securityContext.capabilities.add"),
    ({"securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}, "spec.spark.securityContext.capabilities.drop"),
    ({"podSecurityContext": {"seccompProfile": {"type": "Unconfined"}}},
     "spec.spark.podSecurityContext.seccompProfile.type"),
    ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}, "spec.spark.securityContext.seccompProfile.type"),
    ({"securityContext": {"allowPrivilegeEscalation": True}}, "spec.spark.securityContext.allowPrivilegeEscalation"),
    ({"podSecurityContext": {"runAsUser": 1000, "fsGroup": 1000},
      "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}}}, None),
])
def test_privileged_pod_settings_at_admission(kind: str, spark: dict[str, Any], field: str | None,
                                              adm: Admission) -> None:
    spec = {**SPECS[kind], "spark": spark}
    if field is not None:
        assert field_errors(kind, spec, field, adm)
        return
    for path in ("podSecurityContext", "podSecurityContext.runAsUser", "securityContext",
                 "securityContext.capabilities.add", "securityContext.capabilities.drop"):
        assert field_errors(kind, spec, f"spec.spark.{path}", adm) == []


def test_crd_rule_lists_what_lading_spec_never_allows() -> None:
    """The admission rule and lading_spec.sparkconf refuse the same fixed keys and prefixes."""
    from lading_spec import envvars, sparkconf

    for plural in PLURALS.values():
        crd = yaml.safe_load((REPO / "crds" / f"{plural}.lading.io.yaml").read_text())
        spark = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["spark"]
        rules = " ".join(r["rule"] for r in spark["properties"]["sparkConf"]["x-kubernetes-validations"])
        for pattern, _ in sparkconf.NEVER:  # compared with k.lowerAscii(), as never_allowed lower-cases
            assert f"'{pattern.lower()}'" in rules, (plural, pattern)
        for key in sparkconf.SPEC_FIELDS:
            assert f"'{key}'" in rules, (plural, key)
        for name in envvars.NEVER:  # as the rule writes it: lower case, * as .*
            entry = name.lower().replace("*", ".*")
            assert f"|{entry}|" in rules or f"({entry}|" in rules or f"|{entry})" in rules, (plural, name)


def test_endpoint_admission_agrees_with_check_endpoint(adm: Admission) -> None:
    """The CRD's endpoint checks and lading_spec.uris.check_endpoint accept the same ports."""
    from lading_spec.errors import SpecError
    from lading_spec.uris import check_endpoint

    for endpoint in ("http://minio:9000", "http://minio:99999", "http://minio:65536", "http://minio:65535",
                     "https://minio:443/base", "http://minio:abc", "http://[::1]:9000", "http://[::1]:70000"):
        try:
            check_endpoint(endpoint, "connection.endpoint")
            parser_refuses = False
        except SpecError:
            parser_refuses = True
        errors = field_errors("CopyJob", {**SPECS["CopyJob"], "connection": {"endpoint": endpoint}},
                              "spec.connection.endpoint", adm)
        assert bool(errors) is parser_refuses, (endpoint, errors)


@pytest.mark.parametrize("kind", sorted(PLURALS))
@pytest.mark.parametrize(("region", "refused"), [
    ("us-east-1", False),
    ("eu-west-1", False),
    ("auto", False),
    ("not a region!", True),
    ("US-EAST-1", True),
    ("us_east_1", True),
    ("x" * 64, True),
    ("", True),
    ("us-east-1\nAWS_SECRET_ACCESS_KEY=x", True),
])
def test_region_admission(kind: str, region: str, refused: bool, adm: Admission) -> None:
    spec = {**SPECS[kind], "connection": {"region": region}}
    errors = field_errors(kind, spec, "spec.connection.region", adm)
    assert bool(errors) is refused, errors


@pytest.mark.parametrize("kind", sorted(PLURALS))
@pytest.mark.parametrize(("capabilities", "field", "refused"), [
    ({"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}, "add[0]", False),
    ({"add": [""]}, "add[0]", True),
    ({"drop": ["ALL", ""]}, "drop[1]", True),
])
def test_capabilities_admission(kind: str, capabilities: dict[str, Any], field: str, refused: bool,
                                adm: Admission) -> None:
    spec = {**SPECS[kind], "spark": {"securityContext": {"capabilities": capabilities}}}
    errors = field_errors(kind, spec, f"spec.spark.securityContext.capabilities.{field}", adm)
    assert bool(errors) is refused, errors


@pytest.mark.parametrize("key", [
    "spark.kubernetes.driverEnv.AWS_SECRET_ACCESS_KEY", "spark.executorEnv.LD_PRELOAD", "spark.executorEnv.Path",
    "spark.executorEnv.TZ", "spark.executorEnv.MY_AWS_THING", "spark.Hadoop.fs.s3a.access.key",
    "spark.KERBEROS.principal", "spark.Master", "spark.kubernetes.namespace", "spark.sql.shuffle.partitions",
    "spark.Executor.Memory", "spark.executor.memory", "spark.ExecutorEnv.LD_PRELOAD",
])
def test_spark_conf_admission_agrees_with_never_allowed(key: str, adm: Admission) -> None:
    """Where the key alone decides, the CRD refuses exactly what lading_spec.sparkconf.never_allowed refuses."""
    from lading_spec import sparkconf

    errors = field_errors("CopyJob", {**SPECS["CopyJob"], "spark": {"sparkConf": {key: "x"}}},
                          "spec.spark.sparkConf", adm)
    assert bool(errors) is (sparkconf.never_allowed(key, "x") is not None), errors


KAFKA_SECRET = "S3CRET-oidc-client-secret"


@pytest.mark.parametrize(("key", "message"), [
    ("sasl.oauthbearer.client.secret", "put them in the Secret named by source.kafka.secretRef"),
    ("ssl.key.pem", "put them in the Secret named by source.kafka.secretRef"),
    ("ssl.certificate.pem", "put them in the Secret named by source.kafka.secretRef"),
    ("ssl.keystore.password", "put them in the Secret named by source.kafka.secretRef"),
    ("ssl.keystore.location", "put them in the Secret named by source.kafka.secretRef"),
    ("ssl.key.password", "put them in the Secret named by source.kafka.secretRef"),
    ("ssl.truststore.password", "put them in the Secret named by source.kafka.secretRef"),
    ("sasl.jaas.config", "put them in the Secret named by source.kafka.secretRef"),
    ("sasl.username", "put them in the Secret named by source.kafka.secretRef"),
    ("sasl.password", "put them in the Secret named by source.kafka.secretRef"),
    ("SASL.Password", "put them in the Secret named by source.kafka.secretRef"),
    ("sasl.oauthbearer.config", "put them in the Secret named by source.kafka.secretRef"),
    ("bootstrap.servers", "list the brokers there"),
    ("metadata.broker.list", "list the brokers there"),
    ("plugin.library.paths", "runs a program, loads a library"),
    ("sasl.kerberos.kinit.cmd", "runs a program, loads a library"),
    ("sasl.kerberos.principal", "runs a program, loads a library"),
    ("ssl.engine.location", "runs a program, loads a library"),
    ("ssl.engine.id", "runs a program, loads a library"),
    ("ssl_engine_callback_data", "runs a program, loads a library"),
    ("ssl.providers", "runs a program, loads a library"),
    ("sasl.oauthbearer.token.endpoint.url", "runs a program, loads a library"),
    ("sasl.oauthbearer.metadata.authentication.type", "runs a program, loads a library"),
    ("enable.sasl.oauthbearer.unsecure.jwt", "runs a program, loads a library"),
    ("enable.auto.commit", "lading sets the offset and commit properties itself"),
    ("debug", "accepts the protocol and SASL mechanism"),
])
def test_kafka_consumer_admission(key: str, message: str, adm: Admission) -> None:
    """Each refused consumer property is refused at admission too, with a message that says what to do,
    and the parser refuses it as well."""
    from lading_spec.errors import SpecError
    from lading_spec.streamcopy import parse_streamcopy

    spec = {"source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["t"],
                                 "consumer": {"security.protocol": "SASL_SSL", key: KAFKA_SECRET}}},
            "target": {"table": "s3://bkt/t/"}}
    errors = field_errors("StreamCopy", spec, "spec.source.kafka.consumer", adm)
    assert any(message in e for e in errors), errors
    assert not any(KAFKA_SECRET in e for e in errors), errors
    with pytest.raises(SpecError) as exc:
        parse_streamcopy(spec)
    assert exc.value.field == f"source.kafka.consumer.{key}"


def test_kafka_consumer_admission_accepts_the_allow_list(adm: Admission) -> None:
    """Every property of the parser's allow-list is admitted (one spec holding them all)."""
    from lading_spec.streamcopy import CONSUMER_PROPERTIES

    consumer = {key: "1" for key in sorted(CONSUMER_PROPERTIES)}
    spec = {"source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["t"], "consumer": consumer}},
            "target": {"table": "s3://bkt/t/"}}
    assert field_errors("StreamCopy", spec, "spec.source.kafka.consumer", adm) == []


def test_crd_consumer_allow_list_is_the_parsers() -> None:
    from lading_spec.streamcopy import CONSUMER_PROPERTIES

    crd = yaml.safe_load((REPO / "crds" / "streamcopies.lading.io.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    consumer = spec["properties"]["source"]["properties"]["kafka"]["properties"]["consumer"]
    rule = next(r["rule"] for r in consumer["x-kubernetes-validations"] if r["rule"].startswith("self.all(k, k in ["))
    listed = rule.removeprefix("self.all(k, k in [").split("]", 1)[0]
    assert {k.strip().strip("'") for k in listed.split(",")} == set(CONSUMER_PROPERTIES)
