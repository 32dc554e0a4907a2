"""Two operator replicas with leader election (docs/operator.md#two-replicas-leader-election):
two ``python -m lading_operator`` processes against the real control plane, each with its own
token of the chart's ServiceAccount (as two pods would have), bound by the chart's own Roles.

- the standby does nothing while the leader lives: the audit log shows its credential
  touching the Lease and nothing else (no watch, no status write, no SparkApplication);
- SIGKILL the leader mid-run: the standby takes the Lease, picks the run up from status and
  finishes it: one SparkApplication, one of each status Event, the right rows;
- a leader stopped cleanly (SIGTERM) releases the Lease: the standby leads at once;
- a leader that finds another holder in its Lease stops at once, and one that cannot renew
  (its token stops working: the object it was bound to is deleted) stops after its renew
  deadline: the process exits.

Lease timing is short here (8 s lease, 6 s renew deadline: some margin on a loaded CI machine)
to keep the handover cheap; each test uses a Lease of its own name, so a killed replica's
Lease never meets another test.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import identities
from harness.client import wait_until
from harness.fixtures import Kube
from harness.spark_operator import SparkOperatorStandIn

from .conftest import API, OperatorProcess, apps_of, wait_phase

pytestmark = [pytest.mark.k8s, pytest.mark.s3, pytest.mark.slow]
LEASES = "coordination.k8s.io/v1"
TIMING = {"LADING_LEASE_DURATION": "8", "LADING_LEASE_RENEW_DEADLINE": "6", "LADING_LEASE_RETRY_PERIOD": "0.5"}
ROWS = 300
# ~4 ms of CPU per row (a tenth of test_copyjob.SLOW_QUERY): the leader is killed as soon as the
# CopyJob is Running, while the driver's JVM is still starting; the run goes on for seconds after.
SLOW_QUERY = ("SELECT id, aggregate(sequence(1, 20000), 0L, (a, x) -> a + x % (id + 1)) AS pause "
              f"FROM range(0, {ROWS}, 1, 2)")

Replica = Callable[..., tuple[OperatorProcess, str]]


@pytest.fixture
def lease_name() -> str:
    return f"lading-operator-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def replica(kube: Kube, operator_identity: identities.Identity, lease_name: str,
            tmp_path: Path) -> Iterator[Replica]:
    """``replica("a")`` starts an operator process as pod ``replica-a`` with a token of its own:
    (the process, its token)."""
    started: list[OperatorProcess] = []

    def start(pod: str, token: str = "", **timing: str) -> tuple[OperatorProcess, str]:
        token = token or kube.service_account_token(identities.RELEASE_NAMESPACE, identities.RELEASE)
        config = kube.write_kubeconfig(tmp_path / f"{pod}.kubeconfig", token, identities.RELEASE)
        op = OperatorProcess(config, tmp_path / f"{pod}.log", env={
            "LADING_LEADER_ELECTION": "on", "LADING_LEASE_NAMESPACE": identities.RELEASE_NAMESPACE,
            "LADING_LEASE_NAME": lease_name, "LADING_POD_NAME": f"replica-{pod}", **TIMING, **timing})
        started.append(op)
        return op.start(), token

    yield start
    for op in started:
        op.stop()


def holder(kube: Kube, lease_name: str) -> str:
    found = kube.client.get_or_none(LEASES, "leases", identities.RELEASE_NAMESPACE, lease_name)
    return str(((found or {}).get("spec") or {}).get("holderIdentity") or "")


def wait_leader(kube: Kube, lease_name: str, pod: str, op: OperatorProcess, timeout: float = 60) -> str:
    try:
        return str(wait_until(lambda: holder(kube, lease_name), lambda h: h.startswith(f"replica-{pod}_"),
                              timeout, 0.2, f"replica-{pod} to hold Lease {lease_name}"))
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\nreplica-{pod}'s log:\n{op.log()}") from exc


def requests_by(kube: Kube, token: str) -> list[tuple[str, str, str]]:
    """(verb, resource, subresource) of every request made with ``token`` (its credential id, from
    the audit log: two replicas are the same ServiceAccount, each with a token of its own)."""
    payload = token.split(".")[1]
    jti = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["jti"]
    path = kube.endpoint.directory / "audit.log"
    if not path.exists():
        pytest.skip("no audit log: the cluster is not this session's own (LADING_TEST_KUBECONFIG)")
    seen: dict[str, tuple[str, str, str]] = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        extra = (event.get("user") or {}).get("extra") or {}
        if f"JTI={jti}" in extra.get("authentication.kubernetes.io/credential-id", []):
            ref = event.get("objectRef") or {}
            seen.setdefault(event["auditID"], (event["verb"], ref.get("resource", ""), ref.get("subresource", "")))
    return list(seen.values())


def only_the_lease(requests: list[tuple[str, str, str]]) -> bool:
    return bool(requests) and all(resource == "leases" and not sub and verb in ("get", "create", "update")
                                  for verb, resource, sub in requests)


def copyjob_spec(bucket: str, secret: str, endpoint: str, to: str) -> dict[str, Any]:
    return {"from": {"query": SLOW_QUERY}, "to": {"files": f"s3://{bucket}/{to}", "format": "csv"},
            "connection": {"secretRef": {"name": secret}, "endpoint": endpoint, "region": "us-east-1"}}


def test_the_standby_does_nothing_while_the_leader_lives(
        kube: Kube, kube_namespace: str, replica: Replica, lease_name: str,
        bucket: str, s3_secret: str, s3_endpoint: str) -> None:
    leader, leader_token = replica("a")
    wait_leader(kube, lease_name, "a", leader)
    standby, standby_token = replica("b")  # healthy: answers the liveness probe while it waits
    kube.client.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": "quiet", "namespace": kube_namespace},
                        "spec": copyjob_spec(bucket, s3_secret, s3_endpoint, "quiet/")}, "copyjobs")
    submitted = wait_phase(kube.client, kube_namespace, "quiet", {"Submitted", "Running"}, timeout=60)
    kube.client.wait_for("sparkoperator.k8s.io/v1beta2", "sparkapplications", kube_namespace,
                         submitted["status"]["sparkApplication"], lambda app: app is not None, timeout=60)
    # The leader watched, wrote status and created the application; by now the standby has tried
    # the Lease several times (every 0.5 s), and done nothing else: no list, no watch, no write.
    led = requests_by(kube, leader_token)
    assert ("patch", "copyjobs", "status") in led and ("create", "sparkapplications", "") in led
    stood_by = wait_until(lambda: requests_by(kube, standby_token),
                          lambda rs: sum(r[0] == "get" for r in rs) >= 2, 30, 0.2, "the standby's attempts")
    assert only_the_lease(stood_by), sorted(set(stood_by))
    assert holder(kube, lease_name).startswith("replica-a_")
    assert "leader election: standby, held by replica-a_" in standby.log()
    assert standby.process is not None and standby.process.poll() is None
    with urllib.request.urlopen(f"http://127.0.0.1:{standby.metrics_port}/metrics", timeout=10) as scraped:
        assert scraped.status == 200  # a standby is a healthy scrape target, not a down one


def test_killing_the_leader_mid_run_hands_over_with_one_run(
        kube: Kube, kube_namespace: str, replica: Replica, lease_name: str, standin: SparkOperatorStandIn,
        s3_client: Any, bucket: str, s3_secret: str, s3_endpoint: str) -> None:
    leader, _ = replica("a")
    first = wait_leader(kube, lease_name, "a", leader)
    standby, standby_token = replica("b")
    kube.client.create({"apiVersion": API, "kind": "CopyJob", "metadata": {"name": "handover",
                                                                            "namespace": kube_namespace},
                        "spec": copyjob_spec(bucket, s3_secret, s3_endpoint, "handover/")}, "copyjobs")
    running = wait_phase(kube.client, kube_namespace, "handover", "Running")
    leader.kill()  # SIGKILL mid-run: no clean shutdown, the Lease is not released
    killed_at = dt.datetime.now(dt.UTC)
    second = wait_leader(kube, lease_name, "b", standby)
    lease = kube.client.get(LEASES, "leases", identities.RELEASE_NAMESPACE, lease_name)["spec"]
    assert lease["leaseTransitions"] == 1 and second != first
    # taken over after the kill, once the lease its holder no longer renewed had run out
    assert dt.datetime.strptime(lease["acquireTime"], "%Y-%m-%dT%H:%M:%S.%f%z") > killed_at
    done = wait_phase(kube.client, kube_namespace, "handover", {"Succeeded", "Failed"})
    status = done["status"]
    assert status["phase"] == "Succeeded", (status, standby.log())
    assert status["response"]["rows"] == ROWS
    # One run: the application the killed leader created, adopted by the new one.
    assert [a["metadata"]["name"] for a in apps_of(kube.client, kube_namespace)] == [
        running["status"]["sparkApplication"]]
    assert (status["runId"], status["attempts"], status["startTime"]) == (
        running["status"]["runId"], 1, running["status"]["startTime"])
    lines = sum(s3_client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read().count(b"\n")
                for o in s3_client.list_objects_v2(Bucket=bucket, Prefix="handover/")["Contents"]
                if not o["Key"].endswith(".json"))
    assert lines == ROWS
    # Each status transition was written and announced once: one Event per reason, none repeated.
    events = kube.client.events_about(kube_namespace, "handover", "Submitted", "Succeeded")
    reasons = [e["reason"] for e in events if e["involvedObject"].get("kind") == "CopyJob"]
    assert sorted(reasons) == sorted(set(reasons)), reasons
    assert all((e.get("count") or 1) == 1 for e in events), events
    # The new leader wrote the outcome; it had written nothing before it led.
    assert ("patch", "copyjobs", "status") in requests_by(kube, standby_token)


def test_a_leader_that_finds_another_holder_stops_at_once(
        kube: Kube, kube_namespace: str, replica: Replica, lease_name: str) -> None:
    leader, _ = replica("a")
    wait_leader(kube, lease_name, "a", leader)
    current = kube.client.get(LEASES, "leases", identities.RELEASE_NAMESPACE, lease_name)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    kube.client.replace({**current, "spec": {**current["spec"], "holderIdentity": "intruder", "renewTime": now,
                                             "acquireTime": now}}, "leases")
    assert leader.process is not None
    code = wait_until(leader.process.poll, lambda c: c is not None, 30, 0.2, "the old leader to exit")
    assert code == 1
    assert "leadership lost, exiting: the Lease is held by intruder" in leader.log()


def test_a_leader_that_cannot_renew_stops_after_its_renew_deadline(
        kube: Kube, kube_namespace: str, replica: Replica, lease_name: str) -> None:
    """A real cause, no fault hook: the leader's token is bound to a Secret (as a pod's token is
    bound to its pod); deleting the Secret makes the API server refuse the token (401), so every
    renewal fails, and the leader exits once its renew deadline (6 s) has passed."""
    secret = kube.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": f"bind-{lease_name}", "namespace": identities.RELEASE_NAMESPACE}}, "secrets")
    answer = kube.client.request(
        "POST", f"/api/v1/namespaces/{identities.RELEASE_NAMESPACE}/serviceaccounts/{identities.RELEASE}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
            "expirationSeconds": 3600, "boundObjectRef": {"kind": "Secret", "apiVersion": "v1",
                                                          "name": secret["metadata"]["name"],
                                                          "uid": secret["metadata"]["uid"]}}})
    leader, _ = replica("a", token=str(answer["status"]["token"]))
    wait_leader(kube, lease_name, "a", leader)
    kube.client.delete("v1", "secrets", identities.RELEASE_NAMESPACE, secret["metadata"]["name"])
    assert leader.process is not None
    code = wait_until(leader.process.poll, lambda c: c is not None, 60, 0.2, "the leader to exit")
    assert code == 1
    assert "renewal failed: reading the Lease failed: 401" in leader.log()
    assert "leadership lost, exiting: not renewed for 6s" in leader.log()


def test_a_leader_stopped_cleanly_releases_the_lease(
        kube: Kube, kube_namespace: str, replica: Replica, lease_name: str) -> None:
    """SIGTERM (an upgrade, a drained node): once its last pass has ended the leader empties the
    Lease's holder, and the standby takes it at its next attempt. The lease lasts an hour here,
    so the standby leads within the test only because the Lease was released."""
    hour = {"LADING_LEASE_DURATION": "3600"}
    leader, _ = replica("a", **hour)
    wait_leader(kube, lease_name, "a", leader)
    standby, _ = replica("b", **hour)
    leader.stop()
    assert leader.process is not None and leader.process.returncode == 0, leader.log()
    assert "released Lease" in leader.log()
    wait_leader(kube, lease_name, "b", standby)
    spec = kube.client.get(LEASES, "leases", identities.RELEASE_NAMESPACE, lease_name)["spec"]
    assert (spec["leaseTransitions"], spec["leaseDurationSeconds"]) == (1, 3600)
