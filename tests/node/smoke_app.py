"""A PySpark smoke app the node tests run inside the lading image (from a ConfigMap volume).

It reports, as JSON in the container's termination message, who it runs as and what it could
do: the uid, the user name Java, Spark and Hadoop see, whether the root filesystem refused a
write, and a count and a shuffle computed on the executors (or locally with --master local).
Standard library and pyspark only (it is not lading code), plus one import from the image's
lading: the CSV encoder's C extension, which the image's build stage compiles.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _root_refuses_writes() -> bool:
    try:
        with open("/opt/lading/written-by-smoke", "w") as f:
            f.write("x")
    except OSError as exc:
        return exc.errno == 30  # EROFS
    return False


def _executor_view(_: object) -> list[tuple[int, str, str]]:
    import pwd

    return [(os.getuid(), pwd.getpwuid(os.getuid()).pw_name, os.environ.get("SPARK_EXECUTOR_ID", "local"))]


CDS_LOG = "/tmp/smoke-classes-*.log"
"""Where a JVM started with ``-Xlog:class+load=info:file=/tmp/smoke-classes-%p.log`` (the test's
Java options) logs each class it loads, and its source: a jar, or the class-data-sharing archive
("shared objects file (top)" for the image's dynamic archive)."""


def _class_sources(probe: str) -> dict[str, object] | None:
    """What this pod's JVM loaded: how many of Spark's classes, how many of them from the image's
    archive, and where ``probe`` came from (None without such a log)."""
    import glob

    logs = glob.glob(CDS_LOG)
    if not logs:
        return None
    spark = archived = 0
    source = None
    for line in Path(logs[0]).read_text(errors="replace").splitlines():
        if " org.apache.spark." not in line or " source: " not in line or "$$Lambda" in line:
            continue
        spark += 1
        archived += "source: shared objects file (top)" in line
        if f" {probe} source: " in line:
            source = line.split(" source: ", 1)[1]
    return {"logs": len(logs), "spark_classes": spark, "from_archive": archived, "probe": source}


def _executor_classes(_: object) -> list[tuple[str, str]]:
    view = _class_sources("org.apache.spark.executor.CoarseGrainedExecutorBackend")
    return [(os.environ.get("SPARK_EXECUTOR_ID", "local"), json.dumps(view))]


def _csv_extension() -> str:
    """Where lading's C extension (lading_jobs.formats._csvlines) was loaded from, from the image's
    PYTHONPATH, or why it could not be."""
    try:
        import lading_jobs.formats._csvlines as ext
    except ImportError as exc:
        return f"ImportError: {exc}"
    return str(ext.__file__)


def main() -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("lading-node-smoke").getOrCreate()
    sc = spark.sparkContext
    jvm = sc._jvm
    assert jvm is not None
    rows = spark.range(0, 10_000).count()
    groups = spark.range(0, 10_000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    executors = sorted(set(sc.parallelize(range(8), 4).mapPartitions(_executor_view).collect()))
    # Hadoop's FileSystem on the driver, as this user (its login needs the user's name)
    hadoop_fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), sc._jsc.hadoopConfiguration())
    marker = jvm.org.apache.hadoop.fs.Path("/tmp/smoke-hadoop-marker")
    hadoop_fs.create(marker).close()
    executor_classes = {e: json.loads(v) for e, v in sc.parallelize(range(4), 2).mapPartitions(_executor_classes).collect()}
    parquet_rows = None
    if str(sc.master).startswith("local"):  # one filesystem for every task only in local mode
        spark.range(0, 100).write.mode("overwrite").parquet("file:///tmp/smoke-parquet")
        parquet_rows = spark.read.parquet("file:///tmp/smoke-parquet").count()
    report = {
        "uid": os.getuid(), "gid": os.getgid(),
        "passwd_has_uid": any(line.split(":")[2] == str(os.getuid())
                              for line in Path("/etc/passwd").read_text().splitlines() if line.count(":") >= 6),
        "root_read_only": _root_refuses_writes(),
        "java_user": jvm.java.lang.System.getProperty("user.name"),
        "spark_user": sc.sparkUser(),
        "hadoop_user": jvm.org.apache.hadoop.security.UserGroupInformation.getCurrentUser().getShortUserName(),
        "rows": rows, "groups": len(groups),
        "executors": [list(e) for e in executors],
        "hadoop_fs_write": bool(hadoop_fs.exists(marker)),
        "parquet_rows": parquet_rows,
        "master": sc.master,
        "csv_extension": _csv_extension(),
        "classes": {"driver": _class_sources("org.apache.spark.deploy.SparkSubmit"), "executors": executor_classes},
    }
    spark.stop()
    text = json.dumps(report)
    print(text)
    with open(os.environ.get("SMOKE_REPORT", "/dev/termination-log"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
    sys.exit(0)
