"""Exactly once under SIGKILL, Kafka: a stream driver killed at random moments, restarted, loses and
duplicates nothing.

A producer writes keyed messages over several partitions while driver processes
(``faulty_driver.py``: the real entry point, killed as a pod is: its whole process
group, SIGKILL) are killed between the parts upload and the commit, right after the
commit, while the batch's tasks run, and from outside at random times. At the end a
clean driver catches up (``once``) and the table, read straight from its committed
parts with pyarrow, holds every message exactly once (by topic/partition/offset, with
its content), and no upload is left pending. The same for files: test_fault_files.py.

``LADING_FAULT_KILLS`` / ``LADING_FAULT_MESSAGES`` change the number of kills and
messages (defaults: one round per kill point, ``stream_faults.KILL_POINTS``: 7, or 8 with
``LADING_FAULT_MATRIX=full``; 1,000 messages a round).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.kafka import producer
from support.stream_faults import KILL_POINTS, ROUNDS, job, pending_uploads, read_table, run_killed

from lading_jobs.stream.job import run_stream
from lading_jobs.table import format as fmt

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.slow]


@pytest.mark.timeout(1200)  # driver JVMs started and killed, one after the other
def test_kafka_exactly_once_across_sigkills(request: pytest.FixtureRequest, kafka: str, make_topic: Any, bucket: str,
                                            tmp_path: Path, progress_env: None) -> None:
    kills = int(os.environ.get("LADING_FAULT_KILLS", str(ROUNDS)))
    total = int(os.environ.get("LADING_FAULT_MESSAGES", str(1000 * kills)))
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
    assert len(rounds) >= kills
    assert {(m, at) for m, at, _ in rounds} >= set(KILL_POINTS[:kills])
    assert len(sent) == total

    spark = request.getfixturevalue("spark")  # only now: see run_killed
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
