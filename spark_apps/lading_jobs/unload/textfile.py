"""One CSV or JSON-lines output file with a hard size ceiling.

Each incoming batch is encoded (and compressed, one member per chunk) as a
whole; when the result would pass ``max_size`` the batch is split where the
bytes fit: the number of rows is estimated from the bytes per row, encoded
again and checked, so the written file never exceeds ``max_size`` and a full
file is filled to within a few percent of it. A single row larger than
``max_size`` is an error naming ``to.maxFileSize``.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias

import pyarrow as pa

from lading_jobs.formats.filestats import FileStats
from lading_jobs.sink import PartSink
from lading_jobs.unload.compress import Compressor

FULL_SLACK = 0.05  # a file with less room than this fraction left is full


class TextEncoder(Protocol):
    def encode(self, batch: pa.RecordBatch) -> bytes: ...


Encoded: TypeAlias = bytes | pa.Buffer


class FileTooSmall(ValueError):
    """One row does not fit in maxFileSize."""


class TextFile:
    def __init__(self, sink: PartSink, encoder: TextEncoder, header: bytes, compress: Compressor | None,
                 max_size: int, schema: pa.Schema) -> None:
        self.sink, self.encoder, self.compress, self.max_size = sink, encoder, compress, max_size
        # an encoder may hand out its output buffer itself (CSV does), saving a copy per batch
        self._encoder_out = getattr(encoder, "encode_buffer", encoder.encode)
        self.stats = FileStats(schema)
        self._header = compress(header) if (compress and header) else header
        if len(self._header) >= max_size:
            raise FileTooSmall(f"to.maxFileSize: {max_size} bytes cannot hold even the CSV header; raise it")

    @property
    def rows(self) -> int:
        return self.stats.rows

    def _encode(self, batch: pa.RecordBatch) -> Encoded:
        data = self._encoder_out(batch)
        return self.compress(data) if self.compress else data

    def write(self, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        """Write what fits of ``batch``; return the rest when the file is full, else ``None``."""
        n = batch.num_rows
        pos = 0
        if self.sink.size == 0 and self._header:
            self.sink.write(self._header)
        while pos < n:
            room = self.max_size - self.sink.size
            k = n - pos
            data = self._encode(batch.slice(pos, k))
            shrunk = False
            while len(data) > room:
                if k == 1:
                    if self.rows == 0:
                        raise FileTooSmall(
                            f"to.maxFileSize: a single row encodes to {len(data)} bytes, more than the limit "
                            f"of {self.max_size}; raise maxFileSize")
                    return batch.slice(pos)
                shrunk = True
                k = max(1, min(k - 1, int(k * room / len(data) * 0.98)))
                data = self._encode(batch.slice(pos, k))
            self.sink.write(data)
            self.stats.update(batch.slice(pos, k))
            pos += k
            if shrunk and self.max_size - self.sink.size < FULL_SLACK * self.max_size:
                return batch.slice(pos) if pos < n else None
        return None

    @property
    def full(self) -> bool:
        return self.max_size - self.sink.size < FULL_SLACK * self.max_size
