"""Concurrency: three writer processes append to a table while a compaction (Spark) rewrites it.
No append is lost, the compaction commits (rebased over appends that landed after it planned),
and the final table is exactly the union of everything appended."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lading_jobs import storage as st
from lading_jobs.compact.engine import compact
from lading_jobs.engine import RunContext
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema
from lading_spec.compaction import parse_compaction

WORKER = Path(__file__).with_name("append_worker.py")
ROOT = Path(__file__).resolve().parents[3]
SCHEMA = TableSchema.of([("id", "string"), ("w", "bigint")])


def committed(out: Path) -> list[str]:
    if not out.exists():
        return []
    return [i for line in out.read_text().splitlines() if line for i in json.loads(line)]


@pytest.mark.spark
@pytest.mark.s3
@pytest.mark.slow
def test_appends_from_several_processes_and_a_compaction_lose_nothing(spark: Any, bucket: str,
                                                                        tmp_path: Path) -> None:
    uri = f"s3://{bucket}/busy/"
    log = TableLog.create(uri, SCHEMA, "append")
    first: list[str] = []
    for n in range(8):
        ids = [f"seed-{n}-{i}" for i in range(10)]
        t = pa.table({"id": ids, "w": pa.array([n] * 10, pa.int64())})
        writer.commit_parts(uri, writer.write_parts(uri, [t.slice(0, 5), t.slice(5)], SCHEMA,
                                                    write_id=fmt.new_write_id(), one_part_per_table=True), log=log)
        first += ids
    stop = tmp_path / "stop"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "spark_apps"), str(ROOT)]))
    outs = [tmp_path / f"writer-{i}.jsonl" for i in range(3)]
    procs = [subprocess.Popen([sys.executable, str(WORKER), uri, f"w{i}", str(stop), str(out)], env=env,
                              stderr=subprocess.PIPE, text=True) for i, out in enumerate(outs)]
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not all(len(committed(o)) >= 8 for o in outs):
            assert all(p.poll() is None for p in procs), [p.stderr.read() for p in procs if p.stderr]
            time.sleep(0.1)  # polling the writers' progress files, not synchronising on time
        assert all(len(committed(o)) >= 8 for o in outs), "writers did not get going"
        spec = parse_compaction({"table": uri, "since": {"version": 0}, "minInputFiles": 4})
        totals = compact(spark, spec, RunContext(), storage=st.open_storage(uri))
    finally:
        stop.touch()
        for p in procs:
            p.wait(timeout=120)
    assert all(p.returncode == 0 for p in procs), [p.stderr.read() for p in procs if p.stderr]
    assert totals.groups >= 1 and totals.parts_before >= 16
    entries = [json.loads(log.storage.read(fmt.commit_uri(uri, v))) for v in range(1, log.snapshot().version + 1)]
    compactions = [e for e in entries if e["operation"] == "compact"]
    assert len(compactions) == 1 and compactions[0]["remove"]
    landed = compactions[0]
    assert landed["version"] > landed["info"]["planVersion"] + 1, "appends landed between plan and commit"
    assert any(e["operation"] == "append" and e["version"] > landed["version"] for e in entries)
    expected = sorted(first + [i for o in outs for i in committed(o)])
    got = sorted(reader.scan(uri).column("id").to_pylist())
    assert got == expected
