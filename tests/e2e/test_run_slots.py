"""A namespace's run slots (policy ``limits.runs``) on a real API server: runs beyond the limit wait.

The operator runs as a process with the chart's ServiceAccount and a policy file that gives the
test's namespaces one run slot each; the spark-operator stand-in runs in instant mode (no Spark: each
SparkApplication completes at once), so the only thing that spaces the runs out is the
operator. A watch on the namespace's SparkApplications records, in the API server's order,
each application's creation and its end: never more than the limit may be under way at once,
the ones that waited say so (Ready reason ``Queued`` and an Event), and every one ends
Succeeded from one application. (Which waiting resource gets a freed slot, oldest first, is
tests/lading_operator/test_runslots.py's: here the passes' timing decides who waits at all.)
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml

from harness.client import wait_until
from harness.fixtures import Kube
from harness.identities import Identity
from harness.spark_operator import SparkOperatorStandIn

from .conftest import API, OperatorProcess, apps_of, wait_phase

JOBS = 4
LIMIT = 1
APPS = "/apis/sparkoperator.k8s.io/v1beta2/namespaces/{}/sparkapplications"
ENDED = {"COMPLETED", "FAILED"}


@pytest.fixture(scope="module")
def slotted_operator(operator_identity: Identity,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    directory = tmp_path_factory.mktemp("run-slots")
    policy = directory / "policy.yaml"
    policy.write_text(yaml.safe_dump({
        "allowedPrefixes": {"default": ["s3://"]},
        "limits": {"default": {"executors": 4, "cores": 2, "memory": "8g", "runs": LIMIT}}}))
    op = OperatorProcess(operator_identity.kubeconfig, directory / "operator.log",
                         env={"LADING_POLICY_FILE": str(policy)}).start()
    yield op
    op.stop()


class AppHistory(threading.Thread):
    """Every SparkApplication event of a namespace, in the API server's order: (name, state)."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        super().__init__(daemon=True)
        self.session, self.url = kube.client.session, kube.client.url + APPS.format(namespace)
        self.verify = kube.client.session.verify  # given on each call: the environment's CA settings would win
        self.events: list[tuple[str, str]] = []
        self.listed = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        listing = self.session.get(self.url, timeout=60, verify=self.verify).json()
        assert not listing.get("items"), listing  # the namespace starts empty
        self.listed.set()
        params = {"watch": "true", "resourceVersion": listing["metadata"]["resourceVersion"], "timeoutSeconds": "120"}
        try:
            with self.session.get(self.url, params=params, stream=True, timeout=(10, 150),
                                  verify=self.verify) as answer:
                for line in answer.iter_lines():
                    if self.stop.is_set():
                        return
                    if line:
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        state = ((obj.get("status") or {}).get("applicationState") or {}).get("state") or ""
                        self.events.append((obj["metadata"]["name"], "DELETED" if event["type"] == "DELETED"
                                            else state))
        except requests.RequestException:
            return

    def most_under_way(self) -> int:
        under_way: set[str] = set()
        most = 0
        for name, state in self.events:
            if state in ENDED or state == "DELETED":
                under_way.discard(name)
            else:
                under_way.add(name)
            most = max(most, len(under_way))
        return most


def create(kube: Kube, namespace: str, name: str) -> None:
    kube.client.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": name, "namespace": namespace},
                        "spec": {"from": {"query": "SELECT 1 AS i"},
                                 "to": {"files": f"s3://slots/out/{name}/", "format": "csv"}}}, "copyjobs")


def ready_reason(kube: Kube, namespace: str, name: str) -> str:
    obj = kube.client.get(API, "copyjobs", namespace, name)
    return next((str(c.get("reason")) for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"), "")


def test_a_restarted_operator_counts_the_runs_under_way_before_it_starts_another(
        kube: Kube, standin_identity: Identity, slotted_operator: OperatorProcess) -> None:
    restart_namespace = kube.create_namespace()
    try:
        restarted(kube, standin_identity, restart_namespace, slotted_operator)
    finally:
        kube.delete_namespace(restart_namespace)


def restarted(kube: Kube, standin_identity: Identity, restart_namespace: str, slotted_operator: OperatorProcess) -> None:
    # No spark-operator yet: the first run's application is created and stays under way.
    history = AppHistory(kube, restart_namespace)
    history.start()
    assert history.listed.wait(30)
    create(kube, restart_namespace, "first")
    wait_phase(kube.client, restart_namespace, "first", "Submitted", timeout=60)
    create(kube, restart_namespace, "second")
    wait_until(lambda: ready_reason(kube, restart_namespace, "second"), lambda r: r == "Queued", timeout=60,
               interval=0.2, what="the second CopyJob queued")
    slotted_operator.kill()  # SIGKILL: the new process knows nothing but what the API server has
    create(kube, restart_namespace, "third")
    slotted_operator.start()
    wait_until(lambda: ready_reason(kube, restart_namespace, "third"), lambda r: r == "Queued", timeout=60,
               interval=0.2, what="the third CopyJob queued by the restarted operator")
    assert ready_reason(kube, restart_namespace, "second") == "Queued"
    assert [a["metadata"]["labels"]["lading.io/name"] for a in apps_of(kube.client, restart_namespace)] == ["first"]
    # What a user sees: the Pending ones are Queued in `kubectl get -o wide` (the Reason column).
    table = subprocess.run(["kubectl", "--kubeconfig", kube.kubeconfig, "-n", restart_namespace, "get", "copyjobs",
                            "-o", "wide"], capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[1:]}
    assert table.stdout.split()[:6] == ["NAME", "PHASE", "ROWS", "FILES", "AGE", "REASON"], table.stdout
    assert [rows[n][1] for n in ("first", "second", "third")] == ["Submitted", "Pending", "Pending"], table.stdout
    assert [rows[n][-1] for n in ("first", "second", "third")] == ["Submitted", "Queued", "Queued"], table.stdout
    with SparkOperatorStandIn(kube.url, token=standin_identity.token, ca=kube.ca, mode="instant"):
        jobs = [wait_phase(kube.client, restart_namespace, n, {"Succeeded", "Failed"}, timeout=120)
                for n in ("first", "second", "third")]
    history.stop.set()
    assert [j["status"]["phase"] for j in jobs] == ["Succeeded"] * 3, slotted_operator.log()
    assert history.most_under_way() == LIMIT, history.events


def test_a_namespace_runs_at_most_its_limit_and_the_others_start_in_turn(
        kube: Kube, plain_namespace: str, instant: SparkOperatorStandIn, slotted_operator: OperatorProcess) -> None:
    history = AppHistory(kube, plain_namespace)
    history.start()
    assert history.listed.wait(30)
    names = [f"slot-{i}" for i in range(JOBS)]
    for name in names:
        create(kube, plain_namespace, name)
    jobs = [wait_phase(kube.client, plain_namespace, name, {"Succeeded", "Failed"}, timeout=120) for name in names]
    history.stop.set()
    for job in jobs:
        assert job["status"]["phase"] == "Succeeded", (job["status"], slotted_operator.log())
        assert job["status"]["attempts"] == 1
    apps = {a["metadata"]["name"]: a["metadata"]["labels"]["lading.io/name"] for a in apps_of(kube.client,
                                                                                               plain_namespace)}
    assert sorted(apps.values()) == names  # one application each
    assert history.most_under_way() == LIMIT, history.events
    # The ones that waited said so: the Event, and the Ready condition while they waited.
    queued = [name for name in names if _has_event(kube, plain_namespace, name, "Queued")]
    assert queued, "no CopyJob was queued: " + slotted_operator.log()
    assert len(queued) < JOBS  # the first to ask did not wait


def _has_event(kube: Kube, namespace: str, name: str, reason: str) -> bool:
    events: list[dict[str, Any]] = kube.client.list("v1", "events", namespace)
    return any(e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == name for e in events)
