"""Loads end to end: real Spark tasks, the moto S3 server over HTTP and file://.

Every format × every onError mode, the rejected-rows file, the ledger and
``force``, ``validateOnly``, and creating a missing table. Tables are read back
with pyarrow straight from the committed parts, independently of the loader.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs import storage as st
from lading_jobs.ingest.stores import storage_for
from lading_jobs.load.job import Cancelled, run_load
from lading_jobs.table import format as fmt
from lading_jobs.table.log.commits import Change, LedgerEntry, TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark]

SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "name", "type": "string"},
          {"name": "amount", "type": "decimal(10,2)"}]


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


GOOD_PARQUET = _parquet(pa.table({"id": [1, 2], "name": ["a", "b"], "amount": [1.5, 2.0]}))
BAD_PARQUET = _parquet(pa.table({"id": [10, 11, 14], "name": ["c", "d", "f"], "amount": ["1", "oops", "4"]}))

# format -> (extension, files {name: bytes}, options, where the first error is)
DATA: dict[str, tuple[dict[str, bytes], dict[str, Any], str]] = {
    "csv": ({
        "good.csv": b"id,name,amount\n1,a,1.5\n2,b,2\n",
        "bad.csv": b"id,name,amount\n10,c,1\n11,d,oops\n12,\xff,2\n13,e\n14,f,4\n",
    }, {"header": True}, "line 3, column amount"),
    "json": ({
        "good.jsonl": b'{"id": 1, "name": "a", "amount": 1.5}\n{"id": 2, "name": "b", "amount": 2}\n',
        "bad.jsonl": (b'{"id": 10, "name": "c", "amount": 1}\n{"id": "x", "name": "d"}\n'
                      b'{"id": 12, "name": "\xff"}\n{"id": 13, "name": \n{"id": 14, "name": "f", "amount": 4}\n'),
    }, {}, "line 2, column id"),
    "parquet": ({
        "good.parquet": GOOD_PARQUET,
        "bad.parquet": BAD_PARQUET,
        "truncated.parquet": GOOD_PARQUET[: len(GOOD_PARQUET) // 2],
    }, {}, "row 2, column amount"),
}
REJECTED = {  # (file, position) of every rejected record under onError: continue
    "csv": [("bad.csv", 3), ("bad.csv", 4), ("bad.csv", 5)],
    "json": [("bad.jsonl", 2), ("bad.jsonl", 3), ("bad.jsonl", 4)],
    "parquet": [("bad.parquet", 2)],
}


def store(uri: str) -> st.Storage:
    return storage_for(uri, st.S3Settings.from_env())


def job(spec: dict[str, Any], run_id: str = "run-1") -> JobDocument:
    return JobDocument("CopyJob", "ns", "load", "uid", 1, run_id, dt.datetime(2025, 1, 1, tzinfo=dt.UTC), spec)


def put_files(prefix: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        store(prefix).put(st.join(prefix, name), data)


def table_rows(table: str) -> list[dict[str, Any]]:
    log = TableLog.open(table, store(table))
    assert log is not None, f"no table at {table}"
    snap = log.snapshot()
    storage = store(table)
    tables = [pq.read_table(pa.BufferReader(storage.read(snap.part_uri(p)))) for p in snap.parts]
    rows = pa.concat_tables(tables).to_pylist() if tables else []
    return sorted(rows, key=lambda r: r["id"])


def ids(table: str) -> list[int]:
    return [r["id"] for r in table_rows(table)]


def no_pending(table: str) -> bool:
    return store(table).list_pending_uploads(table) == []


def read_jsonl(uri: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in store(uri).read(uri).decode().splitlines()]


@pytest.fixture(params=["s3", "file"])
def root(request: pytest.FixtureRequest, file_uri: Callable[[str], str]) -> str:
    if request.param == "s3":
        return f"s3://{request.getfixturevalue('bucket')}/"
    return file_uri("root/")


@pytest.mark.s3
@pytest.mark.parametrize("fmt_name", ["csv", "json", "parquet"])
@pytest.mark.parametrize("on_error", ["abort", "skipFile", "continue"])
def test_every_format_and_error_mode(spark: Any, bucket: str, fmt_name: str, on_error: str) -> None:
    files, options, first_error = DATA[fmt_name]
    src, table, rejected = f"s3://{bucket}/in/", f"s3://{bucket}/tables/t/", f"s3://{bucket}/rejected/"
    put_files(src, files)
    spec = {"from": {"files": src, "format": fmt_name, "options": options},
            "to": {"table": table, "schema": SCHEMA}, "onError": on_error, "rejectedRows": rejected}
    result = run_load(spark, job(spec))
    statuses = {f["file"].rsplit("/", 1)[-1]: f["status"] for f in result["fileResults"]}
    if on_error == "abort":
        assert "rows" not in result
        assert f"/in/bad.{'jsonl' if fmt_name == 'json' else fmt_name}: {first_error}" in result["error"]
        assert TableLog.open(table, store(table)) is None  # the table was not even created
        assert list(store(table).list_objects(table)) == [] or \
            all(fmt.DATA_DIR + "/" not in o.uri for o in store(table).list_objects(table))
    elif on_error == "skipFile":
        assert result["rows"] == 2 and ids(table) == [1, 2]
        assert statuses[f"good.{'jsonl' if fmt_name == 'json' else fmt_name}"] == "loaded"
        assert statuses[f"bad.{'jsonl' if fmt_name == 'json' else fmt_name}"] == "skipped"
    else:
        assert ids(table) == [1, 2, 10, 14] and result["rows"] == 4
        assert statuses[f"bad.{'jsonl' if fmt_name == 'json' else fmt_name}"] == "partial"
        rows = table_rows(table)
        assert [str(r["amount"]) for r in rows] == ["1.50", "2.00", "1.00", "4.00"]
    if fmt_name == "parquet" and on_error != "abort":
        assert statuses["truncated.parquet"] in ("failed", "skipped")
    assert no_pending(f"s3://{bucket}/")
    # the rejected rows: every bad record, with file, line or row, reason and raw record
    entries = [e for uri in store(rejected).list_objects(rejected) if uri.uri.endswith(".jsonl")
               for e in read_jsonl(uri.uri)]
    unit = "row" if fmt_name == "parquet" else "line"
    got = sorted((e["file"].rsplit("/", 1)[-1], e[unit]) for e in entries)
    assert got == REJECTED[fmt_name]
    assert all(e["reason"] and e["record"] for e in entries)
    manifest = json.loads(store(result["manifest"]).read(result["manifest"]))
    assert manifest["committed"] == (on_error != "abort")
    assert manifest["rowsRejected"] == len(REJECTED[fmt_name])


def test_rejected_rows_file_content(spark: Any, root: str) -> None:
    put_files(root + "in/", DATA["csv"][0])
    spec = {"from": {"files": root + "in/", "pattern": "bad.*", "format": "csv", "options": {"header": True}},
            "to": {"table": root + "t/", "schema": SCHEMA}, "onError": "continue",
            "rejectedRows": root + "errors/"}
    result = run_load(spark, job(spec, "r-7"))
    assert result["rows"] == 2 and result["rowsRejected"] == 3
    assert result["rejectedRows"] == root + "errors/r-7/"
    entries = read_jsonl(root + "errors/r-7/rejected-00000.jsonl")
    bad = root + "in/bad.csv"
    assert entries[0] == {"file": bad, "line": 3, "column": "amount",
                          "reason": entries[0]["reason"], "record": "11,d,oops"}
    assert "'oops' is not a valid decimal(10,2)" in entries[0]["reason"]
    assert entries[1] == {"file": bad, "line": 4, "column": "name", "reason": "invalid UTF-8",
                          "record": "12,\\xff,2"}
    assert entries[2] == {"file": bad, "line": 5, "column": None, "reason": "expected 3 fields, found 2",
                          "record": "13,e"}
    assert result["manifest"] == root + "errors/r-7/manifest.json"


def test_to_iceberg_mirror_false_makes_a_table_without_the_mirror_and_true_switches_it_on(
        spark: Any, file_uri: Callable[[str], str]) -> None:
    """to.icebergMirror: false creates the table with the mirror off (commit 0's metadata, no metadata/
    files); true on that existing table switches it on with a commit of its own (operation
    ``properties``, what ``lading table mirror --on`` writes) before the load's commit, and the mirror
    catches up with every version: pyiceberg reads the load's rows."""
    from pyiceberg.table import StaticTable

    from lading_jobs.table.log.commits import read_commit

    src, table = file_uri("in/"), file_uri("t/")
    put_files(src, {"a.csv": b"1,a,1\n"})
    off = {"from": {"files": src, "format": "csv"}, "to": {"table": table, "schema": SCHEMA, "icebergMirror": False}}
    first = run_load(spark, job(off, "r1"))
    assert first["rows"] == 1 and "icebergMetadata" not in first, first
    assert TableLog.open_existing(table, store(table)).snapshot().meta.iceberg_mirror is False
    assert store(table).head(table + "metadata/v0.metadata.json") is None
    put_files(src, {"b.csv": b"2,b,2\n"})
    on = run_load(spark, job({**off, "to": {**off["to"], "icebergMirror": True}}, "r2"))
    snap = TableLog.open_existing(table, store(table)).snapshot()
    assert snap.meta.iceberg_mirror is True and snap.version == 2, snap.version
    assert read_commit(table, store(table), 1)["operation"] == "properties"  # the switch, then the load
    assert on["rows"] == 1 and on["icebergMetadata"] == table + "metadata/v2.metadata.json", on
    got = StaticTable.from_metadata(on["icebergMetadata"].removeprefix("file://")).scan().to_arrow()
    assert sorted(got.column("id").to_pylist()) == [1, 2] == ids(table)


def test_ledger_skips_loaded_files_until_they_change_or_force(spark: Any, root: str) -> None:
    src, table = root + "in/", root + "t/"
    put_files(src, {"a.csv": b"1,a,1\n2,b,2\n", "b.csv": b"3,c,3\n"})
    spec: dict[str, Any] = {"from": {"files": src, "format": "csv"}, "to": {"table": table, "schema": SCHEMA}}
    assert run_load(spark, job(spec, "r1"))["rows"] == 3
    again = run_load(spark, job(spec, "r2"))
    assert again["rows"] == 0 and again["filesAlreadyLoaded"] == 2 and ids(table) == [1, 2, 3]
    assert "icebergMetadata" not in again  # nothing committed
    assert TableLog.open(table, store(table)).snapshot().version == 0  # type: ignore[union-attr]  # nothing committed (commit 0 created the table with the first load)
    put_files(src, {"b.csv": b"3,c,3\n4,d,4\n"})  # a new version of b.csv: a different ETag and size
    changed = run_load(spark, job(spec, "r3"))
    assert changed["rows"] == 2 and changed["filesAlreadyLoaded"] == 1
    assert changed["icebergMetadata"] == table + "metadata/v1.metadata.json"  # the table's mirror of this commit
    assert ids(table) == [1, 2, 3, 3, 4]
    forced = run_load(spark, job({**spec, "force": True}, "r4"))
    assert forced["rows"] == 4 and ids(table) == [1, 1, 2, 2, 3, 3, 3, 4, 4]
    ledger = TableLog.open(table, store(table)).snapshot().ledger  # type: ignore[union-attr]
    assert set(ledger) == {src + "a.csv", src + "b.csv"}


def test_validate_only_reports_and_commits_nothing(spark: Any, root: str) -> None:
    put_files(root + "in/", DATA["json"][0])
    spec = {"from": {"files": root + "in/", "format": "json"}, "to": {"table": root + "t/", "schema": SCHEMA},
            "onError": "continue", "validateOnly": True}
    result = run_load(spark, job(spec))
    assert result["validateOnly"] is True and result["rows"] == 4 and result["rowsRejected"] == 3
    assert TableLog.open(root + "t/", store(root)) is None
    assert not [o for o in store(root).list_objects(root + "t/") if "/data/" in o.uri]
    assert no_pending(root)
    bad = next(f for f in result["fileResults"] if f["file"].endswith("bad.jsonl"))
    assert bad["status"] == "notLoaded" and bad["firstError"].startswith("line 2, column id")
    strict = run_load(spark, job({**spec, "onError": "abort"}, "r2"))
    assert "bad.jsonl: line 2, column id" in strict["error"]


def test_a_missing_table_is_created_with_keys_envelope_and_sort_order(spark: Any, root: str) -> None:
    put_files(root + "in/", {"x.csv": b"id,name,amount\n3,c,1\n1,a,2\n2,b,3\n"})
    spec = {"from": {"files": root + "in/x.csv", "format": "csv", "options": {"header": True}},
            "to": {"table": root + "t/", "schema": SCHEMA, "envelope": "upsert", "keyColumns": ["id"],
                   "sortBy": ["id"]}}
    assert run_load(spark, job(spec))["rows"] == 3
    snap = TableLog.open(root + "t/", store(root)).snapshot()  # type: ignore[union-attr]
    assert (snap.envelope, snap.key_columns, snap.sort_by) == ("upsert", ("id",), ("id",))
    assert snap.schema.names == ["id", "name", "amount"] and not snap.schema.column("id").nullable
    part = pq.read_table(pa.BufferReader(store(root).read(snap.part_uri(snap.parts[0]))))
    assert part.column("id").to_pylist() == [1, 2, 3]  # written in the sort order
    assert part.schema.field("id").metadata[b"PARQUET:field_id"] == b"1"
    assert snap.parts[0].stats.columns[1].min == 1 and snap.parts[0].stats.columns[1].max == 3
    # a second load upserts key 2; the table's own reader consolidates to the latest row per key
    put_files(root + "in/", {"y.csv": b"id,name,amount\n2,B,30\n"})
    assert run_load(spark, job({**spec, "from": {**spec["from"], "files": root + "in/y.csv"}}, "r2"))["rows"] == 1
    from lading_jobs.table.reader import read_table

    got = {r["id"]: r["name"] for r in read_table(spark, root + "t/").collect()}
    assert got == {1: "a", 2: "B", 3: "c"}


def test_infer_schema_from_the_files(spark: Any, root: str) -> None:
    put_files(root + "in/", {"a.parquet": GOOD_PARQUET})
    spec = {"from": {"files": root + "in/", "format": "parquet"},
            "to": {"table": root + "t/", "inferSchema": True}}
    assert run_load(spark, job(spec))["rows"] == 2
    schema = TableLog.open(root + "t/", store(root)).snapshot().schema  # type: ignore[union-attr]
    assert [(c.name, c.type) for c in schema.columns] == [("id", "bigint"), ("name", "string"), ("amount", "double")]


def test_max_errors_fails_the_whole_load(spark: Any, root: str) -> None:
    put_files(root + "in/", DATA["csv"][0])
    spec = {"from": {"files": root + "in/", "format": "csv", "options": {"header": True}},
            "to": {"table": root + "t/", "schema": SCHEMA}, "onError": "continue", "maxErrors": 2}
    result = run_load(spark, job(spec))
    assert "3 errors exceed maxErrors 2" in result["error"] and TableLog.open(root + "t/", store(root)) is None
    assert no_pending(root)


def test_no_matching_files_is_an_error_naming_the_prefix(spark: Any, root: str) -> None:
    spec = {"from": {"files": root + "nothing/", "format": "csv"}, "to": {"table": root + "t/", "schema": SCHEMA}}
    assert "no files found at " + root + "nothing/" in run_load(spark, job(spec))["error"]


def test_a_cancelled_load_leaves_nothing_behind(spark: Any, root: str) -> None:
    put_files(root + "in/", DATA["csv"][0])
    spec = {"from": {"files": root + "in/", "format": "csv", "options": {"header": True}},
            "to": {"table": root + "t/", "schema": SCHEMA}, "onError": "continue", "rejectedRows": root + "rej/"}
    cancel = threading.Event()
    cancel.set()  # as if SIGTERM arrived while the tasks ran: they wrote pending parts and rejects
    with pytest.raises(Cancelled):
        run_load(spark, job(spec), cancel=cancel)
    assert TableLog.open(root + "t/", store(root)) is None
    assert no_pending(root)
    assert [o.uri for o in store(root).list_objects(root) if "/in/" not in o.uri] == []


def test_a_big_parquet_file_is_read_by_several_tasks(spark: Any, root: str) -> None:
    ids_ = list(range(1, 601))
    amounts = [str(i) if i not in (150, 480) else "bad" for i in ids_]  # rows 150 and 480 do not cast
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": ids_, "name": [f"n{i}" for i in ids_], "amount": amounts}), buf,
                   row_group_size=100)
    put_files(root + "in/", {"big.parquet": buf.getvalue(), "small.parquet": GOOD_PARQUET})
    spec = {"from": {"files": root + "in/", "format": "parquet"}, "to": {"table": root + "t/", "schema": SCHEMA},
            "onError": "continue", "rejectedRows": root + "rej/"}
    from lading_jobs.ingest.plan import plan_tasks

    listed = sorted(store(root).list_objects(root + "in/"), key=lambda o: o.uri)
    chunk = len(buf.getvalue()) // 3
    tasks = plan_tasks(listed, "parquet", st.S3Settings.from_env(), chunk)
    assert len([t for t in tasks if t.uri.endswith("big.parquet")]) >= 3
    result = run_load(spark, job(spec), chunk_bytes=chunk)
    assert result["rows"] == 598 + 2 and result["rowsRejected"] == 2
    assert ids(root + "t/") == sorted([1, 2] + [i for i in ids_ if i not in (150, 480)])
    big = next(f for f in result["fileResults"] if f["file"].endswith("big.parquet"))
    assert big["status"] == "partial" and big["firstError"].startswith("row 150, column amount")
    rejected = [e for uri in store(root).list_objects(root + "rej/") if uri.uri.endswith(".jsonl")
                for e in read_jsonl(uri.uri)]
    assert sorted(e["row"] for e in rejected) == [150, 480]
    ledger = TableLog.open(root + "t/", store(root)).snapshot().ledger  # type: ignore[union-attr]
    assert ledger[root + "in/big.parquet"].rows == 598


def test_json_numbers_load_exactly_into_decimal_and_bigint(spark: Any, file_uri: Callable[[str], str]) -> None:
    """Fails on 1b6c3cc: 1234567890123456789.12 loaded as …768.00, 2.675 as 2.67, 2^53 + 1 as 2^53."""
    root = file_uri("root/")
    put_files(root + "in/", {"n.jsonl": b'{"id": 9007199254740993, "amount": 1234567890123456789.12}\n'
                                        b'{"id": 2, "amount": 2.675}\n{"id": 3, "amount": 0.07}\n'})
    spec = {"from": {"files": root + "in/", "format": "json"},
            "to": {"table": root + "t/", "schema": [{"name": "id", "type": "bigint"},
                                                   {"name": "amount", "type": "decimal(22,2)"}]},
            "onError": "continue"}
    result = run_load(spark, job(spec))
    assert result["rows"] == 2 and result["rowsRejected"] == 1, result
    assert [(r["id"], str(r["amount"])) for r in table_rows(root + "t/")] == [
        (3, "0.07"), (9007199254740993, "1234567890123456789.12")]
    assert result["fileResults"][0]["firstError"].startswith("line 2, column amount: '2.675' is not a valid")


VERBATIM = (b'{"id": 1, "s": 1.10, "v": 1e5, "doc": {"a": [1, 2.50]}}\n'
            b'{"id": 2, "s": 123456789012345678901234567890, "v": -0, "doc": -0.0}\n'
            b'{"id": 3, "s": "text", "v": true, "doc": "{\\"b\\": \\"\\u00e9\\"}"}\n'
            b'{"id": 4, "s": null, "v": [ 1,2 ], "doc": 1.0E+2}\n'
            b'{"id": 5, "s": 12, "v": 7, "doc": null}\n')


def test_json_numbers_and_nested_values_in_text_columns_load_as_spark_reads_them(
        spark: Any, file_uri: Callable[[str], str]) -> None:
    """Fails on 8560765: they went through pyarrow's types, so 1.10 loaded as '1.1', 1e5 as '100000',
    -0 as '0', a 30-digit number as a double's 17 digits, and {"a": [1, 2.50]} as '{"a":[1,2.5]}'."""
    root = file_uri("root/")
    put_files(root + "in/", {"v.jsonl": VERBATIM})
    spec = {"from": {"files": root + "in/", "format": "json"},
            "to": {"table": root + "t/", "schema": [{"name": "id", "type": "bigint"}, {"name": "s", "type": "string"},
                                                   {"name": "v", "type": "varchar(40)"},
                                                   {"name": "doc", "type": "json"}]}}
    result = run_load(spark, job(spec))
    assert result["rows"] == 5 and result["rowsRejected"] == 0, result
    path = root.removeprefix("file://") + "in/v.jsonl"
    expected = spark.read.schema("id bigint, s string, v string, doc string").json(path).orderBy("id").collect()
    assert [(r["id"], r["s"], r["v"], r["doc"]) for r in table_rows(root + "t/")] == [tuple(r) for r in expected]
    assert [r["s"] for r in expected][:2] == ["1.10", "123456789012345678901234567890"]  # Spark keeps the text


def test_the_ledger_check_is_linear_in_the_files_listed(spark: Any, file_uri: Callable[[str], str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on 1b6c3cc: a list membership test per file compared ObjectInfos n²/2 times."""
    root, n = file_uri("root/"), 3000
    src, table = root + "in/", root + "t/"
    put_files(src, {f"f{i:05d}.csv": b"1,a,1\n" for i in range(n)})
    listed = list(store(src).list_objects(src))
    log = TableLog.create(table, TableSchema.of([("id", "bigint", False), ("name", "string"), ("amount", "decimal(10,2)")]), storage=store(table))
    log.commit(Change(operation="load", ledger={o.uri: LedgerEntry(o.etag, o.size, 1) for o in listed}))
    compared = 0
    original = st.ObjectInfo.__eq__

    def counting(self: st.ObjectInfo, other: object) -> bool:
        nonlocal compared
        compared += 1
        return original(self, other)  # type: ignore[no-any-return]

    monkeypatch.setattr(st.ObjectInfo, "__eq__", counting)
    result = run_load(spark, job({"from": {"files": src, "format": "csv"}, "to": {"table": table}}))
    assert result["rows"] == 0 and result["filesAlreadyLoaded"] == n
    assert compared <= n, compared


def test_a_table_whose_checkpoint_holds_the_ledger_inline_still_skips_its_files_and_loads(
        spark: Any, file_uri: Callable[[str], str]) -> None:
    """Checkpoints written before the ledger's index (issue 30) hold the whole ledger inline: a load
    into such a table skips what it lists and loads the rest; the next checkpoint moves the
    ledger into shards."""
    import shutil
    from pathlib import Path

    root = file_uri("root/")
    src, table = root + "in/", root + "t/"
    put_files(src, {"a.csv": b"1,a,1\n", "b.csv": b"2,b,2\n"})
    spec: dict[str, Any] = {"from": {"files": src, "format": "csv"}, "to": {"table": table, "schema": SCHEMA}}
    assert run_load(spark, job(spec, "r1"))["rows"] == 2
    log = TableLog.open_existing(table, store(table))
    while log.version < fmt.CHECKPOINT_INTERVAL:
        log.commit(Change())
    checkpoint = Path(fmt.checkpoint_uri(table, fmt.CHECKPOINT_INTERVAL).removeprefix("file://"))
    doc = json.loads(checkpoint.read_bytes())
    doc.pop("ledgerIndex")
    doc["ledger"] = {u: e.to_dict() for u, e in log.snapshot().ledger.items()}  # as lading wrote it before
    checkpoint.write_text(json.dumps(doc))
    shutil.rmtree(Path(table.removeprefix("file://"), fmt.LEDGER_DIR))
    put_files(src, {"c.csv": b"3,c,3\n"})
    result = run_load(spark, job(spec, "r2"))
    assert result["rows"] == 1 and result["filesAlreadyLoaded"] == 2 and ids(table) == [1, 2, 3]
    log = TableLog.open_existing(table, store(table))
    while log.version < 2 * fmt.CHECKPOINT_INTERVAL:
        log.commit(Change())
    assert "ledgerIndex" in json.loads(Path(fmt.checkpoint_uri(table, 20).removeprefix("file://")).read_bytes())
    ledger = TableLog.open_existing(table, store(table)).snapshot().ledger
    assert set(ledger) == {src + "a.csv", src + "b.csv", src + "c.csv"} and ledger[src + "c.csv"].version == 11


def test_upsert_with_a_sort_order_other_than_the_key_keeps_each_keys_last_row(spark: Any, root: str) -> None:
    # Sorting by amount put key 1's later row (amount 3) before its earlier one (amount 5), and
    # the reader lets the row placed later in a part win: the table said 'first'.
    put_files(root + "in/", {"x.csv": b"id,name,amount\n1,first,5\n2,b,1\n1,second,3\n3,c,4\n"})
    spec = {"from": {"files": root + "in/x.csv", "format": "csv", "options": {"header": True}},
            "to": {"table": root + "t/", "schema": SCHEMA, "envelope": "upsert", "keyColumns": ["id"],
                   "sortBy": ["amount"]}}
    run_load(spark, job(spec))
    from lading_jobs.table.reader import read_table

    got = sorted((r["id"], r["name"]) for r in read_table(spark, root + "t/").collect())
    assert got == [(1, "second"), (2, "b"), (3, "c")]
    snap = TableLog.open(root + "t/", store(root)).snapshot()  # type: ignore[union-attr]
    part = pq.read_table(pa.BufferReader(store(root).read(snap.part_uri(snap.parts[0]))))
    assert [str(v) for v in part.column("amount").to_pylist()] == ["1.00", "3.00", "4.00"]  # still sorted
