"""``scope.filter`` bound for statistics: a part holding a row Spark's own filter keeps is never
ruled out (a cast that rounds is no filter; a float literal is the float Spark compares)."""

from __future__ import annotations

from typing import Any

import pytest

from lading_jobs.compact.scope import bind_filter, scope_filters
from lading_jobs.table.filters import interp
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats.part import ColumnStats, PartStats

pytestmark = pytest.mark.spark
SCHEMA = TableSchema.of([("d", "double"), ("b", "bigint"), ("i", "int"), ("f", "float")])


@pytest.mark.parametrize(("text", "column", "stored", "literal"), [
    ("CAST(d AS INT) = 5", "d", 5.5, "CAST(5.5 AS DOUBLE)"),
    ("CAST(d AS INT) <= 5", "d", 5.5, "CAST(5.5 AS DOUBLE)"),
    ("CAST(d AS INT) >= 0", "d", -0.5, "CAST(-0.5 AS DOUBLE)"),
    ("CAST(d AS BIGINT) IN (5)", "d", 5.5, "CAST(5.5 AS DOUBLE)"),
    ("b = 9007199254740992D", "b", 9007199254740993, "9007199254740993L"),
    ("CAST(b AS FLOAT) = 16777216", "b", 16777217, "16777217L"),
    ("CAST(d AS FLOAT) = CAST(0.1 AS FLOAT)", "d", 0.10000000149011612, "CAST(0.10000000149011612D AS DOUBLE)"),
    ("f = 0.1F", "f", 0.10000000149011612, "0.1F"),
    ("f <= CAST(0.1 AS FLOAT)", "f", 0.10000000149011612, "0.1F"),
    ("f IN (0.1F, 2F)", "f", 0.10000000149011612, "0.1F"),
    ("CAST(i AS BIGINT) = 7", "i", 7, "7"),  # a widening cast still filters (see below)
])
def test_a_part_holding_a_matching_row_is_never_ruled_out(spark: Any, text: str, column: str, stored: Any,
                                                          literal: str) -> None:
    assert spark.sql(f"SELECT count(*) FROM (SELECT {literal} AS {column}) WHERE {text}").first()[0] == 1
    part = PartStats(rows=1, columns={SCHEMA.find(column).id: ColumnStats(0, stored, stored)})
    assert interp.might_match(bind_filter(spark, text, SCHEMA), part)


def test_widening_casts_still_skip(spark: Any) -> None:
    part = PartStats(rows=1, columns={SCHEMA.find("i").id: ColumnStats(0, 9, 9)})
    assert not interp.might_match(bind_filter(spark, "CAST(i AS BIGINT) = 7", SCHEMA), part)
    assert not interp.might_match(bind_filter(spark, "CAST(i AS DOUBLE) < 7", SCHEMA), part)


@pytest.mark.parametrize(("text", "column", "stored", "literal"), [
    ("CAST(d AS INT) = 5", "d", 5.5, "CAST(5.5 AS DOUBLE)"),
    ("CAST(d AS INT) >= 0", "d", -0.5, "CAST(-0.5 AS DOUBLE)"),
    ("b = 9007199254740992D", "b", 9007199254740993, "9007199254740993L"),
    ("CAST(b AS FLOAT) = 16777216", "b", 16777217, "16777217L"),
    ("f <= CAST(0.1 AS FLOAT)", "f", 0.10000000149011612, "0.1F"),
    ("b * 2 + 1 > 0", "b", 2**62, "4611686018427387904L"),  # overflows: Spark raises, the part stays
])
def test_the_interpreter_never_rules_out_a_matching_row(spark: Any, text: str, column: str, stored: Any,
                                                        literal: str) -> None:
    try:
        assert spark.sql(f"SELECT count(*) FROM (SELECT {literal} AS {column}) WHERE {text}").first()[0] == 1
    except Exception as e:  # noqa: BLE001 - an ANSI error: the part must be kept all the more
        assert "ARITHMETIC_OVERFLOW" in str(e)
    part = PartStats(rows=1, columns={SCHEMA.find(column).id: ColumnStats(0, stored, stored)})
    _, tree = scope_filters(spark, text, SCHEMA)
    assert interp.might_match(tree, part, interp.Env(time_zone="UTC"))


def test_filters_over_expressions_narrow_the_scope(spark: Any) -> None:
    schema = TableSchema.of([("ts", "timestamp"), ("b", "bigint")])
    ts, b = schema.find("ts").id, schema.find("b").id
    nov1 = 1_793_491_200_000_000  # 2026-11-01T00:00Z
    env = interp.Env(time_zone="UTC")

    def part(cid: int, lo: int, hi: int) -> PartStats:
        return PartStats(rows=3, columns={cid: ColumnStats(0, lo, hi)})

    _, day = scope_filters(spark, "date_trunc('DAY', ts) = DATE'2026-11-01'", schema)
    assert not interp.might_match(day, part(ts, nov1 - 86_400_000_000, nov1 - 1), env)
    assert interp.might_match(day, part(ts, nov1 - 1, nov1), env)
    _, arith = scope_filters(spark, "b * 2 + 1 < 100", schema)
    assert not interp.might_match(arith, part(b, 50, 60), env)
    assert interp.might_match(arith, part(b, 49, 60), env)
