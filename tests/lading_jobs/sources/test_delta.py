"""Delta tables as query inputs (``from.inputs[].delta``), checked against DuckDB's own
``delta_scan`` of the same version: a partitioned table deltalake wrote (appends, an overwrite
by predicate, a delete, a checkpoint, an append after it) with a deletion vector written into
its log by hand (delta-rs rewrites files instead), and tables with column mapping in ``name``
and ``id`` mode. A filtered read's Spark partitions are the data files it opens (one per task),
counted against the version's total to show pruning. Bad inputs fail naming the input before
anything is read or written."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.delta_writer import delete_rows, live_adds, require_reader_feature
from support.iceberg_readers import duckdb_delta_rows, multiset
from support.iceberg_readers import query_answer as _answer

from lading_jobs.sources import delta
from lading_jobs.sources.files import query_frame
from lading_spec.copyjob import DeltaInput, Input, parse_copyjob
from lading_spec.errors import SpecError

pytestmark = [pytest.mark.spark]
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
COLUMNS = ["id", "dt", "amount", "name", "ts", "score"]


def _rows(lo: int, hi: int, day: int | None = None) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "dt": pa.array([dt.date(2026, 1, 1 + (day if day is not None else i % 5)) for i in ids], pa.date32()),
        "amount": pa.array([decimal.Decimal(i) / 100 for i in ids], pa.decimal128(12, 2)),
        "name": [None if i % 7 == 0 else f"n{i}" for i in ids],
        "ts": pa.array([BASE + dt.timedelta(minutes=i, microseconds=i) for i in ids], pa.timestamp("us", tz="UTC")),
        "score": pa.array([(i % 10) / 10 for i in ids], pa.float64()),
    })


@pytest.fixture(scope="module")
def lake(tmp_path_factory: Any) -> dict[str, Any]:
    """The tables every test reads, written once: ``orders`` (versions by step) and two
    column-mapped tables."""
    from deltalake import DeltaTable, write_deltalake

    root = tmp_path_factory.mktemp("delta")
    orders = root / "orders"
    steps: dict[str, int] = {}

    def step(name: str) -> None:
        steps[name] = DeltaTable(str(orders)).version()

    write_deltalake(str(orders), _rows(0, 100), partition_by=["dt"],
                    configuration={"delta.enableDeletionVectors": "true"})
    step("first")
    write_deltalake(str(orders), _rows(100, 200), partition_by=["dt"], mode="append")
    step("second")
    write_deltalake(str(orders), _rows(1000, 1020, day=4), partition_by=["dt"], mode="overwrite",
                    predicate="dt = '2026-01-05'")
    step("overwrite")
    DeltaTable(str(orders)).delete("id < 10")
    step("delete")
    DeltaTable(str(orders)).create_checkpoint()
    write_deltalake(str(orders), _rows(200, 260), partition_by=["dt"], mode="append")
    step("after_checkpoint")
    day2 = next(a for a in live_adds(orders) if a["partitionValues"]["dt"] == "2026-01-02")
    steps["deletion_vector"] = delete_rows(orders, day2, [0, 2, 5])
    assert (orders / "_delta_log" / f"{steps['delete']:020d}.checkpoint.parquet").exists()
    # Delta dates a commit by its file's modification time, not by commitInfo's clock (read before
    # the file is written): here an hour ago and a minute apart, so an instant picks one version
    first = int(time.time()) - 3600
    for commit in (orders / "_delta_log").glob("*.json"):
        when = first + 60 * int(commit.stem)
        os.utime(commit, (when, when))

    mapped = {}
    for mode in ("name", "id"):
        path = root / f"mapped_{mode}"
        for i, (lo, hi) in enumerate(((0, 30), (30, 50))):
            ids = list(range(lo, hi))
            data = pa.table({"id": pa.array(ids, pa.int64()), "region": ["eu" if i % 3 else "us" for i in ids],
                             "info": pa.array([{"a": i * 10, "b": f"b{i}"} if i % 4 else None for i in ids],
                                              pa.struct([("a", pa.int64()), ("b", pa.string())])),
                             "tag": [f"t{i % 6}" for i in ids]})
            write_deltalake(str(path), data, partition_by=["region"], mode="append" if i else "error",
                            configuration=None if i else {"delta.columnMapping.mode": mode})
        mapped[mode] = path
    return {"root": root, "orders": orders, "uri": f"file://{orders}/", "steps": steps, "mapped": mapped}


def _input(uri: str, **time_travel: Any) -> list[Input]:
    return [Input(name="orders", delta=DeltaInput(uri, **time_travel))]


FILTERS: list[tuple[str, Callable[[dict[str, Any]], bool]]] = [
    ("TRUE", lambda r: True),
    ("dt = DATE'2026-01-02'", lambda r: r["dt"] == dt.date(2026, 1, 2)),
    ("dt >= DATE'2026-01-04' AND id > 150", lambda r: r["dt"] >= dt.date(2026, 1, 4) and r["id"] > 150),
    ("name LIKE 'n1%'", lambda r: r["name"] is not None and r["name"].startswith("n1")),
    ("name IS NULL", lambda r: r["name"] is None),
    ("id IN (5, 15, 205, 1005)", lambda r: r["id"] in (5, 15, 205, 1005)),
    ("ts < TIMESTAMP'2026-01-01 01:00:00.000060+00:00'", lambda r: r["ts"] < BASE + dt.timedelta(hours=1, microseconds=60)),
    ("amount > 2.05", lambda r: r["amount"] > decimal.Decimal("2.05")),
    ("score < 0.25 AND id < 120", lambda r: r["score"] < 0.25 and r["id"] < 120),
    ("NOT (id < 100) AND name IS NULL", lambda r: r["id"] >= 100 and r["name"] is None),
]


def test_every_filter_answers_as_duckdb_delta_scan_and_prunes(spark: Any, lake: dict[str, Any]) -> None:
    """The newest version (read through a checkpoint and the commits after it, with a deletion
    vector): each filter's answer is DuckDB's rows under the same predicate; a filter on the
    partition column, or on ids only some files hold, opens fewer files than the version has."""
    [duck] = duckdb_delta_rows(str(lake["orders"]), [None])
    everything = duck.to_pylist()
    opened = delta.open_table(DeltaInput(lake["uri"]), "from.inputs[0].delta")
    total = len(opened.files)
    assert opened.version == lake["steps"]["deletion_vector"]
    assert sum(len(f.deleted) for f in opened.files) == 3  # the read really applies a deletion vector
    inputs = _input(lake["uri"])
    for where, keep in FILTERS:
        got, files = _answer(spark, f"SELECT {', '.join(COLUMNS)} FROM orders WHERE {where}", inputs)
        want = [r for r in everything if keep(r)]
        assert multiset(got, COLUMNS) == multiset(pa.Table.from_pylist(want), COLUMNS), where
        if where == "TRUE":
            # 200 appended; day 5's 40 replaced by 20; ids 0-9 deleted but 4 and 9 (day 5: gone); 60 more; 3 by DV
            assert files == total and len(want) == 200 - 40 + 20 - 8 + 60 - 3
        if where == "dt = DATE'2026-01-02'":
            assert 0 < files <= total / 3, (files, total)
        if where.startswith(("id IN", "ts <", "amount")):  # per-file min/max of id, ts (ms, widened), amount
            assert files < total, (where, files, total)


def test_older_versions_by_number_and_timestamp(spark: Any, lake: dict[str, Any]) -> None:
    """Versions before the overwrite, and before the checkpoint, read as DuckDB reads them; a
    timestamp reads the newest version committed at or before it, a commit dated by its file's
    modification time as Delta Lake dates it (commitInfo's clock, an hour later here, would
    refuse every instant below)."""
    steps = lake["steps"]
    versions = [steps["second"], steps["overwrite"], steps["delete"]]
    duck = duckdb_delta_rows(str(lake["orders"]), list(versions))
    for version, want in zip(versions, duck, strict=True):
        got, _ = _answer(spark, "SELECT * FROM orders", _input(lake["uri"], version=version))
        assert got.column_names == COLUMNS
        assert multiset(got, COLUMNS) == multiset(want, COLUMNS), version
    committed = int((lake["orders"] / "_delta_log" / f"{steps['delete']:020d}.json").stat().st_mtime * 1000)
    for instant, want in ((committed, duck[2]), (committed + 59_000, duck[2]), (committed - 1, duck[1])):
        got, _ = _answer(spark, "SELECT * FROM orders", _input(lake["uri"], timestamp_ms=instant))
        assert multiset(got, COLUMNS) == multiset(want, COLUMNS), instant


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_reads_physical_columns_by_logical_name(spark: Any, lake: dict[str, Any], mode: str) -> None:
    """Files name their columns ``col-<uuid>`` (and carry field ids); lading reads them by the
    mapping, nested struct fields too. DuckDB's delta_scan reads the partition column of a
    column-mapped table as NULL (duckdb/duckdb-delta#343), so that column is checked against
    what was written; the others against DuckDB."""
    import pyarrow.parquet as pq

    path = lake["mapped"][mode]
    assert all(n.startswith("col-") for n in pq.read_schema(next(path.rglob("*.parquet"))).names)
    [duck] = duckdb_delta_rows(str(path), [None])
    inputs = [Input(name="m", delta=DeltaInput(f"file://{path}/"))]
    got, files = _answer(spark, "SELECT * FROM m", inputs)
    assert got.column_names == ["id", "region", "info", "tag"]
    def by_id(t: pa.Table) -> list[dict[str, Any]]:
        return sorted(t.select(["id", "info", "tag"]).to_pylist(), key=lambda r: r["id"])

    assert by_id(got) == by_id(duck) and len(by_id(got)) == 50
    assert sorted(got.to_pylist(), key=lambda r: r["id"])[:4] == [
        {"id": 0, "region": "us", "info": None, "tag": "t0"}, {"id": 1, "region": "eu", "info": {"a": 10, "b": "b1"},
                                                               "tag": "t1"},
        {"id": 2, "region": "eu", "info": {"a": 20, "b": "b2"}, "tag": "t2"},
        {"id": 3, "region": "us", "info": {"a": 30, "b": "b3"}, "tag": "t3"}]
    eu, eu_files = _answer(spark, "SELECT id FROM m WHERE region = 'eu' AND info.a > 100", inputs)
    assert sorted(eu.column("id").to_pylist()) == [i for i in range(50) if i % 3 and i % 4 and i * 10 > 100]
    assert eu_files < files


def test_bad_inputs_fail_naming_the_input_before_anything_is_written(spark: Any, lake: dict[str, Any],
                                                                     tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake
    from support.unload import job_doc

    from lading_jobs.main import run_job

    field = r"from.inputs\[0\].delta"
    dest = tmp_path / "out"
    doc = job_doc({"from": {"query": "SELECT * FROM orders",
                            "inputs": [{"name": "orders", "delta": {"table": f"file://{lake['root']}/none/"}}]},
                   "to": {"files": f"file://{dest}/", "format": "parquet"}})
    with pytest.raises(delta.DeltaInputError, match=rf"{field}.table: .*/none/ is not a Delta table"):
        run_job(spark, doc)
    assert not dest.exists()
    with pytest.raises(delta.DeltaInputError, match=rf"{field}.version: version 99 of .* newest version is "
                                                    rf"{lake['steps']['deletion_vector']}"):
        query_frame(spark, "SELECT * FROM orders", _input(lake["uri"], version=99))
    with pytest.raises(delta.DeltaInputError, match=rf"{field}.timestamp: .* has no version committed at or before"):
        query_frame(spark, "SELECT * FROM orders", _input(lake["uri"], timestamp_ms=1000))

    vacuumed = tmp_path / "vacuumed"
    write_deltalake(str(vacuumed), _rows(0, 10))
    write_deltalake(str(vacuumed), _rows(10, 20), mode="overwrite")
    DeltaTable(str(vacuumed)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(delta.DeltaInputError, match=rf"{field}: version 0 of .* names 1 data file\(s\) that no longer "
                                                    "exist.*VACUUM"):
        query_frame(spark, "SELECT * FROM orders", _input(f"file://{vacuumed}/", version=0))

    for feature, message in (("typeWidening", "needs the Delta reader feature typeWidening, which lading does not"),
                             ("someFutureFeature", "needs a Delta reader feature lading cannot read .*someFutureFeature")):
        table = tmp_path / feature
        shutil.copytree(vacuumed, table)
        require_reader_feature(table, feature)
        with pytest.raises(delta.DeltaInputError, match=rf"{field}: .*{message}"):
            query_frame(spark, "SELECT * FROM orders", _input(f"file://{table}/"))
    assert query_frame(spark, "SELECT count(*) FROM orders", _input(f"file://{tmp_path}/typeWidening/", version=1)
                       ).collect()[0][0] == 10  # the version before the feature still reads


def test_a_copyjob_unloads_a_delta_input_from_s3(spark: Any, lake: dict[str, Any], s3_client: Any, bucket: str,
                                                 tmp_path: Path) -> None:
    """The whole job (``run_job``) over the table copied to S3 (log, checkpoint, deletion vector
    file): a self-join of the input (two scans of one relation, read without pruning so each
    gets its own rows) unloaded to Parquet, equal to DuckDB's rows of the same version."""
    import pyarrow.parquet as pq
    from support.unload import job_doc

    from lading_jobs.main import run_job

    for path in lake["orders"].rglob("*"):
        if path.is_file():
            s3_client.upload_file(str(path), bucket, f"lake/orders/{path.relative_to(lake['orders'])}")
    query = ("SELECT a.id, b.name FROM orders a JOIN orders b ON a.id = b.id + 1 "
             "WHERE a.dt = DATE'2026-01-02' AND b.dt = DATE'2026-01-01'")
    dest = f"file://{tmp_path}/out/"
    doc = job_doc({"from": {"query": query, "inputs": [{"name": "orders", "delta": {"table": f"s3://{bucket}/lake/orders"}}]},
                   "to": {"files": dest, "format": "parquet"}})
    result = run_job(spark, doc)
    [duck] = duckdb_delta_rows(str(lake["orders"]), [None])
    rows = duck.to_pylist()
    by_id = {r["id"]: r for r in rows}
    want = [(r["id"], by_id[r["id"] - 1]["name"]) for r in rows
            if r["dt"] == dt.date(2026, 1, 2) and r["id"] - 1 in by_id and by_id[r["id"] - 1]["dt"] == dt.date(2026, 1, 1)]
    got = pa.concat_tables([pq.read_table(p) for p in sorted((tmp_path / "out").rglob("*.parquet"))])
    assert result["rows"] == len(want) > 0
    assert sorted(zip(got.column("id").to_pylist(), got.column("name").to_pylist(), strict=True)) == sorted(want)
    # a query the Arrow-only path would take over files is left to the Spark SQL path, saying why
    simple = job_doc({"from": {"query": "SELECT id, name FROM orders WHERE dt = DATE'2026-01-02'",
                               "inputs": [{"name": "orders", "delta": {"table": f"s3://{bucket}/lake/orders/"}}]},
                      "to": {"files": f"file://{tmp_path}/simple/", "format": "parquet"}})
    assert run_job(spark, simple)["rows"] == sum(r["dt"] == dt.date(2026, 1, 2) for r in rows)
    marker = json.loads((tmp_path / "simple" / "_lading_manifest.json").read_text())["path"]
    assert marker == {"name": "spark", "reason": "from.query: input 'orders' is a Delta table (read by Spark tasks)"}


def _spec(delta_field: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"from": {"query": "SELECT * FROM o", "inputs": [{"name": "o", "delta": delta_field, **extra}]},
            "to": {"files": "s3://bucket/out/"}}


def test_the_spec_names_each_bad_field() -> None:
    parsed = parse_copyjob(_spec({"table": "s3://bucket/lake/orders", "timestamp": "2026-03-01T01:00:00+01:00"}))
    assert parsed.source.inputs[0].delta == DeltaInput("s3://bucket/lake/orders/", None, 1772323200000)
    assert parse_copyjob(_spec({"table": "s3://bucket/o/", "version": 0})).source.inputs[0].delta == \
        DeltaInput("s3://bucket/o/", 0)
    cases = [
        (_spec({}), r"delta.table: missing"),
        (_spec({"table": "hdfs://x/o/"}), r"delta.table: "),
        (_spec({"table": "s3://bucket/o/_delta_log/"}), r"delta.table: give the table's directory, not its log"),
        (_spec({"table": "s3://bucket/o/", "version": -1}), r"delta.version: expected a Delta table version"),
        (_spec({"table": "s3://bucket/o/", "version": "3"}), r"delta.version: expected a Delta table version"),
        (_spec({"table": "s3://bucket/o/", "version": 3, "timestamp": "2026-03-01T00:00:00Z"}), r"delta.timestamp: give"),
        (_spec({"table": "s3://bucket/o/", "timestamp": "2026-03-01"}), r"delta.timestamp: expected an instant"),
        (_spec({"table": "s3://bucket/o/"}, asOf=3), r"inputs\[0\].asOf: a delta input reads its table alone"),
        (_spec({"table": "s3://bucket/o/"}, table="s3://bucket/t/"), r"inputs\[0\].delta: an input reads exactly one"),
        (_spec({"table": "s3://bucket/o/", "snapshotId": 1}), r"delta.snapshotId: unknown field"),
    ]
    for spec, message in cases:
        with pytest.raises(SpecError, match=message):
            parse_copyjob(spec)


def test_bounds_are_conservative() -> None:
    """Millisecond timestamp statistics widen by a millisecond; a float max, a string max of 32
    characters or more, and a wide decimal's bounds bound nothing."""
    from pyspark.sql import types as T

    when = dt.datetime(2026, 1, 1, 0, 0, 0, 123000, tzinfo=dt.UTC)
    action = {"null_count": {"c": 0}, "min": {"c": when}, "max": {"c": when}}
    stats = delta._column_stats(action, "c", T.TimestampType())
    micros = delta.to_stats_domain(when)
    assert (stats.min, stats.max) == (micros - 1000, micros + 1000)
    assert delta._column_stats({"min": {"c": 1.0}, "max": {"c": 2.0}}, "c", T.DoubleType()).max is None
    long_max = delta._column_stats({"min": {"c": "a" * 40}, "max": {"c": "b" * 32}}, "c", T.StringType())
    assert (long_max.min, long_max.max) == ("a" * 40, None)
    wide = delta._column_stats({"min": {"c": decimal.Decimal(1)}, "max": {"c": decimal.Decimal(2)}}, "c",
                               T.DecimalType(20, 2))
    assert (wide.min, wide.max) == (None, None)
    narrow = delta._column_stats({"min": {"c": decimal.Decimal("1.50")}, "max": {"c": decimal.Decimal(2)}}, "c",
                                 T.DecimalType(12, 2))
    assert (narrow.min, narrow.max) == ("1.50", "2")


def test_a_local_table_under_policy_prefixes_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """In a pod whose policy allows file:// prefixes, lading opens local files without following
    links; deltalake opens the log itself, so a file:// Delta table is refused there, saying so."""
    from lading_spec import localfiles

    monkeypatch.setenv(localfiles.PREFIXES_ENV, json.dumps([f"file://{tmp_path}/"]))
    with pytest.raises(delta.DeltaInputError, match=r"from.inputs\[2\].delta.table: a file:// Delta table is read "
                                                    r"only where file:// is unrestricted"):
        delta.open_table(DeltaInput(f"file://{tmp_path}/t/"), "from.inputs[2].delta")
