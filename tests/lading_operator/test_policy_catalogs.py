"""The policy's ``catalogs`` section: which declared Iceberg catalogs a namespace's CopyJobs may name
(``from.inputs[i].iceberg.catalog``, ``to.catalog.name``), refused at the operator naming the field;
what reaches the job (``LADING_CATALOGS``: the namespace's declarations, no credential)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from lading_operator import kinds, reconcile, render
from lading_operator import policy as pol
from lading_spec import catalogs

IMAGE, ACCOUNT = "ghcr.io/lading/lading:0.1.0", "lading-spark"
DOC = {"allowedPrefixes": {"default": ["s3://lake/"]},
       "catalogs": {"declared": {"glue-lake": {"type": "glue", "properties": {"glue.region": "eu-west-1"}},
                                 "pg": {"type": "sql", "properties": {"uri": "postgresql+psycopg://lading@db:5432/ice"}}},
                    "default": [], "namespaces": {"analytics": ["glue-lake", "pg"], "team-a": ["pg"]}}}


def copy_in(catalog: str) -> dict[str, Any]:
    return {"from": {"query": "SELECT * FROM o", "inputs": [{"name": "o", "iceberg": {"catalog": catalog,
                                                                                     "table": "db.orders"}}]},
            "to": {"files": "s3://lake/out/"}}


def load_to(catalog: str) -> dict[str, Any]:
    return {"from": {"files": "s3://lake/in/", "format": "parquet"},
            "to": {"table": "s3://lake/t/", "catalog": {"name": catalog, "table": "db.t"}}}


def verdict(policy: pol.Policy, namespace: str, spec: dict[str, Any]) -> tuple[str, str] | None:
    def check(ns: str, uris: list[tuple[str, str]], spark: Any) -> str | None:
        return pol.check_resource(policy, ns, uris, spark, IMAGE, ACCOUNT)

    return reconcile.validate(kinds.COPYJOB, spec, namespace, check, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))


@pytest.mark.parametrize(("namespace", "spec", "refused"), [
    ("analytics", copy_in("glue-lake"), None),
    ("analytics", load_to("pg"), None),
    ("team-a", copy_in("pg"), None),
    ("team-a", copy_in("glue-lake"), "spec.from.inputs[0].iceberg.catalog: 'glue-lake' is not an allowed Iceberg"),
    ("team-a", load_to("glue-lake"), "spec.to.catalog.name: 'glue-lake' is not an allowed Iceberg catalog"),
    ("other", copy_in("pg"), "spec.from.inputs[0].iceberg.catalog: 'pg' is not an allowed Iceberg catalog "
                             "(no catalog is allowed in namespace 'other')"),
    ("analytics", copy_in("undeclared"), "spec.from.inputs[0].iceberg.catalog: 'undeclared' is not an allowed"),
])
def test_a_namespace_names_only_its_catalogs(namespace: str, spec: dict[str, Any], refused: str | None) -> None:
    out = verdict(pol.parse_policy(DOC), namespace, spec)
    if refused is None:
        assert out is None
    else:
        assert out is not None and out[0] == "Forbidden" and out[1].startswith(refused), out
        assert "policy.catalogs" in out[1]


def test_without_a_catalogs_section_no_catalog_is_allowed() -> None:
    policy = pol.parse_policy({"allowedPrefixes": {"default": ["s3://lake/"]}})
    out = verdict(policy, "team-a", copy_in("pg"))
    assert out is not None and out[0] == "Forbidden" and "no catalog is allowed in namespace 'team-a'" in out[1]
    assert policy.catalogs_env("team-a") == ""


def test_the_job_gets_its_namespaces_declarations_only() -> None:
    policy = pol.parse_policy(DOC)
    assert json.loads(policy.catalogs_env("team-a")) == {"pg": {"type": "sql", "properties": {
        "uri": "postgresql+psycopg://lading@db:5432/ice"}}}
    assert set(json.loads(policy.catalogs_env("analytics"))) == {"glue-lake", "pg"}
    run = render.RunIdentity(kind="CopyJob", namespace="team-a", name="c", uid="u", generation=1, run_id="r",
                             run_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    app = render.build_sparkapplication(copy_in("pg"), run, catalogs=policy.catalogs_env("team-a"),
                                        installation=render.Installation(image=IMAGE))
    for pod in ("driver", "executor"):
        env = {e["name"]: e.get("value") for e in app["spec"][pod]["env"]}
        assert json.loads(env[catalogs.ENV]) == json.loads(policy.catalogs_env("team-a"))


@pytest.mark.parametrize(("section", "says"), [
    ({"declared": {"x": {"type": "glue", "properties": {"glue.secret-access-key": "s"}}}},
     "catalogs.declared.x.properties.glue.secret-access-key: a credential never goes in a catalog declaration"),
    ({"declared": {"x": {"type": "sql", "properties": {"uri": "postgresql://u:hunter2@db/ice"}}}},
     "catalogs.declared.x.properties.uri: the URI carries a password"),
    ({"declared": {"x": {"type": "nessie"}}}, "catalogs.declared.x.type: 'nessie' is not a catalog type"),
    ({"declared": {}, "default": ["x"]}, "catalogs.default[0]: 'x' is not declared under catalogs.declared"),
    ({"declared": {"Bad Name": {"type": "glue"}}}, "is not a catalog name"),
    ({"catalogs": []}, "catalogs must be a mapping with declared, default and namespaces"),
])
def test_a_declaration_lading_cannot_keep_credential_free_is_refused_at_start(section: dict[str, Any],
                                                                              says: str) -> None:
    with pytest.raises(pol.PolicyError) as e:
        pol.parse_policy({"catalogs": section})
    assert says in str(e.value)
    assert "hunter2" not in str(e.value)
