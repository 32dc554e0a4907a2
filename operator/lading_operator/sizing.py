"""How big a resource's Spark application may get, per namespace: the policy's ``limits`` (pure).

``spec.spark`` sizes the pods (``driver``/``executor`` ``cores`` and ``memory``,
``executor.instances``), and so do Spark properties a tenant may set
(:data:`SIZING_KEYS`): dynamic allocation's executor counts, memory overheads,
off-heap and Python memory, and the Kubernetes CPU requests and limits. A cap on
one without the others would be routed around (``instances: 1`` with
``spark.dynamicAllocation.minExecutors: 2000``), so the caps apply to what the
pods get from both::

    limits:
      default: {executors: 10, cores: 4, memory: 16g, runs: 10}   # every namespace not listed
      namespaces: {batch: {executors: 50, cores: 8, memory: 64g, runs: 40}}

- ``executors``: the most executors at once: ``executor.instances`` and, with
  dynamic allocation on, ``spark.dynamicAllocation.maxExecutors``, which must then be
  set (Spark's default is unbounded); ``minExecutors`` and ``initialExecutors`` count
  whether or not it is on;
- ``cores``: CPU per pod: ``driver.cores``, ``executor.cores`` and the
  ``spark.kubernetes.{driver,executor}.{request,limit}.cores`` quantities;
- ``memory``: memory per pod, as Spark requests it: the heap (``memory``) plus the
  overhead (``memoryOverhead``, else ``memoryOverheadFactor`` × heap, at least
  384 MiB), ``spark.memory.offHeap.size`` and ``spark.executor.pyspark.memory``.

A cap that is not set does not limit; a listed namespace gets exactly its own caps.
Values Spark would read as sizes or counts must read as such here too, or they are
refused naming the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

LIMIT_KEYS = ("executors", "cores", "memory", "runs")
ROLES = ("driver", "executor")
MIB = 1024 * 1024
MIN_OVERHEAD = 384 * MIB
# Spark on Kubernetes' overhead factor for a non-JVM (Python) main resource, which every lading
# application is: BasicDriverFeatureStep's NON_JVM_MEMORY_OVERHEAD_FACTOR, passed on to the executors.
DEFAULT_OVERHEAD_FACTOR = 0.4

# Spark properties that size the pods: checked against the caps (docs/security.md lists them).
SIZING_KEYS: tuple[str, ...] = (
    "spark.dynamicAllocation.enabled", "spark.dynamicAllocation.minExecutors",
    "spark.dynamicAllocation.maxExecutors", "spark.dynamicAllocation.initialExecutors",
    "spark.driver.memoryOverhead", "spark.executor.memoryOverhead", "spark.driver.memoryOverheadFactor",
    "spark.executor.memoryOverheadFactor", "spark.kubernetes.memoryOverheadFactor",
    "spark.memory.offHeap.enabled", "spark.memory.offHeap.size", "spark.executor.pyspark.memory",
    "spark.kubernetes.driver.request.cores", "spark.kubernetes.driver.limit.cores",
    "spark.kubernetes.executor.request.cores", "spark.kubernetes.executor.limit.cores",
)

_UNITS = {"": None, "b": 1, "k": 1024, "m": MIB, "g": 1024**3, "t": 1024**4, "p": 1024**5}
_SIZE = re.compile(r"^\s*0*([0-9]{1,15})\s*([kmgtp]?)(b|i|ib)?\s*$", re.I)
_QUANTITY = re.compile(r"^\s*([0-9]{1,9}(?:\.[0-9]{1,6})?)(m?)\s*$")
_COUNT = re.compile(r"^\s*([0-9]{1,9})\s*$")


class LimitsError(ValueError):
    """A value that cannot be read as Spark would read it; the message names the key."""


@dataclass(frozen=True)
class Limits:
    """Caps for one namespace; ``None``: not capped."""

    executors: int | None = None
    cores: float | None = None
    memory: int | None = None  # bytes
    runs: int | None = None    # runs under way at once in the namespace


def parse_limits(value: Any, where: str) -> Limits:
    """``{executors, cores, memory}`` from the policy file; raise ``ValueError`` naming the field."""
    if value is None:
        return Limits()
    if not isinstance(value, dict) or set(value) - set(LIMIT_KEYS):
        raise ValueError(f"{where} must be a mapping with {', '.join(LIMIT_KEYS)}")
    executors, cores, memory = value.get("executors"), value.get("cores"), value.get("memory")
    runs = value.get("runs")
    for name, number in (("executors", executors), ("cores", cores), ("runs", runs)):
        if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float)) or number < 1):
            raise ValueError(f"{where}.{name} must be a number of at least 1, got {number!r}")
    for name, number in (("executors", executors), ("runs", runs)):
        if number is not None and not isinstance(number, int):
            raise ValueError(f"{where}.{name} must be a whole number, got {number!r}")
    try:
        memory_bytes = None if memory is None else size_bytes(str(memory), MIB, f"{where}.memory")
    except LimitsError as e:
        raise ValueError(str(e)) from e
    return Limits(executors=executors, cores=None if cores is None else float(cores), memory=memory_bytes,
                  runs=runs)


def size_bytes(text: str, bare_unit: int, key: str) -> int:
    """A size as Spark's ``JavaUtils.byteStringAs`` reads it (``bare_unit``: a number without a unit)."""
    match = _SIZE.match(text)
    if match is None:
        raise LimitsError(f"{key}: {text!r} is not a size as Spark reads it (a whole number with b, k, m, g, t or p)")
    number, unit, suffix = int(match.group(1)), match.group(2).lower(), (match.group(3) or "").lower()
    if not unit:
        return number * (1 if suffix == "b" else bare_unit)
    return number * int(_UNITS[unit] or 1)


def _cores(text: str, key: str) -> float:
    match = _QUANTITY.match(text)
    if match is None:
        raise LimitsError(f"{key}: {text!r} is not a CPU quantity such as 2, 0.5 or 500m")
    return float(match.group(1)) / (1000 if match.group(2) else 1)


def _count(text: str, key: str) -> int:
    match = _COUNT.match(text)
    if match is None:
        raise LimitsError(f"{key}: {text!r} is not a whole number")
    return int(match.group(1))


def _pod(spark: dict[str, Any], role: str) -> dict[str, Any]:
    size = spark.get(role)
    return size if isinstance(size, dict) else {}


def _spark_size(spark: dict[str, Any], role: str) -> tuple[int, str]:
    size = _pod(spark, role)
    return int(size.get("cores", 1)), str(size.get("memory", "1g"))


def check_limits(limits: Limits, spark: Any) -> str | None:
    """The first cap ``spec.spark`` (sizes and Spark properties) exceeds, naming the field, else None."""
    spark = spark if isinstance(spark, dict) else {}
    conf = spark.get("sparkConf") if isinstance(spark.get("sparkConf"), dict) else {}
    conf = {str(k): str(v) for k, v in conf.items()}
    try:
        return _executors(limits, spark, conf) or _cores_check(limits, spark, conf) or _memory(limits, spark, conf)
    except LimitsError as e:
        return f"spec.spark.sparkConf.{e}"


def _over(field: str, value: str, cap: str, what: str) -> str:
    return (f"{field}: {value} is more than the {cap} {what} this namespace allows (policy.limits); "
            "lower it, or ask the cluster admin")


def _executors(limits: Limits, spark: dict[str, Any], conf: dict[str, str]) -> str | None:
    if limits.executors is None:
        return None
    cap = limits.executors
    instances = int(_pod(spark, "executor").get("instances", 1))
    if instances > cap:
        return _over("spec.spark.executor.instances", str(instances), str(cap), "executors")
    for name in ("minExecutors", "initialExecutors", "maxExecutors"):
        key = f"spark.dynamicAllocation.{name}"
        if key in conf and _count(conf[key], key) > cap:
            return _over(f"spec.spark.sparkConf.{key}", conf[key], str(cap), "executors")
    enabled = conf.get("spark.dynamicAllocation.enabled", "false").strip().lower() == "true"
    if enabled and "spark.dynamicAllocation.maxExecutors" not in conf:
        return (f"spec.spark.sparkConf.spark.dynamicAllocation.maxExecutors: must be set (at most {cap}) when "
                "spark.dynamicAllocation.enabled is true: without it Spark may start any number of executors")
    return None


def _cores_check(limits: Limits, spark: dict[str, Any], conf: dict[str, str]) -> str | None:
    if limits.cores is None:
        return None
    cap = limits.cores
    for role in ROLES:
        cores, _ = _spark_size(spark, role)
        if cores > cap:
            return _over(f"spec.spark.{role}.cores", str(cores), f"{cap:g}", "cores per pod")
        for kind in ("request", "limit"):
            key = f"spark.kubernetes.{role}.{kind}.cores"
            if key in conf and _cores(conf[key], key) > cap:
                return _over(f"spec.spark.sparkConf.{key}", conf[key], f"{cap:g}", "cores per pod")
    return None


def _factor_key(conf: dict[str, str], role: str) -> str | None:
    """The property whose overhead factor a ``role`` pod gets, None for the default. The driver's:
    ``spark.driver.memoryOverheadFactor``, else ``spark.kubernetes.memoryOverheadFactor``, else
    0.4 (a Python application); the driver passes its factor on to the executors as
    ``spark.kubernetes.memoryOverheadFactor``, so an executor's is its own key's, else the driver's."""
    if role == "executor" and "spark.executor.memoryOverheadFactor" in conf:
        return "spark.executor.memoryOverheadFactor"
    return next((k for k in ("spark.driver.memoryOverheadFactor", "spark.kubernetes.memoryOverheadFactor")
                 if k in conf), None)


def pod_memory(spark: dict[str, Any], conf: dict[str, str], role: str) -> dict[str, int]:
    """What a ``role`` pod asks for, by the field that sets it (bytes), as Spark on Kubernetes
    computes the pod's memory request; the overhead by its factor is named after the heap."""
    _, memory = _spark_size(spark, role)
    heap_field = f"spec.spark.{role}.memory"
    parts = {heap_field: size_bytes(memory, MIB, f"spark.{role}.memory")}
    overhead_key = f"spark.{role}.memoryOverhead"
    if overhead_key in conf:
        parts[f"spec.spark.sparkConf.{overhead_key}"] = size_bytes(conf[overhead_key], MIB, overhead_key)
    else:
        factor_key = _factor_key(conf, role)
        factor = DEFAULT_OVERHEAD_FACTOR
        if factor_key is not None:
            try:
                factor = float(conf[factor_key])
            except ValueError:
                raise LimitsError(f"{factor_key}: {conf[factor_key]!r} is not a number") from None
            if not 0 <= factor <= 1000:
                raise LimitsError(f"{factor_key}: {conf[factor_key]!r} is not a factor between 0 and 1000")
        overhead = max(MIN_OVERHEAD, int(parts[heap_field] * factor))
        if factor_key is not None:
            parts[f"spec.spark.sparkConf.{factor_key}"] = overhead
        else:
            parts[heap_field] += overhead
    if "spark.memory.offHeap.size" in conf:
        parts["spec.spark.sparkConf.spark.memory.offHeap.size"] = size_bytes(
            conf["spark.memory.offHeap.size"], 1, "spark.memory.offHeap.size")
    if role == "executor" and "spark.executor.pyspark.memory" in conf:
        parts["spec.spark.sparkConf.spark.executor.pyspark.memory"] = size_bytes(
            conf["spark.executor.pyspark.memory"], MIB, "spark.executor.pyspark.memory")
    return parts


def _memory(limits: Limits, spark: dict[str, Any], conf: dict[str, str]) -> str | None:
    if limits.memory is None:
        return None
    cap = limits.memory
    for role in ROLES:
        parts = pod_memory(spark, conf, role)
        total = sum(parts.values())
        if total > cap:
            field = max(parts, key=lambda k: parts[k])  # the largest share: what to lower first
            return (f"{field}: a {role} pod would ask for {_mib(total)} (heap, overhead, off-heap and Python "
                    f"memory), more than the {_mib(cap)} per pod this namespace allows (policy.limits); "
                    "lower it, or ask the cluster admin")
    return None


def _mib(size: int) -> str:
    return f"{size // MIB} MiB"
