"""The retry policy alone (no server): what is transient, the backoff's bounds, attempts and deadline."""

from __future__ import annotations

import http.client
import random

import botocore.exceptions
import pytest
import urllib3.exceptions

from lading_jobs import retry


def client_error(status: int, code: str) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")


@pytest.mark.parametrize(("error", "words"), [
    (client_error(503, "ServiceUnavailable"), "server error (503 ServiceUnavailable)"),
    (client_error(500, "InternalError"), "server error (500 InternalError)"),
    (client_error(503, "SlowDown"), "throttling requests (503 SlowDown)"),
    (client_error(429, "TooManyRequests"), "throttling requests (429 TooManyRequests)"),
    (client_error(400, "RequestTimeout"), "server error (400 RequestTimeout)"),
    (botocore.exceptions.ConnectionClosedError(endpoint_url="http://s3"), "connection was reset"),
    (botocore.exceptions.EndpointConnectionError(endpoint_url="http://s3"), "could not be reached"),
    (botocore.exceptions.ConnectTimeoutError(endpoint_url="http://s3"), "could not be reached"),
    (botocore.exceptions.ReadTimeoutError(endpoint_url="http://s3"), "did not answer in time"),
    (botocore.exceptions.ResponseStreamingError(error="Connection broken"), "body was cut short"),
    (botocore.exceptions.IncompleteReadError(actual_bytes=1, expected_bytes=2), "body was cut short"),
    (http.client.IncompleteRead(b"x", 2), "body was cut short"),
    (retry.ShortBody("1 bytes of 2"), "body was cut short"),
    (urllib3.exceptions.ProtocolError("Connection aborted."), "connection broke"),
    (ConnectionResetError(104, "reset"), "connection was reset"),
])
def test_transient_faults(error: BaseException, words: str) -> None:
    assert words in (retry.fault(error) or "")


@pytest.mark.parametrize("error", [
    client_error(403, "AccessDenied"), client_error(404, "NoSuchKey"), client_error(412, "PreconditionFailed"),
    client_error(400, "InvalidArgument"), botocore.exceptions.SSLError(endpoint_url="https://s3", error="cert"),
    ValueError("a bug"), FileNotFoundError("x"),
])
def test_everything_else_is_not_retried(error: BaseException) -> None:
    assert retry.fault(error) is None


def test_a_write_may_have_landed_unless_no_connection_was_made() -> None:
    assert not retry.landed_maybe(botocore.exceptions.EndpointConnectionError(endpoint_url="http://s3"))
    assert not retry.landed_maybe(botocore.exceptions.ConnectTimeoutError(endpoint_url="http://s3"))
    assert retry.landed_maybe(client_error(503, "SlowDown"))  # a proxy may answer it after the store acted
    assert retry.landed_maybe(client_error(500, "InternalError"))
    assert retry.landed_maybe(botocore.exceptions.ConnectionClosedError(endpoint_url="http://s3"))
    assert retry.landed_maybe(botocore.exceptions.ReadTimeoutError(endpoint_url="http://s3"))


def test_full_jitter_stays_under_the_capped_exponential() -> None:
    policy = retry.Policy(base=0.2, cap=3.0)
    rng = random.Random(1)
    for attempt in range(1, 12):
        waits = [policy.backoff(attempt, rng) for _ in range(200)]
        ceiling = min(3.0, 0.2 * 2 ** (attempt - 1))
        assert all(0 <= w <= ceiling for w in waits)
        assert max(waits) > ceiling * 0.8  # spread over the whole range, not a fixed wait


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_attempts_are_bounded_and_the_last_fault_is_named() -> None:
    clock, calls = Clock(), []

    def fail() -> None:
        calls.append(1)
        raise client_error(503, "SlowDown")

    with pytest.raises(retry.GaveUp) as caught:
        retry.call(fail, retry.Policy(attempts=4), sleep=clock.sleep, clock=clock)
    assert len(calls) == 4 and len(clock.slept) == 3
    assert caught.value.attempts == 4 and "throttling" in caught.value.fault
    assert isinstance(caught.value.__cause__, botocore.exceptions.ClientError)


def test_the_deadline_stops_retrying_before_a_wait_would_pass_it() -> None:
    clock, calls = Clock(), []

    def slow_fail() -> None:
        calls.append(1)
        clock.now += 4.0  # each attempt takes 4 s (a timeout)
        raise botocore.exceptions.ReadTimeoutError(endpoint_url="http://s3")

    with pytest.raises(retry.GaveUp) as caught:
        retry.call(slow_fail, retry.Policy(attempts=100, deadline=10.0, base=0.5, cap=1.0),
                   sleep=clock.sleep, clock=clock)
    assert len(calls) <= 3 and caught.value.elapsed < 10.0 + 4.0
    assert clock.now <= retry.Policy(deadline=10.0, connect_timeout=4.0, read_timeout=4.0).longest()


def test_success_after_faults_returns_and_other_errors_pass_through_at_once() -> None:
    clock, faults = Clock(), iter([ConnectionResetError(104, "reset"), client_error(500, "InternalError")])
    seen: list[int] = []

    def flaky() -> str:
        error = next(faults, None)
        if error is not None:
            raise error
        return "ok"

    assert retry.call(flaky, on_fault=lambda e, n: seen.append(n), sleep=clock.sleep, clock=clock) == "ok"
    assert seen == [1, 2]
    with pytest.raises(KeyError):
        retry.call(lambda: {}["x"], sleep=clock.sleep, clock=clock)


def test_a_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="attempts ≥ 1"):
        retry.Policy(attempts=0)
    with pytest.raises(ValueError, match="timeouts > 0"):
        retry.Policy(read_timeout=0)
