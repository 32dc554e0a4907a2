#!/bin/bash
# Makes the image's class-data-sharing archive of Spark's classes (the Dockerfile runs it once, as
# root, at build time; docs/install.md#the-image). Java 17 keeps the classes a JVM loaded in a
# dynamic archive when it exits (-XX:ArchiveClassesAtExit; AutoCreateSharedArchive is JDK 19+), so
# this runs a small local Spark workload (docker/spark_cds_workload.py) through the entrypoint's own
# driver mode (with lading_jobs.session's defaults), whose JVM gets the class path every driver and executor pod gets: Spark's jars one
# by one, slf4j-api first (docker/entrypoint.sh). Writes, under /opt/lading/cds:
#
#   spark.jsa        the archive (read-only, for any uid; the pods map it, never write it)
#   jar-root-names   the file names at the root of Spark's jars (the entrypoint keeps a driver's
#                    conf dir ahead of the jars when a file there has one of these names)
#   workload.py      the workload, as run
set -euo pipefail
out=/opt/lading/cds
mkdir -p "$out"
rm -f "$out/spark.jsa" "$out/spark.jsa.part"

python - "$SPARK_HOME/jars" > "$out/jar-root-names" <<'PY'
import sys, zipfile
from pathlib import Path
names = set()
for jar in Path(sys.argv[1]).glob("*.jar"):
    with zipfile.ZipFile(jar) as z:
        names.update(n for n in z.namelist() if "/" not in n)
print("\n".join(sorted(names)))
PY

work=$(mktemp -d /tmp/lading-cds.XXXXXX)
start=$(date +%s)
# the driver as a driver pod runs it (client mode), the master local; no wrapper (not the JVM's)
( cd "$work" && LADING_SPARK_CDS_DUMP=$out/spark.jsa.part SPARK_DRIVER_BIND_ADDRESS=127.0.0.1 \
    SPARK_LOCAL_IP=127.0.0.1 SPARK_LOCAL_HOSTNAME=localhost \
    LADING_DRIVER_WRAPPER_OFF=1 SPARK_LOCAL_DIRS=$work TMPDIR=$work \
    /opt/lading/entrypoint.sh driver --master 'local[2]' --conf spark.driver.memory=1g \
    --conf spark.sql.execution.arrow.pyspark.enabled=true --conf spark.sql.python.filterPushdown.enabled=true \
    --conf spark.sql.session.timeZone=UTC --conf spark.sql.ansi.enabled=true \
    --conf spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL=mimalloc \
    "$out/workload.py" "$work/data" )
[ -s "$out/spark.jsa.part" ] || { echo "spark_cds: the driver JVM wrote no archive" >&2; exit 1; }
mv "$out/spark.jsa.part" "$out/spark.jsa"
chmod 0444 "$out/spark.jsa" "$out/jar-root-names"
rm -rf "$work"
echo "spark_cds: $out/spark.jsa, $(( $(stat -c %s "$out/spark.jsa") >> 20 )) MiB, $(( $(date +%s) - start )) s"
