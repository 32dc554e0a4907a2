"""The ResultSpec interpreter over JSON statistics: ``get_json_object``, its casts, ``from_json`` fields.

Failure paths first: documents that are not strict JSON, mixed kinds per key, paths outside
the allow-list or deeper than the statistics, trimmed or capped listings, and parts written
before JSON statistics all keep the part. Then what skips: string bounds, a path no document
holds, number bounds through casts (integers exactly, fractions only where no cast can fail),
and number text only where its order is the numbers'."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.filters import expr as vx
from lading_jobs.table.filters import interp as ip
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats import jsonstats as js
from lading_jobs.table.stats import part as stx

PAYLOAD = vx.Col("string", 1)
ENV = ip.Env()


def part(docs: list[str | None]) -> stx.PartStats:
    table = pa.table({"payload": pa.array(docs, pa.string()), fmt.TIME_COLUMN: pa.array([0] * len(docs), pa.int64()),
                      fmt.DIFF_COLUMN: pa.array([1] * len(docs), pa.int64())})
    stats = stx.table_stats(table, {"payload": 1}, frozenset({"payload"}))
    return stx.PartStats.from_dict(json.loads(json.dumps(stats.to_dict(), allow_nan=False)))


def get(path: str) -> vx.Call:
    return vx.call("get_json_object", PAYLOAD, type="string", params=(path,))


def eq(path: str, value: str) -> vx.Call:
    return vx.call("eq", get(path), vx.Lit("string", value))


def cast_cmp(op: str, path: str, to: str, value: Any, mode: str = "ANSI") -> vx.Call:
    return vx.call(op, vx.call("cast", get(path), type=to, params=(mode,)), vx.Lit(to, value))


@pytest.mark.parametrize("bad", ['{"k": "b", ', '{"k": "b"} trailing', '{"k": NaN}', '{"k": "a", "k": "b"}',
                                 '{"k": "\\ud800"}', "{'k': 'b'}"])
def test_a_document_that_is_not_strict_json_makes_every_path_unknown(bad: str) -> None:
    stats = part(['{"k": "a"}', bad])
    assert ip.might_match(eq("$.k", "b"), stats, ENV)
    assert ip.might_match(vx.call("isnotnull", get("$.other")), stats, ENV)


def test_a_key_holding_mixed_kinds_gives_anything() -> None:
    stats = part(['{"k": "a"}', '{"k": 5}', '{"k": true}', '{"k": {"x": 1}}', '{"k": [1]}'])
    for value in ("5", "true", "zzz", '{"x":1}', "[1]"):
        assert ip.might_match(eq("$.k", value), stats, ENV), value
    assert ip.might_match(cast_cmp("eq", "$.k", "bigint", 5), stats, ENV)
    assert ip.might_match(cast_cmp("gt", "$.k", "bigint", 5, "TRY"), part(['{"k": 5}', '{"k": "9"}']), ENV)


@pytest.mark.parametrize("path", ["$", "$.a[0]", "$['a']", "$.*", "$.a.*", "$..a", "a", "$.a b", "$.a.b.c.d.e"])
def test_paths_outside_the_allow_list_or_too_deep_give_anything(path: str) -> None:
    stats = part(['{"a": {"b": {"c": {"d": {"e": "x"}}}}}'])
    assert ip.might_match(eq(path, "nothing like it"), stats, ENV)


def test_an_incomplete_listing_never_proves_a_path_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(js, "MAX_PATHS", 3)
    stats = part(['{"a": 1, "b": 2, "c": 3, "d": "x"}'])
    assert ip.might_match(eq("$.d", "x"), stats, ENV)


def test_trimmed_paths_are_unknown() -> None:
    docs = [json.dumps({"mixed": i if i % 2 else str(i), "ts": f"2026-11-{i % 28 + 1:02d}",
                        **{f"wide{k}": f"{k}" * 60 + str(i) for k in range(80)}}) for i in range(20)]
    stats = part(docs)
    kept = {tuple(e["path"]) for e in stats.columns[1].json["paths"]}  # type: ignore[index]
    dropped = next(f"wide{k}" for k in range(80) if (f"wide{k}",) not in kept)
    assert ("ts",) in kept
    assert ip.might_match(eq(f"$.{dropped}", "x"), stats, ENV)
    assert ip.might_match(eq("$.mixed", "x"), stats, ENV)
    assert not ip.might_match(eq("$.ts", "2026-12-01"), stats, ENV)


def test_statistics_without_json_read_as_anything() -> None:
    old = stx.PartStats.from_dict({"rows": 2, "columns": {"1": {"nulls": 0, "min": '{"k":"a"}', "max": '{"k":"b"}'}}})
    assert old.columns[1].json is None
    assert ip.might_match(eq("$.k", "zzz"), old, ENV)
    assert ip.might_match(cast_cmp("gt", "$.k", "bigint", 10), old, ENV)
    assert ip.might_match(eq("$.k", "zzz"), stx.PartStats(rows=2), ENV)


def test_a_complete_listing_proves_a_path_absent() -> None:
    stats = part(['{"a": 1}', None, '[1, 2]', '"text"', '{"b": {"c": 2}}'])
    assert not ip.might_match(eq("$.zz", "x"), stats, ENV)
    assert not ip.might_match(vx.call("isnotnull", get("$.b.zz")), stats, ENV)
    assert ip.might_match(vx.call("isnull", get("$.a")), stats, ENV)
    assert not ip.might_match(eq("$.zz", "x"), part([None, None]), ENV)


def test_an_array_on_the_way_finds_no_key() -> None:
    stats = part(['{"a": [{"b": "x"}]}', '{"a": {"b": "y"}}'])
    assert not ip.might_match(eq("$.a.b", "x"), stats, ENV)  # get_json_object: NULL for the first
    assert ip.might_match(eq("$.a.b", "y"), stats, ENV)
    assert ip.might_match(eq("$.a", '[{"b":"x"}]'), stats, ENV)


def test_string_paths_skip_by_their_bounds() -> None:
    stats = part(['{"ts": "2026-10-01T00:00:00Z", "u": {"id": "a"}}', '{"ts": "2026-10-31T23:59:59Z", "u": {"id": "c"}}'])
    assert not ip.might_match(vx.call("gt", get("$.ts"), vx.Lit("string", "2026-11")), stats, ENV)
    assert ip.might_match(vx.call("gt", get("$.ts"), vx.Lit("string", "2026-10-31")), stats, ENV)
    assert not ip.might_match(eq("$.u.id", "d"), stats, ENV)
    assert ip.might_match(eq("$.u.id", "b"), stats, ENV)
    assert not ip.might_match(vx.call("isnull", get("$.ts")), stats, ENV)
    assert ip.might_match(vx.call("isnull", get("$.ts")), part(['{"ts": "2026-10-01"}', '{"ts": null}']), ENV)
    long = "a" * 100
    truncated = part([f'{{"s": "{long}"}}', f'{{"s": "{long}b"}}'])
    assert ip.might_match(eq("$.s", long + "b"), truncated, ENV)
    assert not ip.might_match(eq("$.s", "b"), truncated, ENV)


def test_booleans_read_as_their_text() -> None:
    assert not ip.might_match(eq("$.ok", "true"), part(['{"ok": false}']), ENV)
    assert ip.might_match(eq("$.ok", "false"), part(['{"ok": false}']), ENV)


def test_number_text_is_compared_only_when_its_order_is_numeric() -> None:
    same_length = part(['{"n": 10}', '{"n": 42}'])
    assert not ip.might_match(eq("$.n", "43"), same_length, ENV)
    assert ip.might_match(eq("$.n", "42"), same_length, ENV)
    assert ip.might_match(eq("$.n", "100"), part(['{"n": 9}', '{"n": 100}']), ENV)  # "100" < "9"
    assert ip.might_match(eq("$.n", "1.0E20"), part(['{"n": 1e20}']), ENV)
    assert ip.might_match(eq("$.n", "-5"), part(['{"n": -5}', '{"n": -7}']), ENV)


def test_casts_of_numbers_skip_by_the_number_bounds() -> None:
    ints = part(['{"ts": 1700000000}', '{"ts": 1700000500}', '{"other": 1}'])
    assert not ip.might_match(cast_cmp("lt", "$.ts", "bigint", 1700000000), ints, ENV)
    assert ip.might_match(cast_cmp("le", "$.ts", "bigint", 1700000000), ints, ENV)
    assert not ip.might_match(cast_cmp("gt", "$.ts", "double", 1700000500.0), ints, ENV)
    assert ip.might_match(vx.call("isnull", vx.call("cast", get("$.ts"), type="bigint", params=("ANSI",))), ints, ENV)
    big = part(['{"ts": 3000000000}'])  # beyond int: ANSI fails (kept), TRY gives NULL
    assert ip.might_match(cast_cmp("lt", "$.ts", "int", 0), big, ENV)
    assert not ip.might_match(cast_cmp("lt", "$.ts", "int", 0, "TRY"), big, ENV)
    fractions = part(['{"ts": 1.5}', '{"ts": 2.5}'])  # "1.0E20"-style text: no integer cast reads it
    assert ip.might_match(cast_cmp("gt", "$.ts", "bigint", 100), fractions, ENV)
    assert not ip.might_match(cast_cmp("gt", "$.ts", "bigint", 100, "TRY"), fractions, ENV)
    assert not ip.might_match(cast_cmp("gt", "$.ts", "double", 2.5), fractions, ENV)
    assert ip.might_match(cast_cmp("gt", "$.ts", "bigint", 100), part(['{"ts": "5"}']), ENV)
    huge = part(['{"n": 1e400}'])
    assert ip.might_match(cast_cmp("lt", "$.n", "double", 0.0), huge, ENV)


def test_a_tables_reads_skip_parts_by_json_statistics(file_uri: Callable[[str], str]) -> None:
    uri = file_uri("events/")
    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("payload", "json")]))
    tables = [pa.table({"id": pa.array([d * 10 + i for i in range(3)], pa.int64()),
                        "payload": [json.dumps({"day": f"2026-11-{d + 1:02d}", "n": d * 10 + i}) for i in range(3)]})
              for d in range(4)]
    written = writer.write_parts(uri, tables, log.snapshot().schema, write_id=fmt.new_write_id(), one_part_per_table=True)
    writer.commit_parts(uri, written, log=log)
    snapshot = TableLog.open_existing(uri).snapshot()
    day = vx.call("get_json_object", vx.Col("string", 2), type="string", params=("$.day",))
    n = vx.call("cast", vx.call("get_json_object", vx.Col("string", 2), type="string", params=("$.n",)),
                type="bigint", params=("ANSI",))
    for tree, first_ids in ((vx.call("eq", day, vx.Lit("string", "2026-11-03")), [20]),
                            (vx.call("ge", n, vx.Lit("bigint", 25)), [30]),
                            (vx.call("isnull", day), [])):
        kept = reader.plan_scan(snapshot, None, reader.ScanFilter(tree, ENV))
        assert [p.stats.columns[1].min for p in kept] == first_ids, tree


# -- from_json(col, schema).field ---------------------------------------------------------------------
def field(to: str, *path: str) -> vx.Call:
    return vx.call("from_json_field", PAYLOAD, type=to, params=path)


def test_from_json_fields_of_another_kind_or_unknown_give_any_value_or_null() -> None:
    mixed = part(['{"k": "a"}', '{"k": 5}'])
    assert ip.might_match(vx.call("eq", field("bigint", "k"), vx.Lit("bigint", 99)), mixed, ENV)
    assert ip.might_match(vx.call("eq", field("string", "k"), vx.Lit("string", "zz")), mixed, ENV)
    assert ip.might_match(vx.call("eq", field("bigint", "k"), vx.Lit("bigint", 99)), part(['{"k": 1', '{"k": 1}']), ENV)
    assert ip.might_match(vx.call("eq", field("smallint", "k"), vx.Lit("smallint", 99)), part(['{"k": 1}']), ENV)
    # PERMISSIVE: a value that does not convert is NULL, never an error
    assert ip.might_match(vx.call("isnull", field("bigint", "k")), part(['{"k": 1}']), ENV)


def test_from_json_fields_skip_by_the_bounds() -> None:
    stats = part(['{"k": 3, "s": "b", "o": {"x": 1.5}}', '{"k": 7, "s": "d", "o": {"x": 2.5}}'])
    assert not ip.might_match(vx.call("eq", field("bigint", "k"), vx.Lit("bigint", 9)), stats, ENV)
    assert ip.might_match(vx.call("eq", field("bigint", "k"), vx.Lit("bigint", 7)), stats, ENV)
    assert not ip.might_match(vx.call("gt", field("int", "k"), vx.Lit("int", 7)), stats, ENV)
    assert not ip.might_match(vx.call("lt", field("string", "s"), vx.Lit("string", "b")), stats, ENV)
    assert not ip.might_match(vx.call("gt", field("double", "o", "x"), vx.Lit("double", 2.5)), stats, ENV)
    assert ip.might_match(vx.call("gt", field("double", "o", "x"), vx.Lit("double", 2.0)), stats, ENV)
    assert not ip.might_match(vx.call("isnotnull", field("bigint", "zz")), stats, ENV)
    # beyond int: NULL, so an int field of values all beyond it holds none
    assert not ip.might_match(vx.call("isnotnull", field("int", "k")), part(['{"k": 3000000000}']), ENV)
