"""The Iceberg mirror as a commit observer (``table.log.commits.CommitObserver``): what the log used to call by name.

Beside a commit's conditional write it starts the mirror's first round (``mirror.prepare``); after
the commit landed it publishes (``mirror.after_commit``), when the table's mirror is on or being
switched (``TableMeta.iceberg_mirror``, ``mirror_switch``). The mirror itself (and pyiceberg) is
imported at the first commit, not with this module: a Spark task that only writes parts, and
imports the log for its types, never loads it. The table package registers ``MIRROR`` as a default
observer (``lading_jobs.table``), so every table opened without saying otherwise publishes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from lading_jobs.table.log.commits import Prepared, Snapshot, TableLog


class MirrorObserver:
    """Publishes a table's Iceberg metadata after each commit (``table.iceberg.mirror``)."""

    def prepare(self, log: TableLog, entry: dict[str, Any], snapshot: Callable[[], Snapshot]) -> Prepared | None:
        if "metadata" in entry or not log.meta.iceberg_mirror:  # a switch commit, or the mirror is off
            return None
        from lading_jobs.table.iceberg import mirror

        return mirror.prepare(log, entry, snapshot())

    def after_commit(self, log: TableLog, entry: dict[str, Any], snapshot: Snapshot,
                     prepared: Prepared | None) -> None:
        if snapshot.meta.iceberg_mirror or "metadata" in entry:  # on, or being switched
            from lading_jobs.table.iceberg import mirror

            mirror.after_commit(log, entry, snapshot, cast("mirror.Prepared | None", prepared))  # its own prepare's


MIRROR = MirrorObserver()
