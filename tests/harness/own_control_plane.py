"""etcd and kube-apiserver started by the project's own code, so a test can restart the API
server or compact etcd (never shipped).

The shared launcher (``harness.control_plane``) stops everything when the API server exits,
which is right for the session's control plane and wrong for a test whose fault *is* the
API server going away. :class:`OwnControlPlane` starts the same binaries
(:func:`harness.control_plane.assets_dir`) with the launcher's flags, on ports chosen once,
so :meth:`OwnControlPlane.restart_apiserver` (a crash by default) brings the server back at the same address with
the same certificate, tokens and signing key: clients reconnect as they would to a cluster
whose API server restarted. :meth:`OwnControlPlane.compact` compacts etcd's history up to
its current revision (etcd's v3 JSON gateway, ``/v3/kv/compaction``), so that a watch
resuming from an older resourceVersion is answered 410 Gone by the real server.

No kube-controller-manager (no garbage collector, namespace controller or token
controller): :meth:`harness.fixtures.Kube.create_namespace` creates the ServiceAccounts a
test needs, and TokenRequest is the API server's own. The whole plane is a test's (or a
module's): it starts in a few seconds and nothing else shares it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from support.ports import free_ports

from harness.control_plane import READY_SECONDS, Endpoint, _die_with_parent, assets_dir

ADMIN_TOKEN_BYTES = 16


@dataclass
class OwnControlPlane:
    """etcd + kube-apiserver in ``directory``; ``apiserver_args`` are added to the server's flags."""

    directory: Path
    apiserver_args: tuple[str, ...] = ()
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    endpoint: Endpoint | None = None

    def start(self) -> Endpoint:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        self.assets = assets_dir()
        self.token = base64.b16encode(os.urandom(ADMIN_TOKEN_BYTES)).decode().lower()
        (d / "tokens.csv").write_text(f'{self.token},admin,admin-uid,"system:masters"\n')
        for args in (["genrsa", "-out", str(d / "sa.key"), "2048"],
                     ["rsa", "-in", str(d / "sa.key"), "-pubout", "-out", str(d / "sa.pub")]):
            subprocess.run(["openssl", *args], check=True, capture_output=True)
        (d / "certs").mkdir(exist_ok=True)
        self.etcd_port, peer, self.api_port = free_ports(3)
        self.etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        self._spawn("etcd", [str(self.assets / "etcd"), "--data-dir", str(d / "etcd-data"),
                             "--listen-client-urls", self.etcd_url,
                             "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--unsafe-no-fsync"])
        self.url = f"https://127.0.0.1:{self.api_port}"
        self._start_apiserver()
        self.endpoint = Endpoint(url=self.url, token=self.token, ca=str(d / "ca.crt"), directory=d,
                                 pids={name: p.pid for name, p in self.processes.items()})
        return self.endpoint

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.directory / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.directory,
                                                    preexec_fn=_die_with_parent)

    def _start_apiserver(self) -> None:
        d = self.directory
        # The launcher's flags (shared/tools/kube/control-plane), at a fixed port.
        self._spawn("kube-apiserver", [
            str(self.assets / "kube-apiserver"), f"--etcd-servers={self.etcd_url}",
            f"--cert-dir={d / 'certs'}", f"--secure-port={self.api_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={d / 'sa.pub'}", f"--service-account-signing-key-file={d / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=Node,RBAC",
            f"--token-auth-file={d / 'tokens.csv'}", "--allow-privileged=true", *self.apiserver_args])
        self._wait_ready()
        (d / "ca.crt").write_bytes((d / "certs" / "apiserver.crt").read_bytes())

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        request = urllib.request.Request(self.url + "/readyz", headers={"Authorization": f"Bearer {self.token}"})
        context = ssl._create_unverified_context()  # the certificate is being written now
        while True:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {process.returncode}: "
                                       f"{(self.directory / f'{name}.log').read_text(errors='replace')[-3000:]}")
            try:
                with urllib.request.urlopen(request, context=context, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the API server was not ready in time (logs in {self.directory})")
            time.sleep(0.1)

    def restart_apiserver(self, how: signal.Signals = signal.SIGKILL) -> None:
        """Stop the API server (SIGKILL: it crashed; SIGTERM: a graceful stop, which waits for the
        open watches to drain, up to a minute), then start it again at the same address."""
        self._stop("kube-apiserver", how)
        self._start_apiserver()
        assert self.endpoint is not None
        self.endpoint.pids["kube-apiserver"] = self.processes["kube-apiserver"].pid

    def _stop(self, name: str, how: signal.Signals = signal.SIGTERM) -> None:
        process = self.processes.get(name)
        if process is not None and process.poll() is None:
            process.send_signal(how)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)

    def stop(self) -> None:
        """Everything goes: the API server killed (nothing of it to keep), then etcd stopped."""
        self._stop("kube-apiserver", signal.SIGKILL)
        self._stop("etcd")

    # -- etcd -----------------------------------------------------------------------------
    def _etcd(self, path: str, body: dict[str, object]) -> dict[str, object]:
        request = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return dict(json.loads(answer.read()))

    def revision(self) -> int:
        """etcd's current revision (what the API server calls a resourceVersion)."""
        header = self._etcd("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]
        assert isinstance(header, dict)
        return int(header["revision"])

    def compact(self) -> int:
        """Compact etcd's history up to its current revision (physically); that revision."""
        revision = self.revision()
        self._etcd("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision
