#!/bin/bash
# lading's container entrypoint: one image, three uses.
#
#   driver ARGS...    a Spark driver pod, as spark-submit (cluster mode) and spark-operator create it:
#                     Spark mounts spark.properties under $SPARK_CONF_DIR and passes
#                     "driver --properties-file FILE --class CLASS RESOURCE APP-ARGS..."; the driver
#                     runs spark-submit in client mode, bound to the pod's IP.
#   executor          a Spark executor pod: everything comes from the environment Spark's
#                     executor pod builder sets (SPARK_DRIVER_URL, SPARK_EXECUTOR_ID, _CORES,
#                     _MEMORY, _POD_IP, _POD_NAME, SPARK_APPLICATION_ID, SPARK_RESOURCE_PROFILE_ID,
#                     SPARK_JAVA_OPT_<n>, SPARK_CLASSPATH, ...); the JVM runs
#                     KubernetesExecutorBackend.
#   anything else     run as given (the operator's Deployment sets its own command; `python ...`,
#                     `spark-submit ...`, `bash` work too).
#
# The pod may run under any uid (no passwd entry: Pod Security "restricted", OpenShift's random
# uids) with a read-only root filesystem; only /tmp, Spark's local dirs (SPARK_LOCAL_DIRS, emptyDirs
# Spark mounts itself) and the work dir need to be writable. Java and Hadoop ask the system for the
# user's name (getpwuid); with no entry Hadoop's login fails ("invalid null input: name"). This script
# never writes /etc/passwd: it names the user through SPARK_USER / HADOOP_USER_NAME / -Duser.name and,
# where a writable temporary directory exists, through an nss_wrapper passwd file there.
#
# Written for lading from Spark's documented pod contract (running-on-kubernetes.html) and the
# environment its Kubernetes feature steps set; tests/node/test_image.py runs it on a real node.
set -euo pipefail

: "${SPARK_HOME:?SPARK_HOME must be set (the image sets it to the pyspark package)}"
: "${JAVA_HOME:?JAVA_HOME must be set (the image sets it)}"

uid=$(id -u)
gid=$(id -g)
user_name=${SPARK_USER:-${HADOOP_USER_NAME:-}}

# --- a user name for an arbitrary uid, without a writable /etc/passwd
if ! getent passwd "$uid" >/dev/null 2>&1; then
  user_name=${user_name:-spark}
  tmp=${TMPDIR:-/tmp}
  nss=/usr/lib/x86_64-linux-gnu/libnss_wrapper.so
  [ -e "$nss" ] || nss=$(ls /usr/lib/*/libnss_wrapper.so 2>/dev/null | head -n1 || true)
  if [ -n "$nss" ] && [ -w "$tmp" ] && dir=$(mktemp -d "$tmp/lading-nss.XXXXXX" 2>/dev/null); then
    { getent passwd; echo "$user_name:x:$uid:$gid:lading (uid $uid):${HOME:-/tmp}:/usr/sbin/nologin"; } > "$dir/passwd"
    { getent group; getent group "$gid" >/dev/null || echo "$user_name:x:$gid:"; } > "$dir/group"
    export NSS_WRAPPER_PASSWD=$dir/passwd NSS_WRAPPER_GROUP=$dir/group
    export LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}$nss
  else
    echo "entrypoint: uid $uid has no passwd entry and $tmp is not writable: naming the user" \
         "'$user_name' through SPARK_USER/HADOOP_USER_NAME/user.name only" >&2
  fi
fi
if [ -n "$user_name" ]; then
  export SPARK_USER=${SPARK_USER:-$user_name} HADOOP_USER_NAME=${HADOOP_USER_NAME:-$user_name}
fi
# HOME must be writable for anything that caches under it (Ivy, Python): the image's HOME is /tmp.
if [ ! -w "${HOME:-/nonexistent}" ]; then export HOME=${TMPDIR:-/tmp}; fi

# --- the classpath Spark's pods expect: the extra classpath (spark.{driver,executor}.extraClassPath
# reaches the pod as SPARK_CLASSPATH), SPARK_EXTRA_CLASSPATH, the Hadoop conf dir, then Spark's jars.
classpath=${SPARK_CLASSPATH:-}
[ -n "${SPARK_EXTRA_CLASSPATH:-}" ] && classpath=${classpath:+$classpath:}$SPARK_EXTRA_CLASSPATH
[ -n "${HADOOP_CONF_DIR:-}" ] && classpath=$HADOOP_CONF_DIR${classpath:+:$classpath}
classpath=${classpath:+$classpath:}$SPARK_HOME/jars/*
[ -n "${SPARK_DIST_CLASSPATH:-}" ] && classpath=$classpath:$SPARK_DIST_CLASSPATH

# SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... (one JVM option each, in their numeric order)
java_opts=()
for i in $(compgen -e | sed -n 's/^SPARK_JAVA_OPT_\([0-9][0-9]*\)$/\1/p' | sort -n); do
  name=SPARK_JAVA_OPT_$i
  java_opts+=("${!name}")
done
[ -n "${SPARK_USER:-}" ] && java_opts+=("-Duser.name=$SPARK_USER")

case "${1:-}" in
  driver)
    shift
    : "${SPARK_DRIVER_BIND_ADDRESS:?the driver pod needs SPARK_DRIVER_BIND_ADDRESS (Spark sets it to the pod IP)}"
    export SPARK_CLASSPATH=$classpath
    driver_opts="${java_opts[*]:-}"
    cmd=("$SPARK_HOME/bin/spark-submit"
         --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS"
         --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS")
    [ -n "${SPARK_USER:-}" ] && cmd+=(--conf "spark.executorEnv.SPARK_USER=$SPARK_USER")
    [ -n "$driver_opts" ] && export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:+$SPARK_SUBMIT_OPTS }$driver_opts"
    cmd+=(--deploy-mode client "$@")
    # lading's driver wrapper (spark_apps/lading_jobs/driver_pod.py): passes spark-submit's log
    # through and puts what Kubernetes refused the driver (a Role's missing permission, a quota)
    # into the termination message when the driver fails; the exit code stays spark-submit's.
    if [ -z "${LADING_DRIVER_WRAPPER_OFF:-}" ] && python -c "import lading_jobs.driver_pod" 2>/dev/null; then
      cmd=(python -m lading_jobs.driver_pod "${cmd[@]}")
    fi
    ;;
  executor)
    shift
    for var in SPARK_DRIVER_URL SPARK_EXECUTOR_ID SPARK_EXECUTOR_CORES SPARK_EXECUTOR_MEMORY \
               SPARK_APPLICATION_ID SPARK_EXECUTOR_POD_IP; do
      [ -n "${!var:-}" ] || { echo "entrypoint: executor: $var is not set (Spark's executor pods set it)" >&2; exit 64; }
    done
    [ -n "${SPARK_EXECUTOR_LIBRARY_PATH:-}" ] && export LD_LIBRARY_PATH=$SPARK_EXECUTOR_LIBRARY_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    cmd=("$JAVA_HOME/bin/java" "${java_opts[@]}"
         "-Xms$SPARK_EXECUTOR_MEMORY" "-Xmx$SPARK_EXECUTOR_MEMORY"
         -cp "$classpath"
         org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
         --driver-url "$SPARK_DRIVER_URL"
         --executor-id "$SPARK_EXECUTOR_ID"
         --cores "$SPARK_EXECUTOR_CORES"
         --app-id "$SPARK_APPLICATION_ID"
         --hostname "$SPARK_EXECUTOR_POD_IP"
         --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}")
    [ -n "${SPARK_EXECUTOR_POD_NAME:-}" ] && cmd+=(--podName "$SPARK_EXECUTOR_POD_NAME")
    cmd+=("$@")
    ;;
  "")
    echo "entrypoint: no command (use driver, executor, or a program to run)" >&2
    exit 64
    ;;
  *)
    cmd=("$@")
    ;;
esac

exec "${cmd[@]}"
