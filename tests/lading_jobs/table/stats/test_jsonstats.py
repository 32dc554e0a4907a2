"""JSON statistics per key path (``table.stats.jsonstats``), as the writer computes and commits them.

Failure paths first: documents Spark may read differently (invalid JSON, ``NaN``, duplicate
keys, lone surrogates) are counted apart, mixed kinds per key are kept apart, the path cap
clears ``complete``. Then the bounds (integers beyond 2^53 and decimal fractions widened
outward, values beyond float64 without a bound, strings truncated), the budget and its
trimming order, merging row groups (the writer's merge and the compaction's accumulator give
the statistics of all rows), and a table whose commit records them in strict JSON."""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats import jsonengine as je
from lading_jobs.table.stats import jsonstats as js
from lading_jobs.table.stats import part as stx


def part(docs: list[str | None]) -> stx.PartStats:
    """A part's statistics as the writer computes them (``table_stats`` of a ``json`` column),
    read back from their strict JSON form as a commit holds them."""
    table = pa.table({"payload": pa.array(docs, pa.string()), fmt.TIME_COLUMN: pa.array([0] * len(docs), pa.int64()),
                      fmt.DIFF_COLUMN: pa.array([1] * len(docs), pa.int64())})
    stats = stx.table_stats(table, {"payload": 1}, frozenset({"payload"}))
    return stx.PartStats.from_dict(json.loads(json.dumps(stats.to_dict(), allow_nan=False)))


def json_of(stats: stx.PartStats) -> dict[str, Any]:
    found = stats.columns[1].json
    assert found is not None
    return found


def entry(stats: stx.PartStats, *path: str) -> dict[str, Any]:
    return next(e for e in json_of(stats)["paths"] if tuple(e["path"]) == path)


@pytest.mark.parametrize("bad", [
    '{"k": "b", ',                    # truncated: Spark's streaming parser may still find "k"
    '{"k": "b"} trailing',            # Spark reads the first value only
    '{"k": NaN}', '{"k": Infinity}',  # not RFC 8259
    '{"k": "a", "k": "b"}',           # a duplicate key: Spark takes the first, Python the last
    '{"k": "\\ud800"}',               # a lone surrogate: no UTF-8 text
    "{'k': 'b'}",                     # single quotes
])
def test_a_document_that_is_not_strict_json_is_counted_invalid(bad: str) -> None:
    found = json_of(part(['{"k": "a"}', bad, None]))
    assert (found["docs"], found["invalid"]) == (1, 1)


def test_mixed_kinds_per_key_are_counted_apart() -> None:
    e = entry(part(['{"k": "a"}', '{"k": 5}', '{"k": true}', '{"k": {"x": 1}}', '{"k": [1]}', '{"k": null}', "{}"]), "k")
    assert e["present"] == 6 and e["null"] == 1 and e["object"] == 1 and e["array"] == 1
    assert e["string"] == {"count": 1, "min": "a", "max": "a"}
    assert e["number"] == {"count": 1, "integers": 1, "min": 5.0, "max": 5.0}
    assert e["boolean"] == {"count": 1, "min": True, "max": True}
    assert js.kinds(e) == {"string", "number", "boolean", "object", "array"}


def test_nested_objects_to_the_depth_limit_and_not_into_arrays() -> None:
    stats = part(['{"a": {"b": {"c": {"d": {"e": 1}}}}, "l": [{"x": 1}]}'])
    paths = {tuple(e["path"]) for e in json_of(stats)["paths"]}
    assert paths == {("a",), ("a", "b"), ("a", "b", "c"), ("a", "b", "c", "d"), ("l",)}
    assert json_of(stats)["complete"] is True  # every path of up to DEPTH keys is listed


def test_past_the_path_cap_the_listing_is_not_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(js, "MAX_PATHS", 3)
    found = json_of(part(['{"a": 1, "b": 2, "c": 3, "d": "x"}']))
    assert found["complete"] is False and len(found["paths"]) == 3


def test_too_much_text_in_a_row_group_leaves_no_json_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(js, "MAX_TEXT_BYTES", 10)
    assert part(['{"a": "0123456789"}']).columns[1].json is None


def test_integers_beyond_2_53_and_fractions_widen_the_bounds_outward() -> None:
    big = 2**53 + 1
    n = entry(part([f'{{"n": {big}}}', '{"n": 0.1}', f'{{"n": -{big}}}']), "n")["number"]
    assert decimal.Decimal(n["min"]) <= -big and decimal.Decimal(n["max"]) >= big
    assert n["min"] != -(2**53) and n["max"] != 2**53  # float(2**53 + 1) rounds to 2**53: widened
    assert (n["count"], n["integers"]) == (3, 2)
    f = entry(part(['{"n": 0.1}', '{"n": 0.3}']), "n")["number"]
    assert decimal.Decimal(f["min"]) <= decimal.Decimal("0.1") and decimal.Decimal(f["max"]) >= decimal.Decimal("0.3")
    assert f["min"] < 0.1 and f["max"] > 0.3  # the nearest doubles are 0.1000…0555 and 0.2999…9889: widened
    exact = entry(part(['{"n": 2}', '{"n": 7}']), "n")["number"]
    assert (exact["min"], exact["max"]) == (2.0, 7.0)
    h = entry(part(['{"n": 1e400}', '{"n": -1e400}', f'{{"n": {10**400}}}']), "n")["number"]
    assert "min" not in h and "max" not in h  # beyond float64: no bound, as with inf


def test_long_strings_are_truncated_like_other_string_bounds() -> None:
    long = "a" * 100
    s = entry(part([f'{{"s": "{long}"}}', f'{{"s": "{long}b"}}', '{"s": "é\\u00e9"}']), "s")["string"]
    assert s["min"] == "a" * 64 and s["minTruncated"] is True
    assert s["max"] == "éé" and "maxTruncated" not in s


def test_the_budget_drops_unusable_paths_then_shortens_then_the_widest() -> None:
    docs = [json.dumps({"mixed": i if i % 2 else str(i), "obj": {"x": None}, "ts": f"2026-11-{i % 28 + 1:02d}",
                        **{f"wide{k}": f"{k}" * 60 + str(i) for k in range(80)}}) for i in range(20)]
    raw = part(docs).columns[1]
    trimmed = stx.ColumnStats.from_dict(raw.to_dict())
    assert trimmed.json is not None
    size = len(json.dumps(trimmed.to_dict()["json"], separators=(",", ":"), ensure_ascii=False).encode())
    assert size <= js.BUDGET_BYTES
    kept = {tuple(e["path"]): e for e in trimmed.json["paths"]}
    assert ("ts",) in kept and ("obj", "x") in kept  # narrow and usable: kept
    assert ("mixed",) not in kept and ("obj",) not in kept  # no filter can use them: dropped first
    assert all(len(e["string"]["min"]) <= js.TRIM_STRING_LENGTH for e in kept.values() if "string" in e)
    assert trimmed.json["complete"] is False
    small = part(['{"a": "x"}'])  # within the budget: untouched
    assert json_of(small) == je.summarize(pa.array(['{"a": "x"}']))


def test_row_groups_merge_to_the_statistics_of_all_rows() -> None:
    a = ['{"k": "b", "n": 1}', '{"k": "c"}']
    b = ['{"n": 7.5}', None, '{"k": "a", "x": {"y": true}}']
    whole = json_of(part(a + b))
    assert stx.merge(part(a), part(b)).columns[1].json == whole
    schema = pa.schema([pa.field("payload", pa.string(), metadata={js.LADING_TYPE: b"json"}),
                        pa.field(fmt.TIME_COLUMN, pa.int64()), pa.field(fmt.DIFF_COLUMN, pa.int64())])
    acc = stx.Accumulator(schema, {"payload": 1})
    for docs in (a, b):
        acc.add(pa.table({"payload": pa.array(docs, pa.string()), fmt.TIME_COLUMN: [0] * len(docs),
                          fmt.DIFF_COLUMN: [1] * len(docs)}, schema=schema))
    assert acc.result().columns[1].json == whole


def test_a_merge_with_an_incomplete_side_drops_the_paths_it_may_hide() -> None:
    complete = json_of(part(['{"a": 1}']))
    partial = dict(json_of(part(['{"b": 2}'])), complete=False)
    merged = js.merge(complete, partial)
    assert merged is not None and merged["complete"] is False
    assert [e["path"] for e in merged["paths"]] == [["b"]]  # "a" may hide in the partial side
    assert js.merge(complete, None) is None


def test_a_tables_commit_records_json_statistics_in_strict_json(file_uri: Callable[[str], str]) -> None:
    uri = file_uri("events/")
    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("payload", "json"), ("note", "string")]))
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "payload": ['{"day": "2026-11-01", "n": 1e400}', None],
                     "note": ['{"day": "x"}', None]})
    writer.commit_parts(uri, writer.write_parts(uri, [data], log.snapshot().schema, write_id=fmt.new_write_id()),
                        log=log)
    commits = [p.read_text() for p in Path(uri.removeprefix("file://"), fmt.LOG_DIR).iterdir() if p.is_file()]
    for text in commits:
        json.loads(text, parse_constant=lambda name: pytest.fail(f"not RFC 8259: {name}"))
    assert any('"json"' in text for text in commits)
    (p,) = TableLog.open_existing(uri).snapshot().parts
    assert p.stats.columns[2].json is not None and p.stats.columns[2].json["docs"] == 1
    assert p.stats.columns[3].json is None  # a plain string column: no JSON statistics


def test_a_dictionary_array_gives_the_statistics_of_its_values() -> None:
    texts = ['{"a": 1, "s": "x"}', None, '{"a": 3}', '{"a": 1, "s": "x"}', "not json"]
    assert je.summarize(pa.array(texts).dictionary_encode()) == je.summarize(pa.array(texts))


def test_a_bin_pack_compaction_keeps_a_json_columns_statistics(file_uri: Callable[[str], str]) -> None:
    """A streamed bin-pack hands string columns (json ones too) to the writer as dictionary arrays:
    the compacted part's JSON statistics are those of all the rows it holds."""
    from lading_jobs import storage as st
    from lading_jobs.compact import task as compact_task
    from lading_jobs.compact.engine import compact
    from lading_jobs.engine import RunContext
    from lading_jobs.table import reader
    from lading_spec.compaction import parse_compaction

    uri = file_uri("events/")
    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("payload", "json")]))
    for n in range(3):
        data = pa.table({"id": pa.array([n, n + 10], pa.int64()),
                         "payload": [f'{{"day": "2026-11-0{n + 1}", "n": {n}}}', None]})
        writer.commit_parts(uri, writer.write_parts(uri, [data], log.snapshot().schema, write_id=fmt.new_write_id()),
                            log=log)
    storage = st.open_storage(uri)
    spec = parse_compaction({"table": uri, "since": {"version": 0}, "targetFileSize": "64MB", "minInputFiles": 2})
    assert compact(None, spec, RunContext(), storage=storage, runner=compact_task.in_process(storage)).groups == 1
    snap = TableLog.open_existing(uri).snapshot()
    (part,) = snap.parts
    stats = part.stats.columns[snap.schema.column("payload").id].json
    assert stats is not None and stats["docs"] == 3
    (day,) = [p for p in stats["paths"] if p["path"] == ["day"]]
    assert (day["string"]["min"], day["string"]["max"]) == ("2026-11-01", "2026-11-03"), day
    rows = reader.scan(uri)
    assert sorted(rows.column("id").to_pylist()) == [0, 1, 2, 10, 11, 12]
    assert sorted(rows.column("payload").drop_null().to_pylist())[0] == '{"day": "2026-11-01", "n": 0}'
