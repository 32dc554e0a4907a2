"""One upload set: how every engine publishes the pending uploads its tasks wrote.

Tasks stream output into *pending* uploads (S3 multipart uploads, staging files
on file://) and hand them to the driver. The driver publishes them with this
protocol, whatever it writes (unload files, table parts, rejected rows):

1. **intent** (``UploadSet.begin``): a small JSON record at a place derived from
   the run id, listing every upload of the set (and whatever the engine needs to
   finish: a manifest, a commit nonce), written *before* any upload completes;
2. **complete all** (``complete_all``): every upload completed, in parallel;
3. the engine's **commit point**: an unload's manifest, a table's log entry;
4. **finish** (``finish``): the intent deleted.

Every key an upload set completes is new: no upload ever takes the name of an
object that existed before (engines name files with a run token or a write id;
an unload into a prefix that must be empty checks it is, under its intent,
before completing anything), so undoing is deleting; until an engine has made
sure of that (``keysOwned`` in the intent), undoing only aborts. A failure before the commit point
undoes the set (``abort_all``: abort what is pending, delete what completed,
delete the intent). A process killed in between leaves its intent: the next
attempt of the same run (same run id) reads it (``read_intent``) and rolls
forward when the commit point was reached, back (``roll_back``) when it was not.
``sweep`` aborts pending uploads under a prefix that carry the run's naming and
that nothing will complete (a lost task attempt's, a killed worker's): engines
call it after success, and after a failure once Spark reports the run's tasks
ended. The bucket's ``AbortIncompleteMultipartUpload`` lifecycle rule is the
backstop for uploads of runs that are never retried (docs/table-format.md).
"""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from lading_jobs.storage import PendingUpload, Storage, StorageError

INTENT_KIND = "lading.io/upload-intent"
KEYS_OWNED = "keysOwned"
"""Intent data: True once the uploads' keys are known to be the run's own (undo may delete them)."""
PARALLEL = 16
LOADS_DIR = "_lading_loads"
"""Under a table's root: where the runs that write it without a rejected-rows location (loads,
``INSERT``) keep their intents (``<runId>.intent.json``) and manifests. Compaction's retention
reads the intents there, so this name lives below both engines."""


class IntentHeld(RuntimeError):
    """Another run's intent holds the place this run wanted to publish to."""

    def __init__(self, message: str, intent: Intent | None) -> None:
        super().__init__(message)
        self.intent = intent


@dataclass
class Intent:
    """What a run is about to publish: enough for a later attempt to finish or undo it."""

    run_id: str
    attempt: str
    uploads: list[PendingUpload]
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps({"kind": INTENT_KIND, "runId": self.run_id, "attempt": self.attempt,
                           "uploads": [u.to_dict() for u in self.uploads], "data": self.data},
                          separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Intent:
        d = json.loads(raw)
        if d.get("kind") != INTENT_KIND:
            raise ValueError(f"not an upload intent (kind {d.get('kind')!r})")
        return cls(str(d["runId"]), str(d["attempt"]), [PendingUpload.from_dict(u) for u in d["uploads"]],
                   dict(d.get("data") or {}))


def outside(uri: str, roots: Iterable[str]) -> bool:
    """Whether ``uri`` is under none of ``roots`` (prefixes ending in ``/``), or climbs out of the
    one it starts with through a ``.`` or ``..`` segment, raw or percent-encoded. Pure."""
    for root in roots:
        if uri.startswith(root):
            rest, texts = uri[len(root):], set()
            for _ in range(4):  # %252e%252e decodes to %2e%2e, then to ..
                texts.add(rest)
                rest = unquote(rest)
            if not any(seg in (".", "..") for text in texts for seg in text.split("/")):
                return False
    return True


def parallel(fn: Callable[[Any], Any], items: Iterable[Any], pool: ThreadPoolExecutor | None = None) -> None:
    """``fn`` over ``items`` on up to 16 threads (``pool``'s, when given: a pool the caller keeps, which
    ``fn`` must not submit to); every call ends before the first error is raised."""
    items = list(items)
    if not items:
        return
    if len(items) == 1:
        fn(items[0])
        return
    if pool is not None:
        futures = [pool.submit(fn, item) for item in items]
        wait(futures)
    else:
        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(items))) as own:
            futures = [own.submit(fn, item) for item in items]
    for f in futures:
        f.result()


def complete_all(storage: Storage, uploads: Iterable[PendingUpload]) -> None:
    """Complete every upload (in parallel); raises the first error once all calls ended."""
    parallel(storage.complete_upload, uploads)


def discard(storage: Storage, uploads: Iterable[PendingUpload]) -> list[str]:
    """Undo uploads whatever their state: abort the pending ones, delete the completed keys.
    Only for keys this run created (see the module doc). Returns the failures (best effort)."""
    failures: list[str] = []

    def one(upload: PendingUpload) -> None:
        try:
            storage.abort_upload(upload)
            storage.delete([upload.uri])
        except Exception as e:  # noqa: BLE001 - keep undoing the others; report at the end
            failures.append(f"{upload.uri}: {e}")

    parallel(one, uploads)
    return failures


def abort_pending(storage: Storage, uploads: Iterable[PendingUpload]) -> list[str]:
    """Abort uploads without touching their keys (for keys not known to be this run's)."""
    failures: list[str] = []

    def one(upload: PendingUpload) -> None:
        try:
            storage.abort_upload(upload)
        except Exception as e:  # noqa: BLE001
            failures.append(f"{upload.uri}: {e}")

    parallel(one, uploads)
    return failures


def sweep(storage: Storage, prefix: str, ours: Callable[[PendingUpload], bool],
          keep: Iterable[str] = ()) -> int:
    """Abort the pending uploads under ``prefix`` that ``ours`` claims, except the upload ids in
    ``keep``; returns how many were aborted."""
    spare = set(keep)
    found = [u for u in storage.list_pending_uploads(prefix) if u.upload_id not in spare and ours(u)]
    parallel(storage.abort_upload, found)
    return len(found)


class UploadSet:
    """The uploads of one run attempt, published under an intent record at ``intent_uri``."""

    def __init__(self, storage: Storage, intent_uri: str, run_id: str, attempt: str | None = None, *,
                 roots: Iterable[str] = ()) -> None:
        """``roots``: the prefixes the engine writes under (an allow-list): an intent read back
        that lists an upload anywhere else is refused (see ``read_intent``)."""
        self.storage, self.intent_uri, self.run_id = storage, intent_uri, run_id
        self.roots = tuple(r if r.endswith("/") else r + "/" for r in roots)
        self.attempt = attempt or uuid.uuid4().hex
        self.uploads: list[PendingUpload] = []
        self.data: dict[str, Any] = {}
        self.begun = False
        self._held: bytes | None = None  # the intent's bytes as this run last wrote or read them

    # -- recovery ---------------------------------------------------------------------------
    def read_intent(self) -> Intent | None:
        """The intent at ``intent_uri`` (this run's earlier attempt's, or another run's), or None."""
        if self.storage.head(self.intent_uri) is None:
            return None
        try:
            raw = self.storage.read(self.intent_uri)
            intent = Intent.from_json(raw)
            self._held = raw
        except StorageError:
            if self.storage.head(self.intent_uri) is None:
                return None  # finished in between
            raise
        stray = next((u.uri for u in intent.uploads if outside(u.uri, self.roots)), None)
        if stray is not None:  # whoever owns the prefix can write an intent: undoing deletes what it lists
            raise StorageError(f"the intent {self.intent_uri} lists an upload to {stray}, outside where this run "
                               f"writes ({', '.join(self.roots) or 'nowhere'}): lading never wrote it, so nothing "
                               "it lists was undone; delete the intent if no lading run of yours left it")
        return intent

    def roll_back(self, intent: Intent) -> None:
        """Undo an earlier attempt that did not reach its commit point: its uploads, then its intent.
        Keys are deleted only if the intent says they were the run's own (``keysOwned``)."""
        owned = bool(intent.data.get(KEYS_OWNED, True))
        failures = (discard if owned else abort_pending)(self.storage, intent.uploads)
        if failures:
            raise StorageError(f"undoing run {intent.run_id}'s unfinished publish failed for {len(failures)} "
                               f"object(s), first {failures[0]}; its intent {self.intent_uri} is kept")
        self._drop_intent()

    # -- publishing -------------------------------------------------------------------------
    def begin(self, uploads: Iterable[PendingUpload], data: dict[str, Any] | None = None, *,
              exclusive: bool = False, owned: bool = True) -> Intent:
        """Write the intent before anything completes. ``exclusive``: only if no intent is
        there (a lock on the destination); ``IntentHeld`` names the holder otherwise.
        ``owned``: the uploads' keys are known to be new, so undoing may delete them; an
        engine that must first check (an unload into a prefix that must be empty) passes
        False and calls ``own`` once it has, before completing anything."""
        self.uploads = list(uploads)
        self.data = {**(data or {}), KEYS_OWNED: owned}
        intent = Intent(self.run_id, self.attempt, self.uploads, self.data)
        raw = intent.to_json()
        if exclusive:
            if not self.storage.put_if_absent(self.intent_uri, raw):
                held = self.read_intent()
                if held is None or held.attempt != self.attempt:
                    who = f"run {held.run_id}" if held is not None else "another run"
                    raise IntentHeld(f"{who} is publishing to the same place ({self.intent_uri})", held)
        else:
            self.storage.put(self.intent_uri, raw)
        self._held = raw
        self.begun = True
        return intent

    def own(self) -> None:
        """Record in the intent that the uploads' keys are this run's (see ``begin``)."""
        self.data = {**self.data, KEYS_OWNED: True}
        raw = Intent(self.run_id, self.attempt, self.uploads, self.data).to_json()
        self.storage.put(self.intent_uri, raw)
        self._held = raw

    def complete_all(self, uploads: Iterable[PendingUpload] | None = None) -> None:
        complete_all(self.storage, self.uploads if uploads is None else uploads)

    def abort_all(self) -> None:
        """Undo this attempt: abort or delete every upload, then drop the intent (best effort; what
        cannot be undone stays listed in the intent for the next attempt)."""
        owned = bool(self.data.get(KEYS_OWNED, True))
        failures = (discard if owned else abort_pending)(self.storage, self.uploads)
        if failures:
            print(f"lading: undoing {len(failures)} upload(s) failed, first {failures[0]}; the intent "
                  f"{self.intent_uri} stays for the next attempt of run {self.run_id}", file=sys.stderr)
            return
        if self.begun:
            with contextlib.suppress(Exception):
                self._drop_intent()
        self.begun = False

    def finish(self) -> None:
        """The commit point is behind us (this attempt's, or an earlier one's rolled forward): drop the intent."""
        self._drop_intent()
        self.begun = False

    def _drop_intent(self) -> None:
        """Delete the intent; a retried delete only while it is still the one this run wrote or read (an
        ``error`` or ``replace`` destination's intent is one key for every run: once the first delete
        landed, another run may hold it, and deleting that would let a third publish beside it)."""
        if self._held is None:
            self.storage.delete([self.intent_uri])
        else:
            self.storage.delete_if_holds(self.intent_uri, self._held)
