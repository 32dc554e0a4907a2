"""Thin Kubernetes API calls (the kubernetes client, synchronous; run in kopf's executor).

Every function is one call with the error handling that makes the reconciler
idempotent: 404 on read → ``None``, 409 on create → "already there" (the caller
adopts it only if it owns it), 404 on delete → already gone. Our resources are
addressed by their plural (:mod:`lading_operator.kinds`). Objects are plain dicts
in API field names.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import threading
import uuid
from typing import Any

import kubernetes
from kubernetes.client.rest import ApiException

from lading_operator import names, render
from lading_spec import controls

GROUP = "lading.io"
VERSION = "v1alpha1"
COMPONENT = "lading-operator"

_lock = threading.Lock()
_client: kubernetes.client.ApiClient | None = None


def client() -> kubernetes.client.ApiClient:
    """The shared API client: in-cluster config, else $KUBECONFIG / ~/.kube/config."""
    global _client
    with _lock:
        if _client is None:
            try:
                kubernetes.config.load_incluster_config()
            except kubernetes.config.ConfigException:
                kubernetes.config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
            configuration = kubernetes.client.Configuration.get_default_copy()
            configuration.connection_pool_maxsize = int(os.environ.get("LADING_WORKERS", "16")) + 4
            _client = kubernetes.client.ApiClient(configuration)
        return _client


def reset_client() -> None:
    global _client
    with _lock:
        _client = None


def _custom() -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(client())


def _core() -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(client())


def _networking() -> Any:
    # Any: the client's stubs want a V1NetworkPolicy model; the call sends the plain dict netpol builds.
    return kubernetes.client.NetworkingV1Api(client())


def _coordination() -> Any:
    # Any: the client's stubs want V1Lease models; the Lease calls send and read plain JSON
    # (the models' MicroTime serialisation drops the microseconds when they are zero).
    return kubernetes.client.CoordinationV1Api(client())


def _obj(value: Any) -> dict[str, Any]:
    """The client returns custom objects as untyped JSON; they are dicts."""
    return dict(value)


def _missing(e: ApiException) -> bool:
    return e.status == 404


def get_resource(plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return _obj(_custom().get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name))
    except ApiException as e:
        if _missing(e):
            return None
        raise


def patch_status(plural: str, namespace: str, name: str, patch: dict[str, Any],
                 resource_version: str | None = None) -> dict[str, Any] | None:
    """Merge-patch ``status`` through the /status subresource; ``None`` if the resource is gone.

    ``resource_version``: only if the resource is still at that version (else 409, raised):
    a pass that planned from a watch event's body, not from a read, writes nothing over a
    change it has not seen."""
    body: dict[str, Any] = {"status": patch}
    if resource_version is not None:
        body["metadata"] = {"resourceVersion": resource_version}
    try:
        return _obj(_custom().patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, plural, name, body))
    except ApiException as e:
        if _missing(e):
            return None
        raise


def delete_resource(plural: str, namespace: str, name: str) -> None:
    try:
        _custom().delete_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
    except ApiException as e:
        if not _missing(e):
            raise


def get_app(namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return _obj(_custom().get_namespaced_custom_object(
            render.SPARK_GROUP, render.SPARK_VERSION_API, namespace, render.SPARK_PLURAL, name))
    except ApiException as e:
        if _missing(e):
            return None
        raise


def create_app(app: dict[str, Any]) -> dict[str, Any] | None:
    """Create a SparkApplication; the created object, or ``None`` if one of that name exists already (409)."""
    try:
        return _obj(_custom().create_namespaced_custom_object(
            render.SPARK_GROUP, render.SPARK_VERSION_API, app["metadata"]["namespace"],
            render.SPARK_PLURAL, app))
    except ApiException as e:
        if e.status == 409:
            return None
        raise


def create_network_policy(policy: dict[str, Any]) -> bool:
    """Create a NetworkPolicy (a run's, :mod:`lading_operator.netpol`); ``False`` if it exists (409)."""
    try:
        _networking().create_namespaced_network_policy(policy["metadata"]["namespace"], policy)
        return True
    except ApiException as e:
        if e.status == 409:
            return False
        raise


def delete_app(namespace: str, name: str) -> bool:
    """Ask for deletion; ``False`` when it is already gone."""
    try:
        _custom().delete_namespaced_custom_object(
            render.SPARK_GROUP, render.SPARK_VERSION_API, namespace, render.SPARK_PLURAL, name,
            propagation_policy="Background")
        return True
    except ApiException as e:
        if _missing(e):
            return False
        raise


def list_apps(namespace: str, kind: str, name: str, uid: str, run_id: str | None = None) -> list[dict[str, Any]]:
    """The SparkApplications the resource ``uid`` owns (of one run, if given), by label then by owner."""
    selector = f"{render.LABEL_KIND}={kind},{render.LABEL_NAME}={names.label_value(name)}"
    if run_id is not None:
        selector += f",{render.LABEL_RUN_ID}={names.label_value(run_id)}"
    listing = _custom().list_namespaced_custom_object(
        render.SPARK_GROUP, render.SPARK_VERSION_API, namespace, render.SPARK_PLURAL, label_selector=selector)
    items = [dict(i) for i in _obj(listing).get("items") or []]
    return [i for i in items if any(ref.get("uid") == uid
                                    for ref in (i.get("metadata") or {}).get("ownerReferences") or [])]


def delete_run(namespace: str, kind: str, name: str, uid: str, run_id: str) -> list[str]:
    """Delete every attempt's SparkApplication of one run; the names asked to go."""
    deleted = []
    for app in list_apps(namespace, kind, name, uid, run_id):
        if not (app.get("metadata") or {}).get("deletionTimestamp"):
            delete_app(namespace, app["metadata"]["name"])
            deleted.append(str(app["metadata"]["name"]))
    return deleted


def get_pod(namespace: str, name: str) -> dict[str, Any] | None:
    try:
        response = _core().read_namespaced_pod(name, namespace, _preload_content=False)
    except ApiException as e:
        if _missing(e):
            return None
        raise
    return dict(json.loads(response.data))  # type: ignore[attr-defined]


def get_lease(namespace: str, name: str, timeout: float) -> dict[str, Any] | None:
    """The leader-election Lease (lading_operator.election), ``None`` if there is none."""
    try:
        response = _coordination().read_namespaced_lease(name, namespace, _preload_content=False,
                                                         _request_timeout=timeout)
    except ApiException as e:
        if _missing(e):
            return None
        raise
    return dict(json.loads(response.data))


def create_lease(namespace: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Create the Lease (409 if another replica did first: raised)."""
    response = _coordination().create_namespaced_lease(namespace, body, _preload_content=False,
                                                       _request_timeout=timeout)
    return dict(json.loads(response.data))


def replace_lease(namespace: str, name: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Update the Lease; ``body`` carries the resourceVersion read, so a concurrent write wins
    and this one fails with 409 (raised)."""
    response = _coordination().replace_namespaced_lease(name, namespace, body, _preload_content=False,
                                                        _request_timeout=timeout)
    return dict(json.loads(response.data))


EVENT_MESSAGE_LIMIT = 1024


def event_message(message: str) -> str:
    """An Event's message: one line (every control character escaped, newlines too: ``kubectl
    get events`` shows a row per Event), bounded (:func:`lading_spec.controls.escape_controls`)."""
    text = controls.escape_controls(message)
    return text if len(text) <= EVENT_MESSAGE_LIMIT else text[:EVENT_MESSAGE_LIMIT - 1] + "…"


def post_event(resource: dict[str, Any], type_: str, reason: str, message: str) -> None:
    """A core/v1 Event about ``resource`` (best effort: an Event never fails a reconcile)."""
    body = event_body(resource, type_, reason, message)
    with contextlib.suppress(ApiException):
        _post(f"/api/v1/namespaces/{body['metadata']['namespace']}/events", body)


def event_body(resource: dict[str, Any], type_: str, reason: str, message: str) -> dict[str, Any]:
    """The core/v1 Event :func:`post_event` sends (pure but for its name and time)."""
    meta = resource.get("metadata") or {}
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}", "namespace": meta.get("namespace")},
        "involvedObject": {"apiVersion": resource.get("apiVersion"), "kind": resource.get("kind"),
                           "name": meta.get("name"), "namespace": meta.get("namespace"),
                           "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
        "reason": reason,
        "message": event_message(message),
        "type": type_,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": os.environ.get("HOSTNAME", COMPONENT),
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    return body


def _post(path: str, body: dict[str, Any]) -> None:
    """POST a plain JSON body; the reply is read but not parsed.

    For Events: ``CoreV1Api.create_namespaced_event`` has pydantic validate its ``V1Event``
    argument and the reply, ~1.7 ms of CPU per Event (more than the rest of a reconcile
    pass's API calls); this is the same request through the same client (auth, TLS, pool).
    """
    api = client()
    request = api.param_serialize(method="POST", resource_path=path, body=body, auth_settings=["BearerToken"],
                                  header_params={"Content-Type": "application/json", "Accept": "application/json"})
    reply = api.call_api(*request)
    reply.read()
    if not 200 <= reply.status <= 299:
        raise ApiException(http_resp=reply)
