"""The imperative shell around :func:`lading_operator.reconcile.plan`, for every kind.

``reconcile(kind, namespace, name)`` reads what the plan needs (the resource, its
current SparkApplication, the driver pod when it matters, the latest progress the
poller holds), asks the pure planner what to do, and does it in a safe order:
the status first (so the intended SparkApplication name is recorded before it
exists), then the create, the deletions, the Events and the metrics. It returns
when to look again.

The create's answers:

- 409: a SparkApplication of that name exists. It is adopted only if its
  ownerReference carries this resource's uid (ours, from before a restart); a
  namesake's (a deleted resource of the same name, still being cleaned up) is
  never followed: the run waits, saying so (``NameTaken``);
- 404 (no SparkApplication CRD) and 403 (RBAC missing or still propagating):
  retried with backoff, the condition naming the cause;
- any other 4xx but 429: the run fails (``SubmissionFailed``) with the API's message.

Reads the watches already carry are not repeated: a pass starts from the
resource's latest watch event when that is the very object our last status write
returned (same resourceVersion), and from the SparkApplication its latest watch
event carried (taken once); otherwise it reads them from the API. That is the
view an informer-based controller has, and one our own writes cannot make stale.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from kubernetes.client.rest import ApiException

from lading_operator import (
    k8s,
    lifecycle,
    metrics,
    names,
    policy,
    progress,
    render,
    sparkapp_state,
    wakeups,
)
from lading_operator import reconcile as rc
from lading_operator import result as results
from lading_operator import status as st
from lading_operator.kinds import Kind
from lading_operator.observed import START_TIMEOUT
from lading_operator.phases import ACTIVE
from lading_operator.triggers import scheduled

log = logging.getLogger(__name__)
_policy: policy.Policy = policy.DEFAULT_POLICY
APPS_KEPT = 10_000  # SparkApplications from watch events not yet taken by a pass
CREATE_BACKOFF = (2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)  # after a create refused with 403/404
GONE = "gone"  # reconcile's answer when the resource no longer exists


def start_timeout(env: Mapping[str, str] | None = None) -> float:
    """``LADING_START_TIMEOUT``: seconds a SparkApplication may take to start before a condition says why.

    A value that is not a positive number is a ValueError naming the variable (main.configure
    reads it at start-up, so a bad chart value stops the operator before any reconcile)."""
    raw = ((os.environ if env is None else env).get("LADING_START_TIMEOUT") or "").strip()
    if not raw:
        return START_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"LADING_START_TIMEOUT={raw[:50]!r}: expected a positive number of seconds "
                         f"(the chart's operator.startTimeout; default {START_TIMEOUT:g})")
    return value


ResourceKey = tuple[str, str, str]  # (kind, namespace, name)
# resourceVersion of each resource as our last status write left it.
_written: dict[ResourceKey, str] = {}
# The latest watch event's body of each SparkApplication: (namespace, name) → app.
_apps: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
_apps_lock = threading.Lock()
# Creates refused in a row (403/404), for the backoff.
_refusals: dict[ResourceKey, int] = {}


def set_policy(value: policy.Policy) -> None:
    global _policy
    _policy = value


def check_policy(namespace: str, uris: list[tuple[str, str]], spark: Any) -> str | None:
    """The policy's verdict; the installation's own image and ServiceAccount (chart values, as
    the rendered SparkApplications use them) are always allowed."""
    install = render.installation_from_env()
    return policy.check_resource(_policy, namespace, uris, spark, install.image, install.service_account)


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


def _key(kind: Kind, meta: Mapping[str, Any]) -> ResourceKey:
    return (kind.name, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def known_resource(kind: Kind, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy of ``body`` (a watch event's) if it is the object our last status write returned."""
    meta = body.get("metadata") or {}
    rv = meta.get("resourceVersion")
    if rv is None or _written.get(_key(kind, meta)) != rv:
        return None
    return copy.deepcopy(dict(body))


def forget(kind: Kind, namespace: str, name: str) -> None:
    _written.pop((kind.name, namespace, name), None)
    _refusals.pop((kind.name, namespace, name), None)


def _wrote(kind: Kind, updated: Mapping[str, Any]) -> None:
    meta = updated.get("metadata") or {}
    if meta.get("resourceVersion"):
        _written[_key(kind, meta)] = str(meta["resourceVersion"])


def _pod_of(namespace: str, app: Mapping[str, Any]) -> dict[str, Any] | None:
    return k8s.get_pod(namespace, results.driver_pod_name(app))


def _may_be_stuck(app: Mapping[str, Any], now: dt.datetime, timeout: float) -> bool:
    """A submitted app older than the start timeout: its driver pod tells why it has not started."""
    state = sparkapp_state.app_state(app)
    created = st.parse_time((app.get("metadata") or {}).get("creationTimestamp"))
    return (state in sparkapp_state.WAITING_STATES and state != "" and created is not None
            and (now - created).total_seconds() >= timeout)


def observe(kind: Kind, resource: dict[str, Any], now: dt.datetime | None = None,
            timeout: float | None = None) -> rc.Observed:
    """Read the current run's SparkApplication (ours only), its driver pod when it matters, and progress."""
    now = now or dt.datetime.now(dt.UTC)
    timeout = start_timeout() if timeout is None else timeout
    meta = resource.get("metadata") or {}
    namespace, uid = str(meta.get("namespace") or ""), str(meta.get("uid") or "")
    status = resource.get("status") or {}
    app = pod = foreign = None
    checked = False
    app_name = status.get("sparkApplication")
    # A continuous kind's application is looked at in every phase: before the next one starts,
    # the last one (stopped for a spec change or a suspend) and its driver pod must be gone.
    continuous = kind.trigger == "continuous"
    if app_name and (status.get("phase") in {str(p) for p in ACTIVE} or continuous):
        app = _get_app(namespace, str(app_name))
        if app is not None and not lifecycle.owned_by(app, uid):
            foreign, app = app, None
        if app is not None and (sparkapp_state.needs_driver_pod(sparkapp_state.app_state(app))
                                or _may_be_stuck(app, now, timeout)):
            pod = _pod_of(namespace, app)
            checked = True
        elif app is None and foreign is None and continuous:
            pod = k8s.get_pod(namespace, names.driver_pod_name(str(app_name)))
            checked = True
    others: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {}
    for other in scheduled.active_other_runs(status):
        other_app = _get_app(namespace, other)
        other_pod = None
        if other_app is not None and sparkapp_state.needs_driver_pod(sparkapp_state.app_state(other_app)):
            other_pod = _pod_of(namespace, other_app)
        others[other] = (other_app, other_pod)
    latest = progress.POLLER.latest((namespace, str(app_name))) if app is not None else None
    # A resource that never ran owns no application (its status names the application before
    # the create): its first pass lists nothing, one request fewer per CopyJob.
    never_ran = not (status.get("runId") or status.get("sparkApplication") or status.get("lastRuns"))
    owned = None if continuous or never_ran else _owned_apps(kind, namespace, str(meta.get("name") or ""), uid)
    return rc.Observed(resource, app, pod, checked, now, others, foreign, latest, owned)


def _owned_apps(kind: Kind, namespace: str, name: str, uid: str) -> tuple[dict[str, Any], ...]:
    """Every SparkApplication the resource owns; none when the kind is not installed (404)."""
    try:
        return tuple(k8s.list_apps(namespace, kind.name, name, uid))
    except ApiException as e:
        if e.status == 404:
            return ()
        raise


def _apply_status(kind: Kind, resource: dict[str, Any], plan: rc.Plan) -> bool:
    meta = resource["metadata"]
    if not plan.status:
        return True
    updated = k8s.patch_status(kind.plural, meta["namespace"], meta["name"], plan.status)
    if updated is None:
        return False
    _wrote(kind, updated)
    if plan.phase:
        metrics.observe_phase(kind.name, meta["namespace"], meta["name"], plan.phase)
    return True


def _create(kind: Kind, obs: rc.Observed, plan: rc.Plan, timeout: float) -> rc.Plan | None:
    """Create ``plan.create``; a follow-up plan when the API refused it or the name is a namesake's."""
    assert plan.create is not None
    meta = obs.resource["metadata"]
    key = _key(kind, meta)
    after = rc.context(obs.with_status(plan.status), kind, timeout)
    app_name = plan.create["metadata"]["name"]
    try:
        created = k8s.create_app(plan.create)
    except ApiException as e:
        if e.status in (403, 404):
            refusals = _refusals.get(key, 0)
            _refusals[key] = refusals + 1
            delay = CREATE_BACKOFF[min(refusals, len(CREATE_BACKOFF) - 1)]
            log.warning("creating SparkApplication %s/%s: %s %s (retrying in %ss)", meta["namespace"], app_name,
                        e.status, _api_message(e), delay)
            return lifecycle.create_refused(after, int(e.status), _api_message(e), delay)
        if e.status is not None and 400 <= e.status < 500 and e.status != 429:
            return lifecycle.submission_failed(after, _api_message(e))
        raise
    _refusals.pop(key, None)
    if created:
        return None
    existing = k8s.get_app(meta["namespace"], app_name)
    if existing is not None and not lifecycle.owned_by(existing, str(meta.get("uid") or "")):
        return lifecycle.name_taken(after, existing)
    log.info("adopted existing SparkApplication %s/%s", meta["namespace"], app_name)
    return None


def execute(kind: Kind, obs: rc.Observed, plan: rc.Plan, timeout: float | None = None) -> float | None:
    """Carry out ``plan``; returns the requeue delay."""
    timeout = start_timeout() if timeout is None else timeout
    resource = dict(obs.resource)
    meta = resource["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    if not _apply_status(kind, resource, plan):
        return None
    requeue = plan.requeue_after
    follow = _create(kind, obs, plan, timeout) if plan.create is not None else None
    for app_name in plan.delete_apps:
        k8s.delete_app(namespace, app_name)
    for run_id in plan.delete_runs:
        k8s.delete_run(namespace, kind.name, name, str(meta.get("uid") or ""), run_id)
    if plan.delete_resource:  # before its Event: a refused delete posts nothing, and the next pass tries again
        k8s.delete_resource(kind.plural, namespace, name)
    _events(resource, plan)
    _record(kind, plan)
    if follow is not None:
        _apply_status(kind, resource, follow)
        _events(resource, follow)
        _record(kind, follow)
        requeue = follow.requeue_after
    app_name = str((obs.resource.get("status") or {}).get("sparkApplication") or "")
    if plan.follow_progress and obs.app is not None:
        if plan.progress_source == "stream":
            address = plan.progress_address
        else:
            address = ((obs.app.get("status") or {}).get("driverInfo") or {}).get("webUIAddress")
        progress.POLLER.want((namespace, app_name), address, plan.progress_source)
    elif app_name:
        progress.POLLER.forget((namespace, app_name))
    if plan.delete_resource:
        return None
    return requeue


def _events(resource: dict[str, Any], plan: rc.Plan) -> None:
    for type_, reason, message in plan.events:
        k8s.post_event(resource, type_, reason, message)


def _record(kind: Kind, plan: rc.Plan) -> None:
    if plan.finished_run:
        run = plan.finished_run
        metrics.record_run(kind.name, str(run["outcome"]).lower(), float(run["seconds"]),
                           int(run["rows"]), int(run["bytes"]))


def _api_message(e: ApiException) -> str:
    try:
        body = json.loads(e.body or "{}")
        return str(body.get("message") or e.reason)
    except (ValueError, TypeError):
        return str(e.reason)


def reconcile(kind: Kind, namespace: str, name: str, known: dict[str, Any] | None = None,
              uid: str | None = None) -> float | str | None:
    """One level-triggered pass over a resource; returns when to look again.

    ``None``: on change only; :data:`GONE`: the resource (with ``uid``, when given)
    no longer exists. ``known``: the resource as :func:`known_resource` found it,
    instead of reading it.
    """
    resource = known if known is not None else k8s.get_resource(kind.plural, namespace, name)
    if resource is None or (uid and (resource.get("metadata") or {}).get("uid") != uid):
        return GONE
    if (resource.get("metadata") or {}).get("deletionTimestamp"):
        return None
    wakeups.saw(kind.name, namespace, name, (resource.get("metadata") or {}).get("generation"))
    resource.setdefault("apiVersion", k8s.GROUP + "/" + k8s.VERSION)
    resource.setdefault("kind", kind.name)
    timeout = start_timeout()
    obs = observe(kind, resource, timeout=timeout)
    plan = rc.plan(obs, check_policy, kind=kind, start_timeout=timeout,
                   file_prefixes=_policy.file_prefixes_for(namespace))
    if not plan.status and not plan.create and not plan.delete_apps and (resource.get("status") or {}).get("phase"):
        metrics.observe_phase(kind.name, namespace, name, str(resource["status"]["phase"]))
    return execute(kind, obs, plan, timeout)
