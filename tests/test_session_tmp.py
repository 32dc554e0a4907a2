"""A test run keeps its temporary files in one directory of its own, which it removes at the end
(tests/conftest.py): this process, the processes the tests start (drivers of the fault, crash
and end-to-end tests, which may be killed before they clean up) and the shared Spark session's
JVM write there, never into the machine's temporary directory itself. The JVM ignores TMPDIR
(``java.io.tmpdir`` is /tmp unless set), so its children are checked as well."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest


def run_dir() -> Path:
    root = Path(os.environ.get("LADING_TEST_TMP", "/nonexistent/LADING_TEST_TMP is not set"))
    assert root.is_dir(), root
    assert root.name.startswith("lading-tests-"), root
    return root


def under(path: str | Path, root: Path) -> bool:
    return Path(path).resolve().is_relative_to(root.resolve())


def test_this_process_and_its_children_write_temporary_files_in_the_runs_directory() -> None:
    root = run_dir()
    assert Path(tempfile.gettempdir()) == root
    with tempfile.TemporaryDirectory() as made:
        assert under(made, root)
    child = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
                           capture_output=True, text=True, check=True, timeout=60)
    assert Path(child.stdout.strip()) == root
    # a JVM as spark-submit starts it: JDK_JAVA_OPTIONS is read by every java launcher
    java = subprocess.run(["java", "-XshowSettings:properties", "-version"], capture_output=True, text=True,
                          check=True, timeout=60)
    tmpdir = [line.split("=", 1)[1].strip() for line in java.stderr.splitlines()
              if line.strip().startswith("java.io.tmpdir =")]
    assert tmpdir == [str(root)], java.stderr[-2000:]


@pytest.mark.spark
def test_the_shared_spark_sessions_files_are_in_the_runs_directory(spark: Any) -> None:
    """spark-*, blockmgr-*, userFiles-* and the native libraries Spark's codecs extract."""
    from pyspark import SparkFiles

    root = run_dir()
    jvm = spark.sparkContext._jvm
    assert jvm.java.lang.System.getProperty("java.io.tmpdir") == str(root)
    # the block manager's directories, made when the session started (spark.local.dir's default)
    assert list(root.glob("spark-*/blockmgr-*")) or list(root.glob("blockmgr-*")), sorted(os.listdir(root))
    assert under(SparkFiles.getRootDirectory(), root), SparkFiles.getRootDirectory()
