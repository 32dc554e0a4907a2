"""The real API server's custom-resource write path: a client of ``crd-check --serve``.

``crd-check`` (``shared/tools/crd-check``, see its .md) is kube-apiserver 1.36's own
apiextensions code: validating CRDs as on CRD create, and, in ``--serve`` mode, each
create / update / status update of a custom resource as the server runs it — strict
decoding and pruning, defaults, generation and status handling, the OpenAPI schema
with ratcheting, and the CEL rules with their runtime cost budget. ``tests/crds`` admits
examples and specs with it (no API server needed), so what the API server would refuse,
the unit tests refuse too.

Why it stays now that the emulator is gone (issue 34: "the emulator and its admission client
go; crd-check stays for validating CRD files in unit tests"): this module was the emulator's
admission client only in the sense that the emulator also called it; it is the crd-check
client, and its users now are the unit tests alone — ``tests/crds`` (CRD-create validation
of ``crds/*.yaml``, every example and each table row of specs admitted or refused, field by
field), ``tests/lading_operator/test_render.py`` (every rendered SparkApplication admitted
by the upstream SparkApplication CRD), ``test_kinds.py`` (what a kind writes to ``status``
is admitted by its CRD's status schema), ``test_render_cli.py`` (the binary's path: ``lading
render``'s output checked by crd-check itself). They run in tier 1, without a control plane,
at ~0.3 ms a request; on the real server each would need a namespace, a create and cleanup.
Nothing that talks to an API server uses it: operator and end-to-end tests meet the real one
(``harness.control_plane``).

One process answers one request at a time; :class:`Admission` serialises callers with
a lock (~0.3 ms a request).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]


def crd_check_binary() -> str:
    """``$LADING_CRD_CHECK``, else ``shared/tools/crd-check`` beside or inside the checkout, else PATH."""
    candidates = [os.environ.get("LADING_CRD_CHECK", ""),
                  str(REPO / "shared" / "tools" / "crd-check"),
                  str(REPO.parent / "shared" / "tools" / "crd-check"),
                  shutil.which("crd-check") or ""]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("crd-check not found: set LADING_CRD_CHECK or put shared/tools/crd-check "
                            "beside this checkout")


def check_crd_files(paths: Iterable[Path | str]) -> subprocess.CompletedProcess[str]:
    """``crd-check -q FILE...``: the API server's CRD-create validation (exit 0 = all valid)."""
    return subprocess.run([crd_check_binary(), "-q", *map(str, paths)], capture_output=True, text=True,
                          timeout=120, check=False)


class CrdRejected(Exception):
    """crd-check refused the CRDs at start-up (what a CRD create would answer)."""


@dataclass
class Answer:
    """One admission response: ``allowed`` with the stored ``object``, or the server's refusal."""

    allowed: bool
    status: int
    object: Obj | None = None
    warnings: list[str] = field(default_factory=list)
    reason: str = ""
    message: str = ""
    errors: list[Obj] = field(default_factory=list)
    api_status: Obj | None = None

    def fields(self) -> list[tuple[str, str]]:
        """``(field, message)`` of each cause (422 only)."""
        return [(str(e.get("field", "")), str(e.get("message", ""))) for e in self.errors]


class Admission:
    """A long-lived ``crd-check --serve`` for a set of CRD documents."""

    def __init__(self, crds: Iterable[Obj]) -> None:
        self.crds = [c for c in crds]
        self.kinds = {(c["spec"]["group"], c["spec"]["names"]["kind"]) for c in self.crds}
        self._dir = tempfile.TemporaryDirectory(prefix="crd-check-")
        args = [crd_check_binary(), "--serve", "-q"]
        for i, crd in enumerate(self.crds):
            path = Path(self._dir.name) / f"crd-{i}.yaml"
            path.write_text(yaml.safe_dump(crd, sort_keys=False))
            args += ["--crd", str(path)]
        self._lock = threading.Lock()
        stderr = Path(self._dir.name) / "stderr"
        with open(stderr, "w") as err:  # start-up diagnostics only (capped by crd-check)
            self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=err, text=True, bufsize=1)
        if self._send({"op": "ping"}) is None:
            self._proc.wait(30)
            message = stderr.read_text().strip()
            self._dir.cleanup()
            raise CrdRejected(message)

    def serves(self, group: str, kind: str) -> bool:
        return (group, kind) in self.kinds

    def _send(self, request: Obj) -> Obj | None:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            return None
        line = self._proc.stdout.readline()
        return json.loads(line) if line else None

    def request(self, op: str, obj: Obj, old: Obj | None = None, subresource: str = "",
                namespace: str | None = None, field_validation: str = "") -> Answer:
        req: Obj = {"op": op, "object": obj}
        if old is not None:
            req["oldObject"] = old
        if subresource:
            req["subresource"] = subresource
        if namespace:
            req["namespace"] = namespace
        if field_validation in ("Strict", "Warn", "Ignore"):
            req["fieldValidation"] = field_validation
        with self._lock:
            resp = self._send(req)
        if resp is None:
            raise RuntimeError(f"crd-check --serve exited (code {self._proc.poll()})")
        return Answer(allowed=bool(resp.get("allowed")), status=int(resp.get("status", 500)),
                      object=resp.get("object"), warnings=list(resp.get("warnings") or []),
                      reason=str(resp.get("reason", "")), message=str(resp.get("message", "")),
                      errors=list(resp.get("errors") or []), api_status=resp.get("apiStatus"))

    def create(self, obj: Obj, namespace: str | None = None, field_validation: str = "") -> Answer:
        return self.request("create", obj, namespace=namespace, field_validation=field_validation)

    def update(self, obj: Obj, old: Obj, subresource: str = "", field_validation: str = "") -> Answer:
        return self.request("update", obj, old, subresource=subresource, field_validation=field_validation)

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._dir.cleanup()

    def __enter__(self) -> Admission:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
