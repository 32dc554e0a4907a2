"""A transform keeps its per-row error trap and the column rules of a plain load.

* An expression two items share (or an item and the WHERE) failing on a record rejects
  that record: Spark's subexpression elimination would evaluate it once, outside the trap,
  and fail the whole load.
* Values a transform gives go through ``cast.cast_column`` like a plain load's: the same
  file loaded with and without ``SELECT $1,$2,$3,$4 FROM source`` loads the same rows and
  rejects the same lines and columns (varchar lengths, json validity, the uuid form, exact
  decimals: no rounding unless the SELECT asks for it).
* The statement is type-checked by Spark's analyser before any task: a non-boolean WHERE
  is refused naming it; ``IS DISTINCT FROM`` parses.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from support import loads
from support.loads import job, store

from lading_jobs.load.job import run_load
from lading_jobs.table.log.commits import TableLog
from lading_spec.errors import SpecError

pytestmark = [pytest.mark.spark]


def table_rows(table: str) -> list[dict[str, Any]]:
    return sorted(loads.table_rows(table), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def rejects(prefix: str) -> list[tuple[int, str | None]]:
    return sorted((e["line"], e["column"]) for o in store(prefix).list_objects(prefix) if o.uri.endswith(".jsonl")
                  for e in map(json.loads, store(o.uri).read(o.uri).decode().splitlines()))


@pytest.fixture
def root(file_uri: Callable[[str], str]) -> str:
    return file_uri("root/")


@pytest.mark.parametrize(("select", "columns", "loaded"), [
    ("SELECT $1::int, $1::int + 1 FROM source", ["a", "b"], [{"a": 5, "b": 6}]),
    ("SELECT $1::int FROM source WHERE $1::int > 0", ["a"], [{"a": 5, "b": None}]),
    ("SELECT $1::int * 2, $1::int * 2 + 1 FROM source WHERE $1::int * 2 > 0", ["a", "b"], [{"a": 10, "b": 11}]),
])
def test_a_shared_failing_expression_rejects_the_record(spark: Any, root: str, select: str, columns: list[str],
                                                        loaded: list[dict[str, Any]]) -> None:
    src, table, rejected = root + "in/", root + "t/", root + "rejected/"
    store(src).put(src + "1.csv", b"abc\n5\n")
    spec = {"from": {"files": src, "format": "csv"}, "onError": "continue", "rejectedRows": rejected,
            "to": {"table": table, "schema": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}]},
            "transform": {"select": select, "columns": columns}}
    result = run_load(spark, job(spec))
    assert result["rows"] == 1 and result["rowsRejected"] == 1, result
    assert table_rows(table) == loaded
    assert [line for line, _ in rejects(rejected)] == [1]


UUID = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
RULES_CSV = (f"abc,{{}},{UUID},1.25\n"  # good
             f"abcdef,{{}},{UUID},1\n"  # longer than varchar(3)
             f"ab   ,[1],{UUID},2\n"  # excess spaces are cut
             f"abc,not json,{UUID},3\n"
             "abc,1,not-a-uuid,4\n"
             f"abc,\"{{\"\"k\"\": 1}}\",{UUID.upper()},5\n"  # upper case: stored in PostgreSQL's form
             f"xyz,{{}},{{{UUID}}},1.5\n")
RULES_SCHEMA = [{"name": "v", "type": "varchar(3)"}, {"name": "j", "type": "json"}, {"name": "u", "type": "uuid"},
                {"name": "m", "type": "decimal(12,2)"}]


def test_a_transform_enforces_the_column_rules_of_a_plain_load(spark: Any, root: str) -> None:
    src = root + "in/"
    store(src).put(src + "1.csv", RULES_CSV.encode())
    outcomes = {}
    for name, transform in (("plain", None), ("transform", {"select": "SELECT $1, $2, $3, $4 FROM source"})):
        table, rejected = root + f"{name}/", root + f"rejected-{name}/"
        spec: dict[str, Any] = {"from": {"files": src, "format": "csv"}, "onError": "continue",
                                "rejectedRows": rejected, "to": {"table": table, "schema": RULES_SCHEMA}}
        if transform:
            spec["transform"] = transform
        result = run_load(spark, job(spec))
        outcomes[name] = (result["rows"], table_rows(table), rejects(rejected))
    assert outcomes["transform"] == outcomes["plain"]
    rows, loaded, rejected_lines = outcomes["plain"]
    assert rows == 4 and rejected_lines == [(2, "v"), (4, "j"), (5, "u")]
    assert {r["v"] for r in loaded} == {"abc", "ab ", "xyz"} and {r["u"] for r in loaded} == {UUID}


EXACT_CSV = ("1,2.675,7,\\x0102,2024-01-02 10:00:00+02:00,t,2024-01-02\n"  # 2.675 does not fit decimal(12,2)
             "2,2.67,7.5,\\x03,2024-01-02 10:00:00,yes,2024-01-02\n"  # 7.5 is no bigint
             "3,-0.005, 8 ,\\x,2024-01-02T10:00:00Z,0,2024-01-02\n"
             "4,1.5,9,zz,2024-01-02,n,2024-01-02\n"  # zz is no bytea hex
             "5,1.5,9,\\x00,2024-01-02,n,2024-02-30\n"  # no such day
             "6,12.5,10,\\xff,2024-01-02 10:00:00,f,2024-02-28\n")
EXACT_SCHEMA = [{"name": "id", "type": "int"}, {"name": "m", "type": "decimal(12,2)"}, {"name": "n", "type": "bigint"},
                {"name": "b", "type": "binary"}, {"name": "ts", "type": "timestamp"}, {"name": "ok", "type": "boolean"},
                {"name": "d", "type": "date"}]


def test_an_identity_transform_loads_exactly_what_the_plain_load_loads(spark: Any, root: str) -> None:
    """A transform that only selects fields converts them as a plain load does: ``2.675`` into
    ``decimal(12,2)`` is a rejected row in both, not 2.68 (Spark's CAST rounds), binary is
    bytea hex as in CSV; a rounding the user asks for is an explicit CAST or round()."""
    src = root + "in/"
    store(src).put(src + "1.csv", EXACT_CSV.encode())
    outcomes = {}
    for name, select in (("plain", None), ("identity", "SELECT $1, $2, $3, $4, $5, $6, $7 FROM source"),
                         ("cast", "SELECT $1, CAST($2 AS DECIMAL(12,2)), $3, $4, $5, $6, $7 FROM source"),
                         ("round", "SELECT $1, round($2, 2), $3, $4, $5, $6, $7 FROM source")):
        table, rejected = root + f"{name}/", root + f"rejected-{name}/"
        spec: dict[str, Any] = {"from": {"files": src, "format": "csv"}, "onError": "continue",
                                "rejectedRows": rejected, "to": {"table": table, "schema": EXACT_SCHEMA}}
        if select:
            spec["transform"] = {"select": select}
        result = run_load(spark, job(spec))
        outcomes[name] = (result["rows"], table_rows(table), rejects(rejected))
    assert outcomes["identity"] == outcomes["plain"]
    rows, loaded, rejected_lines = outcomes["plain"]
    assert rejected_lines == [(1, "m"), (2, "n"), (3, "m"), (4, "b"), (5, "d")]
    assert rows == 1 and [(r["id"], str(r["m"]), r["n"], r["b"], r["ok"]) for r in loaded] == \
        [(6, "12.50", 10, b"\xff", False)]
    for explicit in ("cast", "round"):  # asked for: 2.675 is 2.68, -0.005 is -0.01
        rows, loaded, rejected_lines = outcomes[explicit]
        assert {r["id"]: str(r["m"]) for r in loaded} == {1: "2.68", 3: "-0.01", 6: "12.50"}, outcomes[explicit]
        assert rejected_lines == [(2, "n"), (4, "b"), (5, "d")], outcomes[explicit]


def test_transform_statements_are_type_checked_and_parsed_as_spark_sql(spark: Any, root: str) -> None:
    src, table = root + "in/", root + "t/"
    store(src).put(src + "1.csv", b"1,2\n2,2\n3,\n")
    spec: dict[str, Any] = {"from": {"files": src, "format": "csv"},
                            "to": {"table": table, "schema": [{"name": "a", "type": "int"}]},
                            "transform": {"select": "SELECT $1::int FROM source WHERE $2"}}
    with pytest.raises(SpecError, match=r"transform.select: the WHERE condition \(.*\) is string, not boolean"):
        run_load(spark, job(spec))
    assert TableLog.open(table, store(table)) is None
    spec["transform"] = {"select": "SELECT $1::int FROM source WHERE $1::int IS DISTINCT FROM $2::int"}
    result = run_load(spark, job(spec))
    assert result["rows"] == 2 and sorted(r["a"] for r in table_rows(table)) == [1, 3]
