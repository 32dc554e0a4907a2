"""Exactly once under SIGKILL: a stream driver killed at random moments, restarted, loses and
duplicates nothing.

A producer writes keyed messages over several partitions (files: a writer puts
files under the prefix) while driver processes (``faulty_driver.py``: the real
entry point, killed as a pod is: its whole process group, SIGKILL) are killed
between the parts upload and the commit, right after the commit, while the
batch's tasks run, and from outside at random times. At the end a clean driver
catches up (``once``) and the table, read straight from its committed parts with
pyarrow, holds every message exactly once (by topic/partition/offset, with its
content), and no upload is left pending.

``LADING_FAULT_KILLS`` / ``LADING_FAULT_FILE_KILLS`` change the number of kills
(defaults 20 and 10).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.kafka import producer

from lading_jobs.load.stores import storage_for
from lading_jobs.storage import S3Settings
from lading_jobs.stream.job import run_stream
from lading_jobs.table import format as fmt
from lading_jobs.table.log import TableLog
from lading_spec.job import JobDocument

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.slow]

DRIVER = Path(__file__).with_name("faulty_driver.py")
MODES = ("before-commit", "after-commit", "in-tasks", "none")


def job(spec: dict[str, Any], name: str) -> JobDocument:
    return JobDocument("StreamCopy", "faults", name, "uid", 1, f"{name}-run", dt.datetime.now(dt.UTC), spec)


def read_table(uri: str) -> pa.Table:
    """Every committed row, straight from the parts the log names (no lading reader)."""
    log = TableLog.open_existing(uri, storage_for(uri, S3Settings.from_env()))
    snap = log.snapshot()
    storage = storage_for(uri, S3Settings.from_env())
    tables = [pq.read_table(pa.BufferReader(storage.read(snap.part_uri(p)))) for p in snap.parts]
    return pa.concat_tables(tables) if tables else pa.table({})


def pending_uploads(uri: str) -> list[Any]:
    storage = storage_for(uri, S3Settings.from_env())
    return storage.list_pending_uploads(uri)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_killed(doc: JobDocument, tmp: Path, kills: int, feed: Any, seed: int) -> list[tuple[str, int, float]]:
    """Start drivers one after the other, each killed once; ``feed(i)`` adds source data meanwhile."""
    rng = random.Random(seed)
    job_file = tmp / "job.json"
    job_file.write_text(doc.to_json())
    log = open(tmp / "drivers.log", "ab")  # noqa: SIM115 - closed below
    done: list[tuple[str, int, float]] = []
    try:
        for i in range(kills):
            mode, at = MODES[i % len(MODES)], rng.randint(1, 2)
            env = dict(os.environ, LADING_PROGRESS_PORT="0", LADING_PROGRESS_HOST="127.0.0.1",
                       LADING_TERMINATION_LOG=str(tmp / "termination-log"))
            feeder = threading.Thread(target=feed, args=(i,))
            feeder.start()
            started = time.monotonic()
            proc = subprocess.Popen([sys.executable, str(DRIVER), mode, str(at), "--", "--master", "local[2]",
                                     "--job-file", str(job_file)], stdout=log, stderr=log, env=env,
                                    start_new_session=True)
            reached = True
            try:
                if mode == "none":
                    proc.wait(timeout=rng.uniform(2.0, 12.0))
                else:
                    proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                reached = mode == "none"  # else the crash window was never reached: the round proves nothing
            kill_group(proc)
            feeder.join()
            if not reached:
                pytest.fail(f"driver {i} never reached its kill point ({mode}, batch {at}) in 300 s; "
                            f"see {tmp / 'drivers.log'}")
            assert proc.returncode == -signal.SIGKILL, (
                f"driver {i} ({mode}) ended by itself with {proc.returncode}; see {tmp / 'drivers.log'}")
            done.append((mode, at, round(time.monotonic() - started, 1)))
    finally:
        log.close()
    return done


@pytest.mark.timeout(1200)  # 20 driver JVMs started and killed, one after the other
def test_kafka_exactly_once_across_sigkills(spark: Any, kafka: str, make_topic: Any, bucket: str,
                                            tmp_path: Path, progress_env: None) -> None:
    kills = int(os.environ.get("LADING_FAULT_KILLS", "20"))
    total = int(os.environ.get("LADING_FAULT_MESSAGES", "20000"))
    topic = make_topic(partitions=4)
    table = f"s3://{bucket}/events/"
    spec = {"source": {"kafka": {"bootstrapServers": [kafka], "topics": [topic], "startingOffsets": "earliest",
                                 "valueFormat": "raw"}},
            "target": {"table": table},
            # Small batches: each round's messages span several batches, so the kill points
            # at batch 2 are reached (with 2,500 a round's 1,000 messages made one batch, and a
            # driver waiting for a second batch ran into the 300 s deadline).
            "batching": {"maxBatchInterval": "1s", "maxBatchRows": 250}}
    doc = job(spec, "kafka-faults")
    sent: dict[tuple[int, int], bytes] = {}
    lock = threading.Lock()
    per_round = -(-total // kills)

    def feed(i: int) -> None:
        p = producer(kafka)
        first = i * per_round
        records = []

        def delivered(err: Any, msg: Any) -> None:
            assert err is None, err
            with lock:
                records.append((msg.partition(), msg.offset(), msg.value()))

        for n in range(first, min(total, first + per_round)):
            value = json.dumps({"n": n, "pad": "x" * (n % 37)}).encode()
            p.produce(topic, key=f"k{n % 997}".encode(), value=value, partition=n % 4, on_delivery=delivered)
            p.poll(0)
            if n % 200 == 0:
                time.sleep(0.05)  # spread the round over the driver's life
        assert p.flush(60) == 0
        with lock:
            for part, off, value in records:
                sent[(part, off)] = value

    rounds = run_killed(doc, tmp_path, kills, feed, seed=12)
    modes = {m for m, _, _ in rounds}
    assert {"before-commit", "after-commit", "in-tasks", "none"} <= modes and len(rounds) >= kills
    assert len(sent) == total

    out = run_stream(spark, doc, once=True, progress_port=None)
    assert "error" not in out, out
    rows = read_table(table)
    got = list(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist(), strict=True))
    assert len(got) == len(set(got)), "a message was loaded twice"
    assert set(got) == set(sent), f"missing {len(set(sent) - set(got))}, extra {len(set(got) - set(sent))}"
    assert set(rows.column("topic").to_pylist()) == {topic}
    values = dict(zip(got, rows.column("value").to_pylist(), strict=True))
    assert all(values[k] == v for k, v in sent.items()), "a message's content changed"
    assert set(rows.column(fmt.DIFF_COLUMN).to_pylist()) == {1}
    assert out["offsets"] == {f"{topic}:{p}": total // 4 for p in range(4)}
    assert pending_uploads(table) == []


@pytest.mark.timeout(900)
def test_files_exactly_once_across_sigkills(spark: Any, bucket: str, s3_client: Any, tmp_path: Path,
                                            progress_env: None) -> None:
    kills = int(os.environ.get("LADING_FAULT_FILE_KILLS", "10"))
    files_per_round, lines = 6, 40
    table = f"s3://{bucket}/from-files/"
    spec = {"source": {"files": {"uri": f"s3://{bucket}/landing/", "pattern": "*.jsonl", "format": "json"}},
            "target": {"table": table, "schema": [{"name": "file", "type": "string"},
                                                   {"name": "line", "type": "int"}]},
            "batching": {"maxBatchInterval": "1s", "maxBatchBytes": "2kB"}}
    doc = job(spec, "files-faults")
    rng = random.Random(7)

    def feed(i: int) -> None:
        for k in range(files_per_round):
            name = f"f-{i:03d}-{k}-{rng.randint(0, 999):03d}.jsonl"
            body = "".join(json.dumps({"file": name, "line": n}) + "\n" for n in range(lines))
            s3_client.put_object(Bucket=bucket, Key=f"landing/{name}", Body=body.encode())
            s3_client.put_object(Bucket=bucket, Key=f"landing/_ignored-{name}", Body=b"not loaded")
            time.sleep(0.3)  # files keep arriving while the driver runs

    rounds = run_killed(doc, tmp_path, kills, feed, seed=3)
    assert len(rounds) >= kills
    out = run_stream(spark, doc, once=True, progress_port=None)
    assert "error" not in out, out
    rows = read_table(table)
    got = list(zip(rows.column("file").to_pylist(), rows.column("line").to_pylist(), strict=True))
    assert len(got) == len(set(got)), "a file was loaded twice"
    names = {o["Key"].split("/", 1)[1] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix="landing/f-")
             .get("Contents", [])}
    assert len(names) == kills * files_per_round
    assert set(got) == {(n, i) for n in names for i in range(lines)}
    snap = TableLog.open_existing(table, storage_for(table, S3Settings.from_env())).snapshot()
    assert sorted(u.rsplit("/", 1)[-1] for u in snap.ledger) == sorted(names)
    assert pending_uploads(table) == []
