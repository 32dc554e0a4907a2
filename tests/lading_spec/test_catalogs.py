"""Catalog declarations (``lading_spec.catalogs``) and the spec fields that name a catalog:
``from.inputs[i].iceberg.{catalog, table}`` and ``to.catalog``; each error names its field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lading_spec import catalogs
from lading_spec.copyjob import parse_copyjob
from lading_spec.errors import SpecError


def _load(catalog: object, **to: object) -> dict[str, object]:
    return {"from": {"files": "s3://bkt/in/", "format": "parquet"}, "to": {"table": "s3://bkt/t/", "catalog": catalog, **to}}


def test_to_catalog_parses_and_names_each_bad_field() -> None:
    assert parse_copyjob(_load({"name": "lake", "table": "db.t"})).target.catalog == ("lake", "db.t")
    assert parse_copyjob(_load(None)).target.catalog is None
    cases = [
        (_load({"name": "lake"}), r"to.catalog.table: expected a table identifier"),
        (_load({"name": "Lake", "table": "db.t"}), r"to.catalog.name: expected the name of a catalog"),
        (_load({"name": "lake", "table": "db.t", "uri": "x"}), r"to.catalog.uri: unknown field"),
        (_load({"name": "lake", "table": "db.t"}, icebergMirror=False), r"to.catalog: a catalog points at the"),
        ({"from": {"table": "s3://bkt/t/"}, "to": {"files": "s3://bkt/o/", "catalog": {"name": "l", "table": "a.b"}}},
         r"to.catalog: applies to table targets"),
    ]
    for spec, message in cases:
        with pytest.raises(SpecError, match=message):
            parse_copyjob(spec)


def test_declarations_from_the_environment_or_a_file(tmp_path: Path) -> None:
    decl = {"lake": {"type": "glue", "properties": {"glue.region": "eu-west-1", "glue.skip-archive": True}}}
    found = catalogs.from_env({catalogs.ENV: json.dumps(decl)})
    assert found["lake"] == catalogs.Catalog("lake", "glue", {"glue.region": "eu-west-1", "glue.skip-archive": "true"})
    path = tmp_path / "catalogs.yaml"
    path.write_text("pg:\n  type: sql\n  properties: {uri: 'postgresql+psycopg://u@db/ice'}\n")
    assert catalogs.from_env({catalogs.FILE_ENV: str(path)})["pg"].type == "sql"
    assert catalogs.from_env({}) == {}
    with pytest.raises(catalogs.CatalogConfigError, match="a sql catalog needs its database URI"):
        catalogs.parse_declarations({"pg": {"type": "sql"}}, "here")
