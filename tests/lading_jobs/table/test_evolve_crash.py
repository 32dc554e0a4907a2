"""A commit that carries a schema change (schema evolution) killed around its conditional PUT.

The child process of the commit crash matrix (tests/support/crash_child.py) commits one part
written with the evolved schema (a new column ``score``) plus that schema, and is SIGKILLed
before or after the PUT of the commit. Afterwards the table holds the old state whole (old
schema, old rows) or the new one whole (the column and the rows that carry it, earlier rows
NULL); every referenced part exists; and a rerun (the same change committed again, or the next
write) succeeds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.evolve import Found, evolve
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema

pytestmark = [pytest.mark.s3, pytest.mark.slow]
CHILD = Path(__file__).resolve().parents[2] / "support" / "crash_child.py"
SCHEMA = TableSchema.of([("id", "bigint")])


def _part(uri: str, schema: TableSchema, ids: list[int], score: list[int] | None = None) -> writer.WrittenPart:
    data = {"id": pa.array(ids, pa.int64())}
    if score is not None:
        data["score"] = pa.array(score, pa.int64())
    [part] = writer.write_parts(uri, [pa.table(data)], schema, write_id=fmt.new_write_id(), storage=st.S3Storage())
    return part


@pytest.mark.parametrize("action", ["kill", "kill_after"])
def test_a_schema_evolving_commit_killed_at_its_put_leaves_old_or_new_whole(bucket: str, action: str) -> None:
    uri = f"s3://{bucket}/t/"
    log = TableLog.create(uri, SCHEMA)
    writer.commit_parts(uri, [_part(uri, SCHEMA, [1, 2])], log=log)  # commit 1
    evolved = evolve(SCHEMA, [Found("score", "bigint", "test")])
    new = _part(uri, evolved, [3], [30])
    args = {"kind": "table", "table": uri, "written": [new.to_json()], "schema": evolved.to_json(),
            "fault": {"method": "put_if_absent", "match": fmt.commit_name(2), "nth": 1, "action": action}}
    child = subprocess.run([sys.executable, str(CHILD), json.dumps(args)], capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == -9, child.stderr[-2000:]

    snap = TableLog.open_existing(uri).snapshot()
    landed = action == "kill_after"
    assert snap.version == (2 if landed else 1)
    assert snap.schema.names == (["id", "score"] if landed else ["id"])
    got = sorted(reader.scan(uri, storage=st.S3Storage()).to_pylist(), key=lambda r: r["id"])
    assert got == ([{"id": 1, "score": None}, {"id": 2, "score": None}, {"id": 3, "score": 30}] if landed
                   else [{"id": 1}, {"id": 2}])
    objects = {o.uri for o in st.S3Storage().list_objects(uri + fmt.DATA_DIR + "/")}
    assert {snap.part_uri(p) for p in snap.parts} <= objects

    # a rerun: the not-landed write again (a fresh part), or the next write after the landed one
    after = writer.commit_parts(uri, [_part(uri, evolved, [4], [40])], log=TableLog.open_existing(uri),
                                schema=None if landed else evolved)
    assert after.version == snap.version + 1 and after.schema.names == ["id", "score"]
    assert sorted(r["id"] for r in reader.scan(uri, storage=st.S3Storage()).to_pylist()) == (
        [1, 2, 3, 4] if landed else [1, 2, 4])
