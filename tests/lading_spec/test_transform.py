"""``spec.transform`` parsing: the statement's shape, ``$a..$b`` ranges, aliases, and errors naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from lading_spec.copyjob import parse_copyjob
from lading_spec.errors import SpecError
from lading_spec.transform import parse_transform, resolve_fields


def load(transform: Any, **to: Any) -> dict[str, Any]:
    return {"from": {"files": "s3://bkt/in/", "format": "csv"},
            "to": {"table": "s3://bkt/t/", **to}, "transform": transform}


def test_the_seed_examples_parse() -> None:
    t = parse_transform({"columns": ["x", "y", "w"], "fields": ["a", "b", "c"],
                         "select": "SELECT a, a::int + b::int AS y, string(c) FROM source WHERE b::int > 2"})
    assert t is not None and t.items == ("a", "a::int + b::int", "string(c)") and t.where == "b::int > 2"
    t = parse_transform({"select": "select year(timestamp($11)), month(timestamp($11)), $1..$10, $21..$100 "
                                   "from source"})
    assert t is not None and len(t.items) == 2 + 10 + 80 and t.items[2] == "$1" and t.items[-1] == "$100"
    t = parse_transform({"select": "SELECT $1..$99 FROM source WHERE $100::int > 2"})
    assert t is not None and len(t.items) == 99 and t.field_refs() == 100


def test_commas_and_keywords_inside_brackets_quotes_and_comments_are_not_top_level() -> None:
    t = parse_transform({"select": "SELECT concat($1, ', from ', $2), CAST($3 AS int) -- , where\n"
                                   "FROM source WHERE $1 IN ('a,b', 'where')"})
    assert t is not None and t.items == ("concat($1, ', from ', $2)", "CAST($3 AS int) -- , where")
    assert t.where == "$1 IN ('a,b', 'where')"


def test_resolve_fields_leaves_quoted_text_alone() -> None:
    assert resolve_fields("$1 || '$2' || $2", ["a", "b`c"]) == "`a` || '$2' || `b``c`"
    with pytest.raises(SpecError, match=r"transform.select: \$3 is not a field"):
        resolve_fields("$3", ["a", "b"])


@pytest.mark.parametrize(("transform", "field", "message"), [
    ({"select": "SELECT a FROM other"}, "transform.select", "FROM source"),
    ({"select": "SELECT a FROM source GROUP BY a"}, "transform.select", "only a WHERE"),
    ({"select": "SELECT a FROM source WHERE"}, "transform.select", "WHERE needs a condition"),
    ({"select": "SELECT * FROM source"}, "transform.select", "'\\*' is not accepted"),
    ({"select": "SELECT a,, b FROM source"}, "transform.select", "empty item"),
    ({"select": "SELECT $3..$2 FROM source"}, "transform.select", "must go up"),
    ({"select": "SELECT 'a FROM source"}, "transform.select", "unclosed"),
    ({"select": "SELECT a FROM source; DROP TABLE x"}, "transform.select", "one SELECT"),
    ({"select": "SELECT a, b FROM source", "columns": ["x"]}, "transform.columns", "1 column"),
    ({"select": "SELECT $4 FROM source", "fields": ["a", "b"]}, "transform.select", "past the 2 field"),
    ({"select": "SELECT a FROM source", "fields": ["a b"]}, "transform.fields[0]", "identifier"),
    ({"select": "SELECT a FROM source", "where": "x"}, "transform.where", "unknown field"),
])
def test_errors_name_the_field(transform: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(SpecError, match=message) as e:
        parse_copyjob(load(transform, schema=[{"name": "x", "type": "int"}]))
    assert e.value.field == field


def test_transform_is_for_loads_only_and_columns_must_exist() -> None:
    with pytest.raises(SpecError) as e:
        parse_copyjob({"from": {"table": "s3://bkt/t/"}, "to": {"files": "s3://bkt/out/"},
                       "transform": {"select": "SELECT a FROM source"}})
    assert e.value.field == "transform"
    with pytest.raises(SpecError) as e:
        parse_copyjob(load({"select": "SELECT a FROM source", "columns": ["nope"]},
                           schema=[{"name": "x", "type": "int"}]))
    assert e.value.field == "transform.columns[0]"
    with pytest.raises(SpecError) as e:
        parse_copyjob(load({"select": "SELECT a FROM source"}, inferSchema=True))
    assert e.value.field == "to.inferSchema"


def test_query_into_table_takes_if_exists() -> None:
    spec = parse_copyjob({"from": {"query": "SELECT 1 AS x"}, "to": {"table": "s3://bkt/t/", "ifExists": "replace"}})
    assert spec.source.kind == "query" and spec.target.if_exists == "replace"
    assert parse_copyjob({"from": {"query": "SELECT 1 AS x"}, "to": {"table": "s3://bkt/t/"}}).target.if_exists \
        == "append"
    for bad, field in [({"from": {"table": "s3://bkt/s/"}, "to": {"table": "s3://bkt/t/"}}, "from.table"),
                       ({"from": {"files": "s3://bkt/in/"}, "to": {"table": "s3://bkt/t/", "ifExists": "replace"}},
                        "to.ifExists"),
                       ({"from": {"query": "SELECT 1"}, "to": {"table": "s3://bkt/t/", "ifExists": "merge"}},
                        "to.ifExists"),
                       ({"from": {"query": "SELECT 1"}, "to": {"table": "s3://bkt/t/", "inferSchema": True}},
                        "to.inferSchema")]:
        with pytest.raises(SpecError) as e:
            parse_copyjob(bad)
        assert e.value.field == field


@pytest.mark.parametrize(("select", "items", "where"), [
    ("SELECT $1 FROM source WHERE $1 IS DISTINCT FROM $2", ("$1",), "$1 IS DISTINCT FROM $2"),
    ("SELECT $1 IS NOT DISTINCT FROM $2, $3 FROM source", ("$1 IS NOT DISTINCT FROM $2", "$3"), None),
])
def test_is_distinct_from_is_an_operator_not_a_from_clause(select: str, items: tuple[str, ...],
                                                           where: str | None) -> None:
    t = parse_transform({"select": select})
    assert t is not None and t.items == items and t.where == where
