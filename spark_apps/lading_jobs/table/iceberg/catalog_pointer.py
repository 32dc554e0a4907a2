"""A catalog's pointer to an Iceberg table's metadata file, moved compare-and-swap.

Engines find an Iceberg table through a catalog: a row (Glue's table parameter
``metadata_location``; the SQL/JDBC catalog's ``iceberg_tables.metadata_location``) naming the
table's current metadata file. A lading table bound to a catalog (``TableMeta.catalog``: a
catalog name and ``namespace.name``) has that pointer moved by every mirror publish, right after
the mirror's ``v<n>.metadata.json`` was created (``mirror.publish``), so a reader through the
catalog never sees a metadata file the mirror has not finished.

The move is a compare-and-swap from the metadata file the publish followed: Glue's
``UpdateTable`` with the ``VersionId`` read with the pointer (Glue refuses it when the table
changed since), the SQL catalog's ``UPDATE … WHERE metadata_location = <expected>`` (one row, or
none). When the pointer is elsewhere:

* at an older ``v<m>.metadata.json`` of this table (a publish killed between its file and its
  pointer, or a racing writer not there yet): this publish swaps from that one instead, so the
  pointer only ever moves forward, to a file naming every version before it;
* at a newer one of this table: another writer got further; nothing to do;
* anywhere else (a file another engine wrote, another table's): a conflicting writer — refused
  with ``CatalogConflict``, never overwritten.

``lading table sync`` moves the pointer to the newest metadata file (``advance``), and
``lading table register`` creates the catalog's entry for an existing table (``register``).

Catalogs come from ``lading_spec.catalogs`` declarations; pyiceberg opens them (any type it can
configure reads), but the swap is implemented for ``glue`` and ``sql`` only: another type can
name an input, not be a table's binding.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from lading_jobs.table.log.commits import TableError
from lading_spec import catalogs as decls

SWAPPABLE = ("glue", "sql")
_NUMBERED = re.compile(r"/metadata/v(\d+)\.metadata\.json\Z")


class CatalogError(TableError):
    """A catalog lading cannot use as asked (undeclared, unreachable, refusing); names the catalog."""


class CatalogConflict(CatalogError):
    """The catalog's pointer names a metadata file lading did not write for this table."""


@dataclass(frozen=True)
class Binding:
    """A table's catalog entry: the declared catalog's name and the table's ``namespace.name``."""

    catalog: str
    table: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.catalog, "table": self.table}

    @classmethod
    def from_dict(cls, d: Any) -> Binding | None:
        return cls(str(d["name"]), str(d["table"])) if isinstance(d, dict) and d.get("name") else None


def declaration(name: str) -> decls.Catalog:
    """The declared catalog ``name`` (``LADING_CATALOGS`` / ``LADING_CATALOGS_FILE``)."""
    try:
        found = decls.from_env()
    except decls.CatalogConfigError as e:
        raise CatalogError(str(e)) from e
    if name not in found:
        known = ", ".join(sorted(found)) or "none"
        raise CatalogError(f"catalog {name!r} is not declared for this job (declared: {known}); the cluster admin "
                           f"declares catalogs in policy.catalogs (locally: {decls.FILE_ENV})")
    return found[name]


def _properties(decl: decls.Catalog) -> dict[str, str]:
    props = {"type": decl.type, **decl.properties}
    import os

    password = os.environ.get(decls.PASSWORD_ENV)
    if decl.type == "sql" and password:  # the Secret's password into the database URI, never logged
        parts = urlsplit(props["uri"])
        if parts.username and parts.password is None:
            host = parts.netloc.split("@", 1)[1]
            from urllib.parse import quote

            props["uri"] = urlunsplit(parts._replace(netloc=f"{parts.username}:{quote(password, safe='')}@{host}"))
    return props


def _refusal(name: str, e: BaseException) -> str:
    """What a catalog said, without anything of its connection string (a password in it)."""
    text = str(e).split("\n", 1)[0]
    text = re.sub(r"://[^@/\s]*@", "://***@", text)
    return f"catalog {name!r} refused or could not be reached ({type(e).__name__}: {text[:300]})"


@contextlib.contextmanager
def _talking(name: str) -> Iterator[None]:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        yield
    except (CatalogError, NoSuchTableError):
        raise
    except Exception as e:  # noqa: BLE001 - botocore's, SQLAlchemy's, HTTP errors: one clear refusal
        raise CatalogError(_refusal(name, e)) from e


def open_catalog(name: str) -> Any:
    """The pyiceberg catalog of the declaration ``name``."""
    decl = declaration(name)
    from pyiceberg.catalog import load_catalog

    with _talking(name):
        return load_catalog(name, **_properties(decl))


def _split(table: str) -> tuple[str, str]:
    namespace, _, name = table.rpartition(".")
    return namespace, name


def location(name: str, table: str) -> str | None:
    """The metadata file catalog ``name`` names for ``table`` (None: no such table)."""
    catalog = open_catalog(name)
    kind = declaration(name).type
    namespace, tname = _split(table)
    with _talking(name):
        if kind == "glue":
            try:
                found = catalog.glue.get_table(DatabaseName=namespace, Name=tname)["Table"]
            except catalog.glue.exceptions.EntityNotFoundException:
                return None
            return (found.get("Parameters") or {}).get("metadata_location")
        if kind == "sql":
            return _sql_location(catalog, namespace, tname)
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return str(catalog.load_table(table).metadata_location)
        except NoSuchTableError:
            return None


def _sql_location(catalog: Any, namespace: str, tname: str) -> str | None:
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    with Session(catalog.engine) as session:
        stmt = select(IcebergTables.metadata_location).where(
            IcebergTables.catalog_name == catalog.name, IcebergTables.table_namespace == namespace,
            IcebergTables.table_name == tname)
        found = session.execute(stmt).first()
        return None if found is None else found[0]


def _metadata(uri: str) -> Any:
    import pyarrow as pa
    from pyiceberg.serializers import FromByteStream

    from lading_jobs import storage as st

    return FromByteStream.table_metadata(pa.BufferReader(st.open_storage(uri).read(uri)))  # type: ignore[arg-type]


def create(name: str, table: str, metadata_uri: str) -> None:
    """Create catalog ``name``'s entry ``table`` pointing at ``metadata_uri`` (its namespace too);
    ``CatalogConflict`` when the entry exists."""
    from pyiceberg.exceptions import TableAlreadyExistsError

    catalog, kind = open_catalog(name), declaration(name).type
    namespace, tname = _split(table)
    with _talking(name):
        with contextlib.suppress(Exception):  # exists already (any catalog's own error for it)
            catalog.create_namespace_if_not_exists(namespace)
        try:
            if kind == "glue":
                from pyiceberg.catalog.glue import _construct_table_input

                meta = _metadata(metadata_uri)
                try:
                    catalog.glue.create_table(DatabaseName=namespace, TableInput=_construct_table_input(
                        tname, metadata_uri, dict(meta.properties), meta))
                except catalog.glue.exceptions.AlreadyExistsException as e:
                    raise TableAlreadyExistsError(table) from e
            elif kind == "sql":
                from pyiceberg.catalog.sql import IcebergTables
                from sqlalchemy import insert
                from sqlalchemy.exc import IntegrityError
                from sqlalchemy.orm import Session

                with Session(catalog.engine) as session:
                    try:
                        session.execute(insert(IcebergTables).values(
                            catalog_name=catalog.name, table_namespace=namespace, table_name=tname,
                            metadata_location=metadata_uri, previous_metadata_location=None))
                        session.commit()
                    except IntegrityError as e:
                        raise TableAlreadyExistsError(table) from e
            else:
                catalog.register_table(table, metadata_uri)
        except TableAlreadyExistsError as e:
            raise CatalogConflict(f"catalog {name!r} already has a table {table}; lading registers a table only "
                                  "where none is (drop that entry, or register under another name)") from e


def swap(name: str, table: str, expected: str, new: str) -> bool:
    """Move ``table``'s pointer from ``expected`` to ``new``; False when it was not at ``expected``."""
    catalog, kind = open_catalog(name), declaration(name).type
    namespace, tname = _split(table)
    if kind not in SWAPPABLE:
        raise CatalogError(f"catalog {name!r} is of type {kind}: lading moves a table's pointer compare-and-swap in "
                           f"{' and '.join(SWAPPABLE)} catalogs only (a {kind} catalog can name inputs)")
    with _talking(name):
        if kind == "glue":
            from pyiceberg.catalog.glue import _construct_table_input

            try:
                found = catalog.glue.get_table(DatabaseName=namespace, Name=tname)["Table"]
            except catalog.glue.exceptions.EntityNotFoundException as e:
                raise CatalogConflict(f"catalog {name!r} has no table {table} any more (dropped by someone); "
                                      "register it again: lading table register") from e
            if (found.get("Parameters") or {}).get("metadata_location") != expected:
                return False
            meta = _metadata(new)
            table_input = _construct_table_input(tname, new, dict(meta.properties), meta, glue_table=found,
                                                 prev_metadata_location=expected)
            try:
                catalog.glue.update_table(DatabaseName=namespace, TableInput=table_input,
                                          VersionId=found["VersionId"])
            except catalog.glue.exceptions.ConcurrentModificationException:
                return False
            return True
        from pyiceberg.catalog.sql import IcebergTables
        from sqlalchemy import update
        from sqlalchemy.orm import Session

        with Session(catalog.engine) as session:
            stmt = (update(IcebergTables)
                    .where(IcebergTables.catalog_name == catalog.name, IcebergTables.table_namespace == namespace,
                           IcebergTables.table_name == tname, IcebergTables.metadata_location == expected)
                    .values(metadata_location=new, previous_metadata_location=expected))
            moved = session.execute(stmt).rowcount == 1  # type: ignore[attr-defined]
            session.commit()
            return moved


def number(root: str, uri: str | None) -> int | None:
    """The number of ``uri`` when it is one of table ``root``'s mirror files ``v<n>.metadata.json``."""
    if not uri or not uri.startswith(root.rstrip("/") + "/metadata/"):
        return None
    found = _NUMBERED.search(uri)
    return int(found.group(1)) if found else None


def advance(root: str, binding: Binding, expected: str | None, new: str) -> str:
    """Move ``binding``'s pointer forward to ``new`` (a metadata file of table ``root``), swapping from
    ``expected`` first and then from whichever older file of this table the pointer names. What
    happened: ``moved``, ``newer`` (the pointer was at a newer file already), ``created``."""
    target = number(root, new)
    assert target is not None, new
    current = expected
    for _ in range(100):  # each retry sees the pointer further on: bounded by the racing writers
        if number(root, current) is not None and swap(binding.catalog, binding.table, str(current), new):
            return "moved"
        current = location(binding.catalog, binding.table)
        if current is None:
            raise CatalogConflict(f"catalog {binding.catalog!r} has no table {binding.table} (dropped?); lading "
                                  f"moves only a pointer it registered: `lading table register {root} --catalog "
                                  f"{binding.catalog} --as {binding.table}`")
        at = number(root, current)
        if at is None:
            raise CatalogConflict(
                f"catalog {binding.catalog!r}'s table {binding.table} points at {current}, a metadata file lading did "
                f"not write for {root}: another writer changed it; lading does not overwrite it (the mirror of "
                f"{root} is at {new})")
        if at >= target:
            return "newer"
    raise CatalogError(f"catalog {binding.catalog!r}'s table {binding.table} kept moving; lading table sync retries")


def register(root: str, binding: Binding, newest: str) -> str:
    """Point ``binding`` at ``newest`` (table ``root``'s newest metadata file): create the entry, or move
    one that names an older file of this table; ``CatalogConflict`` for an entry of anything else."""
    current = location(binding.catalog, binding.table)
    if current is None:
        create(binding.catalog, binding.table, newest)
        return "created"
    return advance(root, binding, current, newest)


def follow(binding: tuple[str, str] | None, root: str, prev: str | None, new: str, *, strict: bool = False) -> None:
    """The mirror's step right after it created metadata file ``new`` (after ``prev``): move the bound
    catalog's pointer there. Nothing for a table without a binding. A failure leaves the pointer at an
    older, whole file: said on stderr (``lading table sync`` moves it later), never failing the publish,
    whose commit and metadata file stand; raised with ``strict`` (sync, register)."""
    if binding is None:
        return
    try:
        if prev is None:  # the table's first metadata file: a table created bound (to.catalog)
            register(root, Binding(*binding), new)
        else:
            advance(root, Binding(*binding), prev, new)
    except Exception as e:
        if strict:
            raise
        import sys

        print(f"lading: catalog {binding[0]!r}'s pointer for {binding[1]} was not moved to {new} ({e}); "
              f"`lading table sync {root}` moves it", file=sys.stderr)
