"""Statistics of ``variant`` columns per key path (``table.stats.variantstats``), as the writer computes and commits them.

Failure paths first: a value DuckDB cannot decode leaves the column without statistics and the
write goes on; too many bytes or paths bound the work. Then the statistics of random documents
built by Spark (every type a variant can hold: the integer types, float and double with NaN and
infinities, decimals up to 38 digits, date, timestamp, timestamp_ntz, strings short and long,
binary, boolean, variant null, objects, arrays, nesting past the depth limit, SQL NULL, missing
keys, mixed types per path) against Spark's own decoding (``tests/support/variantstats_oracle.py``);
merging and trimming keep the ``variant`` mark; and a table whose commit, and whose compaction's
output, record them."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from support.variantstats_oracle import decode, reference_summarize

from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats import jsonengine as je
from lading_jobs.table.stats import jsonstats as js
from lading_jobs.table.stats import part as stx
from lading_jobs.table.stats import variantstats as vs

KEYS = ["a", "b", "c", "d e", "ü"]


def variants(spark: Any, expressions: list[str]) -> tuple[pa.Array, list[Any]]:
    """Variant values computed by Spark from SQL ``expressions``: the Arrow column (as the writer
    receives it) and the collected ``VariantVal``s (NULL as None), in order."""
    sql = " UNION ALL ".join(f"SELECT {i} AS i, CAST({e} AS VARIANT) AS v" for i, e in enumerate(expressions))
    df = spark.sql(f"SELECT i, v FROM ({sql}) ORDER BY i")
    table = pa.Table.from_batches(df._collect_as_arrow())
    collected = [r.v for r in df.collect()]
    return table.column("v").combine_chunks(), collected


def _scalar(rng: random.Random) -> str:
    choice = rng.randrange(17)
    if choice == 0:
        return f"CAST({rng.choice([-128, 0, 7, 127])} AS TINYINT)"
    if choice == 1:
        return f"CAST({rng.choice([-32768, 300, 32767])} AS SMALLINT)"
    if choice == 2:
        return f"CAST({rng.choice([-2147483648, 70000, 2147483647])} AS INT)"
    if choice == 3:
        return f"CAST({rng.choice(['-9223372036854775808', '9007199254740993', '9223372036854775807'])} AS BIGINT)"
    if choice == 4:
        return f"CAST('{rng.choice(['NaN', 'Infinity', '-Infinity', '0.1', '-3.4e38', '1e-45'])}' AS FLOAT)"
    if choice == 5:
        return f"CAST('{rng.choice(['NaN', 'Infinity', '-Infinity', '0.1', '1.7976931348623157e308', '-5e-324'])}'" \
               " AS DOUBLE)"
    if choice == 6:
        return rng.choice(["CAST('12.34' AS DECIMAL(4, 2))", "CAST('-0.000001' AS DECIMAL(9, 6))",
                           "CAST('123456789012.345678' AS DECIMAL(18, 6))",
                           "CAST('12345678901234567890123456789012345678' AS DECIMAL(38, 0))",
                           "CAST('-1.2345678901234567890123456789012345678' AS DECIMAL(38, 37))"])
    if choice == 7:
        return rng.choice(["DATE'2026-11-01'", "DATE'1500-02-28'", "DATE'9999-12-31'"])
    if choice == 8:
        return rng.choice(["TIMESTAMP'2026-11-01 10:00:00.123456+02:00'", "TIMESTAMP'1969-12-31 23:59:59.999999Z'"])
    if choice == 9:
        return rng.choice(["TIMESTAMP_NTZ'2026-11-01 10:00:00.5'", "TIMESTAMP_NTZ'0001-01-01 00:00:00'"])
    if choice == 10:
        return rng.choice(["'x'", "''", "'é\"\\\\'", "repeat('yz', 60)", "'𝄞 long ' || repeat('q', 100)"])
    if choice == 11:
        return rng.choice(["X'0102'", "X''"])
    if choice == 12:
        return rng.choice(["true", "false"])
    if choice == 13:
        return "parse_json('null')"
    if choice == 14:
        return rng.choice(["array(1, 2)", "parse_json('[]')", "parse_json('[{\"a\": 1}]')"])
    if choice == 15:
        return rng.choice(["parse_json('{}')", "parse_json('1.5e300')", "parse_json('-12.5')"])
    return str(rng.randrange(-5, 5))


def _object(rng: random.Random, depth: int) -> str:
    keys = rng.sample(KEYS, rng.randrange(1, 4))
    fields = ", ".join(f"'{k}', {_object(rng, depth + 1) if depth < 6 and rng.random() < 0.35 else _scalar(rng)}"
                       for k in keys)
    return f"named_struct({fields})"


def _document(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.08:
        return "NULL"
    if r < 0.16:
        return _scalar(rng)
    return f"to_variant_object({_object(rng, 1)})"


def test_a_value_duckdb_cannot_decode_gives_no_statistics_and_the_write_goes_on(
        spark: Any, file_uri: Callable[[str], str]) -> None:
    column, _ = variants(spark, ["to_variant_object(named_struct('a', 1))", "parse_json('2')"])
    value, metadata = column.field("value").to_pylist(), column.field("metadata").to_pylist()
    metadata[0] = bytes([metadata[0][0] | 0x02]) + metadata[0][1:]  # encoding version 3
    value[1] = b"\xff\x01"  # a primitive type no version defines
    for bad in (pa.StructArray.from_arrays([pa.array(value[:1], pa.binary()), pa.array(metadata[:1], pa.binary())],
                                           names=["value", "metadata"]),
                pa.StructArray.from_arrays([pa.array(value, pa.binary()), pa.array(metadata, pa.binary())],
                                           names=["value", "metadata"])):
        assert vs.summarize(bad) is None
    uri = file_uri("events/")
    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("v", "variant")]))
    data = pa.table({"id": pa.array([1, 2], pa.int64()),
                     "v": pa.StructArray.from_arrays([pa.array(value, pa.binary()), pa.array(metadata, pa.binary())],
                                                     names=["value", "metadata"])})
    writer.commit_parts(uri, writer.write_parts(uri, [data], log.snapshot().schema, write_id=fmt.new_write_id()),
                        log=log)
    (p,) = TableLog.open_existing(uri).snapshot().parts
    assert p.stats.rows == 2 and p.stats.columns[2].json is None


def test_too_many_bytes_or_paths_bound_the_work(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = ", ".join(f"'k{i:03}', {i}" for i in range(12))
    column, collected = variants(spark, [f"to_variant_object(named_struct({keys}, 'z', named_struct('y', 1)))"])
    monkeypatch.setattr(js, "MAX_PATHS", 10)
    found = vs.summarize(column)
    assert found is not None and found["complete"] is False and len(found["paths"]) == 10
    reference = {tuple(e["path"]): e for e in reference_summarize(decode(collected))["paths"]}
    assert all(e == reference[tuple(e["path"])] for e in found["paths"])
    monkeypatch.setattr(js, "MAX_TEXT_BYTES", 8)
    assert vs.summarize(column) is None


def test_random_documents_match_sparks_own_decoding(spark: Any) -> None:
    rng = random.Random(32)
    for _ in range(3):
        column, collected = variants(spark, [_document(rng) for _ in range(40)])
        assert vs.summarize(column) == reference_summarize(decode(collected))


def test_each_kind_and_its_bounds(spark: Any) -> None:
    column, _ = variants(spark, [
        "to_variant_object(named_struct('n', CAST(9007199254740993 AS BIGINT), 'd', DATE'2026-11-01',"
        " 'f', CAST('NaN' AS DOUBLE), 'm', CAST('12.34' AS DECIMAL(4, 2)), 'b', X'01', 'x', parse_json('null')))",
        "to_variant_object(named_struct('n', CAST('-Infinity' AS FLOAT), 'd', DATE'1970-01-02', 'f', 1,"
        " 't', TIMESTAMP'1970-01-01 00:00:01Z', 'u', TIMESTAMP_NTZ'1970-01-01 00:00:02'))",
        "NULL", "parse_json('[1]')"])
    found = vs.summarize(column)
    assert found is not None and (found["docs"], found["variant"]) == (3, True)
    e = {e["path"][0]: e for e in found["paths"]}
    assert e["n"]["number"] == {"count": 2, "integers": 1, "max": 9007199254740994.0}  # -inf: no min; 2^53+1 rounded up
    assert e["d"] == {"path": ["d"], "present": 2, "date": {"count": 2, "min": 1, "max": 20758}}
    assert e["f"]["number"] == {"count": 2, "integers": 1, "min": 1.0, "nan": 1}  # NaN sorts above all: no max
    assert e["m"]["number"] == {"count": 1, "integers": 0, "min": 12.34, "max": 12.340000000000002}
    assert e["b"] == {"path": ["b"], "present": 1, "other": {"count": 1}}
    assert e["x"] == {"path": ["x"], "present": 1, "null": 1}
    assert e["t"]["timestamp"] == {"count": 1, "min": 1_000_000, "max": 1_000_000}
    assert e["u"]["timestamp_ntz"] == {"count": 1, "min": 2_000_000, "max": 2_000_000}


def test_merge_and_trim_keep_the_variant_mark(spark: Any) -> None:
    a, ca = variants(spark, ["to_variant_object(named_struct('t', TIMESTAMP'2026-11-01 00:00:00Z', 'f',"
                             " CAST('NaN' AS DOUBLE), 'o', X'00'))"])
    b, cb = variants(spark, ["to_variant_object(named_struct('t', TIMESTAMP'2026-11-02 00:00:00Z', 'f', 2.5,"
                             " 'o', X'01'))", "NULL"])
    sa, sb = vs.summarize(a), vs.summarize(b)
    merged = js.merge(sa, sb)
    assert merged == reference_summarize(decode(ca + cb))
    assert merged is not None and merged["variant"] is True
    assert js.merge(sa, je.summarize(pa.array(['{"t": 1}']))) is None  # never mixed with a json column's
    stats = stx.ColumnStats(nulls=0, json=merged)
    assert stx.ColumnStats.from_dict(json.loads(json.dumps(stats.to_dict()))).json == merged
    f, o, t = merged["paths"]
    assert o["path"] == ["o"]
    trimmed = js.trim(merged, budget=js._size(dict(merged, complete=False, paths=[f, t])))
    assert trimmed == dict(merged, complete=False, paths=[f, t])  # "o" (other: no bounds) goes first
    trimmed = js.trim(merged, budget=js._size(dict(merged, complete=False, paths=[f])))
    assert trimmed == dict(merged, complete=False, paths=[f])  # then the widest; a timestamp is never shortened


def test_a_tables_commit_and_its_compaction_record_variant_statistics(
        spark: Any, file_uri: Callable[[str], str]) -> None:
    from lading_jobs import storage as st
    from lading_jobs.compact import task as compact_task
    from lading_jobs.compact.engine import compact
    from lading_jobs.engine import RunContext
    from lading_spec.compaction import parse_compaction

    uri = file_uri("events/")
    log = TableLog.create(uri, TableSchema.of([("id", "bigint"), ("v", "variant")]))
    decoded = []
    for n in range(3):
        column, collected = variants(spark, [f"to_variant_object(named_struct('day', DATE'2026-11-0{n + 1}',"
                                             f" 'n', {n}))", "NULL"])
        decoded += decode(collected)
        data = pa.table({"id": pa.array([n, n + 10], pa.int64()), "v": column})
        writer.commit_parts(uri, writer.write_parts(uri, [data], log.snapshot().schema, write_id=fmt.new_write_id()),
                            log=log)
    first = TableLog.open_existing(uri).snapshot().parts[0].stats.columns[2].json
    assert first is not None and first["variant"] is True and first["docs"] == 1
    storage = st.open_storage(uri)
    spec = parse_compaction({"table": uri, "since": {"version": 0}, "targetFileSize": "64MB", "minInputFiles": 2})
    assert compact(None, spec, RunContext(), storage=storage, runner=compact_task.in_process(storage)).groups == 1
    (part,) = TableLog.open_existing(uri).snapshot().parts
    assert part.stats.columns[2].json == reference_summarize(decoded)
