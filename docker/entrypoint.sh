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

# --- the image's class-data-sharing archive of Spark's classes (docs/install.md#the-image): made at
# build time by a small local Spark run through this script's driver mode (docker/spark_cds.sh);
# the driver's and the executor's JVMs map it instead of parsing and verifying some ten thousand
# classes from Spark's jars at every start. A JVM maps it only where its class path begins with
# the jars it was made from, in the same order: `jars/*` is expanded in directory order, which
# differs between filesystems (the build's, a node's), so with the archive on, Spark's jars are
# named one by one (slf4j-api first, as Spark's launcher puts it, then in C order). -Xshare:auto:
# a JVM that cannot map it (another JDK, other jars, another class path) runs as without it, its
# CDS warnings on stderr. LADING_SPARK_CDS=0 turns it off (the class path is then Spark's own).
cds_archive=/opt/lading/cds/spark.jsa
cds_opts=()
spark_jars=$SPARK_HOME/jars/*
spark_jar_list() {
  local LC_ALL=C jar first=() rest=()
  for jar in "$SPARK_HOME"/jars/*.jar; do
    case ${jar##*/} in slf4j-api-*) first+=("$jar") ;; *) rest+=("$jar") ;; esac
  done
  local IFS=:
  echo "${first[*]}${first:+${rest:+:}}${rest[*]}"
}
if [ -n "${LADING_SPARK_CDS_DUMP:-}" ]; then  # the image build (docker/spark_cds.sh) makes the archive
  spark_jars=$(spark_jar_list)
  cds_opts=("-XX:ArchiveClassesAtExit=$LADING_SPARK_CDS_DUMP" "-Xlog:cds*=off" "-Xlog:cds*=warning:stderr")
elif [ "${LADING_SPARK_CDS:-1}" != 0 ] && [ -r "$cds_archive" ]; then
  spark_jars=$(spark_jar_list)
  cds_opts=("-XX:SharedArchiveFile=$cds_archive" "-Xshare:auto" "-Xlog:cds*=off" "-Xlog:cds*=warning:stderr")
fi

# --- the classpath Spark's pods expect: the extra classpath (spark.{driver,executor}.extraClassPath
# reaches the pod as SPARK_CLASSPATH), SPARK_EXTRA_CLASSPATH, the Hadoop conf dir, then Spark's jars.
classpath=${SPARK_CLASSPATH:-}
[ -n "${SPARK_EXTRA_CLASSPATH:-}" ] && classpath=${classpath:+$classpath:}$SPARK_EXTRA_CLASSPATH
[ -n "${HADOOP_CONF_DIR:-}" ] && classpath=$HADOOP_CONF_DIR${classpath:+:$classpath}
jars_first=${classpath:+no}
classpath=${classpath:+$classpath:}$spark_jars
[ -n "${SPARK_DIST_CLASSPATH:-}" ] && classpath=$classpath:$SPARK_DIST_CLASSPATH

# SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... (one JVM option each, in their numeric order)
java_opts=()
for i in $(compgen -e | sed -n 's/^SPARK_JAVA_OPT_\([0-9][0-9]*\)$/\1/p' | sort -n); do
  name=SPARK_JAVA_OPT_$i
  java_opts+=("${!name}")
done
[ -n "${SPARK_USER:-}" ] && java_opts+=("-Duser.name=$SPARK_USER")

# is RELATIVE a file under one of PYTHONPATH's directories (an empty entry: the working directory)?
on_python_path() {
  local dir dirs=()
  IFS=: read -ra dirs <<< "${PYTHONPATH:-}"
  for dir in "${dirs[@]}"; do [ -f "${dir:-.}/$1" ] && return 0; done
  return 1
}
# does the driver's spark-submit get an extra class path of its own (its arguments, its properties
# file, or spark-defaults.conf in the conf dir)?
driver_sets_class_path() {
  local arg prev="" files=("${SPARK_CONF_DIR:-$SPARK_HOME/conf}/spark-defaults.conf")
  for arg in "$@"; do
    case $arg in --driver-class-path|--driver-class-path=*|*spark.driver.extraClassPath*) return 0 ;; esac
    [ "$prev" = --properties-file ] && files+=("$arg")
    case $arg in --properties-file=*) files+=("${arg#*=}") ;; esac
    prev=$arg
  done
  for arg in "${files[@]}"; do
    [ -f "$arg" ] && grep -q 'spark\.driver\.extraClassPath' "$arg" && return 0
  done
  return 1
}
# is a file in the conf dir also at the root of a Spark jar (the build lists those names)?
conf_dir_shadowed() {
  local file names=/opt/lading/cds/jar-root-names
  [ -r "$names" ] || return 0
  for file in "${SPARK_CONF_DIR:-$SPARK_HOME/conf}"/*; do
    [ -f "$file" ] && grep -qxF "${file##*/}" "$names" && return 0
  done
  return 1
}

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
    # The archive, for the driver's JVM (spark-submit's launcher builds its class path: the driver's
    # extra class path, SPARK_CONF_DIR, then jars/*): Spark's jars one by one as the driver's extra
    # class path, so that they come first, before the conf dir (which the archive cannot have before
    # them: Spark mounts its properties there). Not where the driver has an extra class path of its
    # own (it must stay first), nor where a file in the conf dir is also at the root of a Spark jar
    # (the jars now come first, and would shadow it).
    if [ ${#cds_opts[@]} -gt 0 ] && ! driver_sets_class_path "$@" && ! conf_dir_shadowed; then
      cmd+=(--conf "spark.driver.extraClassPath=$spark_jars")
      export SPARK_SUBMIT_OPTS="${cds_opts[*]}${SPARK_SUBMIT_OPTS:+ $SPARK_SUBMIT_OPTS}"  # theirs win
    fi
    [ -n "$driver_opts" ] && export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:+$SPARK_SUBMIT_OPTS }$driver_opts"
    cmd+=(--deploy-mode client "$@")
    # lading's driver wrapper (spark_apps/lading_jobs/driver_pod.py): passes spark-submit's log
    # through and puts what Kubernetes refused the driver (a Role's missing permission, a quota)
    # into the termination message when the driver fails; the exit code stays spark-submit's.
    # Where PYTHONPATH has the module (a file test, not an interpreter start).
    if [ -z "${LADING_DRIVER_WRAPPER_OFF:-}" ] && on_python_path lading_jobs/driver_pod.py; then
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
    # the archive where Spark's jars begin the class path (nothing of the pod's own before them)
    [ -z "$jars_first" ] || cds_opts=()
    cmd=("$JAVA_HOME/bin/java" "${cds_opts[@]}" "${java_opts[@]}"
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
