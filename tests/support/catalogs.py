"""Iceberg catalogs on real servers for the catalog tests: AWS Glue on the suite's moto server (HTTP,
127.0.0.1; pyiceberg's own Glue tests use moto too) and Iceberg's SQL catalog (the JDBC catalog's
``iceberg_tables`` layout, pyiceberg's ``SqlCatalog``) on the private PostgreSQL (tests/postgres.py).

``lake`` (parametrised ``glue``/``sql``) declares catalog ``lake`` in ``LADING_CATALOGS`` for the
test, as the operator renders it into a job, and returns its name."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from lading_spec import catalogs


def glue(endpoint: str) -> dict[str, Any]:
    return {"type": "glue", "properties": {"glue.endpoint": endpoint, "glue.region": "us-east-1"}}


def sql(dsn: str, user: str | None = None) -> dict[str, Any]:
    parts = dict(p.split("=", 1) for p in dsn.split())
    return {"type": "sql", "properties": {
        "uri": f"postgresql+psycopg://{user or parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}"}}


@pytest.fixture(params=["glue", "sql"])
def lake(request: pytest.FixtureRequest, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from support.moto_atomic import honour_glue_version_ids

    honour_glue_version_ids()  # Glue's optimistic locking, which moto's Glue lacks
    decl = glue(s3_endpoint) if request.param == "glue" else sql(request.getfixturevalue("postgres_dsn"))
    monkeypatch.setenv(catalogs.ENV, json.dumps({"lake": decl}))
    yield "lake"


def ident() -> str:
    """A fresh ``namespace.name`` (each test its own Glue database / SQL namespace)."""
    return f"db{uuid.uuid4().hex[:6]}.orders"


def reader_rows(name: str, table: str) -> pa.Table:
    """What an engine reads through the catalog: pyiceberg's own ``load_catalog`` and ``load_table``."""
    from pyiceberg.catalog import load_catalog

    decl = catalogs.from_env()[name]
    return load_catalog(name, type=decl.type, **decl.properties).load_table(table).scan().to_arrow()
