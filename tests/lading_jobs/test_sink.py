"""Table parts that fit in one request go up with a single PUT (``single_put``, the stream's writes);
bigger ones, and unload files, multipart."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lading_jobs import storage as st
from lading_jobs.sink import PartSink
from lading_jobs.table import writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema

pytestmark = [pytest.mark.s3]


def _calls(storage: st.S3Storage) -> list[str]:
    seen: list[str] = []
    storage.client.meta.events.register("before-call.s3", lambda model, **_: seen.append(model.name))
    return seen


def test_a_small_table_part_is_one_put_and_invisible_until_committed(s3_endpoint: str, bucket: str,
                                                                       s3_client: Any) -> None:
    uri = f"s3://{bucket}/t/"
    schema = TableSchema.of([("id", "bigint")])
    TableLog.create(uri, schema)
    storage = st.S3Storage()
    calls = _calls(storage)
    written = writer.write_parts(uri, [pa.table({"id": pa.array(range(100), pa.int64())})], schema,
                                 write_id="w-small", storage=storage, single_put=True)
    assert calls == ["PutObject"]  # not CreateMultipartUpload + UploadPart (+ CompleteMultipartUpload)
    assert not s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads")
    snap = writer.commit_parts(uri, written, storage=storage)
    assert calls.count("CompleteMultipartUpload") == 0 and snap.rows == 100
    # an aborted single-PUT part is deleted
    again = writer.write_parts(uri, [pa.table({"id": pa.array([1], pa.int64())})], schema, write_id="w-gone",
                               storage=storage, single_put=True)
    writer.abort_parts(uri, again, storage=storage)
    assert not s3_client.list_objects_v2(Bucket=bucket, Prefix="t/data/w-gone/").get("Contents")


def test_a_part_bigger_than_the_buffer_is_multipart_and_unload_sinks_always_are(s3_endpoint: str,
                                                                                 bucket: str) -> None:
    storage = st.S3Storage()
    calls = _calls(storage)
    sink = PartSink(storage, f"s3://{bucket}/big.bin", 5 * 1024 * 1024, single_put=True)
    sink.write(np.random.default_rng(1).bytes(6 * 1024 * 1024))
    upload = sink.finish()
    assert calls == ["CreateMultipartUpload", "UploadPart"] and len(upload.parts) == 1
    storage.complete_upload(upload)
    assert storage.head(f"s3://{bucket}/big.bin").size == 6 * 1024 * 1024  # type: ignore[union-attr]
    calls.clear()
    unload = PartSink(storage, f"s3://{bucket}/file.csv", 5 * 1024 * 1024)  # visible on completion: multipart
    unload.write(b"a,b\n")
    unload.finish()
    assert calls == ["CreateMultipartUpload", "UploadPart"] and storage.head(f"s3://{bucket}/file.csv") is None
    storage.abort_upload(unload.upload)


def test_the_checksum_is_zlibs_crc32_of_the_stored_bytes(s3_endpoint: str, bucket: str) -> None:
    """zlib-ng computes it; the manifest promises zlib's CRC-32 (the gzip polynomial) of the
    object as stored: chained over chunks of every kind a writer hands in, across parts."""
    import zlib

    rng = np.random.default_rng(7)
    storage = st.S3Storage()
    sink = PartSink(storage, f"s3://{bucket}/crc.bin", 5 * 1024 * 1024)
    scratch = bytearray(rng.bytes(3 * 1024 * 1024))
    chunks: list[Any] = [b"", b"x", rng.bytes(4 * 1024 * 1024), pa.py_buffer(rng.bytes(2 * 1024 * 1024 + 3)),
                         memoryview(scratch)[5:], scratch, rng.bytes(17)]
    for chunk in chunks:
        sink.write(chunk)
    scratch[:] = b"\0" * len(scratch)  # the sink copied the mutable chunks it was given
    upload = sink.finish()
    storage.complete_upload(upload)
    stored = storage.read(f"s3://{bucket}/crc.bin")
    assert len(upload.parts) == 3 and len(stored) == sink.size
    assert sink.crc32 == f"{zlib.crc32(stored):08x}"
    assert sink.crc32 != f"{zlib.crc32(stored[:-1]):08x}"  # a truncated object does not match
