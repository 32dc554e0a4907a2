"""Every RBAC rule the chart renders, in both modes, is the documented list in docs/security.md.

No wildcards, nothing on Secrets, nothing undocumented, nothing documented missing.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from chart import helm

DOC = helm.ROOT / "docs" / "security.md"
Triple = tuple[str, str, str]  # (apiGroup, resource, verb)


def documented(section: str) -> set[Triple]:
    """(group, resource, verb) triples from the table between <!-- rbac:NAME --> markers."""
    text = DOC.read_text()
    match = re.search(rf"<!-- rbac:{section} -->(.*?)<!-- /rbac:{section} -->", text, re.S)
    assert match, f"docs/security.md has no <!-- rbac:{section} --> table"
    triples: set[Triple] = set()
    for line in match.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        group = re.findall(r"`([^`]*)`", cells[0])[0].strip('"')
        resources = re.findall(r"`([^`]+)`", cells[1])
        verbs = re.findall(r"`([^`]+)`", cells[2])
        assert resources and verbs, line
        triples |= {(group, r, v) for r in resources for v in verbs}
    assert triples, section
    return triples


def rendered(rules: list[dict[str, Any]]) -> set[Triple]:
    triples: set[Triple] = set()
    for rule in rules:
        assert set(rule) <= {"apiGroups", "resources", "verbs"}, f"unexpected rule keys: {rule}"
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                for v in rule["verbs"]:
                    triples.add((g, r, v))
    return triples


def roles(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in ("Role", "ClusterRole")]


def is_spark(role: dict[str, Any]) -> bool:
    return role["metadata"]["name"] == "lading-spark"


@pytest.mark.parametrize("mode", sorted(helm.MODES))
def test_no_wildcards_no_secrets_no_escalation(mode: str) -> None:
    for role in roles(helm.render(helm.MODES[mode])):
        for group, resource, verb in rendered(role.get("rules", [])):
            assert "*" not in (group, resource, verb), role["metadata"]["name"]
            assert resource.split("/")[0] != "secrets", role["metadata"]["name"]
            assert verb not in ("escalate", "bind", "impersonate"), role["metadata"]["name"]
        assert "aggregationRule" not in role


def test_cluster_mode_operator_rules_are_the_documented_list() -> None:
    objects = helm.render(helm.CLUSTER)
    (cluster_role,) = [r for r in helm.by_kind(objects, "ClusterRole") if r["metadata"]["name"].endswith("-operator")]
    assert rendered(cluster_role["rules"]) == documented("operator")


AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"


def test_tenant_roles_aggregate_into_view_edit_and_admin() -> None:
    objects = helm.render(helm.CLUSTER)
    by_name = {r["metadata"]["name"]: r for r in helm.by_kind(objects, "ClusterRole")}
    view, edit = by_name[f"{helm.RELEASE}-lading-view"], by_name[f"{helm.RELEASE}-lading-edit"]
    assert {k for k, v in view["metadata"]["labels"].items() if k.startswith(AGGREGATE) and v == "true"} == {
        AGGREGATE + "view"}
    assert {k for k, v in edit["metadata"]["labels"].items() if k.startswith(AGGREGATE) and v == "true"} == {
        AGGREGATE + "edit", AGGREGATE + "admin"}
    assert rendered(view["rules"]) == documented("users-view")
    assert rendered(edit["rules"]) == documented("users-edit")
    # nothing cluster-scoped in namespaced mode, and none when turned off
    assert not helm.by_kind(helm.render(helm.NAMESPACED), "ClusterRole")
    off = helm.render({"rbac": {"aggregateToDefaultRoles": False}})
    assert [r["metadata"]["name"] for r in helm.by_kind(off, "ClusterRole")] == [f"{helm.RELEASE}-lading-operator"]


def test_the_example_tenant_role_grants_what_the_aggregated_roles_grant() -> None:
    import kubernetes_validate
    import yaml

    text = DOC.read_text()
    block = re.search(r"<!-- example:tenant-role -->\s*```yaml\n(.*?)```", text, re.S)
    assert block, "docs/security.md has no example tenant Role"
    docs = [d for d in yaml.safe_load_all(block.group(1)) if d]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.28", strict=True)
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert rendered(role["rules"]) == documented("users-view") | documented("users-edit")


def is_leader_election(role: dict[str, Any]) -> bool:
    return bool(role["metadata"]["name"].endswith("-leader-election"))


@pytest.mark.parametrize("mode", sorted(helm.MODES))
def test_leader_election_rules_are_the_documented_list_in_the_release_namespace_only(mode: str) -> None:
    (role,) = [r for r in roles(helm.render(helm.MODES[mode])) if is_leader_election(r)]
    assert (role["kind"], role["metadata"]["namespace"]) == ("Role", helm.NAMESPACE)
    assert rendered(role["rules"]) == documented("leader-election") == {
        ("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}


def test_namespaced_mode_operator_rules_are_the_documented_list_in_each_namespace() -> None:
    objects = helm.render(helm.NAMESPACED)
    operator_roles = [r for r in roles(objects) if not is_spark(r) and not is_leader_election(r)]
    assert sorted(r["metadata"]["namespace"] for r in operator_roles) == ["team-a", "team-b"]
    assert all(r["kind"] == "Role" for r in operator_roles)
    for role in operator_roles:
        assert rendered(role["rules"]) == documented("operator")


@pytest.mark.parametrize("mode", ["cluster", "namespaced"])
def test_spark_rules_are_the_documented_list(mode: str) -> None:
    spark_roles = [r for r in roles(helm.render(helm.MODES[mode])) if is_spark(r)]
    assert spark_roles
    for role in spark_roles:
        assert role["kind"] == "Role"
        assert rendered(role["rules"]) == documented("spark")


def test_spark_pvc_rules_only_when_asked() -> None:
    spark_roles = [r for r in roles(helm.render(helm.EVERYTHING)) if is_spark(r)]
    assert len(spark_roles) == 3
    for role in spark_roles:
        assert rendered(role["rules"]) == documented("spark") | documented("spark-pvc")


def test_everything_rendered_anywhere_is_documented() -> None:
    allowed = documented("operator") | documented("spark") | documented("spark-pvc") | \
        documented("users-view") | documented("users-edit") | documented("leader-election")
    for mode in helm.MODES.values():
        for role in roles(helm.render(mode)):
            extra = rendered(role["rules"]) - allowed
            assert not extra, (role["metadata"]["name"], sorted(extra))


def test_rbac_can_be_left_to_the_admin() -> None:
    values = {"rbac": {"create": False}, "spark": {"rbac": {"create": False}}}
    objects = helm.render(values)
    assert not roles(objects)
    assert not [o for o in objects if o["kind"].endswith("Binding")]


def test_security_md_promises_no_finalizer() -> None:
    """The operator puts no finalizer on anything (handlers/resources.py): security.md names the
    word only as the RBAC subresource blockOwnerDeletion needs."""
    text = re.sub(r"`(copyjobs|streamcopies|compactions)/finalizers`", "", DOC.read_text())
    assert "finaliz" not in text.lower()
