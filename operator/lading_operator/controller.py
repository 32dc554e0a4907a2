"""The imperative shell around :func:`lading_operator.reconcile.plan`.

``reconcile_copyjob`` reads what the plan needs (the resource, its current
SparkApplication, the driver pod), asks the pure planner what to do, and does
it in a safe order: the status first (so the intended SparkApplication name is
recorded before it exists), then the create (409 = already there: adopt), the
deletions, the Events and the metrics. It returns when to look again.

Reads the watches already carry are not repeated: a pass starts from kopf's
copy of the CopyJob when that copy is the very object our last status write
returned (same resourceVersion), and from the SparkApplication its latest
watch event carried (taken once); otherwise it reads them from the API. That
is the view an informer-based controller has, and the one our own writes
cannot make stale.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from kubernetes.client.rest import ApiException

from lading_operator import k8s, metrics, policy, progress, sparkapp_state, wakeups
from lading_operator import reconcile as rc
from lading_operator import result as results
from lading_operator import status as st
from lading_operator.phases import ACTIVE, Phase

log = logging.getLogger(__name__)
KIND = "CopyJob"
_policy: policy.Policy = policy.Policy()
APPS_KEPT = 10_000  # SparkApplications from watch events not yet taken by a pass

# resourceVersion of each CopyJob as our last status write left it: (namespace, name) → rv.
_written: dict[tuple[str, str], str] = {}
# The latest watch event's body of each SparkApplication: (namespace, name) → app.
_apps: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
_apps_lock = threading.Lock()


def set_policy(value: policy.Policy) -> None:
    global _policy
    _policy = value


def check_uris(namespace: str, uris: list[tuple[str, str]]) -> str | None:
    return policy.check_uris(_policy, namespace, uris)


def app_event(namespace: str, name: str, app: Mapping[str, Any] | None) -> None:
    """Keep the SparkApplication a watch event carried (``None``: it was deleted)."""
    with _apps_lock:
        _apps.pop((namespace, name), None)
        if app is not None:
            _apps[(namespace, name)] = copy.deepcopy(dict(app))
            while len(_apps) > APPS_KEPT:
                _apps.popitem(last=False)


def _get_app(namespace: str, name: str) -> dict[str, Any] | None:
    """The SparkApplication from its latest watch event (once), else from the API."""
    with _apps_lock:
        app = _apps.pop((namespace, name), None)
    return app if app is not None else k8s.get_app(namespace, name)


def known_resource(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy of kopf's live ``body`` if it is the object our last status write returned."""
    meta = body.get("metadata") or {}
    key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    rv = meta.get("resourceVersion")
    if rv is None or _written.get(key) != rv:
        return None
    return copy.deepcopy(dict(body))


def forget(namespace: str, name: str) -> None:
    _written.pop((namespace, name), None)


def _wrote(updated: Mapping[str, Any]) -> None:
    meta = updated.get("metadata") or {}
    if meta.get("resourceVersion"):
        _written[(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = str(meta["resourceVersion"])


def observe(resource: dict[str, Any], now: dt.datetime | None = None) -> rc.Observed:
    """Read the current run's SparkApplication and (when it matters) its driver pod."""
    meta = resource.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    status = resource.get("status") or {}
    app = pod = None
    checked = False
    app_name = status.get("sparkApplication")
    if app_name and status.get("phase") in {str(p) for p in ACTIVE}:
        app = _get_app(namespace, str(app_name))
        if app is not None and sparkapp_state.needs_driver_pod(sparkapp_state.app_state(app)):
            pod = k8s.get_pod(namespace, results.driver_pod_name(app))
            checked = True
    others: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {}
    for other in rc.active_other_runs(status):
        other_app = _get_app(namespace, other)
        other_pod = None
        if other_app is not None and sparkapp_state.needs_driver_pod(sparkapp_state.app_state(other_app)):
            other_pod = k8s.get_pod(namespace, results.driver_pod_name(other_app))
        others[other] = (other_app, other_pod)
    return rc.Observed(resource, app, pod, checked, now or dt.datetime.now(dt.UTC), others)


def _apply_status(resource: dict[str, Any], plan: rc.Plan) -> bool:
    meta = resource["metadata"]
    if not plan.status:
        return True
    updated = k8s.patch_status(KIND, meta["namespace"], meta["name"], plan.status)
    if updated is None:
        return False
    _wrote(updated)
    if plan.phase:
        metrics.observe_phase(KIND, meta["namespace"], meta["name"], plan.phase)
    return True


def _with_status(obs: rc.Observed, patch: dict[str, Any]) -> rc.Observed:
    status = {**(obs.resource.get("status") or {}), **patch}
    return rc.Observed({**obs.resource, "status": status}, obs.app, obs.driver_pod,
                       obs.driver_pod_checked, obs.now)


def execute(obs: rc.Observed, plan: rc.Plan) -> float | None:
    """Carry out ``plan``; returns the requeue delay."""
    resource = dict(obs.resource)
    meta = resource["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    if not _apply_status(resource, plan):
        return None
    if plan.create is not None:
        try:
            created = k8s.create_app(plan.create)
            if not created:
                log.info("adopted existing SparkApplication %s", plan.create["metadata"]["name"])
        except ApiException as e:
            if e.status is not None and 400 <= e.status < 500 and e.status != 429:
                failed = rc.submission_failed(_with_status(obs, plan.status), _api_message(e))
                _apply_status(resource, failed)
                _events(resource, failed)
                _record(failed)
                return failed.requeue_after
            raise
    for app_name in plan.delete_apps:
        k8s.delete_app(namespace, app_name)
    _events(resource, plan)
    _record(plan)
    if plan.follow_progress and obs.app is not None:
        _progress(resource, obs.app, obs.now)
    if plan.delete_resource:
        k8s.delete_resource(KIND, namespace, name)
        return None
    return plan.requeue_after


def _events(resource: dict[str, Any], plan: rc.Plan) -> None:
    for type_, reason, message in plan.events:
        k8s.post_event(resource, type_, reason, message)


def _record(plan: rc.Plan) -> None:
    if plan.finished_run:
        run = plan.finished_run
        metrics.record_run(KIND, str(run["outcome"]).lower(), float(run["seconds"]),
                           int(run["rows"]), int(run["bytes"]))


def _progress(resource: dict[str, Any], app: Mapping[str, Any], now: dt.datetime) -> None:
    address = ((app.get("status") or {}).get("driverInfo") or {}).get("webUIAddress")
    current = progress.fetch(address)
    if current is None:
        return
    before = {k: v for k, v in ((resource.get("status") or {}).get("progress") or {}).items() if k != "updatedAt"}
    if before == current:
        return
    meta = resource["metadata"]
    updated = k8s.patch_status(KIND, meta["namespace"], meta["name"],
                               {"progress": {**current, "updatedAt": st.timestamp(now)}})
    if updated is not None:
        _wrote(updated)


def _api_message(e: ApiException) -> str:
    import json

    try:
        body = json.loads(e.body or "{}")
        return str(body.get("message") or e.reason)
    except (ValueError, TypeError):
        return str(e.reason)


def reconcile_copyjob(namespace: str, name: str, known: dict[str, Any] | None = None) -> float | None:
    """One level-triggered pass over a CopyJob; returns when to look again (``None``: on change only).

    ``known``: the resource as :func:`known_resource` found it, instead of reading it.
    """
    resource = known if known is not None else k8s.get_resource(KIND, namespace, name)
    if resource is None or (resource.get("metadata") or {}).get("deletionTimestamp"):
        return None
    wakeups.saw(KIND, namespace, name, (resource.get("metadata") or {}).get("generation"))
    resource.setdefault("apiVersion", k8s.GROUP + "/" + k8s.VERSION)
    resource.setdefault("kind", KIND)
    obs = observe(resource)
    plan = rc.plan(obs, check_uris)
    if not plan.status and not plan.create and not plan.delete_apps and (resource.get("status") or {}).get("phase"):
        metrics.observe_phase(KIND, namespace, name, str(resource["status"]["phase"]))
    return execute(obs, plan)


def delete_children(namespace: str, name: str) -> int:
    """Delete every SparkApplication of a CopyJob; the number still present (being stopped)."""
    remaining = 0
    for app in k8s.list_apps(namespace, KIND, name):
        remaining += 1
        if not (app.get("metadata") or {}).get("deletionTimestamp"):
            k8s.delete_app(namespace, app["metadata"]["name"])
    return remaining


__all__ = ["Phase", "delete_children", "execute", "observe", "reconcile_copyjob", "set_policy"]
