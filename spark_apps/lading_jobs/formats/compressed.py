"""Compressed text input: CSV and JSON-lines files stored as gzip or zstd.

One reader for loads (``lading_jobs.load``) and for ``from.files`` unloads
(``lading_jobs.sources.files``), so both accept the same files and fail the same way.
The codec is the format's ``compression`` option or, when that is ``none``, the file's
name (``.gz``/``.gzip``, ``.zst``/``.zstd``, any case). gzip (every member of a
concatenation) is inflated by zlib-ng, about 1.8x zlib's speed here; zstd by Arrow.

Whatever a library calls a failure (``zlib_ng.error`` for a corrupt deflate stream,
``EOFError`` for a truncated one, ``OSError`` for a bad header or zstd frame), it is
:class:`NotDecompressible`, an ``OSError``: a load records it as that file's error, an
unload fails naming the file, and neither mistakes it for a bug of the task.
"""

from __future__ import annotations

import pyarrow as pa
from zlib_ng import gzip_ng, zlib_ng

from lading_spec.formats import CsvOptions, FormatOptions, JsonOptions

_BY_NAME = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}


class NotDecompressible(OSError):
    """A file that does not decompress as its compression: corrupt or truncated."""


def compression_of(options: FormatOptions) -> str:
    """The ``compression`` option of a text format (``none`` for Parquet: its pages say)."""
    return options.compression if isinstance(options, CsvOptions | JsonOptions) else "none"


def codec(compression: str, uri: str) -> str:
    """``compression``, or with ``none`` the one ``uri``'s name ends with (else ``none``)."""
    if compression != "none":
        return compression
    name = uri.lower()
    return next((c for ext, c in _BY_NAME.items() if name.endswith(ext)), "none")


def decompress(data: bytes, compression: str, uri: str) -> bytes:
    """``data`` with ``codec(compression, uri)`` undone; :class:`NotDecompressible` if it cannot be."""
    chosen = codec(compression, uri)
    try:
        if chosen == "gzip":
            return gzip_ng.decompress(data)
        if chosen == "zstd":
            return pa.CompressedInputStream(pa.BufferReader(data), "zstd").read()  # type: ignore[no-any-return]
    except (zlib_ng.error, EOFError, OSError, pa.ArrowInvalid) as e:  # type: ignore[misc]  # the stub: error is "Exception"
        raise NotDecompressible(f"not valid {chosen} data (corrupt or truncated): {e}") from e
    return data
