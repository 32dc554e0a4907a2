"""The Iceberg mirror's switch: one commit of the table's settings, whoever flips it.

``lading table mirror URI --on/--off`` and the resources' ``icebergMirror`` field (a CopyJob's
``to.icebergMirror``, a StreamCopy's ``target.icebergMirror``) switch an existing table's mirror
the same way: a commit of its own (operation ``properties``) whose ``metadata`` carries the new
``icebergMirror``, the table's other settings unchanged (docs/table-format.md). Switching it on
catches the mirror up (the commit's ``mirror.after_commit`` publishes every version it lacks);
switching it off leaves one last metadata file that says from which version (docs/iceberg.md).
A new table takes the field at creation instead (commit 0's ``metadata.icebergMirror``).
"""

from __future__ import annotations

from dataclasses import replace

from lading_jobs.table.log.commits import Change, Snapshot, TableLog


def switch(log: TableLog, on: bool) -> Snapshot | None:
    """Switch the table's Iceberg mirror ``on`` (or off): the switch commit's snapshot, or None when the
    table's mirror already was so (nothing committed)."""
    meta = log.snapshot().meta
    if meta.iceberg_mirror == on:
        return None
    return log.commit(Change(operation="properties", meta=replace(meta, iceberg_mirror=on)))
