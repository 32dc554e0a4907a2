"""Loads whose answers are lost on the wire (issue 46): every write kind (PUT, conditional PUT, the
multipart calls, DELETE) has its connection reset after it landed at a fixed rate and seed, through
the fault-injecting proxy (tests/support/faultproxy.py) that the driver and the tasks reach as
``connection.endpoint``. A run succeeds exactly or fails naming the object; a rerun of the same run
then succeeds exactly; the table's versions are neither lost nor doubled.

One test per write site of a load besides the table's own (table/log/test_lost_answers.py): its intent
(a plain PUT, replaced by the resend), and the ``CompleteMultipartUpload`` of a table part and of a
rejected-rows file, each reset once right after it landed (the resent completion answers
``NoSuchUpload``, as S3 may once the upload id is gone). On 0440a14 that answer failed the run (both
completions); the intent's resend passed there too."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from support.faultproxy import Fault, FaultProxy, Kind, Rates
from support.moto_atomic import completed_uploads_forgotten

from lading_jobs import storage as st
from lading_jobs.load.job import run_load
from lading_jobs.table import format as fmt
from lading_jobs.table import reader
from lading_jobs.table.log.commits import TableLog
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark, pytest.mark.s3]
SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "v", "type": "int"}]
FILES = {"a.csv": b"1,10\n2,20\n3,oops\n", "b.csv": b"4,40\n5,50\n", "c.csv": b"6,60\n"}
WRITES = (Kind.PUT, Kind.PUT_CONDITIONAL, Kind.CREATE_MULTIPART, Kind.UPLOAD_PART, Kind.COMPLETE_MULTIPART,
          Kind.DELETE)


def _run(spark: Any, root: str, endpoint: str) -> dict[str, Any]:
    spec = {"from": {"files": root + "in/", "format": "csv"}, "to": {"table": root + "t/", "schema": SCHEMA},
            "onError": "continue", "rejectedRows": root + "rejected/", "connection": {"endpoint": endpoint}}
    doc = JobDocument("CopyJob", "ns", "load", "uid", 1, "r-1", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), spec)
    try:
        return run_load(spark, doc)
    except Exception as e:  # noqa: BLE001 - what the app would report
        return {"error": f"{type(e).__name__}: {e}"}


@pytest.mark.parametrize(("seed", "rate"), [(1, 0.05), (2, 0.20), (3, 0.20)])
def test_resets_after_writes_at_fixed_rates(spark: Any, bucket: str, fault_proxy: FaultProxy, seed: int,
                                            rate: float) -> None:
    root = f"s3://{bucket}/"
    plain = st.open_storage(root)
    for name, data in FILES.items():
        plain.put(root + "in/" + name, data)
    fault_proxy.seed = seed
    fault_proxy.set_rates({k: Rates(reset_after=rate) for k in WRITES})
    first = _run(spark, root, fault_proxy.url)
    injected = len(fault_proxy.injected)
    assert injected > 0
    if "error" in first:
        assert "s3://" in first["error"], first  # names the object
    else:
        assert first["rows"] == 5 and first["rowsRejected"] == 1, first
    fault_proxy.set_rates(None)
    again = _run(spark, root, fault_proxy.url)
    assert again.get("rows") == 5 and again.get("rowsRejected") == 1, (first, again, injected)
    assert sorted(reader.scan(root + "t/", storage=plain).column("id").to_pylist()) == [1, 2, 4, 5, 6]
    log = TableLog.open_existing(root + "t/", plain)
    versions = sorted(v for o in plain.list_objects(root + "t/" + fmt.LOG_DIR + "/")
                      if (v := fmt.parse_commit_name(o.uri)) is not None)
    assert versions == list(range(log.version + 1))  # none lost
    manifest = json.loads(plain.read(root + "rejected/r-1/manifest.json"))
    assert manifest["committed"] is True and manifest["tableVersion"] == log.version
    assert [o.uri for o in plain.list_objects(root) if "intent" in o.uri] == []
    assert plain.list_pending_uploads(root) == []


def _exactly_once(spark: Any, root: str, endpoint: str, first: dict[str, Any]) -> None:
    """The run loaded its rows once (one table version, its manifest committed, no intent, nothing
    pending), and a rerun of the same run reports it and loads nothing."""
    plain = st.open_storage(root)
    assert first.get("rows") == 5 and first.get("rowsRejected") == 1, first
    assert sorted(reader.scan(root + "t/", storage=plain).column("id").to_pylist()) == [1, 2, 4, 5, 6]
    versions = [v for o in plain.list_objects(root + "t/" + fmt.LOG_DIR + "/")
                if (v := fmt.parse_commit_name(o.uri)) is not None]
    assert versions == [0]
    manifest = json.loads(plain.read(root + "rejected/r-1/manifest.json"))
    assert manifest["committed"] is True and manifest["tableVersion"] == 0
    rejected = [o.uri for o in plain.list_objects(root + "rejected/r-1/") if not o.uri.endswith(".json")]
    assert rejected and b"oops" in b"".join(plain.read(u) for u in rejected)  # kept, not undone
    assert [o.uri for o in plain.list_objects(root) if "intent" in o.uri] == []
    assert plain.list_pending_uploads(root) == []
    again = _run(spark, root, endpoint)
    assert again.get("rows") == 5 and again.get("rowsRejected") == 1, again
    assert [v for o in plain.list_objects(root + "t/" + fmt.LOG_DIR + "/")
            if (v := fmt.parse_commit_name(o.uri)) is not None] == [0]


def _inputs(root: str) -> None:
    plain = st.open_storage(root)
    for name, data in FILES.items():
        plain.put(root + "in/" + name, data)


def test_a_reset_after_the_intent_landed_loads_once(spark: Any, bucket: str, fault_proxy: FaultProxy) -> None:
    root = f"s3://{bucket}/"
    _inputs(root)
    rule = fault_proxy.plan(Kind.PUT, Fault.RESET_AFTER, match="intent.json")
    first = _run(spark, root, fault_proxy.url)
    assert rule.fired
    _exactly_once(spark, root, fault_proxy.url, first)


@pytest.mark.parametrize("match", ["/t/" + fmt.DATA_DIR + "/", "/rejected/r-1/"], ids=["part", "rejected-rows"])
def test_a_reset_after_a_completion_landed_loads_once(spark: Any, bucket: str, fault_proxy: FaultProxy,
                                                      match: str) -> None:
    root = f"s3://{bucket}/"
    _inputs(root)
    rule = fault_proxy.plan(Kind.COMPLETE_MULTIPART, Fault.RESET_AFTER, match=match)
    with completed_uploads_forgotten():
        first = _run(spark, root, fault_proxy.url)
    assert rule.fired, fault_proxy.injected
    _exactly_once(spark, root, fault_proxy.url, first)
