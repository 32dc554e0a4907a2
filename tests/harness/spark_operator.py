"""A stand-in for spark-operator and the kubelet, for tests (never shipped).

It watches SparkApplications on the API server and does what spark-operator
plus the kubelet would do for each one, with the real Spark app:

1. adds spark-operator's finalizer (``sparkoperator.k8s.io/finalizer``) so that
   deleting an application first stops its driver, as spark-operator v2 does;
2. sets ``status.applicationState.state`` SUBMITTED, creates the driver Pod
   (``<app>-driver``, owned by the application), then RUNNING with
   ``driverInfo.podName`` and ``driverInfo.webUIAddress`` (the local Spark UI).
   Like spark-operator's mutating webhook (which must be enabled for the job
   namespaces), it copies the application's ``driver.env``, ``envFrom``,
   ``securityContext`` and ``podSecurityContext`` onto the pod; with
   ``webhook=False`` the pod gets none of them, as on a cluster without the webhook;
3. runs ``spark_apps/lading_jobs/main.py`` with the application's ``arguments``
   as a subprocess with its own local Spark (``--master local[2]`` and the
   ``sparkConf`` passed as spark-submit ``--conf``), with the environment the
   kubelet gives the driver container: the pod's ``env`` plus the keys of every
   ``envFrom`` Secret, read back from the API server (never from the application);
4. when the process exits, writes its termination log into the driver Pod's
   ``containerStatuses[].state.terminated.message`` as the kubelet does, and moves
   the application through SUCCEEDING/FAILING to COMPLETED/FAILED;
5. when the application is deleted, SIGTERMs the process (SIGKILL after the
   grace period), deletes the driver Pod and removes the finalizer;
6. ``restartPolicy: OnFailure`` (a StreamCopy's): a driver that exits non-zero is
   rerun, as spark-operator does, up to ``onFailureRetries`` times: FAILING, then
   PENDING_RERUN with the old driver pod deleted, then a new driver pod and
   process (the retry interval is not waited: nothing here is timed). Only then
   does the application end FAILED;
7. the driver pod has ``podIP`` 127.0.0.1. Every driver runs on this one host, so
   a declared container port named ``progress`` (a StreamCopy driver's progress
   endpoint) is given a free port of its own, and ``LADING_PROGRESS_PORT`` follows
   it; ``LADING_PROGRESS_HOST`` is 127.0.0.1.

8. a driver pod the API server refuses (Pod Security admission: a namespace labelled
   ``pod-security.kubernetes.io/enforce=restricted`` refuses a pod without the restricted
   security context) fails the submission: SUBMISSION_FAILED with the server's message,
   as spark-submit's failure does in spark-operator.

``mode="k8s"`` (the ``node`` tier, a real node): spark-operator's own way instead of 2.-7.: one
``spark-submit --master k8s://... --deploy-mode cluster`` per submission with the settings
spark-operator derives from the spec, the webhook's pod mutations as Spark pod templates, the
image's entrypoint running the driver and executor pods, and the application's state read from
the driver pod (SUBMITTED, RUNNING, SUCCEEDING/COMPLETED, FAILING/FAILED with spark-operator's
``driver container failed with ExitCode: N, Reason: R``; SUBMISSION_FAILED with spark-submit's
error). :mod:`harness.spark_submit` says which spark-operator behaviour each part follows and
which it does not. The kubelet writes the driver's termination message; deleting the application
deletes the driver pod (Spark's executors are owned by it). ``restartPolicy: OnFailure`` reruns as
in 6. The ``spark`` mode stays for the fast tiers.

``mode="instant"`` is a test double for measuring operator overhead ONLY (the
scale benchmark): no Spark; each application is completed at once with a
synthetic termination message marked ``"synthetic": true``.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime as dt
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests
from support.ports import free_port

from harness import spark_submit
from harness.client import ApiStatusError, KubeClient

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
IMAGE_ROOT = "local:///opt/lading/"
API = "sparkoperator.k8s.io/v1beta2"
PLURAL = "sparkapplications"
FINALIZER = "sparkoperator.k8s.io/finalizer"
DRIVER_CONTAINER = "spark-kubernetes-driver"
PROGRESS_PORT_NAME = "progress"            # lading_operator.render_stream: a StreamCopy driver's port
PROGRESS_PORT_ENV = "LADING_PROGRESS_PORT"
GRACE_SECONDS = 30.0


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Run:
    """One application's driver: the subprocess and what is known about it."""

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name
        self.process: subprocess.Popen[bytes] | None = None
        self.deleting = threading.Event()
        self.finished = threading.Event()
        self.thread: threading.Thread | None = None


class SparkOperatorStandIn:
    """Watches SparkApplications at ``url`` and runs them (see the module docstring)."""

    def __init__(self, url: str, mode: str = "spark", log_dir: Path | None = None,
                 extra_env: dict[str, str] | None = None, instant_workers: int = 8,
                 webhook: bool = True, token: str = "", ca: str | bool = True, poll_seconds: float = 1.0) -> None:
        if mode not in ("spark", "instant", "k8s"):
            raise ValueError("mode is 'spark', 'instant' or 'k8s'")
        self.poll_seconds = poll_seconds  # k8s: how often the driver pod is read (spark-operator: on events)
        self.url = url.rstrip("/")
        self.mode = mode
        self.webhook = webhook
        self.client = KubeClient(url, token=token, ca=ca)
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="spark-standin-"))
        self.extra_env = dict(extra_env or {})
        self.runs: dict[tuple[str, str], _Run] = {}
        self.started_count = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(instant_workers if mode == "instant" else 4,
                                        thread_name_prefix="standin")
        self._session = KubeClient(url, token=token, ca=ca).session  # the watch's own connection

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> SparkOperatorStandIn:
        self._thread = threading.Thread(target=self._watch_forever, name="spark-standin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            runs = list(self.runs.values())
        for run in runs:
            self._terminate(run)
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> SparkOperatorStandIn:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.stop()

    # -- watching -------------------------------------------------------------------
    def _watch_forever(self) -> None:
        path = f"{self.url}/apis/{API}/{PLURAL}"
        while not self._stop.is_set():
            try:
                listing = self._session.get(path, timeout=30, verify=self._session.verify).json()
                for item in listing.get("items") or []:
                    self._dispatch("ADDED", item)
                rv = listing.get("metadata", {}).get("resourceVersion", "")
                with self._session.get(path, params={"watch": "true", "resourceVersion": rv,
                                                     "timeoutSeconds": "30"},
                                       stream=True, timeout=(10, 60), verify=self._session.verify) as resp:
                    for line in resp.iter_lines():
                        if self._stop.is_set():
                            return
                        if line:
                            event = json.loads(line)
                            if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                                self._dispatch(event["type"], event["object"])
            except (requests.RequestException, ValueError):
                if self._stop.wait(0.2):
                    return

    def _dispatch(self, kind: str, app: Obj) -> None:
        meta = app.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if kind == "DELETED":
            with self._lock:
                run = self.runs.get(key)
            if run is not None:
                run.deleting.set()
                self._pool.submit(self._terminate, run)
            return
        if meta.get("deletionTimestamp"):
            with self._lock:
                run = self.runs.get(key)
            if run is None or not run.deleting.is_set():
                if run is None:  # never started here: nothing to wait for
                    run = _Run(*key)
                    run.finished.set()
                    with self._lock:
                        self.runs[key] = run
                run.deleting.set()
                threading.Thread(target=self._delete, args=(run, app), daemon=True).start()
            return
        with self._lock:
            if key in self.runs:
                return
            run = self.runs[key] = _Run(*key)
            self.started_count += 1
        if self.mode == "instant":
            self._pool.submit(self._guard, self._run_instant, run, app)
        else:
            target = self._run_k8s if self.mode == "k8s" else self._run_spark
            run.thread = threading.Thread(target=self._guard, args=(target, run, app),
                                          name=f"driver-{key[1]}", daemon=True)
            run.thread.start()

    def _guard(self, fn: Any, run: _Run, app: Obj) -> None:
        try:
            fn(run, app)
        except ApiStatusError as e:
            if e.code != 404:  # the application was deleted under us: nothing to report
                print(f"spark stand-in: {run.namespace}/{run.name}: {e}", file=sys.stderr)
        finally:
            run.finished.set()

    # -- the API calls --------------------------------------------------------------
    def _app_status(self, run: _Run, status: Obj) -> None:
        if run.deleting.is_set():
            return
        self.client.patch_status(API, PLURAL, run.namespace, run.name, status)

    def _add_finalizer(self, app: Obj) -> None:
        meta = app["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if FINALIZER not in finalizers:
            self.client.patch(API, PLURAL, meta["namespace"], meta["name"],
                              {"metadata": {"finalizers": [*finalizers, FINALIZER]}})

    def _create_driver_pod(self, run: _Run, app: Obj, progress_port: int | None = None) -> Obj:
        """The driver pod as spark-submit creates it, mutated as spark-operator's webhook does
        (``progress_port``: this driver's own port for a declared ``progress`` port, see 7.)."""
        meta = app["metadata"]
        pod_name = f"{run.name}-driver"
        driver = (app.get("spec") or {}).get("driver") or {}
        container: Obj = {"name": DRIVER_CONTAINER, "image": (app.get("spec") or {}).get("image", ""),
                          "args": list((app.get("spec") or {}).get("arguments") or []),
                          "terminationMessagePath": "/dev/termination-log"}
        pod_spec: Obj = {"serviceAccountName": driver.get("serviceAccount", "default"),
                         "restartPolicy": "Never", "containers": [container]}
        if self.webhook:  # what the mutating webhook patches in from the SparkApplication
            for key in ("env", "envFrom", "securityContext"):
                if driver.get(key):
                    container[key] = copy.deepcopy(driver[key])
            if driver.get("podSecurityContext"):
                pod_spec["securityContext"] = copy.deepcopy(driver["podSecurityContext"])
            # One host for every driver: the progress port gets a port of its own (see 7.).
            progress_port = progress_port or free_port()
            ports = [dict(p, containerPort=progress_port) if p.get("name") == PROGRESS_PORT_NAME else dict(p)
                     for p in driver.get("ports") or []]
            if ports:
                container["ports"] = ports
                container["env"] = [e for e in container.get("env") or [] if e.get("name") != PROGRESS_PORT_ENV] \
                    + [{"name": PROGRESS_PORT_ENV, "value": str(progress_port)}]
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": pod_name, "namespace": run.namespace,
                "labels": {**(driver.get("labels") or {}), "spark-role": "driver",
                           "sparkoperator.k8s.io/app-name": run.name},
                "ownerReferences": [{"apiVersion": API, "kind": "SparkApplication", "name": run.name,
                                     "uid": meta.get("uid", ""), "controller": True,
                                     "blockOwnerDeletion": True}],
            },
            "spec": pod_spec,
        }
        try:
            self.client.create(pod, "pods")
        except ApiStatusError as exc:
            if exc.code != 409:  # refused (Pod Security, quota, ...): spark-submit fails, see 8.
                raise
        return self.client.patch_status("v1", "pods", run.namespace, pod_name, {
            "phase": "Running", "startTime": _now(), "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}],
            "containerStatuses": [{"name": DRIVER_CONTAINER, "ready": True, "restartCount": 0,
                                   "state": {"running": {"startedAt": _now()}}}]})

    def _terminate_pod(self, run: _Run, pod_name: str, exit_code: int, message: str) -> None:
        with contextlib.suppress(ApiStatusError):
            self.client.patch_status("v1", "pods", run.namespace, pod_name, {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "containerStatuses": [{"name": DRIVER_CONTAINER, "ready": False, "restartCount": 0,
                                       "state": {"terminated": {
                                           "exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                                           "message": message[-4096:], "finishedAt": _now()}}}]})

    def _env(self, app: Obj, pod: Obj, termination_log: Path, ui_port: int) -> dict[str, str]:
        """The kubelet's part: the driver container's env (values, and Secret keys by secretKeyRef) and
        envFrom Secrets, from the pod."""
        spec = app.get("spec") or {}
        container = next((c for c in (pod.get("spec") or {}).get("containers") or []
                          if c.get("name") == DRIVER_CONTAINER), {})
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_SUBMIT"))}
        for source in container.get("envFrom") or []:
            secret_name = (source.get("secretRef") or {}).get("name")
            if secret_name:
                secret = self.client.get("v1", "secrets", pod["metadata"]["namespace"], secret_name)
                for key, value in (secret.get("data") or {}).items():
                    env[key] = base64.b64decode(value).decode()
                for key, value in (secret.get("stringData") or {}).items():
                    env[key] = str(value)
        for item in container.get("env") or []:
            ref = (item.get("valueFrom") or {}).get("secretKeyRef")
            if ref is None:
                env[item["name"]] = str(item.get("value", ""))
                continue
            secret = self.client.get("v1", "secrets", pod["metadata"]["namespace"], ref["name"])
            if ref["key"] in (secret.get("data") or {}):
                env[item["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
            elif ref["key"] in (secret.get("stringData") or {}):
                env[item["name"]] = str(secret["stringData"][ref["key"]])
            elif not ref.get("optional"):
                raise RuntimeError(f"CreateContainerConfigError: key {ref['key']} not in Secret {ref['name']}")
        conf = {"spark.ui.port": str(ui_port), "spark.ui.enabled": "true", **(spec.get("sparkConf") or {})}
        submit = ["--master", "local[2]"]
        for key, value in conf.items():
            submit += ["--conf", f"{key}={value}"]
        env.update({
            "PYSPARK_SUBMIT_ARGS": " ".join(shlex.quote(a) for a in submit) + " pyspark-shell",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "LADING_TERMINATION_LOG": str(termination_log),
            "LADING_PROGRESS_HOST": "127.0.0.1",
            "PYTHONPATH": str(REPO / "spark_apps"),
            "PYTHONUNBUFFERED": "1",
        })
        env.update(self.extra_env)
        return env

    # -- running --------------------------------------------------------------------
    def _run_spark(self, run: _Run, app: Obj) -> None:
        self._add_finalizer(app)
        spec = app.get("spec") or {}
        main_file = str(spec.get("mainApplicationFile", ""))
        if not main_file.startswith(IMAGE_ROOT):
            self._app_status(run, {"applicationState": {"state": "SUBMISSION_FAILED",
                                                        "errorMessage": f"{main_file} is not in the image"},
                                   "driverInfo": {}})
            return
        script = REPO / main_file[len(IMAGE_ROOT):]
        self._app_status(run, {"applicationState": {"state": "SUBMITTED"}, "driverInfo": {},
                               "submissionAttempts": 1, "lastSubmissionAttemptTime": _now()})
        policy = spec.get("restartPolicy") or {}
        retries = int(policy.get("onFailureRetries") or 0) if policy.get("type") == "OnFailure" else 0
        workdir = self.log_dir / f"{run.namespace}-{run.name}"
        workdir.mkdir(parents=True, exist_ok=True)
        termination_log = workdir / "termination-log"
        for execution in range(1, retries + 2):
            try:
                pod = self._create_driver_pod(run, app, free_port())
            except ApiStatusError as exc:
                if exc.code not in (400, 403, 422):
                    raise
                self._app_status(run, {"applicationState": {"state": "SUBMISSION_FAILED",
                                                            "errorMessage": f"failed to run spark-submit: {exc}"},
                                       "driverInfo": {}})
                return
            pod_name = pod["metadata"]["name"]
            termination_log.unlink(missing_ok=True)
            ui_port = free_port()
            env = self._env(app, pod, termination_log, ui_port)
            if run.deleting.is_set():
                return
            with open(workdir / "driver.log", "ab") as log:
                run.process = subprocess.Popen([sys.executable, str(script), *spec.get("arguments", [])],
                                               env=env, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
                self._app_status(run, {"applicationState": {"state": "RUNNING"},
                                       "sparkApplicationId": f"local-{run.name}-{execution}",
                                       "executionAttempts": execution,
                                       "driverInfo": {"podName": pod_name, "webUIAddress": f"127.0.0.1:{ui_port}",
                                                      "webUIPort": ui_port}})
                exit_code = run.process.wait()
            message = termination_log.read_text() if termination_log.exists() else ""
            if not message:
                tail = (workdir / "driver.log").read_bytes()[-2000:].decode(errors="replace")
                message = tail
            self._terminate_pod(run, pod_name, exit_code, message)
            if run.deleting.is_set():
                return
            if exit_code == 0 or execution > retries:
                break
            # restartPolicy OnFailure: spark-operator deletes the driver pod and submits again (see 6.).
            self._app_status(run, {"applicationState": {"state": "FAILING",
                                                        "errorMessage": f"driver container exited with code "
                                                                        f"{exit_code}"}})
            self._app_status(run, {"applicationState": {"state": "PENDING_RERUN"}, "driverInfo": {}})
            with contextlib.suppress(ApiStatusError):
                self.client.delete("v1", "pods", run.namespace, pod_name)
            self._app_status(run, {"applicationState": {"state": "SUBMITTED"}, "driverInfo": {},
                                   "submissionAttempts": execution + 1, "lastSubmissionAttemptTime": _now()})
        self._finish(run, exit_code, message)

    # -- spark-operator's own way: spark-submit in cluster mode, the driver pod read back ------
    def _submit(self, run: _Run, app: Obj, workdir: Path, attempt: int) -> str | None:
        """One spark-submit; the submission ID, or None after SUBMISSION_FAILED was written."""
        submission_id = str(uuid.uuid4())
        templates = spark_submit.write_pod_templates(app, workdir / submission_id)
        token = workdir / "submission-token"
        token.write_text(self.client.session.headers.get("Authorization", "").removeprefix("Bearer "))
        token.chmod(0o600)
        auth = ["--conf", f"spark.kubernetes.authenticate.submission.oauthTokenFile={token}"]
        if isinstance(self.client.session.verify, str):
            auth += ["--conf", f"spark.kubernetes.authenticate.submission.caCertFile={self.client.session.verify}"]
        args = spark_submit.submit_args(app, f"k8s://{self.url}", submission_id, templates)
        argv = [str(Path(sys.executable).with_name("spark-submit")), *args[:4], *auth, *args[4:]]
        # spark-operator's own environment, not this test process's: PYSPARK_PYTHON and the like
        # would reach the driver pod (Spark copies them), credentials would reach spark-submit.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_", "SPARK_"))}
        with open(workdir / "spark-submit.log", "ab") as log:
            run.process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
            code = run.process.wait()
        if run.deleting.is_set():
            return None
        if code != 0:
            # spark-operator's message is spark-submit's whole stderr (submission.go runSparkSubmit):
            # the refusal that says why sits in the middle of a stack trace, not at the end.
            tail = (workdir / "spark-submit.log").read_bytes()[-100_000:].decode(errors="replace")
            self._app_status(run, {"applicationState": {"state": "SUBMISSION_FAILED",
                                                        "errorMessage": f"failed to run spark-submit: {tail}"},
                                   "driverInfo": {}, "submissionAttempts": attempt,
                                   "lastSubmissionAttemptTime": _now()})
            return None
        self._app_status(run, {"applicationState": {"state": "SUBMITTED"}, "submissionID": submission_id,
                               "driverInfo": {"podName": spark_submit.driver_pod_name(app)},
                               "submissionAttempts": attempt, "lastSubmissionAttemptTime": _now()})
        return submission_id

    def _follow_driver(self, run: _Run, app: Obj) -> tuple[str, str]:
        """The driver pod's states as the application's, until it ends (SUCCEEDING or FAILING)."""
        pod_name = spark_submit.driver_pod_name(app)
        last = ("SUBMITTED", "")
        while not run.deleting.is_set():
            pod = self.client.get_or_none("v1", "pods", run.namespace, pod_name)
            state, error = spark_submit.application_state(pod)
            if (state, error) != last:
                status: Obj = {"applicationState": {"state": state, "errorMessage": error or None}}
                labels = ((pod or {}).get("metadata") or {}).get("labels") or {}
                if labels.get("spark-app-selector"):
                    status["sparkApplicationId"] = labels["spark-app-selector"]
                    status["executorState"] = self._executor_states(run.namespace, labels["spark-app-selector"])
                self._app_status(run, status)
                last = (state, error)
            if state in ("SUCCEEDING", "FAILING"):
                return last
            time.sleep(self.poll_seconds)
        return last

    def _executor_states(self, namespace: str, app_id: str) -> dict[str, str]:
        states = {"Pending": "PENDING", "Running": "RUNNING", "Succeeded": "COMPLETED", "Failed": "FAILED"}
        pods = self.client.list("v1", "pods", namespace, label_selector=f"spark-app-selector={app_id},"
                                                                        "spark-role=executor")
        return {p["metadata"]["name"]: states.get((p.get("status") or {}).get("phase", ""), "UNKNOWN")
                for p in pods}

    def _run_k8s(self, run: _Run, app: Obj) -> None:
        self._add_finalizer(app)
        spec = app.get("spec") or {}
        policy = spec.get("restartPolicy") or {}
        retries = int(policy.get("onFailureRetries") or 0) if policy.get("type") == "OnFailure" else 0
        workdir = self.log_dir / f"{run.namespace}-{run.name}"
        workdir.mkdir(parents=True, exist_ok=True)
        state, error = "FAILING", ""
        for attempt in range(1, retries + 2):
            if self._submit(run, app, workdir, attempt) is None:
                return
            self._app_status(run, {"executionAttempts": attempt})
            state, error = self._follow_driver(run, app)
            if run.deleting.is_set():
                return
            if state == "SUCCEEDING" or attempt > retries:
                break
            # restartPolicy OnFailure: delete the driver pod, submit again (see 6.).
            self._app_status(run, {"applicationState": {"state": "PENDING_RERUN"}, "driverInfo": {}})
            with contextlib.suppress(ApiStatusError):
                self.client.delete("v1", "pods", run.namespace, spark_submit.driver_pod_name(app))
            self.client.wait_gone("v1", "pods", run.namespace, spark_submit.driver_pod_name(app), GRACE_SECONDS * 2)
        final: Obj = {"applicationState": {"state": "COMPLETED" if state == "SUCCEEDING" else "FAILED"},
                      "terminationTime": _now()}
        if error:
            final["applicationState"]["errorMessage"] = error
        self._app_status(run, final)

    def _finish(self, run: _Run, exit_code: int, message: str) -> None:
        ok = exit_code == 0
        self._app_status(run, {"applicationState": {"state": "SUCCEEDING" if ok else "FAILING"}})
        final: Obj = {"applicationState": {"state": "COMPLETED" if ok else "FAILED"},
                      "terminationTime": _now()}
        if not ok:
            final["applicationState"]["errorMessage"] = f"driver container exited with code {exit_code}"
        self._app_status(run, final)

    def _run_instant(self, run: _Run, app: Obj) -> None:
        """Test double for the scale benchmark: no Spark, a synthetic result at once.

        The fewest writes that still give the operator what spark-operator would:
        a driver pod with the termination message, then the final state.
        """
        pod_name = f"{run.name}-driver"
        driver = (app.get("spec") or {}).get("driver") or {}
        with contextlib.suppress(ApiStatusError):
            self.client.create({"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"name": pod_name, "namespace": run.namespace,
                                             # as spark-operator labels a driver pod (see 2.)
                                             "labels": {**(driver.get("labels") or {}), "spark-role": "driver",
                                                        "sparkoperator.k8s.io/app-name": run.name},
                                             "ownerReferences": [{"apiVersion": API, "kind": "SparkApplication",
                                                                  "name": run.name,
                                                                  "uid": app["metadata"].get("uid", ""),
                                                                  "controller": True}]},
                                "spec": {"containers": [{"name": DRIVER_CONTAINER, "image": "synthetic"}]}},
                               "pods")
        labels = app["metadata"].get("labels") or {}
        message = json.dumps({"rows": 0, "files": 0, "bytes": 0, "synthetic": True,
                              "runId": labels.get("lading.io/run-id", "")})
        self._terminate_pod(run, pod_name, 0, message)
        self._app_status(run, {"applicationState": {"state": "COMPLETED"}, "terminationTime": _now(),
                               "driverInfo": {"podName": pod_name}})

    # -- deletion -------------------------------------------------------------------
    def _terminate(self, run: _Run) -> None:
        process = run.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _delete(self, run: _Run, app: Obj) -> None:
        """The application is being deleted: stop the driver, delete its pod, release it."""
        # A run still starting may not have its process yet; wait for it to settle.
        deadline = time.monotonic() + GRACE_SECONDS
        while run.process is None and run.thread is not None and run.thread.is_alive() \
                and time.monotonic() < deadline and not run.finished.is_set():
            time.sleep(0.05)
        self._terminate(run)
        run.finished.wait(GRACE_SECONDS)
        meta = app["metadata"]
        with contextlib.suppress(ApiStatusError):
            self.client.delete("v1", "pods", run.namespace, f"{run.name}-driver")
        with contextlib.suppress(ApiStatusError):
            current = self.client.get(API, PLURAL, run.namespace, run.name)
            finalizers = [f for f in current["metadata"].get("finalizers") or [] if f != FINALIZER]
            self.client.patch(API, PLURAL, meta["namespace"], meta["name"],
                              {"metadata": {"finalizers": finalizers}})

    # -- for tests --------------------------------------------------------------------
    def wait(self) -> None:
        """Block until stopped (for running the stand-in as its own process)."""
        self._stop.wait()
    def driver_log(self, namespace: str, name: str) -> str:
        path = self.log_dir / f"{namespace}-{name}" / "driver.log"
        return path.read_text(errors="replace") if path.exists() else ""


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.spark_operator --url URL [--mode instant]``: run as its own process."""
    import argparse

    parser = argparse.ArgumentParser(description="spark-operator stand-in (tests only)")
    parser.add_argument("--url", required=True, help="the API server's URL")
    parser.add_argument("--token", default=os.environ.get("LADING_STANDIN_TOKEN", ""),
                        help="a bearer token (default: $LADING_STANDIN_TOKEN)")
    parser.add_argument("--ca", default="", help="the server's certificate file (default: the system's CAs)")
    parser.add_argument("--mode", choices=("spark", "instant", "k8s"), default="spark")
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args(argv)
    standin = SparkOperatorStandIn(args.url, mode=args.mode, instant_workers=args.workers, token=args.token,
                                   ca=args.ca or True).start()
    signal.signal(signal.SIGTERM, lambda *_: standin._stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        standin.wait()
    standin.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
