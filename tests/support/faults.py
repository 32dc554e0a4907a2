"""Fault injection: a storage wrapper that raises, loses an answer, or kills the process at a chosen call.

``FaultyStorage(inner, Fault("complete_upload", nth=2, action="kill"))`` behaves
like ``inner`` except that the second ``complete_upload`` call SIGKILLs the
process before it reaches the store. Actions:

* ``raise``: raise ``StorageError`` instead of making the call;
* ``raise_after``: make the call, then raise (the request landed, the client saw an error);
* ``lost_answer``: make the call, then return False (a retried conditional PUT
  answering 412 to its own first attempt, taken for another writer's: ``S3Storage`` itself
  reads back and recognises its own write, so this checks the callers' own checks, such as
  the log's nonce; the wire-level fault is tests/support/faultproxy.py's ``RESET_AFTER``);
* ``kill`` / ``kill_after``: SIGKILL this process before / after the call;
* ``kill_midway``: for a call over a list of URIs (``delete``), make it for the first half
  of them, then SIGKILL this process (a batch the store applied only in part);
* ``term``: send SIGTERM to this process, then make the call;
* ``hook``: call ``hook()`` (e.g. rewrite an object behind the reader's back), then make the call;
* ``hook_after``: make the call, then call ``hook()`` (e.g. another run acts on what it returned).

``match`` narrows the calls counted to those whose first argument (a URI, or an
upload's URI) contains it. Every call is also recorded in ``calls`` (method, uri).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lading_jobs.storage import ObjectInfo, PendingUpload, Storage, StorageError


@dataclass
class Fault:
    method: str
    action: str = "raise"
    nth: int = 1
    match: str = ""
    seen: int = 0
    fired: bool = False
    hook: Callable[[], None] | None = None


def _uri(args: tuple[Any, ...]) -> str:
    if not args:
        return ""
    first = args[0]
    if isinstance(first, PendingUpload):
        return first.uri
    if isinstance(first, str):
        return first
    if isinstance(first, list | tuple) and first and isinstance(first[0], str):
        return " ".join(first)
    return ""


class FaultyStorage(Storage):
    def __init__(self, inner: Storage, *faults: Fault) -> None:
        self.inner = inner
        self.faults = list(faults)
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()  # uploads complete on several threads

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        uri = _uri(args)
        fault = None
        with self._lock:
            self.calls.append((method, uri))
            for f in self.faults:
                if f.method == method and not f.fired and f.match in uri:
                    f.seen += 1
                    if f.seen == f.nth:
                        f.fired, fault = True, f
                        break
        fn = getattr(self.inner, method)
        if fault is None:
            return fn(*args, **kwargs)
        if fault.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault.action == "kill_midway":
            uris = list(args[0])
            fn(uris[: len(uris) // 2], *args[1:], **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
        if fault.action == "raise":
            raise StorageError(f"injected failure: {method} {uri}")
        if fault.action == "hook":
            assert fault.hook is not None
            fault.hook()
            return fn(*args, **kwargs)
        if fault.action == "term":
            os.kill(os.getpid(), signal.SIGTERM)
            return fn(*args, **kwargs)
        out = fn(*args, **kwargs)
        if fault.action == "hook_after":
            assert fault.hook is not None
            if isinstance(out, Iterator):  # a listing: what the caller saw before the hook acted
                out = list(out)
            fault.hook()
        if fault.action == "kill_after":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault.action == "raise_after":
            raise StorageError(f"injected failure after the call landed: {method} {uri}")
        if fault.action == "lost_answer":
            return False
        return out

    # -- every Storage method, delegated through _call ------------------------------------
    def describe(self, uri: str) -> str:
        return f"{type(self).__name__} over {self.inner.describe(uri)}"

    def list_objects(self, prefix: str) -> Iterator[ObjectInfo]:
        return iter(list(self._call("list_objects", prefix)))

    def head(self, uri: str) -> ObjectInfo | None:
        return self._call("head", uri)  # type: ignore[no-any-return]

    def read(self, uri: str, *args: Any, **kwargs: Any) -> bytes:
        return self._call("read", uri, *args, **kwargs)  # type: ignore[no-any-return]

    def read_range(self, uri: str, start: int, end: int, *args: Any, **kwargs: Any) -> bytes:
        return self._call("read_range", uri, start, end, *args, **kwargs)  # type: ignore[no-any-return]

    def open_input(self, uri: str, size: int | None = None, etag: str | None = None) -> pa.NativeFile:
        """Ranged reads through this wrapper (so faults see each ``read_range``)."""
        if etag is None:
            return Storage.open_input(self, uri, size)
        return Storage.open_input(self, uri, size, etag)

    def put(self, uri: str, data: bytes) -> None:
        self._call("put", uri, data)

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        return self._call("put_if_absent", uri, data)  # type: ignore[no-any-return]

    def delete(self, uris: Iterable[str]) -> None:
        self._call("delete", list(uris))

    def begin_upload(self, uri: str) -> PendingUpload:
        return self._call("begin_upload", uri)  # type: ignore[no-any-return]

    def upload_part(self, upload: PendingUpload, data: bytes) -> None:
        self._call("upload_part", upload, data)

    def complete_upload(self, upload: PendingUpload) -> None:
        self._call("complete_upload", upload)

    def abort_upload(self, upload: PendingUpload) -> None:
        self._call("abort_upload", upload)

    def list_pending_uploads(self, prefix: str) -> list[PendingUpload]:
        return self._call("list_pending_uploads", prefix)  # type: ignore[no-any-return]
