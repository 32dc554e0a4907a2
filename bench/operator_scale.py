"""Operator scale benchmark: many CopyJobs created at once.

  python bench/operator_scale.py [--jobs 1000] [--workers 16] [--runs 0]

Starts a real Kubernetes control plane on 127.0.0.1 (tests/harness/control_plane.py:
etcd, kube-apiserver 1.36, kube-controller-manager, from shared/tools/kube), the
spark-operator stand-in in *instant* mode (a test double used only here: no
Spark, each SparkApplication completes at once with a synthetic termination
message, so what is measured is the operator's own overhead), and the operator
as a process (``python -m lading_operator``, as in its container), as the chart's
ServiceAccount with the chart's RBAC (the stand-in with spark-operator's) and the default
policy but for the namespace's run slots (``policy.limits.runs``, 10 by default): none unless
``--runs`` gives some, so that every CopyJob starts at once. Then it
creates ``--jobs`` CopyJobs as fast as the client can, and measures from each
create call's return:

- create → SparkApplication: when the SparkApplication appears on a watch;
- create → terminal status: when the CopyJob's phase is Succeeded on a watch;
- the operator process's peak RSS (sampled from /proc every 0.2 s);
- CPU seconds per process (operator, stand-in, kube-apiserver, etcd) and the
  operator's API requests per CopyJob by verb and resource (the API server's audit log);
- every client's requests per CopyJob by verb and resource from the API server's own
  counter (``apiserver_request_total`` on its /metrics), the operator, the stand-in and
  this script's watches together;
- the load average at the start and at the end (the machine is shared).

Targets (issue 4): p99 create → SparkApplication < 5 s, RSS < 300 MB (the
anchor: spark-operator's ~20 minutes of queue latency at 1,200 applications,
kubeflow/spark-operator PR #1990); issue 44: at most 5 operator requests per CopyJob,
printed beside the operator's CPU per CopyJob (docs/operator.md, "API requests per run"). A script, not a test: record the output in
docs/benchmarks.md ("Operator scale").
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import benchjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "spark_apps"), str(ROOT / "operator"), str(ROOT)]

import requests  # noqa: E402

from harness import identities  # noqa: E402
from harness.client import KubeClient  # noqa: E402
from harness.control_plane import audit_requests  # noqa: E402
from harness.fixtures import control_plane, crd_files, load_crds  # noqa: E402

API = "lading.io/v1alpha1"
REQUESTS_PER_JOB = 5.0  # issue 44: the operator's requests per CopyJob, created → Succeeded


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Watch(threading.Thread):
    """Records the first time each object satisfies ``seen(obj)`` (monotonic clock)."""

    def __init__(self, api: KubeClient, path: str, key: Any, seen: Any) -> None:
        super().__init__(daemon=True)
        self.api, self.url, self.path, self.key, self.seen = api, api.url, path, key, seen
        self.times: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        session, verify = self.api.session, self.api.session.verify
        while not self.stop.is_set():
            try:
                listing = session.get(self.url + self.path, timeout=60, verify=verify).json()
                for obj in listing.get("items") or []:
                    self._see(obj)
                rv = listing["metadata"]["resourceVersion"]
                with session.get(self.url + self.path, params={"watch": "true", "resourceVersion": rv,
                                                                "timeoutSeconds": "60"},
                                 stream=True, timeout=(10, 90), verify=verify) as resp:
                    for line in resp.iter_lines():
                        if self.stop.is_set():
                            return
                        if line:
                            self._see(json.loads(line).get("object") or {})
            except (requests.RequestException, ValueError, KeyError):
                time.sleep(0.1)

    def _see(self, obj: dict[str, Any]) -> None:
        key = self.key(obj)
        if key and key not in self.times and self.seen(obj):
            self.times[key] = time.monotonic()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def request_totals(api: KubeClient) -> dict[tuple[str, str], float]:
    """``apiserver_request_total`` summed by (verb, resource[/subresource]) over codes and clients."""
    text = api.session.get(api.url + "/metrics", timeout=60, verify=api.session.verify).text
    totals: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, value = line[len("apiserver_request_total{"):].rsplit("} ", 1)
        labels = dict(part.split("=", 1) for part in labels_text.split(",") if "=" in part)
        labels = {k: v.strip('"') for k, v in labels.items()}
        resource = labels.get("resource", "") + ("/" + labels["subresource"] if labels.get("subresource") else "")
        key = (labels.get("verb", ""), resource)
        totals[key] = totals.get(key, 0.0) + float(value)
    return totals


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=16, help="client threads creating CopyJobs")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--runs", type=int, default=0,
                        help="the namespace's run slots (policy limits.runs); 0: no bound, so that every job "
                             "starts at once and what is measured is the operator's own overhead")
    benchjson.add_argument(parser)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="operator-scale-"))
    with control_plane(workdir / "control-plane", load_crds(crd_files())) as kube:
        return run(args, kube, workdir)


def run(args: argparse.Namespace, kube: Any, workdir: Path) -> int:
    operator_id = identities.install(kube, identities.operator_rbac(), identities.RELEASE_NAMESPACE,
                                     identities.RELEASE, workdir)
    standin_id = identities.install(kube, identities.spark_operator_rbac(), identities.SPARK_OPERATOR_NAMESPACE,
                                    identities.SPARK_OPERATOR_ACCOUNT, workdir)
    kubeconfig = operator_id.kubeconfig
    # The stand-in runs as its own process, as spark-operator does.
    standin = subprocess.Popen([sys.executable, "-m", "harness.spark_operator", "--url", kube.url,
                                "--ca", kube.ca, "--mode", "instant"], cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT / "tests"),
                                    "LADING_STANDIN_TOKEN": standin_id.token})
    namespace = kube.create_namespace("scale")

    health = free_port()
    policy = workdir / "policy.yaml"  # the default policy's but for limits.runs (lading_operator.runslots)
    policy.write_text(json.dumps({"allowedPrefixes": {"default": ["s3://"]},
                                  "limits": {"default": {"executors": 4, "cores": 2, "memory": "8g",
                                                         **({"runs": args.runs} if args.runs else {})}}}))
    env = {**os.environ, "KUBECONFIG": kubeconfig, "LADING_NAMESPACES": namespace, "LADING_POLICY_FILE": str(policy),
           "LADING_METRICS_PORT": str(free_port()), "LADING_LIVENESS": f"http://127.0.0.1:{health}/healthz",
           "LADING_LOG_LEVEL": os.environ.get("LADING_LOG_LEVEL", "WARNING"),
           "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("operator", "spark_apps", "."))}
    log = open(workdir / "operator.log", "wb")  # noqa: SIM115
    operator = subprocess.Popen([sys.executable, "-m", "lading_operator"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=2):
                break
        except OSError:
            if operator.poll() is not None or time.monotonic() > deadline:
                print((workdir / "operator.log").read_text()[-3000:])
                return 1
            time.sleep(0.2)
    idle_rss = rss_mb(operator.pid)

    def owner(obj: dict[str, Any]) -> str | None:
        return (obj.get("metadata") or {}).get("labels", {}).get("lading.io/name")

    apps = Watch(kube.client, f"/apis/sparkoperator.k8s.io/v1beta2/namespaces/{namespace}/sparkapplications",
                 owner, lambda o: True)
    done = Watch(kube.client, f"/apis/{API}/namespaces/{namespace}/copyjobs",
                 lambda o: (o.get("metadata") or {}).get("name"),
                 lambda o: (o.get("status") or {}).get("phase") in ("Succeeded", "Failed"))
    apps.start()
    done.start()
    peak = [idle_rss]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], rss_mb(operator.pid))
            time.sleep(0.2)

    threading.Thread(target=sample, daemon=True).start()

    created: dict[str, float] = {}
    client = threading.local()
    load_start = os.getloadavg()[0]
    totals_before = request_totals(kube.client)

    def create(i: int) -> None:
        if not hasattr(client, "api"):
            client.api = KubeClient(kube.url, token=kube.token, ca=kube.ca)
        name = f"job-{i:05d}"
        body = {"apiVersion": API, "kind": "CopyJob", "metadata": {"name": name, "namespace": namespace},
                "spec": {"from": {"query": f"SELECT {i} AS i"},
                         "to": {"files": f"s3://bench/out/{name}/", "format": "csv"}}}
        client.api.create(body, "copyjobs")
        created[name] = time.monotonic()

    started = time.monotonic()
    with ThreadPoolExecutor(args.workers) as pool:
        list(pool.map(create, range(args.jobs)))
    create_seconds = time.monotonic() - started
    deadline = time.monotonic() + args.timeout
    while len(done.times) < args.jobs and time.monotonic() < deadline:
        time.sleep(0.5)
    sampling.set()
    total = time.monotonic() - started
    failed = [n for n in done.times if n not in created]
    to_app = [apps.times[n] - created[n] for n in created if n in apps.times]
    to_done = [done.times[n] - created[n] for n in created if n in done.times]
    succeeded = sum(1 for n in done.times)

    operator_cpu = cpu_seconds(operator.pid)
    apiserver_cpu = cpu_seconds(kube.endpoint.pids["kube-apiserver"])
    etcd_cpu = cpu_seconds(kube.endpoint.pids["etcd"])
    apiserver_rss = rss_mb(kube.endpoint.pids["kube-apiserver"])
    totals_after = request_totals(kube.client)
    client_cpu = time.process_time()
    operator.terminate()
    operator.wait(30)
    standin_cpu = cpu_seconds(standin.pid)
    standin.terminate()
    standin.wait(30)
    operator_requests = audit_requests(kube.endpoint, operator_id.user)
    request_counts: dict[str, int] = {}
    for r in operator_requests:
        key = f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
        request_counts[key] = request_counts.get(key, 0) + 1

    print(f"jobs created: {args.jobs} in {create_seconds:.1f} s ({args.workers} client threads); "
          f"SparkApplications seen: {len(to_app)}; terminal: {succeeded}; all terminal after {total:.1f} s")
    print()
    print("| measure | p50 | p90 | p99 | max |")
    print("|---|---|---|---|---|")
    for label, values in (("create → SparkApplication (s)", to_app), ("create → terminal status (s)", to_done)):
        if values:
            print(f"| {label} | {statistics.median(values):.2f} | {pct(values, 0.9):.2f} | "
                  f"{pct(values, 0.99):.2f} | {max(values):.2f} |")
    print()
    print(f"operator RSS: {idle_rss:.0f} MB idle, {peak[0]:.0f} MB peak")
    print(f"CPU: operator {operator_cpu:.1f} s; stand-in {standin_cpu:.1f} s; "
          f"kube-apiserver {apiserver_cpu:.1f} s ({apiserver_rss:.0f} MB RSS at the end); etcd {etcd_cpu:.1f} s; "
          f"this client {client_cpu:.1f} s; load average at the start {load_start:.1f}, "
          f"at the end {os.getloadavg()[0]:.1f}")
    # kopf's own requests (its User-Agent) are its watches: a discovery, a list and a watch per
    # kind (and one more watch each time the server ends one), whatever the number of CopyJobs.
    kopf = [r for r in operator_requests if r.user_agent.startswith("kopf/")]
    per_job = (len(operator_requests) - len(kopf)) / max(args.jobs, 1)
    print(f"the operator's API requests per CopyJob: {per_job:.2f} (target <= {REQUESTS_PER_JOB:g}), from the "
          f"audit log, with {1000 * operator_cpu / max(args.jobs, 1):.1f} ms of operator CPU per CopyJob; "
          f"and {len(kopf)} of kopf's watches for the whole run ({len(operator_requests) / max(args.jobs, 1):.2f} "
          "per CopyJob in all):")
    for key, count in sorted(request_counts.items(), key=lambda kv: -kv[1]):
        if count >= args.jobs / 20:
            print(f"  {key}: {count / args.jobs:.2f}")
    served = {k: v - totals_before.get(k, 0.0) for k, v in totals_after.items()}
    print(f"every client's requests per CopyJob ({sum(served.values()) / max(args.jobs, 1):.1f} in all, "
          "from the API server's apiserver_request_total: operator, stand-in and this script):")
    for (verb, resource), count in sorted(served.items(), key=lambda kv: -kv[1]):
        if count >= args.jobs / 20:
            print(f"  {verb} {resource}: {count / args.jobs:.2f}")
    if failed:
        print(f"unexpected names: {failed[:5]}")
    ok = len(to_app) == args.jobs and len(to_done) == args.jobs and pct(to_app, 0.99) < 5 and peak[0] < 300
    print("targets (p99 create → SparkApplication < 5 s, RSS < 300 MB):", "met" if ok else "NOT met")
    print(f"target (<= {REQUESTS_PER_JOB:g} operator requests per CopyJob):",
          "met" if per_job <= REQUESTS_PER_JOB else "NOT met")
    ok = ok and per_job <= REQUESTS_PER_JOB
    benchjson.write(args.json_out, __file__, {
        "jobs": args.jobs, "workers": args.workers, "created_s": create_seconds, "all_terminal_s": total,
        "spark_applications": len(to_app), "terminal": succeeded,
        "create_to_app_s": {"p50": statistics.median(to_app), "p90": pct(to_app, 0.9), "p99": pct(to_app, 0.99),
                            "max": max(to_app)} if to_app else None,
        "create_to_terminal_s": {"p50": statistics.median(to_done), "p90": pct(to_done, 0.9),
                                 "p99": pct(to_done, 0.99), "max": max(to_done)} if to_done else None,
        "operator_rss_mb": {"idle": idle_rss, "peak": peak[0]},
        "cpu_s": {"operator": operator_cpu, "stand-in": standin_cpu, "kube-apiserver": apiserver_cpu, "etcd": etcd_cpu},
        "operator_cpu_ms_per_job": 1000 * operator_cpu / max(args.jobs, 1),
        "operator_requests_per_job": per_job, "kopf_requests": len(kopf),
        "operator_requests_by_kind_per_job": {k: v / max(args.jobs, 1) for k, v in request_counts.items()},
        "all_clients_requests_per_job": sum(served.values()) / max(args.jobs, 1)})
    return 0 if ok else 2


if __name__ == "__main__":
    raise SystemExit(main())
