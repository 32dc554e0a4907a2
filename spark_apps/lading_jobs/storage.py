"""One small interface over object storage, chosen by URI scheme (``s3://``, ``file://``).

Every byte lading reads or writes goes through here: boto3 for S3 (listing,
multipart uploads, conditional writes), the local filesystem for ``file://``.
Uploads are two-phase so nothing partial is ever visible: ``begin_upload`` /
``upload_part`` leave a *pending* upload that only ``complete_upload`` makes
visible and ``abort_upload`` discards. For ``file://`` a pending upload is a file
in a staging directory beside the destination that completion renames into place.

Credentials come from the process environment (``AWS_ACCESS_KEY_ID``, ...) or the
pod's identity, never from a spec; ``S3Settings`` carries only the endpoint and
region, so it can be shipped to Spark executors. The endpoint is given to the S3
client alone (``endpoint_url``), never to STS, and one carrying credentials
(``http://user:pass@host``) is refused. The endpoint's name is resolved once and
checked (no link-local address), and the client dials only those checked addresses
(``lading_jobs.pinning``), so a later DNS answer cannot send it to the metadata service.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fnmatch
import functools
import hashlib
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse, urlsplit

import botocore.exceptions
import pyarrow as pa

from lading_jobs import localfs, retry
from lading_spec import localfiles
from lading_spec.uris import check_endpoint

if TYPE_CHECKING:
    from lading_jobs import pinning

STAGING_DIR = ".lading-staging"
SINGLE_PUT = "single-put"
"""The upload id of an object already written whole by ``put_pending`` (completing it is a no-op;
aborting it deletes it)."""
T = TypeVar("T")

NOT_BEGUN = ""
"""The upload id of an upload nothing was sent for yet (aborting it is a no-op)."""


@dataclass(frozen=True)
class S3Settings:
    """Where S3 is. Credentials are deliberately absent: the environment supplies them."""

    endpoint: str | None = None
    region: str | None = None

    def __post_init__(self) -> None:
        if self.endpoint is not None:
            check_endpoint(self.endpoint, "S3 endpoint")

    @classmethod
    def from_env(cls, endpoint: str | None = None, region: str | None = None) -> S3Settings:
        """The spec's endpoint, else ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL`` (each checked, naming its source)."""
        sources = [("connection.endpoint", endpoint),
                   *((name, os.environ.get(name)) for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"))]
        source, chosen = next(((n, v) for n, v in sources if v), ("", None))
        if chosen is not None:
            check_endpoint(chosen, source)
        return cls(
            endpoint=chosen,
            region=region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        )


@dataclass(frozen=True)
class ObjectInfo:
    uri: str
    size: int
    etag: str
    modified: float | None = field(default=None, compare=False)
    """Last modification, epoch seconds, where the listing says (retention ages objects by it)."""


@dataclass
class PendingUpload:
    """An upload that is written but not yet visible; plain data, so tasks can return it."""

    uri: str
    upload_id: str
    parts: list[dict[str, Any]] = field(default_factory=list)  # [{"PartNumber": n, "ETag": e}]
    initiated: float | None = None  # epoch seconds, from list_pending_uploads (not shipped in to_dict)

    def to_dict(self) -> dict[str, Any]:
        return {"uri": self.uri, "upload_id": self.upload_id, "parts": list(self.parts)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingUpload:
        return cls(uri=data["uri"], upload_id=data["upload_id"], parts=list(data["parts"]))


class StorageError(RuntimeError):
    """A storage call failed; the message names the URI and what to check (``uri``, where known:
    the object or prefix the failed call was about; ``fault``, when the retry policy gave up: the
    last transient fault and the attempts made)."""

    def __init__(self, message: str, *, uri: str | None = None, fault: str | None = None) -> None:
        super().__init__(message)
        self.uri, self.fault = uri, fault


class WriteUndecided(StorageError):
    """A write's answer was lost (a reset, a timeout, a 5xx) and reading back what is there could not
    tell whether it landed: it may still land. Nothing may be undone on the strength of it; a rerun of
    the same run (its intent, its nonce) decides."""


def undecided(error: BaseException) -> bool:
    """Whether a failed write may have landed (its answer lost): ``WriteUndecided``, or a cause that
    is a transient fault after which it may have (``retry.landed_maybe``: a dropped connection, a
    timeout, a 5xx, a throttle); not a definite refusal (403, 404, 400), nor a connection never made."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, WriteUndecided):
            return True
        if retry.fault(seen) is not None:
            return retry.landed_maybe(seen)
        if isinstance(seen, botocore.exceptions.ClientError):
            return False
        seen = seen.__cause__ or seen.__context__
    return False


class ObjectChanged(StorageError):
    """An object read with its listed ETag is no longer that version."""

    def __init__(self, uri: str, etag: str) -> None:
        super().__init__(f"{uri} changed after it was listed (listed ETag {etag}, now another version); "
                         "nothing of it was read: run again to read the new version", uri=uri)
        self.uri, self.etag = uri, etag


def split_s3(uri: str) -> tuple[str, str]:
    """Bucket and key of ``s3://bucket/key``, the key as written (see :func:`_path`)."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key.lstrip("/")


def join(prefix: str, *names: str) -> str:
    """``join("s3://b/p/", "x", "y.csv")`` → ``s3://b/p/x/y.csv``."""
    out = prefix
    for name in names:
        out = out.rstrip("/") + "/" + name.lstrip("/")
    return out


def has_glob(uri: str) -> bool:
    return any(c in uri for c in "*?[")


def glob_regex(glob: str) -> re.Pattern[str]:
    """A URI glob as a regular expression: ``*`` and ``?`` stay within one path segment, as
    in Spark's (Hadoop's) globs and the shell (``fnmatch`` let ``raw/*.csv`` match
    ``raw/sub/x.csv``); ``[abc]``, ``[!abc]`` and ``[a-z]`` are character classes."""
    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := glob.find("]", i + 2 if glob[i + 1:i + 2] in ("!", "]") else i + 1)) > 0:
            body = glob[i + 1:end]
            negate = body.startswith("!")
            body = body[1:] if negate else ("\\" + body if body.startswith("^") else body)
            out.append("[" + ("^/" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


class Storage:
    """Operations on one scheme; all paths are full URIs."""

    def describe(self, uri: str) -> str:
        """The store holding ``uri``, for messages (never a credential)."""
        return f"the store of {uri}"

    def list_objects(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object whose URI starts with ``prefix`` (recursively), in key order."""
        raise NotImplementedError

    def list_objects_after(self, prefix: str, start_after: str = "") -> Iterator[ObjectInfo]:
        """Objects under ``prefix`` whose URI sorts after ``start_after``, in key order, lazily
        (S3 starts the listing there: the cost is what follows, not what precedes)."""
        return (o for o in self.list_objects(prefix) if o.uri > start_after)

    def list_level(self, prefix: str) -> tuple[list[str], list[ObjectInfo]]:
        """One level under the directory ``prefix`` (ending in ``/``): the prefixes of its
        subdirectories (each ending in ``/``) and its own objects, both in key order. One
        request per page on S3 (``Delimiter='/'``): what lies deeper is not listed."""
        dirs: set[str] = set()
        files = []
        for o in self.list_objects(prefix):
            rest = o.uri[len(prefix):]
            if "/" in rest:
                dirs.add(prefix + rest.split("/", 1)[0] + "/")
            else:
                files.append(o)
        return sorted(dirs), files

    def list_matching(self, uri: str, pattern: str | None = None) -> list[ObjectInfo]:
        """Objects under a prefix or matching a glob (``s3://b/raw/*.csv``), in key order."""
        if has_glob(uri):
            cut = min(uri.index(c) for c in "*?[" if c in uri)
            base = uri[: uri.rfind("/", 0, cut) + 1]
            matches = glob_regex(uri).match
            found = [o for o in self.list_objects(base) if matches(o.uri)]
        else:
            prefix = uri if uri.endswith("/") else uri + "/"
            found = list(self.list_objects(prefix))
            if not found and not uri.endswith("/"):
                found = [o for o in self.list_objects(uri) if o.uri == uri]
        found = [o for o in found if STAGING_DIR not in o.uri]
        if pattern:
            found = [o for o in found if fnmatch.fnmatchcase(o.uri.rsplit("/", 1)[-1], pattern)
                     or fnmatch.fnmatchcase(o.uri, pattern)]
        return found

    def head(self, uri: str) -> ObjectInfo | None:
        raise NotImplementedError

    def read(self, uri: str, etag: str | None = None) -> bytes:
        """The object's bytes; with ``etag``, only if it is still that version (else ``ObjectChanged``)."""
        raise NotImplementedError

    def read_range(self, uri: str, start: int, end: int, etag: str | None = None) -> bytes:
        """Bytes ``[start, end)`` of the object (pinned to ``etag`` like ``read``)."""
        raise NotImplementedError

    def open_input(self, uri: str, size: int | None = None, etag: str | None = None) -> pa.NativeFile:
        """A random-access file for pyarrow readers (Parquet footers, row groups); with ``etag``
        every read is of that version, so a file rewritten meanwhile fails, never mixes."""
        info_size = size if size is not None else self._size(uri)
        return pa.PythonFile(_RangeReader(self, uri, info_size, etag), mode="r")

    def _size(self, uri: str) -> int:
        info = self.head(uri)
        if info is None:
            raise StorageError(f"{uri} does not exist")
        return info.size

    def put(self, uri: str, data: bytes) -> None:
        raise NotImplementedError

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        """Create ``uri`` only if nothing is there. ``True``: the object now holds ``data``, written by
        this call (also when the answer to the write was lost and a retry was refused because the
        first attempt had landed: the object is read back and recognised); ``False``: another
        writer's object is there. Raises ``WriteUndecided`` when the answer was lost and what is
        there cannot tell (nothing may be undone then), ``StorageError`` when the write was refused."""
        raise NotImplementedError

    def put_hint(self, uri: str, data: bytes) -> None:
        """Replace a small object that is only a hint (readers check what it names and look past
        it; a writer repairs it): atomically, but without waiting for it to be durable. A crash
        may leave it older, empty or missing. The default: ``put``."""
        self.put(uri, data)

    def delete(self, uris: Iterable[str]) -> None:
        raise NotImplementedError

    def delete_if_holds(self, uri: str, data: bytes) -> None:
        """Delete ``uri``, a key other runs may write (a destination's shared commit intent) and
        that held ``data`` when this run wrote or read it. A store whose answers can be lost
        overrides this so that a retry deletes only while the key still holds ``data``: the lost
        answer's delete may have landed, and another run written its own since. The default:
        ``delete``."""
        self.delete([uri])

    def begin_upload(self, uri: str) -> PendingUpload:
        raise NotImplementedError

    def upload_part(self, upload: PendingUpload, data: bytes) -> None:
        """Append ``data`` as the next part (every part but the last ≥ 5 MiB on S3)."""
        raise NotImplementedError

    def put_pending(self, uri: str, data: bytes) -> PendingUpload:
        """Write ``data`` whole as an upload still to complete (one request where the store allows:
        only for objects nobody lists before a commit names them, such as table parts)."""
        upload = self.begin_upload(uri)
        self.upload_part(upload, data)
        return upload

    def complete_upload(self, upload: PendingUpload) -> None:
        """Make the upload visible. A retried completion whose first attempt landed (the upload id is
        gone, the object there is the upload's) succeeds; ``WriteUndecided`` when that cannot be told."""
        raise NotImplementedError

    def abort_upload(self, upload: PendingUpload) -> None:
        raise NotImplementedError

    def list_pending_uploads(self, prefix: str) -> list[PendingUpload]:
        """Uploads begun under ``prefix`` and neither completed nor aborted."""
        raise NotImplementedError


class _RangeReader:
    """A read-only, seekable file over ``Storage.read_range`` (wrapped by ``pa.PythonFile``)."""

    def __init__(self, storage: Storage, uri: str, size: int, etag: str | None = None) -> None:
        self.storage, self.uri, self.size, self.pos, self.etag = storage, uri, size, 0, etag
        self.closed = False

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        data = self.storage.read_range(self.uri, self.pos, end, self.etag)
        self.pos = end
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def refuse_link_local(endpoint: str | None) -> None:
    """Refuse an endpoint whose name resolves to a link-local address, for a library that dials
    the endpoint itself (deltalake): lading's own S3 client checks and pins it (below), such a
    library resolves it again when it connects, which only the namespace's NetworkPolicy then
    bounds (docs/security.md)."""
    from lading_jobs import pinning

    _refuse_metadata_service(endpoint, pinning.Pins())


def _refuse_metadata_service(endpoint: str | None, pins: pinning.Pins) -> None:
    """Refuse an endpoint whose name resolves to a link-local address: the instance metadata
    service (the spec check refuses such addresses written out; a name is only known here).
    The checked answer is pinned in ``pins``: the client dials those addresses, never a later
    answer (``lading_jobs.pinning``)."""
    from lading_jobs import pinning

    host = urlsplit(endpoint).hostname if endpoint else None
    if not host:
        return
    try:
        pins.addresses(host)
    except pinning.LinkLocalAddress as e:
        raise StorageError(f"the S3 endpoint {endpoint} resolves to a link-local address (the cloud's instance "
                           "metadata service), never an S3 server: check connection.endpoint") from e
    except OSError:
        return  # unresolvable now: the first connection resolves and checks it (or fails naming the endpoint)


class S3Storage(Storage):
    """S3 through boto3. Every request goes through ``_call``, so through one retry policy
    (``lading_jobs.retry``; botocore's own retries are off, so attempts never multiply); a GET's
    body is read inside its attempt, so a body cut short is retried like a reset."""

    def __init__(self, settings: S3Settings | None = None, policy: retry.Policy = retry.DEFAULT) -> None:
        # boto3 (and pinning, with urllib3) are imported here, not with the module: they take most
        # of a Python worker's start-up imports (~0.7 s idle), which runs on file:// tables need not pay
        import boto3
        import botocore.config

        from lading_jobs import pinning

        self.settings = settings or S3Settings.from_env()
        self.policy = policy
        pins = pinning.Pins()
        _refuse_metadata_service(self.settings.endpoint, pins)
        self.client = boto3.session.Session().client(
            "s3",
            endpoint_url=self.settings.endpoint,
            region_name=self.settings.region,
            config=botocore.config.Config(
                retries={"total_max_attempts": 1, "mode": "standard"},  # lading_jobs.retry retries, alone
                connect_timeout=policy.connect_timeout,
                read_timeout=policy.read_timeout,
                s3={"addressing_style": "path"},
                max_pool_connections=32,
            ),
        )
        if self.settings.endpoint:  # a name the tenant chose: dial only its checked addresses
            pinning.pin_connections(self.client, pins)

    def describe(self, uri: str) -> str:
        bucket, _ = split_s3(uri)
        endpoint = self.settings.endpoint
        if endpoint:  # never show userinfo (a credential) even if an endpoint carried one
            parsed = urlparse(endpoint)
            endpoint = parsed._replace(netloc=parsed.netloc.rsplit("@", 1)[-1]).geturl()
        return f"the S3 store at {endpoint or 'AWS'} (bucket {bucket})"

    def _call(self, what: str, uri: str, fn: Any, *, on_fault: Callable[[BaseException, int], None] | None = None,
              **kwargs: Any) -> Any:
        """``fn(**kwargs)`` (one S3 request) under the retry policy; a failure as a ``StorageError``
        naming ``what`` was done to ``uri``, the fault and the fix."""
        return self._retried(what, uri, lambda: fn(**kwargs), on_fault=on_fault)

    def _retried(self, what: str, uri: str, attempt: Callable[[], T],
                 on_fault: Callable[[BaseException, int], None] | None = None) -> T:
        """``attempt()`` (one request and whatever reads its answer) under the retry policy."""
        try:
            return retry.call(attempt, self.policy, on_fault=on_fault)
        except retry.GaveUp as e:
            raise StorageError(self._gave_up(what, uri, e), uri=uri, fault=str(e)) from e.__cause__
        except botocore.exceptions.ClientError as e:
            code = _code(e)
            message = e.response.get("Error", {}).get("Message", "")
            hint = {
                "NoSuchBucket": "the bucket does not exist; create it or fix the URI",
                "AccessDenied": "the credentials lack permission; check the Secret named in connection.secretRef",
                "InvalidAccessKeyId": "the access key is unknown; check the Secret named in connection.secretRef",
                "SignatureDoesNotMatch": "the secret key is wrong; check the Secret named in connection.secretRef",
            }.get(code, "")
            raise StorageError(f"{what} {uri} failed: {code} {message}{'; ' + hint if hint else ''}", uri=uri) from e
        except botocore.exceptions.BotoCoreError as e:  # not transient (TLS, credentials missing, ...)
            raise StorageError(f"{what} {uri} failed: {e}", uri=uri) from e

    def _gave_up(self, what: str, uri: str, e: retry.GaveUp) -> str:
        """The message of a call the retry policy gave up on: operation, object, fault, what to do."""
        cause = e.__cause__
        if isinstance(cause, botocore.exceptions.EndpointConnectionError | botocore.exceptions.ConnectTimeoutError):
            todo = (f"cannot reach S3 at {self.describe(uri).removeprefix('the S3 store at ')}; check "
                    "connection.endpoint, the namespace's NetworkPolicies and egress, then run again")
        else:
            todo = (f"{self.describe(uri)} kept failing (overloaded, or the network drops connections); "
                    "run again when it is healthy")
        return (f"{what} {uri} failed after {e.attempts} attempt{'s' if e.attempts != 1 else ''} in "
                f"{e.elapsed:.1f} s: {e.fault}; {todo}")

    def _pages(self, what: str, uri: str, fn: Any, more: Callable[[dict[str, Any]], dict[str, Any] | None],
               **kwargs: Any) -> Iterator[dict[str, Any]]:
        """A listing's pages, each one request under the retry policy (a page that fails is asked
        for again from its own marker, not from the first page); ``more(page)`` gives the next
        page's markers, ``None`` after the last."""
        while True:
            page: dict[str, Any] = self._call(what, uri, fn, **kwargs)
            yield page
            after = more(page)
            if not after:
                return
            kwargs = {**kwargs, **after}

    def _objects(self, prefix: str, **kwargs: Any) -> Iterator[ObjectInfo]:
        bucket, key = split_s3(prefix)
        for page in self._pages("listing", prefix, self.client.list_objects_v2, _next_objects,
                                Bucket=bucket, Prefix=key, **kwargs):
            for obj in page.get("Contents", []):
                yield ObjectInfo(f"s3://{bucket}/{obj['Key']}", obj["Size"], obj["ETag"].strip('"'),
                                 _epoch(obj.get("LastModified")))

    def list_objects(self, prefix: str) -> Iterator[ObjectInfo]:
        return self._objects(prefix)

    def list_level(self, prefix: str) -> tuple[list[str], list[ObjectInfo]]:
        bucket, key = split_s3(prefix)
        dirs: list[str] = []
        files: list[ObjectInfo] = []
        for page in self._pages("listing", prefix, self.client.list_objects_v2, _next_objects,
                                Bucket=bucket, Prefix=key, Delimiter="/"):
            dirs += [f"s3://{bucket}/{p['Prefix']}" for p in page.get("CommonPrefixes", [])]
            files += [ObjectInfo(f"s3://{bucket}/{obj['Key']}", obj["Size"], obj["ETag"].strip('"'),
                                 _epoch(obj.get("LastModified"))) for obj in page.get("Contents", [])]
        return sorted(dirs), sorted(files, key=lambda o: o.uri)

    def list_objects_after(self, prefix: str, start_after: str = "") -> Iterator[ObjectInfo]:
        bucket, _ = split_s3(prefix)
        after = split_s3(start_after)[1] if start_after.startswith(f"s3://{bucket}/") else ""
        return self._objects(prefix, StartAfter=after)

    def head(self, uri: str) -> ObjectInfo | None:
        bucket, key = split_s3(uri)
        try:
            r = self._call("reading", uri, self.client.head_object, Bucket=bucket, Key=key)
        except StorageError as e:
            if _code(e.__cause__) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        modified = r.get("LastModified")
        return ObjectInfo(uri, r["ContentLength"], r["ETag"].strip('"'),
                          modified.timestamp() if modified is not None else None)

    def read(self, uri: str, etag: str | None = None) -> bytes:
        return self._get(uri, etag)

    def read_range(self, uri: str, start: int, end: int, etag: str | None = None) -> bytes:
        return self._get(uri, etag, Range=f"bytes={start}-{end - 1}")

    def _get(self, uri: str, etag: str | None, **extra: Any) -> bytes:
        """One GET, its body read within the same attempt: a body cut short (a reset mid-answer, fewer
        bytes than ``Content-Length``) is retried like any other transient fault."""
        bucket, key = split_s3(uri)
        if etag:
            extra["IfMatch"] = '"' + etag.strip('"') + '"'

        def attempt() -> bytes:
            r = self.client.get_object(Bucket=bucket, Key=key, **extra)
            body = r["Body"]
            try:
                data: bytes = body.read()
            finally:
                body.close()
            if "ContentLength" in r and len(data) != r["ContentLength"]:
                raise retry.ShortBody(f"{len(data)} bytes of {r['ContentLength']}")
            return data

        try:
            return self._retried("reading", uri, attempt)
        except StorageError as e:
            if etag and _code(e.__cause__) in ("PreconditionFailed", "412"):
                raise ObjectChanged(uri, etag) from e
            raise

    def put(self, uri: str, data: bytes) -> None:
        bucket, key = split_s3(uri)
        self._call("writing", uri, self.client.put_object, Bucket=bucket, Key=key, Body=data)

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        """``If-None-Match: *``, sent under the retry policy. An answer lost after the write landed
        comes back as a dropped connection (or a 5xx), or as a refusal (412) of the send after it,
        which finds the first one's object: either way the object is read back before anything else,
        and the write is ours when it holds exactly ``data`` (every caller's object carries its run,
        attempt or nonce). While the key stays empty the create is sent again: a conditional create
        cannot overwrite, so a late first attempt and a later one cannot both land."""
        bucket, key = split_s3(uri)
        lost: list[BaseException] = []

        def attempt() -> bool:
            if lost:  # an earlier send may have landed: look before sending again
                held = self._holds(uri, data, lost[-1])
                if held is not None:
                    return held
            try:
                self.client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                return True
            except botocore.exceptions.ClientError as e:
                if _code(e) not in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                    raise
                held = self._holds(uri, data, e)
                if held is None and _code(e) not in ("ConditionalRequestConflict", "409"):
                    raise retry.Again("refused as taken, yet the key is empty (its object deleted since)") from e
                return bool(held)  # 409: another create of the key in flight, and not ours

        try:
            return self._retried("writing", uri, attempt, on_fault=_keep_landed(lost))
        except StorageError as e:
            if isinstance(e, WriteUndecided) or not (lost or undecided(e)):
                raise
            held = self._holds(uri, data, e)
            if held is not None:
                return held
            raise WriteUndecided(f"writing {uri} (create if absent) failed ({e.fault or e}); the key is still empty "
                                 "and a lost attempt may still land. Nothing was undone: rerun the same run to "
                                 "finish or undo it", uri=uri, fault=e.fault) from e

    def _holds(self, uri: str, data: bytes, error: BaseException | str | None, doing: str = "writing") -> bool | None:
        """After an ambiguous answer to ``doing`` (writing ``data`` at ``uri``, or deleting it while it
        holds ``data``): whether the object there is exactly ``data`` (``None``: nothing there).
        ``WriteUndecided`` when it cannot be read."""
        try:
            info = self.head(uri)
            if info is None:
                return None
            if info.size != len(data):
                return False
            return self.read(uri) == data
        except Exception as e:  # noqa: BLE001 - whatever the read-back's failure, the write is undecided
            raise WriteUndecided(
                f"{doing} {uri} got no clear answer ({error}) and reading it back to see whether that "
                f"landed failed ({e}); nothing was undone: rerun the same run to finish or undo it") from e

    def delete(self, uris: Iterable[str]) -> None:
        by_bucket: dict[str, list[str]] = {}
        for uri in uris:
            bucket, key = split_s3(uri)
            by_bucket.setdefault(bucket, []).append(key)
        for bucket, keys in by_bucket.items():
            for i in range(0, len(keys), 1000):
                self._retried("deleting", f"s3://{bucket}/", functools.partial(self._delete_batch, bucket,
                                                                               keys[i : i + 1000]))

    def delete_if_holds(self, uri: str, data: bytes) -> None:
        bucket, key = split_s3(uri)
        tried = False

        def attempt() -> None:
            nonlocal tried
            # A retry: the last delete's answer was lost. Gone (it landed) or another run's now: leave it.
            if tried and self._holds(uri, data, "the previous attempt's answer was lost", "deleting") is not True:
                return
            tried = True
            self._delete_batch(bucket, [key])

        self._retried("deleting", uri, attempt)

    def _delete_batch(self, bucket: str, keys: list[str]) -> None:
        """One DeleteObjects of ``keys`` (at most 1000). Keys the answer lists with a transient error
        (``InternalError``, ``SlowDown``: S3 fails keys of a batch one by one) are kept in ``keys`` and
        raised as that error, so the retry policy sends a batch of them alone; any other is final."""
        r = self.client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True})
        errors = r.get("Errors") or []
        final = [e for e in errors if e.get("Code") not in retry.THROTTLED | retry.SERVER]
        if final:
            err = final[0]
            raise StorageError(f"deleting s3://{bucket}/{err['Key']} failed: {err.get('Code')} {err.get('Message')}",
                               uri=f"s3://{bucket}/{err['Key']}")
        if errors:
            keys[:] = [e["Key"] for e in errors]
            raise retry.PartlyFailed(errors[0].get("Code", ""), f"{len(errors)} keys not deleted, the first "
                                     f"s3://{bucket}/{errors[0]['Key']}")

    def begin_upload(self, uri: str) -> PendingUpload:
        """A new multipart upload. A create whose answer was lost may have made an upload nobody
        knows the id of; after such a fault (retried or not) the other uploads pending on this key
        are aborted (:meth:`_abort_strays`): one list and its aborts, only when a fault was seen."""
        bucket, key = split_s3(uri)
        lost: list[BaseException] = []

        try:
            r = self._call("starting an upload to", uri, self.client.create_multipart_upload, on_fault=_keep_landed(lost),
                           Bucket=bucket, Key=key)
        except StorageError as e:
            if lost or (e.__cause__ is not None and retry.fault(e.__cause__) and retry.landed_maybe(e.__cause__)):
                with contextlib.suppress(StorageError):  # the run's clean-up lists pending uploads again
                    self._abort_strays(uri, keep=None)
            raise
        if lost:
            self._abort_strays(uri, keep=r["UploadId"])
        return PendingUpload(uri=uri, upload_id=r["UploadId"])

    def _abort_strays(self, uri: str, keep: str | None) -> None:
        """Abort the uploads pending on exactly ``uri`` but ``keep``: those a create with a lost answer
        made. lading begins an upload only on a key of its own writer (a table part named by its
        write id; an export's file, whose destination one run publishes at a time), so another
        upload there is a lost answer's, or a dead attempt's that its run's clean-up would abort
        anyway. Were it a live writer's, that writer fails completing it (``NoSuchUpload``), never
        silently. (No time window: stores disagree on ``Initiated``; moto reports a fixed date.)"""
        for upload in self.list_pending_uploads(uri):
            if upload.uri == uri and upload.upload_id != keep:
                self.abort_upload(upload)

    def upload_part(self, upload: PendingUpload, data: bytes) -> None:
        bucket, key = split_s3(upload.uri)
        number = len(upload.parts) + 1
        r = self._call("uploading to", upload.uri, self.client.upload_part, Bucket=bucket, Key=key,
                       UploadId=upload.upload_id, PartNumber=number, Body=data)
        upload.parts.append({"PartNumber": number, "ETag": r["ETag"]})

    def put_pending(self, uri: str, data: bytes) -> PendingUpload:
        self.put(uri, data)
        return PendingUpload(uri=uri, upload_id=SINGLE_PUT)

    def complete_upload(self, upload: PendingUpload) -> None:
        """``CompleteMultipartUpload``. Its answer may be lost after the upload completed: the retry
        then finds the upload id gone (``NoSuchUpload``), or the connection drops for good. The
        object is then looked at: it is the upload's when its ETag is the one S3 gives the upload's
        parts (the MD5 of their MD5s, ``-<parts>``). While the object is not there and the upload
        may still exist, completing is sent again (completing twice cannot make another object)."""
        if upload.upload_id == SINGLE_PUT:
            return
        bucket, key = split_s3(upload.uri)
        if not upload.parts:  # S3 needs at least one part; an empty file is one empty part
            self.upload_part(upload, b"")
        lost: list[BaseException] = []

        def attempt() -> None:
            if lost and self._completed(upload, lost[-1]):  # an earlier send landed, its answer lost
                return
            try:
                self.client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload.upload_id,
                                                      MultipartUpload={"Parts": upload.parts})
            except botocore.exceptions.ClientError as e:
                if _code(e) != "NoSuchUpload":
                    raise
                if self._completed(upload, e):  # a send before this one landed, its answer lost
                    return
                raise StorageError(
                    f"completing {upload.uri} failed: its upload {upload.upload_id} is gone (aborted, or expired "
                    "by the bucket's lifecycle rule) and the object there is not what it held; run again",
                    uri=upload.uri) from e

        try:
            self._retried("completing", upload.uri, attempt, on_fault=_keep_landed(lost))
        except StorageError as e:
            if isinstance(e, WriteUndecided) or _code(e.__cause__) == "NoSuchUpload" or not (lost or undecided(e)):
                raise
            if self._completed(upload, e):
                return
            raise WriteUndecided(f"completing {upload.uri} failed ({e.fault or e}); the object is not there yet and "
                                 "a lost attempt may still land. Nothing was undone: rerun the same run",
                                 uri=upload.uri, fault=e.fault) from e

    def _completed(self, upload: PendingUpload, error: BaseException | None) -> bool:
        """Whether the object at ``upload.uri`` is the one completing ``upload`` makes (see ``complete_upload``)."""
        expected = multipart_etag(upload.parts)
        try:
            info = self.head(upload.uri)
        except Exception as e:  # noqa: BLE001 - cannot look: cannot tell
            raise WriteUndecided(
                f"completing {upload.uri} got no clear answer ({error}) and looking at the object failed ({e}); "
                "nothing was undone: rerun the same run to finish or undo it") from e
        if info is None:
            return False
        if expected is None:
            raise WriteUndecided(
                f"completing {upload.uri} got no clear answer ({error}); an object is there but its parts' "
                "ETags are not MD5s, so it cannot be told for the upload's; nothing was undone: rerun the same run")
        return info.etag == expected

    def abort_upload(self, upload: PendingUpload) -> None:
        if upload.upload_id == NOT_BEGUN:
            return
        if upload.upload_id == SINGLE_PUT:
            self.delete([upload.uri])
            return
        bucket, key = split_s3(upload.uri)
        try:
            self._call("aborting the upload to", upload.uri, self.client.abort_multipart_upload,
                       Bucket=bucket, Key=key, UploadId=upload.upload_id)
        except StorageError as e:
            if _code(e.__cause__) != "NoSuchUpload":  # gone: aborted (perhaps by a retry whose answer was lost)
                raise

    def list_pending_uploads(self, prefix: str) -> list[PendingUpload]:
        bucket, key = split_s3(prefix)
        out = []
        for page in self._pages("listing the pending uploads under", prefix, self.client.list_multipart_uploads,
                                _next_uploads, Bucket=bucket, Prefix=key):
            for u in page.get("Uploads", []):
                out.append(PendingUpload(uri=f"s3://{bucket}/{u['Key']}", upload_id=u["UploadId"],
                                         initiated=_epoch(u.get("Initiated"))))
        return out


def _keep_landed(lost: list[BaseException]) -> Callable[[BaseException, int], None]:
    """A retry's ``on_fault`` that keeps in ``lost`` each fault after which the request may have
    landed (``retry.landed_maybe``): the caller reads back, or cleans up, before the next send."""

    def keep(error: BaseException, attempt: int) -> None:
        if retry.landed_maybe(error):
            lost.append(error)

    return keep


def _code(error: BaseException | None) -> str:
    """The S3 error code of a ``ClientError`` (``""`` for anything else)."""
    if isinstance(error, botocore.exceptions.ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def _next_objects(page: dict[str, Any]) -> dict[str, Any] | None:
    """The markers of the listing's next page (``ListObjectsV2``), ``None`` after the last."""
    return {"ContinuationToken": page["NextContinuationToken"]} if page.get("IsTruncated") else None


def _next_uploads(page: dict[str, Any]) -> dict[str, Any] | None:
    """The markers of the next page of pending uploads (``ListMultipartUploads``)."""
    if not page.get("IsTruncated"):
        return None
    return {"KeyMarker": page.get("NextKeyMarker", ""), "UploadIdMarker": page.get("NextUploadIdMarker", "")}


def multipart_etag(parts: list[dict[str, Any]]) -> str | None:
    """The ETag S3 gives a completed multipart upload: the MD5 of its parts' MD5s, then ``-<parts>``
    (``None`` when a part's ETag is not an MD5: server-side encryption with KMS or a customer key)."""
    digests = b""
    for part in parts:
        etag = str(part["ETag"]).strip('"')
        if not re.fullmatch(r"[0-9a-fA-F]{32}", etag):
            return None
        digests += bytes.fromhex(etag)
    return f"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{len(parts)}"


def _epoch(when: Any) -> float | None:
    """A listing's datetime as epoch seconds (None when absent)."""
    return when.timestamp() if when is not None and hasattr(when, "timestamp") else None


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _path(uri: str) -> Path:
    """The local path of ``file:///path``, as written: like S3 keys (and Hadoop's paths, which
    Spark reads and writes), nothing is percent-decoded and nothing is cut off as a query or
    fragment. So a Hive-escaped partition directory (``k=a%2Fb``) is one directory, the one
    the manifest names, and a listed name comes back as the same URI."""
    return Path(uri.removeprefix("file://"))


def _uri(path: Path) -> str:
    return "file://" + str(path)


class LocalStorage(Storage):
    """``file://`` URIs. Pending uploads live in ``<parent>/.lading-staging/`` until renamed.

    ``prefixes``: the ``file://`` prefixes this process may open (``lading_spec.localfiles``:
    in a pod, what the operator rendered; none, no ``file://`` at all). Below a prefix every
    path is opened one component at a time without following a link (:mod:`lading_jobs.localfs`),
    so a link planted under it leads nowhere: not read, listed, written nor deleted through.
    ``None`` (a laptop: no tenants): any path, links followed as ``open(2)`` does.

    Each uploaded part's bytes start their write-back to the disk as they are appended
    (``start_writeback``), so the ``fsync`` that ``complete_upload`` still does before the
    rename finds them written or on their way: a compaction's tasks write its outputs
    while the disk takes them, instead of the driver's commit waiting for all of them.
    """

    def __init__(self, prefixes: tuple[str, ...] | None = None) -> None:
        self.prefixes = prefixes
        roots = [] if prefixes is None else [localfiles.path_of(p).rstrip("/") or "/" for p in prefixes]
        for root in roots:  # the operator refused these at start-up; a job never opens them either
            why = localfiles.covers_forbidden(root) or localfiles.covers_forbidden(os.path.realpath(root))
            if why:
                raise StorageError(f"{localfiles.PREFIXES_ENV} names {root}, which a job may never open: {why}")
        self.roots = tuple(roots)

    def describe(self, uri: str) -> str:
        return "the local file system"

    def _outside(self, uri: str) -> StorageError:
        if not self.roots:
            return StorageError(f"{uri}: file:// is not allowed here: the job runs in a pod and the cluster admin "
                                "allows no file:// prefix for this namespace (policy.allowedPrefixes); use s3://")
        return StorageError(f"{uri} is outside the file:// prefixes this job may use "
                            f"({', '.join('file://' + r for r in self.roots)}; policy.allowedPrefixes)")

    def _place(self, uri: str, path: str | None = None) -> localfs.Place:
        """Where ``uri`` (or the local ``path``) is: below the prefix it lies under, else refused."""
        path = localfiles.path_of(uri) if path is None else localfiles.path_of(path)
        if self.prefixes is None:
            return localfs.Place("/", tuple(p for p in path.split("/") if p), follow=True)
        for root in self.roots:
            if localfiles.under(path, root):
                parts = tuple(p for p in path[len(root.rstrip("/")):].split("/") if p and p != ".")
                if ".." in parts:
                    raise StorageError(f"{uri}: a file:// path must not climb out with '..'")
                return localfs.Place(root, parts)
        raise self._outside(uri)

    def list_objects(self, prefix: str) -> Iterator[ObjectInfo]:
        base = _path(prefix)
        root = base if prefix.endswith("/") else base.parent
        found = []
        for place in self._walk_roots(prefix, str(root), str(base)):
            for below, entry, _ in localfs.walk(place):
                if entry.name == STAGING_DIR or (below and STAGING_DIR in below):
                    continue
                if not entry.is_file(follow_symlinks=place.follow):
                    continue  # a directory (walked), a link (never followed under a prefix), a device ...
                p = Path(place.path, *below, entry.name)
                uri = _uri(p)
                if uri.startswith(prefix) or str(p).startswith(str(base)):
                    try:
                        st = entry.stat(follow_symlinks=place.follow)
                    except FileNotFoundError:  # deleted since the walk saw it: not listed (as on S3)
                        continue
                    found.append(ObjectInfo(uri, st.st_size, _etag(st), st.st_mtime))
        yield from sorted(found, key=lambda o: o.uri)

    def _walk_roots(self, prefix: str, root: str, base: str) -> list[localfs.Place]:
        """Where a listing of ``prefix`` walks: its directory, or, when that lies above the allowed
        prefixes (``file:///data/team`` lists ``/data`` for names starting ``team``), each allowed
        prefix the listing covers."""
        if self.prefixes is None or any(localfiles.under(localfiles.path_of(root), r) for r in self.roots):
            return [self._place(prefix, root)]
        covered = [localfs.Place(r) for r in self.roots
                   if localfiles.under(r, localfiles.path_of(root)) and r.startswith(localfiles.path_of(base))]
        if not covered:
            raise self._outside(prefix)
        return covered

    def list_level(self, prefix: str) -> tuple[list[str], list[ObjectInfo]]:
        """One directory's subdirectories and regular files, the directory opened as every local
        path is (:meth:`_place`: under an allowed prefix, no link followed); symbolic links are
        neither (a link planted under a prefix leads nowhere), nor is the staging directory."""
        if not prefix.endswith("/"):
            return [], []
        dirs, files = [], []
        try:
            with localfs.directory(self._place(prefix)) as fd, os.scandir(fd) as entries:
                for e in entries:
                    if e.is_symlink() or e.name == STAGING_DIR:
                        continue
                    if e.is_dir(follow_symlinks=False):
                        dirs.append(prefix + e.name + "/")
                    elif e.is_file(follow_symlinks=False):
                        try:
                            st = e.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue
                        files.append(ObjectInfo(prefix + e.name, st.st_size, _etag(st), st.st_mtime))
        except (FileNotFoundError, NotADirectoryError):
            return [], []
        return sorted(dirs), sorted(files, key=lambda o: o.uri)


    def head(self, uri: str) -> ObjectInfo | None:
        try:
            st = localfs.lstat(self._place(uri))
        except (FileNotFoundError, NotADirectoryError, IndexError, localfs.LinkRefused):
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return ObjectInfo(uri, st.st_size, _etag(st), st.st_mtime)

    def _open(self, uri: str, flags: int = os.O_RDONLY, create_dirs: bool = False) -> int:
        place = self._place(uri)
        if not place.parts:
            raise IsADirectoryError(errno.EISDIR, "a directory, not a file", place.path)
        return localfs.open_file(place, flags, create_dirs=create_dirs)

    def read(self, uri: str, etag: str | None = None) -> bytes:
        try:
            with open(self._open(uri), "rb") as f:
                _check_version(f.fileno(), uri, etag)
                return f.read()
        except OSError as e:
            raise StorageError(f"reading {uri} failed: {e.strerror}") from e

    def read_range(self, uri: str, start: int, end: int, etag: str | None = None) -> bytes:
        with open(self._open(uri), "rb") as f:
            _check_version(f.fileno(), uri, etag)
            f.seek(start)
            return f.read(end - start)

    def open_input(self, uri: str, size: int | None = None, etag: str | None = None) -> pa.NativeFile:
        if self.prefixes is None:
            f: pa.NativeFile = pa.OSFile(str(_path(uri)), "r")
        else:
            fd = self._open(uri)  # then reopened through its descriptor: the same file, no path walked again
            try:
                f = pa.OSFile(f"/proc/self/fd/{fd}", "r") if os.path.isdir("/proc/self/fd") \
                    else pa.PythonFile(os.fdopen(os.dup(fd), "rb"), mode="r")
            finally:
                os.close(fd)
        try:  # the open file is this version for good: a writer replaces files by rename
            _check_version(f.fileno(), uri, etag)
        except BaseException:
            f.close()
            raise
        return f

    def put(self, uri: str, data: bytes) -> None:
        self._replace(uri, data, durable=True)

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        place = self._place(uri)
        with localfs.directory(place.parent(), create=True) as parent:
            staging, tmp = self._temporary(parent, place.parent().child(STAGING_DIR).path, data)
            try:
                os.link(tmp, place.name, src_dir_fd=staging, dst_dir_fd=parent, follow_symlinks=False)
            except FileExistsError:  # atomic create-if-absent with the full content in place
                return False
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=staging)
                os.close(staging)
            localfs.fsync_dir(parent)
        return True

    def put_hint(self, uri: str, data: bytes) -> None:
        """A staged file renamed into place, no ``fsync`` (of the file or the directory)."""
        self._replace(uri, data, durable=False)

    def _replace(self, uri: str, data: bytes, durable: bool) -> None:
        place = self._place(uri)
        with localfs.directory(place.parent(), create=True) as parent:
            staging, tmp = self._temporary(parent, place.parent().child(STAGING_DIR).path, data, durable)
            try:
                os.replace(tmp, place.name, src_dir_fd=staging, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=staging)
                raise
            finally:
                os.close(staging)
            if durable:
                localfs.fsync_dir(parent)

    def _temporary(self, parent: int, staging_path: str, data: bytes, durable: bool = True) -> tuple[int, str]:
        """``data`` written (and fsynced: ``durable``) under the hidden staging directory in ``parent``
        (never listed): that directory's descriptor (the caller closes it) and the file's name."""
        staging, name, fd = _create_in_staging(parent, staging_path, f"{uuid.uuid4().hex}.tmp")
        try:
            with open(fd, "wb") as f:
                f.write(data)
                f.flush()
                if durable:
                    os.fsync(f.fileno())
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=staging)
            os.close(staging)
            raise
        return staging, name

    def delete(self, uris: Iterable[str]) -> None:
        for uri in uris:
            place = self._place(uri)
            try:
                with localfs.directory(place.parent()) as parent:
                    os.unlink(place.name, dir_fd=parent)  # a link itself goes, never what it points at
            except (FileNotFoundError, NotADirectoryError, IndexError):
                continue

    def _staging(self, uri: str) -> Path:
        """Where pending uploads to ``uri`` live: a hidden directory beside it, never listed."""
        return _path(uri).parent / STAGING_DIR

    def _staging_place(self, uri: str) -> localfs.Place:
        return self._place(uri).parent().child(STAGING_DIR)

    def begin_upload(self, uri: str) -> PendingUpload:
        # <32 hex>-<name>.part: the name tells list_pending_uploads which key the upload is for
        place = self._place(uri)
        with localfs.directory(place.parent(), create=True) as parent:
            staging, name, fd = _create_in_staging(parent, str(self._staging(uri)),
                                                   f"{uuid.uuid4().hex}-{_path(uri).name}.part")
            os.close(fd)
            os.close(staging)
        return PendingUpload(uri=uri, upload_id=str(self._staging(uri) / name))

    def upload_part(self, upload: PendingUpload, data: bytes) -> None:
        part = self._staged(upload)
        with open(localfs.open_file(self._staging_place(upload.uri).child(part.name), os.O_WRONLY | os.O_APPEND),
                  "ab") as f:
            offset = f.tell()
            f.write(data)
            f.flush()
            start_writeback(f.fileno(), offset, len(data))
        upload.parts.append({"PartNumber": len(upload.parts) + 1, "ETag": str(len(data))})

    def _staged(self, upload: PendingUpload) -> Path:
        """The staging file of ``upload``, which must lie in its key's staging directory: an upload
        read back from an intent (which whoever owns the prefix can write) names no other file."""
        part = Path(upload.upload_id)
        if part.parent != self._staging(upload.uri) or not part.name.endswith(".part"):
            raise StorageError(f"the pending upload {upload.upload_id!r} of {upload.uri} is not a staging file "
                               f"of it (in {self._staging(upload.uri)}); lading never made it, so it is left alone")
        return part

    def complete_upload(self, upload: PendingUpload) -> None:
        part = self._staged(upload)
        place = self._place(upload.uri)
        with localfs.directory(place.parent(), create=True) as parent, \
                localfs.directory(place.parent().child(STAGING_DIR)) as staging:
            fd = localfs.open_file(self._staging_place(upload.uri).child(part.name), os.O_RDWR)
            try:  # durable before it becomes visible
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(part.name, place.name, src_dir_fd=staging, dst_dir_fd=parent)
            localfs.fsync_dir(parent)
            _remove_empty(parent, STAGING_DIR)

    def abort_upload(self, upload: PendingUpload) -> None:
        if upload.upload_id == NOT_BEGUN:
            return
        part = self._staged(upload)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError), \
                localfs.directory(self._staging_place(upload.uri)) as staging:
            os.unlink(part.name, dir_fd=staging)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError), \
                localfs.directory(self._place(upload.uri).parent()) as parent:
            _remove_empty(parent, STAGING_DIR)

    def list_pending_uploads(self, prefix: str) -> list[PendingUpload]:
        base = _path(prefix)
        root = base if prefix.endswith("/") else base.parent
        out = []
        for place in self._walk_roots(prefix, str(root), str(root)):
            for below, entry, _ in localfs.walk(place):
                if not below or below[-1] != STAGING_DIR or not entry.name.endswith(".part") \
                        or not entry.is_file(follow_symlinks=False):
                    continue
                name = entry.name[33:-len(".part")] if entry.name[32:33] == "-" else ""
                directory = Path(place.path, *below[:-1])
                uri = _uri(directory / name) if name else _uri(directory)
                try:
                    initiated: float | None = entry.stat(follow_symlinks=False).st_mtime
                except OSError:
                    initiated = None
                out.append(PendingUpload(uri=uri, upload_id=str(Path(place.path, *below, entry.name)),
                                         initiated=initiated))
        return out


def _etag(st: os.stat_result) -> str:
    """A file's version: its size and modification time (what listings report as the ETag)."""
    return f"{st.st_size:x}-{st.st_mtime_ns:x}"


def _check_version(fd: int, uri: str, etag: str | None) -> None:
    if etag and _etag(os.fstat(fd)) != etag:
        raise ObjectChanged(uri, etag)


SYNC_FILE_RANGE_WRITE = 2
"""Linux's ``sync_file_range`` flag: start writing the range's dirty pages, do not wait."""


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """glibc's ``sync_file_range`` (Linux), or ``None`` where the C library has none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


def start_writeback(fd: int, offset: int, length: int) -> bool:
    """Ask the kernel to start writing ``length`` bytes of ``fd`` from ``offset`` to the disk, without
    waiting (Linux ``sync_file_range(SYNC_FILE_RANGE_WRITE)``); whether it was asked.

    Only an early start: durability still comes from the ``fsync`` before a file becomes visible.
    Where the call is missing or refused (another OS, a file system without it), nothing happens."""
    fn = _sync_file_range()
    return fn is not None and length > 0 and fn(fd, offset, length, SYNC_FILE_RANGE_WRITE) == 0


def _create_in_staging(parent: int, staging_path: str, name: str) -> tuple[int, str, int]:
    """A new empty file ``name`` in the staging directory inside ``parent`` (``staging_path`` names it in
    messages): the staging directory's descriptor, the name, and the file opened for writing.

    Another task's upload in the same directory removes the staging directory once it is empty
    (``_remove_empty``), possibly between our ``mkdir`` and our ``open``: then the directory
    is made again. Each retry follows a removal by someone else, so the loop ends.
    """
    for _ in range(1000):
        with contextlib.suppress(FileExistsError):
            os.mkdir(STAGING_DIR, 0o777, dir_fd=parent)
        try:
            staging = os.open(STAGING_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                              dir_fd=parent)
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):  # the staging name is a link (or a file): not used
                raise localfs.LinkRefused(staging_path) from e
            raise
        try:
            return staging, name, os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                          0o644, dir_fd=staging)
        except FileNotFoundError:  # the directory went between our open and the create
            os.close(staging)
            continue
        except BaseException:
            os.close(staging)
            raise
    raise OSError(f"could not create {staging_path}/{name}: its directory kept disappearing")


def _remove_empty(parent: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=parent)


def remove_tree(uri: str) -> None:
    """Remove a local directory tree (tests and demo clean-up)."""
    shutil.rmtree(_path(uri), ignore_errors=True)


def open_storage(uri: str, settings: S3Settings | None = None) -> Storage:
    """The storage for ``uri``'s scheme."""
    scheme = urlparse(uri).scheme
    if scheme == "s3":
        return S3Storage(settings)
    if scheme == "file":
        try:
            prefixes = localfiles.prefixes_from_env(os.environ)
        except ValueError as e:
            raise StorageError(str(e)) from e
        return LocalStorage(prefixes)
    raise StorageError(f"unsupported URI {uri!r}; use s3://bucket/prefix/ or file:///absolute/path/")
