"""Paths inside a table's log stay inside the table (issue 28, item 7).

A tenant owns their table's prefix, so they can write its log objects by hand. A part path
such as ``../../tenant-b/tbl/data/…parquet`` (or ``%2e%2e``, an absolute path, a URI) must
not make lading read, rewrite or delete another tenant's files: every log object is checked
where it is read (``log._read_json``), and a bad path is a TableError naming the object and
the path, before any reader or writer uses it. Tenant B's table here is a real lading table;
tenant A's log names B's part in one hand-written commit (or checkpoint).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.unload import job_doc

from lading_jobs import storage as st
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.engine import compact
from lading_jobs.engine import RunContext
from lading_jobs.main import execute
from lading_jobs.result import Cancellation
from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.log.commits import Part, TableError, TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.compaction import parse_compaction
from lading_spec.job import JobDocument

SCHEMA = TableSchema.of([("id", "bigint"), ("secret", "string")])

BAD_PATHS = [
    "../../tenant-b/tbl/{part}",  # the payload (resolved against tenant A's root)
    "data/../../../tenant-b/tbl/{part}",
    "data/%2e%2e/%2e%2e/%2e%2e/tenant-b/tbl/{part}",
    "data/%2E%2E/x.parquet",
    "data/.%2e/x.parquet",
    "data/%252e%252e/x.parquet",
    "data/./w/x.parquet",
    "/etc/passwd",
    "file:///etc/passwd",
    "s3://tenant-b/tbl/{part}",
    "data\\..\\..\\tenant-b\\x.parquet",
    "data//w/x.parquet",
    "data/w/",
    "data",
    "_lading_log/00000000000000000000.json",
    "data/w/x.parquet\n",
    "",
]


@pytest.mark.parametrize("path", ["data/w-0a/part-00000-00001.parquet", "data/c-1f/part-00002-00000.parquet",
                                  "data/w-s1a-2b/part-00000-00000.parquet", "data/x=1/y_2+3.parquet"])
def test_paths_lading_writes_are_inside(path: str) -> None:
    assert fmt.path_problem(path) is None
    assert fmt.path_problem(fmt.part_path(fmt.new_write_id(), 3, 4)) is None


@pytest.mark.parametrize("path", [p.format(part="data/w/p.parquet") for p in BAD_PATHS])
def test_paths_that_leave_data_are_refused_with_a_reason(path: str) -> None:
    assert fmt.path_problem(path) is not None


def new_table(uri: str, who: str) -> Part:
    """A table at ``uri`` holding one part of ``who``'s rows; that part."""
    table = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "secret": [f"{who}-1", f"{who}-2", f"{who}-3"],
                      fmt.TIME_COLUMN: pa.array([1, 1, 1], pa.int64())})
    written = writer.write_parts(uri, [table], SCHEMA, write_id=fmt.new_write_id())
    (part,) = writer.commit_parts(uri, written, create=writer.NewTable(SCHEMA)).parts
    return part


def tenant_b(root: str) -> tuple[str, Part]:
    """Tenant B's table (one part holding B's rows) and that part."""
    uri = f"{root}tenant-b/tbl/"
    return uri, new_table(uri, "b")


def tenant_a(root: str, b_part: Part, path: str, *, where: str = "add") -> str:
    """Tenant A's table (one part of its own) whose commit 1 (``where="add"`` or ``"remove"``)
    names ``path``, or whose checkpoint 10 (``where="parts"``, with the ``_last_checkpoint``
    hint naming it) does."""
    uri = f"{root}tenant-a/tbl/"
    storage = st.open_storage(uri)
    own = new_table(uri, "a")
    raw = {**b_part.to_dict(), "path": path.format(part=b_part.path)}
    if where == "parts":
        state = json.loads(storage.read(fmt.commit_uri(uri, 0)))
        checkpoint = {"formatVersion": fmt.FORMAT_VERSION, "version": 10, "metadata": state["metadata"],
                      "schema": state["schema"], "parts": [own.to_dict(), raw], "ledger": {}, "sourceProgress": {},
                      "upper": 2, "since": 0}
        storage.put(fmt.checkpoint_uri(uri, 10), json.dumps(checkpoint).encode())
        storage.put(fmt.last_checkpoint_uri(uri), b'{"version": 10}')
        return uri
    entry: dict[str, Any] = {"formatVersion": fmt.FORMAT_VERSION, "version": 1, "operation": "append",
                             "timestamp": int(time.time() * 1000), "nonce": "n", "upper": 2, "since": 0}
    entry[where] = [raw] if where == "add" else [raw["path"]]
    assert storage.put_if_absent(fmt.commit_uri(uri, 1), json.dumps(entry).encode())
    return uri


def listing(root: str) -> dict[str, bytes]:
    base = Path(root.removeprefix("file://"))
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("where", ["add", "remove", "parts"])
@pytest.mark.parametrize("path", BAD_PATHS)
def test_opening_a_log_that_names_a_path_outside_data_fails_naming_object_and_path(
        file_uri: Callable[[str], str], path: str, where: str) -> None:
    root = file_uri("")
    _, b_part = tenant_b(root)
    uri = tenant_a(root, b_part, path, where=where)
    bad = path.format(part=b_part.path)
    named = fmt.checkpoint_uri(uri, 10) if where == "parts" else fmt.commit_uri(uri, 1)
    key = {"add": "add[0].path", "remove": "remove[0]", "parts": "parts[1].path"}[where]
    with pytest.raises(TableError) as caught:
        TableLog.open_existing(uri).snapshot()
    assert str(caught.value).startswith(f"{named}: {key} {bad!r} ")
    assert "No part it names is read or deleted" in str(caught.value)


def test_a_log_on_s3_naming_another_tenants_part_fails_to_open(bucket: str) -> None:
    root = f"s3://{bucket}/"
    _, b_part = tenant_b(root)
    uri = tenant_a(root, b_part, "../../tenant-b/tbl/{part}")
    with pytest.raises(TableError, match=r"00000000000000000001\.json: add\[0\]\.path '\.\./\.\./tenant-b/"):
        TableLog.open_existing(uri)


@pytest.mark.spark
@pytest.mark.parametrize("source", ["table", "query"])
def test_an_unload_of_a_table_whose_log_names_another_tenants_part_exports_nothing(
        spark: Any, file_uri: Callable[[str], str], source: str) -> None:
    """The issue's reproduction: an unload of tenant A's own table (the policy checks only its
    URI) exported tenant B's rows. Through ``from.table`` (the Arrow path) and a query input."""
    root = file_uri("")
    b_uri, b_part = tenant_b(root)
    a_uri = tenant_a(root, b_part, "../../tenant-b/tbl/{part}")
    before = listing(b_uri)
    out = f"{root}export/"
    src = ({"table": a_uri} if source == "table"
           else {"query": "SELECT * FROM a", "inputs": [{"name": "a", "table": a_uri}]})
    result = execute(job_doc({"from": src, "to": {"files": out, "format": "csv"}}), lambda: spark, Cancellation())
    assert "rows" not in result, result
    assert fmt.commit_uri(a_uri, 1) in result["error"] and "../../tenant-b/tbl/data/" in result["error"]
    assert listing(out) == {}
    assert listing(b_uri) == before


@pytest.mark.parametrize("path", ["../../tenant-b/tbl/{part}", "data/%2e%2e/%2e%2e/%2e%2e/tenant-b/tbl/{part}"])
def test_compaction_and_retention_refuse_such_a_log_and_delete_nothing(
        file_uri: Callable[[str], str], path: str) -> None:
    """Compaction would copy B's rows into A's table; retention deletes files. Both refuse, and
    neither table's files change (an orphan past the grace period in A's data/ stays too)."""
    root = file_uri("")
    b_uri, b_part = tenant_b(root)
    a_uri = tenant_a(root, b_part, path)
    storage = st.open_storage(a_uri)
    storage.put(f"{a_uri}data/w-crashed/part-00000-00000.parquet", b"an orphan past the grace period")
    before = listing(root)
    later = int(time.time() * 1000) + 2 * 3600 * 1000
    short = {"gracePeriod": "1h", "allowShortGracePeriod": True}  # under the 24 h floor, on purpose
    for spec in ({"table": a_uri, "minInputFiles": 2, "retention": short},
                 {"table": a_uri, "minInputFiles": 1000, "retention": short},
                 {"table": a_uri, "retention": {**short, "dryRun": True}}):
        with pytest.raises(TableError, match=r"add\[0\]\.path '" + re.escape(path.format(part=b_part.path))):
            compact(None, parse_compaction(spec), RunContext(), storage=storage, now_ms=later,
                    runner=compact_task.in_process(storage))
    assert listing(root) == before


@pytest.mark.spark
def test_a_load_and_a_stream_into_such_a_table_fail_and_write_no_part(
        spark: Any, file_uri: Callable[[str], str]) -> None:
    """Writers open the log before they write: a load (CopyJob ``to.table``) and a StreamCopy
    into tenant A's table fail naming the commit, and no part appears in either table."""
    root = file_uri("")
    b_uri, b_part = tenant_b(root)
    a_uri = tenant_a(root, b_part, "data/w/../../../../tenant-b/tbl/{part}")
    st.open_storage(root).put(f"{root}in/x.csv", b"id,secret\n7,a-7\n")
    before = listing(f"{a_uri}data/"), listing(b_uri)
    files = {"uri": f"{root}in/", "pattern": "*.csv", "format": "csv", "options": {"header": True}}
    load = {"from": {"files": files["uri"], "format": "csv", "options": {"header": True}}, "to": {"table": a_uri}}
    stream = {"source": {"files": files}, "target": {"table": a_uri}}
    for kind, spec in (("CopyJob", load), ("StreamCopy", stream)):
        doc = JobDocument(kind, "ns", "w", "uid", 1, f"{kind}-1", dt.datetime.now(dt.UTC), spec)
        result = execute(doc, lambda: spark, Cancellation())
        assert "rows" not in result, (kind, result)
        assert f"{fmt.commit_uri(a_uri, 1)}: add[0].path 'data/w/../../../../tenant-b/" in result["error"], (kind, result)
    assert (listing(f"{a_uri}data/"), listing(b_uri)) == before
