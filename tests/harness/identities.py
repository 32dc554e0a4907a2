"""Who talks to the control plane in tests, with the RBAC a cluster gives them (never shipped).

- **the operator**: the ServiceAccount the chart creates (``lading-system/lading``), bound
  to the chart's own ClusterRole, rendered by ``helm template`` from ``charts/lading`` and
  applied as they are: a verb missing there is missing here, and the operator's request
  fails as it would on a cluster. Never cluster-admin.
- **the spark-operator stand-in**: the ServiceAccount ``spark-operator/spark-operator-controller``
  with spark-operator's own controller rules (:data:`SPARK_OPERATOR_RULES`, copied from its
  chart), plus what the stand-in also plays and spark-operator does not:
  :data:`KUBELET_RULES` (the kubelet's part: driver pod status, the ``envFrom`` Secrets) and
  :data:`STANDIN_EXTRA_RULES` (how the stand-in writes: merge patches).
- **tenants**: a ServiceAccount per tenant, bound in its own namespace to Kubernetes' ``edit``
  or ``view`` (which the chart's ``lading-edit`` / ``lading-view`` aggregate into, by the
  controller manager's clusterrole-aggregation controller, as on a cluster).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.client import ApiStatusError, KubeClient

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "lading"
RELEASE, RELEASE_NAMESPACE = "lading", "lading-system"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
PLURALS = {"ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
           "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
           "Namespace": "namespaces"}

# kubeflow/spark-operator, charts/spark-operator-chart/templates/controller/_helpers.tpl
# (spark-operator.controller.policyRules, chart 2.5.0-rc.0, commit 38082f33), the rules its
# controller gets in every job namespace, and controller/rbac.yaml's cluster-wide extra
# (customresourcedefinitions get). Only these and the two lists below reach the stand-in.
SPARK_OPERATOR_RULES: list[Obj] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "update", "delete"]},
    {"apiGroups": [""], "resources": ["configmaps"],
     "verbs": ["get", "list", "watch", "create", "update", "patch"]},
    {"apiGroups": [""], "resources": ["services"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "update", "patch"]},
    {"apiGroups": ["extensions", "networking.k8s.io"], "resources": ["ingresses"],
     "verbs": ["get", "create", "update", "delete"]},
    {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["sparkapplications"],
     "verbs": ["get", "list", "watch", "create", "delete"]},
    {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["scheduledsparkapplications", "sparkconnects"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["sparkoperator.k8s.io"],
     "resources": ["sparkapplications/status", "sparkconnects/status", "scheduledsparkapplications/status"],
     "verbs": ["update"]},
    {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["sparkapplications/finalizers"], "verbs": ["update"]},
    {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["scheduledsparkapplications/finalizers"],
     "verbs": ["update"]},
    {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["sparkconnects/finalizers"], "verbs": ["update"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"],
     "verbs": ["get", "list", "watch", "create", "delete"]},
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get"]},
]
# The kubelet's part the stand-in plays (the Node authorizer would scope it to the node's pods):
# it reports the driver pod's status and reads the Secrets its envFrom names.
KUBELET_RULES: list[Obj] = [
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
]
# The stand-in writes with merge patches where spark-operator's controller-runtime client
# sends updates (same effect, fewer conflicts in a test double), and keeps the finalizer
# spark-operator v1beta2 releases held on an application (so that a delete stops the driver).
STANDIN_EXTRA_RULES: list[Obj] = [
    {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["sparkapplications/status"], "verbs": ["patch"]},
    {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["sparkapplications"], "verbs": ["patch"]},
]
SPARK_OPERATOR_NAMESPACE, SPARK_OPERATOR_ACCOUNT = "spark-operator", "spark-operator-controller"


def helm_bin() -> str:
    local = REPO / ".tools" / "bin" / "helm"
    return str(local) if local.exists() else "helm"


def render_chart(*set_values: str) -> list[Obj]:
    """``helm template lading charts/lading -n lading-system --set ...``: the rendered documents."""
    argv = [helm_bin(), "template", RELEASE, str(CHART), "-n", RELEASE_NAMESPACE]
    for value in set_values:
        argv += ["--set", value]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"helm template failed: {out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def apply(client: KubeClient, obj: Obj) -> Obj:
    """Create ``obj``, or replace what is there (the test's own objects only)."""
    meta = obj["metadata"]
    plural = PLURALS[obj["kind"]]
    try:
        return client.create(obj, plural, meta.get("namespace"))
    except ApiStatusError as exc:
        if exc.code != 409:
            raise
    current = client.get(obj["apiVersion"], plural, meta.get("namespace"), meta["name"])
    return client.replace({**obj, "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}},
                          plural)


def ensure_namespace(client: KubeClient, name: str) -> None:
    try:
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, "namespaces")
    except ApiStatusError as exc:
        if exc.code != 409:
            raise


def user_of(namespace: str, account: str) -> str:
    """The user name the API server gives a ServiceAccount's tokens (RBAC, audit)."""
    return f"system:serviceaccount:{namespace}:{account}"


@dataclass
class Identity:
    """A ServiceAccount with its token and a kubeconfig that uses it."""

    namespace: str
    account: str
    token: str
    kubeconfig: str

    @property
    def user(self) -> str:
        return user_of(self.namespace, self.account)


def operator_rbac(*set_values: str) -> list[Obj]:
    """The chart's ServiceAccount, ClusterRoles, Roles and bindings for the release namespace."""
    return [d for d in render_chart(*set_values) if d["kind"] in RBAC_KINDS
            and d["metadata"].get("namespace", RELEASE_NAMESPACE) == RELEASE_NAMESPACE]


def spark_operator_rbac() -> list[Obj]:
    """spark-operator's controller identity, cluster-wide (its chart with empty spark.jobNamespaces)."""
    name = SPARK_OPERATOR_ACCOUNT
    meta = {"name": name}
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": SPARK_OPERATOR_NAMESPACE}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "namespace": SPARK_OPERATOR_NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta,
         "rules": SPARK_OPERATOR_RULES + KUBELET_RULES + STANDIN_EXTRA_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": subject},
    ]


def tenant_binding(namespace: str, account: str, role: str) -> list[Obj]:
    """ServiceAccount ``account`` in ``namespace``, bound there to the ClusterRole ``role`` (edit, view)."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{account}-{role}", "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]},
    ]


def install(kube: Any, objects: list[Obj], namespace: str, account: str, directory: Path) -> Identity:
    """Apply ``objects`` as cluster-admin, mint a token for ``namespace/account``, write its kubeconfig."""
    ensure_namespace(kube.client, namespace)
    for obj in objects:
        apply(kube.client, obj)
    token = kube.service_account_token(namespace, account, seconds=24 * 3600)
    path = directory / f"{namespace}.{account}.kubeconfig"
    return Identity(namespace, account, token, kube.write_kubeconfig(path, token, account))


def operator_rules() -> list[Obj]:
    """The rules of the chart's operator ClusterRole (``lading-operator``), as rendered."""
    role = next(d for d in operator_rbac() if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "lading-operator")
    return [dict(rule) for rule in role["rules"]]


def without_verb(rules: list[Obj], group: str, resource: str, verb: str) -> list[Obj]:
    """``rules`` with ``verb`` on ``group``/``resource`` taken away (every other grant kept)."""
    out: list[Obj] = []
    for rule in rules:
        if group in rule.get("apiGroups", []) and resource in rule.get("resources", []) and verb in rule["verbs"]:
            others = [r for r in rule["resources"] if r != resource]
            if others:
                out.append({**rule, "resources": others})
            verbs = [v for v in rule["verbs"] if v != verb]
            if verbs:
                out.append({**rule, "resources": [resource], "verbs": verbs})
        else:
            out.append(dict(rule))
    return out


def namespaced(kube: Any, namespace: str, account: str, rules: list[Obj], directory: Path) -> Identity:
    """ServiceAccount ``namespace/account`` with a Role of ``rules`` in ``namespace`` only (an
    operator installed for one namespace, or one whose Role lacks a verb); applying it again
    with other rules replaces the Role."""
    meta = {"name": account, "namespace": namespace}
    objects: list[Obj] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]},
    ]
    for obj in objects:
        apply(kube.client, obj)
    token = kube.service_account_token(namespace, account)
    path = directory / f"{namespace}.{account}.kubeconfig"
    return Identity(namespace, account, token, kube.write_kubeconfig(path, token, account))


def allowed(client: KubeClient, verb: str, group: str, resource: str, namespace: str) -> bool:
    """What the API server's authorizer answers for ``client``'s own identity now
    (SelfSubjectAccessReview, which every authenticated user may ask)."""
    plural, _, subresource = resource.partition("/")  # "copyjobs/status" names a subresource
    review = client.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": plural,
                                        "subresource": subresource, "namespace": namespace}}})
    return bool(review["status"].get("allowed"))
