"""Faults between a client and the real API server: a small HTTP proxy for tests (never shipped).

The emulator had hooks for faults; the real kube-apiserver has none, so a test that needs
the API to misbehave for one client puts this proxy in front of it and points that client
(the operator process, or the operator's API client in-process) at the proxy through a
kubeconfig: ``http://127.0.0.1:PORT`` with the client's own bearer token, which the proxy
passes on, so RBAC still sees who asks. Every other client talks to the server directly.

The proxy relays each request to the server over TLS (verified against its certificate)
and streams the answer back chunk by chunk, so watches work through it. A :class:`Fault`
names requests (method, a regular expression on the path, watch or not) and what happens to
the next ``times`` of them:

- ``status=500`` (or 429, 503...): answered by the proxy with a ``v1 Status``, never sent on;
- ``delay=seconds``: sent on after that long (a slow server);
- ``hold=True``: kept until :meth:`ApiProxy.release` (a server that does not answer yet);
- ``cut_after_headers=True``: relayed, then the connection is closed right after the answer's
  headers (a dropped watch, a load balancer's reset).

:meth:`ApiProxy.cut_watches` closes the watches open now, abruptly (the connection is reset,
no clean end of stream). :attr:`ApiProxy.seen` records every request (method, path with
query, code, the fault applied) and :attr:`ApiProxy.gone` every 410 Gone the server sent,
also the ones inside a watch stream (an ``ERROR`` event), so a test can show the fault
really happened. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding",
               "content-encoding", "upgrade", "proxy-connection"}
GONE_MARK = re.compile(rb'"code"\s*:\s*410')


@dataclass
class Fault:
    """Which requests (``method``: any if empty; ``path``: a regular expression searched in the
    path; ``watch``: only watches, only other requests, or either when None) and what to do."""

    path: str = ""
    method: str = ""
    watch: bool | None = None
    status: int = 0
    delay: float = 0.0
    hold: bool = False
    cut_after_headers: bool = False
    times: int = 1                       # how many matching requests it applies to; -1: every one
    applied: int = 0

    def matches(self, method: str, path: str, watch: bool) -> bool:
        if self.times >= 0 and self.applied >= self.times:
            return False
        if self.method and self.method.upper() != method.upper():
            return False
        if self.watch is not None and self.watch != watch:
            return False
        return re.search(self.path, path) is not None


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Take a finished task's outcome, so that asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


@dataclass(frozen=True)
class Seen:
    method: str
    path: str                            # with the query string
    code: int
    fault: str = ""


@dataclass(eq=False)
class _Stream:
    request: web.Request
    path: str
    cut: asyncio.Event = field(default_factory=asyncio.Event)


class ApiProxy:
    """``with ApiProxy(url, ca) as proxy: ... proxy.url``, on a thread with its own event loop."""

    def __init__(self, upstream: str, ca: str | bool = False) -> None:
        self.upstream = upstream.rstrip("/")
        self.ca = ca
        self.faults: list[Fault] = []
        self.seen: list[Seen] = []
        self.gone: list[str] = []        # paths of requests that got 410 Gone (a status or a watch event)
        self.held = 0                    # requests held so far (hold=True)
        self.url = ""
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="api-proxy", daemon=True)
        self._streams: set[_Stream] = set()
        self._released: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> ApiProxy:
        self._thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    async def _start(self) -> str:
        context: ssl.SSLContext | bool = False
        if self.ca:
            context = ssl.create_default_context(cafile=None if self.ca is True else str(self.ca))
            context.check_hostname = False  # the server's certificate names 127.0.0.1's service names
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=0),
                                              timeout=aiohttp.ClientTimeout(total=None), auto_decompress=True)
        self._released = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _stop(self) -> None:
        assert self._released is not None
        self._released.set()
        for stream in list(self._streams):
            stream.cut.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def __enter__(self) -> ApiProxy:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.stop()

    # -- what tests call --------------------------------------------------------------
    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    def release(self) -> None:
        """Let every request held so far go on (a fault added later holds again)."""
        asyncio.run_coroutine_threadsafe(self._release(), self._loop).result(30)

    async def _release(self) -> None:
        assert self._released is not None
        self._released.set()
        self._released = asyncio.Event()

    def cut_watches(self, path: str = "") -> int:
        """Reset the connection of every watch open now whose path matches; how many were cut."""
        return int(asyncio.run_coroutine_threadsafe(self._cut(path), self._loop).result(30))

    async def _cut(self, path: str) -> int:
        cut = [s for s in self._streams if re.search(path, s.path)]
        for stream in cut:
            stream.cut.set()
        return len(cut)

    def open_watches(self, path: str = "") -> list[str]:
        return [s.path for s in list(self._streams) if re.search(path, s.path)]

    def kubeconfig(self, token: str, path: Path, user: str = "proxied") -> str:
        """A kubeconfig that reaches the server through this proxy as ``token``."""
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "proxied",
            "clusters": [{"name": "proxied", "cluster": {"server": self.url}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "proxied", "context": {"cluster": "proxied", "user": user}}]}, indent=1))
        return str(path)

    # -- the relay --------------------------------------------------------------------
    def _fault_for(self, method: str, path: str, watch: bool) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path, watch):
                    fault.applied += 1
                    return fault
        return None

    def _record(self, request: web.Request, code: int, fault: str) -> None:
        with self._lock:
            self.seen.append(Seen(request.method, request.path_qs, code, fault))
            if code == 410:
                self.gone.append(request.path_qs)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        watch = request.query.get("watch") in ("true", "1")
        fault = self._fault_for(request.method, request.path, watch)
        if fault is not None and fault.hold:
            assert self._released is not None
            with self._lock:
                self.held += 1
            await self._released.wait()
        if fault is not None and fault.delay:
            await asyncio.sleep(fault.delay)
        if fault is not None and fault.status:
            self._record(request, fault.status, f"status {fault.status}")
            return web.json_response({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                                      "message": f"injected by the test's API proxy: {fault.status}",
                                      "reason": "InternalError" if fault.status >= 500 else "TooManyRequests",
                                      "code": fault.status}, status=fault.status)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        body = await request.read()
        assert self._session is not None
        async with self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                         data=body or None, allow_redirects=False,
                                         # as sent: no Content-Type stays none (not octet-stream)
                                         skip_auto_headers=("Content-Type", "User-Agent")) as upstream:
            answer = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS})
            await answer.prepare(request)
            self._record(request, upstream.status, "cut" if fault is not None and fault.cut_after_headers
                         else (f"delay {fault.delay}" if fault is not None and fault.delay
                               else ("held" if fault is not None and fault.hold else "")))
            if fault is not None and fault.cut_after_headers:
                self._abort(request)
                return answer
            stream = _Stream(request, request.path_qs)
            if watch:
                self._streams.add(stream)
            try:
                await self._relay(upstream, answer, stream, request)
            finally:
                self._streams.discard(stream)
            return answer

    async def _relay(self, upstream: aiohttp.ClientResponse, answer: web.StreamResponse, stream: _Stream,
                     request: web.Request) -> None:
        cut = asyncio.ensure_future(stream.cut.wait())
        chunk: asyncio.Future[bytes] | None = None
        try:
            while True:
                chunk = asyncio.ensure_future(upstream.content.readany())
                done, _ = await asyncio.wait({chunk, cut}, return_when=asyncio.FIRST_COMPLETED)
                if cut in done:
                    self._abort(request)
                    return
                data = chunk.result()
                if not data:
                    await answer.write_eof()
                    return
                if GONE_MARK.search(data):
                    with self._lock:
                        self.gone.append(request.path_qs)
                await answer.write(data)
        except (ConnectionError, aiohttp.ClientError):
            self._abort(request)
        finally:
            for task in (cut, chunk):  # also when this handler is cancelled (the client went)
                if task is not None and not task.done():
                    task.cancel()
                if task is not None:
                    task.add_done_callback(_retrieved)

    @staticmethod
    def _abort(request: web.Request) -> None:
        transport = request.transport
        if transport is not None:
            transport.abort()

