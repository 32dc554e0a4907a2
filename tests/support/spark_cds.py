"""One class-data-sharing (CDS) archive of the classes a Spark driver loads, made once per test run
and mapped by every Spark driver JVM the suite starts after it.

The suite starts dozens of driver JVMs (the shared session, and the drivers of the fault, crash and
end-to-end tests, one per round or run); each spent most of its start-up parsing and verifying some
ten thousand classes from Spark's jars. Java 17 keeps the classes an application loaded in a
dynamic archive at exit (``-XX:ArchiveClassesAtExit``; ``-XX:+AutoCreateSharedArchive`` is JDK 19+),
which a later JVM with the same class path maps instead (``-XX:SharedArchiveFile``): measured here,
a local session started and ran a first query for 7.4 CPU-s instead of 15.5, and the files stream
fault test (seven drivers started and killed, then the session's catch-up run) spent 46 CPU-s in
its JVMs instead of 97.

``scripts/test`` starts the build before its lint and type checks, beside them (mypy keeps one
core busy), and names the archive to the run (``LADING_TEST_SPARK_CDS_ARCHIVE``), in a temporary
directory of its own that it removes at the end. Without that name, the xdist controller (or the
only process) starts the build at configure time, in the run's own temporary directory
(tests/conftest.py). Either way nothing waits for it: the build renames the archive into place once
complete, and a JVM started before that finds no file there and runs as it would without it
(``-XX:SharedArchiveFile`` naming no file is ignored, silently). Every run makes its own archive
from the jars it runs with.

Only Spark's driver JVMs get the archive, through ``SPARK_SUBMIT_OPTS`` (spark-submit's options for
the JVM it starts; the launcher's own JVM and any other ``java`` keep the JDK's archive). A JVM that
cannot use it (another class path) runs as it would without it; its CDS warnings go to stderr,
never to stdout. It changes how classes are loaded, not which: a class missing from the archive is
loaded from its jar as before.

The build costs a Spark start with a few queries and the dump (68 CPU-s measured, 39 of them the
dump), so it pays off over a run that starts drivers by the dozen, not over a few tests:
``scripts/test`` turns it on (``LADING_TEST_SPARK_CDS=1``, its default there); a plain ``pytest``
leaves it off unless the variable says 1.

    python tests/support/spark_cds.py build ARCHIVE   # a small Spark workload, then the dump
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SWITCH = "LADING_TEST_SPARK_CDS"
PREBUILT = "LADING_TEST_SPARK_CDS_ARCHIVE"
"""The archive another process (scripts/test) builds for this run; the run then builds none."""
OPTS = "SPARK_SUBMIT_OPTS"
QUIET = "-Xlog:cds*=off -Xlog:cds*=warning:stderr"
"""A JVM's CDS warnings (an archive it cannot use) on stderr: the JVM's default is stdout, which a
driver shares with the Python process whose output some tests read."""
BUILD_TIMEOUT = 480.0
"""Seconds the build's driver JVM gets to dump the archive and exit."""


def enabled() -> bool:
    return os.environ.get(SWITCH, "0") == "1"


def archive_in(root: str | Path) -> Path:
    return Path(root) / "spark-cds" / "spark.jsa"


def with_option(opts: str, option: str) -> str:
    """``option`` after ``opts``, without any archive or CDS log option ``opts`` had (another run's)."""
    own = [o for o in opts.split() if not o.startswith(("-XX:SharedArchiveFile=", "-XX:ArchiveClassesAtExit=",
                                                           "-Xlog:cds"))]
    return " ".join([*own, option])


MAPPED = "Mapped dynamic region"
"""What a JVM's CDS log says when it maps the archive."""


def use(archive: Path) -> None:
    """Spark driver JVMs started from now on, by this process or its children, map ``archive``;
    each logs its CDS start-up to ``jvm-PID-TIME.log`` beside it (``finish`` counts them)."""
    log = f"-Xlog:cds=info:file={archive.parent}/jvm-%p-%t.log"
    os.environ[OPTS] = with_option(os.environ.get(OPTS, ""), f"-XX:SharedArchiveFile={archive} {QUIET} {log}")


def jvms(archive: Path) -> tuple[int, int]:
    """How many Spark driver JVMs started with the archive named (the build's own aside), and how
    many of them mapped it."""
    logs = list(archive.parent.glob("jvm-*.log"))
    mapped = sum(1 for log in logs if MAPPED in log.read_text(errors="replace"))
    return len(logs), mapped


def build_env(archive: Path) -> dict[str, str]:
    """This process's environment, its Spark driver JVM told to dump its classes to ``ARCHIVE.part``."""
    env = dict(os.environ)
    env[OPTS] = with_option(env.get(OPTS, ""), f"-XX:ArchiveClassesAtExit={archive}.part {QUIET}")
    return env


def start_build(archive: Path) -> subprocess.Popen[bytes]:
    """The build, started (``python spark_cds.py workload ARCHIVE``), in a process group of its own:
    its output in ``build.log`` beside it."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.parent / "build.log", "wb") as log:
        return subprocess.Popen([sys.executable, __file__, "workload", str(archive)], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=build_env(archive),
                                start_new_session=True)


def prebuilt_summary(archive: Path) -> str:
    """One line on an archive scripts/test built for this run."""
    started, mapped = jvms(archive)
    log = archive.parent / "build.log"
    lines = log.read_text(errors="replace").strip().splitlines() if log.is_file() else []
    if archive.is_file():
        state = lines[-1] if lines and lines[-1].startswith("built ") else "built"
    else:
        state = "not built when the run ended" + (f" ({lines[-1]})" if lines else "")
    return f"Spark CDS archive (scripts/test's): {state}; {started} Spark driver JVMs started, {mapped} mapped it"


def finish(build: subprocess.Popen[bytes], archive: Path) -> str:
    """End of the run: the build stopped if still running (its process group: the driver JVM
    too); one line on how it went."""
    started, mapped = jvms(archive)
    counts = f"{started} Spark driver JVMs started, {mapped} mapped it"
    if build.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(build.pid, signal.SIGKILL)
        build.wait()
        return f"Spark CDS archive: still being built when the run ended; {counts}"
    if build.returncode != 0 or not archive.is_file():
        log = archive.parent / "build.log"
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.is_file() else []
        return f"Spark CDS archive: not built (exit {build.returncode}); {counts}: " + " | ".join(tail)
    lines = (archive.parent / "build.log").read_text(errors="replace").strip().splitlines()
    return f"Spark CDS archive: {lines[-1] if lines else 'built'}; {counts}"


def _workload(archive: Path) -> None:
    """Start a local session as the suite's (lading's settings, local[2], the UI on), run what most
    tests run (SQL, Python UDFs over Arrow, Parquet and CSV files), stop, and let the JVM exit: it
    writes ``ARCHIVE.part`` at exit, renamed to ``ARCHIVE`` once complete."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark_apps"))
    from pyspark import SparkContext

    from lading_jobs.session import build_session

    started = time.monotonic()
    spark = build_session(master="local[2]", app_name="lading-tests-cds")
    spark.range(10_000).selectExpr("id % 7 AS k", "id").groupBy("k").count().collect()
    frame = spark.createDataFrame([(i, f"v{i}", i / 3) for i in range(100)], "a int, b string, c double")

    def same(batches):  # type: ignore[no-untyped-def]
        yield from batches

    frame.mapInArrow(same, frame.schema).count()
    out = archive.parent / "work"
    frame.write.mode("overwrite").parquet(f"file://{out}/parquet")
    spark.read.parquet(f"file://{out}/parquet").where("a > 3").toPandas()
    frame.write.mode("overwrite").csv(f"file://{out}/csv", header=True)
    spark.read.csv(f"file://{out}/csv", header=True).collect()
    gateway = SparkContext._gateway
    spark.stop()
    assert gateway is not None
    proc = gateway.proc  # spark-submit, exec'd into the driver JVM: it exits when its stdin closes
    gateway.shutdown()
    if proc.stdin is not None:
        proc.stdin.close()
    proc.wait(timeout=BUILD_TIMEOUT)
    part = Path(f"{archive}.part")
    if not part.is_file() or part.stat().st_size == 0:
        sys.exit(f"the driver JVM (exit {proc.returncode}) wrote no archive at {part}")
    part.rename(archive)
    print(f"built {archive} ({archive.stat().st_size >> 20} MiB) in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["workload"]:
        _workload(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["build"]:  # scripts/test: the workload in this process group, the option set
        sys.exit(subprocess.call([sys.executable, __file__, "workload", sys.argv[2]], stdin=subprocess.DEVNULL,
                                 env=build_env(Path(sys.argv[2]))))
    else:
        sys.exit(__doc__)
