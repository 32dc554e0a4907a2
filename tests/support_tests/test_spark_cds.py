"""The run's Spark class-data-sharing archive (tests/support/spark_cds.py): a Spark driver JVM started
as spark-submit starts one maps it and loads Spark's classes from it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from support import spark_cds


def test_the_archive_options_join_what_was_set_in_place_of_any_earlier_archive() -> None:
    assert spark_cds.with_option("", "-Xa") == "-Xa"
    assert spark_cds.with_option(" -Xa  -Xb ", "-Xc -Xd") == "-Xa -Xb -Xc -Xd"
    earlier = "-Xa -XX:SharedArchiveFile=/x.jsa -Xlog:cds*=off -Xlog:cds=info:file=/x/jvm-%p.log -Xb"
    assert spark_cds.with_option(earlier, "-XX:ArchiveClassesAtExit=/y.part") == "-Xa -Xb -XX:ArchiveClassesAtExit=/y.part"


def test_a_spark_driver_jvm_loads_sparks_classes_from_the_runs_archive() -> None:
    if not spark_cds.enabled():
        pytest.skip(f"{spark_cds.SWITCH} is not 1 (scripts/test sets it)")
    opts = os.environ.get(spark_cds.OPTS, "")
    named = re.findall(r"-XX:SharedArchiveFile=(\S+)", opts)
    assert len(named) == 1, opts
    archive = Path(named[0])
    # the run's own: scripts/test's, or else in the run's temporary directory
    own = os.environ.get(spark_cds.PREBUILT) or spark_cds.archive_in(os.environ["LADING_TEST_TMP"])
    assert archive == Path(own), archive
    deadline = time.monotonic() + spark_cds.BUILD_TIMEOUT
    while not archive.is_file():  # built beside the first tests (the controller starts it)
        assert time.monotonic() < deadline, f"no archive after {spark_cds.BUILD_TIMEOUT:.0f} s: {archive}"
        time.sleep(1)
    submit = shutil.which("spark-submit")
    assert submit is not None
    # -Xshare:on: a JVM that cannot map the archive (another class path, a broken file) fails
    env = dict(os.environ, SPARK_SUBMIT_OPTS=f"{opts} -Xshare:on -Xlog:class+load=info:stderr")
    run = subprocess.run([submit, "--version"], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    # Spark's own classes, not the lambda classes the JVM spins at run time (never archived here)
    loads = [line for line in run.stderr.splitlines()
             if " org.apache.spark." in line and "source:" in line and "$$Lambda$" not in line]
    assert any(" org.apache.spark.deploy.SparkSubmit source:" in line for line in loads), run.stderr[-3000:]
    from_jars = [line for line in loads if "shared objects file (top)" not in line]
    assert not from_jars, from_jars[:5]
