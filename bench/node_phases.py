"""Node phases benchmark: a CopyJob on a real Kubernetes node, ``kubectl apply`` to Succeeded.

  python bench/node_phases.py [--rows 10000] [--repeat 2] [--jobs 20]
                              [--cold-log PATH] [--warm-log PATH]     (as root; see below)

Brings up what the node tier (tests/node) runs on: the control plane with ``--node-ip``, the real
node (shared/tools/kube/node: kubelet, containerd) with the image imported, moto on the node's
bridge address, the chart installed with ``helm install`` (the operator as its Deployment, two
replicas, leader election) and spark-operator's part played by the stand-in's ``k8s`` mode: one
``spark-submit --deploy-mode cluster`` JVM per submission, as spark-operator does. Then:

1. ``--repeat`` times, one unload of ``--rows`` rows (a Parquet file on S3, queried through
   ``from.inputs``, written as CSV; one executor, the node tier's 400m CPU requests) by
   ``kubectl apply -f``, its time to Succeeded split into phases, each the first time a 0.25 s
   poll of the API server saw it: apply returned (resource created) → SparkApplication →
   submission done (the driver pod, which spark-submit creates) → driver Running → executor
   Running → job done (the driver pod Succeeded) → status written (the CopyJob Succeeded);
2. ``--jobs`` such CopyJobs in one ``kubectl apply`` (the node's throughput), their driver and
   executor asking for ``--many-cores`` CPU (default 40m) and ``--many-memory``: every job's two
   pods must fit the node's requests at once, or the drivers, scheduled first, hold every CPU
   request and wait for executors that never fit (20 jobs at 100m on 2 CPUs: 18 drivers Running,
   every executor Pending, nothing ends; with the default 1g memory, 16 drivers fill 24 GiB the
   same way); the stand-in, like spark-operator, submits them all at once;
3. the anchor, spark-operator's cost per application: the CPU seconds of the spark-submit JVMs
   (this process's reaped children while the jobs ran) per submission, beside their wall time;
4. the image: its size (podman) and the build times scripts/image printed in ``--cold-log`` and
   ``--warm-log`` (its last line: ``image: built TAG: N MB, S s``), when given.

Needs what the node tier needs (root, the node's packages, the image: ``scripts/image``); hold the
machine's node lock: ``flock /var/lock/lading-node.lock python bench/node_phases.py``. Target
(issue 42): the 10,000-row unload from ``kubectl apply`` to Succeeded in under 30 s on an idle
machine. A script, not a test: record the output in docs/benchmarks.md ("On a real node").
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import io
import json
import logging
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import benchjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "spark_apps"), str(ROOT / "operator"), str(ROOT)]

import boto3  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from harness import identities  # noqa: E402
from harness.client import KubeClient  # noqa: E402
from harness.fixtures import Kube  # noqa: E402
from harness.node import NODE_IP, missing, running_cluster, termination_message  # noqa: E402
from harness.spark_operator import SparkOperatorStandIn  # noqa: E402

API = "lading.io/v1alpha1"
TARGET_SECONDS = 30.0  # issue 42, on an idle machine
POLL = 0.25
PHASES = ("sparkapplication", "submitted", "driver_running", "executor_running", "job_done", "status_written")
# as tests/node/conftest.py: Spark 4.3's submission applies a NetworkPolicy per application
SUBMISSION_RULES = [{"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
                     "verbs": ["get", "create", "patch", "delete"]}]
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}


# Lines of the driver's log (the kubelet's timestamps) that split the driver's time.
DRIVER_MARKS = {"spark_version": r"Running Spark version", "executor_registered": r"Registered executor",
                "first_job": r"Got job 0", "last_job_done": r"Job \d+ finished", "context_stopped":
                r"Successfully stopped SparkContext"}


def driver_marks(client: KubeClient, namespace: str, pod: str, began_wall: float, keep: Path) -> dict[str, float]:
    """Seconds after ``began_wall`` of the driver log's first line, the DRIVER_MARKS (first match;
    the last for last_job_done) and its last line; the log is kept in ``keep``."""
    resp = client.session.get(f"{client.url}/api/v1/namespaces/{namespace}/pods/{pod}/log",
                              params={"timestamps": "true"}, timeout=60, verify=client.session.verify)
    keep.mkdir(parents=True, exist_ok=True)
    (keep / f"{pod}.log").write_text(resp.text)
    stamped = []
    for line in resp.text.splitlines():
        stamp, _, text = line.partition(" ")
        with contextlib.suppress(ValueError):
            stamped.append((dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - began_wall, text))
    if not stamped:
        return {}
    out = {"first_line": stamped[0][0]}
    for name, pattern in DRIVER_MARKS.items():
        hits = [t for t, text in stamped if re.search(pattern, text)]
        if hits:
            out[name] = hits[-1] if name == "last_job_done" else hits[0]
    out["last_line"] = stamped[-1][0]
    return {k: round(v, 2) for k, v in out.items()}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def image_log_figures(path: str) -> dict[str, Any]:
    """What scripts/image printed at its end (``image: built TAG: N MB, S s``), and whether the base
    was made with debootstrap in that run (a cold build)."""
    if not path:
        return {}
    text = Path(path).read_text(errors="replace") if Path(path).exists() else ""
    built = re.findall(r"image: built (\S+): (\d+) MB, (\d+) s", text)
    if not built:
        return {"log": path, "built": False}
    tag, mb, seconds = built[-1]
    return {"log": path, "built": True, "tag": tag, "mb": int(mb), "seconds": int(seconds),
            "debootstrap": "making docker.io/library/debian:bookworm-slim with debootstrap" in text}


def image_bytes(image: str) -> int:
    out = subprocess.run(["podman", "image", "inspect", "--format", "{{.Size}}", image],
                         capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


class Timeline:
    """Polls the namespace's CopyJobs, SparkApplications and Spark pods every POLL seconds and keeps
    the first time (monotonic) each job reached each phase, and the most drivers seen running."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.seen: dict[str, dict[str, float]] = {}
        self.peak_drivers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _mark(self, job: str, phase: str, now: float) -> None:
        self.seen.setdefault(job, {}).setdefault(phase, now)

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            now = time.monotonic()
            try:
                apps = self.client.list("sparkoperator.k8s.io/v1beta2", "sparkapplications", self.namespace)
                pods = self.client.list("v1", "pods", self.namespace, label_selector="spark-role")
                jobs = self.client.list(API, "copyjobs", self.namespace)
            except Exception:  # noqa: BLE001 - a slow API server: try again at the next tick
                continue
            app_job = {}
            for app in apps:
                owners = [r["name"] for r in app["metadata"].get("ownerReferences") or [] if r.get("kind") == "CopyJob"]
                if owners:
                    app_job[app["metadata"]["name"]] = owners[0]
                    self._mark(owners[0], "sparkapplication", now)
            running_drivers = 0
            for pod in pods:
                labels = pod["metadata"].get("labels") or {}
                job = app_job.get(labels.get("sparkoperator.k8s.io/app-name", ""))
                phase = (pod.get("status") or {}).get("phase")
                if labels.get("spark-role") == "driver":
                    running_drivers += phase == "Running"
                if job is None:
                    continue
                if labels.get("spark-role") == "driver":
                    self._mark(job, "submitted", now)
                    if phase in ("Running", "Succeeded"):
                        self._mark(job, "driver_running", now)
                    if phase in ("Succeeded", "Failed"):
                        self._mark(job, "job_done", now)
                elif phase in ("Running", "Succeeded"):
                    self._mark(job, "executor_running", now)
            self.peak_drivers = max(self.peak_drivers, running_drivers)
            for cj in jobs:
                if ((cj.get("status") or {}).get("phase")) in ("Succeeded", "Failed"):
                    self._mark(cj["metadata"]["name"], "status_written", now)

    def __enter__(self) -> Timeline:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(10)


def copyjob(name: str, namespace: str, bucket: str, endpoint: str, request_cores: str,
            memory: str = "") -> dict[str, Any]:
    sizes = {"driver": {"memory": memory}, "executor": {"memory": memory, "instances": 1}} if memory else {
        "executor": {"instances": 1}}
    return {"apiVersion": API, "kind": "CopyJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"from": {"query": "SELECT id, region, total, placed FROM orders",
                              "inputs": [{"name": "orders", "files": f"s3://{bucket}/in/", "format": "parquet"}]},
                     "to": {"files": f"s3://{bucket}/out/{name}/", "format": "csv", "options": {"header": True}},
                     "connection": {"secretRef": {"name": "s3"}, "endpoint": endpoint, "region": "us-east-1"},
                     "spark": {**sizes,
                               "sparkConf": {"spark.kubernetes.driver.request.cores": request_cores,
                                             "spark.kubernetes.executor.request.cores": request_cores}}}}


def apply(kubeconfig_path: Path, objects: list[dict[str, Any]], directory: Path) -> float:
    """``kubectl apply -f`` of ``objects`` (one file); the monotonic time it was started."""
    path = directory / f"apply-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    began = time.monotonic()
    subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig_path), "apply", "-f", str(path)],
                   check=True, capture_output=True, text=True, timeout=120)
    return began


def wait_all(timeline: Timeline, names: list[str], timeout: float) -> list[str]:
    """Wait until every job in ``names`` has ended; those that had not after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all("status_written" in timeline.seen.get(n, {}) for n in names):
            return []
        time.sleep(0.5)
    return [n for n in names if "status_written" not in timeline.seen.get(n, {})]


def phases_of(marks: dict[str, float], began: float, applied: float) -> dict[str, Any]:
    """Seconds per phase: apply (kubectl until it returned), then from each mark to the next."""
    out: dict[str, Any] = {"apply": round(applied - began, 2)}
    last = applied
    for phase in PHASES:
        if phase in marks:
            out[phase] = round(marks[phase] - last, 2)
            last = marks[phase]
    out["total"] = round(last - began, 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2, help="single unloads, one after the other")
    parser.add_argument("--jobs", type=int, default=20, help="CopyJobs applied at once (0: none)")
    parser.add_argument("--image", default=os.environ.get("LADING_IMAGE", "localhost/lading:dev"))
    parser.add_argument("--cold-log", default="", help="scripts/image's output of a cold build")
    parser.add_argument("--warm-log", default="", help="scripts/image's output of a warm build")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for the --jobs CopyJobs")
    parser.add_argument("--many-cores", default="40m",
                        help="CPU request of the --jobs CopyJobs' driver and executor (all 2 x jobs pods must fit "
                             "the node's requests at once: drivers that fit without their executors wait forever)")
    parser.add_argument("--many-memory", default="512m",
                        help="driver and executor memory of the --jobs CopyJobs (the default 1g: 16 drivers fill "
                             "a 24 GiB node beside the operator, and no executor fits)")
    parser.add_argument("--logs", default="/var/tmp/lading-bench-node-logs",
                        help="where the drivers' and spark-submit's logs are kept")
    benchjson.add_argument(parser)
    args = parser.parse_args()
    why = missing(args.image)
    if why:
        print(f"node_phases: cannot run here: {why}", file=sys.stderr)
        return 2
    figures: dict[str, Any] = {"rows": args.rows, "poll_seconds": POLL,
                               "image": {"name": args.image, "bytes": image_bytes(args.image),
                                         "cold": image_log_figures(args.cold_log),
                                         "warm": image_log_figures(args.warm_log)}}
    print(f"image {args.image}: {figures['image']['bytes'] / 1e6:.0f} MB; cold build {figures['image']['cold']}; "
          f"warm build {figures['image']['warm']}")
    directory = Path(tempfile.mkdtemp(prefix="lading-bench-node-", dir="/var/tmp"))
    with running_cluster(directory, args.image) as cluster:
        kube, info, admin = cluster.kube, cluster.node, directory / "admin.kubeconfig"
        figures["node_ready_seconds"] = round(cluster.started_seconds, 1)
        allocatable = kube.client.get("v1", "nodes", None, info.name)["status"]["allocatable"]
        figures["node_allocatable"] = {"cpu": allocatable["cpu"], "memory": allocatable["memory"]}
        print(f"control plane + node Ready with the image imported: {figures['node_ready_seconds']} s")
        try:
            run(args, kube, admin, directory, figures)
            figures["complete"] = True
        finally:  # an interrupted run still leaves what it measured, marked incomplete
            figures.setdefault("complete", False)
            benchjson.write(args.json_out, __file__, figures)
    shutil.rmtree(directory, ignore_errors=True)
    return 0


def run(args: argparse.Namespace, kube: Kube, admin: Path, directory: Path, figures: dict[str, Any]) -> None:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log
    client = kube.client
    with socket.socket() as s:
        s.bind((NODE_IP, 0))
        port = int(s.getsockname()[1])
    moto = ThreadedMotoServer(ip_address=NODE_IP, port=port, verbose=False)
    moto.start()
    endpoint = f"http://{NODE_IP}:{port}"
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    bucket = "bench"
    s3.create_bucket(Bucket=bucket)
    n = args.rows
    table = pa.table({"id": pa.array(range(n), pa.int64()), "region": [f"r{i % 7}" for i in range(n)],
                      "total": [i * 1.25 for i in range(n)],
                      "placed": pa.array([1_700_000_000_000_000 + i for i in range(n)], pa.timestamp("us"))})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    s3.put_object(Bucket=bucket, Key="in/orders.parquet", Body=sink.getvalue())

    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": RESTRICTED}},
                  "namespaces")
    client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3", "namespace": namespace},
                   "stringData": {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}}, "secrets")
    rbac = identities.spark_operator_rbac()
    role = next(o for o in rbac if o["kind"] == "ClusterRole")
    role["rules"] = [*role["rules"], *SUBMISSION_RULES]
    (directory / "identity").mkdir()
    identity = identities.install(kube, rbac, identities.SPARK_OPERATOR_NAMESPACE, identities.SPARK_OPERATOR_ACCOUNT,
                                  directory / "identity")
    repository, _, tag = args.image.rpartition(":")
    helm = [str(ROOT / ".tools" / "bin" / "helm"), "--kubeconfig", str(admin)]
    started = time.monotonic()
    subprocess.run([*helm, "install", "lading", str(ROOT / "charts" / "lading"), "--namespace", "lading-system",
                    "--create-namespace", "--set", f"image.repository={repository}", "--set-string",
                    f"image.tag={tag}", "--set", "image.pullPolicy=Never", "--set", f"spark.jobNamespaces={{{namespace}}}",
                    "--set", "operator.resources.requests.cpu=50m", "--wait", "--timeout", "300s"],
                   check=True, capture_output=True, text=True, timeout=360)
    figures["helm_install_seconds"] = round(time.monotonic() - started, 1)
    print(f"helm install --wait (operator Deployment, 2 replicas): {figures['helm_install_seconds']} s")

    submit_logs = Path(args.logs) / f"spark-submit-{namespace}"  # kept: the node's directory is removed
    submit_logs.mkdir(parents=True)
    with SparkOperatorStandIn(kube.url, mode="k8s", token=identity.token, ca=kube.ca, poll_seconds=0.2,
                              log_dir=submit_logs) as standin, Timeline(client, namespace) as timeline:
        singles = []
        for i in range(args.repeat):
            name = f"unload-{i + 1}"
            cpu = children_cpu()
            began, began_wall = time.monotonic(), time.time()
            apply(admin, [copyjob(name, namespace, bucket, endpoint, "400m")], directory)
            applied = time.monotonic()
            if wait_all(timeline, [name], 600):
                raise RuntimeError(f"{name} did not end within 600 s: {timeline.seen.get(name)}")
            phases = phases_of(timeline.seen[name], began, applied)
            phases["spark_submit_cpu_seconds"] = round(children_cpu() - cpu, 2)
            status = client.get(API, "copyjobs", namespace, name)["status"]
            phases["succeeded"] = status["phase"] == "Succeeded"
            phases["rows"] = (status.get("response") or {}).get("rows")
            print(f"unload {i + 1}: " + ", ".join(f"{k} {v}" for k, v in phases.items()))
            (driver,) = client.list("v1", "pods", namespace, label_selector="spark-role=driver,"
                                    f"sparkoperator.k8s.io/app-name={status['sparkApplication']}")
            # main.py's own time (its result, the driver's termination message): the Spark session
            # built, the executor waited for, the job run
            with contextlib.suppress(ValueError):
                phases["driver_execute_seconds"] = json.loads(
                    termination_message(driver, "spark-kubernetes-driver") or "{}").get("durationSeconds")
            phases["driver_log_seconds_after_apply"] = driver_marks(
                client, namespace, driver["metadata"]["name"], began_wall, Path(args.logs))
            print(f"  driver log, seconds after apply: {phases['driver_log_seconds_after_apply']}")
            singles.append(phases)
        figures["single"] = singles
        if args.jobs:
            names = [f"many-{i + 1:02d}" for i in range(args.jobs)]
            cpu = children_cpu()
            began = time.monotonic()
            apply(admin, [copyjob(n, namespace, bucket, endpoint, args.many_cores, args.many_memory) for n in names], directory)
            applied = time.monotonic()
            unfinished = wait_all(timeline, names, args.timeout)
            ended = [n for n in names if n not in unfinished]
            totals = sorted(timeline.seen[n]["status_written"] - began for n in ended) or [time.monotonic() - began]
            wall = totals[-1]
            submissions = [timeline.seen[n]["submitted"] - timeline.seen[n]["sparkapplication"] for n in names
                           if {"submitted", "sparkapplication"} <= timeline.seen.get(n, {}).keys()]
            statuses = [client.get(API, "copyjobs", namespace, n).get("status") or {} for n in names]
            ok = sum(st.get("phase") == "Succeeded" for st in statuses)
            # why the others ended as they did (the first words of each error, counted)
            errors = collections.Counter(str((st.get("response") or {}).get("error") or "")[:300]
                                         for st in statuses if st.get("phase") != "Succeeded")
            figures["many"] = {
                "jobs": args.jobs, "cores": args.many_cores, "memory": args.many_memory, "succeeded": ok, "unfinished": len(unfinished),
                "errors": dict(errors), "wall_seconds": round(wall, 1), "jobs_per_minute": round(60 * ok / wall, 2),
                "apply_to_succeeded_p50": round(statistics.median(totals), 1), "apply_to_succeeded_max": round(totals[-1], 1),
                "peak_running_drivers": timeline.peak_drivers,
                "first_job_phases": phases_of(timeline.seen.get(names[0], {}), began, applied),
                "spark_submit_cpu_seconds_per_application": round((children_cpu() - cpu) / args.jobs, 2),
                "submission_wall_p50": round(statistics.median(submissions), 1) if submissions else None,
            }
            print("many: " + json.dumps(figures["many"]))
        figures["spark_submit_runs"] = standin.started_count
    figures["load_average_during"] = list(os.getloadavg())
    moto.stop()


if __name__ == "__main__":
    sys.exit(main())
