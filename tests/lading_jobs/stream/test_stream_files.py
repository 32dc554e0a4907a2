"""StreamCopy from files arriving under a prefix: once each, in key order, late arrivals, rewrites,
bad rows; and ``lading run --once`` with its line per batch. file:// prefixes, the shared Spark."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lading import cli
from lading_jobs import storage as st
from lading_jobs.stream import batch as bt
from lading_jobs.stream import sources
from lading_jobs.stream.job import LagWatcher, Replan, Stream, run_stream
from lading_jobs.stream.progress import Progress
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.reader import read_table
from lading_spec.job import JobDocument
from lading_spec.streamcopy import parse_streamcopy

pytestmark = [pytest.mark.spark]


def job(spec: dict[str, Any], generation: int = 1) -> JobDocument:
    return JobDocument("StreamCopy", "ns", "files", "uid", generation, f"files-{generation}",
                       dt.datetime.now(dt.UTC), spec)


def put(root: Path, name: str, text: str) -> None:
    """Write beside, then rename into place (what a producer on a local prefix must do)."""
    tmp = root / f".{name}.tmp"
    tmp.write_text(text)
    os.replace(tmp, root / name)


def test_files_load_once_in_key_order_late_arrivals_and_rewrites_reported(spark: Any, tmp_path: Path,
                                                                          file_uri: Any) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    table = file_uri("t/")
    for name in ("b.csv", "c.csv"):
        put(landing, name, f"id,name\n1,{name}\n2,{name}\n")
    put(landing, "_SUCCESS", "")  # hidden names never load
    put(landing, "notes.txt", "not a csv")  # outside the pattern
    spec = {"source": {"files": {"uri": file_uri("landing/"), "pattern": "*.csv", "format": "csv",
                                 "options": {"header": True}}},
            "target": {"table": table}, "batching": {"maxBatchBytes": "20B"}}
    first = run_stream(spark, job(spec), once=True, progress_port=None)
    assert first["rows"] == 4 and first["batches"] == 2 and first["offsets"] == {"files": 2}, first  # 1 file a batch
    log = TableLog.open_existing(table)
    schema = log.snapshot().schema  # inferred from the first file
    assert schema.names == ["id", "name"]
    # the table's Iceberg mirror (on for a new table): its newest metadata file, for status.output
    assert first["icebergMetadata"] == f"{table}metadata/v{log.version}.metadata.json", first
    # a late file (its name sorts before the high-water mark) still loads; a rewritten one is only reported
    put(landing, "a-late.csv", "id,name\n3,late\n")
    put(landing, "b.csv", "id,name\n1,changed\n2,changed\n9,changed\n")
    put(landing, "d.csv", "id,name\n4,d\n")
    spec["target"] = {"table": table, "icebergMirror": False}  # switched off by the next driver, before its batch
    second = run_stream(spark, job(spec), once=True, progress_port=None)
    assert second["rows"] == 2 and second["offsets"] == {"files": 4}, second
    assert "icebergMetadata" not in second and not TableLog.open_existing(table).snapshot().meta.iceberg_mirror
    rows = sorted((r["id"], r["name"]) for r in read_table(spark, table).collect())
    assert rows == [(1, "b.csv"), (1, "c.csv"), (2, "b.csv"), (2, "c.csv"), (3, "late"), (4, "d")]
    snap = TableLog.open_existing(table).snapshot()
    assert sorted(u.rsplit("/", 1)[-1] for u in snap.ledger) == ["a-late.csv", "b.csv", "c.csv", "d.csv"]
    progress = snap.source_progress[f"files:{file_uri('landing/')}"]
    assert progress["highWater"].endswith("/d.csv") and progress["files"] == 4


def test_bad_rows_in_files_go_to_the_dead_letter_with_file_and_line(spark: Any, tmp_path: Path,
                                                                     file_uri: Any) -> None:
    landing = tmp_path / "in"
    landing.mkdir()
    body = "\n".join([json.dumps({"id": 1}), "{broken", json.dumps({"id": "two"}), json.dumps({"id": 3})])
    (landing / "x.json.gz").write_bytes(gzip.compress(body.encode()))
    spec = {"source": {"files": {"uri": file_uri("in/"), "format": "json", "options": {"compression": "gzip"}}},
            "target": {"table": file_uri("t/"), "schema": [{"name": "id", "type": "bigint"}]},
            "maxErrorNumber": 1, "deadLetter": file_uri("dead/")}
    out = run_stream(spark, job(spec), once=True, progress_port=None)
    assert out["reason"] == "TooManyErrors" and "x.json.gz line 2" in out["error"], out
    letters = list((tmp_path / "dead").rglob("*.jsonl"))
    entries = [json.loads(line) for f in letters for line in f.read_text().splitlines()]
    assert [(e["file"].rsplit("/", 1)[-1], e["line"]) for e in entries] == [("x.json.gz", 2), ("x.json.gz", 3)]
    assert entries[1]["column"] == "id" and entries[1]["record"] == '{"id": "two"}'
    spec["maxErrorNumber"] = 2
    again = run_stream(spark, job(spec, 2), once=True, progress_port=None)
    assert again["rows"] == 2 and sorted(r["id"] for r in read_table(spark, file_uri("t/")).collect()) == [1, 3]


def test_lading_run_once_prints_a_line_per_batch(spark: Any, tmp_path: Path, file_uri: Any,
                                                 capsys: pytest.CaptureFixture[str], keep_signals: None) -> None:
    landing = tmp_path / "in"
    landing.mkdir()
    for i in range(3):
        put(landing, f"{i}.json", json.dumps({"id": i}) + "\n")
    manifest = tmp_path / "streamcopy.yaml"
    manifest.write_text(f"""apiVersion: lading.io/v1alpha1
kind: StreamCopy
metadata: {{name: local}}
spec:
  source: {{files: {{uri: "{file_uri('in/')}", format: json}}}}
  target: {{table: "{file_uri('t/')}", schema: [{{name: id, type: bigint}}]}}
  batching: {{maxBatchBytes: 8B}}
""")
    assert cli.main(["run", str(manifest), "--once", "--master", "local[2]"]) == 0
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.startswith("batch ")]
    assert [ln.split(":")[0] for ln in lines] == ["batch 1", "batch 2", "batch 3"], captured.err
    assert "1 rows in" in lines[0] and "lag 2" in lines[0] and "lag 0" in lines[2]
    assert captured.out.splitlines()[0] == "STREAM 3"


def test_a_file_changed_between_listing_and_reading_is_not_ledgered_and_a_later_batch_loads_it_once(
        spark: Any, tmp_path: Path, file_uri: Any) -> None:
    """The producer touches a.csv after the listing (same bytes, new ETag): its read fails. It is
    no reject and not loaded: not in the ledger, not counted, and the high-water mark stays below
    it (lateArrival 1ms: the next listing starts at the mark), so the next listing finds it again;
    b.csv, read in the same batch, commits and is never loaded again."""
    landing = tmp_path / "landing"
    landing.mkdir()
    put(landing, "a.csv", "id,name\n1,a\n2,a\n")
    put(landing, "b.csv", "id,name\n3,b\n")
    table = file_uri("t/")
    spec = {"source": {"files": {"uri": file_uri("landing/"), "format": "csv", "options": {"header": True},
                                 "lateArrival": "1ms"}},
            "target": {"table": table, "schema": [{"name": "id", "type": "bigint"},
                                                  {"name": "name", "type": "string"}]},
            "maxErrorNumber": 1, "deadLetter": file_uri("dead/")}
    progress = Progress("r", "files")
    stream = Stream(spark, job(spec), parse_streamcopy(spec), progress)
    try:
        plan = stream.plan()
        assert plan is not None and [f.uri.rsplit("/", 1)[-1] for f in plan.files] == ["a.csv", "b.csv"]
        stat = os.stat(landing / "a.csv")
        os.utime(landing / "a.csv", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        result = stream.run_batch(plan, threading.Event())
    finally:
        stream.close()
    assert (result.rows, result.rejected) == (1, 0)
    snap = TableLog.open_existing(table).snapshot()
    assert [u.rsplit("/", 1)[-1] for u in snap.ledger] == ["b.csv"]
    position = snap.source_progress[f"files:{file_uri('landing/')}"]
    assert position["files"] == 1 and position["highWater"] == "", position  # held below a.csv
    doc = progress.snapshot()
    assert doc["offsets"] == {"files": 1} and doc["lastBatch"]["rows"] == 1
    assert [u["file"].rsplit("/", 1)[-1] for u in doc["unreadFiles"]] == ["a.csv"]
    assert "changed after it was listed" in doc["unreadFiles"][0]["reason"]
    assert not (tmp_path / "dead").exists()  # no reject
    time.sleep(0.01)  # past lateArrival: the listing starts at the newest mark
    again = run_stream(spark, job(spec, 2), once=True, progress_port=None)
    assert again["rows"] == 2 and again["offsets"] == {"files": 2}, again
    assert run_stream(spark, job(spec, 2), once=True, progress_port=None)["rows"] == 0  # a rerun: nothing
    rows = sorted((r["id"], r["name"]) for r in read_table(spark, table).collect())
    assert rows == [(1, "a"), (2, "a"), (3, "b")]  # each row exactly once
    ledger = TableLog.open_existing(table).snapshot().ledger
    assert {u.rsplit("/", 1)[-1]: e.rows for u, e in ledger.items()} == {"a.csv": 2, "b.csv": 1}


def test_a_file_that_cannot_be_read_batch_after_batch_stops_the_stream_naming_it(
        tmp_path: Path, file_uri: Any, monkeypatch: Any) -> None:
    """Driver-side only (the tasks replaced): a.csv fails to be read every time, b.csv loads. The
    first failures only leave a.csv for the next batch; after MAX_READ_ATTEMPTS batches in a row
    the stream stops (FileUnreadable) with that last batch uncommitted, and a.csv never ledgered."""
    landing = tmp_path / "landing"
    landing.mkdir()
    put(landing, "a.csv", "id\n1\n")
    put(landing, "b.csv", "id\n2\n")
    table = file_uri("t/")
    spec = {"source": {"files": {"uri": file_uri("landing/"), "format": "csv", "options": {"header": True}}},
            "target": {"table": table, "schema": [{"name": "id", "type": "bigint"}]}}
    runs: list[list[str]] = []

    def fake_run(spark: Any, target: Any, source: Any, items: list[Any], kind: str, run: Any = None,
                 tplan: Any = None) -> tuple[list[bt.Outcome], None]:
        runs.append([t.uri.rsplit("/", 1)[-1] for t in items])
        return [bt.Outcome(t.index, t.uri, unread=f"cannot be read: reading {t.uri} failed: Access Denied")
                if t.uri.endswith("a.csv") else bt.Outcome(t.index, t.uri, read=1, good=1) for t in items], None

    monkeypatch.setattr(sources, "run_evolving", fake_run)
    out = run_stream(None, job(spec), once=True, progress_port=None)
    assert out["reason"] == "FileUnreadable", out
    assert out["error"].startswith(f"source.files: {file_uri('landing/a.csv')} could not be read in "
                                   f"{sources.MAX_READ_ATTEMPTS} batches in a row (last: cannot be read: "), out
    assert runs == [["a.csv", "b.csv"]] + [["a.csv"]] * (sources.MAX_READ_ATTEMPTS - 1)
    snap = TableLog.open_existing(table).snapshot()
    assert [u.rsplit("/", 1)[-1] for u in snap.ledger] == ["b.csv"]
    assert snap.source_progress[f"files:{file_uri('landing/')}"]["files"] == 1


@pytest.mark.parametrize(("key", "loads"), [
    ("part-0.parquet", True),
    ("2026-01-02/part-1.parquet", True),
    ("2026-01-02/", False),  # a folder marker (S3 console "Create folder")
    ("_temporary/0/_temporary/attempt_1/part-0.parquet", False),  # a Hadoop/Spark committer's work
    (".staging/part-0.parquet", False),  # a producer's half-written file before its rename
    ("2026-01-02/.part-1.parquet.crc", False),
    ("2026-01-02/_SUCCESS", False),
    ("a/b_c/.d/e.parquet", False),  # hidden at any depth
    ("a/b_c/d.e/f.parquet", True),  # `_`/`.` inside a segment is not hidden
    ("notes.txt", False),  # outside the pattern
])
def test_hidden_segments_at_every_level_and_folder_markers_never_load(key: str, loads: bool) -> None:
    prefix = "s3://b/in/"
    assert sources.visible(prefix + key, prefix, "*.parquet") is loads
    # the prefix itself may hold hidden-looking segments: only what is below it counts
    assert sources.visible("s3://b/_landing/.x/" + key, "s3://b/_landing/.x/", "*.parquet") is loads


def test_staged_committer_files_and_a_folder_marker_in_a_parquet_stream_on_s3(
        spark: Any, bucket: str, s3_client: Any, tmp_path: Path) -> None:
    """On S3 (moto): a committer's ``_temporary/…`` part, a producer's ``.staging/`` file and a
    zero-byte ``2026-01-02/`` folder marker sit under the prefix. None is read (the marker is no
    corrupt Parquet file: no TooManyErrors); once the committer and the producer move their files
    in, each row loads exactly once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def parquet(ids: list[int]) -> bytes:
        path = tmp_path / "x.parquet"
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)
        return path.read_bytes()

    def put_s3(key: str, body: bytes) -> None:
        s3_client.put_object(Bucket=bucket, Key=f"in/{key}", Body=body)

    put_s3("2026-01-01/part-0.parquet", parquet([1, 2]))
    put_s3("2026-01-02/", b"")
    put_s3("2026-01-02/_temporary/0/_temporary/attempt_0/part-0.parquet", parquet([3, 4]))
    put_s3(".staging/late.parquet", parquet([5]))
    table = f"s3://{bucket}/t/"
    spec = {"source": {"files": {"uri": f"s3://{bucket}/in/", "format": "parquet"}},
            "target": {"table": table, "schema": [{"name": "id", "type": "bigint"}]}}
    first = run_stream(spark, job(spec), once=True, progress_port=None)
    assert first.get("reason") is None and first["rows"] == 2 and first["offsets"] == {"files": 1}, first
    # the committer commits (copy into place, then delete its work), the producer renames in
    put_s3("2026-01-02/part-0.parquet", parquet([3, 4]))
    s3_client.delete_object(Bucket=bucket, Key="in/2026-01-02/_temporary/0/_temporary/attempt_0/part-0.parquet")
    put_s3("2026-01-02/late.parquet", parquet([5]))
    s3_client.delete_object(Bucket=bucket, Key="in/.staging/late.parquet")
    second = run_stream(spark, job(spec, 2), once=True, progress_port=None)
    assert second.get("reason") is None and second["rows"] == 3 and second["offsets"] == {"files": 3}, second
    assert sorted(r["id"] for r in read_table(spark, table).collect()) == [1, 2, 3, 4, 5]
    ledger = TableLog.open_existing(table).snapshot().ledger
    assert sorted(u.split("/in/", 1)[1] for u in ledger) == [
        "2026-01-01/part-0.parquet", "2026-01-02/late.parquet", "2026-01-02/part-0.parquet"]


def test_a_starting_driver_aborts_only_its_own_pending_dead_letters_under_a_shared_prefix(
        bucket: str, s3_client: Any) -> None:
    """Two StreamCopies (and a CopyJob's rejectedRows) share one deadLetter prefix on S3 (moto).
    A driver of stream A starts while B's batch has its dead letter pending (a multipart upload
    B completes just before its commit): A's start-up sweep aborts A's own leftover only, and B
    can still complete its upload. No Spark: the sweep runs before any batch."""
    dead = f"s3://{bucket}/dead/"
    spec = {"source": {"files": {"uri": f"s3://{bucket}/in/", "format": "json"}},
            "target": {"table": f"s3://{bucket}/t/", "schema": [{"name": "id", "type": "bigint"}]},
            "maxErrorNumber": 5, "deadLetter": dead}
    spec_b = {**spec, "target": {**spec["target"], "table": f"s3://{bucket}/t2/"}}

    def stream(name: str, s: dict[str, Any]) -> Stream:
        doc = JobDocument("StreamCopy", "ns", name, "uid", 1, f"{name}-1", dt.datetime.now(dt.UTC), s)
        return Stream(None, doc, parse_streamcopy(s), Progress(f"{name}-1", "files"))

    a, b = stream("a", spec), stream("b", spec_b)
    storage = st.open_storage(dead)
    leftovers = {}
    for who, tag in (("a", a.tag), ("b", b.tag)):
        prefix = bt.dead_letter_prefix(dead, bt.new_batch_id(7, tag))
        assert prefix is not None
        leftovers[who] = st.PendingUpload.from_dict(bt.write_dead_letter(storage, prefix, 0, [{"line": 1}]))
    copyjob = storage.begin_upload(f"{dead}rejects/run-1/part-0.jsonl")  # a CopyJob's rejectedRows
    storage.upload_part(copyjob, b'{"line": 2}\n')
    a.sweep()
    pending = {u.uri for u in storage.list_pending_uploads(dead)}
    assert leftovers["a"].uri not in pending
    assert pending == {leftovers["b"].uri, copyjob.uri}
    storage.complete_upload(leftovers["b"])  # B's batch goes on: its dead letter is written
    assert s3_client.get_object(Bucket=bucket, Key=leftovers["b"].uri.split("/", 3)[3])["Body"].read() \
        == b'{"line": 1}\n'
    assert bt.own_dead_letter(leftovers["b"].uri, dead.rstrip("/"), b.tag)
    assert not bt.own_dead_letter(leftovers["b"].uri, dead, a.tag)
    assert not bt.own_dead_letter(f"{dead}x/{leftovers['b'].uri[len(dead):]}", dead, b.tag)  # not nested


def test_a_copyjob_load_racing_the_stream_makes_it_replan_not_stop(spark: Any, tmp_path: Path,
                                                                    file_uri: Any) -> None:
    """A CopyJob load of the same prefix commits a.json and b.json while the stream's batch of
    those two files runs: the stream's commit loses on the ledger, nothing of its batch is
    visible, and it plans again (no stop): the next batch finds both files loaded and moves on;
    a new file loads once. Every row once."""
    from lading_jobs.load.job import run_load

    landing = tmp_path / "in"
    landing.mkdir()
    put(landing, "a.json", json.dumps({"id": 1}) + "\n")
    put(landing, "b.json", json.dumps({"id": 2}) + "\n")
    table = file_uri("t/")
    schema = [{"name": "id", "type": "bigint"}]
    spec = {"source": {"files": {"uri": file_uri("in/"), "format": "json"}},
            "target": {"table": table, "schema": schema}}
    progress = Progress("r", "files")
    stream = Stream(spark, job(spec), parse_streamcopy(spec), progress)
    try:
        plan = stream.plan()
        assert plan is not None and [f.uri.rsplit("/", 1)[-1] for f in plan.files] == ["a.json", "b.json"]
        load = JobDocument("CopyJob", "ns", "load", "uid", 1, "load-1", dt.datetime.now(dt.UTC),
                           {"from": {"files": file_uri("in/"), "format": "json"}, "to": {"table": table}})
        assert run_load(spark, load)["rows"] == 2
        with pytest.raises(Replan) as replanned:
            stream.run_batch(plan, threading.Event())
    finally:
        stream.close()
    assert "was loaded concurrently" in str(replanned.value) and "planned again" in str(replanned.value)
    put(landing, "c.json", json.dumps({"id": 3}) + "\n")
    out = run_stream(spark, job(spec), once=True, progress_port=None)
    assert out.get("reason") is None and out["rows"] == 1 and out["offsets"] == {"files": 1}, out  # its own: c
    assert sorted(r["id"] for r in read_table(spark, table).collect()) == [1, 2, 3]
    ledger = TableLog.open_existing(table).snapshot().ledger
    assert {u.rsplit("/", 1)[-1]: e.rows for u, e in ledger.items()} == {"a.json": 1, "b.json": 1, "c.json": 1}


def test_after_a_lost_commit_only_a_newer_epoch_stops_the_driver() -> None:
    from lading_jobs.stream.job import after_conflict

    assert after_conflict(3, 4) == "stop"
    assert after_conflict(3, 3) == "replan"  # a load's ledger, since, a schema change: plan again
    assert after_conflict(3, 0) == "replan"


def test_files_lag_is_the_objects_listed_and_not_loaded_refreshed_while_idle_and_mid_batch(
        spark: Any, tmp_path: Path, file_uri: Any) -> None:
    """``lag`` counts the visible objects under the prefix that the table has not loaded: when the
    driver starts (before any table), after each batch (as of its listing), and from a fresh
    listing at each tick of the lag watcher, while the stream waits or a batch runs; a tick that
    finds a new total hands it on (``lading run`` prints it), one that finds the same does not."""
    landing = tmp_path / "landing"
    landing.mkdir()
    for name in ("a", "b", "c"):
        put(landing, f"{name}.csv", f"id,name\n1,{name}\n")
    put(landing, "_SUCCESS", "")  # hidden: never waits
    spec = {"source": {"files": {"uri": file_uri("landing/"), "format": "csv", "options": {"header": True}}},
            "target": {"table": file_uri("t/")}, "batching": {"maxBatchBytes": "8B"}}  # a file a batch
    parsed = parse_streamcopy(spec)
    never = threading.Event()

    def lag(progress: Progress) -> int:
        doc = progress.get("lag")
        assert doc["filesPending"] == doc["total"] and doc["atLeast"] is False, doc
        return int(doc["total"])

    progress = Progress("lag", "files")
    s = Stream(spark, job(spec), parsed, progress)
    shown: list[int] = []
    watcher = LagWatcher(s, on_lag=lambda doc: shown.append(doc["lag"]["total"]))  # ticked here, not started
    try:
        s.resume()  # no table yet: the three files wait
        assert lag(progress) == 3
        plan = s.plan()
        assert plan is not None
        s.run_batch(plan, never)
        assert lag(progress) == 2
        put(landing, "d.csv", "id,name\n4,d\n")  # arrives while the stream waits for its next cut
        put(landing, "e.csv", "id,name\n5,e\n")
        watcher.tick()  # what the lag watcher does every few seconds
        assert lag(progress) == 4 and shown == [4]
        watcher.tick()
        assert shown == [4]  # nothing new: nothing printed
        plan = s.plan()
        assert plan is not None and [o.uri.rsplit("/", 1)[1] for o in plan.files] == ["b.csv"]
        put(landing, "f.csv", "id,name\n6,f\n")
        watcher.tick()  # mid-batch: b.csv is not loaded until the batch commits
        assert lag(progress) == 5 and shown == [4, 5]
        s.run_batch(plan, never)
        assert lag(progress) == 3  # as of the batch's listing (c, d, e) ...
        watcher.tick()
        assert lag(progress) == 4 and shown == [4, 5, 4]  # ... and f.csv, listed since
    finally:
        s.close()
    again = Progress("again", "files")
    restarted = Stream(spark, job(spec, generation=2), parsed, again)
    try:
        restarted.resume()  # a restart: the true lag before its first batch commits
        assert lag(again) == 4
    finally:
        restarted.close()


def test_lading_run_prints_a_line_for_a_new_lag_between_batches(capsys: pytest.CaptureFixture[str]) -> None:
    cli._batch_line({"event": "lag", "progress": {"lag": {"total": 1207}, "tableVersion": 14, "rowsTotal": 120000},
                     "batch": {"rows": 5}})
    cli._batch_line({"event": "lag", "progress": {"lag": {"total": 10000, "atLeast": True}, "tableVersion": None}})
    assert capsys.readouterr().err.splitlines() == ["lag 1,207 (table v14, 120,000 rows in all)",
                                                    "lag ≥10,000 (no table yet, 0 rows in all)"]
