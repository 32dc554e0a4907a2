"""Issue 41's regression: a load in a pod never copies the pod's secrets into what it writes.

A CopyJob load naming ``file:///proc/self/environ`` (the connection Secret's keys are in the
process's environment) or the ServiceAccount token as its input, with ``format: json``,
``onError: continue`` and ``validateOnly: true``, used to land the raw content in
``rejectedRows`` and the load manifest, under a prefix the tenant chose. The job runs here as in a
pod: ``lading_jobs.main`` in its own process (so its Spark workers get its environment), with
``KUBERNETES_SERVICE_HOST`` set and the prefix the operator renders in ``LADING_FILE_PREFIXES``.
Fails on main, where the environment's marker reached ``rejectedRows``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lading_spec import localfiles
from lading_spec.job import JobDocument

MARKER = "zq9Xsecret-marker-4170"
SCHEMA = [{"name": "id", "type": "bigint"}, {"name": "name", "type": "string"}]
REPO = Path(__file__).resolve().parents[3]


def _run_in_pod(tmp_path: Path, allowed: Path, source: str) -> dict[str, Any]:
    spec = {"from": {"files": source, "format": "json"},
            "to": {"table": f"file://{allowed}/t/", "schema": SCHEMA},
            "onError": "continue", "validateOnly": True, "rejectedRows": f"file://{allowed}/rejected/"}
    doc = JobDocument("CopyJob", "team-a", "steal", "uid", 1, "run-1", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), spec)
    job_file, log, result = tmp_path / "job.json", tmp_path / "driver.log", tmp_path / "termination-log"
    job_file.write_text(doc.to_json())
    env = {**os.environ, "KUBERNETES_SERVICE_HOST": "10.96.0.1", "AWS_SECRET_ACCESS_KEY": MARKER,
           localfiles.PREFIXES_ENV: json.dumps([f"file://{allowed}/"]), "LADING_TERMINATION_LOG": str(result),
           "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("spark_apps", "operator", "."))}
    with open(log, "wb") as out:
        subprocess.run([sys.executable, str(REPO / "spark_apps/lading_jobs/main.py"), "--master", "local[1]",
                        "--job-file", str(job_file)], env=env, stdout=out, stderr=out, timeout=600, check=False)
    assert result.exists(), log.read_text()[-3000:]
    return json.loads(result.read_text())


def _written(root: Path) -> str:
    """Every byte the job left under ``root`` (table, manifest, rejected rows, staging), as text."""
    return "".join(p.read_bytes().decode(errors="replace") for p in root.rglob("*") if p.is_file()
                   and not p.is_symlink())


@pytest.mark.parametrize("source", ["file:///proc/1/environ",
                                    "file:///var/run/secrets/kubernetes.io/serviceaccount/token"])
def test_a_load_in_a_pod_never_opens_the_pods_secrets(tmp_path: Path, source: str) -> None:
    allowed = tmp_path / "team-a"
    allowed.mkdir()
    result = _run_in_pod(tmp_path, allowed, source)
    assert "error" in result and "outside the file:// prefixes" in result["error"], result
    assert MARKER not in _written(allowed) and MARKER not in json.dumps(result)
    assert not (allowed / "rejected").exists()


def test_links_under_the_prefix_to_secrets_are_not_followed(tmp_path: Path) -> None:
    """A link to another tenant's (or a mounted Secret's) file, and to /proc/self/environ: on main
    the first one's content landed in rejectedRows."""
    allowed, other = tmp_path / "team-a", tmp_path / "team-b"
    (allowed / "in").mkdir(parents=True)
    other.mkdir()
    (other / "creds.json").write_text(f"password={MARKER}\n")
    (allowed / "in" / "creds.json").symlink_to(other / "creds.json")
    (allowed / "in" / "environ.json").symlink_to("/proc/self/environ")
    (allowed / "in" / "secrets").symlink_to(other, target_is_directory=True)
    (allowed / "in" / "ok.json").write_text('{"id": 1, "name": "a"}\n')
    result = _run_in_pod(tmp_path, allowed, f"file://{allowed}/in/")
    assert MARKER not in _written(allowed) and MARKER not in json.dumps(result)
    assert result.get("rows") == 1 and not result.get("rowsRejected"), result  # only the real file was read
