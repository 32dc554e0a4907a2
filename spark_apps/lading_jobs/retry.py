"""One retry policy for every S3 call: which faults are transient, how long to wait, when to stop.

A call (one S3 request, and for a GET the reading of its body too) is tried again after a
transient fault — a 5xx answer, 429 / ``SlowDown``, a connection refused, reset or timed
out, a body cut short — with exponential backoff and full jitter (a random wait between 0
and ``min(cap, base · 2^(n-1))`` before attempt n+1), at most ``attempts`` times and no
later than ``deadline`` seconds after the first attempt began. Any other error (403, 404,
412, a bad request) is the caller's at once.

botocore's own retries are turned off (``total_max_attempts=1`` in ``S3Storage``): this is
the only layer that retries, so attempts never multiply. One call makes at most
``attempts`` requests (6 by default); a GET whose body breaks is one of them, not a
further loop around botocore's.

When the policy gives up, :class:`GaveUp` says what the last fault was, how many attempts
were made and over how long; ``S3Storage`` turns it into a ``StorageError`` naming the
object and the operation.
"""

from __future__ import annotations

import http.client
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import botocore.exceptions

T = TypeVar("T")

THROTTLED = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded",
                       "TooManyRequests", "TooManyRequestsException", "RequestThrottled",
                       "RequestThrottledException", "ProvisionedThroughputExceededException"})
"""Error codes that mean "too fast, come back later" (whatever the status)."""
SERVER = frozenset({"InternalError", "ServiceUnavailable", "RequestTimeout", "RequestTimeoutException",
                    "BadGateway", "GatewayTimeout"})
"""Error codes of a server that failed this once."""


@dataclass(frozen=True)
class Policy:
    """How many attempts, how long in all, the backoff's base and cap, and how long one attempt
    may wait to connect and for the next bytes of an answer (seconds)."""

    attempts: int = 6
    deadline: float = 120.0
    base: float = 0.2
    cap: float = 10.0
    connect_timeout: float = 10.0
    read_timeout: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.deadline <= 0 or self.base < 0 or self.cap < self.base \
                or self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise ValueError(f"a retry policy needs attempts ≥ 1, deadline > 0, 0 ≤ base ≤ cap and "
                             f"timeouts > 0; got {self}")

    def longest(self) -> float:
        """The longest one call can take: the deadline, plus the last attempt's connect and read
        time-outs (a deadline is checked between attempts; an attempt is bounded by its time-outs,
        per connection and per read of a body, so a body trickling in can hold it longer)."""
        return self.deadline + self.connect_timeout + self.read_timeout


    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """The wait after failed attempt ``attempt`` (1-based): full jitter over the capped exponential."""
        return (rng or random).uniform(0.0, min(self.cap, self.base * 2 ** (attempt - 1)))


DEFAULT = Policy()


class GaveUp(Exception):
    """The policy stopped retrying a transient fault: ``fault`` says which, ``attempts`` and
    ``elapsed`` how hard it tried. ``__cause__`` is the last error."""

    def __init__(self, fault: str, attempts: int, elapsed: float) -> None:
        super().__init__(f"{fault}, {attempts} attempt{'s' if attempts != 1 else ''} in {elapsed:.1f} s")
        self.fault, self.attempts, self.elapsed = fault, attempts, elapsed


def fault(e: BaseException) -> str | None:
    """What transient fault ``e`` is, in a few words; ``None`` if it is not one (do not retry)."""
    if isinstance(e, botocore.exceptions.ClientError):
        error = e.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        label = " ".join(dict.fromkeys(x for x in (str(status) if status else "", code) if x))
        if code in THROTTLED or status == 429:
            return f"the store is throttling requests ({label})"
        if code in SERVER or status >= 500 or (code.isdigit() and int(code) >= 500):
            return f"the store answered a server error ({label})"
        return None
    if isinstance(e, Again):
        return f"the request must be sent again ({e})"
    if isinstance(e, PartlyFailed):
        return f"the store failed part of a batch ({e})"
    if isinstance(e, botocore.exceptions.ResponseStreamingError | botocore.exceptions.IncompleteReadError
                  | http.client.IncompleteRead | ShortBody):
        return f"the answer's body was cut short ({type(e).__name__})"
    if isinstance(e, botocore.exceptions.ReadTimeoutError):
        return f"the store did not answer in time ({type(e).__name__})"
    if isinstance(e, botocore.exceptions.SSLError):
        return None  # a certificate or TLS setting, not a passing fault
    if isinstance(e, botocore.exceptions.EndpointConnectionError | botocore.exceptions.ConnectTimeoutError):
        return f"the store could not be reached ({type(e).__name__})"
    if isinstance(e, botocore.exceptions.HTTPClientError | botocore.exceptions.ConnectionError):
        return f"the connection was reset ({type(e).__name__})"
    # urllib3 is looked up, not imported: a file:// job never loads it (compact/test_task_imports),
    # and an exception of urllib3's can only exist once something else imported it.
    u3 = sys.modules.get("urllib3.exceptions")
    if u3 is not None and isinstance(e, u3.ProtocolError | u3.ReadTimeoutError | u3.NewConnectionError):
        return f"the connection broke ({type(e).__name__})"
    if isinstance(e, ConnectionError | http.client.RemoteDisconnected):
        return f"the connection was reset ({type(e).__name__})"
    return None


def landed_maybe(e: BaseException) -> bool:
    """Whether the request that failed with the transient fault ``e`` may have been carried out by
    the store, its answer lost. Only a connection never made is sure not to have been: a 5xx or
    even a 429 may come from a proxy or balancer after the store acted, and deciding wrongly
    "not landed" is what loses a write's outcome."""
    return not isinstance(e, botocore.exceptions.EndpointConnectionError | botocore.exceptions.ConnectTimeoutError)


class Again(Exception):
    """An attempt whose outcome says "send it again" (a conditional create refused, yet its key
    empty): retried like a transient fault, counted against the same bounds."""


class PartlyFailed(Exception):
    """A batch the store carried out but for some items, each failed with a transient ``code``
    (DeleteObjects answers 200 and lists them): retried, for those items."""

    def __init__(self, code: str, what: str) -> None:
        super().__init__(f"{code}: {what}")
        self.code = code


class ShortBody(Exception):
    """A body shorter (or longer) than its ``Content-Length``: a broken answer, retried."""


def call(fn: Callable[[], T], policy: Policy = DEFAULT, *,
         on_fault: Callable[[BaseException, int], None] | None = None,
         sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> T:
    """``fn()``, tried again after each transient fault as ``policy`` allows; else :class:`GaveUp`.

    ``on_fault(error, attempt)`` runs after each transient fault that will be retried (before the
    wait): a caller whose request may have landed cleans up there."""
    start = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - classified just below; anything else re-raised as is
            what = fault(e)
            if what is None:
                raise
            elapsed = clock() - start
            wait = policy.backoff(attempt)
            if attempt >= policy.attempts or elapsed + wait >= policy.deadline:
                raise GaveUp(what, attempt, elapsed) from e
            if on_fault is not None:
                on_fault(e, attempt)
            sleep(wait)
