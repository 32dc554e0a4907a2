"""Which environment values are secrets, and scrubbing them out of text, results and a process's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lading_jobs import scrub

ROOT = Path(__file__).resolve().parents[2]


def test_laptop_environment_secrets_by_name(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("web-identity-token-value\n")
    env = {
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY": "secret/key+value",
        "AWS_SESSION_TOKEN": "session-token-value", "AWS_SOMETHING_NEW": "unknown-aws-value",
        "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL_S3": "http://minio:9000", "AWS_ROLE_ARN": "arn:aws:iam::1:role/r",
        "AWS_WEB_IDENTITY_TOKEN_FILE": str(token),
        "DB_PASSWORD": "db-password-value", "KAFKA_SASL_JAAS": "jaas-config-value", "MY_API_KEY": "api-key-value",
        "HOME": "/home/someone", "FOO": "not-a-secret", "SSL_CERT_FILE": "/etc/ssl/cert.pem",
        "SHORT_TOKEN": "abc",
    }
    values = set(scrub.secret_values(env))
    for secret in ("AKIAEXAMPLEKEY", "secret/key+value", "session-token-value", "unknown-aws-value",
                   "web-identity-token-value", "db-password-value", "jaas-config-value", "api-key-value"):
        assert secret in values, secret
    assert "secret%2Fkey%2Bvalue" in values  # percent-encoded form too
    for public in ("eu-west-1", "http://minio:9000", "arn:aws:iam::1:role/r", str(token), "/home/someone",
                   "not-a-secret", "/etc/ssl/cert.pem", "abc"):
        assert public not in values, public


def test_in_a_pod_every_unknown_variable_is_a_secret() -> None:
    """The Secret's keys arrive as env with names nobody told us: deny by default inside Kubernetes."""
    env = {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
        "MINIO_SERVICE_HOST": "10.96.0.12", "MINIO_PORT": "tcp://10.96.0.12:9000",
        "MINIO_PORT_9000_TCP_ADDR": "10.96.0.12", "SPARK_APPLICATION_ID": "spark-0123456789",
        "HOSTNAME": "export-orders-driver", "JAVA_HOME": "/opt/java/openjdk", "PATH": "/usr/bin:/bin",
        "LADING_TERMINATION_LOG": "/dev/termination-log", "PYTHONPATH": "/opt/lading/spark_apps",
        "WAREHOUSE_LOGIN": "tenant-supplied-value",
    }
    values = set(scrub.secret_values(env))
    assert "tenant-supplied-value" in values
    assert values == {"tenant-supplied-value"}
    assert "tenant-supplied-value" not in scrub.secret_values({k: v for k, v in env.items()
                                                               if not k.startswith("KUBERNETES_")})


def test_scrubber_replaces_every_form_in_results() -> None:
    values = scrub.secret_values({"AWS_SECRET_ACCESS_KEY": 'quote"and\\slash', "PEM_PRIVATE": "line-one-xx\nline-two-yy"})
    s = scrub.Scrubber(values)
    result = {"error": 'failed: quote"and\\slash / line-two-yy', "rows": 3,
              "nested": [{"k": "x quote\"and\\slash"}], "quote\"and\\slash": 1}
    clean = s.result(result)
    assert clean == {"error": f"failed: {scrub.REDACTED} / {scrub.REDACTED}", "rows": 3,
                     "nested": [{"k": f"x {scrub.REDACTED}"}], scrub.REDACTED: 1}
    encoded = json.dumps({"error": 'quote"and\\slash'})
    assert 'quote"and\\slash' not in s.text(encoded) and "quote\\\"and\\\\slash" not in s.text(encoded)
    assert s.data(b"x line-one-xx y") == f"x {scrub.REDACTED} y".encode()
    assert scrub.Scrubber([]).text("unchanged") == "unchanged"


def test_output_filter_covers_this_process_and_its_children(tmp_path: Path) -> None:
    """A child (as the JVM is) inherits the filtered descriptors; partial lines are scrubbed too."""
    script = (
        "import subprocess, sys\n"
        "from lading_jobs import scrub\n"
        "with scrub.protected_output():\n"
        "    print('parent says', 'marker-secret-1234', flush=True)\n"
        "    subprocess.run(['sh', '-c', 'echo child says $AWS_SECRET_ACCESS_KEY >&2; "
        "printf \"tail $AWS_SECRET_ACCESS_KEY\"'])\n"
        "    sys.stderr.write('err marker-secret-1234\\n')\n"
        "print('after the filter', flush=True)\n"
    )
    env = dict(os.environ, AWS_SECRET_ACCESS_KEY="marker-secret-1234",
               PYTHONPATH=str(ROOT / "spark_apps"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "marker-secret-1234" not in proc.stdout + proc.stderr
    assert f"parent says {scrub.REDACTED}" in proc.stdout
    assert f"tail {scrub.REDACTED}" in proc.stdout
    assert f"child says {scrub.REDACTED}" in proc.stderr and f"err {scrub.REDACTED}" in proc.stderr
    assert proc.stdout.rstrip().endswith("after the filter")


def test_a_mounted_secret_directory_is_secret(tmp_path: Path) -> None:
    """A StreamCopy's Kafka credentials arrive as files, one per key (and Kubernetes' ..data link)."""
    (tmp_path / "sasl.jaas.config").write_text(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="kafka-pw-77";')
    (tmp_path / "ssl.key.password").write_text("key-password-88\n")
    (tmp_path / "..data").mkdir()
    values = set(scrub.secret_values({"LADING_KAFKA_PROPERTIES_DIR": str(tmp_path)}))
    assert {"kafka-pw-77", "key-password-88"} <= values
    assert not any(v == "app" for v in values)
    assert "kafka-pw-77" not in scrub.Scrubber(values).text("login failed for app with kafka-pw-77")



def test_the_last_line_before_the_filter_closes_is_never_lost() -> None:
    """The result line is printed just before the filter closes and the process exits. The pipe
    being empty does not mean the pump wrote what it read: flush must wait for the pump itself.
    Many short processes (as lading_jobs.main ends), each ending with a line that must come out."""
    script = (
        "import sys\n"
        "from lading_jobs import scrub\n"
        "with scrub.protected_output():\n"
        "    print('LADING_RESULT ' + sys.argv[1], flush=True)\n"
        "sys.exit(0)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "spark_apps"))
    runs = [subprocess.Popen([sys.executable, "-c", script, str(i)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env) for i in range(120)]
    lost = []
    for i, proc in enumerate(runs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        if out.strip() != f"LADING_RESULT {i}":
            lost.append((i, out))
    assert lost == [], f"{len(lost)} of {len(runs)} runs lost their last line: {lost[:3]}"
