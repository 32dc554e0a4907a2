"""Small key/value lading tables for table and compaction tests: one schema (``k`` bigint, ``v``
string), batches carrying explicit logical times and diffs, one part per batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog, snapshot_at
from lading_jobs.table.schema import TableSchema

SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string")])


def batch(keys: list[int], values: list[str | None], times: list[int], diffs: list[int]) -> pa.Table:
    """Rows with their logical times and diffs, as a writer of an upsert or diff table hands them over."""
    return pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(values, pa.string()),
                     fmt.TIME_COLUMN: pa.array(times, pa.int64()), fmt.DIFF_COLUMN: pa.array(diffs, pa.int64())})


def commit(uri: str, *tables: pa.Table, create: writer.NewTable | None = None) -> None:
    """One commit; each table one part (in this order)."""
    written = writer.write_parts(uri, list(tables), SCHEMA, write_id=fmt.new_write_id(), one_part_per_table=True)
    writer.commit_parts(uri, written, create=create)


def rows_at(uri: str, version: int) -> pa.Table:
    """lading's own answer at ``version``."""
    return reader.scan(uri, snapshot=snapshot_at(uri, TableLog.open_existing(uri).storage, version))


def twelve_small_parts(uri: str) -> TableLog:
    """An append table of 12 parts of 5 rows, two per commit, at logical times 1..6."""
    log = TableLog.create(uri, SCHEMA, "append")
    for c in range(6):
        t = pa.table({"k": pa.array(range(c * 10, c * 10 + 10), pa.int64()), "v": [f"c{c}"] * 10})
        written = writer.write_parts(uri, [t.slice(0, 5), t.slice(5)], SCHEMA, write_id=fmt.new_write_id(),
                                     logical_time=c + 1, one_part_per_table=True)
        writer.commit_parts(uri, written, log=log)
    return log


def compact_in_process(uri: str, sort_by: tuple[str, ...] = (), target_kb: int = 64, since: int = 0) -> None:
    """The engine's own compaction run, its groups rewritten in this process; consolidating up to
    logical time ``since``."""
    from lading_jobs import storage as st
    from lading_jobs.compact import task as compact_task
    from lading_jobs.compact.engine import compact
    from lading_jobs.engine import RunContext
    from lading_spec.compaction import parse_compaction

    doc: dict[str, Any] = {"table": uri, "since": {"version": since}, "targetFileSize": f"{target_kb}kB",
                           "minInputFiles": 2, "sortBy": list(sort_by)}
    storage = st.open_storage(uri)
    compact(None, parse_compaction(doc), RunContext(), storage=storage, runner=compact_task.in_process(storage))


def check_mirror_every_version(uri: str, root: Path, first: int = 0) -> None:
    """From version ``first`` on: a current Iceberg snapshot of that version (never behind), holding
    lading's rows for pyiceberg (that version's metadata file, and by id from the latest) and for
    DuckDB (by id); its summary's ``total-records`` is their number (not counting deleted rows); and
    every Parquet field id of every file those metadata files list is one they assigned."""
    from pyiceberg.table import StaticTable

    from lading_jobs.table.iceberg import mirror
    from lading_jobs.table.iceberg import view as ice
    from support.iceberg_readers import (
        assert_strict_field_ids,
        duckdb_rows,
        multiset,
        pyiceberg_rows,
    )

    latest = TableLog.open_existing(uri).version
    last = str(root / "metadata" / f"v{latest}.metadata.json")
    versions = list(range(first, latest + 1))
    duck = duckdb_rows(str(root), [None, *(ice.snapshot_id(v) for v in versions)])
    assert multiset(duck[0], ["k", "v"]) == multiset(rows_at(uri, latest))
    for v, by_id in zip(versions, duck[1:], strict=True):
        want = multiset(rows_at(uri, v))
        meta_file = str(root / "metadata" / f"v{v}.metadata.json")
        meta = StaticTable.from_metadata(meta_file).metadata
        assert meta.current_snapshot_id == ice.snapshot_id(v), (v, meta.properties.get(mirror.PROP_REASON))
        assert multiset(pyiceberg_rows(meta_file), ["k", "v"]) == want, v
        assert multiset(pyiceberg_rows(last, ice.snapshot_id(v)), ["k", "v"]) == want, v
        assert multiset(by_id, ["k", "v"]) == want, v
        summary = meta.snapshot_by_id(ice.snapshot_id(v)).summary  # type: ignore[union-attr]
        assert summary is not None and summary["total-records"] == str(sum(want.values())), v
    assert_strict_field_ids(root, first)
