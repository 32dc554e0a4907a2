"""Rendering: a resource's spec and the identity of one run → the SparkApplication dict.

Pure: the same inputs give the same object, so ``lading render`` shows exactly
what the operator would create, and a restarted operator re-derives the same
name. Building is separate from sending (see :mod:`lading_operator.k8s`).

The Spark app receives the job document (``--job <JSON>``, the contract of
:mod:`lading_spec.job`); credentials reach it only as the variables
:data:`CREDENTIAL_KEYS`, each read from its key of the Secret named in
``spec.connection.secretRef`` (never the Secret's other keys); the endpoint (as
``AWS_ENDPOINT_URL_S3``, which STS never reads) and region as plain env. Every pod
also gets ``LADING_FILE_PREFIXES``: the ``file://`` prefixes the namespace's policy
allows, the only local paths the job opens (:mod:`lading_spec.localfiles`; none by default).

What the installation decides (the Helm chart passes it to the operator as
environment, :func:`installation_from_env`): the image, its pull policy and pull
secrets, and the Spark ServiceAccount. A resource's ``spec.spark`` overrides the
image, pull policy and ServiceAccount; without the environment (``lading render`` on
a laptop) the chart's defaults apply.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from lading_operator import names, podsecurity, render_stream
from lading_spec import catalogs as catalogs_spec
from lading_spec import localfiles
from lading_spec.copyjob import OPERATOR_FIELDS
from lading_spec.errors import SpecError
from lading_spec.job import API_VERSION, JobDocument
from lading_spec.sparkconf import (
    JAVA_OPTIONS,
    SANDBOX_CONF,
    UI_CONF,
    UNLOAD_PATH,
    parse_spark_conf,
    unload_path_value,
)
from lading_spec.version import VERSION

SPARK_API_VERSION = "sparkoperator.k8s.io/v1beta2"
SPARK_KIND = "SparkApplication"
SPARK_GROUP, SPARK_VERSION_API = SPARK_API_VERSION.split("/")
SPARK_PLURAL = "sparkapplications"
# The Spark inside the image: the pyspark pinned in requirements.lock.
SPARK_VERSION = "4.3.0"
# The chart's defaults (values.yaml), used when the operator's environment does not say.
DEFAULT_IMAGE = f"ghcr.io/lading/lading:{VERSION}"
DEFAULT_SERVICE_ACCOUNT = "lading-spark"
# The environment the chart sets on the operator (charts/lading/templates/deployment.yaml).
ENV_IMAGE = "LADING_SPARK_IMAGE"
ENV_PULL_POLICY = "LADING_SPARK_IMAGE_PULL_POLICY"
ENV_PULL_SECRETS = "LADING_SPARK_IMAGE_PULL_SECRETS"
ENV_SERVICE_ACCOUNT = "LADING_SPARK_SERVICE_ACCOUNT"
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
# The endpoint variable botocore reads for S3 clients only (never the global AWS_ENDPOINT_URL).
ENDPOINT_ENV = "AWS_ENDPOINT_URL_S3"
# The keys of spec.connection.secretRef that reach the pods, each as a variable of its name.
CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", catalogs_spec.PASSWORD_ENV)
MAIN_APPLICATION_FILE = "local:///opt/lading/spark_apps/lading_jobs/main.py"

# Linux's MAX_ARG_STRLEN (32 pages): the longest single command-line argument, its
# terminating NUL included. The job document travels as one (--job <JSON>) through
# spark-submit and the image's entrypoint to the driver.
MAX_ARGUMENT_BYTES = 32 * 4096 - 1

# The JVMs of a copy that takes the Arrow-only path only schedule tasks and pipe bytes to
# Python workers: their code never runs long enough to repay the optimising (C2) compiler,
# which a fresh JVM otherwise runs for seconds of CPU. Measured in docs/benchmarks.md ("Warm
# and fresh JVMs"): about 19 CPU-s per 5 M-row export instead of 29, 0.5 s less wall clock.
FIRST_TIER_JVM = "-XX:TieredStopAtLevel=1"

# Spark (3.4 and later) makes the driver own its executors' on-demand volumes by default: each round
# of executor requests lists the application's PersistentVolumeClaims to reuse one, and the driver
# deletes them by label at stop. The chart's Spark Role grants no PersistentVolumeClaims unless
# spark.rbac.persistentVolumeClaims is set, so by default both calls were refused, the stop's with
# an ERROR and a stack trace in every driver log. Off unless the spec's sparkConf says otherwise
# (as the policy allows): an on-demand volume is then owned by its executor pod and deleted with it.
PVC_DEFAULTS: dict[str, str] = {
    "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",
    "spark.kubernetes.driver.reusePersistentVolumeClaim": "false",
}

LABEL_KIND = "lading.io/kind"
LABEL_NAME = "lading.io/name"
LABEL_RUN_ID = "lading.io/run-id"
LABEL_ATTEMPT = "lading.io/attempt"

# Spark's JavaUtils.byteStringAs (spark.driver.memory / spark.executor.memory): a whole
# number and an optional unit b, or k/m/g/t/p alone or followed by b, i or ib, any case
# (Spark 4); a bare number is MiB. No fractions.
_MEMORY = re.compile(r"^0*[1-9][0-9]*([kmgtpKMGTP]([bB]|[iI][bB]?)?|[bB])?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SPARK_KEYS = ("image", "imagePullPolicy", "serviceAccount", "sparkVersion", "driver", "executor", "sparkConf",
               "podSecurityContext", "securityContext")

# The Pod Security Standard "restricted", on driver and executor pods (spark-operator's
# mutating webhook applies these to the pods it and the driver create). A resource's
# spec.spark.podSecurityContext / securityContext is laid over them, never asking for more
# (lading_operator.podsecurity).
RESTRICTED_POD_SECURITY_CONTEXT = podsecurity.RESTRICTED_POD_SECURITY_CONTEXT
RESTRICTED_SECURITY_CONTEXT = podsecurity.RESTRICTED_SECURITY_CONTEXT
_ID_KEYS = ("runAsUser", "runAsGroup")
_POD_SC_KEYS = ("runAsNonRoot", *_ID_KEYS, "fsGroup", "supplementalGroups", "seccompProfile")
_SC_KEYS = ("runAsNonRoot", *_ID_KEYS, "allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities",
            "seccompProfile")
_SECCOMP_TYPES = ("RuntimeDefault", "Localhost", "Unconfined")


@dataclass(frozen=True)
class Installation:
    """What the installation (the chart) decides for every SparkApplication."""

    image: str = DEFAULT_IMAGE
    image_pull_policy: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    service_account: str = DEFAULT_SERVICE_ACCOUNT


def _image_ok(image: Any) -> bool:
    return isinstance(image, str) and bool(image) and not any(c.isspace() for c in image)


def installation_from_env(environ: Mapping[str, str] | None = None) -> Installation:
    """The chart's settings from the operator's environment; a bad value raises ``ValueError``
    naming the variable (the operator refuses to start)."""
    env = os.environ if environ is None else environ
    image = env.get(ENV_IMAGE) or DEFAULT_IMAGE
    if not _image_ok(image):
        raise ValueError(f"{ENV_IMAGE}: expected a container image reference, got {image!r}")
    policy = env.get(ENV_PULL_POLICY) or None
    if policy is not None and policy not in PULL_POLICIES:
        raise ValueError(f"{ENV_PULL_POLICY}: got {policy!r}; accepted: {', '.join(PULL_POLICIES)}")
    secrets = tuple(s.strip() for s in env.get(ENV_PULL_SECRETS, "").split(",") if s.strip())
    for secret in secrets:
        if not _NAME.match(secret):
            raise ValueError(f"{ENV_PULL_SECRETS}: {secret!r} is not a Secret name")
    account = env.get(ENV_SERVICE_ACCOUNT) or DEFAULT_SERVICE_ACCOUNT
    if not _NAME.match(account):
        raise ValueError(f"{ENV_SERVICE_ACCOUNT}: {account!r} is not a ServiceAccount name")
    return Installation(image=image, image_pull_policy=policy, image_pull_secrets=secrets,
                        service_account=account)


@dataclass(frozen=True)
class PodSize:
    cores: int
    memory: str
    instances: int = 1


@dataclass(frozen=True)
class SparkOptions:
    """``spec.spark``: where and how big the Spark application runs."""

    image: str = DEFAULT_IMAGE
    spark_version: str = SPARK_VERSION
    image_pull_policy: str | None = None
    service_account: str = DEFAULT_SERVICE_ACCOUNT
    driver: PodSize = PodSize(cores=1, memory="1g")
    executor: PodSize = PodSize(cores=1, memory="1g", instances=1)
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    image_pull_secrets: tuple[str, ...] = ()
    pod_security_context: Mapping[str, Any] = field(default_factory=lambda: RESTRICTED_POD_SECURITY_CONTEXT)
    security_context: Mapping[str, Any] = field(default_factory=lambda: RESTRICTED_SECURITY_CONTEXT)


@dataclass(frozen=True)
class RunIdentity:
    """Which resource and which run (and attempt) a SparkApplication belongs to."""

    kind: str
    namespace: str
    name: str
    uid: str
    generation: int
    run_id: str
    run_time: dt.datetime
    attempt: int = 1

    @property
    def app_name(self) -> str:
        return names.app_name(self.kind, self.name, self.run_id, self.attempt)


def _positive_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(path, f"expected a positive integer, got {value!r}")
    return value


def _pod_size(raw: Any, path: str, default: PodSize, executor: bool) -> PodSize:
    if raw is None:
        return default
    if not isinstance(raw, dict):
        raise SpecError(path, "expected a mapping with cores, memory" + (", instances" if executor else ""))
    known = ("cores", "memory", "instances") if executor else ("cores", "memory")
    for key in raw:
        if key not in known:
            raise SpecError(f"{path}.{key}", f"unknown field; accepted: {', '.join(known)}")
    memory = raw.get("memory", default.memory)
    if not isinstance(memory, str) or not _MEMORY.match(memory):
        raise SpecError(f"{path}.memory", f"expected a size as Spark reads it, such as 512m, 2g or 4Gi (a whole "
                        f"number: not 2.5g), got {memory!r}")
    return PodSize(
        cores=_positive_int(raw.get("cores", default.cores), f"{path}.cores"),
        memory=memory,
        instances=_positive_int(raw.get("instances", default.instances), f"{path}.instances"),
    )


def _security_context(raw: Any, path: str, keys: tuple[str, ...], default: Mapping[str, Any]
                      ) -> Mapping[str, Any]:
    """A (pod) securityContext from ``spec.spark``: the fields the CRD lists, checked, over the
    restricted defaults; a field asking for more than Pod Security "restricted" is refused."""
    if raw is None:
        return default
    if not isinstance(raw, dict):
        raise SpecError(path, f"expected a mapping with {', '.join(keys)}")
    for key, value in raw.items():
        where = f"{path}.{key}"
        if key not in keys:
            raise SpecError(where, f"unknown field; accepted: {', '.join(keys)}")
        if key in ("runAsNonRoot", "allowPrivilegeEscalation", "readOnlyRootFilesystem"):
            ok = isinstance(value, bool)
        elif key in (*_ID_KEYS, "fsGroup"):
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        elif key == "supplementalGroups":
            ok = isinstance(value, list) and all(isinstance(g, int) and not isinstance(g, bool) and g >= 0
                                                 for g in value)
        elif key == "capabilities":
            ok = isinstance(value, dict) and set(value) <= {"add", "drop"} and all(
                isinstance(v, list) and all(isinstance(c, str) and c for c in v) for v in value.values())
        else:  # seccompProfile
            ok = isinstance(value, dict) and value.get("type") in _SECCOMP_TYPES and set(value) <= {
                "type", "localhostProfile"} and (value["type"] == "Localhost") == ("localhostProfile" in value)
        if not ok:
            raise SpecError(where, f"invalid value {value!r} (see the Kubernetes {key} field)")
    return podsecurity.restricted(raw, path, pod_level=keys == _POD_SC_KEYS)


def parse_spark_options(raw: Any, installation: Installation | None = None) -> SparkOptions:
    """Validate ``spec.spark`` over the installation's defaults (by default from the
    environment, :func:`installation_from_env`); errors name the field (``spark.driver.memory``)."""
    install = installation or installation_from_env()
    defaults = SparkOptions(image=install.image, image_pull_policy=install.image_pull_policy,
                            service_account=install.service_account,
                            image_pull_secrets=install.image_pull_secrets)
    if raw is None:
        return defaults
    if not isinstance(raw, dict):
        raise SpecError("spark", "expected a mapping: image, serviceAccount, driver, executor, sparkConf")
    for key in raw:
        if key not in _SPARK_KEYS:
            raise SpecError(f"spark.{key}", f"unknown field; accepted: {', '.join(_SPARK_KEYS)}")
    image = raw.get("image", defaults.image)
    if not _image_ok(image):
        raise SpecError("spark.image", f"expected a container image reference, got {image!r}")
    policy = raw.get("imagePullPolicy", defaults.image_pull_policy)
    if policy is not None and policy not in PULL_POLICIES:
        raise SpecError("spark.imagePullPolicy", f"got {policy!r}; accepted: {', '.join(PULL_POLICIES)}")
    account = raw.get("serviceAccount", defaults.service_account)
    if not isinstance(account, str) or not _NAME.match(account):
        raise SpecError("spark.serviceAccount", f"expected a ServiceAccount name, got {account!r}")
    version = raw.get("sparkVersion", SPARK_VERSION)
    if not isinstance(version, str) or not re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)?", version):
        raise SpecError("spark.sparkVersion", f"expected a version such as 4.0.1, got {version!r}")
    conf = parse_spark_conf(raw.get("sparkConf"))
    return SparkOptions(
        image=image,
        spark_version=version,
        image_pull_policy=policy,
        service_account=account,
        driver=_pod_size(raw.get("driver"), "spark.driver", defaults.driver, executor=False),
        executor=_pod_size(raw.get("executor"), "spark.executor", defaults.executor, executor=True),
        spark_conf=conf,
        image_pull_secrets=defaults.image_pull_secrets,
        pod_security_context=_security_context(raw.get("podSecurityContext"), "spark.podSecurityContext",
                                               _POD_SC_KEYS, defaults.pod_security_context),
        security_context=_security_context(raw.get("securityContext"), "spark.securityContext",
                                           _SC_KEYS, defaults.security_context),
    )


def job_spec(spec: Mapping[str, Any], operator_fields: Collection[str] = OPERATOR_FIELDS) -> dict[str, Any]:
    """The part of the spec the Spark app needs (the kind's operator-only fields dropped)."""
    return {k: v for k, v in spec.items() if k not in operator_fields}


def job_document_of(app: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The job document a SparkApplication was rendered with (its ``--job`` argument, parsed), if
    readable."""
    arguments = ((app or {}).get("spec") or {}).get("arguments") or []
    for flag, value in zip(arguments, arguments[1:], strict=False):
        if flag == "--job" and isinstance(value, str):
            try:
                document = json.loads(value)
            except ValueError:
                return None
            return document if isinstance(document, dict) else None
    return None


def job_document(spec: Mapping[str, Any], run: RunIdentity,
                 operator_fields: Collection[str] = OPERATOR_FIELDS) -> JobDocument:
    """The job document of one run; ``run.kind`` tells the Spark app which engine runs it."""
    return JobDocument(kind=run.kind, namespace=run.namespace, name=run.name, uid=run.uid,
                       generation=run.generation, run_id=run.run_id, run_time=run.run_time,
                       spec=job_spec(spec, operator_fields))


def _largest_part(node: Any, path: str) -> tuple[str, int]:
    """The field that takes the most room in ``node``'s JSON: descend into mappings and
    lists of mappings; stop at strings and lists of scalars (a fileList)."""
    if isinstance(node, dict) and node:
        key = max(node, key=lambda k: len(json.dumps(node[k])))
        return _largest_part(node[key], f"{path}.{key}" if path else str(key))
    if isinstance(node, list) and node and all(isinstance(v, dict) for v in node):
        i = max(range(len(node)), key=lambda j: len(json.dumps(node[j])))
        return _largest_part(node[i], f"{path}[{i}]")
    return path, len(json.dumps(node))


def _argument_fits(argument: str, spec: Mapping[str, Any], operator_fields: Collection[str]) -> None:
    size = len(argument.encode())
    if size <= MAX_ARGUMENT_BYTES:
        return
    field_path, part = _largest_part(job_spec(spec, operator_fields), "")
    raise SpecError(field_path, f"the job document would be {size:,} bytes, more than the {MAX_ARGUMENT_BYTES:,} "
                    "a command-line argument may hold on Linux (the Spark driver receives the job as one); "
                    f"this field takes {part:,} bytes of it: shorten it (for a long fileList, give a prefix "
                    "in files with a pattern instead)")


def check_job_size(spec: Mapping[str, Any], operator_fields: Collection[str] = OPERATOR_FIELDS) -> None:
    """Refuse a spec whose job document could not be passed to the driver, for any run
    (``SpecError`` naming the largest field); what the operator checks before a run.
    ``operator_fields``: the kind's fields that stay out of the document (CopyJob's by default)."""
    # The longest identity a run can have (name, namespace, uid, generation, run id), so that
    # a spec that fits now fits whatever run it is rendered for.
    widest = JobDocument(kind="Compaction", namespace="n" * 63, name="n" * 253, uid="u" * 36,
                         generation=2**63 - 1, run_id="r" * 63,
                         run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), spec=job_spec(spec, operator_fields))
    _argument_fits(widest.to_json(), spec, operator_fields)


def labels(run: RunIdentity) -> dict[str, str]:
    return {
        LABEL_KIND: run.kind,
        LABEL_NAME: names.label_value(run.name),
        LABEL_RUN_ID: names.label_value(run.run_id),
        LABEL_ATTEMPT: str(run.attempt),
    }


def _env(spec: Mapping[str, Any], file_prefixes: Collection[str], catalogs: str = "") -> list[dict[str, Any]]:
    connection = spec.get("connection") or {}
    # Always set: the job in a pod opens file:// only under these (an empty list: none).
    env: list[dict[str, Any]] = [{"name": localfiles.PREFIXES_ENV,
                                  "value": localfiles.render_prefixes(list(file_prefixes))}]
    if catalogs:  # the Iceberg catalogs the namespace may use (declarations, no credential)
        env.append({"name": catalogs_spec.ENV, "value": catalogs})
    if connection.get("endpoint"):
        # S3 only: botocore also sends STS calls (AssumeRoleWithWebIdentity, with the
        # pod's IRSA token) to the global AWS_ENDPOINT_URL, i.e. to the tenant's server.
        env.append({"name": ENDPOINT_ENV, "value": str(connection["endpoint"])})
    if connection.get("region"):
        env.append({"name": "AWS_REGION", "value": str(connection["region"])})
    secret = (connection.get("secretRef") or {}).get("name")
    if secret:
        # Only the credentials, each by name: the Secret's other keys (BASH_ENV, LD_PRELOAD,
        # AWS_ENDPOINT_URL...) never become variables of the pods (envFrom would make them so).
        env += [{"name": key, "valueFrom": {"secretKeyRef": {"name": str(secret), "key": key, "optional": True}}}
                for key in CREDENTIAL_KEYS]
    return env


def arrow_only_copy(kind: str, spec: Mapping[str, Any], spark_conf: Mapping[str, str]) -> bool:
    """Whether a run will take the unload's Arrow-only path by what the spec alone shows:
    a CopyJob from files or a table (no query) to files, the path not forced to Spark.
    (A ``partitionBy`` column of a type that path cannot split by still runs on Spark SQL,
    correct but with first-tier JVM code.) A resource that sets JVM options itself keeps
    exactly its own."""
    source, target = spec.get("from"), spec.get("to")
    if kind != "CopyJob" or not isinstance(source, Mapping) or not isinstance(target, Mapping):
        return False
    if "query" in source or not {"files", "fileList", "table"} & set(source) or "files" not in target:
        return False
    if unload_path_value(spark_conf.get(UNLOAD_PATH)) == "spark":
        return False
    return not any(k in spark_conf for k in JAVA_OPTIONS)


def build_sparkapplication(spec: Mapping[str, Any], run: RunIdentity,
                           options: SparkOptions | None = None,
                           operator_fields: Collection[str] = OPERATOR_FIELDS,
                           installation: Installation | None = None,
                           continuous: bool = False, file_prefixes: Collection[str] = (),
                           catalogs: str = "") -> dict[str, Any]:
    """The SparkApplication for one attempt of one run of a resource (pure, given the
    installation; by default that is read from the environment).

    ``operator_fields``: the spec fields of ``run.kind`` that stay out of the job
    document (CopyJob's by default; see :mod:`lading_operator.kinds`).
    ``continuous``: a kind kept running (StreamCopy): see :mod:`lading_operator.render_stream`.
    ``file_prefixes``: the ``file://`` prefixes the namespace's policy allows
    (``Policy.file_prefixes_for``); the job opens no other local path. ``catalogs``: the
    Iceberg catalogs it may use (``Policy.catalogs_env``), as the job's ``LADING_CATALOGS``.
    """
    options = options or parse_spark_options(spec.get("spark"), installation)
    document = job_document(spec, run, operator_fields).to_json()
    _argument_fits(document, spec, operator_fields)
    lbls = labels(run)
    env = _env(spec, file_prefixes, catalogs)

    def pod(size: PodSize, executor: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"cores": size.cores, "memory": size.memory, "labels": dict(lbls),
                               "serviceAccount": options.service_account,
                               "podSecurityContext": copy.deepcopy(dict(options.pod_security_context)),
                               "securityContext": copy.deepcopy(dict(options.security_context))}
        if executor:
            out["instances"] = size.instances
        out["env"] = copy.deepcopy(env)
        return out

    app_spec: dict[str, Any] = {
        "type": "Python",
        "pythonVersion": "3",
        "mode": "cluster",
        "image": options.image,
        "mainApplicationFile": MAIN_APPLICATION_FILE,
        "arguments": ["--job", document],
        "sparkVersion": options.spark_version,
        # Retries are ours (spec.backoffLimit): each attempt is a new SparkApplication.
        "restartPolicy": {"type": "Never"},
        "driver": pod(options.driver, executor=False),
        "executor": pod(options.executor, executor=True),
    }
    if arrow_only_copy(run.kind, spec, options.spark_conf):
        app_spec["driver"]["javaOptions"] = app_spec["executor"]["javaOptions"] = FIRST_TIER_JVM
    if options.image_pull_policy:
        app_spec["imagePullPolicy"] = options.image_pull_policy
    if options.image_pull_secrets:
        app_spec["imagePullSecrets"] = list(options.image_pull_secrets)
    # The sandbox settings come last: a query reads only its inputs (lading_jobs.sandbox).
    # ... and the UI's kill links and kill REST calls off (UI_CONF), whatever the spec asked.
    app_spec["sparkConf"] = {**PVC_DEFAULTS, **options.spark_conf, **SANDBOX_CONF, **UI_CONF}
    if continuous:
        app_spec = render_stream.continuous_spec(app_spec, spec)
    return {
        "apiVersion": SPARK_API_VERSION,
        "kind": SPARK_KIND,
        "metadata": {
            "name": run.app_name,
            "namespace": run.namespace,
            "labels": lbls,
            "ownerReferences": [{
                "apiVersion": API_VERSION,
                "kind": run.kind,
                "name": run.name,
                "uid": run.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }],
        },
        "spec": app_spec,
    }
