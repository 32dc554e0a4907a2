"""What a compaction task's module imports: a worker's first task pays each import (issue 30).

A fresh interpreter imports ``lading_jobs.compact.task`` (what a Spark task's function
unpickles) and reports which modules came with it: neither the spec modules (the driver
parsed the spec) nor urllib3 and boto3 (an S3 table's storage imports them when it opens one;
a file:// table never needs them).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

NOT_IMPORTED = ("lading_spec.compaction", "lading_spec.copyjob", "urllib3", "boto3", "lading_jobs.pinning")


@pytest.fixture(scope="module")
def imported() -> set[str]:
    code = "import json, sys; import lading_jobs.compact.task; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_the_task_module_imports_what_a_task_runs(imported: set[str]) -> None:
    assert {"lading_jobs.compact.task", "lading_jobs.compact.rewrite", "pyarrow.parquet"} <= imported


@pytest.mark.parametrize("module", NOT_IMPORTED)
def test_the_task_module_leaves_out(imported: set[str], module: str) -> None:
    assert module not in imported, f"importing lading_jobs.compact.task imports {module}"


def test_a_file_storage_does_not_import_urllib3() -> None:
    code = ("import json, sys; from lading_jobs import storage; storage.open_storage('file:///tmp/x/'); "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert "urllib3" not in set(json.loads(out.stdout.splitlines()[-1]))
