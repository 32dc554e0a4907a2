"""A tenant's query can neither read the pod's secrets nor publish them.

- outputs: the attacks of issue 14 (``java_method(... getenv ...)``,
  ``${env:...}``, SQL on a path) write nothing secret into an export;
- logs and the termination message: the real ``main.py`` as a process with marker
  secrets in its environment; a query that raises an error carrying a secret's
  value leaves no trace of it in stdout, stderr (the JVM's included) or the
  termination log, only ``[redacted]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.unload import job_doc

from lading_jobs import scrub
from lading_jobs.main import execute
from lading_jobs.result import Cancellation
from lading_spec.job import parse_result

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "spark_apps" / "lading_jobs" / "main.py"


def _files_text(root: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


@pytest.mark.spark
def test_attacks_write_no_secret_into_outputs(spark: Any, tmp_path: Path) -> None:
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]  # what the shared Spark JVM was started with
    attacks = {
        "java_method": "SELECT java_method('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY') AS s",
        "reflect": "SELECT reflect('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY') AS s",
        "file": "SELECT * FROM text.`/proc/self/environ`",
    }
    for name, query in attacks.items():
        dest = tmp_path / name
        out = execute(job_doc({"from": {"query": query}, "to": {"files": f"file://{dest}/", "format": "csv"}}),
                      lambda: spark, Cancellation())
        assert "error" in out and "rows" not in out, (name, out)
        assert secret not in json.dumps(out)
        assert not dest.exists() or secret not in _files_text(dest), name
    dest = tmp_path / "substitute"
    out = execute(job_doc({"from": {"query": "SELECT '${env:AWS_SECRET_ACCESS_KEY}' AS s"},
                           "to": {"files": f"file://{dest}/", "format": "csv"}}), lambda: spark, Cancellation())
    assert out.get("rows") == 1, out
    written = _files_text(dest)
    assert "${env:AWS_SECRET_ACCESS_KEY}" in written and secret not in written


@pytest.mark.spark
@pytest.mark.slow
def test_main_process_logs_and_termination_message_carry_no_secret(tmp_path: Path) -> None:
    markers = {"AWS_SECRET_ACCESS_KEY": "marker-secret-key-5e1c9a", "AWS_SESSION_TOKEN": "marker-session-7f3b2d",
               "WAREHOUSE_PASSWORD": "marker-password-94d0e2"}
    leak = " ".join(markers.values())
    query = f"SELECT raise_error('leaking: {leak}') AS x FROM range(4)"
    doc = job_doc({"from": {"query": query}, "to": {"files": f"file://{tmp_path}/out/", "format": "csv"}})
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(markers, AWS_ACCESS_KEY_ID="marker-access-id", LADING_TERMINATION_LOG=str(tmp_path / "termination-log"),
               PYTHONPATH="")
    proc = subprocess.run([sys.executable, str(MAIN), "--master", "local[1]", "--job", doc.to_json()],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    termination = (tmp_path / "termination-log").read_text()
    assert proc.returncode == 1, proc.stderr[-3000:]
    result = parse_result(termination)
    assert result is not None and "leaking: " + " ".join([scrub.REDACTED] * 3) in result["error"], result
    assert parse_result(proc.stdout) == result
    assert "raise_error" in proc.stderr or "leaking" in proc.stderr  # the JVM did log the failure ...
    for name, value in markers.items():  # ... but no value of a secret, anywhere
        for where, text in (("stdout", proc.stdout), ("stderr", proc.stderr), ("termination log", termination)):
            assert value not in text, f"{name} in {where}"
