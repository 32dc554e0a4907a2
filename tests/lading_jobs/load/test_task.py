"""A load task's rejected-rows output (no Spark): streamed through a part sink (parts of the
buffer size, at least 5 MiB), never one object over the per-object limit (5 GiB on S3).
On 1b6c3cc the task joined every line into one string and sent it as a single part of one
object (a single part over 5 GiB fails on S3)."""

from __future__ import annotations

import json
from collections.abc import Callable

from lading_jobs import storage as st
from lading_jobs.load.task import REJECTS_OBJECT_BYTES, rejects_uri, write_rejects


def test_rejected_rows_stream_into_objects_under_the_limit(file_uri: Callable[[str], str]) -> None:
    prefix, storage = file_uri("rej/r-1/"), st.LocalStorage()
    lines = [json.dumps({"line": i, "record": "x" * 50}).encode() + b"\n" for i in range(100)]
    begun: list[st.PendingUpload] = []
    uploads = write_rejects(storage, prefix, 3, iter(lines), begun, max_object=1000, buffer_size=300)
    assert [u.uri for u in uploads] == [rejects_uri(prefix, 3, k) for k in range(len(uploads))]
    assert begun == uploads and len(uploads) >= 8
    assert rejects_uri(prefix, 3, 0).endswith("rejected-00003.jsonl")
    assert rejects_uri(prefix, 3, 2).endswith("rejected-00003-002.jsonl")
    for u in uploads:
        storage.complete_upload(u)
    bodies = [storage.read(u.uri) for u in uploads]
    assert all(len(b) <= 1000 for b in bodies)
    assert b"".join(bodies) == b"".join(lines)  # every line, in order, none split
    assert REJECTS_OBJECT_BYTES == 5 * 1024**3
