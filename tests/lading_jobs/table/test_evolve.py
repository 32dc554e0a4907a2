"""Schema evolution's pure parts: merging the columns tasks found into the schema (fresh ids,
widening, conflicts naming both places), the settle loop, and the commit's rebase rules for a
concurrent schema change (``log._validate``)."""

from __future__ import annotations

import pytest

from lading_jobs.table import evolve
from lading_jobs.table.evolve import EvolutionConflict, Found
from lading_jobs.table.log.commits import Change, ConflictError, TableLog
from lading_jobs.table.schema import SchemaError, TableSchema

BASE = TableSchema.of([("a", "string"), ("b", "int")])


def test_new_columns_get_fresh_ids_after_dropped_ones_and_are_nullable() -> None:
    dropped = BASE.drop_column("b")  # id 2 is never handed out again
    out = evolve.evolve(dropped, [Found("b", "bigint", "f1"), Found("c", "string", "f2")])
    assert [(c.id, c.name, c.type, c.nullable) for c in out.columns] == [
        (1, "a", "string", True), (3, "b", "bigint", True), (4, "c", "string", True)]
    assert out.schema_id == dropped.schema_id + 2


def test_names_match_case_insensitively_and_known_columns_add_nothing() -> None:
    assert evolve.evolve(BASE, [Found("A", "string", "f1"), Found("B", "bigint", "f1")]) is BASE
    out = evolve.evolve(BASE, [Found("Cc", "int", "f1"), Found("cc", "bigint", "f2")])
    assert [(c.name, c.type) for c in out.columns[2:]] == [("Cc", "bigint")]


@pytest.mark.parametrize("a, b, wider", [
    ("int", "bigint", "bigint"), ("tinyint", "smallint", "smallint"), ("bigint", "double", "double"),
    ("float", "double", "double"), ("null", "date", "date"), ("string", "null", "string"), ("null", "null", "null"),
    ("string", "bigint", None), ("decimal(10,2)", "decimal(12,2)", None), ("boolean", "int", None),
])
def test_widen(a: str, b: str, wider: str | None) -> None:
    assert evolve.widen(a, b) == wider
    assert evolve.widen(b, a) == wider


def test_a_column_seen_only_as_null_becomes_string() -> None:
    assert evolve.evolve(BASE, [Found("n", "null", "f1")]).column("n").type == "string"


def test_a_type_conflict_names_the_column_and_both_places() -> None:
    with pytest.raises(EvolutionConflict, match=r"column 'c' is bigint in s3://b/1.json but string in s3://b/2.csv"):
        evolve.evolve(BASE, [Found("c", "bigint", "s3://b/1.json"), Found("c", "string", "s3://b/2.csv")])


def test_an_upsert_or_diff_table_refuses_a_nested_identity_column() -> None:
    out = evolve.evolve(BASE, [Found("m", "map<string,int>", "f")], envelope="upsert", key_columns=("a",))
    assert out.column("m").type == "map<string,int>"  # not a key column: fine
    with pytest.raises(SchemaError, match="cannot identify rows"):
        evolve.evolve(BASE, [Found("m", "map<string,int>", "f")], envelope="diff")


def test_settle_redoes_only_the_outcomes_that_found_columns() -> None:
    # outcomes: (name, found); a redo with the evolved schema finds nothing new
    outcomes = [("f1", []), ("f2", [Found("c", "bigint", "f2")]), ("f3", [])]
    discarded: list[str] = []
    redone: list[tuple[str, int, int]] = []

    def redo(schema: TableSchema, stale: list[tuple[str, list[Found]]], round_: int) -> list[tuple[str, list[Found]]]:
        redone.extend((name, schema.column("c").id, round_) for name, _ in stale)
        return [(name + "'", []) for name, _ in stale]

    schema, out = evolve.settle(BASE, outcomes, lambda o: o[1], lambda s: discarded.extend(n for n, _ in s), redo)
    assert [n for n, _ in out] == ["f1", "f2'", "f3"]  # same places: part order is kept
    assert discarded == ["f2"] and redone == [("f2", 3, 1)] and schema.column("c").type == "bigint"
    schema, out = evolve.settle(BASE, [("f1", [])], lambda o: o[1], lambda s: None, redo)
    assert schema is BASE


def test_settle_stops_when_the_input_keeps_changing() -> None:
    n = iter(range(100))

    def redo(schema: TableSchema, stale: list[list[Found]], round_: int) -> list[list[Found]]:
        return [[Found(f"x{next(n)}", "int", "f")] for _ in stale]

    with pytest.raises(SchemaError, match="still carried new columns"):
        evolve.settle(BASE, [[Found("c", "int", "f")]], lambda o: o, lambda s: None, redo)


# -- the commit's rebase against a concurrent schema change ---------------------------------

def _table(tmp_path: object) -> TableLog:
    return TableLog.create(f"file://{tmp_path}/t/", BASE)


def test_a_concurrent_identical_add_commits_without_a_second_column(tmp_path: object) -> None:
    mine, theirs = _table(tmp_path), TableLog.open_existing(f"file://{tmp_path}/t/")
    theirs.commit(Change(operation="load", schema=evolve.evolve(BASE, [Found("c", "bigint", "x")])))
    snap = mine.commit(Change(operation="load", schema=evolve.evolve(BASE, [Found("c", "bigint", "y")])))
    assert [(c.id, c.name) for c in snap.schema.columns] == [(1, "a"), (2, "b"), (3, "c")]
    assert snap.version == 2 and snap.schema.schema_id == 1  # the second commit changed no schema


def test_a_concurrent_add_of_the_same_name_with_another_type_conflicts(tmp_path: object) -> None:
    mine, theirs = _table(tmp_path), TableLog.open_existing(f"file://{tmp_path}/t/")
    theirs.commit(Change(operation="load", schema=evolve.evolve(BASE, [Found("c", "string", "x")])))
    with pytest.raises(ConflictError, match="column 'c' is string in the table, bigint in this commit"):
        mine.commit(Change(operation="load", schema=evolve.evolve(BASE, [Found("c", "bigint", "y")])))


def test_a_concurrent_add_of_another_column_under_our_id_conflicts(tmp_path: object) -> None:
    mine, theirs = _table(tmp_path), TableLog.open_existing(f"file://{tmp_path}/t/")
    theirs.commit(Change(operation="load", schema=evolve.evolve(BASE, [Found("d", "int", "x")])))
    with pytest.raises(ConflictError, match=r"column 'c': id 3 is now 'd'"):
        mine.commit(Change(operation="load", schema=evolve.evolve(BASE, [Found("c", "int", "y")])))


def test_a_concurrent_drop_is_not_undone_by_an_add(tmp_path: object) -> None:
    mine, theirs = _table(tmp_path), TableLog.open_existing(f"file://{tmp_path}/t/")
    theirs.commit(Change(operation="schema", schema=BASE.drop_column("b")))
    with pytest.raises(ConflictError, match=r"column 'b' \(id 2\) was dropped concurrently"):
        mine.commit(Change(operation="load", schema=evolve.evolve(BASE, [Found("c", "int", "y")])))


def test_our_drop_is_not_lost_when_a_concurrent_commit_added_a_column(tmp_path: object) -> None:
    mine, theirs = _table(tmp_path), TableLog.open_existing(f"file://{tmp_path}/t/")
    theirs.commit(Change(operation="load", schema=evolve.evolve(BASE, [Found("c", "int", "x")])))
    with pytest.raises(ConflictError, match="column 'c' \\(id 3\\) was added concurrently"):
        mine.commit(Change(operation="schema", schema=BASE.drop_column("b")))


def test_appends_without_a_schema_change_rebase_over_an_evolution(tmp_path: object) -> None:
    mine, theirs = _table(tmp_path), TableLog.open_existing(f"file://{tmp_path}/t/")
    theirs.commit(Change(operation="load", schema=evolve.evolve(BASE, [Found("c", "int", "x")])))
    snap = mine.commit(Change(operation="load"))
    assert snap.schema.names == ["a", "b", "c"]
