"""``to.schemaEvolution: addColumns`` end to end: real Spark tasks, file:// tables, the table read back
by field id (``reader.scan``, pure Arrow; ``read_table`` through Spark once).

The issue's acceptance ("a load with the opt-in whose second file adds a column: the table gains
it, earlier rows read NULL or its default, and a reader by field id still maps every part
correctly"), seed 001 through a load, extra columns ignored without the opt-in, type conflicts,
a concurrent schema change between the load's plan and its commit, and a commit that fails.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.faults import Fault, FaultyStorage

from lading_jobs import storage as st
from lading_jobs.ingest.stores import storage_for
from lading_jobs.load import job as load_job
from lading_jobs.load.job import run_load
from lading_jobs.table import format as fmt
from lading_jobs.table import reader
from lading_jobs.table.evolve import Found, evolve
from lading_jobs.table.log.commits import Change, LedgerEntry, TableLog
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark]
SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "kind", "type": "string"}]


def job(root: str, files: str = "in/", run_id: str = "r-1", evolve_: bool = True, fmt_name: str = "json",
        **source: Any) -> JobDocument:
    to: dict[str, Any] = {"table": root + "t/", "schema": SCHEMA}
    if evolve_:
        to["schemaEvolution"] = "addColumns"
    spec = {"from": {"files": root + files, "format": fmt_name, **source}, "to": to}
    return JobDocument("CopyJob", "ns", "load", "uid", 1, run_id, dt.datetime(2026, 1, 1, tzinfo=dt.UTC), spec)


def put(root: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        st.open_storage(root).put(root + name, data)


def jsonl(*rows: dict[str, Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def rows(root: str) -> list[dict[str, Any]]:
    return sorted(reader.scan(root + "t/").to_pylist(), key=lambda r: r["id"])


def commit_entry(root: str, version: int) -> dict[str, Any]:
    return json.loads(st.open_storage(root).read(fmt.commit_uri(root + "t/", version)))  # type: ignore[no-any-return]


def data_objects(root: str) -> set[str]:
    return {o.uri for o in st.open_storage(root).list_objects(root + "t/" + fmt.DATA_DIR + "/")}


def field_ids(root: str) -> dict[str, dict[str, int]]:
    """Per committed part (by the first id in it): column name → Parquet field id, as stored."""
    snap = TableLog.open_existing(root + "t/").snapshot()
    out = {}
    for p in snap.parts:
        part = pq.read_table(pa.BufferReader(st.open_storage(root).read(snap.part_uri(p))))
        ids = {f.name: int(f.metadata[fmt.FIELD_ID_KEY]) for f in part.schema if not f.name.startswith("_lading")}
        out[str(part.column("id")[0].as_py())] = ids
    return out


@pytest.fixture
def root(file_uri: Callable[[str], str]) -> str:
    return file_uri("root/")


def test_a_second_file_adds_a_column_in_the_same_commit_as_its_rows(spark: Any, root: str) -> None:
    """The acceptance: one load of three files, the second carrying a column the table lacks."""
    put(root, {"in0/a.jsonl": jsonl({"id": 0, "kind": "before"})})
    assert run_load(spark, job(root, "in0/", "r-0"))["rows"] == 1  # commit 0 creates the table
    put(root, {"in/a.jsonl": jsonl({"id": 1, "kind": "x"}),
               "in/b.jsonl": jsonl({"id": 2, "kind": "y", "score": 7}, {"id": 3, "kind": "z", "score": None}),
               "in/c.jsonl": jsonl({"id": 4, "kind": "w"})})
    out = run_load(spark, job(root))
    assert out["rows"] == 4 and out["columnsAdded"] == ["score"] and out["tableVersion"] == 1, out
    snap = TableLog.open_existing(root + "t/").snapshot()
    assert [(c.id, c.name, c.type, c.nullable) for c in snap.schema.columns] == [
        (1, "id", "bigint", False), (2, "kind", "string", True), (3, "score", "bigint", True)]
    entry = commit_entry(root, 1)  # ONE commit: the schema change and the parts together
    assert entry["operation"] == "load" and entry["schema"]["lastColumnId"] == 3 and len(entry["add"]) == 3
    assert snap.version == 1
    assert [(r["id"], r["score"]) for r in rows(root)] == [(0, None), (1, None), (2, 7), (3, None), (4, None)]
    # by field id: the parts written before (and beside) the new column do not carry id 3
    ids = field_ids(root)
    assert ids["0"] == ids["1"] == ids["4"] == {"id": 1, "kind": 2}
    assert ids["2"] == {"id": 1, "kind": 2, "score": 3}
    got = sorted((r["id"], r["score"]) for r in reader.read_table(spark, root + "t/").collect())
    assert got == [(0, None), (1, None), (2, 7), (3, None), (4, None)]
    assert st.open_storage(root).list_pending_uploads(root) == []
    # the next load finds the column in the table: it maps by name, adds nothing
    put(root, {"in2/d.jsonl": jsonl({"id": 5, "kind": "v", "score": 9})})
    again = run_load(spark, job(root, "in2/", "r-2"))
    assert again["rows"] == 1 and "columnsAdded" not in again
    assert "schema" not in commit_entry(root, 2) and rows(root)[-1]["score"] == 9


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


@pytest.mark.parametrize("fmt_name", ["parquet", "csv"])
def test_new_columns_take_the_files_types_parquet_typed_csv_string(spark: Any, root: str, fmt_name: str) -> None:
    if fmt_name == "parquet":
        put(root, {"in/a.parquet": _parquet(pa.table({"id": [1], "kind": ["x"]})),
                   "in/b.parquet": _parquet(pa.table({"id": [2], "day": [dt.date(2026, 1, 2)],
                                                      "ratio": pa.array([0.5], pa.float32())}))})
        expected = [("day", "date"), ("ratio", "float")]
        values = [(1, None, None), (2, dt.date(2026, 1, 2), 0.5)]
        options: dict[str, Any] = {}
    else:
        put(root, {"in/a.csv": b"id,kind\n1,x\n", "in/b.csv": b"id,day,ratio\n2,2026-01-02,0.5\n"})
        expected = [("day", "string"), ("ratio", "string")]
        values = [(1, None, None), (2, "2026-01-02", "0.5")]
        options = {"options": {"header": True}}
    out = run_load(spark, job(root, fmt_name=fmt_name, **options))
    assert out["rows"] == 2 and out["columnsAdded"] == ["day", "ratio"], out
    schema = TableLog.open_existing(root + "t/").snapshot().schema
    assert [(c.name, c.type) for c in schema.columns[2:]] == expected
    assert [(r["id"], r["day"], r["ratio"]) for r in rows(root)] == values


def test_without_the_opt_in_extra_columns_are_ignored(spark: Any, root: str) -> None:
    put(root, {"in/a.jsonl": jsonl({"id": 1, "kind": "x"}), "in/b.jsonl": jsonl({"id": 2, "kind": "y", "score": 7})})
    out = run_load(spark, job(root, evolve_=False))
    assert out["rows"] == 2 and "columnsAdded" not in out
    assert TableLog.open_existing(root + "t/").snapshot().schema.names == ["id", "kind"]
    assert rows(root) == [{"id": 1, "kind": "x"}, {"id": 2, "kind": "y"}]


def test_seed_001_drop_b_then_b_arrives_through_a_load(spark: Any, root: str) -> None:
    """CREATE t1 (a text, b int); INSERT ('hello', 5); DROP b; then a load brings a column b: it is a
    new column (a fresh id), so 'hello' reads NULL, not 5; ADD b DEFAULT 50 later: old rows read 50,
    and a DELETE WHERE b = 5 (or = the value under the dropped id) matches nothing."""
    spec_schema = [{"name": "a", "type": "string", "nullable": False}, {"name": "b", "type": "int"}]

    def load(files: dict[str, bytes], run_id: str) -> dict[str, Any]:
        put(root, {f"{run_id}/{k}": v for k, v in files.items()})
        spec = {"from": {"files": f"{root}{run_id}/", "format": "json"},
                "to": {"table": root + "t/", "schema": spec_schema, "envelope": "upsert", "keyColumns": ["a"],
                       "schemaEvolution": "addColumns"}}
        doc = JobDocument("CopyJob", "ns", "seed", "uid", 1, run_id, dt.datetime(2026, 1, 1, tzinfo=dt.UTC), spec)
        return run_load(spark, doc)

    def table() -> dict[str, Any]:
        return {r["a"]: r["b"] for r in reader.scan(root + "t/").to_pylist()}

    assert load({"x.jsonl": jsonl({"a": "hello", "b": 5})}, "r1")["rows"] == 1
    log = TableLog.open_existing(root + "t/")
    log.commit(Change(operation="schema", schema=log.snapshot().schema.drop_column("b")))
    assert load({"x.jsonl": jsonl({"a": "world", "b": 7})}, "r2")["columnsAdded"] == ["b"]
    schema = TableLog.open_existing(root + "t/").snapshot().schema
    assert [(c.id, c.name) for c in schema.columns] == [(1, "a"), (3, "b")]  # id 2 is never reused
    assert table() == {"hello": None, "world": 7}
    # DROP b; ADD b int DEFAULT 50 (id 4); a load whose files carry b maps to it (no new column)
    log = TableLog.open_existing(root + "t/")
    log.commit(Change(operation="schema", schema=log.snapshot().schema.drop_column("b")))
    log.commit(Change(operation="schema", schema=log.snapshot().schema.add_column("b", "int", default=50)))
    out = load({"x.jsonl": jsonl({"a": "again", "b": 9})}, "r3")
    assert out["rows"] == 1 and "columnsAdded" not in out
    assert table() == {"hello": 50, "world": 50, "again": 9}
    from lading_jobs.table.writer import delete_where

    for value in (5, 7):  # values stored under dropped ids: no row has them under this b
        delete_where(spark, root + "t/", f"b = {value}")
        assert table() == {"hello": 50, "world": 50, "again": 9}
    delete_where(spark, root + "t/", "b = 50")
    assert table() == {"again": 9}


def test_two_files_that_disagree_on_a_new_columns_type_fail_naming_both(spark: Any, root: str) -> None:
    put(root, {"in0/a.jsonl": jsonl({"id": 0, "kind": "before"})})
    run_load(spark, job(root, "in0/", "r-0"))
    before = data_objects(root)
    put(root, {"in/a.jsonl": jsonl({"id": 1, "c": 1}), "in/b.jsonl": jsonl({"id": 2, "c": "text"})})
    with pytest.raises(Exception, match=r"column 'c' is bigint in \S+/in/a.jsonl but string in \S+/in/b.jsonl"):
        run_load(spark, job(root))
    snap = TableLog.open_existing(root + "t/").snapshot()
    assert snap.version == 0 and snap.schema.names == ["id", "kind"]  # nothing committed
    assert data_objects(root) == before and st.open_storage(root).list_pending_uploads(root) == []


def _concurrently(monkeypatch: pytest.MonkeyPatch, root: str, column: str = "", type_name: str = "",
                  change: Change | None = None) -> None:
    """Another writer commits (a schema change adding ``column``, or ``change``) after the load ran
    its tasks and before it commits."""
    decide = load_job.decide

    def then_decide(*args: Any, **kw: Any) -> Any:
        other = TableLog.open_existing(root + "t/")
        schema = other.snapshot().schema
        other.commit(change or Change(operation="schema", schema=evolve(schema, [Found(column, type_name, "other")])))
        monkeypatch.setattr(load_job, "decide", decide)
        return decide(*args, **kw)

    monkeypatch.setattr(load_job, "decide", then_decide)


def test_a_file_loaded_concurrently_is_not_loaded_twice(spark: Any, root: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on the code before this change (the rows of b.jsonl committed twice): the load's commit
    refreshed the handle it planned with, so the rebase compared the ledger with the latest version."""
    put(root, {"in0/a.jsonl": jsonl({"id": 0, "kind": "before"})})
    run_load(spark, job(root, "in0/", "r-0"))
    put(root, {"in/b.jsonl": jsonl({"id": 2, "kind": "b"})})
    uri = root + "in/b.jsonl"
    info = st.open_storage(root).head(uri)
    assert info is not None
    _concurrently(monkeypatch, root, change=Change(operation="load",
                                                   ledger={uri: LedgerEntry(info.etag, info.size, 1)}))
    with pytest.raises(Exception, match=r"in/b.jsonl was loaded concurrently by commit 1"):
        run_load(spark, job(root, evolve_=False))
    assert [r["id"] for r in rows(root)] == [0]


def test_a_concurrent_add_of_the_same_column_leaves_one_column(spark: Any, root: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    put(root, {"in0/a.jsonl": jsonl({"id": 0, "kind": "before"})})
    run_load(spark, job(root, "in0/", "r-0"))
    put(root, {"in/b.jsonl": jsonl({"id": 2, "score": 7})})
    _concurrently(monkeypatch, root, "score", "bigint")
    out = run_load(spark, job(root))
    assert out["rows"] == 1 and out["tableVersion"] == 2, out
    schema = TableLog.open_existing(root + "t/").snapshot().schema
    assert [(c.id, c.name, c.type) for c in schema.columns] == [(1, "id", "bigint"), (2, "kind", "string"),
                                                                (3, "score", "bigint")]
    assert "schema" not in commit_entry(root, 2)  # the other writer's change stands, ours adds nothing
    assert [(r["id"], r["score"]) for r in rows(root)] == [(0, None), (2, 7)]


def test_a_concurrent_add_of_the_same_name_with_another_type_fails_and_a_rerun_loads(
        spark: Any, root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on the code before this change: the load's commit refreshed its planning handle, so the
    rebase never saw the concurrent change and the load's schema (score bigint, id 3) replaced the
    other writer's (score string, id 3) silently."""
    put(root, {"in0/a.jsonl": jsonl({"id": 0, "kind": "before"})})
    run_load(spark, job(root, "in0/", "r-0"))
    before = data_objects(root)
    put(root, {"in/b.jsonl": jsonl({"id": 2, "score": 7})})
    _concurrently(monkeypatch, root, "score", "string")
    with pytest.raises(Exception, match=r"schema changed concurrently.*column 'score' is string in the table, "
                                        r"bigint in this commit"):
        run_load(spark, job(root))
    snap = TableLog.open_existing(root + "t/").snapshot()
    assert snap.version == 1 and snap.schema.column("score").type == "string"
    assert data_objects(root) == before and st.open_storage(root).list_pending_uploads(root) == []
    out = run_load(spark, job(root, run_id="r-2"))  # the rerun loads into the table's column
    assert out["rows"] == 1 and "columnsAdded" not in out
    assert [(r["id"], r["score"]) for r in rows(root)] == [(0, None), (2, "7")]


def test_the_commit_carrying_the_schema_change_fails_old_state_whole_and_a_rerun_succeeds(
        spark: Any, root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    put(root, {"in0/a.jsonl": jsonl({"id": 0, "kind": "before"})})
    run_load(spark, job(root, "in0/", "r-0"))
    before = data_objects(root)
    put(root, {"in/a.jsonl": jsonl({"id": 1}), "in/b.jsonl": jsonl({"id": 2, "score": 7})})
    # the second part's completion fails inside the commit: the first part, already complete, is deleted
    fault = Fault("complete_upload", "raise", match=f"/{fmt.DATA_DIR}/", nth=2)
    with monkeypatch.context() as m:
        m.setattr(load_job, "storage_for", lambda uri, settings: FaultyStorage(storage_for(uri, settings), fault))
        with pytest.raises(Exception, match="injected failure"):
            run_load(spark, job(root))
    assert fault.fired
    snap = TableLog.open_existing(root + "t/").snapshot()
    assert snap.version == 0 and snap.schema.names == ["id", "kind"]  # neither the column nor the rows
    assert data_objects(root) == before and st.open_storage(root).list_pending_uploads(root) == []
    out = run_load(spark, job(root))  # the same run id: its intent was rolled back, it starts over
    assert out["rows"] == 2 and out["columnsAdded"] == ["score"]
    assert [(r["id"], r["score"]) for r in rows(root)] == [(0, None), (1, None), (2, 7)]
    leftovers = [o.uri for o in st.open_storage(root).list_objects(root) if "intent" in o.uri]
    assert leftovers == [] and st.open_storage(root).list_pending_uploads(root) == []
