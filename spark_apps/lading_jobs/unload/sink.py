"""A byte sink over one pending upload, with bounded memory and a running checksum.

Encoders write bytes; the sink keeps at most ``buffer_size`` of them before
sending a multipart part (every part but the last is ≥ 5 MiB, as S3 requires),
counts the file's size and computes its SHA-256 as the bytes go by. ``finish``
sends the tail and hands back the still-pending upload; nothing is completed
here (the driver does that at commit).
"""

from __future__ import annotations

import hashlib

from lading_jobs.storage import PendingUpload, Storage

MIN_PART = 5 * 1024 * 1024


class PartSink:
    """File-like enough for ``pyarrow.PythonFile`` (``write``/``tell``/``flush``/``close``)."""

    def __init__(self, storage: Storage, uri: str, buffer_size: int) -> None:
        self.storage = storage
        self.buffer_size = max(buffer_size, MIN_PART)
        self.upload: PendingUpload = storage.begin_upload(uri)
        self.size = 0
        self.closed = False
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._sha = hashlib.sha256()

    # -- the file protocol pyarrow needs -------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> int:
        n = len(data)
        if n == 0:
            return 0
        chunk = bytes(data)
        self._sha.update(chunk)
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
        data = b"".join(self._chunks)
        self._chunks, self._buffered = [], 0
        self.storage.upload_part(self.upload, data)

    @property
    def buffered(self) -> int:
        return self._buffered

    @property
    def sha256(self) -> str:
        return self._sha.hexdigest()

    def finish(self) -> PendingUpload:
        """Send what is buffered as the last part; the upload stays pending."""
        if self._buffered or not self.upload.parts:
            self._send()
        self.closed = True
        return self.upload

    def abort(self) -> None:
        self._chunks, self._buffered = [], 0
        self.closed = True
        self.storage.abort_upload(self.upload)
