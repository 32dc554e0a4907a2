"""The Arrow-only unload path against the Spark SQL path: the same CopyJob writes the same bytes.

Each case runs one spec twice, once per path (``run_unload(path=...)``), on the same
input, and compares every output file byte for byte and the manifests field for field
(apart from what names the run: run id, destination, times, and the path marker). The
input holds a column of every type lading maps (tests/support/every_type.py), plus
a partition key, a double with NaN, -0.0, 0.0 and NULL, and enough rows for several
batches (``maxRecordsPerBatch`` is lowered) and several files per task
(``maxFileSize``); small ``openCostInBytes`` packs several input files into one task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support import every_type
from support.unload import job_doc, spark_conf

from lading_jobs.unload.job import run_unload
from lading_spec.copyjob import parse_copyjob

pytestmark = [pytest.mark.spark]

ROWS = 6000
RUN_FIELDS = ("runId", "destination", "startTime", "endTime", "durationSeconds", "path")


def small_tasks(spark: Any) -> Any:
    """Batches of 500 rows, and input files packed into tasks (open cost of 1 byte)."""
    return spark_conf(spark, **{"spark.sql.execution.arrow.maxRecordsPerBatch": "500",
                                "spark.sql.files.openCostInBytes": "1"})


QUERY = f"""
SELECT e.*, r, CAST(r % 2 AS INT) AS p,
       concat(sha2(CAST(r AS STRING), 512), sha2(CAST(-r AS STRING), 512), sha2(CAST(r + 0.5 AS STRING), 512),
              sha2(CAST(r - 0.5 AS STRING), 512)) AS h,
       CASE r % 5 WHEN 0 THEN CAST('NaN' AS DOUBLE) WHEN 1 THEN -0.0D WHEN 2 THEN 0.0D WHEN 3 THEN NULL
                  ELSE 1.5D END AS fz
FROM ({every_type.QUERY}) e JOIN (SELECT id AS r FROM range(0, {ROWS})) ON e.id = r % 3 + 1
"""


# JSON inference (pyarrow's, over the first file) cannot type a column holding both numbers and
# "NaN" strings: the JSON input leaves the floats out.
JSON_QUERY = f"SELECT id, b, i64, dec, s, bin, d, ts, arr, st, m, r, p, h FROM ({QUERY})"


@pytest.fixture(scope="module")
def inputs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The rows as Parquet (several files), CSV with a header and JSON lines, written by lading."""
    root = tmp_path_factory.mktemp("arrowpath-in")
    out = {}
    for fmt, to in (("parquet", {"maxFileSize": "600kB"}), ("csv", {"options": {"header": True}}), ("json", {})):
        dest = f"file://{root}/{fmt}/"
        query = QUERY if fmt != "json" else JSON_QUERY
        spec = {"from": {"query": query}, "to": {"files": dest, "format": fmt, **to}}
        with spark_conf(spark, **{"spark.sql.shuffle.partitions": "2"}):
            assert run_unload(spark, job_doc(spec), parse_copyjob(spec), path="spark")["rows"] == ROWS
        out[fmt] = dest
    assert len(list((root / "parquet").glob("*.parquet"))) >= 3
    return out


def _outputs(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith("_") and ".lading" not in str(p)}


def _manifest(root: Path) -> dict[str, Any]:
    m = json.loads((root / "_lading_manifest.json").read_text())
    for f in m["files"]:
        f.pop("uri")
    return m


def both_paths(spark: Any, tmp_path: Path, spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``spec`` (its ``to.files`` filled in) on each path; assert equal files and manifests."""
    manifests = {}
    outputs = {}
    for path in ("spark", "arrow"):
        dest = tmp_path / path
        run = {**spec, "to": {**spec["to"], "files": f"file://{dest}/"}}
        result = run_unload(spark, job_doc(run), parse_copyjob(run), path=path)
        manifests[path] = _manifest(dest)
        outputs[path] = _outputs(dest)
        assert manifests[path]["path"]["name"] == path
        assert result["files"] == len(outputs[path]) > 0
    assert sorted(outputs["arrow"]) == sorted(outputs["spark"])
    for name, data in outputs["spark"].items():
        assert outputs["arrow"][name] == data, f"{name} differs between the paths"
    arrow, spark_m = ({k: v for k, v in m.items() if k not in RUN_FIELDS} for m in (manifests["arrow"],
                                                                                   manifests["spark"]))
    assert arrow == spark_m
    return manifests["arrow"], manifests["spark"]


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "to"), [
    ("parquet", {"options": {"compression": "zstd", "rowGroupSize": 700}, "maxFileSize": "300kB",
                 "partitionBy": ["p"]}),
    ("csv", {"options": {"header": True, "compression": "gzip"}, "maxFileSize": "256kB", "partitionBy": ["fz"]}),
    ("json", {"options": {"compression": "zstd"}, "maxFileSize": "256kB", "partitionBy": ["p", "b"],
              "keepPartitionColumns": True}),
    ("csv", {"options": {"forceQuoteAll": True}, "maxFileSize": "1MB"}),
])
def test_parquet_input_to_every_format_is_identical_on_both_paths(spark: Any, inputs: dict[str, str],
                                                                  tmp_path: Path, fmt: str,
                                                                  to: dict[str, Any]) -> None:
    spec = {"from": {"files": inputs["parquet"], "format": "parquet"}, "to": {"format": fmt, **to}}
    with small_tasks(spark):
        arrow, _ = both_paths(spark, tmp_path, spec)
    assert arrow["path"]["reason"] == "from.files: a format conversion"
    assert arrow["totals"]["rows"] == ROWS
    tasks = {f["task"] for f in arrow["files"]}
    assert len(arrow["files"]) > len(tasks)  # maxFileSize rolled files within tasks
    if to.get("partitionBy") == ["fz"]:
        dirs = {f["path"].split("/")[0] for f in arrow["files"]}
        assert dirs == {"fz=nan", "fz=0", "fz=1.5", "fz=__HIVE_DEFAULT_PARTITION__"}, dirs  # -0.0 with 0.0


@pytest.mark.slow
@pytest.mark.parametrize(("source", "fmt", "options"), [
    ("csv", "parquet", {"header": True}),
    ("json", "csv", {}),
])
def test_text_inputs_are_identical_on_both_paths(spark: Any, inputs: dict[str, str], tmp_path: Path,
                                                 source: str, fmt: str, options: dict[str, Any]) -> None:
    spec = {"from": {"files": inputs[source], "format": source, "options": options},
            "to": {"format": fmt, "maxFileSize": "1MB"}}
    with small_tasks(spark):
        arrow, _ = both_paths(spark, tmp_path, spec)
    assert arrow["totals"]["rows"] == ROWS


def test_a_projection_of_one_input_takes_the_arrow_path(spark: Any, inputs: dict[str, str], tmp_path: Path) -> None:
    spec = {"from": {"query": "SELECT r AS row_id, dec, s, ts, fz FROM (SELECT * FROM src) WHERE "
                              "(p IN (0, 2) OR fz = 'NaN') AND NOT s IS NULL AND ts >= '2000-01-01'",
                     "inputs": [{"name": "src", "files": inputs["parquet"], "format": "parquet"}]},
            "to": {"format": "parquet"}}
    with small_tasks(spark):
        arrow, _ = both_paths(spark, tmp_path, spec)
    assert arrow["path"]["reason"] == "from.query: a filtered projection of input 'src'"
    names = [f["name"] for f in arrow["schema"]["arrow"]]
    assert names == ["row_id", "dec", "s", "ts", "fz"]
    rows = pq.read_table(tmp_path / "arrow").to_pylist()
    assert len(rows) == arrow["totals"]["rows"] > 0
    assert all(r["s"] is not None for r in rows)


@pytest.mark.parametrize(("query", "why"), [
    ("SELECT p, count(*) AS n FROM src GROUP BY p", "Aggregate"),
    ("SELECT r + 1 AS r1 FROM src", "computes"),
    ("SELECT * FROM src ORDER BY p", "not provably sorted"),
    ("SELECT * FROM src ORDER BY f64", "sorts by f64 of type double"),
    ("SELECT * FROM src WHERE try_cast(s AS INT) IS NULL", "casts s from string"),
])
def test_queries_that_need_sql_stay_on_the_spark_path(spark: Any, inputs: dict[str, str], tmp_path: Path,
                                                      query: str, why: str) -> None:
    spec = {"from": {"query": query, "inputs": [{"name": "src", "files": inputs["parquet"], "format": "parquet"}]},
            "to": {"files": f"file://{tmp_path}/out/", "format": "csv"}}
    run_unload(spark, job_doc(spec), parse_copyjob(spec))
    marker = json.loads((tmp_path / "out" / "_lading_manifest.json").read_text())["path"]
    assert marker["name"] == "spark" and why in marker["reason"], marker


@pytest.fixture(scope="module")
def table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """An upsert table keyed by r: 2000 rows at time 5, a third of them updated at time 7."""
    from lading_jobs.table import writer
    from lading_jobs.table.log.commits import TableLog
    from lading_jobs.table.schema import TableSchema

    uri = (tmp_path_factory.mktemp("arrowpath-table") / "t").as_uri() + "/"
    schema = TableSchema.of([*every_type.COLUMNS, ("r", "bigint"), ("p", "int"), ("h", "string"), ("fz", "double")])
    TableLog.create(uri, schema, "upsert", ("r",))
    rows = spark.sql(f"SELECT * FROM ({QUERY}) WHERE r < 2000").repartition(2)
    writer.append(spark, rows, uri, logical_time=5, create=False)
    writer.append(spark, rows.where("r % 3 = 0").withColumn("h", rows.h.substr(1, 7)), uri, logical_time=7,
                  create=False)
    return uri


@pytest.mark.slow
@pytest.mark.parametrize("as_of", [6, None])
def test_a_table_copies_identically_on_both_paths(spark: Any, table: str, tmp_path: Path, as_of: int | None) -> None:
    source = {"table": table, **({"asOf": as_of} if as_of is not None else {})}
    spec = {"from": source, "to": {"format": "json", "partitionBy": ["p"], "maxFileSize": "256kB"}}
    with small_tasks(spark):
        arrow, _ = both_paths(spark, tmp_path, spec)
    assert arrow["path"]["reason"] == "from.table: a copy of the table"
    assert arrow["totals"]["rows"] == 2000  # consolidated: one row per key
    short = sum(1 for line in _lines(tmp_path / "arrow") if len(json.loads(line)["h"]) == 7)
    assert short == (0 if as_of == 6 else 667)  # asOf 6 sees no update


def _lines(root: Path) -> list[str]:
    return [line for p in sorted(root.rglob("*.jsonl")) for line in p.read_text().splitlines()]


def test_a_filtered_table_input_is_identical_on_both_paths(spark: Any, table: str, tmp_path: Path) -> None:
    spec = {"from": {"query": "SELECT r, h, ts, dec FROM t WHERE r >= 1500 AND NOT (p = 1)",
                     "inputs": [{"name": "t", "table": table}]},
            "to": {"format": "csv", "options": {"header": True}}}
    arrow, _ = both_paths(spark, tmp_path, spec)
    assert arrow["path"]["reason"] == "from.query: a filtered projection of input 't'"
    assert arrow["totals"]["rows"] == 250


# -- ORDER BY over an input that is already sorted ----------------------------------------------
def order_input(root: Path, files: list[list[list[int]]]) -> str:
    """Parquet files written by pyarrow, one per item of ``files``, a row group per list of keys
    ``k`` (in the order given), with a string, a decimal and a timestamp beside it."""
    import datetime as dt
    import decimal

    import pyarrow as pa

    root.mkdir(parents=True, exist_ok=True)
    for n, groups in enumerate(files):
        tables = [pa.table({
            "k": pa.array(keys, pa.int64()), "s": [f"s{k:05d}" for k in keys],
            "dec": pa.array([decimal.Decimal(k) / 4 for k in keys], pa.decimal128(12, 2)),
            "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=k) for k in keys],
                           pa.timestamp("us", tz="UTC"))}) for keys in groups]
        with pq.ParquetWriter(root / f"part-{n}.parquet", tables[0].schema) as w:
            for t in tables:
                w.write_table(t)
    return f"file://{root}/"


def ordered_lines(root: Path) -> list[str]:
    """The CSV output's lines, files in the manifest's order."""
    manifest = json.loads((root / "_lading_manifest.json").read_text())
    return [line for f in manifest["files"] for line in (root / f["path"]).read_text().splitlines()]


def order_spec(src: str, query: str, dest: Path) -> dict[str, Any]:
    return {"from": {"query": query, "inputs": [{"name": "src", "files": src, "format": "parquet"}]},
            "to": {"files": f"file://{dest}/", "format": "csv", "maxFileSize": "2kB"}}


def test_order_by_over_sorted_files_takes_the_arrow_path(spark: Any, tmp_path: Path) -> None:
    src = order_input(tmp_path / "in", [[list(range(0, 40)), list(range(40, 90))], [list(range(90, 100))],
                                        [list(range(100, 180))]])
    query = "SELECT s, dec, ts, k FROM src WHERE k <> 7 ORDER BY k"
    lines = {}
    for path in ("spark", "auto"):
        spec = order_spec(src, query, tmp_path / path)
        with small_tasks(spark):
            run_unload(spark, job_doc(spec), parse_copyjob(spec), path=path)
        marker = json.loads((tmp_path / path / "_lading_manifest.json").read_text())["path"]
        assert marker["name"] == ("spark" if path == "spark" else "arrow"), marker
        lines[path] = ordered_lines(tmp_path / path)
    assert marker["reason"] == "from.query: a filtered projection of input 'src', in order"
    assert lines["auto"] == lines["spark"]
    assert [int(line.split(",")[-1]) for line in lines["auto"]] == [k for k in range(180) if k != 7]
    desc = order_input(tmp_path / "desc", [[list(range(99, 49, -1))], [list(range(49, -1, -1))]])
    spec = order_spec(desc, "SELECT k FROM src ORDER BY k DESC, s", tmp_path / "desc-out")
    run_unload(spark, job_doc(spec), parse_copyjob(spec))
    assert json.loads((tmp_path / "desc-out" / "_lading_manifest.json").read_text())["path"]["name"] == "arrow"
    assert ordered_lines(tmp_path / "desc-out") == [str(k) for k in range(99, -1, -1)]


def test_order_by_over_overlapping_files_keeps_the_spark_path(spark: Any, tmp_path: Path) -> None:
    src = order_input(tmp_path / "in", [[list(range(0, 50))], [list(range(45, 90))]])
    spec = order_spec(src, "SELECT k FROM src ORDER BY k", tmp_path / "out")
    run_unload(spark, job_doc(spec), parse_copyjob(spec))
    marker = json.loads((tmp_path / "out" / "_lading_manifest.json").read_text())["path"]
    assert marker["name"] == "spark" and "not provably sorted" in marker["reason"], marker
    assert "part-0.parquet row group 0 and part-1.parquet row group 0 overlap" in marker["reason"]
    assert ordered_lines(tmp_path / "out") == sorted(ordered_lines(tmp_path / "out"), key=int)


YEAR_MONTH = ("ymi", "mo", "ymarr")


@pytest.fixture(scope="module")
def plain_table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A table of every type but the year-month intervals (char and varchar included)."""
    from lading_jobs.table import writer
    from lading_jobs.table.log.commits import TableLog
    from lading_jobs.table.schema import TableSchema

    uri = (tmp_path_factory.mktemp("arrowpath-plain") / "t").as_uri() + "/"
    columns = [c for c in every_type.COLUMNS if c[0] not in YEAR_MONTH]
    TableLog.create(uri, TableSchema.of([*columns, ("r", "bigint")]), "append", ())
    names = ", ".join(n for n, _ in columns)
    writer.append(spark, spark.sql(f"SELECT {names}, r FROM ({QUERY}) WHERE r < 300"), uri, logical_time=1,
                  create=False)
    return uri


def _files_spec(uri: str, fmt: str) -> dict[str, Any]:
    return {"from": {"files": uri, "format": fmt, **({"options": {"header": True}} if fmt == "csv" else {})},
            "to": {"format": "json"}}


def test_the_source_schema_is_the_dataframes_read_without_making_it(spark: Any, inputs: dict[str, str], table: str,
                                                                     plain_table: str) -> None:
    from lading_jobs.formats.spark import has_ym
    from lading_jobs.unload.job import open_source, source_frame

    specs = [_files_spec(uri, fmt) for fmt, uri in inputs.items()]
    specs += [{"from": {"table": t, "asOf": 6}, "to": {"format": "json"}} for t in (table, plain_table)]
    direct = 0
    for raw in specs:
        spec = parse_copyjob({**raw, "to": {**raw["to"], "files": "file:///unused/"}})
        opened = open_source(spec)
        assert opened is not None
        schema, frame = opened.schema(), source_frame(spark, spec).schema
        if has_ym(frame):
            assert schema is None, raw["from"]  # left to the DataFrame: Spark's nullability of the restored type
        else:
            assert schema == frame, raw["from"]  # char/varchar as the DataFrame's strings, metadata and all
            direct += 1
    assert direct == 3  # the CSV and JSON inputs (text: no year-month types) and the plain table


def test_files_and_tables_take_the_arrow_path_without_spark_sql(spark: Any, inputs: dict[str, str],
                                                                plain_table: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from lading_jobs.unload import job

    def no_frame(*_: Any) -> Any:
        raise AssertionError("an Arrow-only run of files or a table made the source DataFrame")

    monkeypatch.setattr(job, "source_frame", no_frame)
    for i, raw in enumerate([_files_spec(inputs["json"], "json"), {"from": {"table": plain_table},
                                                                   "to": {"format": "parquet"}}]):
        run = {**raw, "to": {**raw["to"], "files": f"file://{tmp_path}/{i}/"}}
        result = run_unload(spark, job_doc(run), parse_copyjob(run))  # path auto
        assert result["rows"] == (ROWS if i == 0 else 300)
        assert json.loads((tmp_path / str(i) / "_lading_manifest.json").read_text())["path"]["name"] == "arrow"
    with pytest.raises(AssertionError, match="made the source DataFrame"):  # a year-month column: Spark's schema
        run = {**_files_spec(inputs["parquet"], "parquet"), "to": {"format": "json", "files": f"file://{tmp_path}/y/"}}
        run_unload(spark, job_doc(run), parse_copyjob(run))


def test_the_source_is_read_once_and_planned_over(spark: Any, inputs: dict[str, str], plain_table: str,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The listing (or snapshot) the schema came from is the one the tasks are planned over:
    one LIST of the files, one read of the table's log, per run."""
    from lading_jobs.sources import files as sources_files
    from lading_jobs.table.log.commits import TableLog

    calls = {"list": 0, "log": 0}
    list_files, open_existing = sources_files.list_files, TableLog.open_existing

    def counted_list(*args: Any, **kwargs: Any) -> Any:
        calls["list"] += 1
        return list_files(*args, **kwargs)

    def counted_log(*args: Any, **kwargs: Any) -> Any:
        calls["log"] += 1
        return open_existing(*args, **kwargs)

    monkeypatch.setattr(sources_files, "list_files", counted_list)
    monkeypatch.setattr(TableLog, "open_existing", counted_log)
    for i, raw in enumerate([_files_spec(inputs["csv"], "csv"), {"from": {"table": plain_table},
                                                                 "to": {"format": "json"}}]):
        run = {**raw, "to": {**raw["to"], "files": f"file://{tmp_path}/{i}/"}}
        run_unload(spark, job_doc(run), parse_copyjob(run))
        assert json.loads((tmp_path / str(i) / "_lading_manifest.json").read_text())["path"]["name"] == "arrow"
    assert calls == {"list": 1, "log": 1}


@pytest.mark.slow
def test_a_table_of_char_and_varchar_copies_identically_on_both_paths(spark: Any, plain_table: str,
                                                                       tmp_path: Path) -> None:
    arrow, _ = both_paths(spark, tmp_path, {"from": {"table": plain_table}, "to": {"format": "parquet"}})
    types = {f["name"]: f["type"] for f in arrow["schema"]["spark"]["fields"]}
    assert types["vc"] == types["ch"] == "string"
