"""A Kubernetes API server emulator over HTTP, for tests (aiohttp, one event loop thread).

Why not kmock's ``KubernetesEmulator`` as is: it merges every write into the stored
dict, so it has no PUT, no JSON patch, no ``/status`` isolation, no resourceVersion
(lists say ``"..."``, watches cannot resume), no label or field selectors, and no
admission. The operator's correctness depends on all of these, so this module keeps
kmock's idea (an in-memory database behind the Kubernetes URL layout, with watch
streams fed from a bus) and implements the semantics the real API server has:

- uid, creationTimestamp, generateName → name, a monotonic resourceVersion that
  changes on every write (a no-op write changes nothing) and rides on watch events;
- ``metadata.generation``: 1 on create, +1 when anything outside metadata and status
  changes;
- the ``/status`` subresource: writes to the main resource keep the stored status,
  writes to ``/status`` change only status; status given on create is dropped;
- PUT (with the resourceVersion precondition → 409), PATCH as merge, strategic
  merge (treated as merge), JSON patch (a failed ``test`` → 422, as kopf expects)
  and server-side apply (treated as merge, creating if absent);
- admission of custom resources by the real API server code: every create, update,
  ``/status`` write and PATCH (merged first, then sent as an update) of a kind a
  served CRD defines — our three kinds and SparkApplications — goes to
  ``crd-check --serve`` (``harness.admission``: kube-apiserver 1.36's write path with
  pruning, defaults, generation bumps, status reset, the schema with ratcheting and
  the CEL rules with ``oldSelf`` and the runtime cost budget), and the emulator stores
  exactly the object it returns, or answers with the Status it returns. A created or
  changed CRD is validated the same way (crd-check refuses invalid CRDs → 422).
  What crd-check does not reach, the emulator keeps: name conflicts (409
  AlreadyExists), NotFound, the namespace existing and not terminating, resourceVersion
  assignment, no-op writes, PATCH merging, deletion, finalizers and garbage collection;
  built-in kinds (Namespace, Pod, Secret, ...) get only a metadata.name check;
- deletion: finalizers hold an object with ``deletionTimestamp`` until they are
  removed (none may be added meanwhile); ownerReference garbage collection
  (background, foreground and orphan); namespaces delete their contents;
- list (with the current resourceVersion), watch (from a resourceVersion, with
  ``timeoutSeconds``), label and field selectors; discovery (``/api``, ``/apis``),
  ``/version``, OpenAPI v3 per group-version (for ``kubectl explain``), and Table
  output with the CRD's printer columns (for ``kubectl get``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import datetime
import functools
import hashlib
import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from harness.admission import Admission, Answer, CrdRejected

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (resource id "group/version/plural", namespace or "", name)

LOG_LIMIT = 50_000  # watch events kept for resuming watches
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    """An error the server answers with a ``v1 Status`` body."""

    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None,
                 body: Obj | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details
        self.body = body

    @classmethod
    def refused(cls, answer: Answer) -> ApiError:
        """The API server's own refusal, as crd-check returned it."""
        body = answer.api_status
        return cls(answer.status, answer.reason or "Invalid", answer.message,
                   (body or {}).get("details"), body)

    def status(self) -> Obj:
        if self.body is not None:
            return self.body
        body: Obj = {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                     "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


@dataclass
class ResourceType:
    """One served resource: identity, discovery data, and the schema if it is a CRD."""

    group: str
    version: str
    plural: str
    kind: str
    singular: str
    namespaced: bool = True
    status_subresource: bool = False
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    schema: Obj | None = None
    printer_columns: list[Obj] = field(default_factory=list)
    extra_subresources: list[str] = field(default_factory=list)

    @property
    def rid(self) -> str:
        return f"{self.group}/{self.version}/{self.plural}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_kind(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def resource_name(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


BUILTINS: list[ResourceType] = [
    ResourceType("", "v1", "namespaces", "Namespace", "namespace", namespaced=False,
                 status_subresource=True, short_names=["ns"]),
    ResourceType("", "v1", "pods", "Pod", "pod", status_subresource=True, short_names=["po"],
                 categories=["all"], extra_subresources=["log"]),
    ResourceType("", "v1", "events", "Event", "event", short_names=["ev"]),
    ResourceType("", "v1", "secrets", "Secret", "secret"),
    ResourceType("", "v1", "configmaps", "ConfigMap", "configmap", short_names=["cm"]),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", "serviceaccount",
                 short_names=["sa"]),
    ResourceType("", "v1", "services", "Service", "service", status_subresource=True,
                 short_names=["svc"], categories=["all"]),
    ResourceType("events.k8s.io", "v1", "events", "Event", "event", short_names=["ev"]),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", "lease"),
    # What the Helm chart creates (stored, not acted on), and what its NOTES look up.
    ResourceType("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                 "MutatingWebhookConfiguration", "mutatingwebhookconfiguration", namespaced=False),
    ResourceType("apps", "v1", "deployments", "Deployment", "deployment", status_subresource=True,
                 short_names=["deploy"], categories=["all"]),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", "role"),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", "rolebinding"),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", "clusterrole",
                 namespaced=False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                 "clusterrolebinding", namespaced=False),
    ResourceType("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", "networkpolicy",
                 short_names=["netpol"]),
    ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                 "CustomResourceDefinition", "customresourcedefinition", namespaced=False,
                 status_subresource=True, short_names=["crd", "crds"]),
]


def types_from_crd(crd: Obj) -> list[ResourceType]:
    """The resource types a CustomResourceDefinition serves (one per served version)."""
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for ver in spec["versions"]:
        if not ver.get("served", True):
            continue
        out.append(ResourceType(
            group=spec["group"], version=ver["name"], plural=names["plural"], kind=names["kind"],
            singular=names.get("singular", names["kind"].lower()),
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            status_subresource="status" in (ver.get("subresources") or {}),
            short_names=list(names.get("shortNames") or []),
            categories=list(names.get("categories") or []),
            schema=(ver.get("schema") or {}).get("openAPIV3Schema"),
            printer_columns=list(ver.get("additionalPrinterColumns") or []),
        ))
    return out


def load_crds(paths: Iterable[Path | str]) -> list[Obj]:
    """Every CustomResourceDefinition document in the given YAML files."""
    out = []
    for path in paths:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                out.append(doc)
    return out


# ---------------------------------------------------------------------------------------
# patches


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, val in patch.items():
        if val is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), val)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"JSON patch path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(doc: Any, ops: list[Obj]) -> Any:
    """RFC 6902 JSON patch; a failed ``test`` or a missing path → 422."""
    doc = copy.deepcopy(doc)

    def parent(parts: list[str]) -> tuple[Any, str]:
        node = doc
        for p in parts[:-1]:
            try:
                node = node[int(p)] if isinstance(node, list) else node[p]
            except (KeyError, IndexError, ValueError) as exc:
                raise ApiError(422, "Invalid", f"JSON patch: path not found: {p}") from exc
        return node, parts[-1]

    def get(path: str) -> Any:
        node = doc
        for p in _pointer(path):
            try:
                node = node[int(p)] if isinstance(node, list) else node[p]
            except (KeyError, IndexError, ValueError, TypeError) as exc:
                raise ApiError(422, "Invalid", f"JSON patch: path not found: {path}") from exc
        return node

    def put(path: str, value: Any, replace: bool) -> None:
        nonlocal doc
        parts = _pointer(path)
        if not parts:
            doc = value
            return
        node, last = parent(parts)
        if isinstance(node, list):
            if last == "-":
                node.append(value)
            elif replace:
                node[int(last)] = value
            else:
                node.insert(int(last), value)
        elif isinstance(node, dict):
            if replace and last not in node:
                raise ApiError(422, "Invalid", f"JSON patch: replace of a missing path: {path}")
            node[last] = value
        else:
            raise ApiError(422, "Invalid", f"JSON patch: cannot add into {path}")

    def remove(path: str) -> Any:
        node, last = parent(_pointer(path))
        try:
            return node.pop(int(last)) if isinstance(node, list) else node.pop(last)
        except (KeyError, IndexError, ValueError) as exc:
            raise ApiError(422, "Invalid", f"JSON patch: remove of a missing path: {path}") from exc

    for op in ops:
        kind, path = op.get("op"), op.get("path", "")
        if kind == "test":
            if get(path) != op.get("value"):
                raise ApiError(422, "Invalid", f"the server rejected our request due to an error "
                               f"in our request: testing value {path} failed")
        elif kind == "add":
            put(path, copy.deepcopy(op.get("value")), replace=False)
        elif kind == "replace":
            put(path, copy.deepcopy(op.get("value")), replace=True)
        elif kind == "remove":
            remove(path)
        elif kind == "move":
            put(path, remove(op["from"]), replace=False)
        elif kind == "copy":
            put(path, copy.deepcopy(get(op["from"])), replace=False)
        else:
            raise ApiError(422, "Invalid", f"JSON patch: unknown op {kind!r}")
    return doc


# ---------------------------------------------------------------------------------------
# selectors


@functools.lru_cache(maxsize=256)
def _label_requirements(selector: str) -> list[tuple[str, str, list[str]]]:
    """The parsed selector (cached: a watch matches every event against its selector;
    callers only read the list)."""
    reqs: list[tuple[str, str, list[str]]] = []
    for part in re.findall(r"(?:[^,(]|\([^)]*\))+", selector or ""):
        part = part.strip()
        if not part:
            continue
        if m := re.match(r"^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$", part):
            reqs.append((m[1], m[2], [v.strip() for v in m[3].split(",") if v.strip()]))
        elif m := re.match(r"^([\w./-]+)\s*(==|!=|=)\s*([\w./-]*)$", part):
            reqs.append((m[1], "!=" if m[2] == "!=" else "=", [m[3]]))
        elif m := re.match(r"^!\s*([\w./-]+)$", part):
            reqs.append((m[1], "!exists", []))
        elif m := re.match(r"^([\w./-]+)$", part):
            reqs.append((m[1], "exists", []))
        else:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {part!r}")
    return reqs


def labels_match(labels: dict[str, str], selector: str) -> bool:
    for key, op, values in _label_requirements(selector):
        have = key in labels
        val = labels.get(key)
        ok = {"=": have and val == values[0], "!=": not have or val != values[0],
              "in": have and val in values, "notin": not have or val not in values,
              "exists": have, "!exists": not have}[op]
        if not ok:
            return False
    return True


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def fields_match(obj: Obj, selector: str) -> bool:
    for part in (selector or "").split(","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^([\w.]+)\s*(==|!=|=)\s*(.*)$", part)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid field selector: {part!r}")
        actual = _dig(obj, m[1])
        actual_s = "" if actual is None else str(actual)
        if (m[2] == "!=") == (actual_s == m[3]):
            return False
    return True


# ---------------------------------------------------------------------------------------
# the store


def watch_line(kind: str, obj: Obj) -> bytes:
    """One watch event as the line the API server streams."""
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


@dataclass
class Watcher:
    rid: str
    namespace: str | None
    name: str | None
    label_selector: str
    field_selector: str
    queue: asyncio.Queue[bytes | None]  # encoded watch events (one JSON line each)

    def wants(self, obj: Obj) -> bool:
        meta = obj.get("metadata", {})
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        if self.name is not None and meta.get("name") != self.name:
            return False
        return labels_match(meta.get("labels") or {}, self.label_selector) and fields_match(
            obj, self.field_selector)


class Store:
    """Objects by key, a monotonic resourceVersion, an event log and live watchers.

    Only the server's event loop thread touches a Store.
    """

    def __init__(self) -> None:
        self.types: dict[str, ResourceType] = {}
        self.objects: dict[Key, Obj] = {}
        self.rv = 0
        self.log: list[tuple[int, str, str, Obj]] = []  # (rv, rid, type, object)
        self.log_floor = 0  # watches from before this resourceVersion get 410 Gone
        self.watchers: list[Watcher] = []
        # When set (benchmarks): time.monotonic() of each create, by key.
        self.create_times: dict[Key, float] | None = None
        # crd-check --serve for the stored CRDs (None until the first CRD is stored).
        self.admission: Admission | None = None
        for rt in BUILTINS:
            self.register(rt)

    # -- types ---------------------------------------------------------------------
    def register(self, rt: ResourceType) -> None:
        self.types[rt.rid] = rt

    def register_crd(self, crd: Obj) -> None:
        for rt in types_from_crd(crd):
            self.register(rt)

    def type_of(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.types.get(f"{group}/{version}/{plural}")
        if rt is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return rt

    # -- events --------------------------------------------------------------------
    def _emit(self, rt: ResourceType, kind: str, obj: Obj) -> None:
        snapshot = copy.deepcopy(obj)
        self.log.append((self.rv, rt.rid, kind, snapshot))
        if len(self.log) > LOG_LIMIT:
            drop = len(self.log) - LOG_LIMIT // 2
            self.log_floor = self.log[drop - 1][0]
            del self.log[:drop]
        line = None  # encoded once, however many watchers want it
        for w in self.watchers:
            if w.rid == rt.rid and w.wants(snapshot):
                if line is None:
                    line = watch_line(kind, snapshot)
                w.queue.put_nowait(line)

    def _bump(self, obj: Obj) -> None:
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)

    # -- reads ---------------------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.objects.get((rt.rid, namespace if rt.namespaced else "", name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{rt.resource_name} "{name}" not found',
                           {"name": name, "group": rt.group, "kind": rt.plural})
        return obj

    def select(self, rt: ResourceType, namespace: str | None, label_selector: str = "",
             field_selector: str = "") -> list[Obj]:
        out = []
        for (rid, ns, _), obj in sorted(self.objects.items()):
            if rid != rt.rid or (namespace is not None and ns != namespace):
                continue
            if labels_match(obj["metadata"].get("labels") or {}, label_selector) and \
                    fields_match(obj, field_selector):
                out.append(obj)
        return out

    def live_uids(self) -> set[str]:
        return {o["metadata"]["uid"] for o in self.objects.values()}

    # -- admission -------------------------------------------------------------------
    def _served(self, rt: ResourceType) -> bool:
        return self.admission is not None and self.admission.serves(rt.group, rt.kind)

    @staticmethod
    def _check_name(rt: ResourceType, obj: Obj) -> None:
        """Built-in kinds: the name check (crd-check validates custom resources' ObjectMeta)."""
        name = obj["metadata"].get("name", "")
        pattern = DNS_LABEL if rt.kind == "Namespace" else DNS_SUBDOMAIN
        if not pattern.match(name) or len(name) > (63 if rt.kind == "Namespace" else 253):
            message = (f"metadata.name: Invalid value: {json.dumps(name)}: a lowercase RFC 1123 "
                       "subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                       "and must start and end with an alphanumeric character")
            raise ApiError(422, "Invalid", f'{rt.group_kind} "{name}" is invalid: {message}', {
                "name": name, "group": rt.group, "kind": rt.kind,
                "causes": [{"reason": "FieldValueInvalid", "message": message,
                            "field": "metadata.name"}]})

    def _admit_crd(self, crd: Obj) -> Admission:
        """A crd-check for the stored CRDs with ``crd`` added (or replacing its stored version);
        an invalid CRD is refused as the API server refuses it."""
        name = crd["metadata"]["name"]
        crds = [o for (rid, _, n), o in sorted(self.objects.items())
                if rid == "apiextensions.k8s.io/v1/customresourcedefinitions" and n != name]
        try:
            return Admission([*crds, crd])
        except CrdRejected as exc:
            raise ApiError(422, "Invalid", f'CustomResourceDefinition.apiextensions.k8s.io "{name}" '
                           f"is invalid: {exc}", {"name": name, "group": "apiextensions.k8s.io",
                                                  "kind": "CustomResourceDefinition"}) from exc

    def _use_admission(self, admission: Admission) -> None:
        old, self.admission = self.admission, admission
        if old is not None:
            old.close()

    def close(self) -> None:
        if self.admission is not None:
            self.admission.close()
            self.admission = None

    # -- writes --------------------------------------------------------------------
    def create(self, rt: ResourceType, namespace: str | None, body: Obj,
               field_validation: str = "") -> tuple[Obj, list[str]]:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the request body must be a JSON object")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        if not meta.get("name"):
            raise ApiError(422, "Invalid", f"{rt.kind} is invalid: metadata.name: Required value: "
                           "name or generateName is required")
        ns = ""
        if rt.namespaced:
            ns = namespace or meta.get("namespace") or "default"
            if meta.get("namespace") and meta["namespace"] != ns:
                raise ApiError(400, "BadRequest", "the namespace of the provided object does "
                               "not match the namespace sent on the request")
            ns_obj = self.objects.get(("/v1/namespaces", "", ns))
            if ns_obj is None:
                raise ApiError(404, "NotFound", f'namespaces "{ns}" not found',
                               {"name": ns, "kind": "namespaces"})
            if ns_obj["metadata"].get("deletionTimestamp"):
                raise ApiError(403, "Forbidden", f'{rt.resource_name} "{meta["name"]}" is '
                               f"forbidden: unable to create new content in namespace {ns} "
                               "because it is being terminated")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        key = (rt.rid, ns, meta["name"])
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", f'{rt.resource_name} "{meta["name"]}" already '
                           "exists", {"name": meta["name"], "group": rt.group, "kind": rt.plural})
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        warnings: list[str] = []
        admission = None
        if self._served(rt):
            assert self.admission is not None
            answer = self.admission.create(obj, ns or None, field_validation)
            if not answer.allowed or answer.object is None:
                raise ApiError.refused(answer)
            obj, warnings = answer.object, answer.warnings
        else:
            if rt.status_subresource and rt.kind != "Namespace":
                obj.pop("status", None)
            for system in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(system, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_iso()
            meta["generation"] = 1
            if rt.kind == "Namespace":
                obj["status"] = {"phase": "Active"}
            self._check_name(rt, obj)
            if rt.kind == "CustomResourceDefinition":
                admission = self._admit_crd(obj)
        self._bump(obj)
        self.objects[key] = obj
        if self.create_times is not None:
            self.create_times[key] = time.monotonic()
        if admission is not None:
            self._use_admission(admission)
            self.register_crd(obj)
        self._emit(rt, "ADDED", obj)
        return obj, warnings

    def write(self, rt: ResourceType, namespace: str, name: str, new: Obj, subresource: str,
              field_validation: str = "", precondition_rv: str | None = None
              ) -> tuple[Obj, list[str]]:
        """Replace an object with ``new`` (already merged by the caller), as PUT does."""
        old = self.get(rt, namespace, name)
        if not isinstance(new, dict):
            raise ApiError(400, "BadRequest", "the request body must be a JSON object")
        old_meta = old["metadata"]
        warnings: list[str] = []
        admission = None
        if self._served(rt) and new == old:
            # Nothing changes (same resourceVersion too): the server's answer is the stored
            # object, and ratcheting would pass every unchanged value; skip the round trip.
            return old, warnings
        if self._served(rt):
            # The API server's update strategy: preconditions, generation, status reset
            # (or status only, for /status), validation with ratcheting and oldSelf.
            assert self.admission is not None
            answer = self.admission.update(new, old, subresource, field_validation)
            if not answer.allowed or answer.object is None:
                raise ApiError.refused(answer)
            new, warnings = answer.object, answer.warnings
            meta = new["metadata"]
        else:
            if precondition_rv and precondition_rv != old_meta["resourceVersion"]:
                raise ApiError(409, "Conflict", f"Operation cannot be fulfilled on {rt.resource_name} "
                               f'"{name}": the object has been modified; please apply your changes '
                               "to the latest version and try again",
                               {"name": name, "group": rt.group, "kind": rt.plural})
            new = self._merge_system_fields(rt, old, new, subresource)
            meta = new["metadata"]
            self._check_name(rt, new)
            body_keys = (set(new) | set(old)) - {"metadata", "status", "apiVersion", "kind"}
            if new != old and any(new.get(k) != old.get(k) for k in body_keys):
                meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if old_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
            if added:
                raise ApiError(422, "Invalid", f'{rt.group_kind} "{name}" is invalid: '
                               "metadata.finalizers: Forbidden: no new finalizers can be added "
                               "if the object is being deleted")
        if new == old:
            return old, warnings
        if rt.kind == "CustomResourceDefinition":
            admission = self._admit_crd(new)
        self._bump(new)
        self.objects[(rt.rid, namespace if rt.namespaced else "", name)] = new
        if admission is not None:
            self._use_admission(admission)
            self.register_crd(new)
        self._emit(rt, "MODIFIED", new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(rt, new)
            self.collect_garbage()
        elif meta.get("ownerReferences") != old_meta.get("ownerReferences"):
            self.collect_garbage()
        return new, warnings

    @staticmethod
    def _merge_system_fields(rt: ResourceType, old: Obj, new: Obj, subresource: str) -> Obj:
        """Built-in kinds: what the update strategy keeps from the stored object."""
        if subresource == "status":
            merged = copy.deepcopy(old)
            if "status" in new:
                merged["status"] = copy.deepcopy(new["status"])
            else:
                merged.pop("status", None)
            new = merged
        else:
            new = copy.deepcopy(new)
            if rt.status_subresource:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
        meta = new.setdefault("metadata", {})
        for system in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                       "deletionGracePeriodSeconds", "generation", "resourceVersion"):
            if system in old["metadata"]:
                meta[system] = old["metadata"][system]
            else:
                meta.pop(system, None)
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        return new

    def delete(self, rt: ResourceType, namespace: str, name: str, propagation: str = "",
               precondition_uid: str | None = None) -> Obj:
        obj = self.get(rt, namespace, name)
        meta = obj["metadata"]
        if precondition_uid and precondition_uid != meta["uid"]:
            raise ApiError(409, "Conflict", "Precondition failed: UID in precondition: "
                           f"{precondition_uid}, UID in object meta: {meta['uid']}")
        uid = meta["uid"]
        dependents = [o for o in self.objects.values()
                      if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]
        if propagation == "Orphan":
            for dep in dependents:
                dep_rt = self._type_of_obj(dep)
                refs = [r for r in dep["metadata"]["ownerReferences"] if r.get("uid") != uid]
                updated = copy.deepcopy(dep)
                updated["metadata"]["ownerReferences"] = refs
                if not refs:
                    del updated["metadata"]["ownerReferences"]
                self.write(dep_rt, dep["metadata"].get("namespace", ""), dep["metadata"]["name"],
                           updated, "")
        finalizers = list(meta.get("finalizers") or [])
        if propagation == "Foreground" and dependents and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if finalizers or rt.kind == "Namespace":
            if not meta.get("deletionTimestamp"):
                updated = copy.deepcopy(obj)
                updated["metadata"]["deletionTimestamp"] = now_iso()
                updated["metadata"]["deletionGracePeriodSeconds"] = 0
                updated["metadata"]["finalizers"] = finalizers
                if not finalizers:
                    del updated["metadata"]["finalizers"]
                if rt.kind == "Namespace":
                    updated["status"] = {"phase": "Terminating"}
                self._bump(updated)
                self.objects[self._key(rt, updated)] = updated
                self._emit(rt, "MODIFIED", updated)
                obj = updated
            self.collect_garbage()
            return obj
        self._remove(rt, obj)
        self.collect_garbage()
        return obj

    def _key(self, rt: ResourceType, obj: Obj) -> Key:
        return (rt.rid, obj["metadata"].get("namespace", "") if rt.namespaced else "",
                obj["metadata"]["name"])

    def _type_of_obj(self, obj: Obj) -> ResourceType:
        for rt in self.types.values():
            if rt.api_version == obj["apiVersion"] and rt.kind == obj["kind"]:
                return rt
        raise KeyError(obj["kind"])

    def _remove(self, rt: ResourceType, obj: Obj) -> None:
        key = self._key(rt, obj)
        if key not in self.objects:
            return
        final = self.objects.pop(key)
        self._bump(final)
        self._emit(rt, "DELETED", final)

    def collect_garbage(self) -> None:
        """Delete what lost all its owners or whose owner deletes in the foreground;
        release foreground owners without dependents; empty terminating namespaces."""
        changed = True
        while changed:
            changed = False
            uids = self.live_uids()
            foreground = {o["metadata"]["uid"] for o in self.objects.values()
                          if "foregroundDeletion" in (o["metadata"].get("finalizers") or [])}
            terminating_ns = {o["metadata"]["name"] for (rid, _, _), o in self.objects.items()
                              if rid == "/v1/namespaces" and o["metadata"].get("deletionTimestamp")}
            for obj in list(self.objects.values()):
                meta = obj["metadata"]
                if meta.get("deletionTimestamp"):
                    continue
                owners = [r.get("uid") for r in meta.get("ownerReferences") or []]
                gone = bool(owners) and not any(u in uids for u in owners)
                in_fg = any(u in foreground for u in owners)
                dying_ns = meta.get("namespace") in terminating_ns
                if gone or in_fg or dying_ns:
                    self.delete(self._type_of_obj(obj), meta.get("namespace", ""), meta["name"])
                    changed = True
                    break
            if changed:
                continue
            for obj in list(self.objects.values()):
                meta = obj["metadata"]
                rt = self._type_of_obj(obj)
                if "foregroundDeletion" in (meta.get("finalizers") or []):
                    uid = meta["uid"]
                    if not any(any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
                               for o in self.objects.values()):
                        updated = copy.deepcopy(obj)
                        updated["metadata"]["finalizers"] = [
                            f for f in meta["finalizers"] if f != "foregroundDeletion"]
                        self._bump(updated)
                        self.objects[self._key(rt, updated)] = updated
                        self._emit(rt, "MODIFIED", updated)
                        if not updated["metadata"]["finalizers"]:
                            self._remove(rt, updated)
                        changed = True
                        break
                if rt.kind == "Namespace" and meta.get("deletionTimestamp") and \
                        not meta.get("finalizers"):
                    name = meta["name"]
                    if not any(ns == name for (_, ns, _) in self.objects):
                        self._remove(rt, obj)
                        changed = True
                        break


# ---------------------------------------------------------------------------------------
# HTTP


def human_age(timestamp: str) -> str:
    """``2024-01-01T00:00:00Z`` → ``5m``, as the API server prints date columns."""
    try:
        then = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.UTC)
    except (TypeError, ValueError):
        return str(timestamp)
    secs = max(0, int((datetime.datetime.now(datetime.UTC) - then).total_seconds()))
    if secs < 120:
        return f"{secs}s"
    if secs < 7200:
        return f"{secs // 60}m"
    if secs < 48 * 3600:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"


def _print_value(value: Any, col_type: str) -> Any:
    if value is None:
        return None
    if col_type == "date":
        return human_age(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def _jsonpath(obj: Obj, path: str) -> Any:
    """The simple ``.a.b.c`` JSONPaths that printer columns use."""
    node: Any = obj
    for part in path.strip().lstrip(".").split("."):
        if not part:
            continue
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


class KubeServer:
    """The emulator: ``start()`` serves on 127.0.0.1 from a background thread."""

    def __init__(self, crds: Iterable[Obj] = ()) -> None:
        self.store = Store()
        self._initial_crds = list(crds)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.requests = 0
        # Requests by verb and resource ("PATCH copyjobs/status", "GET pods", "WATCH
        # sparkapplications", ...), for benchmarks that count calls per object.
        self.request_counts: collections.Counter[str] = collections.Counter()

    # -- lifecycle --------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> KubeServer:
        ready = threading.Event()
        error: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # surfaced to start()
                error.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=run, name="kube-emulator", daemon=True)
        self._thread.start()
        ready.wait(30)
        if error:
            raise error[0]
        self.call(self._store_initial_crds)
        return self

    def _store_initial_crds(self) -> None:
        crd_type = self.store.types["apiextensions.k8s.io/v1/customresourcedefinitions"]
        for crd in self._initial_crds:
            self.store.create(crd_type, None, crd)

    def stop(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
        if self._thread is not None:
            self._thread.join(30)

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the server's loop (the store's only thread); return its result."""
        assert self.loop is not None

        async def run() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def _shutdown(self) -> None:
        for w in self.store.watchers:
            w.queue.put_nowait(None)
        if self._runner is not None:
            await self._runner.cleanup()
        self.store.close()

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "emulator"}}],
            "contexts": [{"name": "emulator", "context": {
                "cluster": "emulator", "user": "tester", "namespace": namespace}}],
        }))
        return path

    # -- routing ------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        try:
            return await self._route(request)
        except ApiError as exc:
            return web.json_response(exc.status(), status=exc.code)

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if path == "/version":
            return web.json_response({"major": "1", "minor": "32", "gitVersion": "v1.32.0-lading",
                                      "platform": "linux/amd64"})
        if path == "/":
            return web.json_response({"paths": sorted(self._paths())})
        if path == "/api":
            return web.json_response({"kind": "APIVersions", "versions": ["v1"],
                                      "serverAddressByClientCIDRs": [
                                          {"clientCIDR": "0.0.0.0/0", "serverAddress": self.url}]})
        if path == "/apis":
            return web.json_response(self._group_list())
        if parts[:1] == ["openapi"]:
            return self._openapi(parts, request)
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 2:
            if len(parts) == 2:
                return web.json_response(self._group(parts[1]))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return web.json_response(self._resource_list(group, version))
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and not (
                len(rest) == 3 and group == "" and rest[2] in ("status", "finalize")):
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        rt = self.store.type_of(group, version, plural)
        if not rt.namespaced and namespace is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub and not ((sub == "status" and rt.status_subresource) or
                        sub in rt.extra_subresources):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        q = request.query
        method = request.method
        verb = {"GET": "LIST" if name is None else "GET", "POST": "CREATE"}.get(method, method)
        if method == "GET" and q.get("watch") in ("true", "1"):
            verb = "WATCH"
        self.request_counts[f"{verb} {rt.plural}{'/' + sub if sub else ''}"] += 1
        if method == "GET" and q.get("watch") in ("true", "1"):
            return await self._watch(request, rt, namespace, name)
        if method == "GET" and name is None:
            return self._list(request, rt, namespace)
        if method == "GET" and sub == "log":
            obj = self.store.get(rt, namespace or "", name or "")
            return web.Response(text=obj.get("metadata", {}).get("annotations", {}).get(
                "lading.io/emulated-log", ""))
        if method == "GET":
            return self._object(request, rt, self.store.get(rt, namespace or "", name or ""))
        if method == "POST" and name is None:
            body = await self._body(request)
            obj, warnings = self.store.create(rt, namespace, body, q.get("fieldValidation", ""))
            return self._object(request, rt, obj, status=201, warnings=warnings)
        if name is None:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on a collection")
        ns = namespace or ""
        if method == "PUT":
            body = await self._body(request)
            rv = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) \
                else None
            obj, warnings = self.store.write(rt, ns, name, body, sub,
                                             q.get("fieldValidation", ""), rv)
            return self._object(request, rt, obj, warnings=warnings)
        if method == "PATCH":
            return await self._patch(request, rt, ns, name, sub)
        if method == "DELETE":
            body = await self._body(request, allow_empty=True) or {}
            propagation = q.get("propagationPolicy") or body.get("propagationPolicy") or ""
            if body.get("orphanDependents") is True:
                propagation = "Orphan"
            uid = (body.get("preconditions") or {}).get("uid")
            obj = self.store.delete(rt, ns, name, propagation, uid)
            return self._object(request, rt, obj)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")

    async def _body(self, request: web.Request, allow_empty: bool = False) -> Any:
        raw = await request.read()
        if not raw.strip():
            if allow_empty:
                return None
            raise ApiError(400, "BadRequest", "the request body is empty")
        try:
            if "yaml" in request.content_type:
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(400, "BadRequest", f"the request body is not valid: {exc}") from exc

    async def _patch(self, request: web.Request, rt: ResourceType, ns: str, name: str,
                     sub: str) -> web.StreamResponse:
        ctype = request.content_type
        patch = await self._body(request)
        q = request.query
        fv = q.get("fieldValidation", "")
        if ctype == "application/apply-patch+yaml":
            try:
                current = self.store.get(rt, ns, name)
            except ApiError as exc:
                if exc.code != 404 or sub:
                    raise
                obj, warnings = self.store.create(rt, ns or None, patch, fv)
                return self._object(request, rt, obj, status=201, warnings=warnings)
            new = merge_patch(current, patch)
        else:
            current = self.store.get(rt, ns, name)
            if ctype == "application/json-patch+json":
                if not isinstance(patch, list):
                    raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
                new = json_patch(current, patch)
            elif ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                new = merge_patch(current, patch)
            else:
                raise ApiError(415, "UnsupportedMediaType",
                               f"the body of the request was in an unknown format: {ctype}")
        rv = None
        if isinstance(patch, dict):
            rv = (patch.get("metadata") or {}).get("resourceVersion")
        obj, warnings = self.store.write(rt, ns, name, new, sub, fv, rv)
        return self._object(request, rt, obj, warnings=warnings)

    # -- responses ----------------------------------------------------------------------
    def _object(self, request: web.Request, rt: ResourceType, obj: Obj, status: int = 200,
                warnings: list[str] | None = None) -> web.StreamResponse:
        headers = {}
        if warnings:
            headers["Warning"] = ", ".join(f'299 - "{w}"' for w in warnings)
        if self._wants_table(request):
            return web.json_response(self._table(rt, [obj]), status=status, headers=headers)
        return web.json_response(obj, status=status, headers=headers)

    def _list(self, request: web.Request, rt: ResourceType, namespace: str | None
              ) -> web.StreamResponse:
        q = request.query
        items = self.store.select(rt, namespace, q.get("labelSelector", ""),
                                q.get("fieldSelector", ""))
        if self._wants_table(request):
            return web.json_response(self._table(rt, items))
        return web.json_response({
            "apiVersion": rt.api_version, "kind": f"{rt.kind}List",
            "metadata": {"resourceVersion": str(self.store.rv)}, "items": items})

    @staticmethod
    def _wants_table(request: web.Request) -> bool:
        return "as=Table" in request.headers.get("Accept", "")

    def _table(self, rt: ResourceType, items: list[Obj]) -> Obj:
        cols = [{"name": "Name", "type": "string", "format": "name", "description": "Name"}]
        paths = []
        for col in rt.printer_columns:
            cols.append({"name": col["name"], "type": col.get("type", "string"),
                         "format": col.get("format", ""),
                         "description": col.get("description", ""),
                         "priority": col.get("priority", 0)})
            paths.append((col["jsonPath"], col.get("type", "string")))
        if not any(c["jsonPath"] == ".metadata.creationTimestamp" for c in rt.printer_columns):
            cols.append({"name": "Age", "type": "date", "format": "", "description": "Age"})
            paths.append((".metadata.creationTimestamp", "date"))
        rows = []
        for obj in items:
            cells: list[Any] = [obj["metadata"]["name"]]
            for path, col_type in paths:
                cells.append(_print_value(_jsonpath(obj, path), col_type))
            rows.append({"cells": cells, "object": {
                "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"]}})
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": str(self.store.rv)},
                "columnDefinitions": cols, "rows": rows}

    async def _watch(self, request: web.Request, rt: ResourceType, namespace: str | None,
                     name: str | None) -> web.StreamResponse:
        q = request.query
        field_selector = q.get("fieldSelector", "")
        if name is None and (m := re.match(r"^metadata\.name=([^,]+)$", field_selector)):
            name, field_selector = m[1], ""
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        watcher = Watcher(rt.rid, namespace, name, q.get("labelSelector", ""), field_selector,
                          queue)
        since = q.get("resourceVersion", "")
        if since not in ("", "0"):
            try:
                since_rv = int(since)
            except ValueError as exc:
                raise ApiError(400, "BadRequest", f"invalid resourceVersion {since!r}") from exc
            if since_rv < self.store.log_floor:
                queue.put_nowait(watch_line("ERROR", ApiError(
                    410, "Expired", f"too old resource version: {since_rv} "
                    f"({self.store.log_floor})").status()))
                queue.put_nowait(None)
            for rv, rid, kind, obj in self.store.log:
                if rv > since_rv and rid == rt.rid and watcher.wants(obj):
                    queue.put_nowait(watch_line(kind, obj))
        else:
            for obj in self.store.select(rt, namespace):
                if watcher.wants(obj):
                    queue.put_nowait(watch_line("ADDED", obj))
        self.store.watchers.append(watcher)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        timeout = float(q.get("timeoutSeconds") or 0) or None
        deadline = asyncio.get_running_loop().time() + timeout if timeout else None
        try:
            while True:
                wait = None if deadline is None else deadline - asyncio.get_running_loop().time()
                if wait is not None and wait <= 0:
                    break
                try:
                    event = await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    break
                if event is None:
                    break
                await response.write(event)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(ValueError):
                self.store.watchers.remove(watcher)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response

    # -- discovery ------------------------------------------------------------------------
    def _paths(self) -> set[str]:
        paths = {"/api", "/api/v1", "/apis", "/version", "/openapi/v3", "/healthz"}
        for rt in self.store.types.values():
            if rt.group:
                paths |= {f"/apis/{rt.group}", f"/apis/{rt.group}/{rt.version}"}
        return paths

    def _versions(self, group: str) -> list[str]:
        return sorted({rt.version for rt in self.store.types.values() if rt.group == group})

    def _group(self, group: str) -> Obj:
        versions = self._versions(group)
        if not versions:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"apiVersion": "v1", "kind": "APIGroup", "name": group, "versions": gvs,
                "preferredVersion": gvs[0]}

    def _group_list(self) -> Obj:
        groups = sorted({rt.group for rt in self.store.types.values() if rt.group})
        return {"apiVersion": "v1", "kind": "APIGroupList",
                "groups": [self._group(g) for g in groups]}

    def _resource_list(self, group: str, version: str) -> Obj:
        types = [rt for rt in self.store.types.values()
                 if rt.group == group and rt.version == version]
        if not types:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        resources = []
        for rt in sorted(types, key=lambda t: t.plural):
            resources.append({"name": rt.plural, "singularName": rt.singular,
                              "namespaced": rt.namespaced, "kind": rt.kind, "verbs": VERBS,
                              "shortNames": rt.short_names, "categories": rt.categories})
            subs = (["status"] if rt.status_subresource else []) + rt.extra_subresources
            for sub in subs:
                resources.append({"name": f"{rt.plural}/{sub}", "singularName": "",
                                  "namespaced": rt.namespaced, "kind": rt.kind,
                                  "verbs": ["get", "patch", "update"] if sub == "status"
                                  else ["get"]})
        return {"apiVersion": "v1", "kind": "APIResourceList",
                "groupVersion": f"{group}/{version}" if group else version,
                "resources": resources}

    # -- OpenAPI v3 (what kubectl explain reads) -------------------------------------------
    def _openapi(self, parts: list[str], request: web.Request) -> web.StreamResponse:
        gvs = sorted({(rt.group, rt.version) for rt in self.store.types.values()})
        if parts == ["openapi", "v3"]:
            paths = {}
            for group, version in gvs:
                rel = f"apis/{group}/{version}" if group else f"api/{version}"
                doc = json.dumps(self._openapi_doc(group, version), sort_keys=True)
                digest = hashlib.sha256(doc.encode()).hexdigest()[:16].upper()
                paths[rel] = {"serverRelativeURL": f"/openapi/v3/{rel}?hash={digest}"}
            return web.json_response({"paths": paths})
        if parts[:2] == ["openapi", "v3"] and len(parts) >= 4:
            rest = parts[2:]
            if rest[0] == "api":
                group, version = "", rest[1]
            else:
                group, version = rest[1], rest[2] if len(rest) > 2 else ""
            if (group, version) not in gvs:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return web.json_response(self._openapi_doc(group, version))
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _openapi_doc(self, group: str, version: str) -> Obj:
        schemas_out: Obj = {}
        paths: Obj = {}
        for rt in self.store.types.values():
            if rt.group != group or rt.version != version:
                continue
            rev_group = ".".join(reversed(group.split("."))) if group else "io.k8s.api.core"
            name = f"{rev_group}.{version}.{rt.kind}"
            body = copy.deepcopy(rt.schema) if rt.schema else {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True,
                "description": f"{rt.kind} (emulated; no schema)"}
            body["x-kubernetes-group-version-kind"] = [
                {"group": group, "version": version, "kind": rt.kind}]
            schemas_out[name] = body
            gvk = {"group": group, "version": version, "kind": rt.kind}
            base = f"/apis/{group}/{version}" if group else f"/api/{version}"
            ns = "/namespaces/{namespace}" if rt.namespaced else ""
            ref = {"content": {"application/json": {"schema": {
                "$ref": f"#/components/schemas/{name}"}}}, "description": "OK"}
            paths[f"{base}{ns}/{rt.plural}/{{name}}"] = {"get": {
                "operationId": f"read{rt.kind}", "responses": {"200": ref},
                "x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk}}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"},
                "paths": paths, "components": {"schemas": schemas_out}}
