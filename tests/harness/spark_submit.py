"""spark-operator's way of submitting a SparkApplication, for the stand-in's ``k8s`` mode.

spark-operator (kubeflow/spark-operator v2, ``internal/controller/sparkapplication/submission.go``)
turns a SparkApplication into one ``spark-submit --master k8s://... --deploy-mode cluster`` run
and then follows the driver pod (``controller.go``, ``driver state``). This module is that
mapping, pure and testable without a cluster:

- :func:`submit_args`: the spark-submit arguments spark-operator derives from the spec: name,
  namespace, image (driver/executor image, pull policy, pull secrets), python version, memory
  overhead factor, ``waitAppCompletion=false``, every ``sparkConf`` and ``hadoopConf``
  (``spark.hadoop.``) entry, the driver pod name ``<app>-driver``, driver and executor cores,
  core request/limit, memory, memory overhead, instances, service account, java options,
  labels (the application's, the pod's own and spark-operator's ``sparkoperator.k8s.io/app-name``,
  ``launched-by-spark-operator``, ``submission-id``, ``mutated-by-spark-operator``), annotations,
  ``envVars``, node selectors, then the main application file and the arguments.
- :func:`pod_templates`: what spark-operator's *mutating webhook* patches into the pods Spark
  creates (``env`` with ``valueFrom``, ``envFrom``, security contexts, volumes and mounts,
  tolerations, affinity, ``ports``, owner reference of the driver). Here these go into Spark pod
  template files (``spark.kubernetes.{driver,executor}.podTemplateFile``), which Spark merges into
  the pods it builds: the same pods, without running a webhook server.
- :func:`application_state`: the application's state from the driver pod, as spark-operator
  derives it: Pending -> SUBMITTED, Running -> RUNNING, Succeeded -> SUCCEEDING (then COMPLETED),
  Failed -> FAILING (then FAILED) with ``driver container failed with ExitCode: N, Reason: R``,
  the pod gone -> FAILING with ``driver pod not found``.

Not followed: ``deps`` (jars, packages, files: lading's image carries everything), ``proxyUser``,
Kerberos, ``dynamicAllocation``, ``monitoring``, ``batchScheduler``, driver ingress/UI services,
``timeToLiveSeconds``, ``volumes`` of kinds other than emptyDir/hostPath/configMap/secret/
projected through templates, the REST/gRPC submitters and spark-operator's leader election.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]
API = "sparkoperator.k8s.io/v1beta2"
LABEL_APP_NAME = "sparkoperator.k8s.io/app-name"
LABEL_LAUNCHED = "sparkoperator.k8s.io/launched-by-spark-operator"
LABEL_SUBMISSION = "sparkoperator.k8s.io/submission-id"
LABEL_MUTATED = "sparkoperator.k8s.io/mutated-by-spark-operator"
DRIVER_CONTAINER = "spark-kubernetes-driver"
EXECUTOR_CONTAINER = "spark-kubernetes-executor"
# What the webhook copies from spec.driver / spec.executor into the Spark container and its pod.
CONTAINER_FIELDS = ("env", "envFrom", "securityContext", "volumeMounts", "ports")
POD_FIELDS = {"podSecurityContext": "securityContext", "tolerations": "tolerations", "affinity": "affinity",
              "hostNetwork": "hostNetwork", "schedulerName": "schedulerName", "dnsConfig": "dnsConfig",
              "terminationGracePeriodSeconds": "terminationGracePeriodSeconds",
              "priorityClassName": "priorityClassName"}


def driver_pod_name(app: Mapping[str, Any]) -> str:
    """``spec.driver.podName``, else ``<app>-driver`` (spark-operator's ``GetDriverPodName``)."""
    driver = (app.get("spec") or {}).get("driver") or {}
    return str(driver.get("podName") or f"{app['metadata']['name']}-driver")


def _conf(key: str, value: Any) -> list[str]:
    if isinstance(value, bool):
        value = str(value).lower()
    return ["--conf", f"{key}={value}"]


def _role_conf(app: Mapping[str, Any], role: str, submission_id: str) -> list[str]:
    """The ``driverConfOption`` / ``executorConfOption`` part for ``role`` (driver or executor)."""
    spec = app.get("spec") or {}
    pod = spec.get(role) or {}
    name = app["metadata"]["name"]
    prefix = f"spark.kubernetes.{role}"
    args: list[str] = []
    labels = {LABEL_APP_NAME: name, LABEL_LAUNCHED: "true", LABEL_MUTATED: "true", LABEL_SUBMISSION: submission_id,
              **(app["metadata"].get("labels") or {}), **(pod.get("labels") or {})}
    if role == "executor" and pod.get("instances") is not None:
        args += _conf("spark.executor.instances", int(pod["instances"]))
    image = pod.get("image") or spec.get("image")
    if image:
        args += _conf(f"{prefix}.container.image", image)
    if pod.get("cores") is not None:
        args += _conf(f"spark.{role}.cores", int(pod["cores"]))
    for field, key in (("coreRequest", f"{prefix}.request.cores"), ("coreLimit", f"{prefix}.limit.cores"),
                       ("memory", f"spark.{role}.memory"), ("memoryOverhead", f"spark.{role}.memoryOverhead"),
                       ("serviceAccount", f"spark.kubernetes.authenticate.{role}.serviceAccountName"),
                       ("javaOptions", f"spark.{role}.extraJavaOptions")):
        if pod.get(field):
            args += _conf(key, pod[field])
    if role == "executor" and pod.get("deleteOnTermination") is not None:
        args += _conf("spark.kubernetes.executor.deleteOnTermination", bool(pod["deleteOnTermination"]))
    for key, value in labels.items():
        args += _conf(f"{prefix}.label.{key}", value)
    for key, value in (pod.get("annotations") or {}).items():
        args += _conf(f"{prefix}.annotation.{key}", value)
    for key, value in (pod.get("envVars") or {}).items():
        args += _conf(f"spark.kubernetes.driverEnv.{key}" if role == "driver" else f"spark.executorEnv.{key}", value)
    return args


def submit_args(app: Mapping[str, Any], master: str, submission_id: str,
                templates: Mapping[str, Path] | None = None) -> list[str]:
    """spark-submit's arguments for ``app`` (without the spark-submit program itself)."""
    spec = app.get("spec") or {}
    meta = app["metadata"]
    args = ["--master", master, "--deploy-mode", str(spec.get("mode") or "cluster")]
    if spec.get("mainClass"):
        args += ["--class", str(spec["mainClass"])]
    args += ["--name", str(meta["name"])]
    args += _conf("spark.kubernetes.namespace", meta["namespace"])
    if spec.get("image"):
        args += _conf("spark.kubernetes.container.image", spec["image"])
    if spec.get("imagePullPolicy"):
        args += _conf("spark.kubernetes.container.image.pullPolicy", spec["imagePullPolicy"])
    if spec.get("imagePullSecrets"):
        args += _conf("spark.kubernetes.container.image.pullSecrets", ",".join(spec["imagePullSecrets"]))
    if spec.get("pythonVersion"):
        args += _conf("spark.kubernetes.pyspark.pythonVersion", spec["pythonVersion"])
    if spec.get("memoryOverheadFactor"):
        args += _conf("spark.kubernetes.memoryOverheadFactor", spec["memoryOverheadFactor"])
    args += _conf("spark.kubernetes.submission.waitAppCompletion", "false")
    for key, value in (spec.get("sparkConf") or {}).items():
        if key != "spark.kubernetes.driver.pod.name":
            args += _conf(key, value)
    for key, value in (spec.get("hadoopConf") or {}).items():
        args += _conf(f"spark.hadoop.{key}", value)
    for role in ("driver", "executor"):
        if templates and role in templates:
            container = DRIVER_CONTAINER if role == "driver" else EXECUTOR_CONTAINER
            args += _conf(f"spark.kubernetes.{role}.podTemplateFile", templates[role])
            args += _conf(f"spark.kubernetes.{role}.podTemplateContainerName", container)
    args += _conf("spark.kubernetes.driver.pod.name", driver_pod_name(app))
    args += _role_conf(app, "driver", submission_id)
    args += _role_conf(app, "executor", submission_id)
    for key, value in (spec.get("nodeSelector") or {}).items():
        args += _conf(f"spark.kubernetes.node.selector.{key}", value)
    if spec.get("mainApplicationFile"):
        args.append(str(spec["mainApplicationFile"]))
    args += [str(a) for a in spec.get("arguments") or []]
    return args


def pod_template(app: Mapping[str, Any], role: str) -> Obj:
    """The webhook's mutations of ``role``'s pods, as a Spark pod template."""
    spec = app.get("spec") or {}
    pod = spec.get(role) or {}
    container: Obj = {"name": DRIVER_CONTAINER if role == "driver" else EXECUTOR_CONTAINER}
    for key in CONTAINER_FIELDS:
        if pod.get(key):
            container[key] = copy.deepcopy(pod[key])
    pod_spec: Obj = {"containers": [container]}
    for key, target in POD_FIELDS.items():
        if pod.get(key) is not None:
            pod_spec[target] = copy.deepcopy(pod[key])
    if spec.get("nodeSelector") or pod.get("nodeSelector"):
        pod_spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **(pod.get("nodeSelector") or {})}
    mounted = {m.get("name") for m in pod.get("volumeMounts") or []}
    volumes = [copy.deepcopy(v) for v in spec.get("volumes") or [] if v.get("name") in mounted]
    if volumes:
        pod_spec["volumes"] = volumes
    metadata: Obj = {}
    if role == "driver":  # the webhook makes the application own its driver pod
        meta = app["metadata"]
        metadata["ownerReferences"] = [{"apiVersion": API, "kind": "SparkApplication", "name": meta["name"],
                                        "uid": meta.get("uid", ""), "controller": True, "blockOwnerDeletion": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def write_pod_templates(app: Mapping[str, Any], directory: Path) -> dict[str, Path]:
    """Both templates as files in ``directory`` (as spark-operator writes /tmp/spark/<id>/...)."""
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    for role in ("driver", "executor"):
        path = directory / f"{role}-pod-template.yaml"
        path.write_text(yaml.safe_dump(pod_template(app, role)))
        out[role] = path
    return out


def terminated(pod: Mapping[str, Any], container: str = DRIVER_CONTAINER) -> Obj | None:
    """The container's ``state.terminated`` (None while it has not terminated)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return ((status.get("state") or {}).get("terminated")) or None
    return None


def application_state(pod: Mapping[str, Any] | None) -> tuple[str, str]:
    """(state, errorMessage) of the application from its driver pod, as spark-operator derives it."""
    if pod is None:
        return "FAILING", "driver pod not found"
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if phase == "Running":
        return "RUNNING", ""
    if phase == "Succeeded":
        return "SUCCEEDING", ""
    if phase == "Failed":
        state = terminated(pod)
        if state is None:
            return "FAILING", "driver container status missing"
        if int(state.get("exitCode") or 0) != 0:
            return "FAILING", (f"driver container failed with ExitCode: {state.get('exitCode')}, "
                               f"Reason: {state.get('reason', '')}")
        return "FAILING", ""
    return "SUBMITTED", ""
