"""The operator's RBAC (lading.operatorRules) grants exactly what the operator's API calls need.

What the operator calls is derived from the code: every Kubernetes API call it makes is in
``lading_operator/k8s.py`` (one function, one call; ``_custom()``/``_core()`` methods or
``_post``), and each method name says its verb (``get_``/``read_`` get, ``list_`` list,
``create_`` and ``_post`` create, ``patch_`` patch, ``replace_`` update, ``delete_`` delete;
``..._status`` the status subresource). What the code cannot say is kept here, each with why:
kopf's own requests, and which kinds ``delete_resource`` is called on.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml
from chart import helm
from chart.test_chart_rbac import Triple, rendered, roles

from lading_operator import k8s, kinds, render

K8S_PY = Path(k8s.__file__)
OPERATOR_DIR = K8S_PY.parent
LADING = [kind.plural for kind in kinds.ALL]
SPARK = (render.SPARK_GROUP, render.SPARK_PLURAL)
LEASES = ("coordination.k8s.io", "leases")  # leader election: a Role in the release namespace only

# k8s.delete_resource is called only for ttlSecondsAfterFinished (controller.py: plan.delete_resource,
# set by reconcile._terminal), so only the kinds whose CRD has that field need `delete`.
TTL_FIELD = "ttlSecondsAfterFinished"

# kopf's own requests (kopf 1.45, settings in lading_operator/main.py): it lists and watches every
# kind a handler serves; it merge-patches a resource to remove the lading.io/finalizer an older
# release left (main.FINALIZER; no progress or diff-base annotations: persistence.DIFFLESS_KINDS,
# no change handlers); it POSTs core/v1 Events (kopf._cogs.clients.events); it lists and watches
# the driver pods (handlers/resources.py: driver_pod_changed, label selector drivers.SELECTOR).
# Peering is off (standalone) and scanning is off: no kopfpeerings, CRDs or Namespaces.
KOPF: set[Triple] = (
    {(k8s.GROUP, plural, verb) for plural in LADING for verb in ("list", "watch", "patch")}
    | {(*SPARK[:1], SPARK[1], verb) for verb in ("list", "watch")}
    | {("", "pods", verb) for verb in ("list", "watch")}
    | {("", "events", "create")}
)

# Not an API call: the API server checks `update` on <owner>/finalizers when an object is created
# with an ownerReference that sets blockOwnerDeletion (the SparkApplications, render.py).
ADMISSION: set[Triple] = {(k8s.GROUP, f"{plural}/finalizers", "update") for plural in LADING}

VERB_PREFIXES = {"get_": "get", "read_": "get", "list_": "list", "create_": "create", "patch_": "patch",
                 "replace_": "update", "delete_": "delete"}


def ttl_kinds() -> set[str]:
    """Plurals of the kinds whose CRD (crds/) has spec.ttlSecondsAfterFinished in some version."""
    found = set()
    for path in (helm.ROOT / "crds").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            if TTL_FIELD in spec.get("properties", {}):
                found.add(crd["spec"]["names"]["plural"])
    return found


def _verb(method: str) -> str:
    for prefix, verb in VERB_PREFIXES.items():
        if method.startswith(prefix):
            return verb
    raise AssertionError(f"k8s.py calls {method}: add its verb to VERB_PREFIXES")


def _resources(function: str, method: str, args: list[ast.expr]) -> list[tuple[str, str]]:
    """(group, resource) a CustomObjectsApi / CoreV1Api method call addresses."""
    status = "/status" if method.endswith("_status") else ""
    if method.endswith("_namespaced_lease"):  # _coordination(): CoordinationV1Api
        return [(LEASES[0], LEASES[1])]
    if method.endswith("_namespaced_network_policy"):  # _networking(): NetworkingV1Api
        return [("networking.k8s.io", "networkpolicies")]
    if "custom_object" in method:
        group = ast.unparse(args[0])
        if group == "GROUP":
            plurals = sorted(ttl_kinds()) if function == "delete_resource" else LADING
            return [(k8s.GROUP, p + status) for p in plurals]
        assert group == "render.SPARK_GROUP", f"k8s.{function}: unknown API group {group}"
        return [(SPARK[0], SPARK[1] + status)]
    # CoreV1Api: read_namespaced_pod -> pods
    kind = method.split("namespaced_", 1)[1].removesuffix("_status")
    return [("", kind + "s" + status)]


def operator_calls() -> dict[str, set[Triple]]:
    """Per public function of k8s.py, the (group, resource, verb) triples of its API calls."""
    tree = ast.parse(K8S_PY.read_text())
    calls: dict[str, set[Triple]] = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id == "_post":
                path = node.args[0]
                assert isinstance(path, ast.JoinedStr), ast.unparse(path)
                parts = [c.value for c in path.values if isinstance(c, ast.Constant)]
                assert parts[0] == "/api/v1/namespaces/" and parts[-1] == "/events", ast.unparse(node.args[0])
                calls.setdefault(fn.name, set()).add(("", "events", "create"))
            elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
                  and isinstance(func.value.func, ast.Name)
                  and func.value.func.id in ("_custom", "_core", "_coordination", "_networking")):
                verb = _verb(func.attr)
                for group, resource in _resources(fn.name, func.attr, node.args):
                    calls.setdefault(fn.name, set()).add((group, resource, verb))
    return calls


def needed() -> set[Triple]:
    """What the operator's ClusterRole (or watched-namespace Roles) must grant."""
    return {t for t in set().union(*operator_calls().values()) if t[:2] != LEASES} | KOPF | ADMISSION


def needed_for_leader_election() -> set[Triple]:
    """What the leader-election Role (release namespace) must grant."""
    return {t for t in set().union(*operator_calls().values()) if t[:2] == LEASES}


def test_the_derivation_sees_every_api_call_in_k8s_py() -> None:
    calls = operator_calls()
    # Every function of k8s.py that reaches the API server; a new one must show up here.
    assert set(calls) == {"get_resource", "patch_status", "delete_resource", "get_app", "create_app",
                          "delete_app", "list_apps", "get_pod", "post_event", "create_network_policy",
                          "get_lease", "create_lease", "replace_lease"}
    assert calls["replace_lease"] == {("coordination.k8s.io", "leases", "update")}
    assert calls["delete_resource"] == {(k8s.GROUP, p, "delete") for p in ttl_kinds()}
    assert calls["patch_status"] == {(k8s.GROUP, f"{p}/status", "patch") for p in LADING}
    assert calls["post_event"] == {("", "events", "create")}
    assert "copyjobs" in ttl_kinds()


def test_no_api_call_outside_k8s_py() -> None:
    """The derivation reads k8s.py only: no other operator module builds an API client."""
    for path in OPERATOR_DIR.rglob("*.py"):
        if path == K8S_PY:
            continue
        text = path.read_text()
        for needle in ("CustomObjectsApi", "CoreV1Api", "EventsV1Api", "CoordinationV1Api", "NetworkingV1Api",
                       "_custom()", "_core()", "_coordination()", "_networking()", "k8s._post",
                       "kopf.patch", "call_api"):
            assert needle not in text, f"{path.relative_to(OPERATOR_DIR)} uses {needle}"


@pytest.mark.parametrize("mode", ["cluster", "namespaced"])
def test_operator_role_grants_every_verb_the_operator_uses_and_nothing_else(mode: str) -> None:
    operator_roles = [r for r in roles(helm.render(helm.MODES[mode])) if r["metadata"]["name"].endswith("-operator")]
    assert operator_roles
    for role in operator_roles:
        granted = rendered(role["rules"])
        assert not needed() - granted, f"missing: {sorted(needed() - granted)}"
        assert not granted - needed(), f"granted but unused: {sorted(granted - needed())}"


@pytest.mark.parametrize("mode", ["cluster", "namespaced"])
def test_leader_election_role_grants_every_lease_verb_the_operator_uses_and_nothing_else(mode: str) -> None:
    (role,) = [r for r in roles(helm.render(helm.MODES[mode])) if r["metadata"]["name"].endswith("-leader-election")]
    assert (role["kind"], role["metadata"]["namespace"]) == ("Role", helm.NAMESPACE)
    assert rendered(role["rules"]) == needed_for_leader_election() == {
        ("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}


def test_ttl_kinds_can_be_deleted_and_nothing_rewrites_a_spec() -> None:
    (cluster_role,) = [r for r in helm.by_kind(helm.render(helm.CLUSTER), "ClusterRole")
                       if r["metadata"]["name"].endswith("-operator")]
    granted = rendered(cluster_role["rules"])
    for plural in ttl_kinds():
        assert (k8s.GROUP, plural, "delete") in granted
    for plural in LADING:
        assert (k8s.GROUP, plural, "update") not in granted
        assert (k8s.GROUP, f"{plural}/status", "update") not in granted
    assert not {t for t in granted if t[0] == "events.k8s.io"}
