"""Jobs under faults on the wire: an unload, a load, a compaction and a StreamCopy file batch, each
through the fault proxy (tests/support/faultproxy.py, its endpoint given as the spec's
``connection.endpoint``, so the driver and the Spark tasks both go through it), for each fault
kind alone and mixed, at 5 % and 20 % of every request (see ``CASES``), with fixed seeds.

Every run either succeeds with exactly the right rows or fails with an error naming the object
and the fault; a rerun without faults then succeeds exactly; nothing is left pending; no
visible manifest names a missing file; no run outlasts the test's timeout.

The mixed faults include resets *after* a request landed, for every kind: conditional PUTs and
CompleteMultipartUpload decide their lost answers by reading back (tests/lading_jobs/
test_storage_lost_answers.py has one test per site).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from support.faultproxy import Fault, FaultProxy, Kind, Rates
from support.loads import job as load_job
from support.loads import table_rows
from support.unload import job_doc, parquet_input, s3_keys

from lading_jobs import retry
from lading_jobs.load.job import run_load
from lading_jobs.main import execute
from lading_jobs.result import Cancellation
from lading_jobs.stream.job import run_stream
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark, pytest.mark.s3]

NAMED = re.compile(r"s3://\S+ failed after \d+ attempts? in [\d.]+ s: the (store|connection|answer)")
"""How a run that still failed names the object and the fault (lading_jobs.storage)."""


def faults(kind: str, rate: float) -> dict[Kind | str, Rates]:
    """The proxy's rates: one fault kind at ``rate`` of every request, or all of them (``mixed``)."""
    if kind == "mixed":
        return {"*": Rates.mixed(rate, delay_seconds=0.05)}
    return {"*": Rates(**{kind: rate}, delay_seconds=0.05)}


KINDS = ["error_5xx", "slowdown", "reset_before", "truncate", "delay"]
RATES = [0.05, 0.20] if os.environ.get("LADING_FAULT_MATRIX") == "full" else [0.20]
CASES = [pytest.param(k, r, id=f"{k}-{int(r * 100)}pct") for k in KINDS for r in RATES] + \
    [pytest.param("mixed", r, id=f"mixed-{int(r * 100)}pct") for r in (0.05, 0.20)]
"""Each kind alone at 20 % and every kind mixed at 5 % and 20 %, every job. A kind alone at 5 %
faults a subset of the requests it faults at 20 % (the same seed: request n of a kind is faulted
when its draw is below the rate), so it runs only with ``LADING_FAULT_MATRIX=full`` (the machine
is shared; each case is a Spark job or two)."""


@pytest.fixture
def proxy(fault_proxy: FaultProxy) -> FaultProxy:
    fault_proxy.seed = 46  # a fixed seed: the same requests faulted each run
    return fault_proxy


@dataclass
class Outcome:
    result: dict[str, Any]
    requests: int
    injected: int


def run_under(proxy: FaultProxy, rates: dict[Kind | str, Rates] | None, run: Callable[[], dict[str, Any]]
              ) -> Outcome:
    proxy.reset_counts()
    proxy.set_rates(rates)
    try:
        result = run()
    finally:
        proxy.set_rates(None)
    return Outcome(result, proxy.total(), len(proxy.injected))


def check_run(proxy: FaultProxy, rates: dict[Kind | str, Rates], run: Callable[[], dict[str, Any]],
              exact: Callable[[dict[str, Any]], None]) -> Outcome:
    """Run under faults: exact rows, or an error naming the object and the fault and then a rerun
    (no faults) with exact rows."""
    first = run_under(proxy, rates, run)
    assert first.injected > 0, "no fault was injected: the case tests nothing"
    if "error" in first.result:
        assert NAMED.search(first.result["error"]), first.result["error"]
        again = run_under(proxy, None, run)
        assert "error" not in again.result, again.result
        exact(again.result)
    else:
        exact(first.result)
    return first


def no_pending(s3_client: Any, bucket: str) -> None:
    assert s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


# -- an unload -------------------------------------------------------------------------------------
ROWS = 240


@pytest.fixture(scope="module")
def unload_input(spark: Any, tmp_path_factory: Any) -> dict[str, Any]:
    df = spark.range(0, ROWS, numPartitions=2).selectExpr("id", "concat('row ', CAST(id AS STRING)) AS note")
    return parquet_input(df, tmp_path_factory.mktemp("faults-in"), "faults_src", files=2)


def unload_case(spark: Any, bucket: str, s3_client: Any, endpoint: str, source: dict[str, Any]
                ) -> tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None]]:
    """Eight partition directories: files written as multipart uploads, a manifest, an intent. No
    truncated bodies (``JOB_CASES``): the unload reads no object from the store here (its input is
    local; an input on S3 is read by the same storage reads the other jobs' cases go through)."""
    dest = f"s3://{bucket}/exports/"
    doc = job_doc({"from": {"query": "SELECT id, note, id % 8 AS p FROM faults_src", "inputs": [source]},
                   "to": {"files": dest, "format": "csv", "ifExists": "replace", "partitionBy": ["p"]},
                   "connection": {"endpoint": endpoint}})

    def run() -> dict[str, Any]:
        return execute(doc, lambda: spark, Cancellation())

    def exact(result: dict[str, Any]) -> None:
        assert result["rows"] == ROWS
        manifest = json.loads(s3_client.get_object(Bucket=bucket, Key="exports/_lading_manifest.json")["Body"].read())
        keys = set(s3_keys(s3_client, bucket, "exports/"))
        named = {f"exports/{f['path']}" for f in manifest["files"]}
        assert named <= keys, f"the manifest names missing files: {named - keys}"
        assert len(named) >= 8  # a file per partition directory at least
        ids: list[int] = []
        for key in sorted(named):
            text = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
            ids += [int(r[0]) for r in csv.reader(io.StringIO(text)) if r and r[0] != "id"]
        assert sorted(ids) == list(range(ROWS))
        no_pending(s3_client, bucket)

    return run, exact



# -- a load ----------------------------------------------------------------------------------------
LOAD_SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "name", "type": "string"}]


def put_csvs(s3_client: Any, bucket: str, prefix: str) -> None:
    """Four CSV files of 50 rows (ids 0-199) under ``prefix``, written straight to moto."""
    for f in range(4):
        body = "id,name\n" + "".join(f"{f * 50 + i},n{f}-{i}\n" for i in range(50))
        s3_client.put_object(Bucket=bucket, Key=f"{prefix}f{f}.csv", Body=body.encode())


def exact_ids(s3_client: Any, bucket: str, table: str) -> None:
    """The table holds ids 0-199 once each, and nothing is pending in the bucket."""
    assert sorted(r["id"] for r in table_rows(table)) == list(range(200))
    no_pending(s3_client, bucket)


def load_case(spark: Any, bucket: str, s3_client: Any, endpoint: str
              ) -> tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None]]:
    put_csvs(s3_client, bucket, "in/")
    table = f"s3://{bucket}/tables/t/"
    spec = {"from": {"files": f"s3://{bucket}/in/", "format": "csv", "options": {"header": True}},
            "to": {"table": table, "schema": LOAD_SCHEMA}, "connection": {"endpoint": endpoint}}
    run_id = f"load-{uuid.uuid4().hex[:6]}"

    def run() -> dict[str, Any]:
        return run_load(spark, load_job(spec, run_id))

    return run, lambda result: exact_ids(s3_client, bucket, table)



# -- a compaction ----------------------------------------------------------------------------------
COMPACT_SCHEMA = TableSchema.of([("id", "bigint"), ("note", "string")])


def fill(uri: str, commits: int = 4, per_commit: int = 2) -> None:
    """A table of small parts, written straight to moto (not through the proxy)."""
    log = TableLog.open(uri) or TableLog.create(uri, COMPACT_SCHEMA, "append", ())
    for c in range(commits):
        tables = [pa.table({"id": pa.array(range((c * per_commit + p) * 30, (c * per_commit + p + 1) * 30), pa.int64()),
                            "note": [f"c{c}p{p}"] * 30, fmt.TIME_COLUMN: pa.array([c + 1] * 30, pa.int64())})
                  for p in range(per_commit)]
        written = writer.write_parts(uri, tables, COMPACT_SCHEMA, write_id=fmt.new_write_id(), one_part_per_table=True)
        writer.commit_parts(uri, written, log=log)


def table_counter(uri: str) -> Counter[tuple[Any, ...]]:
    t = reader.scan(uri)
    return Counter(zip(*(t.column(c).to_pylist() for c in COMPACT_SCHEMA.names), strict=True))


def compaction_case(spark: Any, bucket: str, s3_client: Any, endpoint: str
                    ) -> tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None]]:
    uri = f"s3://{bucket}/compact/"
    fill(uri)
    before = table_counter(uri)
    spec = {"table": uri, "minInputFiles": 2, "connection": {"endpoint": endpoint}}
    doc = JobDocument(kind="Compaction", namespace="ns", name="c", uid="u", generation=1,
                      run_id=f"compact-{uuid.uuid4().hex[:6]}", run_time=load_job({}).run_time, spec=spec)

    def run() -> dict[str, Any]:
        return execute(doc, lambda: spark, Cancellation())

    def exact(result: dict[str, Any]) -> None:
        assert table_counter(uri) == before
        assert len(TableLog.open_existing(uri).snapshot().parts) == 1
        no_pending(s3_client, bucket)

    return run, exact



# -- a StreamCopy file batch -------------------------------------------------------------------------
def stream_doc(bucket: str, endpoint: str, run_id: str) -> JobDocument:
    spec = {"source": {"files": {"uri": f"s3://{bucket}/landing/", "format": "csv", "options": {"header": True}}},
            "target": {"table": f"s3://{bucket}/streamed/", "schema": LOAD_SCHEMA},
            "connection": {"endpoint": endpoint}}
    return JobDocument("StreamCopy", "ns", "files", "uid", 1, run_id, load_job({}).run_time, spec)


def stream_case(spark: Any, bucket: str, s3_client: Any, endpoint: str
                ) -> tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None]]:
    put_csvs(s3_client, bucket, "landing/")
    doc = stream_doc(bucket, endpoint, f"stream-{uuid.uuid4().hex[:6]}")

    def run() -> dict[str, Any]:
        return run_stream(spark, doc, once=True, progress_port=None)

    return run, lambda result: exact_ids(s3_client, bucket, f"s3://{bucket}/streamed/")



# -- every job, every case ---------------------------------------------------------------------------
JOB_CASES = [pytest.param(job, *case.values, id=f"{job}-{case.id}") for job in ("unload", "load", "compaction", "stream")
             for case in CASES if not (job == "unload" and case.values[0] == "truncate")]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("job", "kind", "rate"), JOB_CASES)
def test_a_job_under_faults(spark: Any, bucket: str, s3_client: Any, proxy: FaultProxy,
                            request: pytest.FixtureRequest, job: str, kind: str, rate: float) -> None:
    if job == "unload":
        case = unload_case(spark, bucket, s3_client, proxy.url, request.getfixturevalue("unload_input"))
    else:
        case = {"load": load_case, "compaction": compaction_case, "stream": stream_case}[job](
            spark, bucket, s3_client, proxy.url)
    check_run(proxy, faults(kind, rate), *case)


# -- item 3 on the StreamCopy batch path: a file whose reads keep failing goes to unreadFiles -------
@pytest.mark.timeout(300)
@pytest.mark.parametrize("fmt_name", ["csv", "parquet"])
def test_a_file_whose_body_keeps_breaking_is_unread_and_loaded_by_the_next_batch(
        spark: Any, bucket: str, s3_client: Any, proxy: FaultProxy, fmt_name: str) -> None:
    """docs/streamcopy.md: a file hit by a storage error is no rejected row; it is listed in
    ``unreadFiles`` and read again by the next batch. The GETs of a.<fmt> are cut short as many times
    as the retry policy tries (the body is read inside the retry, so each cut is one attempt): the
    first batch loads b.<fmt> and leaves a.<fmt> unread, the next batch loads it, once."""
    import pyarrow.parquet as pq

    def data(ids: list[int]) -> bytes:
        if fmt_name == "csv":
            return ("id,name\n" + "".join(f"{i},x{i}\n" for i in ids)).encode()
        buf = io.BytesIO()
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"x{i}" for i in ids]}), buf,
                       row_group_size=max(1, len(ids) // 4))
        return buf.getvalue()

    s3_client.put_object(Bucket=bucket, Key=f"landing/a.{fmt_name}", Body=data(list(range(0, 400))))
    s3_client.put_object(Bucket=bucket, Key=f"landing/b.{fmt_name}", Body=data(list(range(400, 410))))
    spec = {"source": {"files": {"uri": f"s3://{bucket}/landing/", "format": fmt_name, "lateArrival": "1ms",
                                 **({"options": {"header": True}} if fmt_name == "csv" else {})}},
            "target": {"table": f"s3://{bucket}/streamed/", "schema": LOAD_SCHEMA},
            "connection": {"endpoint": proxy.url}}
    doc = JobDocument("StreamCopy", "ns", "files", "uid", 1, "stream-unread", load_job({}).run_time, spec)
    # Parquet: the first GET of a.parquet passes (its footer: the file opens and its rows are read
    # lazily after), the next ones are cut short (each rule, nth=2, fires on the next matching GET)
    for _ in range(retry.DEFAULT.attempts):
        proxy.plan(Kind.GET, Fault.TRUNCATE, nth=2 if fmt_name == "parquet" else 1, match=f"landing/a.{fmt_name}")
    batches: list[dict[str, Any]] = []
    out = run_stream(spark, doc, once=True, progress_port=None, on_batch=lambda r, p: batches.append(dict(p)))
    assert "error" not in out, out
    assert [u["file"].rsplit("/", 1)[-1] for u in batches[0]["unreadFiles"]] == [f"a.{fmt_name}"], batches[0]
    reason = batches[0]["unreadFiles"][0]["reason"]
    assert f"reading s3://{bucket}/landing/a.{fmt_name} failed after " in reason and "cut short" in reason, reason
    assert batches[0]["lastBatch"]["rows"] == 10 and batches[-1]["unreadFiles"] == []
    assert out["rows"] == 410
    assert sorted(r["id"] for r in table_rows(f"s3://{bucket}/streamed/")) == list(range(410))
    no_pending(s3_client, bucket)
