"""No message a run emits carries the value of a credential the pod holds.

Whatever reaches a message (an error a query raised, an exception text, a log
line), the value of every secret in this process's environment is replaced by
``[redacted]`` before it leaves: in the result (hence the termination message,
``status.response`` and Events), and, through :class:`OutputFilter`, in
everything this process and its children (the JVM, Python workers) write to
stdout and stderr, i.e. the driver's log.

Which values are secret (:func:`secret_values`):

- every ``AWS_*`` variable except those that only say where or how to reach AWS
  (region, endpoints, role ARN, token *file* paths...), plus the content of the
  web-identity and container-credential token files;
- the files of a Secret mounted as a directory (a StreamCopy's Kafka
  credentials, ``$LADING_KAFKA_PROPERTIES_DIR``), and the password inside a
  ``sasl.jaas.config``;
- any variable whose name says it is one (``SECRET``, ``TOKEN``, ``PASSWORD``,
  ``CREDENTIAL``, ``PRIVATE``, ``API_KEY``, ``ACCESS_KEY``, ...);
- inside a Kubernetes pod (``KUBERNETES_SERVICE_HOST`` is set), every variable
  not known to be public (Spark's, the image's, service links...): the keys of
  the Secret the resource names arrive as env with names we cannot know.

Values shorter than :data:`MIN_LENGTH` characters are left alone: they would
match ordinary words and numbers in every message. Each value is also matched in
its JSON-escaped and percent-encoded forms, and each line of a multi-line value
on its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

REDACTED = "[redacted]"
MIN_LENGTH = 6
PUBLIC_AWS = frozenset({
    "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CA_BUNDLE", "AWS_STS_REGIONAL_ENDPOINTS",
    "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT", "AWS_DEFAULT_OUTPUT", "AWS_PROFILE", "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_EC2_METADATA_DISABLED",
    "AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT", "AWS_REQUEST_CHECKSUM_CALCULATION",
    "AWS_RESPONSE_CHECKSUM_VALIDATION", "AWS_SDK_UA_APP_ID", "AWS_EXECUTION_ENV",
})
TOKEN_FILES = ("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
# Secrets mounted as directories of files (one file per key): (variable naming the directory, its default).
SECRET_DIRS = (("LADING_KAFKA_PROPERTIES_DIR", "/etc/lading/kafka"),)
_JAAS_PASSWORD = re.compile(r'password\s*=\s*"([^"]*)"')
_SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSW|PASSPHRASE|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|AUTH|SASL|"
                          r"SIGNING|_KEY$|^KEY$", re.I)
_PATH_NAME = re.compile(r"_(FILE|PATH|DIR|HOME|URI|URL|ARN|REGION)$", re.I)
# In a pod: names that are not secrets (the image, Kubernetes, Spark and spark-operator set them).
_POD_PUBLIC = frozenset({
    "PATH", "HOME", "HOSTNAME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "SHLVL", "TERM", "LANG", "LANGUAGE",
    "TZ", "TMPDIR", "LD_LIBRARY_PATH", "LD_PRELOAD", "_", "JAVA_HOME", "VIRTUAL_ENV", "PIP_NO_CACHE_DIR",
    "PIP_DISABLE_PIP_VERSION_CHECK",
})
_POD_PUBLIC_PREFIXES = ("SPARK_", "PYSPARK_", "KUBERNETES_", "JAVA_", "JDK_", "PYTHON", "LADING_", "LC_",
                        "HADOOP_", "PIP_")
_SERVICE_LINK = re.compile(r"^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\d+_(TCP|UDP|SCTP)"
                           r"(_PROTO|_PORT|_ADDR)?)?)$")


def in_pod(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("KUBERNETES_SERVICE_HOST"))


def is_secret_name(name: str, environ: Mapping[str, str]) -> bool:
    """Whether the variable ``name`` holds a secret (see the module docstring)."""
    if name in PUBLIC_AWS or name.startswith("AWS_ENDPOINT_URL_"):
        return False
    if name.startswith("AWS_"):
        return True
    if _SECRET_NAME.search(name) and not _PATH_NAME.search(name):
        return True
    if not in_pod(environ):
        return False
    return not (name in _POD_PUBLIC or name.startswith(_POD_PUBLIC_PREFIXES) or _SERVICE_LINK.match(name))


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The secret values of ``environ`` (default: this process's), longest first."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k, env)}
    for name in TOKEN_FILES:
        path = env.get(name)
        if path:
            with contextlib.suppress(OSError, UnicodeDecodeError), open(path) as f:
                values.add(f.read().strip())
    for name, default in SECRET_DIRS:
        values.update(_directory_values(env.get(name) or default))
    values.update(m for v in list(values) for m in _JAAS_PASSWORD.findall(v))
    out: set[str] = set()
    for value in values:
        for candidate in (value, *value.splitlines()):
            candidate = candidate.strip()
            if len(candidate) >= MIN_LENGTH:
                out.update({candidate, json.dumps(candidate)[1:-1], quote(candidate, safe="")})
    return sorted(out, key=len, reverse=True)


def _directory_values(directory: str) -> set[str]:
    """The contents of the files of a mounted Secret (one file per key; Kubernetes' ``..data`` skipped)."""
    out: set[str] = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            if entry.name.startswith(".") or not entry.is_file():
                continue
            with contextlib.suppress(OSError, UnicodeDecodeError), open(entry.path) as f:
                out.add(f.read(65536).strip())
    return out


class Scrubber:
    """Replaces known secret values in text, bytes and JSON-like results."""

    def __init__(self, values: Iterable[str]) -> None:
        self.values = sorted({v for v in values if v}, key=len, reverse=True)
        self._text = re.compile("|".join(map(re.escape, self.values))) if self.values else None
        self._bytes = (re.compile(b"|".join(re.escape(v.encode()) for v in self.values))
                       if self.values else None)
        self.longest = max((len(v.encode()) for v in self.values), default=0)

    def text(self, value: str) -> str:
        return self._text.sub(REDACTED, value) if self._text is not None else value

    def data(self, value: bytes) -> bytes:
        return self._bytes.sub(REDACTED.encode(), value) if self._bytes is not None else value

    def result(self, value: Any) -> Any:
        """``value`` with every string in it (keys included) scrubbed."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.result(k): self.result(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.result(v) for v in value]
        return value


_current: Scrubber | None = None
_lock = threading.Lock()


def current() -> Scrubber:
    """The scrubber for this process's environment (read once)."""
    global _current
    with _lock:
        if _current is None:
            _current = Scrubber(secret_values())
        return _current


def reset() -> None:
    """Read the environment again at the next :func:`current` (tests change it)."""
    global _current
    with _lock:
        _current = None


def text(value: str) -> str:
    return current().text(value)


def result(value: dict[str, Any]) -> dict[str, Any]:
    return dict(current().result(value))


class OutputFilter:
    """Sends file descriptors 1 and 2 through the scrubber, for this process and every child it starts.

    Each descriptor is replaced by a pipe; a thread reads it, scrubs complete
    lines (``\\n`` or ``\\r``) and writes them to the original descriptor. A
    partial line waits for its end (or is written, minus a tail as long as the
    longest secret, once it passes 64 KiB). ``flush()`` waits, for a bounded
    time, until what was written so far is out.
    """

    CHUNK = 65536

    def __init__(self, scrubber: Scrubber | None = None) -> None:
        self.scrubber = scrubber or current()
        self._saved: dict[int, int] = {}
        self._pipes: dict[int, int] = {}
        self._pending_bytes: dict[int, bytes] = {}
        self._marks: dict[int, list[tuple[bytes, threading.Event]]] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> OutputFilter:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for fd in (1, 2):
            self._saved[fd] = os.dup(fd)
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            self._pipes[fd] = read_end
            self._pending_bytes[fd] = b""
            self._marks[fd] = []
            threading.Thread(target=self._pump, args=(fd,), name=f"lading-scrub-{fd}", daemon=True).start()
        return self

    def _pump(self, fd: int) -> None:
        source, target = self._pipes[fd], self._saved[fd]
        while True:
            try:
                chunk = os.read(source, self.CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                break
            with self._lock:
                pending = self._pending_bytes[fd] + chunk
                reached = []
                for mark in list(self._marks[fd]):
                    at = pending.find(mark[0])
                    if at >= 0:  # everything before the mark is in hand: write it, then wake flush
                        pending = pending[:at] + pending[at + len(mark[0]):]
                        self._marks[fd].remove(mark)
                        reached.append(mark[1])
                cut = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1
                if cut == 0 and len(pending) > self.CHUNK:
                    cut = len(pending) - max(self.scrubber.longest, _MARK_LENGTH)
                if cut > 0:
                    self._write(target, self.scrubber.data(pending[:cut]))
                    pending = pending[cut:]
                self._pending_bytes[fd] = pending
            for event in reached:
                event.set()
        with self._lock:
            self._write(target, self.scrubber.data(self._pending_bytes[fd]))
            self._pending_bytes[fd] = b""
        for end in (source, target):
            with contextlib.suppress(OSError):
                os.close(end)

    @staticmethod
    def _write(fd: int, data: bytes) -> None:
        with contextlib.suppress(OSError):
            while data:
                data = data[os.write(fd, data):]

    def flush(self, timeout: float = 2.0) -> None:
        """Wait until everything written so far has passed the filter (at most ``timeout`` seconds),
        then write out a last partial line too.

        An empty pipe is not enough (the pump may hold a chunk it has read but not written yet):
        a unique mark goes down each pipe behind what was written, and the pump, which reads in
        order, reports when it has written everything before it."""
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        waiting = []
        for fd in self._pipes:
            mark = (_new_mark(), threading.Event())
            with self._lock:
                self._marks[fd].append(mark)
            try:
                os.write(fd, mark[0])  # shorter than PIPE_BUF: never interleaved with others' writes
            except OSError:
                with self._lock:
                    self._marks[fd].remove(mark)
                continue
            waiting.append(mark[1])
        deadline = time.monotonic() + timeout
        for event in waiting:
            event.wait(max(0.0, deadline - time.monotonic()))
        with self._lock:  # what the pump holds now is a partial line
            for fd, pending in self._pending_bytes.items():
                self._write(self._saved[fd], self.scrubber.data(pending))
                self._pending_bytes[fd] = b""

    def __exit__(self, *_: Any) -> None:
        """Restore 1 and 2. Children still writing (a JVM shutting down) keep the pipe, and the
        pump keeps scrubbing it until they close it; then it closes its descriptors itself.
        The run's last lines (its result) must reach the log even on a loaded node: wait up to 10 s."""
        self.flush(timeout=10.0)
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)


def _new_mark() -> bytes:
    """A flush mark: unique, no line end, never part of real output."""
    return b"\0lading-flush-" + uuid.uuid4().hex.encode() + b"\0"


_MARK_LENGTH = len(_new_mark())

_filter: OutputFilter | None = None


@contextlib.contextmanager
def protected_output() -> Iterator[OutputFilter]:
    """Scrub this process's stdout and stderr (and its children's) for the duration."""
    global _filter
    with OutputFilter() as active:
        _filter = active
        try:
            yield active
        finally:
            _filter = None


def flush_output(timeout: float = 2.0) -> None:
    """Before ``os._exit``: let what was written pass the filter, if one is active."""
    active = _filter
    if active is not None:
        active.flush(timeout)
