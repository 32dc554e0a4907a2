"""The Compaction engine through Spark on the S3 server: ``lading run``, the job contract, scope and
sortBy, running twice, retention with its grace period, and a reader that opened the table before."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from lading import cli
from lading_jobs import storage as st
from lading_jobs.compact.engine import compact
from lading_jobs.compact.plan import written_by_compaction
from lading_jobs.engine import RunContext
from lading_jobs.main import execute
from lading_jobs.result import Cancellation
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.compaction import parse_compaction
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark, pytest.mark.s3]

SCHEMA = TableSchema.of([("id", "bigint"), ("day", "date"), ("note", "string")])


def fill(uri: str, envelope: str = "append", commits: int = 10, per_commit: int = 2, start_day: int = 0) -> TableLog:
    """``commits`` commits of ``per_commit`` small parts; ids repeat across commits (upserts)."""
    log = TableLog.open(uri) or TableLog.create(uri, SCHEMA, envelope, ["id"] if envelope == "upsert" else ())
    for c in range(commits):
        tables = []
        for p in range(per_commit):
            ids = [(c * 7 + p * 3 + i) % 40 for i in range(25)]
            tables.append(pa.table({"id": pa.array(ids, pa.int64()),
                                    "day": pa.array([19000 + start_day + c] * 25, pa.int32()).cast(pa.date32()),
                                    "note": [f"c{c}-p{p}-{i}" for i in range(25)],
                                    fmt.TIME_COLUMN: pa.array([c + 1] * 25, pa.int64())}))
        written = writer.write_parts(uri, tables, SCHEMA, write_id=fmt.new_write_id(), one_part_per_table=True)
        writer.commit_parts(uri, written, log=log)
    return log


def rows(uri: str, as_of: int | None = None) -> Counter:
    t = reader.scan(uri, as_of=as_of)
    return Counter(zip(*(t.column(c).to_pylist() for c in SCHEMA.names), strict=True))


def manifest(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / f"compaction-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "lading.io/v1alpha1", "kind": "Compaction",
                                    "metadata": {"name": "nightly"}, "spec": spec}))
    return path


def test_lading_run_compacts_consolidates_and_a_second_run_rewrites_nothing(
        spark: Any, bucket: str, tmp_path: Path, keep_signals: None, capsys: pytest.CaptureFixture[str]) -> None:
    uri = f"s3://{bucket}/orders/"
    log = fill(uri, "upsert")
    before = {t: rows(uri, t) for t in (None, 6, 8)}
    spec = {"table": uri, "since": {"version": 6}, "sortBy": ["id"], "minInputFiles": 4, "targetFileSize": "64MB"}
    assert cli.main(["run", str(manifest(tmp_path, spec)), "--master", "local[2]"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("COMPACT 20 → 1 parts,") and line.endswith("since 0 → 6"), line
    snap = log.snapshot()
    assert snap.since == 6 and len(snap.parts) == 1 and written_by_compaction(snap.parts[0])
    assert snap.rows < 500  # versions below since consolidated: one per key, plus the newer ones
    for t, expected in before.items():
        assert rows(uri, t) == expected
    with pytest.raises(Exception, match="since frontier"):
        rows(uri, 5)
    # the part is sorted by id and its statistics are fresh
    storage = st.open_storage(uri)
    part = snap.parts[0]
    data = pq.read_table(storage.open_input(snap.part_uri(part), part.size))
    ids = data.column("id").to_pylist()
    assert ids == sorted(ids) and part.stats.rows == data.num_rows
    assert part.stats.columns[1].min == min(ids) and part.stats.columns[1].max == max(ids)

    version = snap.version
    assert cli.main(["run", str(manifest(tmp_path, spec)), "--master", "local[2]", "--json"]) == 0
    result = yaml.safe_load(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["partsBefore"] == 0 and result["rowsWritten"] == 0 and "nothingToDo" in result
    assert log.snapshot().version == version, "an unchanged table gets no commit"


def test_the_job_contract_result_and_a_scope_filter_decided_by_statistics(spark: Any, bucket: str) -> None:
    uri = f"s3://{bucket}/days/"
    log = fill(uri, "append", commits=8)
    before = rows(uri)
    spec = {"table": uri, "since": {"version": 3}, "minInputFiles": 2,
            "scope": {"filter": "day >= '2022-01-10' AND note IS NOT NULL"}}
    doc = JobDocument(kind="Compaction", namespace="ns", name="c", uid="u", generation=1, run_id="run-1",
                      run_time=dt.datetime.now(dt.UTC), spec=spec)
    out = execute(doc, lambda: spark, Cancellation())
    assert "error" not in out, out
    # 2022-01-10 is epoch day 19002: commits 2..7 (days 19002..19007) match, 0 and 1 do not
    assert out["partsBefore"] == 12 and out["partsAfter"] == 1 and out["rows"] == out["rowsWritten"]
    assert out["since"] == 3 and out["sinceBefore"] == 0 and out["runId"] == "run-1"
    assert out["rowsRead"] == 300 and out["rowsConsolidated"] == 0
    untouched = [p for p in log.snapshot().parts if not written_by_compaction(p)]
    assert len(untouched) == 4 and {p.stats.columns[2].max for p in untouched} == {19000, 19001}
    assert rows(uri) == before

    bad = JobDocument(kind="Compaction", namespace="ns", name="c", uid="u", generation=1, run_id="run-2",
                      run_time=dt.datetime.now(dt.UTC), spec={**spec, "scope": {"filter": "no_such_column > 3"}})
    err = execute(bad, lambda: spark, Cancellation())["error"]
    assert err.startswith("scope.filter:") and "no_such_column" in err


def test_retention_waits_for_the_grace_period_then_removes_replaced_parts_orphans_and_stale_uploads(
        spark: Any, bucket: str, s3_client: Any) -> None:
    uri = f"s3://{bucket}/ret/"
    log = fill(uri, "diff", commits=6)
    storage = st.open_storage(uri)
    opened = log.snapshot()  # a reader that opened the table before the compaction
    expected = rows(uri)
    orphan = f"{uri}data/w-crashed/part-00000-00000.parquet"
    storage.put(orphan, b"PAR1 written by a writer that crashed before its commit")
    spec = parse_compaction({"table": uri, "since": {"version": 4}, "retention": {"gracePeriod": "1h", "allowShortGracePeriod": True}})
    done = compact(spark, spec, RunContext(), storage=storage)
    assert done.groups == 1 and done.retention["partsDeleted"] + done.retention["orphansDeleted"] == 0
    old = reader.read_parts(storage, opened, opened.parts)  # still readable: inside the grace period
    assert old.num_rows == sum(expected.values())
    # (moto reports every upload as begun in 2010, so the young-upload case is in test_retention.py)
    stale = storage.begin_upload(f"{uri}data/w-crashed/part-00000-00001.parquet")
    storage.upload_part(stale, b"x")

    later = int(time.time() * 1000) + 2 * 3600 * 1000
    dry = parse_compaction({"table": uri, "since": {"version": 4},
                            "retention": {"gracePeriod": "1h", "dryRun": True, "allowShortGracePeriod": True}})
    listed = compact(spark, dry, RunContext(), storage=storage, now_ms=later).retention
    assert listed["partsDeleted"] == 12 and listed["orphansDeleted"] == 1 and listed["uploadsAborted"] == 1
    assert "data/w-crashed/part-00000-00000.parquet" in listed["wouldDelete"]
    assert storage.head(orphan) is not None, "a dry run deletes nothing"

    swept = compact(spark, spec, RunContext(), storage=storage, now_ms=later).retention
    assert swept["partsDeleted"] == 12 and swept["orphansDeleted"] == 1 and swept["uploadsAborted"] == 1
    live = {p.path for p in log.snapshot().parts}
    left = {o.uri.removeprefix(uri) for o in storage.list_objects(f"{uri}data/")}
    assert left == live
    assert not s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads")
    assert rows(uri) == expected


def test_a_compaction_runs_its_stage_as_an_rdd_job_without_a_sql_execution(spark: Any, tmp_path: Path) -> None:
    """The rewrite stage is ``parallelize(range(n), n).mapPartitions`` (no SQL plan or Arrow round trip:
    ~0.3 s less per stage on local[2], docs/benchmarks.md), with the same answers."""
    uri = f"file://{tmp_path}/t/"
    fill(uri, "append", commits=4)
    before = rows(uri)
    spec = parse_compaction({"table": uri, "minInputFiles": 2})
    store = spark._jsparkSession.sharedState().statusStore()
    executions = store.executionsCount()
    result = compact(spark, spec, RunContext(), run_id="rdd")
    assert store.executionsCount() == executions  # mapInArrow would have added a SQL execution
    assert result.parts_before == 8 and result.parts_after == 1
    assert rows(uri) == before
