"""The driver's progress: one JSON document (``lading_spec.streamprogress``) served over HTTP.

The loop updates it after every batch; a daemon thread serves ``GET /progress``
(and ``/``) from a copy taken under a lock, so a poller never waits for a batch and
never touches the table or the source. ``unreadFiles`` lists the files the last
batch could not read (``{"file", "reason"}``; a later batch reads them again). The
Spark app calls no Kubernetes API:
the operator polls this endpoint, as it polls Spark's own REST API.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lading_spec.streamprogress import PROGRESS_PATH


def iso(ms: int | float | None = None) -> str:
    t = dt.datetime.now(dt.UTC) if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class Progress:
    """The document, updated by the loop, read by the server (thread-safe)."""

    def __init__(self, run_id: str, source: str) -> None:
        self.port: int | None = None  # where the server listens, once it does
        self._lock = threading.Lock()
        self._doc: dict[str, Any] = {"kind": "StreamProgress", "runId": run_id, "state": "starting",
                                     "source": source, "rowsTotal": 0, "batches": 0, "tableVersion": None,
                                     "upper": None, "lastBatch": None, "lag": {"total": 0}, "offsets": {},
                                     "rewrittenFiles": 0, "dataLossSkipped": [], "unreadFiles": [],
                                     "updatedAt": iso()}

    def update(self, **fields: Any) -> None:
        with self._lock:
            self._doc.update(fields)
            self._doc["updatedAt"] = iso()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return json.loads(json.dumps(self._doc))

    def get(self, key: str) -> Any:
        with self._lock:
            return self._doc.get(key)


class ProgressServer:
    """``GET /progress`` on ``host:port`` (port 0: any free port, see ``port``)."""

    def __init__(self, progress: Progress, host: str, port: int) -> None:
        outer = progress

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                if self.path.split("?", 1)[0] not in (PROGRESS_PATH, "/"):
                    self.send_error(404, f"try {PROGRESS_PATH}")
                    return
                body = json.dumps(outer.snapshot(), sort_keys=True).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        progress.port = self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="lading-progress-http", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
