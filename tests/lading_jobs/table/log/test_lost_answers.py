"""Table writes whose answers are lost on the wire (issue 46), through the fault-injecting proxy
(tests/support/faultproxy.py) with the real client: each conditional create lands, then the
connection is reset before its answer arrives (botocore resends it and the resend answers 412).

On 0440a14: a lost answer to the conditional-write probe failed the commit with "does not honour
conditional writes"; a lost answer to the mirror's ``v<n>.metadata.json`` made the writer delete the
manifests the landed metadata file names (a broken Iceberg table). The log's own commits already
recognised their nonce: their tests here guard it through the wire."""

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
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema

pytestmark = pytest.mark.s3
SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string")])


def _storage(proxy: FaultProxy) -> st.S3Storage:
    return st.S3Storage(st.S3Settings(endpoint=proxy.url, region="us-east-1"))


def _commit(uri: str, ids: range, storage: st.Storage, *, create: bool = False,
            log: TableLog | None = None) -> None:
    rows = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})
    written = writer.write_parts(uri, [rows], SCHEMA, write_id=fmt.new_write_id(), storage=storage)
    writer.commit_parts(uri, written, log=log, storage=storage, create=writer.NewTable(SCHEMA) if create else None)


def _versions(s3: Any, bucket: str) -> list[int]:
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="t/_lading_log/").get("Contents", [])]
    return sorted(v for k in keys if (v := fmt.parse_commit_name(f"s3://{bucket}/{k}")) is not None)


def _ids(uri: str) -> list[int]:
    return sorted(reader.scan(uri, storage=st.open_storage(uri)).column("id").to_pylist())


def _iceberg_ids(s3_endpoint: str, bucket: str, number: int) -> list[int]:
    """The rows pyiceberg reads from the mirror's metadata file ``number`` (every file it names)."""
    table = StaticTable.from_metadata(f"s3://{bucket}/t/metadata/v{number}.metadata.json", properties={
        "s3.endpoint": s3_endpoint, "s3.access-key-id": "testing", "s3.secret-access-key": "testing",
        "s3.region": "us-east-1"})
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def test_a_lost_answer_to_the_probe_is_not_blamed_on_the_store(fault_proxy: FaultProxy, bucket: str,
                                                               s3_client: Any) -> None:
    uri = f"s3://{bucket}/t/"
    rule = fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER, match="/_probe-")
    _commit(uri, range(3), _storage(fault_proxy), create=True)
    assert rule.fired
    assert _versions(s3_client, bucket) == [0] and _ids(uri) == [0, 1, 2]


def test_a_lost_answer_to_commit_0_creates_the_table_once(fault_proxy: FaultProxy, bucket: str,
                                                          s3_client: Any) -> None:
    uri = f"s3://{bucket}/t/"
    rule = fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER, match=fmt.commit_name(0))
    _commit(uri, range(3), _storage(fault_proxy), create=True)
    assert rule.fired and _versions(s3_client, bucket) == [0] and _ids(uri) == [0, 1, 2]


def test_a_lost_answer_to_a_commit_commits_it_once(fault_proxy: FaultProxy, bucket: str, s3_client: Any) -> None:
    uri = f"s3://{bucket}/t/"
    storage = _storage(fault_proxy)
    _commit(uri, range(3), storage, create=True)
    rule = fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER, match=fmt.commit_name(1))
    _commit(uri, range(3, 5), storage, log=TableLog.open_existing(uri, storage))
    assert rule.fired and _versions(s3_client, bucket) == [0, 1] and _ids(uri) == [0, 1, 2, 3, 4]


def test_a_lost_answer_to_the_mirrors_metadata_file_keeps_its_manifests(
        fault_proxy: FaultProxy, bucket: str, s3_client: Any, s3_endpoint: str) -> None:
    uri = f"s3://{bucket}/t/"
    storage = _storage(fault_proxy)
    _commit(uri, range(3), storage, create=True)
    mirror.forget()
    rule = fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER, match="v1.metadata.json")
    _commit(uri, range(3, 5), storage, log=TableLog.open_existing(uri, storage))
    assert rule.fired
    meta = json.loads(s3_client.get_object(Bucket=bucket, Key="t/metadata/v1.metadata.json")["Body"].read())
    assert meta["properties"].get("lading.mirror.reason") is None
    assert _iceberg_ids(s3_endpoint, bucket, 1) == [0, 1, 2, 3, 4]
    assert mirror.describe(uri, st.open_storage(uri))["mirroredVersion"] == 1
