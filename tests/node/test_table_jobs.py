"""A lading table made and kept on a real node: a CopyJob loads files into it, a Compaction
compacts it, each as a driver pod and an executor pod from the built image.

Each answer is read from the resource's status and checked against the data itself: the table
read back by lading's reader, and by DuckDB's own ``iceberg_scan`` through its own S3 client
(``httpfs``) from the table's Iceberg mirror on moto, as a user's DuckDB reads it. The Compaction
runs on the table the load made (one load, one compaction: the two Spark runs this module costs).
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from node.jobs import (
    PodsSeen,
    connection,
    copy_spec,
    create,
    s3_setup,
    spark_pods,
    spark_sizing,
    wait_phase,
    wait_until_true,
)
from support.iceberg_readers import duckdb_s3_rows, multiset

from harness.node import NodeCluster, Release
from harness.spark_operator import SparkOperatorStandIn
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


@dataclass
class Loaded:
    """The module's table after its load: the CopyJob as it ended, the rows its files hold."""

    uri: str
    endpoint: str
    status: dict[str, Any]
    files: list[str]
    expected: Counter[tuple[Any, ...]]
    roles: list[str]
    seconds: float


def lading_rows(uri: str) -> Counter[tuple[Any, ...]]:
    return multiset(reader.scan(uri), COLUMNS)


def duckdb_answer(loaded: Loaded) -> Counter[tuple[Any, ...]]:
    got: pa.Table = duckdb_s3_rows(loaded.uri, loaded.endpoint, "testing", "testing")
    return multiset(got, COLUMNS)


@pytest.fixture(scope="module")
def loaded(node_cluster: NodeCluster, lading_release: Release, node_standin: SparkOperatorStandIn,
           node_s3: str) -> Loaded:
    """One load of four CSV files under a prefix into a new table, run to its end."""
    client = node_cluster.kube.client
    namespace = lading_release.job_namespace
    s3, bucket = s3_setup(client, namespace, node_s3)
    expected: Counter[tuple[Any, ...]] = Counter()
    files = []
    for n in range(FILES):
        body, rows = csv_file(n)
        s3.put_object(Bucket=bucket, Key=f"in/part-{n}.csv", Body=body)
        files.append(f"s3://{bucket}/in/part-{n}.csv")
        expected.update(rows)
    uri = f"s3://{bucket}/tables/payments/"
    spec = copy_spec({"files": f"s3://{bucket}/in/", "format": "csv", "options": {"header": True}},
                     {"table": uri, "schema": SCHEMA}, node_s3)
    # one task per file even for files this small (the planner packs small files up to the run's
    # bytes over its parallelism): the table gets several parts for the Compaction below
    spec["spark"]["sparkConf"]["spark.default.parallelism"] = str(FILES)
    began = time.monotonic()
    with PodsSeen(client, namespace) as pods:
        create(client, namespace, "CopyJob", "load", spec)
        done = wait_phase(client, namespace, "CopyJob", "load")
        seconds = time.monotonic() - began
        app = done["status"].get("sparkApplication", "")
        wait_until_true(lambda: not spark_pods(client, namespace, "executor", app), 90,
                        "executor pods still there after the load")
    return Loaded(uri, node_s3, done["status"], files, expected, pods.roles(), seconds)


def test_load_into_a_table_reads_back_in_lading_and_in_duckdbs_iceberg_reader(loaded: Loaded) -> None:
    status = loaded.status
    assert status["phase"] == "Succeeded", status
    print(f"load: apply -> Succeeded in {loaded.seconds:.1f} s")
    assert "driver" in loaded.roles and "executor" in loaded.roles, loaded.roles
    rows = sum(loaded.expected.values())
    assert status["response"]["rows"] == rows and not status["response"].get("rowsRejected")
    snapshot: Snapshot = TableLog.open_existing(loaded.uri).snapshot()
    # ONE commit: the one that creates the table carries every file's rows and ledger entry
    assert snapshot.version == 0 and snapshot.rows == rows
    assert {f: (e.version, e.rows) for f in loaded.files if (e := snapshot.ledger.get(f))} == \
        {f: (0, 5) for f in loaded.files}
    output = status["output"]
    assert (output["files"], output["destination"]) == (FILES, loaded.uri)
    assert output["icebergMetadata"] == f"{loaded.uri}metadata/v0.metadata.json"
    assert lading_rows(loaded.uri) == loaded.expected
    # DuckDB's own Iceberg reader, from S3, through the mirror's newest metadata
    assert duckdb_answer(loaded) == loaded.expected


def test_compaction_of_the_loaded_table_leaves_fewer_parts_and_the_same_answer(
        node_cluster: NodeCluster, lading_release: Release, loaded: Loaded) -> None:
    assert loaded.status["phase"] == "Succeeded", "the load this compaction needs failed"
    client = node_cluster.kube.client
    namespace = lading_release.job_namespace
    log = TableLog.open_existing(loaded.uri)
    before = log.snapshot()
    assert len(before.parts) >= 2, f"the load wrote {len(before.parts)} part(s): nothing to compact"
    spec = {"table": loaded.uri, "minInputFiles": 2, "connection": connection(loaded.endpoint),
            "spark": spark_sizing()}
    began = time.monotonic()
    create(client, namespace, "Compaction", "compact", spec)
    status = wait_phase(client, namespace, "Compaction", "compact")["status"]
    print(f"compaction: apply -> {status['phase']} in {time.monotonic() - began:.1f} s")
    assert status["phase"] == "Succeeded", status
    after = log.snapshot()
    assert len(after.parts) < len(before.parts) and after.version == before.version + 1
    assert (status["partsBefore"], status["partsAfter"]) == (len(before.parts), len(after.parts))
    assert status["response"]["rows"] == after.rows == before.rows
    assert status["tableVersion"] == after.version
    assert status["output"]["icebergMetadata"] == f"{loaded.uri}metadata/v{after.version}.metadata.json"
    assert lading_rows(loaded.uri) == loaded.expected
    assert duckdb_answer(loaded) == loaded.expected
