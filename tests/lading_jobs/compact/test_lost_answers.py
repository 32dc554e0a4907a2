"""A compaction whose ``CompleteMultipartUpload`` answer is lost on the wire (issue 46): the
completion of its output part lands, then the connection is reset before the answer arrives, through
the fault-injecting proxy (tests/support/faultproxy.py) with the real client; the resent completion
answers ``NoSuchUpload`` (as S3 may once the upload id is gone). The compaction commits once, its
output stands, nothing is pending, and a rerun finds nothing to do.

A compaction writes no intent of its own (its outputs are completed in the driver just before its
one commit, ``compact.commit``); the commit's own lost answers are tested in
tests/lading_jobs/table/log/test_lost_answers.py and, with injected faults, in test_compact_commit.py.
On 0440a14 the resent completion's ``NoSuchUpload`` failed the compaction.
No Spark: the groups are rewritten in this process (``compact_task.in_process``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from support.faultproxy import Fault, FaultProxy, Kind
from support.moto_atomic import completed_uploads_forgotten

from lading_jobs import storage as st
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.engine import compact
from lading_jobs.engine import RunContext
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.compaction import parse_compaction

pytestmark = pytest.mark.s3
SCHEMA = TableSchema.of([("id", "bigint"), ("note", "string")])


def _rows(uri: str) -> Counter[tuple[Any, ...]]:
    t = reader.scan(uri, storage=st.open_storage(uri))
    return Counter(zip(t.column("id").to_pylist(), t.column("note").to_pylist(), strict=True))


def _versions(storage: st.Storage, uri: str) -> list[int]:
    return sorted(v for o in storage.list_objects(uri + fmt.LOG_DIR + "/")
                  if (v := fmt.parse_commit_name(o.uri)) is not None)


def test_a_reset_after_the_outputs_completion_landed_compacts_once(fault_proxy: FaultProxy, bucket: str,
                                                                    s3_client: Any) -> None:
    uri = f"s3://{bucket}/t/"
    plain = st.open_storage(uri)
    for c in range(3):  # three commits of one small part each, straight to the store
        rows = pa.table({"id": pa.array(range(c * 10, c * 10 + 10), pa.int64()), "note": [f"c{c}"] * 10})
        written = writer.write_parts(uri, [rows], SCHEMA, write_id=fmt.new_write_id(), storage=plain)
        writer.commit_parts(uri, written, storage=plain, create=writer.NewTable(SCHEMA) if c == 0 else None,
                            log=None if c == 0 else TableLog.open_existing(uri, plain))
    before = _rows(uri)
    storage = st.S3Storage(st.S3Settings(endpoint=fault_proxy.url, region="us-east-1"))
    spec = parse_compaction({"table": uri, "minInputFiles": 2})

    def run() -> None:
        compact(None, spec, RunContext(), storage=storage, runner=compact_task.in_process(storage))

    rule = fault_proxy.plan(Kind.COMPLETE_MULTIPART, Fault.RESET_AFTER, match="/t/" + fmt.DATA_DIR + "/")
    with completed_uploads_forgotten():
        run()
    assert rule.fired
    assert _versions(plain, uri) == [0, 1, 2, 3]  # one compact commit
    snap = TableLog.open_existing(uri, plain).snapshot()
    assert len(snap.parts) == 1 and plain.head(snap.part_uri(snap.parts[0])) is not None  # its output stands
    assert _rows(uri) == before
    assert s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    run()  # a rerun: one part, nothing to compact
    assert _versions(plain, uri) == [0, 1, 2, 3] and _rows(uri) == before
