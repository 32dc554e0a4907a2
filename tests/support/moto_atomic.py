"""Make moto answer as S3 does where lading depends on it: conditional writes atomic, unknown uploads NoSuchUpload.

moto checks ``If-None-Match: *`` / ``If-Match`` and then stores the object in two steps,
with no lock between them, and its server answers each request on its own thread: two
concurrent ``PutObject If-None-Match: *`` of one key can both succeed, the second
overwriting the first. On S3 exactly one succeeds and the other gets 412. The table log's
commit protocol depends on that (two writers racing for one version: one wins, the other
rebases), so with moto as it ships a concurrency test can lose a commit that S3 would have
kept. Serialising moto's whole-object PUTs and its POSTs (CompleteMultipartUpload, which
honours the same headers) restores S3's behaviour; part uploads and reads stay concurrent.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import Any

_LOCK = threading.RLock()
_PATCHED = "_lading_atomic"


def make_conditional_writes_atomic() -> None:
    """Patch moto's S3 request handlers in this process (idempotent)."""
    from moto.s3.responses import S3Response

    for name in ("put_object", "_key_response_post"):
        method = getattr(S3Response, name)
        if getattr(method, _PATCHED, False):
            continue

        @functools.wraps(method)
        def serialised(self: Any, *args: Any, _method: Any = method, **kwargs: Any) -> Any:
            with _LOCK:
                return _method(self, *args, **kwargs)

        setattr(serialised, _PATCHED, True)
        setattr(S3Response, name, serialised)


def answer_unknown_uploads_as_s3() -> None:
    """Make moto answer ``CompleteMultipartUpload`` of an upload id it does not hold (aborted, or
    completed already) with S3's ``404 NoSuchUpload``, not a ``500`` from a ``KeyError``: a retried
    completion whose first attempt landed is told apart by that answer (idempotent)."""
    from moto.s3.exceptions import NoSuchUpload
    from moto.s3.models import S3Backend

    method = S3Backend.complete_multipart_upload
    if getattr(method, _PATCHED, False):
        return

    @functools.wraps(method)
    def checked(self: Any, bucket_name: str, multipart_id: str, *args: Any, **kwargs: Any) -> Any:
        if multipart_id not in self.get_bucket(bucket_name).multiparts:
            raise NoSuchUpload(upload_id=multipart_id)
        return method(self, bucket_name, multipart_id, *args, **kwargs)

    setattr(checked, _PATCHED, True)
    S3Backend.complete_multipart_upload = checked  # type: ignore[method-assign]

    from moto.s3.responses import S3Response

    post = S3Response._key_response_post

    @functools.wraps(post)
    def strict(self: Any, request: Any, body: Any, bucket_name: str, query: dict[str, Any], key_name: str,
               *args: Any, **kwargs: Any) -> Any:
        if _FORGET.is_set() and query.get("uploadId"):
            upload_id = query["uploadId"][0]
            if upload_id not in self.backend.get_bucket(bucket_name).multiparts:
                raise NoSuchUpload(upload_id=upload_id)
        return post(self, request, body, bucket_name, query, key_name, *args, **kwargs)

    S3Response._key_response_post = strict  # type: ignore[method-assign]


_FORGET = threading.Event()


@contextlib.contextmanager
def completed_uploads_forgotten() -> Iterator[None]:
    """While in it, a completion resent for an upload that already completed answers
    ``NoSuchUpload`` (S3 may, once the upload id is gone) instead of moto's idempotent 200."""
    _FORGET.set()
    try:
        yield
    finally:
        _FORGET.clear()


def honour_glue_version_ids() -> None:
    """Make moto's Glue ``UpdateTable`` refuse a stale ``VersionId`` as Glue does (idempotent).

    Glue's optimistic locking: ``UpdateTable`` with the ``VersionId`` read by ``GetTable`` fails with
    ``ConcurrentModificationException`` when the table changed since. moto 5 ignores ``VersionId``
    (and updates without a lock), so two racing compare-and-swaps of an Iceberg table's
    ``metadata_location`` could both land, the later one moving the pointer back. Checking the
    version and updating under one lock restores Glue's behaviour."""
    from moto.core.exceptions import JsonRESTError
    from moto.glue.responses import GlueResponse

    method = GlueResponse.update_table
    if getattr(method, _PATCHED, False):
        return

    @functools.wraps(method)
    def checked(self: Any) -> Any:
        with _LOCK:
            version = self.parameters.get("VersionId")
            if version is not None:
                table_input = self.parameters.get("TableInput") or {}
                table = self.glue_backend.get_table(self.parameters.get("DatabaseName"), table_input.get("Name"))
                if str(version) != str(table._current_version):
                    raise JsonRESTError("ConcurrentModificationException",
                                        f"Update table failed due to concurrent modifications (version {version} is "
                                        f"not the current {table._current_version})")
            return method(self)

    setattr(checked, _PATCHED, True)
    GlueResponse.update_table = checked  # type: ignore[method-assign]
