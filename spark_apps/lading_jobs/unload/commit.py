"""The driver's side of the commit protocol: check, complete, manifest last, or abort all.

``check_destination`` makes the one list call ``ifExists: error`` needs before
any work. ``commit`` completes every pending upload the tasks returned, then
writes the manifest (the success marker), then, for ``replace``, removes the
objects that were there before. ``abort_run`` aborts the uploads the driver
knows about and sweeps the destination for pending uploads of this run that it
does not know about (tasks killed before they could report or abort).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lading_jobs.storage import LocalStorage, PendingUpload, Storage, join
from lading_jobs.unload import naming


class DestinationNotEmpty(ValueError):
    pass


def check_destination(storage: Storage, destination: str) -> None:
    """``ifExists: error``: fail, naming the prefix and one key, if anything is there."""
    first = next(iter(storage.list_objects(destination)), None)
    if first is not None:
        raise DestinationNotEmpty(
            f"to.files: the destination {destination} is not empty (found {first.uri}); "
            "set to.ifExists to replace or append, or choose an empty prefix "
            "(e.g. add {run_time:%Y%m%dT%H%M%SZ} to it)")


def existing_objects(storage: Storage, destination: str) -> list[str]:
    return [o.uri for o in storage.list_objects(destination)]


def _parallel(fn: Any, items: Iterable[Any]) -> None:
    items = list(items)
    if not items:
        return
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        for _ in pool.map(fn, items):
            pass


def commit(storage: Storage, destination: str, files: list[dict[str, Any]], manifest: dict[str, Any],
           manifest_name: str, replace_old: list[str]) -> str:
    """Complete all uploads, write the manifest, then drop replaced objects; return the manifest URI."""
    _parallel(lambda f: storage.complete_upload(PendingUpload.from_dict(f["upload"])), files)
    manifest_uri = join(destination, manifest_name)
    storage.put(manifest_uri, json.dumps(manifest, indent=1, sort_keys=False).encode())
    written = {join(destination, f["path"]) for f in files} | {manifest_uri}
    stale = [u for u in replace_old if u not in written]
    if stale:
        storage.delete(stale)
    return manifest_uri


def _is_ours(storage: Storage, upload: PendingUpload, token: str | None) -> bool:
    if isinstance(storage, LocalStorage):
        return True  # staged files carry no key; everything staged under the destination is a run's
    return naming.is_part_of_run(upload.uri, token)


def sweep(storage: Storage, destination: str, token: str | None) -> int:
    """Abort pending uploads under ``destination`` that belong to this run's naming; return how many."""
    found = [u for u in storage.list_pending_uploads(destination) if _is_ours(storage, u, token)]
    _parallel(storage.abort_upload, found)
    return len(found)


def abort_run(storage: Storage, destination: str, files: list[dict[str, Any]], token: str | None,
              settle_seconds: float = 20.0) -> None:
    """Abort every upload of the run; sweep until two sweeps in a row find nothing (or time runs out).

    Killed tasks' Python workers may still be starting an upload when the driver
    gets here, which is why one sweep is not enough.
    """
    _parallel(lambda f: storage.abort_upload(PendingUpload.from_dict(f["upload"])), files)
    deadline = time.monotonic() + settle_seconds
    quiet = 0
    while quiet < 2 and time.monotonic() < deadline:
        quiet = quiet + 1 if sweep(storage, destination, token) == 0 else 0
        if quiet < 2:
            time.sleep(0.5)
