"""A lading table made and kept on a real node: a CopyJob loads files into it, a Compaction
compacts it, each as a driver pod and an executor pod from the built image.

Each answer is read from the resource's status and checked against the data itself: the table
read back by lading's reader, and by DuckDB's own ``iceberg_scan`` through its own S3 client
(``httpfs``) from the table's Iceberg mirror on moto, as a user's DuckDB reads it. The Compaction
runs on the table the load made (one load, one compaction: the two Spark runs this module costs),
both in one scenario of the tier's stage (tests/node/scenes.py), beside the tier's other cases.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from node.jobs import (
    PodsSeen,
    connection,
    copy_spec,
    create,
    spark_pods,
    spark_sizing,
    wait_phase,
    wait_running,
    wait_until_true,
)
from node.scenes import Scene, Seen, Stage, scenario
from support.iceberg_readers import duckdb_s3_rows, multiset

from lading_jobs.table import reader
from lading_jobs.table.log.commits import Snapshot, TableLog

pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]

COLUMNS = ["id", "label", "amount", "day"]
SCHEMA = [{"name": "id", "type": "bigint", "nullable": False}, {"name": "label", "type": "string"},
          {"name": "amount", "type": "decimal(12,2)"}, {"name": "day", "type": "date"}]
FILES = 4  # small files: one Spark task, and one part, each (spark.default.parallelism below)


def csv_file(n: int) -> tuple[bytes, list[tuple[Any, ...]]]:
    """File ``n``: five rows with a header, a quoted comma, a NULL, a negative amount; and its rows."""
    lines, rows = ["id,label,amount,day"], []
    for i in range(5):
        key = n * 5 + i
        label = None if i == 3 else (f"a, {key}" if i == 1 else f"r{key}")
        amount = Decimal(key * 37 - 300) / 4
        day = dt.date(2026, 1, 1) + dt.timedelta(days=key)
        field = "" if label is None else (f'"{label}"' if "," in label else label)
        lines.append(f"{key},{field},{amount:.2f},{day.isoformat()}")
        rows.append((key, label, amount.quantize(Decimal("0.01")), day))
    return ("\n".join(lines) + "\n").encode(), rows


def lading_rows(uri: str) -> Counter[tuple[Any, ...]]:
    return multiset(reader.scan(uri), COLUMNS)


def duckdb_answer(uri: str, endpoint: str) -> Counter[tuple[Any, ...]]:
    got: pa.Table = duckdb_s3_rows(uri, endpoint, "testing", "testing")
    return multiset(got, COLUMNS)


@scenario("load-then-compact", priority=3)
def load_then_compact(scene: Scene, seen: Seen) -> None:
    """One load of four CSV files under a prefix into a new table, run to its end, the table read
    back; then a Compaction of that table, the table read back again."""
    client, ns, bucket = scene.client, scene.namespace, seen.bucket
    expected: Counter[tuple[Any, ...]] = Counter()
    files = []
    for n in range(FILES):
        body, rows = csv_file(n)
        seen.s3.put_object(Bucket=bucket, Key=f"in/part-{n}.csv", Body=body)
        files.append(f"s3://{bucket}/in/part-{n}.csv")
        expected.update(rows)
    uri = f"s3://{bucket}/tables/payments/"
    seen.facts.update(uri=uri, files=files, expected=expected)
    spec = copy_spec({"files": f"s3://{bucket}/in/", "format": "csv", "options": {"header": True}},
                     {"table": uri, "schema": SCHEMA}, scene.endpoint)
    # one task per file even for files this small (the planner packs small files up to the run's
    # bytes over its parallelism): the table gets several parts for the Compaction below
    spec["spark"]["sparkConf"]["spark.default.parallelism"] = str(FILES)
    create(client, ns, "CopyJob", "load", spec)
    app = wait_running(client, ns, "CopyJob", "load")
    with PodsSeen(client, ns, app) as pods:
        seen.status = wait_phase(client, ns, "CopyJob", "load")["status"]
        seen.facts["load_seconds"] = time.monotonic() - seen.began
        wait_until_true(lambda: not spark_pods(client, ns, "executor", app), 90, "executor pods still there after the load")
    seen.roles = pods.roles()
    if seen.status["phase"] != "Succeeded":
        return
    seen.facts["loaded"] = TableLog.open_existing(uri).snapshot()
    seen.facts["loaded_rows"] = lading_rows(uri)
    seen.facts["loaded_duckdb"] = duckdb_answer(uri, scene.endpoint)

    before: Snapshot = seen.facts["loaded"]
    if len(before.parts) < 2:
        return
    compaction = {"table": uri, "minInputFiles": 2, "connection": connection(scene.endpoint), "spark": spark_sizing()}
    began = time.monotonic()
    create(client, ns, "Compaction", "compact", compaction)
    seen.facts["compaction"] = wait_phase(client, ns, "Compaction", "compact")["status"]
    seen.facts["compaction_seconds"] = time.monotonic() - began
    seen.facts["compacted"] = TableLog.open_existing(uri).snapshot()
    seen.facts["compacted_rows"] = lading_rows(uri)
    seen.facts["compacted_duckdb"] = duckdb_answer(uri, scene.endpoint)


@pytest.mark.scene("load-then-compact")
def test_load_into_a_table_reads_back_in_lading_and_in_duckdbs_iceberg_reader(stage: Stage) -> None:
    seen = stage.outcome("load-then-compact")
    status, facts = seen.status, seen.facts
    assert status["phase"] == "Succeeded", status
    print(f"load: apply -> Succeeded in {facts['load_seconds']:.1f} s")
    assert "driver" in seen.roles and "executor" in seen.roles, seen.roles
    expected: Counter[tuple[Any, ...]] = facts["expected"]
    rows = sum(expected.values())
    assert status["response"]["rows"] == rows and not status["response"].get("rowsRejected")
    snapshot: Snapshot = facts["loaded"]
    # ONE commit: the one that creates the table carries every file's rows and ledger entry
    assert snapshot.version == 0 and snapshot.rows == rows
    assert {f: (e.version, e.rows) for f in facts["files"] if (e := snapshot.ledger.get(f))} == \
        {f: (0, 5) for f in facts["files"]}
    output, uri = status["output"], facts["uri"]
    assert (output["files"], output["destination"]) == (FILES, uri)
    assert output["icebergMetadata"] == f"{uri}metadata/v0.metadata.json"
    assert facts["loaded_rows"] == expected
    # DuckDB's own Iceberg reader, from S3, through the mirror's newest metadata
    assert facts["loaded_duckdb"] == expected


@pytest.mark.scene("load-then-compact")
def test_compaction_of_the_loaded_table_leaves_fewer_parts_and_the_same_answer(stage: Stage) -> None:
    seen = stage.outcome("load-then-compact")
    facts = seen.facts
    assert seen.status["phase"] == "Succeeded", "the load this compaction needs failed"
    before: Snapshot = facts["loaded"]
    assert len(before.parts) >= 2, f"the load wrote {len(before.parts)} part(s): nothing to compact"
    status = facts["compaction"]
    print(f"compaction: apply -> {status['phase']} in {facts['compaction_seconds']:.1f} s")
    assert status["phase"] == "Succeeded", status
    after: Snapshot = facts["compacted"]
    assert len(after.parts) < len(before.parts) and after.version == before.version + 1
    assert (status["partsBefore"], status["partsAfter"]) == (len(before.parts), len(after.parts))
    assert status["response"]["rows"] == after.rows == before.rows
    assert status["tableVersion"] == after.version
    uri = facts["uri"]
    assert status["output"]["icebergMetadata"] == f"{uri}metadata/v{after.version}.metadata.json"
    assert facts["compacted_rows"] == facts["expected"]
    assert facts["compacted_duckdb"] == facts["expected"]
