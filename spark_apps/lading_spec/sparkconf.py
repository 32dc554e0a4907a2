"""``spec.spark.sparkConf``: the Spark properties a tenant may set.

Spark has hundreds of properties and adds more each release; many of them change
where or as whom a job runs (``spark.kubernetes.namespace``,
``spark.kubernetes.authenticate.*``, a pod template), what code it loads
(``spark.jars`` from a URL, ``spark.plugins``, ``-javaagent:`` in
``extraJavaOptions``) or what a query may reach (``spark.sql.runSQLOnFiles``). A
list of bad keys would miss the next one, so two lists decide, in this order:

1. **never allowed** (:func:`never_allowed`), whatever any policy says: keys that
   change the namespace, the identity (service account, credentials, secrets,
   Kerberos, ``AWS_*`` environment), the image or pod template, that mount the
   node's filesystem, that download or load code from outside the image
   (``spark.jars``/``files``/``archives``/``submit.pyFiles`` entries other than
   ``local://``, ``spark.jars.packages`` and repositories, Python interpreters,
   JVM options outside the allow-list of :mod:`lading_spec.jvmoptions`,
   ``JAVA_TOOL_OPTIONS``/``LD_PRELOAD`` environment ...), the sandbox settings (:data:`SANDBOX_CONF`),
   pod annotations that set security (AppArmor, seccomp, any ``*.security.*`` key:
   :func:`security_annotation`, which Pod Security "restricted" checks only in part), and keys that
   duplicate a ``spec.spark`` field (the error names the field);
2. **safe** (:func:`is_safe`): tuning that changes how fast or how big, never
   where, as whom or what code (:data:`SAFE_KEYS`, :data:`SAFE_PREFIXES`). The
   operator accepts these everywhere; anything else only where the cluster
   admin's policy allows it for the namespace (``lading_operator.policy``).

Keys are ``spark.`` followed by letters, digits and ``. _ - /``: a key holding
``=`` would be split by spark-submit (``--conf k=v``) into another key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lading_spec import envvars, jvmoptions
from lading_spec.errors import SpecError

FIELD = "spark.sparkConf"
SANDBOX_CONF: dict[str, str] = {
    "spark.sql.runSQLOnFiles": "false",
    "spark.sql.variable.substitute": "false",
}
UI_CONF: dict[str, str] = {
    "spark.ui.killEnabled": "false",
}
"""Set on every SparkApplication lading renders, after the spec's own (``lading_operator.render``), and
never another value: the driver's UI and REST API answer whoever reaches them, and with kills enabled
a GET there stops the job's stages."""
KEY = re.compile(r"^spark\.[A-Za-z0-9._/-]+$")
MAX_KEYS = 64
MAX_VALUE = 4096

UNLOAD_PATH = "spark.lading.unload.path"
"""Spark setting choosing the unload's path: ``auto`` (default), ``arrow`` (fail if the copy
needs SQL), ``spark`` (docs/copyjob.md, "Two paths")."""

# Tuning: how fast and how big, never where, as whom or what code.
SAFE_KEYS = frozenset({
    "spark.default.parallelism", "spark.sql.shuffle.partitions", "spark.sql.files.maxPartitionBytes",
    "spark.sql.files.openCostInBytes", "spark.sql.files.minPartitionNum", "spark.sql.files.maxPartitionNum",
    "spark.sql.autoBroadcastJoinThreshold", "spark.sql.broadcastTimeout", "spark.sql.session.timeZone",
    "spark.sql.ansi.enabled", "spark.sql.caseSensitive", "spark.sql.execution.arrow.maxRecordsPerBatch",
    "spark.sql.join.preferSortMergeJoin", "spark.sql.mapKeyDedupPolicy", "spark.sql.timestampType",
    "spark.sql.inMemoryColumnarStorage.batchSize", "spark.sql.limit.scaleUpFactor",
    "spark.executor.memoryOverhead", "spark.driver.memoryOverhead", "spark.executor.memoryOverheadFactor",
    "spark.driver.memoryOverheadFactor", "spark.kubernetes.memoryOverheadFactor", "spark.memory.fraction",
    "spark.memory.storageFraction", "spark.memory.offHeap.enabled", "spark.memory.offHeap.size",
    "spark.executor.pyspark.memory", "spark.python.worker.memory", "spark.python.worker.reuse",
    "spark.network.timeout", "spark.executor.heartbeatInterval", "spark.task.maxFailures", "spark.task.cpus",
    "spark.stage.maxConsecutiveAttempts", "spark.speculation", "spark.locality.wait",
    "spark.kubernetes.executor.request.cores", "spark.kubernetes.executor.limit.cores",
    "spark.kubernetes.driver.request.cores", "spark.kubernetes.driver.limit.cores",
    "spark.kubernetes.allocation.batch.size", "spark.kubernetes.allocation.batch.delay",
    "spark.shuffle.compress", "spark.shuffle.spill.compress", "spark.shuffle.file.buffer",
    "spark.reducer.maxSizeInFlight", "spark.kryoserializer.buffer", "spark.kryoserializer.buffer.max",
    "spark.rpc.message.maxSize", "spark.driver.maxResultSize",
    UNLOAD_PATH,  # which unload path runs; both write the same rows
})


def unload_path_value(value: object) -> str:
    """An ``UNLOAD_PATH`` value as the job reads it (unset or empty: ``auto``; trimmed, lower
    case); whether it is one of the three is the job's check. The operator reads it alike."""
    return (str(value) if value not in (None, "") else "auto").strip().lower()


SAFE_PREFIXES = ("spark.sql.adaptive.", "spark.sql.cbo.", "spark.sql.optimizer.", "spark.sql.codegen.",
                 "spark.sql.parquet.", "spark.sql.csv.", "spark.sql.json.", "spark.speculation.",
                 "spark.dynamicAllocation.", "spark.locality.wait.")
# Inside the safe prefixes, a key naming a class loads code: never safe.
_CLASS_KEY = re.compile(r"(class|classes|plugins|extensions|listeners|manager|provider|factory)$", re.I)

# spec.spark fields: the key would fight the field (and the field is what the policy checks).
SPEC_FIELDS = {
    "spark.driver.memory": "spark.driver.memory", "spark.driver.cores": "spark.driver.cores",
    "spark.executor.memory": "spark.executor.memory", "spark.executor.cores": "spark.executor.cores",
    "spark.executor.instances": "spark.executor.instances",
    "spark.kubernetes.container.image": "spark.image", "spark.kubernetes.driver.container.image": "spark.image",
    "spark.kubernetes.executor.container.image": "spark.image",
    "spark.kubernetes.container.image.pullPolicy": "spark.imagePullPolicy",
    "spark.kubernetes.container.image.pullSecrets": "spark.imagePullPolicy (pull secrets come from the chart)",
}
# (prefix or exact key, why). A prefix ends with "." (or is a family such as "spark.kubernetes.driverEnv.AWS_").
NEVER: tuple[tuple[str, str], ...] = (
    ("spark.kubernetes.namespace", "it moves the job to another namespace"),
    ("spark.master", "it sends the job to another cluster"),
    ("spark.submit.deployMode", "it changes where the driver runs"),
    ("spark.kubernetes.driver.master", "it sends the job to another API server"),
    ("spark.kubernetes.context", "it sends the job to another cluster"),
    ("spark.kubernetes.authenticate.", "it changes the identity the job runs as; use spec.spark.serviceAccount"),
    ("spark.kubernetes.driver.secrets.", "it mounts other Secrets; name one in spec.connection.secretRef"),
    ("spark.kubernetes.executor.secrets.", "it mounts other Secrets; name one in spec.connection.secretRef"),
    ("spark.kubernetes.driver.secretKeyRef.", "it reads other Secrets; name one in spec.connection.secretRef"),
    ("spark.kubernetes.executor.secretKeyRef.", "it reads other Secrets; name one in spec.connection.secretRef"),
    ("spark.kubernetes.kerberos.", "it changes the identity the job runs as"),
    ("spark.kerberos.", "it changes the identity the job runs as"),
    ("spark.kubernetes.hadoop.", "it mounts configuration and credentials from elsewhere"),
    ("spark.hadoop.", "Hadoop filesystems and their credentials are not used by lading"),
    ("spark.kubernetes.driver.volumes.hostPath.", "it mounts the node's filesystem"),
    ("spark.kubernetes.executor.volumes.hostPath.", "it mounts the node's filesystem"),
    ("spark.kubernetes.driver.volumes.nfs.", "Pod Security restricted allows no NFS volume; use a PersistentVolumeClaim"),
    ("spark.kubernetes.executor.volumes.nfs.", "Pod Security restricted allows no NFS volume; use a PersistentVolumeClaim"),
    ("spark.kubernetes.driver.podTemplateFile", "a pod template can change the image, identity and mounts"),
    ("spark.kubernetes.executor.podTemplateFile", "a pod template can change the image, identity and mounts"),
    ("spark.kubernetes.driver.podTemplateContainerName", "a pod template can change the image and identity"),
    ("spark.kubernetes.executor.podTemplateContainerName", "a pod template can change the image and identity"),
    ("spark.kubernetes.driver.pod.name", "it names a pod lading does not own"),
    ("spark.kubernetes.file.upload.path", "it uploads files to storage lading does not check"),
    ("spark.driver.extraClassPath", "it loads code from outside the image's classpath"),
    ("spark.executor.extraClassPath", "it loads code from outside the image's classpath"),
    ("spark.driver.extraLibraryPath", "it loads native code from another path"),
    ("spark.executor.extraLibraryPath", "it loads native code from another path"),
    ("spark.jars.packages", "it downloads code from the Internet; build it into the image"),
    ("spark.jars.repositories", "it downloads code from the Internet; build it into the image"),
    ("spark.jars.ivy", "it downloads code from the Internet; build it into the image"),
    ("spark.jars.ivySettings", "it downloads code from the Internet; build it into the image"),
    ("spark.pyspark.python", "it runs another Python interpreter"),
    ("spark.pyspark.driver.python", "it runs another Python interpreter"),
    ("spark.kubernetes.pyspark.pythonVersion", "it runs another Python interpreter"),
    ("spark.redaction.", "it changes what Spark hides from its logs and UI"),
    ("spark.sql.redaction.", "it changes what Spark hides from its logs and UI"),
)
# Spark sets the rest of the key as an annotation of the driver's or executors' pods (or Service).
ANNOTATION_KEYS = ("spark.kubernetes.driver.annotation.", "spark.kubernetes.executor.annotation.",
                   "spark.kubernetes.driver.service.annotation.")
# An annotation key that sets a security profile: AppArmor (container.apparmor.security.beta.kubernetes.io/c),
# the legacy seccomp keys (seccomp.security.alpha.kubernetes.io/pod, container.seccomp.security...), and
# any key with a "security" label in its prefix or name (what the next mechanism will be called).
_SECURITY_ANNOTATION = re.compile(r"apparmor|seccomp|selinux|(^|[./])security([./-]|$)", re.I)
# Environment variables (spark.kubernetes.driverEnv.X, spark.executorEnv.X ...): lading_spec.envvars.
ENV_KEYS = envvars.ENV_KEYS
# Comma-separated lists of files: only local:// (inside the image) entries.
URL_LISTS = ("spark.jars", "spark.files", "spark.archives", "spark.submit.pyFiles")
# Every property whose value reaches a JVM's command line (compared ignoring case); each value
# must pass the JVM option allow-list (lading_spec.jvmoptions) whatever the policy says.
JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions",
                "spark.driver.defaultJavaOptions", "spark.executor.defaultJavaOptions",
                "spark.yarn.am.extraJavaOptions")
_JAVA_OPTIONS_LOWER = frozenset(k.lower() for k in JAVA_OPTIONS)


def never_allowed(key: str, value: str) -> str | None:
    """Why ``key = value`` may never be set (and what to do instead), or ``None``."""
    lowered = key.lower()
    if key in SANDBOX_CONF and value.strip().lower() != SANDBOX_CONF[key]:
        return f"must stay {SANDBOX_CONF[key]}: it keeps queries away from files and the environment; " \
               "remove the key (lading sets it)"
    ui = next((k for k in UI_CONF if k.lower() == lowered), None)
    if ui is not None and (key != ui or value.strip().lower() != UI_CONF[ui]):
        return (f"must stay {ui}={UI_CONF[ui]}: the Spark UI answers whoever reaches it, and with kills enabled "
                "it stops the job; remove the key (lading sets it)")
    if key in SPEC_FIELDS:
        return f"set spec.{SPEC_FIELDS[key]} instead"
    for pattern, why in NEVER:
        p = pattern.lower()
        if lowered == p or (p.endswith((".", "_")) and lowered.startswith(p)):
            return f"never allowed: {why}"
    annotation = security_annotation(key)
    if annotation is not None:
        return (f"never allowed: the pod annotation {annotation!r} sets the pods' security profile "
                "(AppArmor, seccomp), which lading keeps at Pod Security \"restricted\"")
    name = envvars.variable(key)
    if name is not None:
        refused = envvars.never_allowed(name)
        if refused:
            return refused
    if key in URL_LISTS:
        outside = [e.strip() for e in value.split(",") if e.strip() and not e.strip().startswith("local://")]
        if outside:
            return f"never allowed with {outside[0]!r}: only local:// files already in the image; " \
                   "build what you need into the image"
    if lowered in _JAVA_OPTIONS_LOWER:
        refused = jvmoptions.check_java_options(value)
        if refused:
            return refused
    return None


def security_annotation(key: str) -> str | None:
    """The annotation key ``key`` sets on the Spark pods when it sets a security profile, else ``None``
    (compared ignoring case: no spelling of the prefix slips by)."""
    lowered = key.lower()
    for prefix in ANNOTATION_KEYS:
        if lowered.startswith(prefix):
            annotation = key[len(prefix):]
            return annotation if _SECURITY_ANNOTATION.search(annotation) else None
    return None


def is_safe(key: str) -> bool:
    """A tuning property every namespace may set (see the module docstring)."""
    if key in SAFE_KEYS:
        return True
    return key.startswith(SAFE_PREFIXES) and not _CLASS_KEY.search(key.rsplit(".", 1)[-1])


def _text(value: Any) -> str:
    """A property's value as Spark reads it: a YAML boolean (unquoted ``true``, which ``lading run``
    accepts; the API server wants strings) as ``true``/``false``, not Python's ``True``."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def parse_spark_conf(raw: Any, field: str = FIELD) -> dict[str, str]:
    """Validate ``sparkConf`` and refuse what is never allowed; values become strings.

    Errors name ``spark.sparkConf.<key>`` and the fix. Whether a key outside the
    safe list is allowed depends on the namespace: that is the operator's policy.
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
        raise SpecError(field, "expected a mapping of Spark properties to values")
    if len(raw) > MAX_KEYS:
        raise SpecError(field, f"at most {MAX_KEYS} properties")
    conf = {k: _text(v) for k, v in raw.items()}
    for key, value in conf.items():
        if not KEY.match(key):
            raise SpecError(f"{field}.{key}", "expected a Spark property name: spark. followed by letters, "
                                              "digits, '.', '_', '-' or '/' (no '=', spaces or other characters)")
        if len(value) > MAX_VALUE or any(ord(c) < 32 and c != "\t" or ord(c) == 127 for c in value):
            raise SpecError(f"{field}.{key}", f"the value must be at most {MAX_VALUE} characters, "
                                              "without line breaks or control characters")
        why = never_allowed(key, value)
        if why:
            raise SpecError(f"{field}.{key}", why)
    return dict(sorted(conf.items()))


def check_spark_section(spark: Any) -> None:
    """What is never allowed in ``spec.spark`` (its ``sparkConf``), for every kind's parser.

    The operator validates the rest of ``spec.spark`` and applies the namespace's
    policy; this refuses the keys no policy can allow as early as possible
    (``lading run``, ``lading render``, the Spark app itself).
    """
    if isinstance(spark, Mapping):
        parse_spark_conf(spark.get("sparkConf"))
