"""Each run's Spark pods accept connections from their own application's pods and the operator (pure).

The chart's NetworkPolicy in every job namespace (``networkPolicy.enabled``, on by
default) selects lading's Spark pods (label ``lading.io/kind``) and lets only the
operator in, to the driver's UI port and a StreamCopy driver's ``/progress``. No
NetworkPolicy can say "from pods with the same label value as mine", so a run's
driver and executors, which must reach each other (RPC, block manager, shuffle),
get one more policy of their own: :func:`build_networkpolicy` selects the pods that
carry the application's labels, exactly as :func:`lading_operator.render.labels`
renders them on the driver and on the executors (spark-operator copies
``spec.driver.labels`` and ``spec.executor.labels`` onto the pods), and admits
ingress from those pods, and from the operator on the UI and progress ports (so a run
in a namespace the chart did not list is as closed and still readable). Policies add up:
a Spark pod accepts its own application's pods and the operator, nobody else: not
another run's pods in the same namespace, nor another tenant's.

It is named after the SparkApplication and owned by it (``ownerReferences``), so
it goes when the application goes (history limits, ttl, the resource's deletion).
The operator creates it right after the application when ``$LADING_NETWORK_POLICY``
is set (the chart sets it with ``networkPolicy.enabled``: JSON ``{"operator": <the
operator pod as a NetworkPolicyPeer>, "ports": [<UI port>, 8090]}``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lading_operator import render

ENV = "LADING_NETWORK_POLICY"
POD_LABELS = (render.LABEL_KIND, render.LABEL_NAME, render.LABEL_RUN_ID, render.LABEL_ATTEMPT)
"""The labels that tell one application's pods from every other's (kind, name, run, attempt)."""


@dataclass(frozen=True)
class Settings:
    """Who else may reach a run's pods: the operator (a NetworkPolicyPeer), on ``ports``."""

    operator: dict[str, Any]
    ports: tuple[int, ...]


def settings_from_env() -> Settings | None:
    """``$LADING_NETWORK_POLICY`` (unset or ``off``: no per-run policies); malformed raises ValueError."""
    raw = os.environ.get(ENV, "").strip()
    if raw.lower() in ("", "off"):
        return None
    try:
        doc = json.loads(raw)
        operator, ports = doc["operator"], tuple(int(p) for p in doc["ports"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{ENV}: expected the chart's JSON {{\"operator\": <peer>, \"ports\": [...]}} or off "
                         f"({e})") from None
    if not isinstance(operator, dict) or not operator.get("podSelector") or not ports:
        raise ValueError(f"{ENV}: the operator peer needs a podSelector, and ports must not be empty")
    return Settings(operator, ports)


def pod_selector(app: Mapping[str, Any]) -> dict[str, Any]:
    """The pods of ``app`` (a rendered SparkApplication): its driver's and executors' labels."""
    spec = app["spec"]
    driver, executor = spec["driver"]["labels"], spec["executor"]["labels"]
    selector = {k: driver[k] for k in POD_LABELS}
    if any(executor.get(k) != v for k, v in selector.items()):
        raise ValueError(f"{app['metadata']['name']}: driver and executors carry different labels")
    return {"matchLabels": selector}


def build_networkpolicy(app: Mapping[str, Any], uid: str, settings: Settings) -> dict[str, Any]:
    """The NetworkPolicy admitting ``app``'s pods to each other and the operator, owned by ``app`` (``uid``)."""
    meta = app["metadata"]
    selector = pod_selector(app)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": dict(meta.get("labels") or {}),
            "ownerReferences": [{"apiVersion": render.SPARK_API_VERSION, "kind": render.SPARK_KIND,
                                 "name": meta["name"], "uid": uid, "controller": True}],
        },
        "spec": {
            "podSelector": selector,
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"podSelector": selector}]},
                {"from": [dict(settings.operator)], "ports": [{"port": p, "protocol": "TCP"} for p in settings.ports]},
            ],
        },
    }
