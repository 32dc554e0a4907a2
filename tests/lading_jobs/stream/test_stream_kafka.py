"""StreamCopy from Kafka end to end, in this process: tansu, the shared local Spark, file:// tables.

What is loaded is read back through the table (consolidated by envelope), what is
committed from the table log, what the driver says from its HTTP progress.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from support.kafka import produce

from lading_jobs import storage as st
from lading_jobs.stream.job import Stopped, Stream, run_stream
from lading_jobs.stream.progress import Progress
from lading_jobs.table import format as fmt
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.reader import read_table
from lading_spec.job import JobDocument
from lading_spec.streamcopy import parse_streamcopy
from lading_spec.streamprogress import parse_progress, status_fields

pytestmark = [pytest.mark.spark]

ORDERS = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "customer", "type": "string"},
          {"name": "amount", "type": "decimal(12,2)"}]


def job(spec: dict[str, Any], name: str = "s", generation: int = 1) -> JobDocument:
    return JobDocument("StreamCopy", "ns", name, "uid", generation, f"{name}-{generation}",
                       dt.datetime.now(dt.UTC), spec)


def kafka_spec(kafka: str, topics: list[str], table: str, **more: Any) -> dict[str, Any]:
    source = {"bootstrapServers": [kafka], "topics": topics, "startingOffsets": "earliest",
              **more.pop("source", {})}
    return {"source": {"kafka": source}, "target": {"table": table, **more.pop("target", {})}, **more}


def unreferenced(uri: str) -> set[str]:
    """Objects under the table's data/ that no commit names (a dropped batch must leave none)."""
    snap = TableLog.open_existing(uri).snapshot()
    listed = {o.uri for o in st.open_storage(uri).list_objects(uri + fmt.DATA_DIR + "/")}
    return listed - {snap.part_uri(p) for p in snap.parts}


def stream_commits(uri: str) -> list[dict[str, Any]]:
    storage = st.open_storage(uri)
    out = []
    v = 1
    while (info := storage.head(fmt.commit_uri(uri, v))) is not None:
        entry = json.loads(storage.read(info.uri))
        if entry["operation"] == "stream":
            out.append(entry)
        v += 1
    return out


def test_json_upsert_keys_from_the_message_key_tombstones_and_group_offsets(
        spark: Any, kafka: str, make_topic: Any, file_uri: Any) -> None:
    topic = make_topic(partitions=2)
    table = file_uri("orders/")
    msgs = [(i % 2, str(i).encode(), json.dumps({"id": i, "customer": f"c{i}", "amount": f"{i}.25"}).encode())
            for i in range(10)]
    msgs += [(1, b"3", json.dumps({"customer": "c3-new", "amount": 99}).encode()),  # id from the key
             (0, b"4", None),  # a tombstone: deletes 4
             (1, b'{"id": 7}', json.dumps({"customer": "c7-new"}).encode())]  # a JSON key names the column
    produce(kafka, topic, msgs)
    spec = kafka_spec(kafka, [topic], table, target={"envelope": "upsert", "keyColumns": ["id"], "schema": ORDERS})
    out = run_stream(spark, job(spec), once=True, progress_port=None)
    assert out["rows"] == 13 and out["batches"] == 1, out  # messages loaded, the tombstone included
    rows = {r["id"]: (r["customer"], str(r["amount"]) if r["amount"] is not None else None)
            for r in read_table(spark, table).collect()}
    expected = {i: (f"c{i}", f"{i}.25") for i in range(10) if i != 4}
    expected[3] = ("c3-new", "99.00")
    expected[7] = ("c7-new", None)
    assert rows == expected
    assert out["offsets"] == {f"{topic}:0": 6, f"{topic}:1": 7}
    # the group's offsets, committed after the table commit, for monitoring tools
    c = Consumer({"bootstrap.servers": kafka, "group.id": "lading.ns.s"})
    try:
        committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
    finally:
        c.close()
    assert [tp.offset for tp in committed] == [6, 7]
    _iceberg_readers_agree_with_lading(table, out)
    # nothing new: a second run commits nothing and loads nothing
    again = run_stream(spark, job(spec), once=True, progress_port=None)
    assert again["rows"] == 0 and again["batches"] == 1


def _iceberg_readers_agree_with_lading(table: str, out: dict[str, Any]) -> None:
    """The table's Iceberg mirror after a StreamCopy batch with tombstones into an upsert table
    (issue 31): the stream's result names its newest metadata file, and pyiceberg and DuckDB's own
    reader never return a wrong answer: they read exactly lading's rows as of the version the mirror's
    current snapshot names, and a mirror behind the log says so (today an upsert table holding rows is
    not mirrored: the delete files that would hide superseded rows and tombstoned keys are not written)."""
    from pyiceberg.table import StaticTable
    from support.iceberg_readers import duckdb_rows, multiset

    from lading_jobs.table import reader
    from lading_jobs.table.iceberg import mirror
    from lading_jobs.table.iceberg import view as ice
    from lading_jobs.table.log.commits import snapshot_at

    root = table.removeprefix("file://")
    latest = TableLog.open_existing(table).version
    state = mirror.describe(table)
    assert out["icebergMetadata"] == state["metadata"] == f"{table}metadata/v{latest}.metadata.json", (out, state)
    assert state["mirroredVersion"] == latest
    shown = state.get("snapshotVersion")
    if shown != latest:  # behind: the metadata says since when, and why
        assert state["behindSince"] <= latest and "upsert" in state["reason"], state
    storage = TableLog.open_existing(table).storage
    want = reader.scan(table, snapshot=snapshot_at(table, storage, shown)) if shown is not None else None
    current = StaticTable.from_metadata(state["metadata"].removeprefix("file://")).scan().to_arrow()
    duck = duckdb_rows(root, [None])[0]
    for got in (current, duck):
        assert 4 not in got.column("id").to_pylist()  # the tombstoned key
        if want is not None:
            assert multiset(got, want.column_names) == multiset(want)
        else:
            assert got.num_rows == 0
    if shown is not None:
        snap = StaticTable.from_metadata(state["metadata"].removeprefix("file://")).metadata.current_snapshot()
        assert snap is not None and snap.snapshot_id == ice.snapshot_id(shown)


def test_raw_format_latest_then_a_topic_added_by_a_spec_change(spark: Any, kafka: str, make_topic: Any,
                                                               file_uri: Any) -> None:
    t1, t2 = make_topic(partitions=1), make_topic(partitions=1)
    table = file_uri("raw/")
    produce(kafka, t1, [(0, b"old", b"before the stream")])
    produce(kafka, t2, [(0, b"old2", b"before the topic was added")])
    spec = kafka_spec(kafka, [t1], table, source={"valueFormat": "raw", "startingOffsets": "latest"})
    first = run_stream(spark, job(spec), once=True, progress_port=None)
    assert first["rows"] == 0 and first["offsets"] == {f"{t1}:0": 1}  # latest, pinned by the first commit
    produce(kafka, t1, [(0, b"k1", b"v1")])
    produce(kafka, t2, [(0, b"k2", b"v2")])
    spec2 = kafka_spec(kafka, [t1, t2], table, source={"valueFormat": "raw", "startingOffsets": "earliest"})
    second = run_stream(spark, job(spec2, generation=2), once=True, progress_port=None)
    assert second["offsets"] == {f"{t1}:0": 2, f"{t2}:0": 2}
    got = sorted((r["topic"], r["offset"], r["key"], r["value"]) for r in read_table(spark, table).collect())
    # t1 resumes from its committed offset (startingOffsets is not read again); t2, new, from earliest
    assert got == sorted([(t1, 1, b"k1", b"v1"), (t2, 0, b"old2", b"before the topic was added"),
                          (t2, 1, b"k2", b"v2")])


def test_too_many_bad_rows_fail_the_batch_and_a_higher_limit_resumes_from_the_same_offsets(
        spark: Any, kafka: str, make_topic: Any, file_uri: Any) -> None:
    topic = make_topic(partitions=1)
    table, dead = file_uri("t/"), file_uri("dead/")
    good = [(0, None, json.dumps({"id": i, "customer": "c", "amount": 1}).encode()) for i in range(10)]
    bad = [(0, None, b"{not json"), (0, None, json.dumps({"id": "x"}).encode()),
           (0, None, json.dumps({"id": 1, "amount": "12345678901234567"}).encode())]
    produce(kafka, topic, good[:5] + bad + good[5:])
    spec = kafka_spec(kafka, [topic], table, target={"schema": ORDERS}, maxErrorNumber=2, deadLetter=dead)
    out = run_stream(spark, job(spec), once=True, progress_port=None)
    assert out["reason"] == "TooManyErrors" and out["batch"] == f"{topic}/0@0..12", out
    assert f"batch {topic}/0@0..12: 3 rejected rows exceed maxErrorNumber 2" in out["error"]
    assert f"{topic}/0@5: not a JSON object" in out["error"]
    assert not stream_commits(table)  # nothing of the batch committed
    assert TableLog.open_existing(table).snapshot().rows == 0
    letters = sorted(Path(dead[len("file://"):]).rglob("*.jsonl"))
    records = [json.loads(line) for f in letters for line in f.read_text().splitlines()]
    assert [(r["topic"], r["partition"], r["offset"]) for r in records] == [(topic, 0, 5), (topic, 0, 6),
                                                                              (topic, 0, 7)]
    assert records[0]["record"] == "{not json" and records[1]["column"] == "id"
    assert records[2]["column"] == "amount" and "decimal(12,2)" in records[2]["reason"]
    # the operator's fix: a new spec with a higher limit; the same offsets load, the bad rows go aside again
    spec["maxErrorNumber"] = 3
    again = run_stream(spark, job(spec, generation=2), once=True, progress_port=None)
    assert again["rows"] == 10 and again["offsets"] == {f"{topic}:0": 13}, again
    assert sorted(r["id"] for r in read_table(spark, table).collect()) == list(range(10))
    assert len(sorted(Path(dead[len("file://"):]).rglob("*.jsonl"))) == 2


def test_time_flush_advances_upper_without_data_and_progress_is_served(
        spark: Any, kafka: str, make_topic: Any, file_uri: Any, progress_env: None) -> None:
    topic = make_topic(partitions=2)
    table = file_uri("quiet/")
    spec = kafka_spec(kafka, [topic], table, target={"schema": ORDERS}, batching={"maxBatchInterval": "300ms"})
    cancel = threading.Event()
    progress = Progress("run", "kafka")
    served: list[dict[str, Any]] = []

    def on_batch(result: Any, doc: dict[str, Any]) -> None:
        with urllib.request.urlopen(f"http://127.0.0.1:{progress.port}/progress", timeout=10) as r:
            served.append(parse_progress(r.read()))
        if doc["batches"] >= 4:
            cancel.set()

    out = run_stream(spark, job(spec), cancel=cancel, on_batch=on_batch, progress_port=0, progress=progress)
    assert out["cancelled"] is True and out["batches"] == 4
    commits = stream_commits(table)
    assert len(commits) == 4 and not any("add" in c for c in commits)
    uppers = [c["upper"] for c in commits]
    assert uppers == sorted(uppers) and len(set(uppers)) == 4  # every interval moved the frontier
    assert (uppers[-1] - uppers[0]) >= 3 * 300 - 50  # wall-clock ms, with the loop's own spacing
    assert TableLog.open_existing(table).snapshot().upper == uppers[-1]
    assert [s["batches"] for s in served] == [1, 2, 3, 4]
    last = served[-1]
    assert last["state"] == "running" and last["upper"] == uppers[-1] and last["lastBatch"]["rows"] == 0
    batch = last["lastBatch"]
    fields = status_fields(last)
    assert fields.pop("topicIds")[topic] not in ("", "unavailable")  # tansu gives topic IDs
    assert fields == {
        "rowsTotal": 0, "batches": 4, "lag": 0, "lagPartitions": {f"{topic}:0": 0, f"{topic}:1": 0},
        "lastBatchTime": batch["time"],
        "lastBatch": {"time": batch["time"], "rows": 0, "bytes": 0, "rejected": 0,
                      "durationSeconds": round(batch["durationSeconds"], 3), "range": batch["range"],
                      "end": {f"{topic}:0": 0, f"{topic}:1": 0}},
        "offsets": {f"{topic}:0": 0, f"{topic}:1": 0},
        "output": {"icebergMetadata": last["icebergMetadata"]}}
    assert last["icebergMetadata"].endswith(".metadata.json") and "/metadata/v" in last["icebergMetadata"]


def test_suspend_drops_the_running_batch_and_resume_with_a_new_spec_loses_nothing(
        spark: Any, kafka: str, make_topic: Any, file_uri: Any) -> None:
    topic = make_topic(partitions=2)
    table = file_uri("susp/")
    produce(kafka, topic, [(i % 2, None, json.dumps({"id": i}).encode()) for i in range(400)])
    spec = kafka_spec(kafka, [topic], table, target={"schema": ORDERS},
                      batching={"maxBatchInterval": "200ms", "maxBatchRows": 100})
    cancel = threading.Event()
    batches: list[int] = []

    def stop_during_the_next_job(result: Any, doc: dict[str, Any]) -> None:
        batches.append(result.rows)
        if len(batches) == 2:  # suspend while batch 3's Spark job runs: it is dropped, not half committed
            sc = spark.sparkContext

            def watch() -> None:
                while not sc.statusTracker().getActiveJobsIds():
                    threading.Event().wait(0.02)  # polling Spark for the condition
                cancel.set()
                sc.cancelAllJobs()

            threading.Thread(target=watch, daemon=True).start()

    out = run_stream(spark, job(spec), cancel=cancel, on_batch=stop_during_the_next_job, progress_port=None)
    # batch 3 was dropped (the usual case) or, had its job finished first, committed whole: never half
    assert out["cancelled"] is True and out["batches"] in (2, 3) and batches[:2] == [100, 100], out
    done = 100 * out["batches"]
    assert TableLog.open_existing(table).snapshot().rows == done
    assert not st.open_storage(table).list_pending_uploads(table) and not unreferenced(table)
    # resume with a changed spec (a new generation): the rest, once
    spec["batching"] = {"maxBatchInterval": "200ms", "maxBatchRows": 150}
    produce(kafka, topic, [(i % 2, None, json.dumps({"id": i}).encode()) for i in range(400, 500)])
    again = run_stream(spark, job(spec, generation=2), once=True, progress_port=None)
    assert again["rows"] == 500 - done and again["offsets"] == {f"{topic}:0": 250, f"{topic}:1": 250}
    ids = [r["id"] for r in read_table(spark, table).collect()]
    assert sorted(ids) == list(range(500))


def test_two_drivers_the_newest_wins_whichever_commits_first(spark: Any, kafka: str, make_topic: Any,
                                                              file_uri: Any) -> None:
    """A driver that outlived its pod (old) and its replacement (new) plan the same range. Each
    claimed an epoch before planning (new's is higher). The old one commits first: it is refused
    and stops (Superseded), nothing of its batch visible; the new one commits that range and keeps
    running (its next batch commits too). Every message once."""
    topic = make_topic(partitions=1)
    table = file_uri("two/")
    produce(kafka, topic, [(0, None, json.dumps({"id": i}).encode()) for i in range(20)])
    spec = kafka_spec(kafka, [topic], table, target={"schema": ORDERS})
    parsed = parse_streamcopy(spec)
    old = Stream(spark, job(spec, generation=1), parsed, Progress("old", "kafka"))
    new = Stream(spark, job(spec, generation=2), parsed, Progress("new", "kafka"))
    never = threading.Event()
    try:
        plan_old = old.plan()
        plan_new = new.plan()  # both see the same committed position
        assert plan_old is not None and plan_new is not None and plan_old.describe == plan_new.describe
        assert (old.epoch, new.epoch) == (1, 2)
        with pytest.raises(Stopped) as lost:
            old.run_batch(plan_old, never)  # the old one commits first
        assert not unreferenced(table)
        assert new.run_batch(plan_new, never).rows == 20
        produce(kafka, topic, [(0, None, json.dumps({"id": i}).encode()) for i in range(20, 25)])
        again = new.plan()
        assert again is not None and new.run_batch(again, never).rows == 5  # the new one keeps running
        stale = old.plan()
        assert stale is not None
        with pytest.raises(Stopped) as refused:  # and the old one stays refused, even planning afresh
            old.run_batch(stale, never)
    finally:
        old.close()
        new.close()
    assert lost.value.reason == "Superseded" and refused.value.reason == "Superseded"
    assert "a newer driver of this StreamCopy (epoch 2)" in str(lost.value) and "(epoch 1)" in str(lost.value)
    assert sorted(r["id"] for r in read_table(spark, table).collect()) == list(range(25))
    assert [c["sourceProgress"]["stream:ns/s"]["epoch"] for c in stream_commits(table)] == [2, 2]
    assert not st.open_storage(table).list_pending_uploads(table) and not unreferenced(table)


def test_a_recreated_topic_fails_the_batch_or_restarts_at_the_earliest_loading_each_message_once(
        spark: Any, kafka: str, make_topic: Any, file_uri: Any) -> None:
    """The table holds offset 5 of a topic deleted and recreated with 3 messages (end offset 3):
    nothing of the new topic may be skipped silently. failOnDataLoss: the batch fails naming the
    partition and offsets; false: the partition restarts at its earliest offset, reported."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = make_topic(partitions=1)
    table = file_uri("t/")
    produce(kafka, topic, [(0, None, json.dumps({"id": i, "customer": "old"}).encode()) for i in range(5)])
    spec = kafka_spec(kafka, [topic], table, target={"schema": ORDERS})
    assert run_stream(spark, job(spec), once=True, progress_port=None)["rows"] == 5
    admin = AdminClient({"bootstrap.servers": kafka})
    for f in admin.delete_topics([topic]).values():
        f.result(30)
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    produce(kafka, topic, [(0, None, json.dumps({"id": 100 + i, "customer": "new"}).encode()) for i in range(3)])
    commits = len(stream_commits(table))

    failed = run_stream(spark, job(spec), once=True, progress_port=None)
    assert failed["reason"] == "DataLoss", failed
    # tansu gives topic IDs: the new ID tells (without IDs: offset 5 past the end offset 3, test_positions)
    assert f"topic {topic} partition 0: the topic's ID is now " in failed["error"], failed
    assert "failOnDataLoss: false to restart these partitions at their earliest offsets" in failed["error"]
    assert len(stream_commits(table)) == commits  # nothing committed: the position stays at 5

    spec["source"]["kafka"]["failOnDataLoss"] = False
    progress = Progress("r", "kafka")
    out = run_stream(spark, job(spec, generation=2), once=True, progress_port=None, progress=progress)
    assert out["rows"] == 3 and out["offsets"] == {f"{topic}:0": 3}, out
    assert any("the topic's ID is now" in s and "restarted at offset 0" in s
               for s in progress.get("dataLossSkipped")), progress.get("dataLossSkipped")
    produce(kafka, topic, [(0, None, json.dumps({"id": 100 + i, "customer": "new"}).encode()) for i in range(3, 7)])
    assert run_stream(spark, job(spec, generation=2), once=True, progress_port=None)["rows"] == 4
    again = run_stream(spark, job(spec, generation=2), once=True, progress_port=None)  # a rerun loads nothing
    assert again["rows"] == 0 and again["offsets"] == {f"{topic}:0": 7}, again
    ids = sorted(r["id"] for r in read_table(spark, table).collect())
    assert ids == [*range(5), *range(100, 107)]  # each message exactly once


def test_a_new_json_table_without_target_schema_stops_as_invalid_spec_and_exits_zero(
        kafka: str, make_topic: Any, file_uri: Any) -> None:
    """No Spark needed: the driver finds no table before it reads anything. A rerun cannot fix
    this, so the result is a deliberate stop (InvalidSpec, exit 0: spark-operator does not rerun
    it), and nothing is created at the table's URI."""
    from lading_jobs.result import exit_code

    topic = make_topic(partitions=1)
    table = file_uri("orders/")
    out = run_stream(None, job(kafka_spec(kafka, [topic], table)), once=True, progress_port=None)
    assert out["reason"] == "InvalidSpec" and out["error"].startswith(
        f"target.schema: there is no table at {table}; give target.schema"), out
    assert exit_code(out) == 0
    assert TableLog.open(table, st.open_storage(table)) is None


def test_a_recreated_topic_already_past_the_old_offset_is_known_by_its_topic_id(
        spark: Any, kafka: str, make_topic: Any, file_uri: Any) -> None:
    """The table holds offset 3 of a topic that is deleted and recreated with 5 messages: the new
    end offset (5) is past the old one, so offsets alone would resume at 3 and skip 100..102.
    tansu gives real topic IDs (DescribeTopics, KIP-516) and a new one on recreate: the stream
    stores the ID with the positions and treats the change as a reset."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = make_topic(partitions=1)
    table = file_uri("t/")
    produce(kafka, topic, [(0, None, json.dumps({"id": i}).encode()) for i in range(3)])
    spec = kafka_spec(kafka, [topic], table, target={"schema": ORDERS})
    assert run_stream(spark, job(spec), once=True, progress_port=None)["rows"] == 3
    first_id = TableLog.open_existing(table).snapshot().source_progress.get(f"kafkaTopicId:{topic}", "")
    admin = AdminClient({"bootstrap.servers": kafka})
    for f in admin.delete_topics([topic]).values():
        f.result(30)
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    produce(kafka, topic, [(0, None, json.dumps({"id": 100 + i}).encode()) for i in range(5)])

    failed = run_stream(spark, job(spec), once=True, progress_port=None)
    assert failed["reason"] == "DataLoss", failed
    assert f"topic {topic} partition 0: the topic's ID is now " in failed["error"] and first_id, failed
    assert f"not {first_id} as when offset 3 was committed" in failed["error"]
    spec["source"]["kafka"]["failOnDataLoss"] = False
    out = run_stream(spark, job(spec, generation=2), once=True, progress_port=None)
    assert out["rows"] == 5 and out["offsets"] == {f"{topic}:0": 5}, out
    snap = TableLog.open_existing(table).snapshot()
    assert snap.source_progress[f"kafkaTopicId:{topic}"] not in (first_id, None)
    assert sorted(r["id"] for r in read_table(spark, table).collect()) == [0, 1, 2, *range(100, 105)]


def test_lag_is_the_brokers_end_offsets_now_minus_the_committed_position(
        spark: Any, kafka: str, make_topic: Any, file_uri: Any) -> None:
    """Against the broker's real end offsets (one record per produce batch, so tansu's are
    exact): just after a (re)start before any batch, after a batch cut by maxBatchRows, while
    idle as messages arrive, after a batch during which messages arrived, and after a restart."""
    topic = make_topic(partitions=2)
    table = file_uri("lag/")
    produce(kafka, topic, [(i % 2, None, json.dumps({"id": i}).encode()) for i in range(30)])
    spec = kafka_spec(kafka, [topic], table, target={"schema": ORDERS}, batching={"maxBatchRows": 10})
    parsed = parse_streamcopy(spec)
    never = threading.Event()

    def lag_of(progress: Progress) -> tuple[int, dict[str, int]]:
        doc = progress.get("lag")
        return doc["total"], doc["partitions"]

    first = Progress("first", "kafka")
    s = Stream(spark, job(spec), parsed, first)
    try:
        s.resume()  # no table yet: starts at earliest, so all 30 wait
        assert lag_of(first) == (30, {f"{topic}:0": 15, f"{topic}:1": 15})
        plan = s.plan()
        assert plan is not None
        s.run_batch(plan, never)
        assert lag_of(first) == (20, {f"{topic}:0": 10, f"{topic}:1": 10})
        produce(kafka, topic, [(0, None, json.dumps({"id": i}).encode()) for i in range(30, 35)])
        s.refresh_lag()  # what the lag watcher does every few seconds while idle or mid-batch
        assert lag_of(first) == (25, {f"{topic}:0": 15, f"{topic}:1": 10})
        plan = s.plan()
        assert plan is not None
        produce(kafka, topic, [(1, None, json.dumps({"id": i}).encode()) for i in range(35, 39)])  # mid-batch
        s.run_batch(plan, never)
        assert lag_of(first) == (19, {f"{topic}:0": 10, f"{topic}:1": 9})  # not the plan-time end's 15
    finally:
        s.close()
    again = Progress("again", "kafka")
    restarted = Stream(spark, job(spec, generation=2), parsed, again)
    try:
        restarted.resume()  # a restart: the true lag before its first batch commits
        assert lag_of(again) == (19, {f"{topic}:0": 10, f"{topic}:1": 9})
    finally:
        restarted.close()


def test_a_diff_table_from_kafka_takes_each_change_from_the_values_lading_diff(
        spark: Any, kafka: str, make_topic: Any, file_uri: Any) -> None:
    """envelope: diff reads each message's +n/-n from its value's _lading_diff (an exact bigint,
    not 0): a -1 retracts. A value without it, with 0, or with a non-integer is a reject naming
    the column (before, every row got +1 silently); a tombstone is refused (upsert only)."""
    topic = make_topic(partitions=1)
    table = file_uri("diff/")
    values: list[bytes | None] = [json.dumps(v).encode() for v in (
        {"id": 1, "customer": "a", "_lading_diff": 1}, {"id": 2, "customer": "b", "_lading_diff": 2},
        {"id": 1, "customer": "a", "_lading_diff": -1}, {"id": 3, "customer": "c"},
        {"id": 4, "customer": "d", "_lading_diff": 0}, {"id": 5, "customer": "e", "_lading_diff": 1.5})]
    values.append(None)
    produce(kafka, topic, [(0, b"k", v) for v in values])
    spec = kafka_spec(kafka, [topic], table, target={"envelope": "diff", "schema": ORDERS},
                      maxErrorNumber=4, deadLetter=file_uri("dead/"))
    out = run_stream(spark, job(spec), once=True, progress_port=None)
    assert out["rows"] == 3 and out.get("reason") is None, out
    rows = sorted((r["id"], r["customer"]) for r in read_table(spark, table).collect())
    assert rows == [(2, "b"), (2, "b")]  # 1 inserted then retracted; 2 twice
    letters = [json.loads(line) for f in Path(file_uri("dead/")[len("file://"):]).rglob("*.jsonl")
               for line in f.read_text().splitlines()]
    by_offset = {e["offset"]: e for e in letters}
    assert sorted(by_offset) == [3, 4, 5, 6]
    assert all(by_offset[o]["column"] == "_lading_diff" for o in (3, 4, 5)), letters
    assert "is 0" in by_offset[4]["reason"] and "tombstone" in by_offset[6]["reason"]
