"""Shared test fixtures: one S3 server (moto, server mode, 127.0.0.1) and one local
Spark session per test session; fresh buckets and directories per test.

The S3 server starts before Spark so that Spark's Python workers inherit the
``AWS_*`` environment that points at it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from support import spark_cds
from support.ports import free_port

if TYPE_CHECKING:
    from support.faultproxy import FaultProxy

# The real Kubernetes control plane fixtures (kube, kube_namespace, operator_identity,
# standin_identity): tests/harness/fixtures.py
pytest_plugins = ["harness.fixtures"]

# Every JVM the suite starts (the shared session, and the drivers that fault, crash and end-to-end
# tests launch as subprocesses, which inherit this) compiles with C1 only: test JVMs live seconds
# to minutes on small data, where C2's compilation threads cost more CPU than they save. Startup of
# a local session falls by about half on 2 cores. A user's own setting wins.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
# A StreamCopy run in a test serves its progress on a free port, not the product's default 8090:
# two workers (or another run on the machine) each running a stream would otherwise collide
# ("Address already in use"). Tests that check the rendered port read the constant, not this.
os.environ.setdefault("LADING_PROGRESS_PORT", "0")

# Everything the suite's processes put in a temporary directory goes under one directory per test
# run, removed when the run ends: Spark's spark-*, blockmgr-*, artifacts-* directories and the JVM's
# extracted native libraries (liblz4-java*, snappy-*: java.io.tmpdir, which ignores TMPDIR), the
# Python side's mkdtemp (PostgreSQL's data directory, the stand-in's logs), and whatever a killed
# driver (the fault and crash tests SIGKILL whole process groups) never got to delete. Subprocesses
# inherit it through TMPDIR and JDK_JAVA_OPTIONS. The xdist controller (or the only process, with
# LADING_TEST_WORKERS=0) makes it, its workers use it, and the controller removes it at the end;
# a run killed before that leaves it, and the next run removes it (its pytest process is gone).
# pytest's own tmp_path directories stay where pytest keeps and rotates them, so a failure's logs
# (a test names their path) outlive the run.
SESSION_TMP = "LADING_TEST_TMP"
_OWN_TMP = pytest.StashKey[str]()
_CDS_BUILD = pytest.StashKey[tuple[subprocess.Popen[bytes], Path]]()
_CDS_PREBUILT = pytest.StashKey[Path]()
_SESSION_DIR = re.compile(r"lading-tests-(\d+)-[^/]+")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_session_dirs(parent: str) -> list[str]:
    """The session directories under ``parent`` whose pytest process is gone, removed."""
    removed = []
    for entry in os.scandir(parent):
        found = _SESSION_DIR.fullmatch(entry.name)
        if found and entry.is_dir(follow_symlinks=False) and not _alive(int(found.group(1))):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


def use_session_tmp(root: str) -> None:
    """Send this process's and its children's temporary files (Python's and the JVM's) to ``root``."""
    os.environ["TMPDIR"] = root
    tempfile.tempdir = root
    # -XX:-UsePerfData: no /tmp/hsperfdata_<user>/<pid> file (always /tmp), left by every killed JVM.
    options = [o for o in os.environ.get("JDK_JAVA_OPTIONS", "").split()
               if not o.startswith("-Djava.io.tmpdir=") and o != "-XX:-UsePerfData"]
    os.environ["JDK_JAVA_OPTIONS"] = " ".join([*options, f"-Djava.io.tmpdir={root}", "-XX:-UsePerfData"])


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    inherited = os.environ.get(SESSION_TMP)
    if hasattr(config, "workerinput") and inherited:  # an xdist worker: its controller's directory
        use_session_tmp(inherited)
        return
    parent = tempfile.gettempdir()
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", parent)  # pytest's tmp_path stays where it was
    remove_stale_session_dirs(parent)
    root = tempfile.mkdtemp(prefix=f"lading-tests-{os.getpid()}-", dir=parent)
    os.chmod(root, 0o755)  # PostgreSQL (tests/postgres.py) runs as its own user below it
    os.environ[SESSION_TMP] = root
    config.stash[_OWN_TMP] = root
    use_session_tmp(root)
    if spark_cds.enabled():  # Spark drivers started once it is built start cheaper (tests/support/spark_cds.py)
        prebuilt = os.environ.get(spark_cds.PREBUILT)
        if prebuilt:  # scripts/test builds it
            config.stash[_CDS_PREBUILT] = Path(prebuilt)
            spark_cds.use(Path(prebuilt))
        else:
            archive = spark_cds.archive_in(root)
            config.stash[_CDS_BUILD] = (spark_cds.start_build(archive), archive)
            spark_cds.use(archive)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    build = config.stash.get(_CDS_BUILD, None)
    if build is not None:
        terminalreporter.write_line(spark_cds.finish(*build))
    prebuilt = config.stash.get(_CDS_PREBUILT, None)
    if prebuilt is not None:
        terminalreporter.write_line(spark_cds.prebuilt_summary(prebuilt))


def pytest_unconfigure(config: pytest.Config) -> None:
    build = config.stash.get(_CDS_BUILD, None)
    if build is not None:
        spark_cds.finish(*build)
    root = config.stash.get(_OWN_TMP, None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


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


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3 API server (moto) on 127.0.0.1; sets AWS_* for this process and Spark."""
    from moto.server import ThreadedMotoServer
    from support.moto_atomic import answer_unknown_uploads_as_s3, make_conditional_writes_atomic

    make_conditional_writes_atomic()  # one winner per conditional PUT, as on S3
    answer_unknown_uploads_as_s3()  # NoSuchUpload, as on S3, for a completion retried after it landed
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


@pytest.fixture
def fault_proxy(s3_endpoint: str) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of the S3 server (tests/support/faultproxy.py), no faults
    until the test plans or sets them; stopped after the test."""
    from support.faultproxy import FaultProxy

    with FaultProxy(s3_endpoint) as proxy:
        yield proxy


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
