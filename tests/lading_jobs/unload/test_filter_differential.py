"""A differential test of filters: random WHERE clauses, lading's two paths against Spark.

A fixed seed draws a few hundred conditions (comparisons, IN, IS [NOT] NULL, <=>, under AND,
OR and NOT) over NULLs, NaN, -0.0, infinities, long decimals, strings, timestamps with and
without offsets and out-of-range literals. The same rows are a lading table (three parts, so
part and row-group skipping take part) and Parquet files. Spark's own Parquet reader with
every condition as a projection is the oracle; in each session time zone:

* the Arrow-only path (``sparkplan`` → ``sqlshape`` → ``predicate``, over the files' rows and
  over the table read with ``arrowpath.table_filter`` skipping) agrees on every condition it
  accepts;
* the Spark SQL path over the table input (the ``lading`` source's pushed filters) and over the
  files agrees on a sample, each table condition on a relation of its own (views ``t0``,
  ``t1``…), all in one query.

Each zone draws its own conditions (seeded), 240 in all; the run takes tens of seconds.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs import sqlshape
from lading_jobs import storage as st
from lading_jobs.sources import files as sources_files
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_jobs.unload import arrowpath, predicate, sparkplan
from lading_spec.copyjob import Input
from lading_spec.formats import FileSet, ParquetOptions

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEED, CONDITIONS, SPARK_SAMPLE = 33, 80, 10  # per zone: 240 conditions in all
ZONES = ["UTC", "America/Los_Angeles", "Asia/Kathmandu"]
UTC = dt.UTC
COLUMNS = [("id", "bigint"), ("i", "int"), ("x", "double"), ("dec", "decimal(38,10)"), ("s", "string"),
           ("ts", "timestamp"), ("d", "date"), ("bo", "boolean")]
VALUES: dict[str, list[Any]] = {
    "i": [None, -5, -1, 0, 3, 5],
    "x": [float("nan"), -0.0, 0.0, 1.5, -1.5, float("inf"), None, 2.0, 100.0],
    "dec": [None, decimal.Decimal("-0.0100000000"), decimal.Decimal(0), decimal.Decimal("1.5"),
            decimal.Decimal("9999999999999999999999999999.9999999999")],
    "s": ["a", "b", "", None, "é", "ab", "B"],
    "ts": [dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2024, 1, 1, 10, tzinfo=UTC), None,
           dt.datetime(2023, 12, 31, 19, tzinfo=UTC), dt.datetime(1, 1, 1, tzinfo=UTC),
           dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)],
    "d": [dt.date(2024, 2, 29), dt.date(2024, 1, 1), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)],
    "bo": [True, False, None],
}
LITERALS: dict[str, list[str]] = {
    "i": ["-6", "-1", "0", "3", "5", "2.5", "NULL"],
    "x": ["0", "-0.0", "1.5", "'NaN'", "'Infinity'", "-1.5", "100", "NULL"],
    "dec": ["0", "1.5", "-0.01", "9999999999999999999999999999.9999999999", "1.505",
            "9999999999999999999999999999.9999999998"],
    "s": ["'a'", "'b'", "''", "'é'", "'ab'", "'B'", "NULL"],
    "ts": ["TIMESTAMP'2024-01-01 00:00:00'", "'2024-01-01 10:00:00'", "TIMESTAMP'2024-01-01 00:00:00+05:00'",
           "TIMESTAMP'0001-01-01 00:00:00+01:00'", "DATE'2000-01-01'", "TIMESTAMP'9999-12-31 23:30:00-01:00'"],
    "d": ["DATE'2024-01-01'", "'2024-02-29'", "DATE'0001-01-01'", "DATE'9999-12-31'"],
    "bo": ["true", "false"],
}
OPS = ["=", "<>", "<", "<=", ">", ">=", "<=>"]
ROWS = 120


def _rows() -> pa.Table:
    rng = random.Random(SEED)
    data: dict[str, list[Any]] = {"id": list(range(ROWS))}
    for name, values in VALUES.items():
        data[name] = [rng.choice(values) for _ in range(ROWS)]
    schema = pa.schema([("id", pa.int64()), ("i", pa.int32()), ("x", pa.float64()), ("dec", pa.decimal128(38, 10)),
                        ("s", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("d", pa.date32()),
                        ("bo", pa.bool_())])
    return pa.Table.from_pydict(data, schema=schema)


def _atom(rng: random.Random) -> str:
    col = rng.choice(list(LITERALS))
    kind = rng.random()
    if kind < 0.1:
        return f"{col} IS {'NOT ' if rng.random() < 0.5 else ''}NULL"
    if kind < 0.3:
        items = ", ".join(rng.sample(LITERALS[col], min(len(LITERALS[col]), rng.randint(1, 3))))
        return f"{col} {'NOT ' if rng.random() < 0.3 else ''}IN ({items})"
    return f"{col} {rng.choice(OPS)} {rng.choice(LITERALS[col])}"


def _condition(rng: random.Random, depth: int = 0) -> str:
    kind = rng.random()
    if depth >= 2 or kind < 0.5:
        return _atom(rng)
    if kind < 0.6:
        return f"NOT ({_condition(rng, depth + 1)})"
    joiner = " AND " if kind < 0.8 else " OR "
    return f"({_condition(rng, depth + 1)}{joiner}{_condition(rng, depth + 1)})"




def _conditions(zone_index: int) -> list[str]:
    rng = random.Random(SEED * 100 + zone_index)
    return [_condition(rng) for _ in range(CONDITIONS)]


@pytest.fixture(scope="module")
def inputs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    rows = _rows()
    root = tmp_path_factory.mktemp("differential")
    files = root / "files"
    files.mkdir()
    for k in range(3):
        pq.write_table(rows.slice(k * 40, 40), files / f"part-{k}.parquet")
    uri = f"file://{root}/table/"
    log = TableLog.create(uri, TableSchema.of(COLUMNS))
    stamped = rows.append_column(fmt.TIME_COLUMN, pa.array([1] * ROWS, pa.int64()))
    written = writer.write_parts(uri, [stamped.slice(k * 40, 40) for k in range(3)], log.snapshot().schema,
                                 write_id=fmt.new_write_id(), one_part_per_table=True, storage=st.open_storage(uri))
    snapshot = writer.commit_parts(uri, written, log=log)
    fileset = FileSet(uri=f"file://{files}/", format="parquet", options=ParquetOptions())
    sources_files.register_inputs(spark, [Input(name="f", files=fileset)])
    spark.read.parquet(str(files)).createOrReplaceTempView("oracle")
    listed = sources_files.list_files(fileset)
    schema = sources_files.infer_schema(fileset, listed)
    file_rows = pa.Table.from_batches([b for split in sources_files.plan_splits(fileset, listed, 1 << 30)
                                       for b in sources_files.read_split(split, fileset, schema)])
    return {"uri": uri, "snapshot": snapshot, "file_rows": file_rows}


def _oracle(spark: Any, conditions: list[str]) -> list[list[int]]:
    selected = ", ".join(f"coalesce({c}, false) AS c{k}" for k, c in enumerate(conditions))
    rows = spark.sql(f"SELECT id, {selected} FROM oracle").collect()
    return [sorted(r["id"] for r in rows if r[f"c{k}"]) for k in range(len(conditions))]


@pytest.fixture
def zone(spark: Any) -> Any:
    key = "spark.sql.session.timeZone"
    old = spark.conf.get(key)
    yield lambda z: spark.conf.set(key, z)
    spark.conf.set(key, old)


@pytest.mark.parametrize("session_zone", ZONES)
def test_random_filters_agree_with_spark(spark: Any, inputs: dict[str, Any], zone: Any, session_zone: str) -> None:
    zone(session_zone)
    conditions = _conditions(ZONES.index(session_zone))
    truth = _oracle(spark, conditions)
    snapshot = inputs["snapshot"]
    storage = st.open_storage(inputs["uri"])
    mismatches, accepted = [], 0
    for k, condition in enumerate(conditions):
        plan = sparkplan.describe(spark.sql(f"SELECT * FROM f WHERE {condition}"))
        assert plan is not None
        shape = sqlshape.recognise(plan, {"f"})
        if isinstance(shape, sqlshape.Refusal):
            continue
        accepted += 1
        assert shape.condition is not None
        got_files = sorted(predicate.apply(shape.condition, inputs["file_rows"]).column("id").to_pylist())
        skip = arrowpath.table_filter(shape.condition, snapshot.schema)
        read = pa.concat_tables([reader.read_parts(storage, snapshot, t.parts, skip, bucket=t.bucket,
                                                   buckets=t.buckets) for t in reader.plan_tasks(snapshot, skip)])
        got_table = sorted(predicate.apply(shape.condition, read).column("id").to_pylist())
        if got_files != truth[k] or got_table != truth[k]:
            mismatches.append(("arrow", condition, got_files, got_table, truth[k]))
    assert accepted >= CONDITIONS // 2
    # the Spark SQL path: the table input (pushed filters, one relation per condition, registered
    # afresh: this Spark keeps a relation's last planned read, and a later scan pushing nothing
    # would read with it) and the files
    for k in range(SPARK_SAMPLE):
        reader.register_table_view(spark, f"t{k}", inputs["uri"])
    union = " UNION ALL ".join(f"SELECT {k} AS q, '{src}' AS src, id FROM {src} WHERE {c}"
                               for k, c in enumerate(conditions[:SPARK_SAMPLE]) for src in (f"t{k}", "f"))
    by_query: dict[tuple[int, str], list[int]] = {}
    for r in spark.sql(union).collect():
        by_query.setdefault((r["q"], r["src"][0]), []).append(r["id"])
    for k in range(SPARK_SAMPLE):
        for src in "tf":
            if sorted(by_query.get((k, src), [])) != truth[k]:
                mismatches.append(("spark", src, conditions[k], sorted(by_query.get((k, src), [])), truth[k]))
    assert mismatches == []
