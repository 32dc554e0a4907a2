"""A private PostgreSQL server for tests: initdb into a temporary directory, started on a
free 127.0.0.1 port with its unix socket in that directory, stopped and removed at session end.

PostgreSQL refuses to run as root, so as root the cluster belongs to the ``postgres``
user and initdb/pg_ctl run through ``runuser``. Tests using it are marked ``postgres``.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import pytest
from support.ports import free_port


def _bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))[-1:]), None)
    if not found:
        pytest.fail(f"PostgreSQL's {name} not found: install the 'postgresql' package (scripts/bootstrap does)")
    return found


def _run(cmd: list[str]) -> None:
    if os.getuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A conninfo string for a fresh PostgreSQL server (database ``postgres``, user ``postgres``)."""
    root = tempfile.mkdtemp(prefix="lading-pg-")
    data = os.path.join(root, "data")
    if os.getuid() == 0:
        shutil.chown(root, "postgres")
        os.chmod(root, 0o755)
    port = free_port()
    try:
        _run([_bin("initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--encoding=UTF8", "--locale=C.UTF-8"])
        _run([_bin("pg_ctl"), "-D", data, "-w", "-l", os.path.join(root, "log"), "-o",
              f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root} -c fsync=off",
              "start"])
        try:
            yield f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        finally:
            _run([_bin("pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"])
    finally:  # also when initdb, the start or the stop failed: the data directory never outlives the session
        shutil.rmtree(root, ignore_errors=True)
