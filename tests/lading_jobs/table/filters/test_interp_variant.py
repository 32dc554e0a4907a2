"""The ResultSpec interpreter over variant path statistics: ``variant_get``, ``try_variant_get``,
``col:a.b`` and its casts.

Failure paths first: statistics not marked ``variant`` (a ``json`` column's), kinds this module
does not know, mixed kinds, strings that Spark parses into numbers or dates, NaN and open
bounds, overflow, a path outside the allow-list: all keep the part under ``variant_get`` (which
raises) and give NULL, never an error, under ``try_variant_get``. Then what skips: one kind read
as itself, numbers read as integers, doubles and decimals, a path in no document. The casts'
semantics were read off Spark 4.3 (ANSI on and off give the same: a variant cast fails unless
it is ``try_``)."""

from __future__ import annotations

import decimal
from typing import Any

import pytest

from lading_jobs.table.filters import expr as vx
from lading_jobs.table.filters import interp as ip
from lading_jobs.table.stats import part as stx

V = vx.Col("variant", 1)
ENV = ip.Env()


def part(paths: list[dict[str, Any]], rows: int = 4, nulls: int = 0, complete: bool = True,
         variant: Any = True) -> stx.PartStats:
    js: dict[str, Any] = {"docs": rows - nulls, "invalid": 0, "complete": complete, "paths": paths}
    if variant is not None:
        js["variant"] = variant
    return stx.PartStats(rows=rows, columns={1: stx.ColumnStats(nulls=nulls, json=js)})


def entry(path: list[str], present: int = 4, **kinds: Any) -> dict[str, Any]:
    return {"path": path, "present": present, **kinds}


def get(path: str, to: str, mode: str = "ANSI") -> vx.Call:
    return vx.call("variant_get", V, type=to, params=(path, mode))


def colon_cast(path: str, to: str, mode: str = "ANSI") -> vx.Call:
    return vx.call("cast", get(path, "variant"), type=to, params=(mode,))


def cmp(op: str, node: vx.Node, value: Any) -> vx.Call:
    return vx.call(op, node, vx.Lit(node.type, value))


NUMBERS = entry(["a"], number={"count": 4, "integers": 4, "min": 10, "max": 20})
FRACTIONS = entry(["a"], number={"count": 4, "integers": 1, "min": -2.7, "max": 20.5})
STRINGS = entry(["s"], string={"count": 4, "min": "b", "max": "d"})


# -- what keeps the part -------------------------------------------------------------------------------
@pytest.mark.parametrize("marker", [None, False, "true", 1])
def test_statistics_not_marked_variant_are_never_read_by_a_variant_path(marker: Any) -> None:
    stats = part([NUMBERS], variant=marker)
    assert ip.might_match(cmp("gt", get("$.a", "int"), 100), stats, ENV)
    assert ip.evaluate(get("$.a", "int"), stats, ENV) == ip.anything("int")
    assert not ip.might_match(cmp("gt", get("$.a", "int"), 100), part([NUMBERS]), ENV)  # marked: read


def test_variant_statistics_are_never_read_by_a_json_path() -> None:
    stats = part([STRINGS])
    node = vx.call("eq", vx.call("get_json_object", vx.Col("string", 1), type="string", params=("$.s",)),
                   vx.Lit("string", "z"))
    assert ip.might_match(node, stats, ENV)
    field = vx.call("from_json_field", vx.Col("string", 1), type="string", params=("s",))
    assert ip.might_match(vx.call("eq", field, vx.Lit("string", "z")), stats, ENV)


def test_a_kind_this_module_does_not_know_gives_anything() -> None:
    stats = part([entry(["a"], number={"count": 4, "integers": 4, "min": 10, "max": 20}, interval={"count": 1})])
    assert ip.might_match(cmp("gt", get("$.a", "int"), 100), stats, ENV)
    assert ip.evaluate(get("$.a", "int", "TRY"), stats, ENV) == ip.Spec("int", nullable=True)


@pytest.mark.parametrize("other", [{"string": {"count": 1, "min": "12", "max": "12"}}, {"boolean": {"count": 1}},
                                   {"object": 1}, {"date": {"count": 1, "min": 5, "max": 5}}, {"other": {"count": 1}}])
def test_numbers_mixed_with_another_kind_keep_the_part_and_may_fail(other: dict[str, Any]) -> None:
    stats = part([entry(["a"], number={"count": 3, "integers": 3, "min": 10, "max": 20}, **other)])
    spec = ip.evaluate(get("$.a", "int"), stats, ENV)
    assert spec.fallible and ip.might_match(cmp("gt", get("$.a", "int"), 100), stats, ENV)
    assert not ip.evaluate(get("$.a", "int", "TRY"), stats, ENV).fallible


def test_a_string_read_as_a_number_or_date_may_be_anything_and_may_fail() -> None:
    stats = part([STRINGS])  # Spark parses '12' as 12 and '2020-01-02' as a date; 'abc' fails
    for to in ("int", "bigint", "double", "decimal(5,2)", "date", "timestamp", "boolean"):
        assert ip.evaluate(get("$.s", to), stats, ENV) == ip.anything(to)
        assert ip.evaluate(get("$.s", to, "TRY"), stats, ENV) == ip.Spec(to, nullable=True)


def test_a_date_read_as_a_timestamp_depends_on_the_zone_and_gives_anything() -> None:
    stats = part([entry(["d"], date={"count": 4, "min": 10, "max": 20})])
    assert ip.evaluate(get("$.d", "timestamp"), stats, ENV) == ip.anything("timestamp")


@pytest.mark.parametrize("number", [
    {"count": 4, "integers": 3, "min": 1.0, "max": 2.0, "nan": 1},  # NaN: no integer, no decimal
    {"count": 4, "integers": 4, "max": 2},  # no lower bound: -inf may be there
    {"count": 4, "integers": 4, "min": 10, "max": 300}])  # overflows tinyint
def test_nan_open_bounds_and_overflow_fail_an_integer_read_and_give_null_under_try(number: dict[str, Any]) -> None:
    stats = part([entry(["a"], number=number)])
    assert ip.evaluate(get("$.a", "tinyint"), stats, ENV).fallible
    assert ip.might_match(cmp("lt", get("$.a", "tinyint"), -100), stats, ENV)
    tried = ip.evaluate(get("$.a", "tinyint", "TRY"), stats, ENV)
    assert tried.nullable and not tried.fallible
    assert ip.evaluate(colon_cast("$.a", "tinyint"), stats, ENV).fallible
    assert not ip.evaluate(colon_cast("$.a", "tinyint", "TRY"), stats, ENV).fallible
    assert ip.evaluate(colon_cast("$.a", "tinyint", "LEGACY"), stats, ENV).fallible  # ANSI off: still fails


def test_a_decimal_read_overflows_its_precision() -> None:
    stats = part([entry(["a"], number={"count": 4, "integers": 0, "min": 1.5, "max": 999.996})])
    assert ip.evaluate(get("$.a", "decimal(5,2)"), stats, ENV).fallible  # 999.996 rounds to 1000.00
    assert not ip.evaluate(get("$.a", "decimal(6,2)"), stats, ENV).fallible


@pytest.mark.parametrize("path", ["$", "$.a[0]", "$['a']", "$.a.b.c.d.e"])
def test_a_path_outside_the_allow_list_gives_anything(path: str) -> None:
    stats = part([NUMBERS])
    assert ip.evaluate(get(path, "int"), stats, ENV) == ip.anything("int")


def test_an_incomplete_listing_does_not_say_a_path_is_missing() -> None:
    stats = part([NUMBERS], complete=False)
    assert ip.might_match(vx.call("isnotnull", get("$.zz", "int", "TRY")), stats, ENV)


def test_a_variant_null_is_sql_null_under_a_cast() -> None:
    stats = part([entry(["a"], null=2, number={"count": 2, "integers": 2, "min": 10, "max": 20})])
    assert ip.might_match(vx.call("isnull", get("$.a", "int")), stats, ENV)
    assert ip.might_match(vx.call("isnull", colon_cast("$.a", "int")), stats, ENV)


# -- what skips ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("to", ["tinyint", "int", "bigint"])
def test_integers_read_as_integers_give_their_bounds_and_never_fail(to: str) -> None:
    stats = part([NUMBERS])
    assert ip.evaluate(get("$.a", to), stats, ENV) == ip.Spec(to, lo=10, hi=20)
    assert not ip.might_match(cmp("gt", get("$.a", to), 20), stats, ENV)
    assert ip.might_match(cmp("ge", get("$.a", to), 20), stats, ENV)
    assert not ip.might_match(cmp("lt", colon_cast("$.a", to), 10), stats, ENV)


def test_fractions_read_as_integers_are_truncated_within_floor_and_ceiling() -> None:
    stats = part([FRACTIONS])  # -2.7 → -2, 20.5 → 20 in Spark
    spec = ip.evaluate(get("$.a", "int"), stats, ENV)
    assert spec == ip.Spec("int", lo=-3, hi=21)
    assert not ip.might_match(cmp("gt", get("$.a", "int"), 21), stats, ENV)


def test_numbers_read_as_double_and_decimal() -> None:
    stats = part([FRACTIONS])
    assert not ip.might_match(cmp("gt", get("$.a", "double"), 20.6), stats, ENV)
    assert ip.might_match(cmp("gt", get("$.a", "double"), 20.4), stats, ENV)
    spec = ip.evaluate(get("$.a", "decimal(5,1)"), stats, ENV)
    assert not spec.fallible and spec.lo <= decimal.Decimal("-2.7") and spec.hi >= decimal.Decimal("20.5")
    assert not ip.might_match(cmp("gt", get("$.a", "decimal(5,1)"), decimal.Decimal("20.6")), stats, ENV)
    nan = part([entry(["a"], number={"count": 4, "integers": 3, "min": 1.0, "max": 2.0, "nan": 1})])
    assert ip.evaluate(get("$.a", "double"), nan, ENV).hi is None  # NaN is above every number
    assert ip.might_match(cmp("gt", get("$.a", "double"), 3.0), nan, ENV)


@pytest.mark.parametrize(("kind", "lo", "hi", "above"), [
    ("string", "b", "d", "e"), ("boolean", False, False, True), ("date", 10, 20, 21),
    ("timestamp", 10**12, 2 * 10**12, 3 * 10**12), ("timestamp_ntz", 5, 6, 7)])
def test_one_kind_read_as_itself_gives_its_bounds(kind: str, lo: Any, hi: Any, above: Any) -> None:
    stats = part([entry(["a", "b"], null=1, **{kind: {"count": 3, "min": lo, "max": hi}})])
    assert ip.evaluate(get("$.a.b", kind), stats, ENV) == ip.Spec(kind, nullable=True, lo=lo, hi=hi)
    assert not ip.might_match(cmp("eq", get("$.a.b", kind), above), stats, ENV)
    assert not ip.might_match(cmp("eq", colon_cast("$.a.b", kind), above), stats, ENV)
    assert not ip.might_match(cmp("eq", get("$.a.b", kind, "TRY"), above), stats, ENV)


def test_anything_read_as_a_string_never_fails() -> None:
    stats = part([entry(["a"], number={"count": 2, "integers": 2, "min": 1, "max": 2}, object=1, boolean={"count": 1})])
    assert not ip.evaluate(get("$.a", "string"), stats, ENV).fallible


def test_a_path_in_no_document_is_null_everywhere() -> None:
    stats = part([NUMBERS])
    assert not ip.might_match(vx.call("isnotnull", get("$.zz", "int")), stats, ENV)
    assert not ip.might_match(vx.call("isnotnull", get("$.zz", "variant")), stats, ENV)
    assert ip.might_match(vx.call("isnotnull", get("$.a", "variant")), stats, ENV)
    assert not ip.might_match(cmp("eq", colon_cast("$.zz", "string"), "x"), stats, ENV)


def test_every_document_null_reads_nothing() -> None:
    stats = part([], nulls=4)
    assert not ip.might_match(cmp("eq", get("$.a", "int"), 1), stats, ENV)


def test_a_variant_get_tree_survives_its_json_form() -> None:
    node = cmp("gt", colon_cast("$.a", "int", "TRY"), 5)
    assert vx.from_json(vx.to_json(node)) == node
