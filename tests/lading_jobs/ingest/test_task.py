"""A load task without Spark: reads pinned to the listed ETag (issue 8, item 6), and its rejected-rows output (no Spark): streamed through a part sink (parts of the
buffer size, at least 5 MiB), never one object over the per-object limit (5 GiB on S3).
On 1b6c3cc the task joined every line into one string and sent it as a single part of one
object (a single part over 5 GiB fails on S3)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.faults import Fault, FaultyStorage

from lading_jobs import storage as st
from lading_jobs.ingest import task as task_module
from lading_jobs.ingest.stores import storage_for
from lading_jobs.ingest.task import (
    REJECTS_OBJECT_BYTES,
    FileTask,
    LoadPlan,
    rejects_uri,
    run_file,
    write_rejects,
)
from lading_jobs.table import format as fmt
from lading_jobs.table.schema import TableSchema
from lading_spec.copyjob import LoadOptions
from lading_spec.formats import CsvOptions, ParquetOptions


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


SCHEMA = TableSchema.of([("id", "bigint"), ("v", "string")])


@pytest.fixture(params=["s3", "file"])
def root(request: pytest.FixtureRequest, file_uri: Callable[[str], str]) -> str:
    if request.param == "s3":
        return f"s3://{request.getfixturevalue('bucket')}/"
    return file_uri("root/")


def _plan(root: str, fmt_name: str) -> LoadPlan:
    options = CsvOptions() if fmt_name == "csv" else ParquetOptions()
    return LoadPlan(table_uri=root + "t/", schema=SCHEMA, table_id="t", envelope="append", sort_by=(), time=1,
                    write_id=fmt.new_write_id(), format=fmt_name, options=options, load=LoadOptions(),
                    rejects_prefix=None, settings=st.S3Settings.from_env())


def _parquet(ids: range) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": [str(i) for i in ids]}), buf, row_group_size=10)
    return buf.getvalue()


def test_a_text_file_rewritten_after_listing_fails_that_file(root: str) -> None:
    """Fails on 1b6c3cc: the task read the new bytes and the ledger would record the listed ETag."""
    storage = st.open_storage(root)
    storage.put(root + "in/a.csv", b"1,a\n2,b\n")
    listed = storage.head(root + "in/a.csv")
    assert listed is not None
    storage.put(root + "in/a.csv", b"1,a\n2,b\n3,c\n")  # rewritten in place before the task reads it
    out = run_file(_plan(root, "csv"), FileTask(0, listed.uri, listed.etag, listed.size))
    assert out.file_error is not None and "changed after it was listed" in out.file_error, out
    assert out.parts == [] and out.rows_good == 0
    assert storage.list_pending_uploads(root) == []


def test_a_parquet_file_rewritten_between_ranged_reads_is_never_mixed(root: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The footer is read, then the file changes, then its row groups are read: the task fails the
    file instead of loading row groups of another version (fails on 1b6c3cc, which loaded them)."""
    storage = st.open_storage(root)
    uri = root + "in/p.parquet"
    storage.put(uri, _parquet(range(100)))
    listed = storage.head(uri)
    assert listed is not None
    rewrite = Fault("read_range", "hook", nth=3, hook=lambda: storage.put(uri, _parquet(range(1000, 1100))))
    faulty = FaultyStorage(storage, rewrite)
    monkeypatch.setattr(task_module, "storage_for", lambda u, settings: faulty if u == uri else storage_for(u, settings))
    out = run_file(_plan(root, "parquet"), FileTask(0, listed.uri, listed.etag, listed.size))
    assert rewrite.fired
    assert out.file_error is not None and "changed after it was listed" in out.file_error, out
    assert out.parts == []
    assert storage.list_pending_uploads(root) == []
