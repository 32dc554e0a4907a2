"""The image build's Spark workload (docker/spark_cds.sh): the driver JVM that runs it keeps the
classes it loaded in the image's class-data-sharing archive when it exits.

What lading's jobs do in a driver and on executors, small: lading's Spark settings
(lading_jobs.session's defaults, passed by docker/spark_cds.sh: this runs before our code is in
the image, so that the archive stays cached while our code changes), SQL with a shuffle, Python
UDFs over Arrow, Parquet and CSV written and read back; then the executor pod's own classes,
loaded by name without running them (a local run has no executor backend). A class the
archive lacks is loaded from its jar as before: this only decides what starts faster.

    spark-submit ... spark_cds_workload.py WORK_DIR
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

from pyspark.sql import SparkSession

EXECUTOR_CLASSES = (
    "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
    "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend$",
    "org.apache.spark.executor.CoarseGrainedExecutorBackend",
    "org.apache.spark.executor.CoarseGrainedExecutorBackend$",
    "org.apache.spark.executor.CoarseGrainedExecutorBackend$Arguments",
    "org.apache.spark.scheduler.cluster.CoarseGrainedClusterMessages$",
    "org.apache.spark.scheduler.cluster.CoarseGrainedClusterMessages$RegisterExecutor",
    "org.apache.spark.scheduler.cluster.CoarseGrainedClusterMessages$LaunchTask",
    "org.apache.spark.scheduler.cluster.CoarseGrainedClusterMessages$StatusUpdate",
    "org.apache.spark.rpc.netty.NettyRpcEnvFactory",
)


def main(work: str) -> None:
    spark = SparkSession.builder.appName("lading-image-cds").getOrCreate()
    spark.range(10_000).selectExpr("id % 7 AS k", "id").groupBy("k").count().collect()
    frame = spark.createDataFrame([(i, f"v{i}", i / 3) for i in range(100)], "a int, b string, c double")

    def same(batches: Iterator[object]) -> Iterator[object]:
        yield from batches

    frame.mapInArrow(same, frame.schema).count()  # type: ignore[arg-type]
    frame.write.mode("overwrite").parquet(f"file://{work}/parquet")
    spark.read.parquet(f"file://{work}/parquet").where("a > 3").toPandas()
    frame.write.mode("overwrite").csv(f"file://{work}/csv", header=True)
    spark.read.csv(f"file://{work}/csv", header=True).collect()
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    for name in EXECUTOR_CLASSES:
        jvm.java.lang.Class.forName(name, False, loader)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
