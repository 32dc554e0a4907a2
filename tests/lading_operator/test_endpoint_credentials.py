"""The pod's web-identity (IRSA) token never goes to a tenant's ``connection.endpoint``.

A recording HTTP server on 127.0.0.1 plays the tenant's "S3" endpoint. The test
gives this process the environment a driver pod gets: IRSA's ``AWS_ROLE_ARN`` and
``AWS_WEB_IDENTITY_TOKEN_FILE`` (no static keys) plus the env the operator renders
for the endpoint, then makes the storage call the Spark app makes. boto3 must
fetch credentials with ``AssumeRoleWithWebIdentity`` (the token in the body): it
must send that to AWS's STS, never to the tenant's endpoint. A second recorder,
set as ``HTTPS_PROXY``, catches the call to the real STS so nothing leaves the
machine (the CONNECT it receives proves where the token was headed).

With the global ``AWS_ENDPOINT_URL`` (the old rendering) the token arrives at the
tenant's server in clear text; with ``AWS_ENDPOINT_URL_S3`` it does not.
"""

from __future__ import annotations

import datetime as dt
import http.server
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lading_jobs.storage import S3Settings, open_storage
from lading_operator import render
from lading_spec.copyjob import parse_copyjob
from lading_spec.job import parse_job_document


class Recorder(http.server.ThreadingHTTPServer):
    """Records every request (request line, headers, body); answers 403."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def text(self) -> str:
        return b"\n".join(self.seen).decode(errors="replace")


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Recorder

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append(self.requestline.encode() + b"\n" + bytes(self.headers) + body)
        payload = (b"<ErrorResponse><Error><Code>AccessDenied</Code><Message>recorded</Message>"
                   b"</Error></ErrorResponse>")
        self.send_response(403)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_HEAD = do_CONNECT = _record

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorders() -> Iterator[tuple[Recorder, Recorder]]:
    endpoint, proxy = Recorder(), Recorder()
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (endpoint, proxy)]
    for t in threads:
        t.start()
    yield endpoint, proxy
    for s in (endpoint, proxy):
        s.shutdown()
        s.server_close()


def pod_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, proxy: str, env: list[dict[str, str]],
                    token: str) -> None:
    """This process's environment as a driver pod with IRSA and the rendered env sees it."""
    import os

    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    token_file = tmp_path / "token"
    token_file.write_text(token)
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/lading-spark")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    for item in env:
        monkeypatch.setenv(item["name"], item["value"])


def test_irsa_token_never_reaches_the_tenant_endpoint(recorders: tuple[Recorder, Recorder],
                                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    endpoint, proxy = recorders
    token = f"irsa-token-{uuid.uuid4().hex}"
    spec = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://exports/out/"},
            "connection": {"endpoint": endpoint.url, "region": "us-east-1"}}
    run = render.RunIdentity(kind="CopyJob", namespace="team-a", name="irsa", uid="u", generation=1,
                             run_id="r1", run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    app = render.build_sparkapplication(spec, run)
    env = app["spec"]["driver"]["env"]
    assert app["spec"]["executor"]["env"] == env
    pod_environment(monkeypatch, tmp_path, proxy.url, env, token)

    # What the Spark app does with the job document it was given (unload/load: S3Settings.from_env).
    job = parse_copyjob(parse_job_document(app["spec"]["arguments"][1]).spec)
    settings = S3Settings.from_env(endpoint=job.connection.endpoint, region=job.connection.region)
    assert settings.endpoint == endpoint.url
    with pytest.raises(Exception):  # noqa: B017 - no credentials can be had here; where the token went matters
        open_storage("s3://exports/out/", settings).head("s3://exports/out/x")

    assert token not in endpoint.text(), "the web-identity token was sent to the tenant's endpoint"
    assert "AssumeRoleWithWebIdentity" not in endpoint.text()
    # It went towards AWS's STS instead (over TLS, through the proxy that stopped it here).
    assert "CONNECT sts." in proxy.text() and token not in proxy.text()


def test_rendered_env_sets_only_the_s3_endpoint() -> None:
    spec = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://b/o/"},
            "connection": {"endpoint": "http://minio:9000"}}
    run = render.RunIdentity(kind="CopyJob", namespace="n", name="x", uid="u", generation=1, run_id="r",
                             run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    app = render.build_sparkapplication(spec, run)
    for role in ("driver", "executor"):
        names = {e["name"]: e["value"] for e in app["spec"][role]["env"]}
        assert names == {"AWS_ENDPOINT_URL_S3": "http://minio:9000", "LADING_FILE_PREFIXES": "[]"}
