"""The operator process when the API misbehaves, on a real control plane of this module's own.

Faults come from a proxy between the operator and the real kube-apiserver
(``harness.api_proxy``: 500 answers, dropped watches, answers held back) and from real
causes (``harness.own_control_plane``: the API server restarted; etcd compacted so that a
resumed watch is answered 410 Gone by the server). The control plane is this module's own
(etcd + kube-apiserver started by the project's code on the shared binaries), because the
shared launcher stops everything when its API server exits, and because these tests must
not disturb the session's plane. The operator runs as the chart's ServiceAccount, through
the proxy; the spark-operator stand-in in instant mode (no Spark) talks to the server directly.

What each test protects:
- 500s on the create, the status write and the watch: the run still gets exactly one
  SparkApplication and ends Succeeded (the reconcile loop survives any API error and
  backs off; a create is never repeated under another name);
- dropped watches: a resource created after the operator's watches were reset is reconciled;
- slow answers to every request of a run (0.5 s each): it ends once, Succeeded;
- a slow answer for one resource (its create held) does not hold the others back;
- etcd compacted while the operator's watch was away: the resumed watch gets 410 Gone from the
  real server, kopf lists again, and the resource created meanwhile is reconciled;
- the API server crashed (SIGKILL) and came back: the operator carries on, with no crash and
  no second application.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness import identities
from harness.api_proxy import ApiProxy, Fault
from harness.client import wait_until
from harness.fixtures import Kube, crd_files, install_crds, job_namespace_labels, load_crds
from harness.own_control_plane import OwnControlPlane
from harness.spark_operator import SparkOperatorStandIn

from .conftest import OperatorProcess, apps_of, copyjob, wait_phase

pytestmark = pytest.mark.k8s  # no timeout mark: one would move the module to the front (tests/conftest.py)

SPARK = "sparkoperator.k8s.io/v1beta2"
SPEC = {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://out/faults/", "format": "csv"}}
# CopyJobs are not served from the API server's watch cache here, so that their watches read
# etcd and a compaction reaches them (every other resource is cached, as on a cluster).
UNCACHED = "--watch-cache-sizes=copyjobs.lading.io#0"


class Plane:
    """This module's control plane, the proxy in front of it, the operator behind the proxy."""

    def __init__(self, own: OwnControlPlane, kube: Kube, proxy: ApiProxy, operator: OperatorProcess) -> None:
        self.own, self.kube, self.proxy, self.operator = own, kube, proxy, operator


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    directory = tmp_path_factory.mktemp("own-control-plane")
    own = OwnControlPlane(directory / "plane", apiserver_args=(UNCACHED,))
    try:
        endpoint = own.start()
        admin = directory / "admin.kubeconfig"
        kube = Kube(endpoint, admin)
        kube.write_kubeconfig(admin, endpoint.token, "admin")
        install_crds(kube.client, load_crds(crd_files()))
        operator_id = identities.install(kube, identities.operator_rbac(), identities.RELEASE_NAMESPACE,
                                         identities.RELEASE, directory)
        standin_id = identities.install(kube, identities.spark_operator_rbac(), identities.SPARK_OPERATOR_NAMESPACE,
                                        identities.SPARK_OPERATOR_ACCOUNT, directory)
        with ApiProxy(kube.url, kube.ca) as proxy, \
                SparkOperatorStandIn(kube.url, mode="instant", token=standin_id.token, ca=kube.ca,
                                     log_dir=directory / "drivers"):
            operator = OperatorProcess(proxy.kubeconfig(operator_id.token, directory / "operator.kubeconfig"),
                                       directory / "operator.log").start()
            try:
                yield Plane(own, kube, proxy, operator)
            finally:
                operator.stop()
    finally:
        own.stop()


@pytest.fixture
def ns(plane: Plane) -> Iterator[str]:
    plane.proxy.clear()
    name = plane.kube.create_namespace(labels=job_namespace_labels())
    yield name
    plane.proxy.clear()
    plane.proxy.release()  # nothing stays held for the next test


def create(plane: Plane, ns: str, name: str, spec: dict[str, Any] | None = None) -> None:
    plane.kube.client.create(copyjob(name, ns, spec or SPEC), "copyjobs")


def succeeded_once(plane: Plane, ns: str, name: str) -> dict[str, Any]:
    """The CopyJob Succeeded with the stand-in's rows, from exactly one SparkApplication."""
    job = wait_phase(plane.kube.client, ns, name, "Succeeded", timeout=120)
    apps = [a for a in apps_of(plane.kube.client, ns) if a["metadata"]["labels"]["lading.io/name"] == name]
    assert [a["metadata"]["name"] for a in apps] == [job["status"]["sparkApplication"]]
    assert job["status"]["attempts"] == 1
    return job


def alive(plane: Plane) -> None:
    assert plane.operator.process is not None and plane.operator.process.poll() is None, plane.operator.log()


def injected(plane: Plane, fault: str) -> int:
    return sum(1 for s in plane.proxy.seen if s.fault == fault)


def test_500s_on_create_status_write_and_watch_still_make_one_application(plane: Plane, ns: str) -> None:
    plane.proxy.add(Fault(path=f"/namespaces/{ns}/sparkapplications$", method="POST", status=500, times=2))
    plane.proxy.add(Fault(path=f"/namespaces/{ns}/copyjobs/[^/]+/status$", method="PATCH", status=500, times=1))
    create(plane, ns, "five-hundred")
    succeeded_once(plane, ns, "five-hundred")
    assert injected(plane, "status 500") == 3
    # The watch answered 500 when it came back: kopf retries it, and the operator still sees changes.
    plane.proxy.add(Fault(path="/copyjobs$", watch=True, status=500, times=2))
    assert plane.proxy.cut_watches("/copyjobs") >= 1
    create(plane, ns, "after-watch-500")
    succeeded_once(plane, ns, "after-watch-500")
    assert injected(plane, "status 500") == 5
    alive(plane)


def test_a_resource_created_after_the_watches_were_dropped_is_reconciled(plane: Plane, ns: str) -> None:
    # The fault first: the operator's watch may come back as soon as it is cut, before this thread
    # runs again (under load it did, once), and would then never meet the fault.
    plane.proxy.add(Fault(path="/copyjobs$", watch=True, cut_after_headers=True, times=1))
    assert plane.proxy.cut_watches() >= 2  # the operator's copyjobs and sparkapplications watches (at least)
    create(plane, ns, "after-drop")
    succeeded_once(plane, ns, "after-drop")
    assert injected(plane, "cut") == 1
    alive(plane)


def test_slow_answers_to_every_request_still_end_the_run_once(plane: Plane, ns: str) -> None:
    delayed = injected(plane, "delay 0.5")
    plane.proxy.add(Fault(path=f"/namespaces/{ns}/", watch=False, delay=0.5, times=-1))
    create(plane, ns, "slow-server")
    succeeded_once(plane, ns, "slow-server")
    # Every request of the run was answered half a second late: status writes, create, Events (the
    # resource and the driver's termination message come from watch events: docs/operator.md, "API
    # requests per run"; a pass that reads them anyway is delayed too).
    assert injected(plane, "delay 0.5") - delayed >= 5
    alive(plane)


def test_a_held_create_does_not_hold_back_other_resources(plane: Plane, ns: str) -> None:
    held = plane.proxy.held
    plane.proxy.add(Fault(path=f"/namespaces/{ns}/sparkapplications$", method="POST", hold=True, times=1))
    create(plane, ns, "slow")
    wait_until(lambda: plane.proxy.held, lambda now: now > held, timeout=60, interval=0.1,
               what="the operator's create held at the proxy")
    create(plane, ns, "quick")
    succeeded_once(plane, ns, "quick")
    assert apps_of(plane.kube.client, ns)[0]["metadata"]["labels"]["lading.io/name"] == "quick"
    plane.proxy.release()
    succeeded_once(plane, ns, "slow")
    alive(plane)


def test_a_watch_resumed_after_etcd_compaction_gets_410_and_the_operator_lists_again(
        plane: Plane, ns: str) -> None:
    create(plane, ns, "before")
    succeeded_once(plane, ns, "before")  # the operator's copyjobs watch has seen recent events
    gone_before = len(plane.proxy.gone)
    held = plane.proxy.held
    plane.proxy.add(Fault(path="/copyjobs$", watch=True, hold=True, times=1))
    assert plane.proxy.cut_watches("/copyjobs") >= 1
    wait_until(lambda: plane.proxy.held, lambda now: now > held, timeout=60, interval=0.1,
               what="the operator's watch coming back (held at the proxy)")
    create(plane, ns, "while-away")
    plane.own.compact()  # the history the held watch would resume from is gone
    plane.proxy.release()
    wait_until(lambda: len(plane.proxy.gone), lambda n: n > gone_before, timeout=60, interval=0.1,
               what="410 Gone answered to the resumed watch")
    succeeded_once(plane, ns, "while-away")
    alive(plane)


def test_the_operator_carries_on_when_the_api_server_crashes_and_comes_back(plane: Plane, ns: str) -> None:
    create(plane, ns, "before-restart")
    succeeded_once(plane, ns, "before-restart")
    gone_before = len(plane.proxy.gone)
    plane.own.restart_apiserver()  # SIGKILL, then started again at the same address
    create(plane, ns, "after-restart")
    succeeded_once(plane, ns, "after-restart")
    # The one before is left as it was: no second application, no rewritten outcome.
    succeeded_once(plane, ns, "before-restart")
    # The new server's watch cache starts at its own start: the watches the operator resumed
    # from older resourceVersions of cached kinds were answered 410 Gone, and kopf listed again.
    assert len(plane.proxy.gone) > gone_before
    alive(plane)
