"""A byte sink over one pending upload, with bounded memory and a running checksum (unload files and table parts).

Encoders write bytes; the sink keeps at most ``buffer_size`` of them before
sending a multipart part (every part but the last is ≥ 5 MiB, as S3 requires),
counts the file's size and computes its CRC-32 as the bytes go by. ``finish``
sends the tail and hands back the still-pending upload; nothing is completed
here (the driver does that at commit).

Immutable chunks (``bytes``, or a ``pyarrow.Buffer`` such as an encoder's
output) are kept as they are, not copied; a part is joined once, when sent.
Table parts (``single_put``) that fit in the buffer go up in one PUT instead of
three requests (create, part, complete): a part is invisible until a commit names
it, so it may exist early; unload files must not, and always use multipart.

The checksum is CRC-32 (the gzip/PNG polynomial, also one of S3's checksum
algorithms), not SHA-256: it detects corruption and truncation in storage or
transit at several GB/s where SHA-256 in Python runs under 1 GB/s, which
profiling showed as a tenth of the CSV writer's time. It is computed by
zlib-ng's ``crc32`` (the same function as ``zlib.crc32``, same values, but with
carry-less multiplication: 0.009 CPU-s per 100 MB here against zlib's 0.03–0.05,
so 0.1–0.25 CPU-s less per 5 M-row export: docs/benchmarks.md). It is not a
defence against deliberate tampering (docs/copyjob.md, "The manifest").
"""

from __future__ import annotations

import pyarrow as pa
from zlib_ng import zlib_ng

from lading_jobs.storage import NOT_BEGUN, PendingUpload, Storage, StorageError

MIN_PART = 5 * 1024 * 1024
MAX_PARTS = 10_000
"""S3's most parts in one multipart upload."""


def crc32_hex(value: int) -> str:
    """The manifest's spelling of a CRC-32: eight lowercase hex digits."""
    return f"{value & 0xFFFFFFFF:08x}"


class PartSink:
    """File-like enough for ``pyarrow.PythonFile`` (``write``/``tell``/``flush``/``close``)."""

    def __init__(self, storage: Storage, uri: str, buffer_size: int, *, single_put: bool = False) -> None:
        self.storage = storage
        self.buffer_size = max(buffer_size, MIN_PART)
        # single_put (table parts, invisible until a commit names them): the multipart upload
        # begins only when the buffer first fills; a file that never fills it is sent with one
        # PUT at finish. ``upload`` is the same object throughout, filled in when it begins.
        self.single_put = single_put
        self.upload: PendingUpload = PendingUpload(uri, NOT_BEGUN) if single_put else storage.begin_upload(uri)
        self.size = 0
        self.closed = False
        self._chunks: list[bytes | pa.Buffer] = []
        self._buffered = 0
        self._crc = 0

    # -- the file protocol pyarrow needs -------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview | pa.Buffer) -> int:
        n = len(data)
        if n == 0:
            return 0
        chunk = data if isinstance(data, bytes | pa.Buffer) else bytes(data)  # a caller may reuse mutable memory
        self._crc = zlib_ng.crc32(chunk, self._crc)
        self._chunks.append(chunk)
        self._buffered += n
        self.size += n
        if self._buffered >= self.buffer_size:
            self._send()
        return n

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True

    # -- the upload ----------------------------------------------------------------------
    def _send(self) -> None:
        if len(self.upload.parts) >= MAX_PARTS:
            raise StorageError(f"{self.upload.uri}: a file may have at most {MAX_PARTS} parts on S3; "
                               f"{MAX_PARTS} parts of {self.buffer_size} bytes are written already: raise "
                               "the buffer size or lower the file size limit")
        chunks = self._chunks
        data = chunks[0] if len(chunks) == 1 and isinstance(chunks[0], bytes) else b"".join(chunks)
        self._chunks, self._buffered = [], 0
        if self.upload.upload_id == NOT_BEGUN:
            self.upload.upload_id = self.storage.begin_upload(self.upload.uri).upload_id
        self.storage.upload_part(self.upload, data)

    @property
    def buffered(self) -> int:
        return self._buffered

    @property
    def crc32(self) -> str:
        """CRC-32 of every byte written so far, as :func:`crc32_hex` spells it."""
        return crc32_hex(self._crc)

    def finish(self) -> PendingUpload:
        """Send what is buffered as the last part (or, never begun, as one PUT); the upload stays pending."""
        if self.upload.upload_id == NOT_BEGUN:
            chunks = self._chunks
            self._chunks, self._buffered = [], 0
            done = self.storage.put_pending(self.upload.uri, b"".join(chunks))
            self.upload.upload_id, self.upload.parts = done.upload_id, done.parts
        elif self._buffered or not self.upload.parts:
            self._send()
        self.closed = True
        return self.upload

    def abort(self) -> None:
        self._chunks, self._buffered = [], 0
        self.closed = True
        self.storage.abort_upload(self.upload)
