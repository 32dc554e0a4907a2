"""The issue's reproduction, end to end (engine, in-process tasks): an upsert group too large for one
output becomes sibling parts S1, S2 sharing one order; a later run whose scope.filter takes S1 but not
S2 must not give its outputs (holding an older part's rows too) S2's order, or a (key, time) tie
between them falls to row positions and the older version wins. Fails on 3610912: key 'xz' read the
version of the older part P."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from lading_jobs import storage as st
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.engine import compact
from lading_jobs.compact.plan import written_by_compaction
from lading_jobs.engine import RunContext
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.compaction import parse_compaction

SCHEMA = TableSchema.of([("k", "string"), ("v", "string"), ("pad", "string")])
T1 = 64 * 1024


def _rows(keys: list[str], version: str) -> pa.Table:
    pad = [base64.b64encode(os.urandom(400)).decode() for _ in keys]  # incompressible: sizes add up
    return pa.table({"k": keys, "v": [version] * len(keys), "pad": pad,
                     fmt.TIME_COLUMN: pa.array([5] * len(keys), pa.int64()),
                     fmt.DIFF_COLUMN: pa.array([1] * len(keys), pa.int64())})


def _commit(uri: str, log: TableLog, table: pa.Table) -> None:
    writer.commit_parts(uri, writer.write_parts(uri, [table], SCHEMA, write_id=fmt.new_write_id()), log=log)


def _run(spark: Any, uri: str, target: str, **extra: Any) -> int:
    spec = parse_compaction({"table": uri, "since": {"version": 0}, "targetFileSize": target,
                             "minInputFiles": 2, "sortBy": ["k"], **extra})
    storage = st.open_storage(uri)
    return compact(spark, spec, RunContext(), storage=storage, runner=compact_task.in_process(storage)).groups


@pytest.mark.spark
def test_a_scoped_run_never_splits_siblings_sharing_an_order(spark: Any, file_uri: Callable[[str], str]) -> None:
    uri = file_uri("t/")
    log = TableLog.create(uri, SCHEMA, "upsert", ["k"])
    _commit(uri, log, _rows([f"a{i:03d}" for i in range(90)] + ["xz"], "old"))  # P: no candidate at T1
    for n in range(4):  # 4 small parts (next-fit: 3, then a lone one that joins them, over the target):
        high = [f"x{n}{i:02d}" for i in range(30)] + (["xz"] if n == 3 else [])  # many high keys, xz too
        _commit(uri, log, _rows([f"b{n}{i:02d}" for i in range(8)] + high, "new"))
    sizes = sorted(p.size for p in log.snapshot().parts)
    assert sizes[-1] >= T1 // 2 > sizes[-2], "P is no candidate at 64 kB, the four are"
    assert _run(spark, uri, "64kB") == 1
    siblings = [p for p in log.snapshot().parts if written_by_compaction(p)]
    assert len(siblings) == 2 and len({p.order for p in siblings}) == 1, "one group, two outputs, one order"
    assert min(p.stats.columns[1].min for p in siblings) < "m" <= max(p.stats.columns[1].min for p in siblings)
    _commit(uri, log, _rows(["c0", "c1"], "new"))  # C: a second fresh candidate in scope
    expected = reader.scan(uri).to_pylist()
    assert {r["k"]: r["v"] for r in expected}["xz"] == "new"
    _run(spark, uri, "1MB", scope={"filter": "k < 'm'"})
    got = reader.scan(uri).to_pylist()
    assert {r["k"]: r["v"] for r in got}["xz"] == "new", "the older part's version of xz won the tie"
    assert sorted(got, key=lambda r: r["k"]) == sorted(expected, key=lambda r: r["k"])
