"""The emulator keeps the API server semantics the operator relies on."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
import requests

from harness.client import ApiStatusError, wait_until

pytestmark = pytest.mark.k8s

LCJ = "lading.io/v1alpha1"
SA = "sparkoperator.k8s.io/v1beta2"


def copyjob(name: str, **spec_extra: object) -> dict:
    spec = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://bucket/out/"}, **spec_extra}
    return {"apiVersion": LCJ, "kind": "CopyJob", "metadata": {"name": name}, "spec": spec}


def sparkapp(name: str, owner: dict | None = None) -> dict:
    meta: dict = {"name": name}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True}]
    return {"apiVersion": SA, "kind": "SparkApplication", "metadata": meta,
            "spec": {"type": "Python", "mode": "cluster", "sparkVersion": "4.0.0",
                     "mainApplicationFile": "local:///opt/lading/main.py",
                     "driver": {"cores": 1}, "executor": {"instances": 1}}}


def test_create_assigns_identity(kube, kube_namespace):
    c = kube.client
    a = c.create(copyjob("a"), "copyjobs", kube_namespace)
    b = c.create({**copyjob(""), "metadata": {"generateName": "gen-"}}, "copyjobs", kube_namespace)
    for obj in (a, b):
        meta = obj["metadata"]
        assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
        assert meta["generation"] == 1 and int(meta["resourceVersion"]) > 0
    assert a["metadata"]["uid"] != b["metadata"]["uid"]
    assert b["metadata"]["name"].startswith("gen-") and len(b["metadata"]["name"]) > 4
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    with pytest.raises(ApiStatusError) as exc:
        c.create(copyjob("a"), "copyjobs", kube_namespace)
    assert exc.value.code == 409


def test_generation_bumps_on_spec_changes_only(kube, kube_namespace):
    c = kube.client
    obj = c.create(copyjob("g"), "copyjobs", kube_namespace)
    rv0 = int(obj["metadata"]["resourceVersion"])
    obj = c.patch(LCJ, "copyjobs", kube_namespace, "g", {"metadata": {"labels": {"a": "b"}}})
    assert obj["metadata"]["generation"] == 1 and int(obj["metadata"]["resourceVersion"]) > rv0
    obj = c.patch_status(LCJ, "copyjobs", kube_namespace, "g", {"phase": "Running"})
    assert obj["metadata"]["generation"] == 1 and obj["status"]["phase"] == "Running"
    obj = c.patch(LCJ, "copyjobs", kube_namespace, "g", {"spec": {"cancel": True}})
    assert obj["metadata"]["generation"] == 2
    rv = obj["metadata"]["resourceVersion"]
    same = c.patch(LCJ, "copyjobs", kube_namespace, "g", {"spec": {"cancel": True}})
    assert same["metadata"]["resourceVersion"] == rv  # a no-op write changes nothing


def test_status_subresource_is_isolated(kube, kube_namespace):
    c = kube.client
    created = c.create({**copyjob("s"), "status": {"phase": "Succeeded"}}, "copyjobs",
                       kube_namespace)
    assert "status" not in created  # status on create is dropped
    c.patch_status(LCJ, "copyjobs", kube_namespace, "s", {"phase": "Running"})
    # The main resource ignores status; /status ignores everything else.
    obj = c.patch(LCJ, "copyjobs", kube_namespace, "s",
                  {"spec": {"suspend": True}, "status": {"phase": "Failed"}})
    assert obj["status"]["phase"] == "Running" and obj["spec"]["suspend"] is True
    obj = c.patch(LCJ, "copyjobs", kube_namespace, "s",
                  {"spec": {"suspend": False}, "status": {"phase": "Failed"}}, "status")
    assert obj["status"]["phase"] == "Failed" and obj["spec"]["suspend"] is True
    full = c.get(LCJ, "copyjobs", kube_namespace, "s")
    full["spec"]["backoffLimit"] = 2
    full["status"] = {"phase": "Pending"}
    replaced = c.replace(full, "copyjobs")
    assert replaced["spec"]["backoffLimit"] == 2 and replaced["status"]["phase"] == "Failed"


def test_put_with_stale_resource_version_conflicts(kube, kube_namespace):
    c = kube.client
    obj = c.create(copyjob("p"), "copyjobs", kube_namespace)
    c.patch(LCJ, "copyjobs", kube_namespace, "p", {"spec": {"backoffLimit": 1}})
    obj["spec"]["backoffLimit"] = 3
    with pytest.raises(ApiStatusError) as exc:
        c.replace(obj, "copyjobs")
    assert exc.value.code == 409


def test_json_patch_test_op_failure_is_422(kube, kube_namespace):
    c = kube.client
    obj = c.create(copyjob("j"), "copyjobs", kube_namespace)
    rv = obj["metadata"]["resourceVersion"]
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
           {"op": "add", "path": "/metadata/finalizers", "value": ["x/y"]}]
    obj = c.patch(LCJ, "copyjobs", kube_namespace, "j", ops,
                  content_type="application/json-patch+json")
    assert obj["metadata"]["finalizers"] == ["x/y"]
    with pytest.raises(ApiStatusError) as exc:
        c.patch(LCJ, "copyjobs", kube_namespace, "j", ops,
                content_type="application/json-patch+json")
    assert exc.value.code == 422


def test_schema_and_cel_reject_with_field_named(kube, kube_namespace):
    c = kube.client
    bad = copyjob("bad")
    bad["spec"]["from"]["table"] = "s3://bucket/t"  # two sources
    bad["spec"]["to"]["format"] = "xml"
    with pytest.raises(ApiStatusError) as exc:
        c.create(bad, "copyjobs", kube_namespace)
    assert exc.value.code == 422
    fields = {cause["field"] for cause in exc.value.causes}
    assert "spec.to.format" in fields  # the schema error comes first; CEL waits for a valid shape
    bad["spec"]["to"]["format"] = "csv"
    with pytest.raises(ApiStatusError) as exc:
        c.create(bad, "copyjobs", kube_namespace)
    assert exc.value.causes[0]["field"] == "spec.from"
    assert "exactly one source" in exc.value.message
    assert c.get_or_none(LCJ, "copyjobs", kube_namespace, "bad") is None


def test_update_is_admitted_too(kube, kube_namespace):
    c = kube.client
    c.create(copyjob("u"), "copyjobs", kube_namespace)
    with pytest.raises(ApiStatusError) as exc:
        c.patch(LCJ, "copyjobs", kube_namespace, "u", {"spec": {"to": {"bufferSize": "1MB"}}})
    assert exc.value.causes[0]["field"] == "spec.to.bufferSize"
    assert c.get(LCJ, "copyjobs", kube_namespace, "u")["spec"]["to"].get("bufferSize") is None


def test_unknown_fields_pruned_or_rejected_when_strict(kube, kube_namespace):
    c = kube.client
    obj = c.create(copyjob("k", bogus=1), "copyjobs", kube_namespace)
    assert "bogus" not in obj["spec"] and obj["spec"]["backoffLimit"] == 0  # pruned, defaulted
    with pytest.raises(ApiStatusError) as exc:
        c.create(copyjob("k2", bogus=1), "copyjobs", kube_namespace, field_validation="Strict")
    assert 'unknown field "spec.bogus"' in exc.value.message


def test_upstream_sparkapplication_schema_is_enforced(kube, kube_namespace):
    c = kube.client
    app = sparkapp("app")
    del app["spec"]["sparkVersion"]
    with pytest.raises(ApiStatusError) as exc:
        c.create(app, "sparkapplications", kube_namespace)
    assert "spec.sparkVersion: Required value" in exc.value.message
    c.create(sparkapp("app"), "sparkapplications", kube_namespace)


def test_finalizers_hold_deletion(kube, kube_namespace):
    c = kube.client
    c.create({**copyjob("f"), "metadata": {"name": "f", "finalizers": ["lading.io/test"]}},
             "copyjobs", kube_namespace)
    c.delete(LCJ, "copyjobs", kube_namespace, "f")
    held = c.get(LCJ, "copyjobs", kube_namespace, "f")
    assert held["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiStatusError) as exc:
        c.patch(LCJ, "copyjobs", kube_namespace, "f",
                {"metadata": {"finalizers": ["lading.io/test", "another/one"]}})
    assert exc.value.code == 422
    c.patch(LCJ, "copyjobs", kube_namespace, "f", {"metadata": {"finalizers": []}})
    assert c.get_or_none(LCJ, "copyjobs", kube_namespace, "f") is None


@pytest.mark.parametrize("propagation", ["", "Background", "Foreground"])
def test_owner_deletion_collects_children(kube, kube_namespace, propagation):
    c = kube.client
    job = c.create(copyjob("owner"), "copyjobs", kube_namespace)
    app = c.create(sparkapp("owner-app", job), "sparkapplications", kube_namespace)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "owner-app-driver", "ownerReferences": [{
            "apiVersion": SA, "kind": "SparkApplication", "name": "owner-app",
            "uid": app["metadata"]["uid"]}]}, "spec": {"containers": [{"name": "spark"}]}}
    c.create(pod, "pods", kube_namespace)
    c.delete(LCJ, "copyjobs", kube_namespace, "owner", propagation)
    assert c.get_or_none(LCJ, "copyjobs", kube_namespace, "owner") is None
    assert c.get_or_none(SA, "sparkapplications", kube_namespace, "owner-app") is None
    assert c.get_or_none("v1", "pods", kube_namespace, "owner-app-driver") is None


def test_orphan_deletion_keeps_children(kube, kube_namespace):
    c = kube.client
    job = c.create(copyjob("o"), "copyjobs", kube_namespace)
    c.create(sparkapp("o-app", job), "sparkapplications", kube_namespace)
    c.delete(LCJ, "copyjobs", kube_namespace, "o", "Orphan")
    app = c.get(SA, "sparkapplications", kube_namespace, "o-app")
    assert not app["metadata"].get("ownerReferences")


def test_child_with_finalizer_waits_and_then_goes(kube, kube_namespace):
    c = kube.client
    job = c.create(copyjob("w"), "copyjobs", kube_namespace)
    app = sparkapp("w-app", job)
    app["metadata"]["finalizers"] = ["sparkoperator.k8s.io/test"]
    c.create(app, "sparkapplications", kube_namespace)
    c.delete(LCJ, "copyjobs", kube_namespace, "w")
    held = c.get(SA, "sparkapplications", kube_namespace, "w-app")
    assert held["metadata"]["deletionTimestamp"]
    c.patch(SA, "sparkapplications", kube_namespace, "w-app", {"metadata": {"finalizers": None}})
    assert c.get_or_none(SA, "sparkapplications", kube_namespace, "w-app") is None


def test_pod_status_is_writable_via_status(kube, kube_namespace):
    c = kube.client
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "spark"}]}}
    c.create(pod, "pods", kube_namespace)
    term = {"containerStatuses": [{"name": "spark", "state": {"terminated": {
        "exitCode": 0, "message": json.dumps({"rows": 3})}}}], "phase": "Succeeded"}
    c.patch_status("v1", "pods", kube_namespace, "p", term)
    got = c.get("v1", "pods", kube_namespace, "p")
    assert got["status"]["containerStatuses"][0]["state"]["terminated"]["message"] == '{"rows": 3}'


def test_list_selectors_and_resource_version(kube, kube_namespace):
    c = kube.client
    for name, team in (("l1", "a"), ("l2", "b"), ("l3", "a")):
        c.create({**copyjob(name), "metadata": {"name": name, "labels": {"team": team}}},
                 "copyjobs", kube_namespace)
    names = [o["metadata"]["name"] for o in c.list(LCJ, "copyjobs", kube_namespace, "team=a")]
    assert names == ["l1", "l3"]
    names = [o["metadata"]["name"] for o in
             c.list(LCJ, "copyjobs", kube_namespace, "team in (b)", "metadata.name=l2")]
    assert names == ["l2"]
    raw = c.request("GET", f"/apis/{LCJ}/namespaces/{kube_namespace}/copyjobs")
    assert int(raw["metadata"]["resourceVersion"]) >= max(
        int(o["metadata"]["resourceVersion"]) for o in raw["items"])


def test_watch_streams_from_resource_version(kube, kube_namespace):
    c = kube.client
    listed = c.request("GET", f"/apis/{LCJ}/namespaces/{kube_namespace}/copyjobs")
    since = listed["metadata"]["resourceVersion"]
    events: list[dict] = []

    def watch() -> None:
        url = (f"{kube.url}/apis/{LCJ}/namespaces/{kube_namespace}/copyjobs"
               f"?watch=true&resourceVersion={since}&timeoutSeconds=30")
        with requests.get(url, stream=True, timeout=60) as resp:
            for line in resp.iter_lines():
                if line:
                    events.append(json.loads(line))
                    if events[-1]["type"] == "DELETED":
                        return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    c.create(copyjob("wa"), "copyjobs", kube_namespace)
    c.patch_status(LCJ, "copyjobs", kube_namespace, "wa", {"phase": "Running"})
    c.delete(LCJ, "copyjobs", kube_namespace, "wa")
    thread.join(30)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3 and rvs[0] > int(since)


def test_namespace_deletion_removes_contents(kube):
    c = kube.client
    ns = kube.create_namespace()
    c.create(copyjob("n"), "copyjobs", ns)
    kube.delete_namespace(ns)
    wait_until(lambda: c.get_or_none("v1", "namespaces", None, ns), lambda o: o is None, 10)
    assert c.get_or_none(LCJ, "copyjobs", ns, "n") is None
    with pytest.raises(ApiStatusError) as exc:
        c.create(copyjob("n"), "copyjobs", ns)
    assert exc.value.code == 404


def test_kubectl_discovers_gets_and_explains(kube, kube_namespace):
    kube.client.create(copyjob("kc"), "copyjobs", kube_namespace)
    kube.client.patch_status(LCJ, "copyjobs", kube_namespace, "kc",
                             {"phase": "Succeeded", "response": {"rows": 42},
                              "output": {"files": 3}})

    def kubectl(*args: str) -> str:
        out = subprocess.run(["kubectl", "--kubeconfig", kube.kubeconfig, *args],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    table = kubectl("get", "lcj", "-n", kube_namespace)
    header, row = table.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "PHASE", "ROWS", "FILES"]
    assert row.split()[:4] == ["kc", "Succeeded", "42", "3"]
    assert "kc" in kubectl("get", "lading", "-n", kube_namespace)  # the category
    explained = kubectl("explain", "copyjob.spec.to")
    assert "exactly one of files" in explained and "maxFileSize" in explained


# --- admission is kube-apiserver's own (crd-check --serve) --------------------------------

WIDGETS = "test.lading.io/v1"


def widget_crd(max_label: int | None = None, description: str | None = None) -> dict:
    label: dict = {"type": "string"}
    if max_label is not None:
        label["maxLength"] = max_label
    root: dict = {"type": "object", "properties": {
        "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer", "default": 1,
                     "x-kubernetes-validations": [{"rule": "self >= oldSelf",
                                                   "message": "size may only grow"}]},
            "label": label}},
        "status": {"type": "object", "properties": {"phase": {"type": "string", "enum": ["Ready"]}}}}}
    if description:
        root["properties"]["metadata"]["description"] = description
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.test.lading.io"},
            "spec": {"group": "test.lading.io", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                               "listKind": "WidgetList"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": root}}]}}


def test_crds_are_validated_and_serve_transition_rules_and_ratcheting(kube, kube_namespace):
    c = kube.client
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    with pytest.raises(ApiStatusError) as exc:  # what kube-apiserver refuses, the emulator refuses
        c.request("POST", crd_path, widget_crd(description="x"))
    assert exc.value.code == 422 and "properties[metadata]: Forbidden" in exc.value.message
    if c.get_or_none("apiextensions.k8s.io/v1", "customresourcedefinitions", None,
                     "widgets.test.lading.io") is None:
        c.request("POST", crd_path, widget_crd())
    w = c.create({"apiVersion": WIDGETS, "kind": "Widget", "metadata": {"name": "w"},
                  "spec": {"label": "a-long-label"}}, "widgets", kube_namespace)
    assert w["spec"]["size"] == 1 and w["metadata"]["generation"] == 1  # defaulted
    with pytest.raises(ApiStatusError) as exc:  # an oldSelf (transition) rule
        c.patch(WIDGETS, "widgets", kube_namespace, "w", {"spec": {"size": 0}})
    assert exc.value.code == 422 and "size may only grow" in exc.value.message
    assert c.patch(WIDGETS, "widgets", kube_namespace, "w", {"spec": {"size": 3}})["metadata"]["generation"] == 2
    # Tighten the CRD: the stored label is now too long, yet updates that leave it alone pass
    # (validation ratcheting); changing it to another too-long value does not.
    current = c.get("apiextensions.k8s.io/v1", "customresourcedefinitions", None, "widgets.test.lading.io")
    tightened = widget_crd(max_label=3)
    tightened["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    c.request("PUT", f"{crd_path}/widgets.test.lading.io", tightened)
    assert c.patch(WIDGETS, "widgets", kube_namespace, "w", {"spec": {"size": 4}})["spec"]["size"] == 4
    with pytest.raises(ApiStatusError) as exc:
        c.patch(WIDGETS, "widgets", kube_namespace, "w", {"spec": {"label": "another-long-one"}})
    assert exc.value.code == 422 and exc.value.causes[0]["field"] == "spec.label"
    with pytest.raises(ApiStatusError) as exc:  # /status writes: the status schema
        c.patch_status(WIDGETS, "widgets", kube_namespace, "w", {"phase": "Nope"})
    assert exc.value.code == 422 and exc.value.causes[0]["field"] == "status.phase"


def test_create_refuses_a_resource_version_and_strict_unknown_fields_are_400(kube, kube_namespace):
    c = kube.client
    obj = copyjob("rv")
    obj["metadata"]["resourceVersion"] = "12"
    with pytest.raises(ApiStatusError) as exc:
        c.create(obj, "copyjobs", kube_namespace)
    assert exc.value.code == 400
    with pytest.raises(ApiStatusError) as exc:
        c.create(copyjob("k3", bogus=1), "copyjobs", kube_namespace, field_validation="Strict")
    assert exc.value.code == 400 and "strict decoding error" in exc.value.message


def test_put_without_resource_version_is_refused_for_custom_resources(kube, kube_namespace):
    c = kube.client
    obj = c.create(copyjob("nv"), "copyjobs", kube_namespace)
    del obj["metadata"]["resourceVersion"]
    obj["spec"]["suspend"] = True
    with pytest.raises(ApiStatusError) as exc:
        c.replace(obj, "copyjobs")
    assert exc.value.code == 422 and "must be specified for an update" in exc.value.message
