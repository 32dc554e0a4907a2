"""Shared test fixtures: one S3 server (moto, server mode, 127.0.0.1) and one local
Spark session per test session; fresh buckets and directories per test.

The S3 server starts before Spark so that Spark's Python workers inherit the
``AWS_*`` environment that points at it.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest

# The real Kubernetes control plane fixtures (kube, kube_namespace, operator_identity,
# standin_identity): tests/harness/fixtures.py
pytest_plugins = ["harness.fixtures"]

# Every JVM the suite starts (the shared session, and the drivers that fault, crash and end-to-end
# tests launch as subprocesses, which inherit this) compiles with C1 only: test JVMs live seconds
# to minutes on small data, where C2's compilation threads cost more CPU than they save. Startup of
# a local session falls by about half on 2 cores. A user's own setting wins.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules that declare the longest timeout come first (the stream fault tests: minutes of
    driver restarts, one test each). scripts/test hands modules to its two xdist workers in
    collection order (``--no-loadscope-reorder``), so these start at once, side by side, and
    the rest of the suite runs beside them instead of after them. Otherwise the order stays."""
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    longest: dict[str, float] = {}
    for item in items:
        mark = item.get_closest_marker("timeout")
        seconds = float(mark.args[0]) if mark is not None and mark.args else 0.0
        longest[module(item)] = max(longest.get(module(item), 0.0), seconds)
    items.sort(key=lambda item: -longest[module(item)])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3 API server (moto) on 127.0.0.1; sets AWS_* for this process and Spark."""
    from moto.server import ThreadedMotoServer
    from support.moto_atomic import make_conditional_writes_atomic

    make_conditional_writes_atomic()  # one winner per conditional PUT, as on S3
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update({
        # S3 only, as the operator renders it: nothing in lading may depend on the global
        # AWS_ENDPOINT_URL, which would also redirect STS (and the pod's IRSA token).
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    })
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    yield endpoint
    server.stop()


@pytest.fixture(scope="session")
def s3_client(s3_endpoint: str):  # type: ignore[no-untyped-def]
    return boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")


@pytest.fixture
def bucket(s3_client) -> str:  # type: ignore[no-untyped-def]
    """A fresh, empty bucket; returns its name."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def make_bucket(s3_client) -> Callable[[], str]:  # type: ignore[no-untyped-def]
    def make() -> str:
        name = f"t-{uuid.uuid4().hex[:12]}"
        s3_client.create_bucket(Bucket=name)
        return name

    return make


@pytest.fixture(scope="session")
def spark(s3_endpoint: str):  # type: ignore[no-untyped-def]
    """The one local Spark session (local[2]) shared by every test."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from lading_jobs.session import build_session

    session = build_session(master="local[2]", app_name="lading-tests")
    yield session
    session.stop()


@pytest.fixture
def file_uri(tmp_path: Path) -> Callable[[str], str]:
    """``file_uri("out/")`` → a file:// URI under this test's temporary directory."""

    def make(relative: str = "") -> str:
        path = tmp_path / relative
        return "file://" + str(path) + ("/" if relative.endswith("/") or not relative else "")

    return make


@pytest.fixture
def keep_signals() -> Iterator[None]:
    """Restores SIGINT/SIGTERM handlers that an in-process ``lading run`` installs."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)
