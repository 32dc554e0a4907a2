"""The load examples: ``lading run examples/copyjob-load-parquet.yaml`` on the S3 server, twice, then
``lading run examples/compaction.yaml`` on the table it loaded, twice.

The first load creates the table from the files and loads every row; the second
loads nothing, because the table's ledger already holds the files. The first
compaction rewrites the loads' parts into one sorted part, the second finds
nothing to do; the table reads the same rows throughout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lading import cli
from lading_jobs import storage as st
from lading_jobs.compact.plan import written_by_compaction
from lading_jobs.ingest.stores import storage_for
from lading_jobs.table.log.commits import TableLog
from lading_spec.copyjob import parse_copyjob

pytestmark = [pytest.mark.spark, pytest.mark.s3]
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_every_load_example_parses() -> None:
    names = sorted(p.name for p in EXAMPLES.glob("copyjob-load-*.yaml"))
    assert len(names) >= 4
    for name in names:
        spec = parse_copyjob(yaml.safe_load((EXAMPLES / name).read_text())["spec"])
        assert spec.target.table is not None and spec.source.files is not None


def test_lading_run_loads_the_sample_orders_once(spark: Any, s3_client: Any, keep_signals: None,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    if "lading-demo" not in {b["Name"] for b in s3_client.list_buckets().get("Buckets", [])}:
        s3_client.create_bucket(Bucket="lading-demo")
    cli.write_sample_orders("s3://lading-demo/raw/orders/", rows=20_000, files=3)
    example = str(EXAMPLES / "copyjob-load-parquet.yaml")
    assert cli.main(["run", example, "--master", "local[2]"]) == 0
    first = capsys.readouterr().out.strip().splitlines()
    assert first[0] == "COPY 20000"
    assert cli.main(["run", example, "--master", "local[2]"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[0] == "COPY 0"
    table = "s3://lading-demo/tables/orders/"
    snap = TableLog.open(table, storage_for(table, st.S3Settings.from_env())).snapshot()  # type: ignore[union-attr]
    assert snap.rows == 20_000 and len(snap.ledger) == 3
    assert [c.name for c in snap.schema.columns] == ["id", "region", "customer", "total", "created_at", "note"]
    assert snap.schema.column("total").type == "decimal(12,2)"

    # examples/compaction.yaml compacts that table (its schedule is ignored by lading run).
    before = snap
    example = str(EXAMPLES / "compaction.yaml")
    assert cli.main(["run", example, "--master", "local[2]"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"COMPACT {len(before.parts)} → 1 parts,") and "20,000 rows read" in line, line
    after = TableLog.open(table, storage_for(table, st.S3Settings.from_env())).snapshot()  # type: ignore[union-attr]
    assert after.rows == 20_000 and len(after.parts) == 1 and written_by_compaction(after.parts[0])
    assert after.ledger == before.ledger  # the loads' ledger survives: a third load still loads nothing
    assert cli.main(["run", example, "--master", "local[2]", "--json"]) == 0
    second = yaml.safe_load(capsys.readouterr().out.strip().splitlines()[-1])
    assert second["partsBefore"] == 0 and second["nothingToDo"] and second["rows"] == 0
