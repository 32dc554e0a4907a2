"""Progress of a running job, from Spark's REST API at the driver's web UI, off the reconcile path.

``status.driverInfo.webUIAddress`` (host:port or URL) serves
``/api/v1/applications/<id>/jobs`` and ``/stages``; tasks done/total come from the
jobs, rows and bytes from the stages' metrics. Like ``pg_stat_progress_copy`` it is
best effort: a driver without a reachable UI yields no progress, never an error.

A reconcile pass never talks to a driver. It tells the :data:`POLLER` which
applications to follow (``want``) and takes the latest figures it holds
(``latest``) into the status it writes anyway. The poller is one asyncio task on
the operator's event loop, so a thousand silent drivers (a default-deny
NetworkPolicy) hold up no reconcile and no cancel.

The driver's UI runs the tenant's code, so the poller treats it as hostile:

- no redirects: a 3xx answer is an error, and nothing is requested elsewhere;
- a short connect timeout and one total deadline for the three requests of a poll
  (a response dripping a byte at a time ends at the deadline);
- at most ``max_bytes`` per response, counted as it is read (an endless body stops there);
- after a failure that cost time or bytes (a timeout, a drip, a redirect, an
  oversized or malformed answer) the address is polled again only after a backoff
  (doubling up to five minutes), so hostile or unreachable drivers cannot crowd
  out the rest; a refused connection or an application not listed yet (a driver
  still starting) costs nothing and is retried at the normal interval;
- every error (refused, reset, truncated body, bad JSON, wrong shapes) is caught and
  means "no progress".

A StreamCopy driver serves its own progress document (``GET /progress``,
:mod:`lading_spec.streamprogress`) at its pod's address: an application followed
with ``source="stream"`` is polled there, with one request and the same limits,
and its latest value is that document (checked by ``parse_progress``) plus
``fetchedAt``, the time it was read.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from lading_spec import streamprogress

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (namespace, SparkApplication name)
SOURCES = ("spark", "stream")  # Spark's REST API at the UI; a StreamCopy driver's /progress


@dataclass(frozen=True)
class Limits:
    connect: float = 2.0                    # seconds to connect
    deadline: float = 10.0                  # seconds for a whole poll (three requests)
    max_bytes: int = 4 * 1024 * 1024        # per response
    interval: float = 5.0                   # between polls of one application
    backoff: tuple[float, ...] = (5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0)  # after 1, 2, ... failures
    concurrency: int = 8                    # polls in flight at once
    expire: float = 60.0                    # forget an application nobody asked for this long


class FetchError(Exception):
    """Why a driver UI gave no progress."""


@dataclass(frozen=True)
class Fetched:
    progress: dict[str, Any] | None
    error: str | None = None
    cheap: bool = False   # a failure that cost nothing (refused, nothing listed yet): no backoff


def base_url(web_ui_address: str) -> str:
    address = web_ui_address.strip().rstrip("/")
    if "://" in address and not address.startswith(("http://", "https://")):
        raise FetchError(f"not an http(s) address: {address[:100]!r}")
    return address if address.startswith(("http://", "https://")) else f"http://{address}"


def summarize(jobs: Sequence[Mapping[str, Any]], stages: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Tasks done/total over all jobs; rows and bytes written (else read) over all stages."""
    done = sum(int(j.get("numCompletedTasks") or 0) for j in jobs)
    total = sum(int(j.get("numTasks") or 0) for j in jobs)
    rows = sum(int(s.get("outputRecords") or 0) for s in stages)
    written = sum(int(s.get("outputBytes") or 0) for s in stages)
    if not rows:
        rows = sum(int(s.get("inputRecords") or 0) for s in stages)
    if not written:
        written = sum(int(s.get("inputBytes") or 0) for s in stages)
    return {"tasksDone": done, "tasksTotal": total, "rows": rows, "bytes": written}


def session(limits: Limits = Limits()) -> aiohttp.ClientSession:
    """A client session for driver UIs: no proxies from the environment, no cookies kept."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limits.concurrency * 2, force_close=True),
        timeout=aiohttp.ClientTimeout(total=None, connect=limits.connect, sock_connect=limits.connect),
        trust_env=False, cookie_jar=aiohttp.DummyCookieJar())


async def _get(client: aiohttp.ClientSession, url: str, limits: Limits) -> Any:
    return json.loads(await _read(client, url, limits))


async def _read(client: aiohttp.ClientSession, url: str, limits: Limits) -> bytes:
    async with client.get(url, allow_redirects=False,
                          headers={"Accept": "application/json", "Accept-Encoding": "identity"}) as response:
        if 300 <= response.status < 400:
            raise FetchError(f"redirect refused: {response.status} to {response.headers.get('Location', '')[:200]!r}")
        if response.status != 200:
            raise FetchError(f"HTTP {response.status} from {url}")
        if response.content_length is not None and response.content_length > limits.max_bytes:
            raise FetchError(f"response of {response.content_length} bytes is over {limits.max_bytes}")
        body = bytearray()
        while chunk := await response.content.read(65536):
            body += chunk
            if len(body) > limits.max_bytes:
                raise FetchError(f"response over {limits.max_bytes} bytes")
        return bytes(body)


async def _spark(client: aiohttp.ClientSession, address: str, limits: Limits) -> Fetched:
    root = base_url(address) + "/api/v1/applications"
    apps = await _get(client, root, limits)
    if not apps:
        return Fetched(None, "no application yet", cheap=True)
    app_id = apps[0]["id"]
    jobs = await _get(client, f"{root}/{app_id}/jobs", limits)
    stages = await _get(client, f"{root}/{app_id}/stages", limits)
    return Fetched(summarize(jobs, stages))


async def _stream(client: aiohttp.ClientSession, address: str, limits: Limits) -> Fetched:
    doc = streamprogress.parse_progress(await _read(client, base_url(address) + streamprogress.PROGRESS_PATH,
                                                    limits))
    fetched_at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Fetched({**doc, "fetchedAt": fetched_at})


async def fetch(web_ui_address: str, client: aiohttp.ClientSession | None = None,
                limits: Limits = Limits(), source: str = "spark") -> Fetched:
    """Progress of the (first) application at ``web_ui_address`` (``source="stream"``: the
    StreamCopy progress document at that address); never raises."""
    try:
        async with contextlib.AsyncExitStack() as stack:
            if client is None:
                client = await stack.enter_async_context(session(limits))
            async with asyncio.timeout(limits.deadline):
                return await (_stream if source == "stream" else _spark)(client, web_ui_address, limits)
    except TimeoutError:
        return Fetched(None, f"no complete answer within {limits.deadline:g}s")
    except aiohttp.ClientConnectorError as e:  # refused, unreachable: the UI is not up (yet)
        return Fetched(None, f"{type(e).__name__}: {e}"[:300], cheap=True)
    except asyncio.CancelledError:
        raise
    except Exception as e:  # noqa: BLE001 - a hostile or broken UI must never break the operator
        return Fetched(None, f"{type(e).__name__}: {e}"[:300])


@dataclass
class _Entry:
    address: str
    wanted_at: float
    source: str = "spark"
    next_at: float = 0.0
    failures: int = 0
    busy: bool = False
    errors: list[str] = field(default_factory=list)


class Poller:
    """Polls the driver UIs the reconcile passes ask for; thread-safe ``want``/``forget``/``latest``."""

    def __init__(self, limits: Limits = Limits(), clock: Any = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[Key, _Entry] = {}
        self._latest: dict[Key, dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self._client: aiohttp.ClientSession | None = None

    # --- called from reconcile threads -------------------------------------------------

    def want(self, key: Key, address: str | None, source: str = "spark") -> None:
        """Follow ``key``'s driver at ``address`` (a pass calls this while the run runs).

        ``source``: ``"spark"`` (Spark's REST API at the UI) or ``"stream"`` (a
        StreamCopy driver's ``/progress``)."""
        if not address:
            return
        if source not in SOURCES:
            raise ValueError(f"source is one of {SOURCES}, got {source!r}")
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.address != address or entry.source != source:
                self._entries[key] = _Entry(address, now, source)
            else:
                entry.wanted_at = now

    def forget(self, key: Key) -> None:
        with self._lock:
            self._entries.pop(key, None)
            self._latest.pop(key, None)

    def latest(self, key: Key) -> dict[str, Any] | None:
        with self._lock:
            value = self._latest.get(key)
            return dict(value) if value is not None else None

    def wanted(self) -> dict[Key, str]:
        with self._lock:
            return {k: e.address for k, e in self._entries.items()}

    # --- on the event loop -------------------------------------------------------------

    async def poll_once(self, now: float | None = None) -> int:
        """Poll every application that is due; returns how many were polled."""
        now = self._clock() if now is None else now
        with self._lock:
            for key in [k for k, e in self._entries.items() if now - e.wanted_at > self.limits.expire]:
                del self._entries[key]
                self._latest.pop(key, None)
            due = [(k, e) for k, e in self._entries.items() if not e.busy and e.next_at <= now]
            for _, entry in due:
                entry.busy = True
        if not due:
            return 0
        if self._client is None or self._client.closed:
            self._client = session(self.limits)
        gate = asyncio.Semaphore(self.limits.concurrency)

        async def one(key: Key, entry: _Entry) -> None:
            async with gate:
                got = await fetch(entry.address, self._client, self.limits, entry.source)
            with self._lock:
                entry.busy = False
                if got.progress is not None:
                    entry.failures = 0
                    entry.next_at = now + self.limits.interval
                    if self._entries.get(key) is entry:
                        self._latest[key] = got.progress
                elif got.cheap:
                    entry.next_at = now + self.limits.interval
                else:
                    entry.next_at = now + self.limits.backoff[min(entry.failures, len(self.limits.backoff) - 1)]
                    entry.failures += 1
                    entry.errors = (entry.errors + [str(got.error)])[-5:]
                    log.debug("no progress from %s (%s): %s", key, entry.address, got.error)

        await asyncio.gather(*(one(k, e) for k, e in due))
        return len(due)

    async def run(self, tick: float = 1.0) -> None:
        while True:
            try:
                await self.poll_once()
            except Exception as e:  # noqa: BLE001 - the poller outlives any bad answer
                log.warning("progress poller: %s", e)
            await asyncio.sleep(tick)

    def start(self) -> None:
        """Start polling on the running event loop (once)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._client is not None:
            await self._client.close()
            self._client = None


POLLER = Poller()
