"""Loads with a transform (``spec.transform``), end to end on file:// with the shared Spark session.

Each seed example loads real files with ``lading run`` (a CopyJob YAML, as a user writes it) and
the table's rows are compared with the same SELECT that Spark itself runs over the same files
(``spark.read.csv``), so a wrong
mapping, a lost row or a wrong cast fails. Errors: with ``onError: continue`` a row whose
expression fails is rejected with its file and line and the rest commit; with ``abort``
nothing commits.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from support.loads import job, store, table_rows

from lading import cli
from lading_jobs import storage as st
from lading_jobs.load.job import run_load
from lading_jobs.table.log.commits import TableLog
from lading_spec.errors import SpecError

pytestmark = [pytest.mark.spark]


def key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def spark_select(spark: Any, path: str, names: list[str], sql: str) -> list[dict[str, Any]]:
    """The same SELECT, run by Spark itself over the same CSV files."""
    df = spark.read.csv(path, header=False).toDF(*names)
    df.createOrReplaceTempView("seed_source")
    return [r.asDict() for r in spark.sql(sql).collect()]


def lading_run(spec: dict[str, Any], workdir: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``lading run copyjob.yaml --json`` on the CopyJob a user would write; its result."""
    manifest = workdir / "copyjob.yaml"
    # JSON is YAML with every string quoted: a column named y stays a string (kubectl, and so
    # lading run, read an unquoted y as true)
    manifest.write_text(json.dumps({"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob",
                                    "metadata": {"name": "seed-load"}, "spec": spec}))
    capsys.readouterr()
    code = cli.main(["run", str(manifest), "--master", "local[2]", "--json", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    return dict(json.loads(out.strip().splitlines()[-1]))


@pytest.fixture
def root(file_uri: Callable[[str], str]) -> str:
    return file_uri("root/")


def put(prefix: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        store(prefix).put(st.join(prefix, name), text.encode())


def test_column_list_with_fields_and_where(spark: Any, root: str, tmp_path: Path, keep_signals: None,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """COPY INTO t (x, y, w) SELECT a, a + b, to_string(c) FROM location WITH FIELDS (a, b, c) WHERE b::int > 2
    — z is not listed and takes its default."""
    src, table = root + "in/", root + "t/"
    put(src, {"1.csv": "1,2,x\n2,3,y\n3,4,\n", "2.csv": "10,1,q\n20,5,r\n"})
    spec = {"from": {"files": src, "format": "csv"},
            "to": {"table": table, "schema": [{"name": "x", "type": "int"}, {"name": "y", "type": "bigint"},
                                              {"name": "z", "type": "string", "default": "dflt"},
                                              {"name": "w", "type": "string"}]},
            "transform": {"columns": ["x", "y", "w"], "fields": ["a", "b", "c"],
                          "select": "SELECT a, a::int + b::int, string(c) FROM source WHERE b::int > 2"}}
    result = lading_run(spec, tmp_path, capsys)
    assert result["rows"] == 3 and result["rowsFiltered"] == 2 and result["rowsRejected"] == 0
    expected = spark_select(spark, src.removeprefix("file://"), ["a", "b", "c"],
                            "SELECT CAST(a AS int) AS x, CAST(a::int + b::int AS bigint) AS y, 'dflt' AS z, string(c) AS w "
                            "FROM seed_source WHERE b::int > 2")
    assert sorted(map(key, table_rows(table))) == sorted(map(key, expected))
    assert len(expected) == 3


def test_ranges_with_computed_date_parts(spark: Any, root: str, tmp_path: Path, keep_signals: None,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """COPY INTO t SELECT year(datetime($11)), month(datetime($11)), $1..$10, $21..$100 FROM location
    (here 24 fields: $1..$3, a timestamp in $4, $5..$6, $21..$24 → columns in table order)."""
    src, table = root + "in/", root + "t/"
    lines = []
    for r in range(1, 5):
        fields = [f"v{r}_{k}" for k in range(1, 25)]
        fields[3] = f"2024-0{r}-1{r} 10:00:00"
        lines.append(",".join(fields))
    put(src, {"a.csv": "\n".join(lines[:2]) + "\n", "b.csv": "\n".join(lines[2:]) + "\n"})
    kept = [1, 2, 3, 5, 6, 21, 22, 23, 24]
    schema = [{"name": "yr", "type": "int"}, {"name": "mo", "type": "int"}] + \
        [{"name": f"f{k}", "type": "string"} for k in kept]
    spec = {"from": {"files": src, "format": "csv"}, "to": {"table": table, "schema": schema},
            "transform": {"select": "SELECT year(timestamp($4)), month(timestamp($4)), $1..$3, $5..$6, $21..$24 "
                                    "FROM source"}}
    result = lading_run(spec, tmp_path, capsys)
    assert result["rows"] == 4 and result["rowsFiltered"] == 0
    names = [f"c{k}" for k in range(1, 25)]
    expected = spark_select(spark, src.removeprefix("file://"), names,
                            "SELECT year(timestamp(c4)) AS yr, month(timestamp(c4)) AS mo, "
                            + ", ".join(f"c{k} AS f{k}" for k in kept) + " FROM seed_source")
    assert sorted(map(key, table_rows(table))) == sorted(map(key, expected))
    assert {r["mo"] for r in expected} == {1, 2, 3, 4}


def test_typed_where_over_100_fields(spark: Any, root: str, tmp_path: Path, keep_signals: None,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """select $1..$99 where $100::int > 2, over 100 CSV fields."""
    src, table = root + "in/", root + "t/"
    rows = [",".join([str(r * 1000 + k) for k in range(1, 100)] + [str(r)]) for r in range(6)]
    put(src, {"wide.csv": "\n".join(rows) + "\n"})
    schema = [{"name": f"c{k}", "type": "bigint"} for k in range(1, 100)]
    spec = {"from": {"files": src, "format": "csv"}, "to": {"table": table, "schema": schema},
            "transform": {"select": "SELECT $1..$99 FROM source WHERE $100::int > 2"}}
    result = lading_run(spec, tmp_path, capsys)
    assert result["rows"] == 3 and result["rowsFiltered"] == 3
    expected = spark_select(spark, src.removeprefix("file://"), [f"c{k}" for k in range(1, 101)],
                            "SELECT " + ", ".join(f"CAST(c{k} AS bigint) AS c{k}" for k in range(1, 100))
                            + " FROM seed_source WHERE c100::int > 2")
    assert sorted(map(key, table_rows(table))) == sorted(map(key, expected)) and len(expected) == 3


SALES = {"s1.csv": "1,10,2024-01-05\n2,oops,2024-01-06\n3,30,2024-01-07\n",
         "s2.csv": "4,40,2024-02-01\n5,50,not a date\n6,60,2024-02-03\n"}
SALES_SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "amount", "type": "decimal(10,2)"},
                {"name": "day", "type": "date"}]


def _sales_spec(src: str, table: str, on_error: str, rejected: str) -> dict[str, Any]:
    return {"from": {"files": src, "format": "csv"}, "to": {"table": table, "schema": SALES_SCHEMA},
            "onError": on_error, "rejectedRows": rejected,
            "transform": {"fields": ["id", "amount", "day"],
                          "select": "SELECT id::bigint, amount::int / 10, to_date(day) FROM source "
                                    "WHERE id::int <> 6"}}


def test_failing_expression_continue_rejects_row_with_file_and_line(spark: Any, root: str) -> None:
    src, table, rejected = root + "in/", root + "t/", root + "rejected/"
    put(src, SALES)
    result = run_load(spark, job(_sales_spec(src, table, "continue", rejected)))
    assert result["rows"] == 3 and result["rowsRejected"] == 2 and result["rowsFiltered"] == 1
    assert sorted(r["id"] for r in table_rows(table)) == [1, 3, 4]
    assert {r["id"]: r["amount"] for r in table_rows(table)}[3] == Decimal("3.00")
    entries = [json.loads(line) for o in store(rejected).list_objects(rejected) if o.uri.endswith(".jsonl")
               for line in store(o.uri).read(o.uri).decode().splitlines()]
    got = sorted((e["file"].rsplit("/", 1)[-1], e["line"], e["column"]) for e in entries)
    assert got == [("s1.csv", 2, "amount"), ("s2.csv", 2, "day")]
    assert all(json.loads(e["record"])["id"] in ("2", "5") for e in entries)


def test_failing_expression_abort_commits_nothing(spark: Any, root: str) -> None:
    src, table, rejected = root + "in/", root + "t/", root + "rejected/"
    put(src, SALES)
    result = run_load(spark, job(_sales_spec(src, table, "abort", rejected)))
    assert "rows" not in result and "s1.csv: line 2, column amount" in result["error"]
    assert TableLog.open(table, store(table)) is None
    assert store(table).list_pending_uploads(table) == []


def test_validate_only_and_ledger(spark: Any, root: str) -> None:
    src, table = root + "in/", root + "t/"
    put(src, {"1.csv": "1,2\n3,4\n"})
    spec: dict[str, Any] = {"from": {"files": src, "format": "csv"},
                            "to": {"table": table, "schema": [{"name": "s", "type": "int"}]},
                            "transform": {"select": "SELECT $1::int + $2::int FROM source"}}
    checked = run_load(spark, job({**spec, "validateOnly": True}))
    assert checked["rows"] == 2 and TableLog.open(table, store(table)) is None
    assert run_load(spark, job(spec, "run-2"))["rows"] == 2
    again = run_load(spark, job(spec, "run-3"))  # the ledger: nothing loads twice
    assert again["filesAlreadyLoaded"] == 1 and sorted(r["s"] for r in table_rows(table)) == [3, 7]


def test_bad_sql_names_the_field(spark: Any, root: str) -> None:
    src, table = root + "in/", root + "t/"
    put(src, {"1.csv": "1,2\n"})
    spec = {"from": {"files": src, "format": "csv"}, "to": {"table": table, "schema": [{"name": "s", "type": "int"}]},
            "transform": {"select": "SELECT no_such_column FROM source"}}
    with pytest.raises(SpecError, match="transform.select"):
        run_load(spark, job(spec))
    spec["transform"] = {"select": "SELECT java_method('java.lang.System', 'getenv', 'HOME') FROM source"}
    with pytest.raises(SpecError, match=r"transform.select: java_method\(\) is not allowed"):
        run_load(spark, job(spec))
    spec["transform"] = {"select": "SELECT $1 FROM source WHERE $1 IN (SELECT 1)"}
    with pytest.raises(SpecError, match="transform.select: a subquery is not allowed"):
        run_load(spark, job(spec))
    spec["transform"] = {"select": "SELECT $3 FROM source"}
    with pytest.raises(SpecError, match=r"transform.select: \$3 is not a field"):
        run_load(spark, job(spec))


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "copyjob-load-transform.yaml"


@pytest.mark.s3
def test_lading_run_the_transform_example(spark: Any, s3_client: Any, keep_signals: None,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``lading run examples/copyjob-load-transform.yaml``: the table equals Spark's own SELECT."""
    if "lading-demo" not in {b["Name"] for b in s3_client.list_buckets().get("Buckets", [])}:
        s3_client.create_bucket(Bucket="lading-demo")
    src = "s3://lading-demo/incoming/events/"
    files = {"e1.csv": "1,2024-03-01 10:00:00,12.34,fr,ok\n2,2024-03-02 11:00:00,5,de,void\n",
             "e2.csv": "3,2024-03-03 12:00:00,0.5,us,ok\n"}
    put(src, files)
    assert cli.main(["run", str(EXAMPLE), "--master", "local[2]"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[0] == "COPY 2"
    local = Path(tempfile.mkdtemp())
    for name, text in files.items():
        (local / name).write_text(text)
    expected = spark_select(spark, str(local), ["id", "ts", "amount", "cc", "status"],
                            "SELECT id::bigint AS event_id, to_date(ts) AS day, "
                            "CAST(amount::decimal(12,2) * 100 AS decimal(14,0)) AS amount_cents, upper(cc) AS country, "
                            "'batch' AS channel FROM seed_source WHERE status = 'ok'")
    assert len(expected) == 2
    assert sorted(map(key, table_rows("s3://lading-demo/tables/events/"))) == sorted(map(key, expected))


def test_lading_render_carries_the_transform(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["render", str(EXAMPLE)]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    app = next(d for d in docs if d.get("kind") == "SparkApplication")
    document = json.loads(next(a for a in app["spec"]["arguments"] if a.startswith("{")))
    assert document["spec"]["transform"] == yaml.safe_load(EXAMPLE.read_text())["spec"]["transform"]


def test_parquet_chunks_through_a_transform(spark: Any, root: str) -> None:
    """A Parquet source keeps its types; a file read by several tasks merges its counts and rejects."""
    import io

    from lading_jobs.ingest.plan import plan_tasks

    ids_ = list(range(1, 301))
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": ids_, "code": [str(i) if i != 151 else "bad" for i in ids_]}), buf,
                   row_group_size=50)
    store(root).put(root + "in/big.parquet", buf.getvalue())
    chunk = len(buf.getvalue()) // 3
    listed = store(root).list_objects(root + "in/")
    assert len(plan_tasks(listed, "parquet", st.S3Settings.from_env(), chunk)) >= 3
    spec = {"from": {"files": root + "in/", "format": "parquet"},
            "to": {"table": root + "t/", "schema": [{"name": "id", "type": "bigint"}, {"name": "n", "type": "int"}]},
            "onError": "continue", "rejectedRows": root + "rej/",
            "transform": {"select": "SELECT id, code::int FROM source WHERE id % 3 <> 0"}}
    result = run_load(spark, job(spec), chunk_bytes=chunk)
    kept = [i for i in ids_ if i % 3 and i != 151]  # 151 does not cast: rejected; multiples of 3: filtered
    assert result["rows"] == len(kept) and result["rowsFiltered"] == 100 and result["rowsRejected"] == 1
    assert sorted(r["id"] for r in table_rows(root + "t/")) == kept
    assert {r["id"]: r["n"] for r in table_rows(root + "t/")}[152] == 152
    rejected = [json.loads(line) for o in store(root + "rej/").list_objects(root + "rej/") if o.uri.endswith(".jsonl")
                for line in store(o.uri).read(o.uri).decode().splitlines()]
    assert [(e["row"], e["column"]) for e in rejected] == [(151, "n")]


def test_a_cancelled_transform_load_leaves_nothing_behind(spark: Any, root: str) -> None:
    import threading

    from lading_jobs.load.job import Cancelled

    put(root + "in/", SALES)
    cancel = threading.Event()
    cancel.set()  # as if SIGTERM arrived while the tasks ran: they wrote pending parts and rejects
    with pytest.raises(Cancelled):
        run_load(spark, job(_sales_spec(root + "in/", root + "t/", "continue", root + "rej/")), cancel=cancel)
    assert TableLog.open(root + "t/", store(root)) is None
    assert store(root).list_pending_uploads(root) == []
    assert [o.uri for o in store(root).list_objects(root) if "/in/" not in o.uri] == []


def test_json_fields_keep_spark_json_types_and_a_misfit_value_rejects_its_line(spark: Any, root: str) -> None:
    # Before: the view took pyarrow's guess of the first file, a timestamp for an ISO string, which Spark
    # cannot take from Arrow (the job failed: UNSUPPORTED_ARROWTYPE Timestamp(SECOND)); a later file with
    # a fraction in a column the first file gave integers failed whole; a 'null' line crashed inference
    # and a broken line failed the run. A key first seen past a broken line ('ok') is a field too.
    src, table, rejected = root + "in/", root + "t/", root + "rejected/"
    put(src, {"a.jsonl": 'null\n{"id": 1, "at": "2024-01-02T10:00:00+02:00", "n": 1}\n{"id": broken\n'
                         '{"id": 4, "at": "later", "n": 4, "ok": true}\n',
              "b.jsonl": '{"id": 2, "at": "2024-01-03", "n": 2.5, "ok": false}\n'
                         '{"id": 3, "at": "soon", "n": 3, "ok": null}\n'})
    select = "SELECT id, at, try_to_timestamp(at), n * 2, ok FROM source"
    spec = {"from": {"files": src, "format": "json"}, "onError": "continue", "rejectedRows": rejected,
            "to": {"table": table, "schema": [{"name": "id", "type": "bigint"}, {"name": "at", "type": "string"},
                                              {"name": "ts", "type": "timestamp"}, {"name": "n2", "type": "bigint"},
                                              {"name": "ok", "type": "boolean"}]},
            "transform": {"select": select}}
    result = run_load(spark, job(spec))
    assert result["rows"] == 3 and result["rowsRejected"] == 3, json.dumps(result)[:3000]
    spark.read.json(src.removeprefix("file://") + "a.jsonl").where("id = 1").createOrReplaceTempView("source")
    a = [r.asDict() for r in spark.sql("SELECT at FROM source").collect()]
    got = sorted(table_rows(table), key=lambda r: r["id"])
    assert [(r["id"], r["at"], r["n2"], r["ok"]) for r in got] == [(1, "2024-01-02T10:00:00+02:00", 2, None),
                                                                   (3, "soon", 6, None), (4, "later", 8, True)]
    assert got[0]["at"] == a[0]["at"] and got[0]["ts"] is not None and got[1]["ts"] is None
    entries = sorted((e["file"].rsplit("/", 1)[-1], e["line"], e["column"], e["reason"])
                     for o in store(rejected).list_objects(rejected) if o.uri.endswith(".jsonl")
                     for e in map(json.loads, store(o.uri).read(o.uri).decode().splitlines()))
    assert [e[:3] for e in entries] == [("a.jsonl", 1, None), ("a.jsonl", 3, None), ("b.jsonl", 1, "n")]
    assert "not a JSON object" in entries[0][3]
    assert entries[2][3].startswith("2.5 is not a valid bigint") and "as the first file gave it" in entries[2][3]
