"""Binding a lading table to a catalog entry: ``lading table register URI --catalog NAME --as ns.name``.

The binding is part of the table's settings (``TableMeta.catalog``, in a commit of its own, operation
``properties``, as the mirror switch is: table/iceberg/switch.py), so every writer of the table —
CopyJob, StreamCopy, Compaction, ``lading table sync`` — moves the catalog's pointer after its
mirror publish, without being told (table/iceberg/catalog_pointer.py). A table created by a CopyJob with
``to.catalog`` takes it in commit 0 instead.

Registering: the mirror is caught up first; the catalog's entry is created pointing at the newest
metadata file (or, when the entry already points at an older file of this table, moved), and only
then is the binding committed, so the binding commit's own publish finds the entry and swaps it
forward. An entry that names anything else is refused before anything is committed.
"""

from __future__ import annotations

from dataclasses import replace

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table.iceberg import catalog_pointer as cp
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.log.commits import Change, TableError, TableLog


def register(uri: str, catalog: str, table: str, storage: st.Storage | None = None) -> str:
    """Bind table ``uri`` to ``catalog``'s entry ``table``; the metadata file the entry points at."""
    storage = storage or st.open_storage(uri)
    log = TableLog.open_existing(uri, storage)
    meta = log.snapshot().meta
    if not meta.iceberg_mirror:
        raise TableError(f"{uri}: the table's Iceberg mirror is off; a catalog can only point at a mirrored table "
                         f"(`lading table mirror {uri} --on` first)")
    cp.declaration(catalog)  # declared, before anything else
    mirror.sync(uri, storage)
    root = log.uri
    mirror.forget(root)
    newest = mirror.current_metadata(root, storage)
    if newest is None:
        raise TableError(f"{uri}: the table has no Iceberg metadata yet")
    cp.register(root, cp.Binding(catalog, table), newest)
    if meta.catalog != (catalog, table):
        log.commit(Change(operation="properties", meta=replace(meta, catalog=(catalog, table))))
        mirror.flush(root)
    return cp.location(catalog, table) or newest


def check(uri: str, catalog: str, table: str) -> None:
    """Before a CopyJob with ``to.catalog`` writes anything: the catalog is declared and answers, and
    its entry ``table`` is free or already this table's; a ``TableError`` naming ``to.catalog`` if not."""
    try:
        current = cp.location(catalog, table)
    except cp.CatalogError as e:
        raise TableError(f"to.catalog.name: {e}") from e
    if current is not None and cp.number(fmt.table_root(uri), current) is None:
        raise TableError(f"to.catalog.table: catalog {catalog!r}'s table {table} points at {current}, not at this "
                         f"table's Iceberg metadata ({fmt.table_root(uri)}metadata/); name a free entry")


def ensure(uri: str, catalog: str, table: str) -> str:
    """After a CopyJob with ``to.catalog`` committed: the table is bound (registered now, the first time)."""
    log = TableLog.open_existing(uri)
    if log.snapshot().meta.catalog == (catalog, table):
        return cp.location(catalog, table) or ""
    try:
        return register(uri, catalog, table)
    except (TableError, st.StorageError) as e:
        raise TableError(f"to.catalog: the rows are committed (table {uri}, version {log.version}) but the table "
                         f"was not registered in catalog {catalog!r} ({e}); run the CopyJob again or `lading table "
                         f"register {uri} --catalog {catalog} --as {table}`") from e


def sync(uri: str, storage: st.Storage | None = None) -> str | None:
    """Move a bound table's pointer to its newest metadata file (after ``mirror.sync``); the file, or
    None for a table without a binding."""
    storage = storage or st.open_storage(uri)
    log = TableLog.open_existing(uri, storage)
    binding = log.snapshot().meta.catalog
    if binding is None:
        return None
    root = log.uri
    mirror.forget(root)  # the store's newest file, not this process's memory of it
    newest = mirror.current_metadata(root, storage)
    if newest is not None:
        cp.follow(binding, root, None, newest, strict=True)
    return cp.location(*binding)
