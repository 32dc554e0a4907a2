"""``to.inferSchema`` from the first file, without Spark: what each format's inference gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lading_jobs.ingest.infer import infer_schema
from lading_spec.formats import JsonOptions

ROOT = Path(__file__).resolve().parents[3]


def test_json_lines_that_are_no_object_give_no_columns_and_do_not_crash() -> None:
    # pyarrow's reader crashed the process (SIGSEGV) on a first line 'null', so the inference runs in
    # a child: a crash fails the test instead of the test run.
    code = ("from lading_jobs.ingest.infer import infer_schema; from lading_spec.formats import JsonOptions; "
            "print(infer_schema(b'null\\n  null\\n', 'json', JsonOptions(), 'file:///x.jsonl').names)")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env={"PYTHONPATH": str(ROOT / "spark_apps")})
    assert child.returncode != -11, "the inference crashed the process (SIGSEGV)"
    assert "SchemaError: to.inferSchema: file:///x.jsonl holds no columns to infer a schema from" in child.stderr
    data = b'null\n{"id": 1, "name": "a"}\n5\n{"id": 2, "name": null}\n'
    schema = infer_schema(data, "json", JsonOptions(), "file:///x.jsonl")
    assert [(c.name, c.type) for c in schema.columns] == [("id", "bigint"), ("name", "string")]
