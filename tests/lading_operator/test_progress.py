"""Progress from Spark's REST API: a real Spark UI, a well-behaved stand-in, and hostile driver UIs
(redirects, endless and dripping bodies, truncated answers) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lading_operator import progress

JOBS = [{"numCompletedTasks": 3, "numTasks": 4}, {"numCompletedTasks": 2, "numTasks": 2}]
STAGES = [{"outputRecords": 10, "outputBytes": 100}, {"outputRecords": 5, "outputBytes": 50}]
# Small limits keep the hostile cases quick; the guard only catches a fetch that never returns.
LIMITS = progress.Limits(connect=1.0, deadline=1.5, max_bytes=64 * 1024)
GUARD = 30.0


class UI:
    """A driver UI on 127.0.0.1 whose every answer ``behave(handler)`` writes; counts requests."""

    def __init__(self, behave: Callable[[BaseHTTPRequestHandler], None]) -> None:
        self.requests: list[str] = []
        self.closed = threading.Event()   # a handler saw the client go away
        ui = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                ui.requests.append(self.path)
                try:
                    behave(self)
                except (BrokenPipeError, ConnectionResetError):
                    ui.closed.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> UI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def spark_rest(handler: BaseHTTPRequestHandler) -> None:
    path = handler.path.rstrip("/")
    body = {"/api/v1/applications": [{"id": "app-1"}], "/api/v1/applications/app-1/jobs": JOBS,
            "/api/v1/applications/app-1/stages": STAGES}.get(path)
    data = json.dumps(body).encode()
    handler.send_response(200 if body is not None else 404)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def fetch(address: str, limits: progress.Limits = LIMITS) -> progress.Fetched:
    return asyncio.run(asyncio.wait_for(progress.fetch(address, limits=limits), GUARD))


@pytest.fixture
def good() -> Iterator[UI]:
    with UI(spark_rest) as ui:
        yield ui


def test_summarize() -> None:
    assert progress.summarize(JOBS, STAGES) == {"tasksDone": 5, "tasksTotal": 6, "rows": 15, "bytes": 150}
    assert progress.summarize([], [{"inputRecords": 9, "inputBytes": 90}])["rows"] == 9


def test_fetch_reads_jobs_and_stages(good: UI) -> None:
    got = fetch(good.address)
    assert got == progress.Fetched({"tasksDone": 5, "tasksTotal": 6, "rows": 15, "bytes": 150})
    assert good.requests == ["/api/v1/applications", "/api/v1/applications/app-1/jobs",
                             "/api/v1/applications/app-1/stages"]


def test_unreachable_or_odd_addresses_give_no_progress() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused = fetch(f"127.0.0.1:{port}")
    assert refused.progress is None and refused.cheap  # a UI not up yet: retried without backoff
    assert "not an http(s) address" in str(fetch("file:///etc/passwd").error)


def test_redirects_are_refused_and_never_followed(good: UI) -> None:
    def redirect(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(302)
        handler.send_header("Location", f"http://{good.address}/api/v1/applications")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    with UI(redirect) as ui:
        got = fetch(ui.address)
    assert got.progress is None and "redirect refused: 302" in str(got.error)
    assert good.requests == []  # the operator never asked the redirect's target anything


def test_an_endless_body_stops_at_the_byte_cap() -> None:
    def endless(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()  # no Content-Length: the body ends when the connection does
        chunk = b"[" + b"1," * 32 * 1024
        while True:
            handler.wfile.write(chunk)

    with UI(endless) as ui:
        got = fetch(ui.address)
        assert got.progress is None and f"over {LIMITS.max_bytes} bytes" in str(got.error)
        assert ui.closed.wait(GUARD)  # the operator hung up; the server's writes failed


def test_a_declared_huge_body_is_refused_before_reading() -> None:
    def huge(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(10**9))
        handler.end_headers()
        handler.wfile.write(b"[")

    with UI(huge) as ui:
        got = fetch(ui.address)
    assert got.progress is None and f"1000000000 bytes is over {LIMITS.max_bytes}" in str(got.error)


@pytest.mark.parametrize("where", ["body", "headers"])
def test_a_dripping_answer_ends_at_the_deadline(where: str) -> None:
    def drip(handler: BaseHTTPRequestHandler) -> None:
        if where == "body":
            handler.send_response(200)
            handler.send_header("Content-Length", "1000")
            handler.end_headers()
            piece = b" "
        else:
            handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
            piece = b"a"
        handler.wfile.flush()
        while True:  # a byte at a time, each well within any read timeout
            handler.wfile.write(piece)
            handler.wfile.flush()
            time.sleep(0.05)

    with UI(drip) as ui:
        got = fetch(ui.address)
    assert got.progress is None and got.error == f"no complete answer within {LIMITS.deadline:g}s"
    assert not got.cheap


def test_a_truncated_body_is_caught() -> None:
    def truncated(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        handler.wfile.write(b'[{"id": "ap')  # then the connection closes (http.client's IncompleteRead)
        handler.close_connection = True

    with UI(truncated) as ui:
        got = fetch(ui.address)
    assert got.progress is None and got.error


@pytest.mark.parametrize("body", [b"<html>not json</html>", b'{"id": 1}', b"[]", b'[{"no": "id"}]'])
def test_wrong_answers_give_no_progress(body: bytes) -> None:
    def wrong(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    with UI(wrong) as ui:
        got = fetch(ui.address)
    assert got.progress is None and got.error


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_poller_keeps_the_latest_and_backs_off_after_costly_failures(good: UI) -> None:
    clock = Clock()
    poller = progress.Poller(progress.Limits(connect=1.0, deadline=0.5), clock=clock)

    def drip(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        while True:
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.05)

    async def scenario(slow: UI) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            refused = f"127.0.0.1:{s.getsockname()[1]}"  # a driver whose UI is not up yet
        poller.want(("ns", "refused"), refused)
        poller.want(("ns", "slow"), slow.address)
        poller.want(("ns", "good"), good.address)
        assert await poller.poll_once() == 3
        assert poller.latest(("ns", "good")) == {"tasksDone": 5, "tasksTotal": 6, "rows": 15, "bytes": 150}
        assert poller.latest(("ns", "slow")) is None and poller.latest(("ns", "refused")) is None
        # Nothing is due before its time. The good and the refused one come back after the
        # interval; the slow one only after its backoff, which doubles.
        assert await poller.poll_once(clock.now + 1) == 0
        assert poller.limits.interval == poller.limits.backoff[0]
        assert await poller.poll_once(clock.now + poller.limits.interval) == 3
        clock.now += poller.limits.interval
        assert await poller.poll_once(clock.now + poller.limits.interval) == 2  # not the slow one
        assert await poller.poll_once(clock.now + poller.limits.backoff[1]) == 3
        # What no pass asks for any more is forgotten.
        clock.now += poller.limits.expire + 1
        assert await poller.poll_once() == 0
        assert poller.latest(("ns", "good")) is None and poller.wanted() == {}
        await poller.stop()

    with UI(drip) as slow:
        asyncio.run(asyncio.wait_for(scenario(slow), GUARD))
        assert len(slow.requests) == 3
    assert len(good.requests) == 4 * 3  # four polls of three requests each


def test_forget_drops_an_application() -> None:
    poller = progress.Poller()
    poller.want(("ns", "a"), "127.0.0.1:1")
    poller.want(("ns", "b"), None)  # no UI address yet: nothing to poll
    assert poller.wanted() == {("ns", "a"): "127.0.0.1:1"}
    poller.forget(("ns", "a"))
    assert poller.wanted() == {}


@pytest.mark.spark
def test_fetch_from_a_live_spark_ui(spark) -> None:  # type: ignore[no-untyped-def]
    url = spark.sparkContext.uiWebUrl
    if not url:
        pytest.skip("the shared session runs without a web UI")
    spark.range(0, 1000, numPartitions=2).selectExpr("sum(id)").collect()
    deadline = time.monotonic() + 90
    current = fetch(url, progress.Limits()).progress
    while current is None and time.monotonic() < deadline:  # the UI's REST API starts slowly
        current = fetch(url, progress.Limits()).progress
    assert current is not None
    assert current["tasksTotal"] >= 2 and current["tasksDone"] >= 2
    assert current["tasksDone"] <= current["tasksTotal"]


# --- a StreamCopy driver's own progress document ---------------------------------------------

STREAM_DOC = {"kind": "StreamProgress", "runId": "r1", "state": "running", "source": "kafka", "rowsTotal": 7,
              "batches": 2, "lag": {"total": 3, "partitions": {"t:0": 3}}, "offsets": {"t:0": 7}}


def stream_fetch(address: str, limits: progress.Limits = LIMITS) -> progress.Fetched:
    return asyncio.run(asyncio.wait_for(progress.fetch(address, limits=limits, source="stream"), GUARD))


def answer(body: bytes, status: int = 200) -> Callable[[BaseHTTPRequestHandler], None]:
    def behave(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return behave


def test_a_stream_driver_is_asked_once_for_its_progress_document() -> None:
    with UI(answer(json.dumps(STREAM_DOC).encode())) as ui:
        got = stream_fetch(f"http://{ui.address}")
    assert got.error is None and got.progress is not None
    fetched_at = got.progress.pop("fetchedAt")
    assert got.progress == STREAM_DOC and fetched_at.endswith("Z")
    assert ui.requests == ["/progress"]


def test_the_real_driver_progress_server_is_read(progress_server: tuple[Any, int]) -> None:
    doc, port = progress_server
    doc.update(state="running", rowsTotal=42, batches=3, lag={"total": 1, "partitions": {"t:0": 1}})
    got = stream_fetch(f"http://127.0.0.1:{port}")
    assert got.progress is not None and got.progress["rowsTotal"] == 42 and got.progress["runId"] == "run-9"


@pytest.fixture
def progress_server() -> Iterator[tuple[Any, int]]:
    from lading_jobs.stream.progress import Progress, ProgressServer

    doc = Progress("run-9", "kafka")
    server = ProgressServer(doc, "127.0.0.1", 0)
    yield doc, server.port
    server.close()


@pytest.mark.parametrize("body", [b"<html/>", b"[]", b'{"kind": "StreamProgress"}',
                                  json.dumps({**STREAM_DOC, "state": "exploding"}).encode(),
                                  json.dumps({**STREAM_DOC, "rowsTotal": -1}).encode(),
                                  json.dumps({**STREAM_DOC, "kind": "Other"}).encode()])
def test_a_document_that_is_not_stream_progress_gives_none(body: bytes) -> None:
    with UI(answer(body)) as ui:
        got = stream_fetch(ui.address)
    assert got.progress is None and got.error and not got.cheap  # costly: backed off


def test_a_stream_driver_gets_the_same_hostile_limits(good: UI) -> None:
    def redirect(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(307)
        handler.send_header("Location", f"http://{good.address}/progress")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def endless(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.end_headers()
        while True:
            handler.wfile.write(b'{"kind": "StreamProgress", ' + b" " * 32 * 1024)

    with UI(redirect) as ui:
        assert "redirect refused: 307" in str(stream_fetch(ui.address).error)
    assert good.requests == []
    with UI(endless) as ui:
        assert f"over {LIMITS.max_bytes} bytes" in str(stream_fetch(ui.address).error)


def test_the_poller_follows_a_stream_at_its_progress_endpoint(good: UI) -> None:
    poller = progress.Poller(LIMITS)

    async def scenario(stream: UI) -> None:
        poller.want(("ns", "stream"), f"http://{stream.address}", "stream")
        poller.want(("ns", "copy"), good.address)
        assert await poller.poll_once() == 2
        latest = poller.latest(("ns", "stream"))
        assert latest is not None and latest["rowsTotal"] == 7 and "fetchedAt" in latest
        assert poller.latest(("ns", "copy")) == {"tasksDone": 5, "tasksTotal": 6, "rows": 15, "bytes": 150}
        await poller.stop()

    with UI(answer(json.dumps(STREAM_DOC).encode())) as stream:
        asyncio.run(asyncio.wait_for(scenario(stream), GUARD))
        assert stream.requests == ["/progress"]
    with pytest.raises(ValueError, match="source is one of"):
        poller.want(("ns", "x"), "127.0.0.1:1", "ftp")


def test_security_md_lists_the_pollers_connection_and_its_limits() -> None:
    """docs/security.md (Network) lists the poller's connection to driver UIs, with the limits the
    poller really has."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    network = doc[doc.index("## Network"):]
    network = network[:network.index("\n## ", 4)]
    paragraph = re.sub(r"\s+", " ", network[network.index("**progress poller**"):])
    limits = progress.Limits()
    assert "no credentials" in paragraph and "no redirect" in paragraph
    assert "| out | each running Spark driver's web UI | `status.driverInfo.webUIAddress`" in network
    assert f"after {limits.connect:g} s and a whole poll after {limits.deadline:g} s" in paragraph
    assert f"at most {limits.max_bytes // 2**20} MiB per answer" in paragraph
    assert f"(up to {max(limits.backoff) / 60:g} minutes)" in paragraph
    assert f"at most {limits.concurrency} drivers at once" in paragraph
    assert "| operator pod | Spark driver pods (job namespaces) | 4040" in network
