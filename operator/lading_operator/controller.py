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

Reads the watches already carry are not repeated (docs/operator.md, "API requests
per run"): a pass starts from the resource's latest watch event when that is the
object our last status write returned (or older than it: then from what that write
returned), or when no pass has written its status yet (a new resource: the first
pass needs no GET); from the SparkApplication its latest watch event carried (taken
once); from the driver's termination message its pod's watch event carried
(:mod:`lading_operator.drivers`); and from the SparkApplications the resource owns
as the watch saw them, once a pass of this process has listed them (or the resource
had never run). Otherwise it reads them from the API. A pass that did not read the
resource writes its status only if the resource is still at the version it planned
from (a ``resourceVersion`` precondition): a change it has not seen makes the write
fail with 409, and the pass starts again from a read.
"""

from __future__ import annotations

import copy
import dataclasses
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
    drivers,
    k8s,
    lifecycle,
    metrics,
    names,
    netpol,
    policy,
    progress,
    render,
    runslots,
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
# Each resource's last status write: the resourceVersion the pass planned from, and the
# object the write returned.
_written: dict[ResourceKey, tuple[str, dict[str, Any]]] = {}
# The latest watch event's body of each SparkApplication: (namespace, name) → app.
_apps: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
_apps_lock = threading.Lock()
# The SparkApplications each resource owns, as the watch saw them: (namespace, owner uid) →
# app name → the fields lading_operator.strays reads.
_owned: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
# Resources whose owned SparkApplications a pass of this process listed (or that had never
# run): their later passes read them from _owned.
_listed: set[ResourceKey] = set()
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


def app_event(namespace: str, name: str, app: Mapping[str, Any] | None,
              owners: tuple[str, ...] = ()) -> None:
    """Keep the SparkApplication a watch event carried (``None``: it was deleted), and what
    its owners (``owners``: their uids, lading resources only) need of it."""
    with _apps_lock:
        _apps.pop((namespace, name), None)
        if app is not None:
            _apps[(namespace, name)] = copy.deepcopy(dict(app))
            while len(_apps) > APPS_KEPT:
                _apps.popitem(last=False)
        for uid in owners:
            if app is None:
                _forget_owned(namespace, uid, name)
            else:
                _owned.setdefault((namespace, uid), {})[name] = _slim_app(app)


def _slim_app(app: Mapping[str, Any]) -> dict[str, Any]:
    meta = app.get("metadata") or {}
    return {"metadata": {k: copy.deepcopy(meta[k]) for k in ("name", "labels", "ownerReferences",
                                                              "deletionTimestamp") if k in meta},
            "status": {"applicationState": copy.deepcopy((app.get("status") or {}).get("applicationState") or {})}}


def _forget_owned(namespace: str, uid: str, name: str) -> None:
    apps = _owned.get((namespace, uid))
    if apps is not None:
        apps.pop(name, None)
        if not apps:
            _owned.pop((namespace, uid), None)


def _deleted_app(namespace: str, name: str, found: bool) -> None:
    """We asked for its deletion: the watch's copy says it is being deleted (until its own event
    comes), so that no pass asks again. A delete answered 404 (``found`` false): whatever the watch
    kept of it is stale (a DELETED event missed) and is dropped."""
    with _apps_lock:
        for ns, uid in [k for k, apps in _owned.items() if k[0] == namespace and name in apps]:
            if found:
                _owned[(ns, uid)][name]["metadata"].setdefault("deletionTimestamp", "requested")
            else:
                _forget_owned(ns, uid, name)
        if not found:
            _apps.pop((namespace, name), None)


def _get_app(namespace: str, name: str) -> dict[str, Any] | None:
    """The SparkApplication from its latest watch event (once), else from the API."""
    with _apps_lock:
        app = _apps.pop((namespace, name), None)
    return app if app is not None else k8s.get_app(namespace, name)


def _key(kind: Kind, meta: Mapping[str, Any]) -> ResourceKey:
    return (kind.name, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def known_resource(kind: Kind, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a pass may start from instead of reading the resource, given its latest watch event's
    ``body``: ``body`` when it is the object our last status write returned, or when no pass has
    written the status of this resource yet and it has none (a new resource); what that write
    returned when ``body`` is the version the write was planned from (its own event has not
    arrived yet); else ``None`` (read it). A copy: the pass may change it."""
    meta = body.get("metadata") or {}
    rv = meta.get("resourceVersion")
    written = _written.get(_key(kind, meta))
    if rv is None:
        return None
    if written is None:
        return None if body.get("status") else copy.deepcopy(dict(body))
    before, returned = written
    if rv == (returned.get("metadata") or {}).get("resourceVersion"):
        return copy.deepcopy(dict(body))
    if rv == before:
        return copy.deepcopy(returned)
    return None


def forget_everything() -> None:
    """What a freshly started operator remembers: nothing (for tests of a restart)."""
    with _apps_lock:
        _apps.clear()
        _owned.clear()
    _written.clear()
    _listed.clear()
    _refusals.clear()
    runslots.SLOTS.clear()
    drivers.forget_all()


def forget(kind: Kind, namespace: str, name: str) -> None:
    _written.pop((kind.name, namespace, name), None)
    _refusals.pop((kind.name, namespace, name), None)
    _listed.discard((kind.name, namespace, name))


def _wrote(kind: Kind, before: str, updated: Mapping[str, Any]) -> str:
    """Remember a status write (planned from version ``before``); the version it made."""
    meta = updated.get("metadata") or {}
    if meta.get("resourceVersion"):
        _written[_key(kind, meta)] = (before, copy.deepcopy(dict(updated)))
    return str(meta.get("resourceVersion") or "")


def _pod_of(namespace: str, app: Mapping[str, Any]) -> dict[str, Any] | None:
    return k8s.get_pod(namespace, results.driver_pod_name(app))


def _may_be_stuck(app: Mapping[str, Any], now: dt.datetime, timeout: float,
                  deadline_at: dt.datetime | None = None) -> bool:
    """A submitted app older than the start timeout, or at its run's ``activeDeadlineSeconds``
    (``deadline_at``, counted from the run's start, which is before the app was created: by the
    app's own age alone the deadline pass came a moment too early and failed the run without
    saying why it never started): its driver pod tells why it has not started."""
    state = sparkapp_state.app_state(app)
    if state not in sparkapp_state.WAITING_STATES or state == "":
        return False
    if deadline_at is not None and now >= deadline_at:
        return True
    created = st.parse_time((app.get("metadata") or {}).get("creationTimestamp"))
    return created is not None and (now - created).total_seconds() >= timeout


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
    # At activeDeadlineSeconds a run that never started fails saying why: its driver pod is read.
    deadline = (resource.get("spec") or {}).get("activeDeadlineSeconds")
    deadline_at = None
    if isinstance(deadline, int) and not isinstance(deadline, bool) and deadline > 0:
        timeout = min(timeout, float(deadline))
        started = st.parse_time(status.get("startTime"))
        deadline_at = started + dt.timedelta(seconds=deadline) if started is not None else None
    if app_name and (status.get("phase") in {str(p) for p in ACTIVE} or continuous):
        app = _get_app(namespace, str(app_name))
        if app is not None and not lifecycle.owned_by(app, uid):
            foreign, app = app, None
        if app is not None and (sparkapp_state.needs_driver_pod(sparkapp_state.app_state(app))
                                or _may_be_stuck(app, now, timeout, deadline_at)):
            pod = _ended_pod(namespace, app) if not continuous else None
            pod = pod if pod is not None else _pod_of(namespace, app)
            checked = True
        elif app is None and foreign is None:
            # Gone: a continuous kind's next run, and any kind's next attempt, waits for its driver pod
            # to be gone too (lifecycle.follow); one pod GET, only when the application disappeared.
            pod = k8s.get_pod(namespace, names.driver_pod_name(str(app_name)))
            checked = True
    others: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {}
    for other in scheduled.active_other_runs(status):
        other_app = _get_app(namespace, other)
        other_pod = None
        if other_app is not None and sparkapp_state.needs_driver_pod(sparkapp_state.app_state(other_app)):
            other_pod = _ended_pod(namespace, other_app) or _pod_of(namespace, other_app)
        others[other] = (other_app, other_pod)
    latest = progress.POLLER.latest((namespace, str(app_name))) if app is not None else None
    # A resource that never ran owns no application (its status names the application before
    # the create): its first pass lists nothing, one request fewer per CopyJob. Once listed
    # (or never run), the watch keeps what it owns: later passes list nothing either.
    never_ran = not (status.get("runId") or status.get("sparkApplication") or status.get("lastRuns"))
    key = _key(kind, meta)
    owned: tuple[dict[str, Any], ...] | None = None
    if never_ran:
        _listed.add(key)
    elif not continuous and key in _listed:
        current = {str(app_name)} if app_name and status.get("phase") in {str(p) for p in ACTIVE} else set()
        owned = _owned_from_watch(namespace, uid, current | set(scheduled.active_other_runs(status)))
    elif not continuous:
        owned = _owned_apps(kind, namespace, str(meta.get("name") or ""), uid)
        _listed.add(key)
    return rc.Observed(resource, app, pod, checked, now, others, foreign, latest, owned)


def _owned_from_watch(namespace: str, uid: str, under_way: set[str]) -> tuple[dict[str, Any], ...]:
    """The SparkApplications ``uid`` owns, as the watch saw them. One that is neither a run under
    way (``under_way``) nor finished nor being deleted would be a stray (lading_operator.strays):
    the watch's copy may lag behind (an application that has just completed), so it is read
    before it counts; one gone is dropped. In the common path there is none: no request."""
    with _apps_lock:
        apps = [copy.deepcopy(a) for a in (_owned.get((namespace, uid)) or {}).values()]
    out = []
    for app in apps:
        meta = app["metadata"]
        name = str(meta.get("name") or "")
        if name not in under_way and not meta.get("deletionTimestamp") and sparkapp_state.classify(app) not in (
                sparkapp_state.Outcome.COMPLETED, sparkapp_state.Outcome.FAILED):
            fresh = k8s.get_app(namespace, name)
            with _apps_lock:
                if fresh is None:
                    _forget_owned(namespace, uid, name)
                    continue
                app = _slim_app(fresh)
                if name in (_owned.get((namespace, uid)) or {}):
                    _owned[(namespace, uid)][name] = copy.deepcopy(app)
        out.append(app)
    return tuple(out)


def _ended_pod(namespace: str, app: Mapping[str, Any]) -> dict[str, Any] | None:
    """The driver pod of a finished SparkApplication as its pod's watch event carried it (waiting a
    moment for an event the watch has not delivered yet), if the driver container had terminated
    (its termination message is final)."""
    if sparkapp_state.classify(app) not in (sparkapp_state.Outcome.COMPLETED, sparkapp_state.Outcome.FAILED):
        return None
    return drivers.take_ended(namespace, results.driver_pod_name(app),
                              str((app.get("metadata") or {}).get("uid") or ""), drivers.EVENT_WAIT)


def _owned_apps(kind: Kind, namespace: str, name: str, uid: str) -> tuple[dict[str, Any], ...]:
    """Every SparkApplication the resource owns; none when the kind is not installed (404)."""
    try:
        return tuple(k8s.list_apps(namespace, kind.name, name, uid))
    except ApiException as e:
        if e.status == 404:
            return ()
        raise


def _apply_status(kind: Kind, resource: dict[str, Any], plan: rc.Plan, before: str,
                  precondition: str | None = None) -> str | None:
    """Write ``plan.status`` (planned from version ``before``); the version the resource is at
    afterwards, ``None`` if it is gone. ``precondition``: see :func:`k8s.patch_status`."""
    meta = resource["metadata"]
    if not plan.status:
        return before
    updated = k8s.patch_status(kind.plural, meta["namespace"], meta["name"], plan.status, precondition)
    if updated is None:
        return None
    after = _wrote(kind, before, updated)
    if plan.phase:
        metrics.observe_phase(kind.name, meta["namespace"], meta["name"], plan.phase)
    return after


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
    if created is not None:
        _isolate(obs.resource, plan.create, created)
        return None
    existing = k8s.get_app(meta["namespace"], app_name)
    if existing is not None and not lifecycle.owned_by(existing, str(meta.get("uid") or "")):
        return lifecycle.name_taken(after, existing)
    log.info("adopted existing SparkApplication %s/%s", meta["namespace"], app_name)
    if existing is not None:
        _isolate(obs.resource, plan.create, existing)
    return None


def _isolate(resource: Mapping[str, Any], app: dict[str, Any], created: Mapping[str, Any]) -> None:
    """The run's own NetworkPolicy (:mod:`lading_operator.netpol`: its pods admit each other), owned
    by the application ``created``, when the chart turned NetworkPolicies on. A refusal does not fail
    the run here: it is a Warning Event ``NetworkPolicyFailed`` and a log line (without the policy the
    executors cannot reach the driver, so the run cannot finish until an admin grants it)."""
    uid = str((created.get("metadata") or {}).get("uid") or "")
    settings = netpol.settings_from_env()
    if settings is None or not uid:
        return
    policy = netpol.build_networkpolicy(app, uid, settings)
    where = f"{policy['metadata']['namespace']}/{policy['metadata']['name']}"
    try:
        k8s.create_network_policy(policy)
    except ApiException as e:
        log.warning("creating NetworkPolicy %s: %s %s", where, e.status, _api_message(e))
        k8s.post_event(dict(resource), "Warning", "NetworkPolicyFailed",
                       f"creating NetworkPolicy {where}: {e.status} {_api_message(e)}; until it exists this run's "
                       "executors cannot reach its driver (the chart's networkPolicy admits only the operator)")


def execute(kind: Kind, obs: rc.Observed, plan: rc.Plan, timeout: float | None = None,
            precondition: bool = False) -> float | None:
    """Carry out ``plan``; returns the requeue delay. ``precondition``: the status is written only
    if the resource is still at the version observed (else ApiException 409, before anything is done)."""
    timeout = start_timeout() if timeout is None else timeout
    resource = dict(obs.resource)
    meta = resource["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    version = str(meta.get("resourceVersion") or "")
    written = _apply_status(kind, resource, plan, version, version if precondition and version else None)
    if written is None:
        return None
    requeue = plan.requeue_after
    follow = _create(kind, obs, plan, timeout) if plan.create is not None else None
    for app_name in plan.delete_apps:
        _deleted_app(namespace, app_name, k8s.delete_app(namespace, app_name))
    for run_id in plan.delete_runs:
        k8s.delete_run(namespace, kind.name, name, str(meta.get("uid") or ""), run_id)
    if plan.delete_resource:  # before its Event: a refused delete posts nothing, and the next pass tries again
        k8s.delete_resource(kind.plural, namespace, name)
    _events(resource, plan)
    _record(kind, plan)
    if follow is not None:
        _apply_status(kind, resource, follow, written)
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
    instead of reading it; its status is then written only if the resource has not
    changed since (else the pass starts again from a read).
    """
    if known is not None:
        try:
            return _reconcile(kind, namespace, name, known, uid)
        except ApiException as e:
            if e.status != 409:
                raise
            log.info("%s %s/%s changed since its watch event: reading it", kind.name, namespace, name)
    return _reconcile(kind, namespace, name, None, uid)


def _reconcile(kind: Kind, namespace: str, name: str, known: dict[str, Any] | None,
               uid: str | None) -> float | str | None:
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

    def planned(obs: rc.Observed) -> rc.Plan:
        return rc.plan(obs, check_policy, kind=kind, start_timeout=timeout,
                       file_prefixes=_policy.file_prefixes_for(namespace), catalogs=_policy.catalogs_env(namespace))

    plan = planned(obs)
    key = _key(kind, resource.get("metadata") or {})
    admitted = False
    held = runslots.runs_under_way(resource.get("status"))
    wanted = runslots.runs_under_way({**(resource.get("status") or {}), **plan.status}) - held
    limit = _policy.limits_for(namespace).runs
    if plan.create is not None and wanted > 0 and limit is not None:
        created = str((resource.get("metadata") or {}).get("creationTimestamp") or "")
        verdict = runslots.SLOTS.ask(key, created, limit, held, wanted)
        if verdict.admitted:
            admitted = True
        else:  # the planner answers with the Queued status instead of a SparkApplication
            plan = planned(dataclasses.replace(obs, queued=verdict.message))
    else:
        runslots.SLOTS.withdraw(key)
    if not plan.status and not plan.create and not plan.delete_apps and (resource.get("status") or {}).get("phase"):
        metrics.observe_phase(kind.name, namespace, name, str(resource["status"]["phase"]))
    try:
        return execute(kind, obs, plan, timeout, precondition=known is not None)
    finally:
        if admitted:  # the run did not start (refused, failed at once): its slot is free again
            written = _written.get(key)
            runslots.SLOTS.settle(key, (written[1].get("status") or {}) if written is not None else None)
