"""A plain bin-pack's parts copied row group by row group (``compact.groupcopy``) against the rewrite.

Property: for parts of every column type (NULL-only columns, NaN, -0.0, infinities, strings past
the statistics' length and runs of U+10FFFF, nested values, JSON) and any ``targetFileSize``
(down to one part per output, and below it), the copied outputs hold the rewrite's rows in the
same order, row for row; each holds whole parts, within the ceiling; its table statistics are
what the rewrite's writer gathers from its rows (``stats.Accumulator``), and merged they are the
rewrite's; its Parquet schema (field ids), key-value metadata and every row group's column
statistics are the parts'. Then a column whose dictionary overflows (pyarrow falls back to plain
pages inside the chunk), the groups that are rewritten instead (a part of an older schema, runts),
and a mirrored table compacted by the engine, read by lading, pyarrow, DuckDB, pyiceberg and
DuckDB's Iceberg reader.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import decimal
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from lading_jobs import storage as st
from lading_jobs.compact import groupcopy
from lading_jobs.compact import plan as planner
from lading_jobs.compact import task as compact_task
from lading_jobs.formats.parquetfooter import CREATED_BY
from lading_jobs.table import evolve, writer
from lading_jobs.table import format as fmt
from lading_jobs.table.evolve import Found
from lading_jobs.table.log.commits import Part, Snapshot, TableLog
from lading_jobs.table.schema import TableSchema, conform
from lading_jobs.table.stats import part as stx

TYPES = [("b", "boolean"), ("i8", "tinyint"), ("i32", "int"), ("i64", "bigint"), ("f32", "float"),
         ("f64", "double"), ("d2", "decimal(9,2)"), ("d10", "decimal(38,10)"), ("s", "string"), ("bin", "binary"),
         ("day", "date"), ("ts", "timestamp"), ("ntz", "timestamp_ntz"), ("j", "json"), ("arr", "array<int>"),
         ("st", "struct<a:int,b:string>"), ("m", "map<string,int>"), ("nul", "bigint")]
SCHEMA = TableSchema.of(TYPES)
KV_SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string")])  # support.kv_tables's
LONG = "x" * (fmt.STRING_STATS_LENGTH + 5)
TOP = "\U0010ffff" * (fmt.STRING_STATS_LENGTH + 2)
FLOATS = [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), float("nan"), 3e38]
UTC = dt.UTC


def _values(name: str, kind: str) -> s.SearchStrategy[Any]:
    """One value of a column (None: NULL); the column ``nul`` is NULL in every row."""
    if name == "nul":
        return s.none()
    base: s.SearchStrategy[Any] = {
        "boolean": s.booleans(),
        "tinyint": s.integers(-128, 127),
        "int": s.integers(-2**31, 2**31 - 1),
        "bigint": s.integers(-2**63, 2**63 - 1),
        "float": s.sampled_from(FLOATS[:-1] + [1e30]),
        "double": s.sampled_from(FLOATS) | s.floats(allow_nan=True),
        "decimal(9,2)": s.decimals(-9_999_999, 9_999_999, places=2, allow_nan=False, allow_infinity=False),
        "decimal(38,10)": s.integers(-10**28 + 1, 10**28 - 1).map(lambda n: decimal.Decimal(n).scaleb(-10)),
        "string": s.sampled_from(["", "a", "b", "é", LONG, LONG + "y", LONG[:-6], TOP, TOP + "z"]) | s.text(max_size=8),
        "binary": s.binary(max_size=12),
        "date": s.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)),
        "timestamp": s.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1)).map(lambda d: d.replace(tzinfo=UTC)),
        "timestamp_ntz": s.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1)),
        "json": s.sampled_from(['{"a": 1}', '{"a": "x", "b": [1, 2]}', '{"b": null}', "3", '"s"']),
        "array<int>": s.lists(s.none() | s.integers(-5, 5), max_size=3),
        "struct<a:int,b:string>": s.fixed_dictionaries({"a": s.none() | s.integers(0, 9), "b": s.none() | s.text(max_size=3)}),
        "map<string,int>": s.lists(s.tuples(s.sampled_from(["k", "n"]), s.none() | s.integers(0, 9)), max_size=2,
                                   unique_by=lambda kv: kv[0]),
    }[kind]
    return s.none() | base


row = s.fixed_dictionaries({name: _values(name, kind) for name, kind in TYPES})
part_rows = s.lists(row, min_size=1, max_size=12)


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    schema = SCHEMA.arrow_schema(internal=False)
    return pa.table({f.name: pa.array([r[f.name] for r in rows], f.type) for f in schema}, schema=schema)


def _new_table(uri: str, parts: list[pa.Table]) -> Snapshot:
    log = TableLog.create(uri, SCHEMA, "append")
    for n, t in enumerate(parts):
        written = writer.write_parts(uri, [t], SCHEMA, write_id=fmt.new_write_id(), logical_time=n + 1,
                                     one_part_per_table=True)
        writer.commit_parts(uri, written, log=log)
    return TableLog.open_existing(uri).snapshot()


def _staged(written: writer.WrittenPart) -> str:
    return str(written.upload["upload_id"])  # file://: the pending upload's staging file


def _rows(snap: Snapshot, written: list[writer.WrittenPart]) -> pa.Table:
    return pa.concat_tables([conform(pq.read_table(_staged(w)), snap.schema) for w in written])


def _comparable(table: pa.Table) -> pa.Table:
    """``table`` with each float column's NaNs as NULL beside a column marking them (NaN ≠ NaN)."""
    for f in list(table.schema):
        if pa.types.is_floating(f.type):
            col = table.column(f.name)
            nan = pc.fill_null(pc.is_nan(col), False)
            table = table.set_column(table.schema.get_field_index(f.name), f, pc.if_else(nan, None, col))
            table = table.append_column(f"{f.name}_nan", nan)
    return table


@contextlib.contextmanager
def _min_row_group_bytes(n: int) -> Iterator[None]:
    original = groupcopy.MIN_ROW_GROUP_BYTES
    groupcopy.MIN_ROW_GROUP_BYTES = n
    try:
        yield
    finally:
        groupcopy.MIN_ROW_GROUP_BYTES = original


def _rewrite(snap: Snapshot, max_size: int, tag: str) -> list[writer.WrittenPart]:
    """Today's streamed rewrite of every part as one group (the copy declined: no row group is large enough)."""
    plan = compact_task.RewritePlan(dataclasses.replace(snap, parts=()), (planner.Group(snap.parts),), 0, (),
                                    planner.WRITE_ID_PREFIX + tag, max_size, st.S3Settings.from_env())
    with _min_row_group_bytes(1 << 60):
        return list(compact_task.rewrite_group(plan, 0, st.open_storage(snap.uri)).written)


def _copy(snap: Snapshot, max_size: int, tag: str) -> list[writer.WrittenPart]:
    """The parts copied (row groups of any size: these parts hold a few rows)."""
    copier = groupcopy.GroupCopier(snap, planner.WRITE_ID_PREFIX + tag, 0, st.open_storage(snap.uri), max_size)
    try:
        with _min_row_group_bytes(0):
            return copier.copy(snap.parts)
    except BaseException:
        copier.abort()
        raise


def _row_group_stats(path: str) -> list[list[dict[str, Any] | None]]:
    md = pq.ParquetFile(path).metadata
    return [[None if md.row_group(g).column(c).statistics is None else md.row_group(g).column(c).statistics.to_dict()
             for c in range(md.num_columns)] for g in range(md.num_row_groups)]


def _check(snap: Snapshot, copied: list[writer.WrittenPart], rewritten: list[writer.WrittenPart], max_size: int) -> None:
    # the same rows, in the same order
    got, want = _rows(snap, copied), _rows(snap, rewritten)
    assert _comparable(got).equals(_comparable(want))
    # whole parts, in order, within the ceiling; every row group's chunk statistics the part's
    parts = list(snap.parts)
    ids = {c.name: c.id for c in snap.schema.columns}
    arrow = snap.schema.arrow_schema(table_id=snap.table_id, envelope=snap.envelope)
    reference = pq.ParquetFile(_staged(rewritten[0]))
    one_infinity = False  # an input part's float column of one infinity alone (its bound is left out)
    for w in copied:
        f = pq.ParquetFile(_staged(w))
        assert w.part.size <= max_size and f.metadata.created_by == CREATED_BY.decode()
        assert f.metadata.schema.equals(reference.metadata.schema)  # names, types, field ids
        assert f.schema_arrow.equals(reference.schema_arrow, check_metadata=True)
        assert f.metadata.metadata == reference.metadata.metadata
        mine: list[Part] = []
        while parts and sum(p.rows for p in mine) < f.metadata.num_rows:
            mine.append(parts.pop(0))
        assert sum(p.rows for p in mine) == f.metadata.num_rows == w.part.rows
        inputs = [g for p in mine for g in _row_group_stats(str(Path(snap.uri[len("file://"):]) / p.path))]
        assert _row_group_stats(_staged(w)) == inputs
        # its table statistics: what the rewrite's writer gathers from its rows, as the log keeps them
        # (JSON: no infinite bound), unless a part's float column holds one infinity alone (its bound is
        # left out of the log, so merged it is "no bound": fewer parts skipped, never a row lost)
        rows = pq.read_table(_staged(w)).cast(arrow)
        acc = stx.Accumulator(arrow, ids)
        acc.add(rows)
        if any(_one_infinity(rows.slice(at, p.rows)) for at, p in _offsets(mine)):
            one_infinity = True
        else:
            assert _logged(w.part.stats) == _logged(acc.result())
        assert w.part.size == Path(_staged(w)).stat().st_size
    assert not parts
    merged = copied[0].part.stats
    for w in copied[1:]:
        merged = stx.merge(merged, w.part.stats, frozenset(c.id for c in snap.schema.columns
                                                           if c.type.startswith("decimal")))
    if len(rewritten) == 1 and not one_infinity:  # (an output's rows may hold it beside other values)
        assert _logged(merged) == _logged(rewritten[0].part.stats)


def _logged(stats: stx.PartStats) -> dict[str, Any]:
    """Statistics as the log keeps them (``to_dict``), the size apart."""
    return {k: v for k, v in stats.to_dict().items() if k != "bytes"}


def _offsets(parts: list[Part]) -> list[tuple[int, Part]]:
    out, at = [], 0
    for p in parts:
        out.append((at, p))
        at += p.rows
    return out


def _one_infinity(rows: pa.Table) -> bool:
    """Whether a float column's non-NULL values are all +inf or all -inf (a bound the log leaves out)."""
    for f in rows.schema:
        if pa.types.is_floating(f.type):
            values = rows.column(f.name).drop_null()
            if len(values) and (pc.all(pc.equal(values, float("inf"))).as_py()
                                or pc.all(pc.equal(values, float("-inf"))).as_py()):
                return True
    return False


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=s.lists(part_rows, min_size=1, max_size=4), ceiling=s.integers(0, 8))
def test_copied_outputs_equal_the_rewrite(parts: list[list[dict[str, Any]]], ceiling: int) -> None:
    root = tempfile.mkdtemp(prefix="groupcopy-")
    try:
        snap = _new_table(f"file://{root}/t/", [_table(rows) for rows in parts])
        sizes = [p.size for p in snap.parts]
        # ceilings from below the largest part (its output's footer names the table: a little larger) to
        # about one part per output, a few, and all of them in one
        max_size = max(sizes) - 1 + 64 * ceiling ** 3 if ceiling < 8 else 1 << 30
        rewritten = _rewrite(snap, 1 << 30, "rw")
        try:
            copied = _copy(snap, max_size, "cp")
        except groupcopy.CannotCopy as e:
            assert ceiling <= 2 and ("does not fit" in str(e) or "as large as" in str(e))
            return
        _check(snap, copied, rewritten, max_size)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_dictionary_that_overflows_into_plain_pages_is_copied_as_it_is(tmp_path: Path) -> None:
    """pyarrow gives a chunk's dictionary up past 1 MiB and writes the rest plain: copied as stored."""
    n = 3000
    big = pa.array([f"{i:05d}" + "v" * 500 for i in range(n)])
    rows = _table([dict.fromkeys(SCHEMA.names) for _ in range(n)])
    rows = rows.set_column(rows.schema.get_field_index("s"), "s", big)
    snap = _new_table(f"file://{tmp_path}/t/", [rows, rows.slice(0, 10), rows.slice(5, 1)])
    first = pq.ParquetFile(str(tmp_path / "t" / snap.parts[0].path)).metadata.row_group(0)
    encodings = first.column(SCHEMA.names.index("s")).encodings
    assert "PLAIN" in encodings and "RLE_DICTIONARY" in encodings  # dictionary pages, then plain ones
    _check(snap, _copy(snap, 1 << 30, "cp"), _rewrite(snap, 1 << 30, "rw"), 1 << 30)


def test_a_part_of_an_older_schema_or_runts_send_the_group_to_the_rewrite(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    uri = f"file://{tmp_path}/t/"
    snap = _new_table(uri, [_table([dict.fromkeys(SCHEMA.names)] * 3)] * 2)
    storage = st.open_storage(uri)
    with pytest.raises(groupcopy.CannotCopy, match="less than"):  # the default MIN_ROW_GROUP_BYTES
        groupcopy.GroupCopier(snap, planner.WRITE_ID_PREFIX + "runts", 0, storage, 1 << 30).copy(snap.parts)
    assert groupcopy.copy_parts(snap, snap.parts, planner.WRITE_ID_PREFIX + "no", 0, storage, 1 << 30) is None
    monkeypatch.setattr(groupcopy, "MIN_ROW_GROUP_BYTES", 0)
    copied = groupcopy.copy_parts(snap, snap.parts, planner.WRITE_ID_PREFIX + "ok", 0, storage, 1 << 30)
    assert copied is not None and len(copied) == 1
    newer = evolve.evolve(SCHEMA, [Found("w", "bigint", "test")])
    written = writer.write_parts(uri, [_table([dict.fromkeys(SCHEMA.names)] * 3)], newer,
                                 write_id=fmt.new_write_id(), logical_time=9, one_part_per_table=True)
    writer.commit_parts(uri, written, schema=newer)
    evolved = TableLog.open_existing(uri).snapshot()
    assert {p.schema_id for p in evolved.parts} == {0, 1}
    with pytest.raises(groupcopy.CannotCopy, match="older schema"):
        _copy(evolved, 1 << 30, "older")


def test_a_mirrored_table_compacted_by_copies_reads_the_same_everywhere(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's run copies row groups (its outputs name lading as their writer); lading's reader,
    pyarrow and DuckDB on the parts, pyiceberg and DuckDB's ``iceberg_scan`` on the mirror read the
    rows they read before, at every version, with the field ids the mirror assigned."""
    from support.kv_tables import (
        batch,
        check_mirror_every_version,
        commit,
        compact_in_process,
        rows_at,
    )

    monkeypatch.setattr(groupcopy, "MIN_ROW_GROUP_BYTES", 0)
    root = tmp_path / "t"
    uri = f"file://{root}/"
    create = writer.NewTable(KV_SCHEMA, "append")
    commit(uri, batch([1, 2, 3, 3], ["a", "b", None, "c"], [0] * 4, [1] * 4), create=create)
    for n in range(3):
        commit(uri, batch([10 * n, 10 * n + 1], [f"x{n}" * 40, None], [0, 0], [1, 1]))
    before = rows_at(uri, TableLog.open_existing(uri).version)
    compact_in_process(uri, target_kb=1024)
    snap = TableLog.open_existing(uri).snapshot()
    assert len(snap.parts) == 1
    path = str(root / snap.parts[0].path)
    assert pq.ParquetFile(path).metadata.created_by == CREATED_BY.decode()  # copied, not rewritten
    after = rows_at(uri, snap.version)
    assert sorted(after.to_pylist(), key=repr) == sorted(before.to_pylist(), key=repr)
    assert pq.read_table(path).select(["k", "v"]).to_pylist() == \
        duckdb.sql(f"SELECT k, v FROM read_parquet('{path}')").fetch_arrow_table().to_pylist()
    check_mirror_every_version(uri, root)


def test_spark_reads_copied_outputs_as_the_parts_before(spark: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's Parquet reader on a copied output, and lading's data source on the table, read the rows
    of the parts it replaced (every flat column type, NULLs and infinities included)."""
    from support.kv_tables import compact_in_process

    from lading_jobs.table import reader

    monkeypatch.setattr(groupcopy, "MIN_ROW_GROUP_BYTES", 0)
    flat = [name for name, kind in TYPES if "<" not in kind]
    base = dict.fromkeys(SCHEMA.names)
    rows = [dict(base, b=True, i8=-3, i32=7, i64=-2**63, f32=-0.0, f64=float("inf"), d2=decimal.Decimal("1.25"),
                 d10=decimal.Decimal("-3.0000000001"), s=LONG, bin=b"\x00\xff", day=dt.date(1, 1, 1),
                 ts=dt.datetime(1900, 1, 1, tzinfo=UTC), ntz=dt.datetime(2100, 2, 3, 4, 5, 6), j='{"a": 1}'),
            base, dict(base, s="é", f64=float("-inf"), i8=127)]
    uri = f"file://{tmp_path}/t/"
    _new_table(uri, [_table(rows), _table(rows[1:]), _table(rows[:1])])
    before = reader.read_table(spark, uri).select(*flat).collect()
    compact_in_process(uri, target_kb=4096)
    snap = TableLog.open_existing(uri).snapshot()
    assert len(snap.parts) == 1
    path = str(tmp_path / "t" / snap.parts[0].path)
    assert pq.ParquetFile(path).metadata.created_by == CREATED_BY.decode()
    assert sorted(map(repr, reader.read_table(spark, uri).select(*flat).collect())) == sorted(map(repr, before))
    assert sorted(map(repr, spark.read.parquet(path).select(*flat).collect())) == sorted(map(repr, before))
