"""Loads whose answers are lost on the wire (issue 46): every write kind (PUT, conditional PUT, the
multipart calls, DELETE) has its connection reset after it landed at a fixed rate and seed, through
the fault-injecting proxy (tests/support/faultproxy.py) that the driver and the tasks reach as
``connection.endpoint``. A run succeeds exactly or fails naming the object; a rerun of the same run
then succeeds exactly; the table's versions are neither lost nor doubled."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from support.faultproxy import FaultProxy, Kind, Rates

from lading_jobs import storage as st
from lading_jobs.load.job import run_load
from lading_jobs.table import format as fmt
from lading_jobs.table import reader
from lading_jobs.table.log import TableLog
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
