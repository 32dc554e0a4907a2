"""The driver pod's wrapper around spark-submit: the log passes through, and what Kubernetes
refused the driver reaches the termination message when the driver fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REFUSED = ("io.fabric8.kubernetes.client.KubernetesClientException: Failure executing: POST at: "
           "https://kubernetes.default.svc/api/v1/namespaces/ns/pods. Message: pods is forbidden: User "
           '"system:serviceaccount:ns:lading-spark" cannot create resource "pods" in API group "" in the namespace '
           '"ns". Received status: Status(apiVersion=v1, code=403).')
WHY = ('the Spark driver was refused by Kubernetes: Kubernetes refused POST /api/v1/namespaces/ns/pods: pods is '
       'forbidden: User "system:serviceaccount:ns:lading-spark" cannot create resource "pods" in API group "" in '
       'the namespace "ns"')


def run(tmp_path: Path, code: int, log: str, before: str = "") -> tuple[subprocess.CompletedProcess[str], str]:
    """The wrapper around a stand-in for spark-submit that logs ``log``, writes ``before`` to the
    termination log (as the PySpark app does) and exits ``code``."""
    termination = tmp_path / "termination-log"
    termination.write_text("")
    child = (f"import sys; sys.stderr.write({log!r}); open({str(termination)!r}, 'w').write({before!r}); "
             f"sys.exit({code})")
    env = {"PATH": "/usr/bin:/bin", "LADING_TERMINATION_LOG": str(termination),
           "PYTHONPATH": f"{REPO / 'spark_apps'}"}
    done = subprocess.run([sys.executable, "-m", "lading_jobs.driver_pod", sys.executable, "-c", child],
                          capture_output=True, text=True, env=env, timeout=60)
    return done, termination.read_text()


def test_a_driver_that_exits_without_a_result_reports_the_refusal(tmp_path: Path) -> None:
    done, message = run(tmp_path, 11, "INFO starting\n" + REFUSED + "\n\tat io.fabric8...\nINFO exiting\n")
    assert done.returncode == 11  # spark-submit's own code
    assert REFUSED in done.stderr and "INFO exiting" in done.stderr  # the log passes through
    assert json.loads(message) == {"error": f"the Spark driver stopped (exit code 11); {WHY}"}


def test_the_apps_own_error_keeps_its_words_and_gains_the_refusal(tmp_path: Path) -> None:
    before = json.dumps({"error": "Job 0 cancelled because SparkContext was shut down", "rows": None})
    _, message = run(tmp_path, 1, REFUSED + "\n", before)
    assert json.loads(message) == {"error": f"Job 0 cancelled because SparkContext was shut down; {WHY}",
                                   "rows": None}


@pytest.mark.parametrize(("code", "before"), [
    (0, json.dumps({"rows": 3})),             # succeeded: a refusal on the way (retried) changes nothing
    (143, json.dumps({"cancelled": True})),   # cancelled: the app's word stands
    (1, json.dumps({"error": "boom"})),       # failed, but nothing refused: the app's error alone
])
def test_other_outcomes_are_left_as_the_app_wrote_them(tmp_path: Path, code: int, before: str) -> None:
    log = REFUSED + "\n" if code != 1 else "ERROR boom\n"
    done, message = run(tmp_path, code, log, before)
    assert done.returncode == code and message == before


def test_the_orphaned_apps_late_error_is_merged_not_overwritten(tmp_path: Path) -> None:
    """Spark's System.exit(11) ends the JVM first; the PySpark app, orphaned, reports the broken
    connection a moment later: the wrapper waits for it and adds the refusal to it."""
    termination = tmp_path / "termination-log"
    late = json.dumps({"error": "Answer from Java side is empty"})
    orphan = f"import time; time.sleep(1); open({str(termination)!r}, 'w').write({late!r})"
    child = (f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {orphan!r}], "
             f"stderr=subprocess.DEVNULL); sys.stderr.write({REFUSED + chr(10)!r}); sys.exit(11)")
    termination.write_text("")
    env = {"PATH": "/usr/bin:/bin", "LADING_TERMINATION_LOG": str(termination), "PYTHONPATH": f"{REPO / 'spark_apps'}"}
    done = subprocess.run([sys.executable, "-m", "lading_jobs.driver_pod", sys.executable, "-c", child],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 11
    assert json.loads(termination.read_text()) == {"error": f"Answer from Java side is empty; {WHY}"}


def test_the_jvms_log_passes_with_secret_values_scrubbed(tmp_path: Path) -> None:
    """spark-submit's stderr (the JVM's log, and its Python workers') is not behind main.py's own filter."""
    termination = tmp_path / "termination-log"
    termination.write_text("")
    child = "import os, sys; sys.stderr.write('conf ' + os.environ['AWS_SECRET_ACCESS_KEY'] + ' in a log line\\n')"
    env = {"PATH": "/usr/bin:/bin", "LADING_TERMINATION_LOG": str(termination), "PYTHONPATH": f"{REPO / 'spark_apps'}",
           "AWS_SECRET_ACCESS_KEY": "s3cr3t-value-42"}
    done = subprocess.run([sys.executable, "-m", "lading_jobs.driver_pod", sys.executable, "-c", child],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "s3cr3t-value-42" not in done.stderr and "conf [redacted] in a log line" in done.stderr, done.stderr
