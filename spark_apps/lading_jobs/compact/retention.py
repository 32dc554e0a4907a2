"""Retention: delete what no state of the table in the grace period references.

A state is *live* during the grace period when it was the table's latest state
at some moment in ``(now - gracePeriod, now]``: the latest state, every state
whose commit came within the period, and the state just before the first of
them (a reader may have opened it before the period began). Their parts are
*referenced*. Under ``data/``, every object that is not referenced and was
last modified before the period began is deleted: parts removed by a commit
(compaction outputs replaced them), and orphans of writers that crashed between
completing their uploads and committing. Pending multipart uploads anywhere
under the table begun before the period are aborted. ``dryRun`` only lists.

``live_paths`` reads the few commits of the period (and one checkpoint);
``choose`` is the pure decision; ``apply`` performs it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table.log import TableLog, read_commit

LISTED = 20
"""Paths a result lists by name (the termination log holds < 4 KiB)."""


@dataclass(frozen=True)
class Sweep:
    removed: tuple[st.ObjectInfo, ...]  # parts a commit removed, past the grace period
    orphans: tuple[st.ObjectInfo, ...]  # objects under data/ no commit ever referenced
    uploads: tuple[st.PendingUpload, ...]  # stale pending uploads under the table

    @property
    def bytes(self) -> int:
        return sum(o.size for o in (*self.removed, *self.orphans))

    def summary(self, uri: str, dry_run: bool) -> dict[str, object]:
        root = fmt.table_root(uri)
        names = [o.uri[len(root):] if o.uri.startswith(root) else o.uri for o in (*self.removed, *self.orphans)]
        return {"dryRun": dry_run, "partsDeleted": len(self.removed), "orphansDeleted": len(self.orphans),
                "bytesDeleted": self.bytes, "uploadsAborted": len(self.uploads),
                ("wouldDelete" if dry_run else "deleted"): names[:LISTED]}


def live_paths(log: TableLog, now_ms: int, grace_ms: int) -> tuple[set[str], set[str]]:
    """(paths referenced by a live state, paths any read commit ever added)."""
    start = now_ms - grace_ms
    latest = log.snapshot()
    referenced = {p.path for p in latest.parts}
    ever_added: set[str] = set(referenced)
    v = latest.version
    while v > 0:
        entry = read_commit(log.uri, log.storage, v)
        added = [a["path"] for a in entry.get("add", ())]
        referenced.update(added)
        ever_added.update(added)
        ever_added.update(entry.get("remove", ()))
        if int(entry.get("timestamp", 0)) < start:
            break  # state v was latest when the period began
        v -= 1
    before = log.snapshot(version=v) if v != latest.version else latest
    referenced.update(p.path for p in before.parts)
    return referenced, ever_added


def choose(uri: str, objects: Iterable[st.ObjectInfo], uploads: Iterable[st.PendingUpload],
           referenced: set[str], removed_known: set[str], now_ms: int, grace_ms: int) -> Sweep:
    """What to delete (pure). Objects or uploads without a time are kept."""
    root = fmt.table_root(uri)
    data = f"{root}{fmt.DATA_DIR}/"
    cutoff = (now_ms - grace_ms) / 1000.0
    removed: list[st.ObjectInfo] = []
    orphans: list[st.ObjectInfo] = []
    for o in objects:
        if not o.uri.startswith(data):
            continue
        path = o.uri[len(root):]
        if path in referenced or o.modified is None or o.modified >= cutoff:
            continue
        (removed if path in removed_known else orphans).append(o)
    stale = tuple(u for u in uploads if u.initiated is not None and u.initiated < cutoff)
    return Sweep(tuple(removed), tuple(orphans), stale)


def plan_sweep(log: TableLog, now_ms: int, grace_ms: int) -> Sweep:
    referenced, known = live_paths(log, now_ms, grace_ms)
    root = fmt.table_root(log.uri)
    objects = list(log.storage.list_objects(f"{root}{fmt.DATA_DIR}/"))
    uploads = log.storage.list_pending_uploads(root)
    return choose(log.uri, objects, uploads, referenced, known, now_ms, grace_ms)


def apply(storage: st.Storage, sweep: Sweep) -> None:
    """Delete the objects and abort the uploads (uploads first: an upload may complete into a name)."""
    for u in sweep.uploads:
        with contextlib.suppress(st.StorageError, OSError):  # already completed or aborted by its writer
            storage.abort_upload(u)
    storage.delete([o.uri for o in (*sweep.removed, *sweep.orphans)])
