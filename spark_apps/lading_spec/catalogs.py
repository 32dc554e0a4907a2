"""Iceberg catalogs a job may use: declared by the operator's admin, named by tenants.

A catalog is an endpoint (a Glue region's API, a database, a REST server) that lading sends
requests to, and a connection's credentials with them. So a tenant never gives a catalog's
address: the cluster admin declares each catalog once, by name, in the policy file
(``policy.catalogs.declared``; the chart's ``policy`` values), and lists which names each
namespace may use (``default`` / ``namespaces``, as ``policy.brokers`` does). A spec names a
catalog only by its name (``from.inputs[i].iceberg.catalog``, ``to.catalog.name``); the
operator refuses a name its namespace may not use and renders the declarations the namespace
may use into the job (the ``LADING_CATALOGS`` variable, JSON). ``lading run`` and the CLI read the
same variable (or ``LADING_CATALOGS_FILE``, a YAML or JSON file of declarations).

A declaration is ``{type, properties}``: ``type`` one of pyiceberg's catalog types, ``properties``
what pyiceberg's ``load_catalog`` takes for it (``glue.region``, ``glue.endpoint``, ``uri``,
``warehouse``...). No credential goes in a declaration (it is rendered into the job's pod spec):
keys that name one (``*secret*``, ``*password*``, ``*token*``, ``*credential*``, ``*access-key*``)
and a ``uri`` carrying a password are refused. Credentials come from the connection Secret as
the pod's environment: Glue takes ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` (boto3's chain); a
SQL catalog's database password is ``LADING_CATALOG_PASSWORD``, set into its URI by the job.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

ENV = "LADING_CATALOGS"
"""The job's catalog declarations (JSON ``{name: {type, properties}}``), rendered by the operator."""
FILE_ENV = "LADING_CATALOGS_FILE"
"""For local runs and the CLI: a YAML or JSON file of declarations (``ENV`` wins when both are set)."""
PASSWORD_ENV = "LADING_CATALOG_PASSWORD"
"""A SQL catalog's database password, from the connection Secret (never in a declaration)."""

TYPES = ("glue", "sql", "rest", "hive", "dynamodb")
"""pyiceberg's catalog types a declaration may name (``glue`` and ``sql`` are tested here: docs/iceberg.md)."""
NAME = re.compile(r"[a-z0-9]([-a-z0-9_]{0,61}[a-z0-9])?\Z")
_SECRET_KEY = re.compile(r"secret|password|token|credential|access-key|session", re.IGNORECASE)


class CatalogConfigError(ValueError):
    """A catalog declaration lading refuses; the message names where it is."""


@dataclass(frozen=True)
class Catalog:
    """One declared catalog: its name, pyiceberg type and (credential-free) properties."""

    name: str
    type: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "properties": dict(self.properties)}


def parse_declarations(value: Any, where: str) -> dict[str, Catalog]:
    """``{name: {type, properties}}`` → declarations; raises naming the bad entry."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CatalogConfigError(f"{where} must map a catalog name to {{type, properties}}")
    return {str(name): parse_one(str(name), body, f"{where}.{name}") for name, body in value.items()}


def parse_one(name: str, body: Any, where: str) -> Catalog:
    if not NAME.match(name):
        raise CatalogConfigError(f"{where}: {name!r} is not a catalog name (lower-case letters, digits, - and _)")
    if not isinstance(body, dict) or set(body) - {"type", "properties"}:
        raise CatalogConfigError(f"{where} must be a mapping with type and properties")
    kind = body.get("type")
    if kind not in TYPES:
        raise CatalogConfigError(f"{where}.type: {kind!r} is not a catalog type lading configures "
                                 f"(one of {', '.join(TYPES)})")
    props = body.get("properties") or {}
    if not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(v, str | int | bool)
                                              for k, v in props.items()):
        raise CatalogConfigError(f"{where}.properties must map property names to values")
    out = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in props.items()}
    for key, text in out.items():
        if _SECRET_KEY.search(key):
            raise CatalogConfigError(f"{where}.properties.{key}: a credential never goes in a catalog declaration "
                                     "(it is rendered into the job's pods); put it in the connection Secret "
                                     f"(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or {PASSWORD_ENV} for a SQL catalog)")
        if key == "uri" and "://" in text and urlsplit(text).password is not None:
            raise CatalogConfigError(f"{where}.properties.uri: the URI carries a password; leave it out and put it in "
                                     f"the connection Secret's {PASSWORD_ENV}")
    if kind == "sql" and not out.get("uri"):
        raise CatalogConfigError(f"{where}.properties.uri: a sql catalog needs its database URI "
                                 "(postgresql+psycopg://user@host:5432/db)")
    return Catalog(name, str(kind), out)


def render(catalogs: Mapping[str, Catalog]) -> str:
    """The ``LADING_CATALOGS`` value for these declarations."""
    return json.dumps({name: c.to_dict() for name, c in sorted(catalogs.items())}, sort_keys=True)


def from_env(env: Mapping[str, str] | None = None) -> dict[str, Catalog]:
    """The declarations this process may use: ``LADING_CATALOGS``, else ``LADING_CATALOGS_FILE``."""
    env = os.environ if env is None else env
    text = env.get(ENV)
    if text:
        try:
            return parse_declarations(json.loads(text), ENV)
        except json.JSONDecodeError as e:
            raise CatalogConfigError(f"{ENV}: not JSON ({e})") from e
    path = env.get(FILE_ENV)
    if not path:
        return {}
    import yaml

    try:
        with open(path) as f:
            return parse_declarations(yaml.safe_load(f), f"{FILE_ENV}={path}")
    except OSError as e:
        raise CatalogConfigError(f"{FILE_ENV}={path}: cannot read it ({e.strerror})") from e


IDENTIFIER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)+\Z")


def identifier_error(value: Any) -> str | None:
    """Why ``value`` is not a catalog table identifier (``namespace.name``), or None."""
    if not isinstance(value, str) or not IDENTIFIER.match(value):
        return f"expected a table identifier namespace.name (orders_db.orders), got {value!r}"
    return None
