"""Commits and checkpoints are strict RFC 8259 JSON: a float column holding ±inf leaves its
infinite bounds out (``Infinity`` is no JSON; a reader mapping it to ±1.797e308 would skip a part
holding ``inf`` for ``x > 1e308``), and the inclusive evaluator still reads such parts for every
filter that may match them. Commits written before this (with ``Infinity`` in them) still read.
Fails on 3610912: the commit held ``"max":Infinity``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.log.commits import Change, TableLog
from lading_jobs.table.schema import TableSchema

INF = float("inf")
SCHEMA = TableSchema.of([("id", "bigint"), ("x", "double")])


def strict(text: bytes) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"not RFC 8259 JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def _log_objects(uri: str) -> list[Path]:
    return sorted(p for p in Path(uri.removeprefix("file://"), fmt.LOG_DIR).iterdir() if p.is_file())


def _write(uri: str, log: TableLog, ids: list[int], xs: list[float]) -> None:
    data = pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array(xs, pa.float64())})
    writer.commit_parts(uri, writer.write_parts(uri, [data], SCHEMA, write_id=fmt.new_write_id()), log=log)


def _ids(uri: str, condition: ex.Expr) -> list[int]:
    return sorted(reader.scan(uri, predicate=condition).column("id").to_pylist())


def test_infinite_bounds_are_left_out_of_strict_json_and_still_match(file_uri: Callable[[str], str]) -> None:
    uri = file_uri("inf/")
    log = TableLog.create(uri, SCHEMA)
    _write(uri, log, [1, 2], [1.0, INF])
    _write(uri, log, [3, 4], [-INF, -2.0])
    _write(uri, log, [5], [INF])
    while log.version < fmt.CHECKPOINT_INTERVAL:  # a checkpoint holds the same statistics
        log.commit(Change(operation="noop"))
    names = [p.name for p in _log_objects(uri)]
    assert fmt.commit_name(1) in names and any(n.endswith(".checkpoint.json") for n in names)
    for path in _log_objects(uri):
        strict(path.read_bytes())
    bounds = {(p.stats.columns[2].min, p.stats.columns[2].max) for p in log.snapshot().parts}
    assert bounds == {(1.0, None), (None, -2.0), (None, None)}
    gt = ex.Pred("gt", "x", 1e308)
    assert _ids(uri, gt) == [2, 5]
    assert _ids(uri, ex.Pred("lt", "x", -1e308)) == [3]
    assert _ids(uri, ex.Pred("eq", "x", INF)) == [2, 5]
    snap = log.snapshot()
    bound = ex.bind(ex.Pred("lt", "x", 0.5), SCHEMA)
    assert len(reader.plan_scan(snap, bound)) == 2, "the finite lower bound 1.0 still skips the first part"


def test_commits_written_with_infinity_still_read(file_uri: Callable[[str], str]) -> None:
    """A table written by earlier code (``"max":Infinity`` in a commit) opens, reads and checkpoints
    as strict JSON."""
    uri = file_uri("old/")
    log = TableLog.create(uri, SCHEMA)
    _write(uri, log, [1, 2], [1.0, 3.0])
    commit = Path(uri.removeprefix("file://"), fmt.LOG_DIR, fmt.commit_name(1))
    text = commit.read_text()
    assert '"max":3.0' in text
    commit.write_text(text.replace('"max":3.0', '"max":Infinity'))
    reopened = TableLog.open_existing(uri)
    assert [p.stats.columns[2].max for p in reopened.snapshot().parts] == [INF]
    snap = reopened.snapshot()
    assert len(reader.plan_scan(snap, ex.bind(ex.Pred("gt", "x", 1e308), SCHEMA))) == 1, "the old bound +inf"
    assert _ids(uri, ex.Pred("ge", "x", 1.0)) == [1, 2]
    while reopened.version < fmt.CHECKPOINT_INTERVAL:
        reopened.commit(Change(operation="noop"))
    checkpoint = Path(uri.removeprefix("file://"), fmt.LOG_DIR,
                      fmt.checkpoint_uri(uri, fmt.CHECKPOINT_INTERVAL).rsplit("/", 1)[1])
    state = strict(checkpoint.read_bytes())
    assert "max" not in state["parts"][0]["stats"]["columns"]["2"]
