"""A small synchronous client for tests talking to an API server (TLS, bearer token).

Paths are built from ``apiVersion`` + plural, so tests read like ``kubectl``:
``client.get("lading.io/v1alpha1", "copyjobs", "ns", "name")``. Errors raise
``ApiStatusError`` carrying the server's ``v1 Status`` (code, reason, message,
causes). ``wait_for`` polls a condition with a deadline (never a sleep as
synchronisation).
"""

from __future__ import annotations

import builtins
import copy
import time
from collections.abc import Callable
from typing import Any

import requests

Obj = dict[str, Any]


class ApiStatusError(Exception):
    def __init__(self, status: Obj, http_code: int):
        self.status = status
        self.code = int(status.get("code") or http_code)
        self.reason = str(status.get("reason", ""))
        self.message = str(status.get("message", ""))
        super().__init__(f"{self.code} {self.reason}: {self.message}")

    @property
    def causes(self) -> list[Obj]:
        return list((self.status.get("details") or {}).get("causes") or [])


def resource_path(api_version: str, plural: str, namespace: str | None = None,
                  name: str | None = None, subresource: str | None = None) -> str:
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    if namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    if name:
        base += f"/{name}"
    if subresource:
        base += f"/{subresource}"
    return base


class KubeClient:
    def __init__(self, url: str, token: str = "", ca: str | bool = True):
        """``token``: a bearer token (none: anonymous); ``ca``: the server's certificate file
        to verify against (``True``: the system's, ``False``: no verification)."""
        self.url = url.rstrip("/")
        self.session = requests.Session()
        # Passed with each request too: requests lets $REQUESTS_CA_BUNDLE override a session's own.
        self.session.verify = ca
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json", params: dict[str, str] | None = None
                ) -> Any:
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        resp = self.session.request(method, self.url + path, json=body, headers=headers,
                                    params=params, timeout=30, verify=self.session.verify)
        data = resp.json() if resp.content else None
        if resp.status_code >= 400:
            raise ApiStatusError(data if isinstance(data, dict) else {}, resp.status_code)
        return data

    # -- CRUD ----------------------------------------------------------------------------
    def get(self, api_version: str, plural: str, namespace: str | None, name: str) -> Obj:
        return self.request("GET", resource_path(api_version, plural, namespace, name))

    def get_or_none(self, api_version: str, plural: str, namespace: str | None, name: str
                    ) -> Obj | None:
        try:
            return self.get(api_version, plural, namespace, name)
        except ApiStatusError as exc:
            if exc.code == 404:
                return None
            raise

    def list(self, api_version: str, plural: str, namespace: str | None = None,
             label_selector: str = "", field_selector: str = "") -> builtins.list[Obj]:
        params = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        data = self.request("GET", resource_path(api_version, plural, namespace), params=params)
        return builtins.list(data["items"])

    def create(self, obj: Obj, plural: str, namespace: str | None = None,
               field_validation: str = "") -> Obj:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        params = {"fieldValidation": field_validation} if field_validation else None
        return self.request("POST", resource_path(obj["apiVersion"], plural, ns), obj,
                            params=params)

    def replace(self, obj: Obj, plural: str, subresource: str | None = None) -> Obj:
        meta = obj["metadata"]
        return self.request("PUT", resource_path(obj["apiVersion"], plural, meta.get("namespace"),
                                                 meta["name"], subresource), obj)

    def patch(self, api_version: str, plural: str, namespace: str | None, name: str,
              patch: Any, subresource: str | None = None,
              content_type: str = "application/merge-patch+json") -> Obj:
        return self.request("PATCH", resource_path(api_version, plural, namespace, name,
                                                   subresource), patch, content_type)

    def patch_status(self, api_version: str, plural: str, namespace: str | None, name: str,
                     status: Obj) -> Obj:
        return self.patch(api_version, plural, namespace, name, {"status": status}, "status")

    def delete(self, api_version: str, plural: str, namespace: str | None, name: str,
               propagation: str = "") -> Obj:
        body = {"propagationPolicy": propagation} if propagation else None
        return self.request("DELETE", resource_path(api_version, plural, namespace, name), body)

    # -- waiting -------------------------------------------------------------------------
    def wait_for(self, api_version: str, plural: str, namespace: str | None, name: str,
                 predicate: Callable[[Obj | None], bool], timeout: float = 60.0,
                 interval: float = 0.05) -> Obj | None:
        """Poll the object until ``predicate(obj_or_None)`` holds; return it (or None if gone)."""
        return wait_until(lambda: self.get_or_none(api_version, plural, namespace, name),
                          predicate, timeout, interval,
                          f"{plural}/{name} in {namespace or 'cluster'}")

    def wait_gone(self, api_version: str, plural: str, namespace: str | None, name: str,
                  timeout: float = 60.0) -> None:
        self.wait_for(api_version, plural, namespace, name, lambda o: o is None, timeout)

    def events_about(self, namespace: str, name: str, *reasons: str, timeout: float = 30.0,
                     until: Callable[[builtins.list[Obj]], bool] | None = None) -> builtins.list[Obj]:
        """The Events about ``name``, once one of each of ``reasons`` is there (and ``until`` holds).

        An operator posts an Event after writing the status it goes with (and Events are best
        effort), so a test that has just seen the status may be ahead of its Events.
        """
        def complete(events: builtins.list[Obj]) -> bool:
            return set(reasons) <= {e.get("reason") for e in events} and (until is None or until(events))

        return builtins.list(wait_until(
            lambda: [e for e in self.list("v1", "events", namespace) if e["involvedObject"].get("name") == name],
            complete, timeout, 0.2, f"Events {sorted(reasons)} about {name} in {namespace}"))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what the API server does with application/merge-patch+json)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, val in patch.items():
        if val is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), val)
    return result


def wait_until(fetch: Callable[[], Any], predicate: Callable[[Any], bool], timeout: float = 60.0,
               interval: float = 0.05, what: str = "condition") -> Any:
    """Call ``fetch`` until ``predicate`` accepts its value or the deadline passes."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = fetch()
        if predicate(last):
            return last
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}; last seen: {last!r}")
        time.sleep(interval)
