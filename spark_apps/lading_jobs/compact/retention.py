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

Ages are the store's: an object's ``LastModified`` is compared with the store's
own clock (``store_now_ms``: the time it stamps on a scratch object), never the
driver's. On AWS S3 a multipart object may carry its upload's *initiation*
time, so it can look older than it is by as long as its write took: a part
completed but not yet committed could pass any grace period. So besides the age,
nothing that a *live intent* lists (a load's ``_lading_loads/<run>.intent.json``,
written before any of its uploads completes) is deleted or aborted, and the
grace period has a floor of 24 h (``lading_spec.compaction.MIN_GRACE_PERIOD``,
``allowShortGracePeriod`` to go below it).

``live_paths`` reads the latest state only: its tombstones (parts removed in the
last ``fmt.TOMBSTONE_MS``, with their commits' times, kept in every checkpoint)
say which parts live states of the period held; only when the period reaches
further back than the tombstones do (a longer grace period, a checkpoint written
before them) does it read the commits of the period one by one. ``choose`` is
the pure decision; ``apply`` performs it.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from lading_jobs import storage as st
from lading_jobs import uploadset
from lading_jobs.table import format as fmt
from lading_jobs.table.log.commits import TableError, TableLog, read_commit

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
    """(paths referenced by a live state, paths known to have been parts: referenced or removed)."""
    start = now_ms - grace_ms
    latest = log.snapshot()
    referenced = {p.path for p in latest.parts}
    if latest.removed_from is not None and latest.removed_from <= start:
        # every part a live state held is in the latest state or was removed within the period
        referenced.update(path for path, t in latest.removed.items() if t >= start)
        return referenced, referenced | set(latest.removed)
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


def store_now_ms(storage: st.Storage, uri: str) -> int:
    """The store's clock: the ``LastModified`` it stamps on a scratch object written now (then
    deleted); the driver's clock only when the store gives none. S3 stamps whole seconds, so this
    is up to a second early: the cutoff only moves back."""
    probe = f"{fmt.table_root(uri)}{fmt.LOG_DIR}/_clock-{uuid.uuid4().hex}"
    storage.put(probe, b"")
    try:
        info = storage.head(probe)
    finally:
        with contextlib.suppress(Exception):
            storage.delete([probe])
    if info is None or info.modified is None:
        return int(time.time() * 1000)
    return int(info.modified * 1000)


def intent_paths(storage: st.Storage, uri: str) -> set[str]:
    """Paths (relative to the table) of every upload a live intent under the table lists: a
    writer's parts between completing and committing. An intent that cannot be read stops
    retention (what it protects is unknown)."""
    root = fmt.table_root(uri)
    out: set[str] = set()
    for obj in storage.list_objects(f"{root}{uploadset.LOADS_DIR}/"):
        if not obj.uri.endswith(".intent.json"):
            continue
        try:
            intent = uploadset.Intent.from_json(storage.read(obj.uri))
        except (st.StorageError, FileNotFoundError):
            continue  # finished (deleted) since the listing
        except (ValueError, KeyError, TypeError) as e:
            raise TableError(f"retention cannot read the commit intent {obj.uri} ({e}), so it cannot tell which "
                             "completed parts a writer is about to commit; deleting nothing. Rerun that "
                             "write (its runId) to finish or undo it, or remove the intent") from e
        out.update(u.uri[len(root):] for u in intent.uploads if u.uri.startswith(root))
    return out


def plan_sweep(log: TableLog, now_ms: int, grace_ms: int, *, store_now: int | None = None) -> Sweep:
    """What retention deletes: ``now_ms`` (the driver's clock) places the period among the commits'
    times; objects' ages are measured on the store's clock (``store_now``, measured if not given)."""
    referenced, known = live_paths(log, now_ms, grace_ms)
    root = fmt.table_root(log.uri)
    referenced |= intent_paths(log.storage, log.uri)
    objects = list(log.storage.list_objects(f"{root}{fmt.DATA_DIR}/"))
    uploads = [u for u in log.storage.list_pending_uploads(root) if u.uri[len(root):] not in referenced]
    clock = store_now if store_now is not None else store_now_ms(log.storage, log.uri)
    return choose(log.uri, objects, uploads, referenced, known, clock, grace_ms)


def apply(storage: st.Storage, sweep: Sweep) -> None:
    """Delete the objects and abort the uploads (uploads first: an upload may complete into a name)."""
    for u in sweep.uploads:
        with contextlib.suppress(st.StorageError, OSError):  # already completed or aborted by its writer
            storage.abort_upload(u)
    storage.delete([o.uri for o in (*sweep.removed, *sweep.orphans)])
