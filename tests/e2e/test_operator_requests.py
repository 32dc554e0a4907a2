"""What one CopyJob run costs the API server: the operator's requests, counted by the server.

The operator runs as a process with the chart's ServiceAccount; the spark-operator stand-in
runs in instant mode (no Spark: each SparkApplication completes at once with a synthetic
termination message, as in bench/operator_scale.py), so every request counted is the
operator's own bookkeeping. The count comes from the API server's audit log, not from the
operator: the requests of the operator's identity that name the test's namespace are the
per-run ones (its watches are cluster-wide: one for all runs, not counted per run).

The budget (issue 44, docs/operator.md "API requests per run"): at most 5 requests per run
from created to Succeeded: the status written twice (Submitted, before the SparkApplication
exists; Succeeded), the SparkApplication created, the two Events a user sees in
``kubectl describe`` (Submitted, Succeeded), nothing else: the first pass starts from the watch
event, the SparkApplication's end and its driver's termination message come from watches.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.control_plane import audit_requests
from harness.fixtures import Kube
from harness.identities import Identity
from harness.spark_operator import SparkOperatorStandIn

from .conftest import API, OperatorProcess, wait_phase

JOBS = 4
BUDGET = 5


@pytest.fixture(scope="module")
def counted_operator(operator_identity: Identity, instant: SparkOperatorStandIn,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    op = OperatorProcess(operator_identity.kubeconfig,
                         tmp_path_factory.mktemp("operator") / "operator.log").start()
    yield op
    op.stop()


def _requests(kube: Kube, user: str, namespace: str) -> Counter[str]:
    if not (Path(kube.endpoint.directory) / "audit.log").exists():
        pytest.skip("no audit log: the cluster is not this session's own (LADING_TEST_KUBECONFIG)")
    return Counter(f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
                   for r in audit_requests(kube.endpoint, user) if r.namespace == namespace)


def test_a_copyjob_run_costs_at_most_five_operator_requests(
        kube: Kube, plain_namespace: str, operator_identity: Identity,
        counted_operator: OperatorProcess) -> None:
    names = [f"count-{i}" for i in range(JOBS)]
    for i, name in enumerate(names):
        kube.client.create({"apiVersion": API, "kind": "CopyJob",
                            "metadata": {"name": name, "namespace": plain_namespace},
                            "spec": {"from": {"query": f"SELECT {i} AS i"},
                                     "to": {"files": f"s3://requests/out/{name}/", "format": "csv"}}},
                           "copyjobs")
    for name in names:
        done = wait_phase(kube.client, plain_namespace, name, {"Succeeded", "Failed"})
        assert done["status"]["phase"] == "Succeeded", (done["status"], counted_operator.log())
        assert done["status"]["response"]["rows"] == 0  # the synthetic termination message's
        kube.client.events_about(plain_namespace, name, "Submitted", "Succeeded")
    time.sleep(3)  # whatever a pass still does after the run ended counts too
    counts = _requests(kube, operator_identity.user, plain_namespace)
    per_run = sum(counts.values()) / JOBS
    assert per_run <= BUDGET, (f"{per_run:.2f} operator requests per CopyJob run (budget {BUDGET}): "
                               f"{dict(counts)}")
    # What is left is what a user needs: kubectl describe shows the phase, the rows, the Event
    # that says the run ended.
    described = subprocess.run(["kubectl", "--kubeconfig", kube.kubeconfig, "-n", plain_namespace,
                                "describe", "copyjob", names[0]], capture_output=True, text=True, timeout=60)
    assert described.returncode == 0, described.stderr
    text = described.stdout
    assert "Phase:" in text and "Succeeded" in text and "Rows:" in text, text
    events = text[text.index("Events:"):]
    assert "Submitted" in events and "Succeeded" in events, text

