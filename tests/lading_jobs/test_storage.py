"""The storage interface against the real S3 API server and the local filesystem."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs.storage import LocalStorage, S3Storage, Storage, open_storage


@pytest.fixture(params=["s3", "file"])
def root(request: pytest.FixtureRequest, file_uri: Callable[[str], str]) -> str:
    if request.param == "s3":
        bucket = request.getfixturevalue("bucket")
        return f"s3://{bucket}/root/"
    return file_uri("root/")


def test_open_storage_by_scheme(root: str) -> None:
    expected = S3Storage if root.startswith("s3://") else LocalStorage
    assert isinstance(open_storage(root), expected)


def test_pending_upload_is_invisible_until_completed(root: str) -> None:
    storage: Storage = open_storage(root)
    upload = storage.begin_upload(root + "a/part-0.bin")
    storage.upload_part(upload, b"x" * (5 * 1024 * 1024))
    storage.upload_part(upload, b"tail")
    assert list(storage.list_objects(root)) == []
    assert len(storage.list_pending_uploads(root)) == 1
    storage.complete_upload(upload)
    objects = list(storage.list_objects(root))
    assert [o.uri for o in objects] == [root + "a/part-0.bin"]
    assert objects[0].size == 5 * 1024 * 1024 + 4
    assert storage.list_pending_uploads(root) == []
    assert storage.read_range(root + "a/part-0.bin", 5 * 1024 * 1024, 5 * 1024 * 1024 + 4) == b"tail"


def test_aborted_upload_leaves_nothing(root: str) -> None:
    storage = open_storage(root)
    upload = storage.begin_upload(root + "b.bin")
    storage.upload_part(upload, b"data")
    storage.abort_upload(upload)
    assert list(storage.list_objects(root)) == []
    assert storage.list_pending_uploads(root) == []


def test_put_if_absent_has_one_winner(root: str) -> None:
    storage = open_storage(root)
    assert storage.put_if_absent(root + "log/00000001.json", b"first") is True
    assert storage.put_if_absent(root + "log/00000001.json", b"second") is False
    assert storage.read(root + "log/00000001.json") == b"first"


def test_glob_listing_and_parquet_random_access(root: str) -> None:
    storage = open_storage(root)
    table = pa.table({"x": list(range(1000))})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=100)
    storage.put(root + "data/one.parquet", sink.getvalue().to_pybytes())
    storage.put(root + "data/notes.txt", b"hello")
    found = storage.list_matching(root + "data/*.parquet")
    assert [o.uri for o in found] == [root + "data/one.parquet"]
    with storage.open_input(found[0].uri, found[0].size) as f:
        reader = pq.ParquetFile(f)
        assert reader.metadata.num_row_groups == 10
        assert reader.read_row_group(3).column("x").to_pylist() == list(range(300, 400))
    storage.delete([o.uri for o in storage.list_objects(root)])
    assert list(storage.list_objects(root)) == []
