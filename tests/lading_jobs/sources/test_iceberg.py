"""Iceberg tables as query inputs (``from.inputs[].iceberg``), checked against DuckDB's own
``iceberg_scan`` of the same snapshot: a table pyiceberg wrote (appends, an overwrite, a
delete, rename/drop/add of columns, partition evolution) and an upsert and a diff table lading's
mirror wrote (position deletes; rows counting more than once as copy files). A filtered read's Spark partitions are the data files it opens
(one per task), counted against the snapshot's total to show pruning. Bad inputs fail
naming the input before anything is read."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DateType,
    DecimalType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
    TimeType,
)
from support.iceberg_readers import duckdb_rows, multiset
from support.iceberg_readers import query_answer as _answer
from support.iceberg_writer import FileCatalog

from lading_jobs.sources import iceberg
from lading_jobs.sources.files import query_frame
from lading_spec.copyjob import IcebergTable, Input, parse_copyjob
from lading_spec.errors import SpecError

pytestmark = [pytest.mark.spark]
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _rows(lo: int, hi: int, day: int | None = None, *, evolved: bool = False) -> pa.Table:
    ids = list(range(lo, hi))
    days = [dt.date(2026, 1, 1 + (day if day is not None else i % 5)) for i in ids]
    ts = pa.array([BASE + dt.timedelta(minutes=i) for i in ids], pa.timestamp("us", tz="UTC"))
    if evolved:  # after: name renamed to label, amount dropped, note and region added
        return pa.table({"id": pa.array(ids, pa.int64()), "dt": pa.array(days, pa.date32()),
                         "label": [f"n{i}" for i in ids], "ts": ts,
                         "note": [None if i % 3 else f"note {i}" for i in ids],
                         "region": ["eu" if i % 2 else "us" for i in ids]})
    return pa.table({"id": pa.array(ids, pa.int64()), "dt": pa.array(days, pa.date32()),
                     "amount": pa.array([decimal.Decimal(i) / 100 for i in ids], pa.decimal128(12, 2)),
                     "name": [None if i % 7 == 0 else f"n{i}" for i in ids], "ts": ts})


@pytest.fixture(scope="module")
def orders(tmp_path_factory: Any) -> dict[str, Any]:
    """One table, every kind of change pyiceberg writes; its snapshot ids by step."""
    root = tmp_path_factory.mktemp("ice")
    catalog = FileCatalog(f"file://{root}/wh")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "dt", DateType()),
                    NestedField(3, "amount", DecimalType(12, 2)), NestedField(4, "name", StringType()),
                    NestedField(5, "ts", TimestamptzType()))
    table = catalog.create_table("db.orders", schema)
    with table.update_spec() as spec:
        spec.add_identity("dt")
    table = catalog.load_table("db.orders")
    steps: dict[str, int] = {}

    def step(name: str) -> None:
        nonlocal table
        table = catalog.load_table("db.orders")
        assert table.metadata.current_snapshot_id is not None
        steps[name] = table.metadata.current_snapshot_id

    table.append(_rows(0, 100))
    step("first")
    table.append(_rows(100, 200))
    step("second")
    table.overwrite(_rows(1000, 1020, day=4), overwrite_filter=EqualTo("dt", "2026-01-05"))
    step("overwrite")
    table.delete("id < 10")
    step("delete")
    with table.update_schema() as update:
        update.rename_column("name", "label")
        update.delete_column("amount")
        update.add_column("note", StringType())
        update.add_column("region", StringType())
    table = catalog.load_table("db.orders")
    table.append(_rows(200, 260, evolved=True))
    step("evolved")
    with table.update_spec() as spec:
        spec.add_identity("region")  # (bucket and truncate transforms need pyiceberg-core to write)
    table = catalog.load_table("db.orders")
    table.append(_rows(300, 340, evolved=True))
    step("repartitioned")
    location = table.metadata_location
    return {"metadata": location, "path": location.removeprefix("file://"), "steps": steps}


def _input(metadata: str, **time_travel: Any) -> list[Input]:
    return [Input(name="orders", iceberg=IcebergTable(metadata, **time_travel))]


FILTERS: list[tuple[str, Callable[[dict[str, Any]], bool]]] = [
    ("TRUE", lambda r: True),
    ("dt = DATE'2026-01-02'", lambda r: r["dt"] == dt.date(2026, 1, 2)),
    ("dt >= DATE'2026-01-04' AND id > 150", lambda r: r["dt"] >= dt.date(2026, 1, 4) and r["id"] > 150),
    ("label LIKE 'n1%'", lambda r: r["label"] is not None and r["label"].startswith("n1")),
    ("note IS NOT NULL", lambda r: r["note"] is not None),
    ("id IN (5, 15, 305, 1005)", lambda r: r["id"] in (5, 15, 305, 1005)),
    ("ts < TIMESTAMP'2026-01-01 01:00:00+00:00'", lambda r: r["ts"] < BASE + dt.timedelta(hours=1)),
    ("NOT (id < 100) AND label IS NULL", lambda r: r["id"] >= 100 and r["label"] is None),
    ("region = 'eu' AND id > 310", lambda r: r["region"] == "eu" and r["id"] > 310),
]


def test_every_filter_answers_as_duckdb_iceberg_scan_and_prunes(spark: Any, orders: dict[str, Any]) -> None:
    """The current snapshot (after rename, drop and add, and a second partition spec): each
    filter's answer is DuckDB's rows under the same predicate; a filter on the partition
    column opens fewer files than the snapshot holds."""
    [duck] = duckdb_rows(orders["path"], [None])
    columns = ["id", "dt", "label", "ts", "note", "region"]
    assert sorted(duck.column_names) == sorted(columns)
    everything = duck.to_pylist()
    opened = iceberg.open_table(IcebergTable(orders["metadata"]), "from.inputs[0].iceberg")
    total = iceberg.data_file_count(opened)
    inputs = _input(orders["metadata"])
    for where, keep in FILTERS:
        got, files = _answer(spark, f"SELECT {', '.join(columns)} FROM orders WHERE {where}", inputs)
        want = [r for r in everything if keep(r)]
        assert multiset(got, columns) == multiset(pa.Table.from_pylist(want), columns), where
        if where == "TRUE":
            # 200 appended; day 5's 40 replaced by 20; ids 0-9 deleted but 4 and 9 (day 5: gone); 60 + 40 more
            assert files == total and len(want) == 200 - 40 + 20 - 8 + 60 + 40
        if where == "dt = DATE'2026-01-02'":
            assert 0 < files < total / 3, (files, total)
        if where.startswith(("id IN", "region")):  # metrics (id bounds) and the second spec's partitions
            assert files < total, (files, total)


def test_time_travel_by_snapshot_id_and_instant(spark: Any, orders: dict[str, Any]) -> None:
    """Older snapshots read with their own schema (``name`` and ``amount`` still there), as DuckDB reads them."""
    steps = orders["steps"]
    snapshots = [steps["second"], steps["overwrite"], steps["delete"]]
    duck = duckdb_rows(orders["path"], list(snapshots))
    columns = ["id", "dt", "amount", "name", "ts"]
    for snapshot, want in zip(snapshots, duck, strict=True):
        got, _ = _answer(spark, "SELECT * FROM orders", _input(orders["metadata"], snapshot_id=snapshot))
        assert got.column_names == columns
        assert multiset(got, columns) == multiset(want, columns), snapshot
    opened = iceberg.open_table(IcebergTable(orders["metadata"]), "f")
    when = next(e.timestamp_ms for e in opened.metadata.snapshot_log if e.snapshot_id == steps["delete"])
    got, _ = _answer(spark, "SELECT * FROM orders", _input(orders["metadata"], as_of_ms=when))
    assert multiset(got, columns) == multiset(duck[2], columns)


def test_position_deletes_of_a_mirrored_upsert_table_apply_exactly(spark: Any, tmp_path: Path) -> None:
    from lading_jobs.table import format as fmt
    from lading_jobs.table import writer
    from lading_jobs.table.iceberg import mirror
    from lading_jobs.table.schema import TableSchema

    root = tmp_path / "t"
    uri = f"file://{root}/"
    schema = TableSchema.of([("k", "bigint"), ("v", "string")])

    def commit(keys: list[int], tag: str, create: bool = False) -> None:
        rows = pa.table({"k": pa.array(keys, pa.int64()), "v": [f"{tag}{k}" for k in keys]})
        written = writer.write_parts(uri, [rows], schema, write_id=fmt.new_write_id())
        writer.commit_parts(uri, written, create=writer.NewTable(schema, "upsert", ("k",)) if create else None)

    commit(list(range(20)), "a", create=True)
    commit([3, 5, 7, 30], "b")  # supersedes three rows of the first part: a position delete file
    mirror.flush(uri)
    metadata = f"file://{root}/metadata/v1.metadata.json"
    opened = iceberg.open_table(IcebergTable(metadata), "f")
    assert any(t.delete_files for t in iceberg.plan(opened))  # the read really applies position deletes
    [duck] = duckdb_rows(str(root), [None])
    got, _ = _answer(spark, "SELECT k, v FROM orders WHERE k < 10", _input(metadata))
    want = [r for r in duck.to_pylist() if r["k"] < 10]
    assert multiset(got, ["k", "v"]) == multiset(pa.Table.from_pylist(want), ["k", "v"])
    assert sorted(r["v"] for r in got.to_pylist() if r["k"] in (3, 5)) == ["b3", "b5"]


def test_a_mirrored_diff_table_with_rows_counting_more_than_once_reads_exactly(spark: Any, tmp_path: Path) -> None:
    """A lading diff table's mirror (rows counting 2 and 3 times as copy files, retractions as
    position deletes) read as an Iceberg input: every row as often as DuckDB's iceberg_scan and
    lading's own reader count it, whole and filtered."""
    from support import kv_tables as kv

    from lading_jobs.table import writer
    from lading_jobs.table.iceberg import mirror

    root = tmp_path / "t"
    uri = f"file://{root}/"
    kv.commit(uri, kv.batch([1, 2, 3], ["a", "b", "c"], [0, 0, 0], [2, 1, 3]),
              create=writer.NewTable(kv.SCHEMA, "diff"))  # a counts 2, c counts 3
    kv.commit(uri, kv.batch([3, 2, 4], ["c", "b", "d"], [1, 1, 1], [-1, 1, 1]))  # one copy of c retracted
    kv.commit(uri, kv.batch([2, 1], ["b", "a"], [2, 2], [1, -2]))  # b counts 3 over three rows; a gone
    mirror.flush(uri)
    metadata = f"file://{root}/metadata/v2.metadata.json"
    opened = iceberg.open_table(IcebergTable(metadata), "f")
    assert any(t.delete_files for t in iceberg.plan(opened))  # the read really applies position deletes
    lading = multiset(kv.rows_at(uri, 2), ["k", "v"])
    assert lading == {(2, "b"): 3, (3, "c"): 2, (4, "d"): 1}
    [duck] = duckdb_rows(str(root), [None])
    assert multiset(duck, ["k", "v"]) == lading
    got, _ = _answer(spark, "SELECT k, v FROM orders", _input(metadata))
    assert multiset(got, ["k", "v"]) == lading
    got, _ = _answer(spark, "SELECT k, v FROM orders WHERE k >= 3", _input(metadata))
    assert multiset(got, ["k", "v"]) == {(3, "c"): 2, (4, "d"): 1}


def test_bad_inputs_fail_naming_the_input(spark: Any, orders: dict[str, Any], tmp_path: Path) -> None:
    missing = orders["metadata"].rsplit("/", 1)[0] + "/v99.metadata.json"
    with pytest.raises(iceberg.IcebergInputError, match=r"from.inputs\[0\].iceberg.metadata: .* does not exist"):
        query_frame(spark, "SELECT * FROM orders", _input(missing))
    with pytest.raises(iceberg.IcebergInputError, match=r"from.inputs\[0\].iceberg.snapshotId: snapshot 42 is not"):
        query_frame(spark, "SELECT * FROM orders", _input(orders["metadata"], snapshot_id=42))
    with pytest.raises(iceberg.IcebergInputError, match=r"from.inputs\[0\].iceberg.asOf: .* no snapshot current"):
        query_frame(spark, "SELECT * FROM orders", _input(orders["metadata"], as_of_ms=1000))
    catalog = FileCatalog(f"file://{tmp_path}/wh")
    odd = catalog.create_table("db.odd", Schema(NestedField(1, "id", LongType()), NestedField(2, "at", TimeType())))
    with pytest.raises(iceberg.IcebergInputError, match=r"column 'at' is of Iceberg type time, which lading has no"):
        query_frame(spark, "SELECT * FROM odd", [Input(name="odd", iceberg=IcebergTable(odd.metadata_location))])


def test_files_outside_the_table_directory_are_refused(orders: dict[str, Any], tmp_path: Path) -> None:
    io = iceberg.LadingFileIO("file:///data/t/", iceberg.st.S3Settings(), "from.inputs[1].iceberg")
    assert io.confine("/data/t/data/a.parquet") == "file:///data/t/data/a.parquet"
    for outside in ("file:///data/t/../secret/a.parquet", "file:///data/other/a.parquet", "s3://bucket/t/a"):
        with pytest.raises(iceberg.IcebergInputError, match=r"from.inputs\[1\].iceberg: .* outside the table's"):
            io.confine(outside)


def _spec(iceberg_field: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"from": {"query": "SELECT * FROM o", "inputs": [{"name": "o", "iceberg": iceberg_field, **extra}]},
            "to": {"files": "s3://bucket/out/"}}


def test_the_spec_names_each_bad_field() -> None:
    meta = "s3://bucket/wh/orders/metadata/v3.metadata.json"
    parsed = parse_copyjob(_spec({"metadata": meta, "asOf": "2026-03-01T01:00:00+01:00"}))
    assert parsed.source.inputs[0].iceberg == IcebergTable(meta, None, 1772323200000)
    assert parse_copyjob(_spec({"metadata": meta, "snapshotId": 7})).source.inputs[0].iceberg == IcebergTable(meta, 7)
    by_catalog = parse_copyjob(_spec({"catalog": "lake", "table": "db.orders", "snapshotId": 7})).source.inputs[0]
    assert by_catalog.iceberg == IcebergTable(snapshot_id=7, catalog="lake", table="db.orders")
    cases = [
        (_spec({"catalog": "lake", "table": "orders"}), r"iceberg.table: expected a table identifier namespace.name"),
        (_spec({"catalog": "Lake!", "table": "db.orders"}), r"iceberg.catalog: expected the name of a catalog"),
        (_spec({"table": "db.orders"}), r"iceberg.catalog: expected the name of a catalog"),
        (_spec({"catalog": "lake", "table": "db.orders", "metadata": meta}), r"iceberg.metadata: give metadata"),
        (_spec({}), r"iceberg.metadata: missing; .* or catalog and table"),
        (_spec({"metadata": "s3://bucket/wh/orders/"}), r"iceberg.metadata: expected an Iceberg metadata file"),
        (_spec({"metadata": meta, "snapshotId": "7"}), r"iceberg.snapshotId: expected an Iceberg snapshot id"),
        (_spec({"metadata": meta, "snapshotId": 7, "asOf": "2026-03-01T00:00:00Z"}), r"iceberg.asOf: give"),
        (_spec({"metadata": meta, "asOf": "2026-03-01"}), r"iceberg.asOf: expected an instant with its zone"),
        (_spec({"metadata": meta}, asOf=3), r"inputs\[0\].asOf: an iceberg input reads its table alone"),
        (_spec({"metadata": meta, "ref": "main"}), r"iceberg.ref: unknown field"),
    ]
    for spec, message in cases:
        with pytest.raises(SpecError, match=message):
            parse_copyjob(spec)


def test_a_copyjob_unloads_an_iceberg_input(spark: Any, orders: dict[str, Any], tmp_path: Path) -> None:
    """The whole job (``run_job``): a self-join of the input (two scans of one relation, read
    without pruning so each gets its own rows) unloaded to Parquet, equal to DuckDB's rows."""
    import pyarrow.parquet as pq
    from support.unload import job_doc

    from lading_jobs.main import run_job

    query = ("SELECT a.id, b.label FROM orders a JOIN orders b ON a.id = b.id + 1 "
             "WHERE a.dt = DATE'2026-01-02' AND b.dt = DATE'2026-01-01'")
    dest = f"file://{tmp_path}/out/"
    doc = job_doc({"from": {"query": query, "inputs": [{"name": "orders", "iceberg": {"metadata": orders["metadata"]}}]},
                   "to": {"files": dest, "format": "parquet"}})
    result = run_job(spark, doc)
    [duck] = duckdb_rows(orders["path"], [None])
    rows = duck.to_pylist()
    by_id = {r["id"]: r for r in rows}
    want = [(r["id"], by_id[r["id"] - 1]["label"]) for r in rows
            if r["dt"] == dt.date(2026, 1, 2) and r["id"] - 1 in by_id and by_id[r["id"] - 1]["dt"] == dt.date(2026, 1, 1)]
    got = pa.concat_tables([pq.read_table(p) for p in sorted((tmp_path / "out").rglob("*.parquet"))])
    assert result["rows"] == len(want) > 0
    assert sorted(zip(got.column("id").to_pylist(), got.column("label").to_pylist(), strict=True)) == sorted(want)


def test_filters_prune_only_with_literals_of_the_columns_own_kind() -> None:
    """A literal that would need rounding or a guess (a float for a decimal, a decimal with more
    places than the column, an int for a timestamp, NaN) prunes nothing; the rest bind."""
    from pyiceberg.types import BooleanType, DoubleType

    from lading_jobs.table.filters import expr as ex

    schema = Schema(NestedField(1, "n", LongType()), NestedField(2, "d", DecimalType(5, 2)),
                    NestedField(3, "t", TimestamptzType()), NestedField(4, "day", DateType()),
                    NestedField(5, "x", DoubleType()), NestedField(6, "b", BooleanType()))
    binds = [ex.Pred("eq", "n", 3), ex.Pred("ge", "d", decimal.Decimal("1.2")), ex.Pred("lt", "T", BASE),
             ex.Pred("in", "day", (dt.date(2026, 1, 1), dt.date(2026, 1, 3))), ex.Pred("gt", "x", 2),
             ex.Pred("eq", "b", True), ex.Not(ex.Pred("isnull", "n"))]
    for e in binds:
        converted = iceberg.to_iceberg(e, schema)
        assert converted is not None and iceberg._bindable(converted, schema), e
    refused = [ex.Pred("eq", "n", 3.5), ex.Pred("eq", "n", True), ex.Pred("ge", "d", 1.25),
               ex.Pred("ge", "d", decimal.Decimal("1.255")), ex.Pred("lt", "t", 5), ex.Pred("eq", "x", float("nan")),
               ex.Pred("eq", "day", BASE), ex.Pred("eq", "missing", 1)]
    for e in refused:
        assert iceberg.to_iceberg(e, schema) is None, e
