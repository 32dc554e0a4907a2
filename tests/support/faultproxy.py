"""Faults on the wire: an HTTP proxy on 127.0.0.1 in front of the S3 server (moto) that forwards
each request and injects faults per request kind, at seeded random rates or at one planned site.

The faults are the ones a real network and a real S3 produce, seen by the real client (botocore):

* ``Fault.ERROR_5XX``: answer ``503 ServiceUnavailable`` or ``500 InternalError`` (S3's XML error),
  the request never reaching the server;
* ``Fault.SLOWDOWN``: answer ``429 SlowDown``, the request never reaching the server;
* ``Fault.DELAY``: wait ``delay_seconds``, then forward (answers late, not lost);
* ``Fault.RESET_BEFORE``: read the request, then reset the connection (TCP RST) without
  forwarding it: nothing landed;
* ``Fault.RESET_AFTER``: forward the request, let the server act on it (the write *landed*), then
  reset the connection instead of answering: the client never sees the answer;
* ``Fault.TRUNCATE``: forward, then send the answer's headers (with the full ``Content-Length``)
  and only half of its body before closing the connection (GET with a body only).

Use::

    with FaultProxy(s3_endpoint, seed=7, rates={"*": Rates(reset_after=0.05)}) as proxy:
        storage = S3Storage(S3Settings(endpoint=proxy.url))   # or a spec's connection.endpoint
        ...
        proxy.counts[Kind.GET]          # requests of that kind seen (faulted ones included)
        proxy.injected                  # [Injection(kind, path, fault), ...] in order

    rule = proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER, nth=1, match="_lading_manifest.json")
    ...                                 # the 1st conditional PUT whose path contains the match
    assert rule.fired                   # lands, and its answer is lost

**Kinds** (``Kind``) are read from the method, query and headers of each request: ``GET``
(an object's bytes, ranges included), ``HEAD``, ``LIST`` (listing objects or uploads), ``PUT``
(plain), ``PUT_CONDITIONAL`` (``If-None-Match`` / ``If-Match``), ``CREATE_MULTIPART``,
``UPLOAD_PART``, ``COMPLETE_MULTIPART``, ``ABORT_MULTIPART``, ``DELETE`` (one key, or the batch
``POST ?delete``), ``OTHER`` (bucket calls and the rest).

**Rates** (``Rates``) give each fault's probability per request; ``rates`` maps a kind (or
``"*"``, every kind without its own entry) to its ``Rates``. Whether request *n* of kind *K* is
faulted, and how, is drawn from a generator seeded with ``(seed, K, n)``: the same seed faults
the same positions of each kind whatever the interleaving of kinds across threads (within one
kind, concurrent requests may swap positions). Faults that do not apply to a request (a
truncated body of a PUT) are not injected.

**Planned faults** (``plan``): the ``nth`` request of a kind whose path contains ``match``,
counted from when the rule is added, gets the fault, once; planned rules win over rates.
``Rule.fired`` / ``Rule.path`` tell whether and where.

**Bounds**: at most ``max_connections`` client connections are served at once (more wait to be
accepted), every socket has a timeout, and ``stop`` (or leaving the ``with``) closes the
listening socket and every open connection and joins the serving threads. Stdlib only.
"""

from __future__ import annotations

import contextlib
import enum
import http.client
import http.server
import random
import socket
import struct
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class Kind(enum.StrEnum):
    GET = "GET"
    HEAD = "HEAD"
    LIST = "LIST"
    PUT = "PUT"
    PUT_CONDITIONAL = "PUT_CONDITIONAL"
    CREATE_MULTIPART = "CREATE_MULTIPART"
    UPLOAD_PART = "UPLOAD_PART"
    COMPLETE_MULTIPART = "COMPLETE_MULTIPART"
    ABORT_MULTIPART = "ABORT_MULTIPART"
    DELETE = "DELETE"
    OTHER = "OTHER"


class Fault(enum.StrEnum):
    ERROR_5XX = "error_5xx"
    SLOWDOWN = "slowdown"
    DELAY = "delay"
    RESET_BEFORE = "reset_before"
    RESET_AFTER = "reset_after"
    TRUNCATE = "truncate"


@dataclass(frozen=True)
class Rates:
    """The probability of each fault per request (their sum at most 1)."""

    error_5xx: float = 0.0
    slowdown: float = 0.0
    delay: float = 0.0
    reset_before: float = 0.0
    reset_after: float = 0.0
    truncate: float = 0.0
    delay_seconds: float = 0.2

    def __post_init__(self) -> None:
        total = sum(getattr(self, f.value) for f in Fault)
        if total > 1.0 + 1e-9 or any(getattr(self, f.value) < 0 for f in Fault):
            raise ValueError(f"fault rates must be ≥ 0 and sum to at most 1 (they sum to {total})")

    @classmethod
    def mixed(cls, rate: float, delay_seconds: float = 0.2) -> Rates:
        """Every fault at ``rate / 6`` (``rate`` in all)."""
        each = rate / len(Fault)
        return cls(**{f.value: each for f in Fault}, delay_seconds=delay_seconds)


@dataclass
class Rule:
    """A planned fault: the ``nth`` request of ``kind`` whose path contains ``match``."""

    kind: Kind
    fault: Fault
    nth: int = 1
    match: str = ""
    seen: int = 0
    fired: bool = False
    path: str = ""


@dataclass(frozen=True)
class Injection:
    kind: Kind
    path: str
    fault: Fault


def classify(method: str, path: str, headers: Mapping[str, str]) -> Kind:
    """The kind of an S3 request (path-style addressing: ``/bucket/key?query``)."""
    split = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
    has_key = "/" in split.path.lstrip("/")
    lower = {k.lower(): v for k, v in headers.items()}
    if method == "HEAD":
        return Kind.HEAD
    if method == "GET":
        if "uploads" in query or "list-type" in query or not has_key:
            return Kind.LIST
        return Kind.GET if "uploadId" not in query else Kind.LIST  # ListParts
    if method == "PUT":
        if not has_key:
            return Kind.OTHER
        if "partNumber" in query and "uploadId" in query:
            return Kind.UPLOAD_PART
        if "if-none-match" in lower or "if-match" in lower:
            return Kind.PUT_CONDITIONAL
        return Kind.PUT
    if method == "POST":
        if "delete" in query:
            return Kind.DELETE
        if "uploads" in query:
            return Kind.CREATE_MULTIPART
        if "uploadId" in query:
            return Kind.COMPLETE_MULTIPART
        return Kind.OTHER
    if method == "DELETE":
        if "uploadId" in query:
            return Kind.ABORT_MULTIPART
        return Kind.DELETE if has_key else Kind.OTHER
    return Kind.OTHER


_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
               "upgrade", "expect"}

_ERRORS = {
    Fault.SLOWDOWN: (429, "SlowDown", "Please reduce your request rate."),
    Fault.ERROR_5XX: (503, "ServiceUnavailable", "Service is unable to handle request."),
}


class FaultProxy:
    """See the module docstring. ``upstream``: ``http://127.0.0.1:<port>`` of the S3 server."""

    def __init__(self, upstream: str, *, seed: int = 0, rates: Mapping[Kind | str, Rates] | Rates | None = None,
                 max_connections: int = 64, timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.hostname is None or parsed.port is None:
            raise ValueError(f"upstream {upstream!r} must be http://host:port")
        self.upstream = (parsed.hostname, parsed.port)
        self.seed = seed
        self.rates: dict[str, Rates] = ({"*": rates} if isinstance(rates, Rates)
                                        else {str(k): v for k, v in (rates or {}).items()})
        self.timeout = timeout
        self.counts: Counter[Kind] = Counter()
        self.injected: list[Injection] = []
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._open: set[socket.socket] = set()
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread: threading.Thread | None = None

    # -- control -----------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"faultproxy-{self.url}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close every open connection, join the threads (bounded: ``timeout``)."""
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._server.join_workers(self.timeout)
        if self._thread is not None:
            self._thread.join(self.timeout)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def plan(self, kind: Kind, fault: Fault, nth: int = 1, match: str = "") -> Rule:
        """Fault the ``nth`` request of ``kind`` whose path contains ``match`` (from now on), once."""
        rule = Rule(kind=kind, fault=fault, nth=nth, match=match)
        with self._lock:
            self._rules.append(rule)
        return rule

    def set_rates(self, rates: Mapping[Kind | str, Rates] | Rates | None) -> None:
        """Replace the random rates (``None``: no random faults); counts and plans stay."""
        with self._lock:
            self.rates = {"*": rates} if isinstance(rates, Rates) else {str(k): v for k, v in (rates or {}).items()}

    def reset_counts(self) -> None:
        with self._lock:
            self.counts.clear()
            self.injected.clear()

    def total(self) -> int:
        """All requests seen since the last ``reset_counts``."""
        with self._lock:
            return sum(self.counts.values())

    # -- decisions ----------------------------------------------------------------------------

    def _decide(self, kind: Kind, path: str, has_body: bool) -> Fault | None:
        with self._lock:
            self.counts[kind] += 1
            n = self.counts[kind]
            fault: Fault | None = None
            for rule in self._rules:
                if not rule.fired and rule.kind == kind and rule.match in path:
                    rule.seen += 1
                    if rule.seen == rule.nth:
                        rule.fired, rule.path, fault = True, path, rule.fault
                        break
            if fault is None:
                fault = self._draw(kind, n, has_body)
            if fault is not None:
                self.injected.append(Injection(kind, path, fault))
            return fault

    def _draw(self, kind: Kind, n: int, has_body: bool) -> Fault | None:
        rates = self.rates.get(str(kind), self.rates.get("*"))
        if rates is None:
            return None
        x = random.Random(f"{self.seed}:{kind}:{n}").random()
        for f in Fault:
            x -= getattr(rates, f.value)
            if x < 0:
                if f is Fault.TRUNCATE and not (kind is Kind.GET and has_body):
                    return None
                return f
        return None

    def _delay(self, kind: Kind) -> float:
        rates = self.rates.get(str(kind), self.rates.get("*"))
        return rates.delay_seconds if rates is not None else 0.2

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._open.add if add else self._open.discard)(conn)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: Any, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self._workers: set[threading.Thread] = set()
        self._workers_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.proxy._slots.acquire()
        self.proxy._track(request, True)
        t = threading.Thread(target=self._serve_one, args=(request, client_address), daemon=True)
        with self._workers_lock:
            self._workers.add(t)
        t.start()

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            self.proxy._track(request, False)
            self.proxy._slots.release()
            with self._workers_lock:
                self._workers.discard(threading.current_thread())

    def join_workers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._workers_lock:
            workers = list(self._workers)
        for t in workers:
            t.join(max(0.0, deadline - time.monotonic()))


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        self.request.settimeout(self.server.proxy.timeout)
        super().setup()
        self._reset = False

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reset_connection(self) -> None:
        """Abort the client's connection with a TCP RST (SO_LINGER 0, then close)."""
        self._reset = True
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # The read file holds a reference: the socket closes (and resets) once both are closed. The
        # write file (unbuffered) holds none and stays open for the base class's last flush.
        with contextlib.suppress(OSError):
            self.rfile.close()
        self.connection.close()

    def finish(self) -> None:
        if not self._reset:
            super().finish()

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(*self.server.proxy.upstream, timeout=self.server.proxy.timeout)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            headers["Content-Length"] = str(len(body))
            if self.command in ("GET", "HEAD", "DELETE") and not body:
                headers.pop("Content-Length")
            conn.request(self.command, self.path, body=body or None, headers=headers)
            r = conn.getresponse()
            data = r.read()
            return r.status, r.reason, [(k, v) for k, v in r.getheaders() if k.lower() not in _HOP_BY_HOP], data
        finally:
            conn.close()

    def _answer(self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes,
                truncate: bool = False) -> None:
        self.send_response_only(status, reason)
        has_length = False
        for k, v in headers:
            if k.lower() == "content-length":
                has_length = True
                if self.command != "HEAD":
                    v = str(len(data))
            self.send_header(k, v)
        if not has_length:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if truncate:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(data)

    def _handle(self) -> None:
        proxy = self.server.proxy
        body = self._body()
        kind = classify(self.command, self.path, dict(self.headers.items()))
        fault = proxy._decide(kind, self.path, has_body=self.command == "GET")
        if fault is Fault.RESET_BEFORE:
            self._reset_connection()
            return
        if fault in _ERRORS:
            status, code, message = _ERRORS[fault]  # type: ignore[index]
            if fault is Fault.ERROR_5XX and random.Random(f"{proxy.seed}:{self.path}").random() < 0.5:
                status, code, message = 500, "InternalError", "We encountered an internal error. Please try again."
            xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                   f"<Message>{message}</Message><RequestId>faultproxy</RequestId></Error>").encode()
            self._answer(status, http.client.responses.get(status, ""),
                         [("Content-Type", "application/xml")], xml)
            return
        if fault is Fault.DELAY:
            time.sleep(proxy._delay(kind))
        status, reason, headers, data = self._forward(body)
        if fault is Fault.RESET_AFTER:
            self._reset_connection()
            return
        self._answer(status, reason, headers, data, truncate=fault is Fault.TRUNCATE and status < 300 and bool(data))

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle
