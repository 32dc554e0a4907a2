"""The Iceberg mirror's own writes whose answers are lost on the wire (issue 46), one test per write
site, through the fault-injecting proxy (tests/support/faultproxy.py) with the real client: the
write lands, then the connection is reset before its answer arrives.

Sites: retention's expiry metadata file (``mirror.expire``) and its hint, a part's copy file
(``table.iceberg.copies``, whose caller takes any file at its fixed name as the same rows), and the
metadata file ``lading table sync`` creates to record lading's own columns
(``mirror._account_lading_columns``). Each time: exactly one new metadata file (no second one for
the same change), the hint names it, pyiceberg reads exactly lading's rows, and a rerun changes
nothing. (The mirror's per-version metadata file is tested in test_lost_answers.py.)

On 0440a14 the expiry's lost answer was taken as another writer's file: the hint stayed on the
older file. The copy file and the hint passed there too; the accounting file did not exist yet."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable
from support.faultproxy import Fault, FaultProxy, Kind

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema

pytestmark = pytest.mark.s3
SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string")])


def _storage(proxy: FaultProxy) -> st.S3Storage:
    return st.S3Storage(st.S3Settings(endpoint=proxy.url, region="us-east-1"))


def _commit(uri: str, ids: list[int], storage: st.Storage, *, diffs: list[int] | None = None,
            create: writer.NewTable | None = None) -> list[str]:
    """Commit rows ``ids`` (with ``diffs``, for a diff table); the written parts' URIs."""
    cols: dict[str, Any] = {"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]}
    if diffs is not None:
        cols[fmt.TIME_COLUMN] = pa.array([0] * len(ids), pa.int64())
        cols[fmt.DIFF_COLUMN] = pa.array(diffs, pa.int64())
    written = writer.write_parts(uri, [pa.table(cols)], SCHEMA, write_id=fmt.new_write_id(), storage=storage)
    log = None if create is not None else TableLog.open_existing(uri, storage)
    writer.commit_parts(uri, written, log=log, storage=storage, create=create)
    return [fmt.part_uri(uri, w.part.path) for w in written]


def _metadata_numbers(s3: Any, bucket: str) -> list[int]:
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="t/metadata/").get("Contents", [])]
    return sorted(int(k.rsplit("/v", 1)[1].split(".")[0]) for k in keys if k.endswith(".metadata.json"))


def _metadata(s3: Any, bucket: str, n: int) -> dict[str, Any]:
    return json.loads(s3.get_object(Bucket=bucket, Key=f"t/metadata/v{n}.metadata.json")["Body"].read())


def _hint(s3: Any, bucket: str) -> str:
    return s3.get_object(Bucket=bucket, Key="t/metadata/version-hint.text")["Body"].read().decode().strip()


def _iceberg_ids(s3_endpoint: str, bucket: str, number: int) -> list[int]:
    """The rows pyiceberg reads from the mirror's metadata file ``number``."""
    table = StaticTable.from_metadata(f"s3://{bucket}/t/metadata/v{number}.metadata.json", properties={
        "s3.endpoint": s3_endpoint, "s3.access-key-id": "testing", "s3.secret-access-key": "testing",
        "s3.region": "us-east-1"})
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def _no_pending(s3: Any, bucket: str) -> None:
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def _two_versions(fault_proxy: FaultProxy, bucket: str) -> tuple[str, st.S3Storage, list[str]]:
    """A mirrored table at v1 (metadata files 0 and 1); the URIs of v0's parts."""
    uri = f"s3://{bucket}/t/"
    storage = _storage(fault_proxy)
    first = _commit(uri, [0, 1, 2], storage, create=writer.NewTable(SCHEMA))
    _commit(uri, [3, 4], storage)
    mirror.forget()  # read back what is there, as another process would
    return uri, storage, first


def test_a_lost_answer_to_the_expiry_metadata_file_expires_once_and_names_it_in_the_hint(
        fault_proxy: FaultProxy, bucket: str, s3_client: Any, s3_endpoint: str) -> None:
    uri, storage, doomed = _two_versions(fault_proxy, bucket)
    assert _metadata_numbers(s3_client, bucket) == [0, 1]
    rule = fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER, match="v2.metadata.json")
    held = mirror.expire(uri, storage, doomed)  # v0's snapshot lists v0's parts: expired; v1 holds them
    assert rule.fired
    assert held == set(doomed)
    assert _metadata_numbers(s3_client, bucket) == [0, 1, 2]
    expired = _metadata(s3_client, bucket, 2)
    assert expired["properties"]["lading.mirror.expired"] == str(ice.snapshot_id(0))
    assert [s["snapshot-id"] for s in expired["snapshots"]] == [ice.snapshot_id(1)]
    assert _hint(s3_client, bucket) == "2"  # the hint names the file this call created
    assert _iceberg_ids(s3_endpoint, bucket, 2) == [0, 1, 2, 3, 4]
    assert sorted(reader.scan(uri, storage=st.open_storage(uri)).column("id").to_pylist()) == [0, 1, 2, 3, 4]
    assert all(storage.head(u) is not None for u in doomed)  # expiry deletes nothing itself
    mirror.forget()
    assert mirror.expire(uri, storage, doomed) == set(doomed)  # a rerun: nothing more to expire
    assert _metadata_numbers(s3_client, bucket) == [0, 1, 2]
    _no_pending(s3_client, bucket)


def test_a_lost_answer_to_the_expiry_hint_leaves_it_naming_the_new_file(
        fault_proxy: FaultProxy, bucket: str, s3_client: Any, s3_endpoint: str) -> None:
    uri, storage, doomed = _two_versions(fault_proxy, bucket)
    rule = fault_proxy.plan(Kind.PUT, Fault.RESET_AFTER, match="version-hint.text")
    assert mirror.expire(uri, storage, doomed) == set(doomed)
    assert rule.fired
    assert _metadata_numbers(s3_client, bucket) == [0, 1, 2] and _hint(s3_client, bucket) == "2"
    assert _iceberg_ids(s3_endpoint, bucket, 2) == [0, 1, 2, 3, 4]
    mirror.forget()
    assert mirror.expire(uri, storage, doomed) == set(doomed)
    assert _metadata_numbers(s3_client, bucket) == [0, 1, 2]


def test_a_lost_answer_to_a_copy_file_keeps_it_and_reads_each_copy_once(
        fault_proxy: FaultProxy, bucket: str, s3_client: Any, s3_endpoint: str) -> None:
    """The copy file's caller ignores ``put_if_absent``'s answer (any file at the part's fixed name
    holds the same rows): right after a lost answer too, the landed file is the one listed."""
    uri = f"s3://{bucket}/t/"
    storage = _storage(fault_proxy)
    rule = fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER, match="-copies.parquet")
    _commit(uri, [1, 2, 3], storage, diffs=[2, 1, 3], create=writer.NewTable(SCHEMA, "diff"))
    assert rule.fired
    assert _metadata_numbers(s3_client, bucket) == [0]
    assert _metadata(s3_client, bucket, 0)["properties"].get("lading.mirror.reason") is None  # exact
    assert _iceberg_ids(s3_endpoint, bucket, 0) == [1, 1, 2, 3, 3, 3]
    copies = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix="t/metadata/")["Contents"]
              if o["Key"].endswith("-copies.parquet")]
    assert len(copies) == 1
    mirror.forget()
    assert mirror.sync(uri, storage) == []  # a rerun: nothing to publish
    assert _metadata_numbers(s3_client, bucket) == [0]
    _no_pending(s3_client, bucket)


def test_a_lost_answer_to_syncs_accounting_metadata_file_records_the_columns_once(
        fault_proxy: FaultProxy, bucket: str, s3_client: Any, s3_endpoint: str) -> None:
    uri, storage, _ = _two_versions(fault_proxy, bucket)
    old = _metadata(s3_client, bucket, 1)  # as written before the mirror recorded lading's columns:
    old["schemas"] = [s for s in old["schemas"] if s["schema-id"] != ice.LADING_SCHEMA_ID]
    assert old["schemas"]
    s3_client.put_object(Bucket=bucket, Key="t/metadata/v2.metadata.json", Body=json.dumps(old).encode())
    s3_client.put_object(Bucket=bucket, Key="t/metadata/version-hint.text", Body=b"2")
    mirror.forget()
    rule = fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER, match="v3.metadata.json")
    assert mirror.sync(uri, storage) == []  # no version to publish: only the accounting file
    assert rule.fired
    assert _metadata_numbers(s3_client, bucket) == [0, 1, 2, 3]
    recorded = _metadata(s3_client, bucket, 3)
    assert any(s["schema-id"] == ice.LADING_SCHEMA_ID for s in recorded["schemas"])
    assert recorded["current-snapshot-id"] == ice.snapshot_id(1)
    assert _hint(s3_client, bucket) == "3"
    assert _iceberg_ids(s3_endpoint, bucket, 3) == [0, 1, 2, 3, 4]
    mirror.forget()
    assert mirror.sync(uri, storage) == []  # a rerun: nothing to record
    assert _metadata_numbers(s3_client, bucket) == [0, 1, 2, 3]
    _no_pending(s3_client, bucket)
