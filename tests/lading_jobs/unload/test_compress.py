"""Text outputs are concatenations of independent gzip members / zstd frames, readable as one
stream by standard readers (the stdlib's zlib, pyarrow), whichever library compressed them."""

from __future__ import annotations

import gzip

import pyarrow as pa
import pytest

from lading_jobs.unload.compress import compressor

CHUNKS = [b"".join(b"%d,customer-%d,%d.25\n" % (i, i % 97, i) for i in range(k * 1000, k * 1000 + 700))
          for k in range(3)] + [b"", b"x\n"]


@pytest.mark.parametrize("name", ["gzip", "zstd"])
def test_each_chunk_is_a_member_and_the_file_reads_as_one_stream(name: str) -> None:
    compress = compressor(name)
    assert compress is not None
    members = [compress(chunk) for chunk in CHUNKS]
    assert all(len(m) < len(c) for m, c in zip(members, CHUNKS, strict=True) if len(c) > 1000)
    whole = b"".join(members)
    if name == "gzip":
        assert [gzip.decompress(m) for m in members] == CHUNKS  # the stdlib's zlib inflates each member
        assert gzip.decompress(whole) == b"".join(CHUNKS)
    read = pa.CompressedInputStream(pa.BufferReader(whole), name).read()
    assert read == b"".join(CHUNKS)


def test_gzip_compresses_pyarrow_buffers() -> None:
    compress = compressor("gzip")
    assert compress is not None
    assert gzip.decompress(compress(pa.py_buffer(CHUNKS[0]))) == CHUNKS[0]


def test_an_unknown_compression_is_refused() -> None:
    assert compressor("none") is None
    with pytest.raises(ValueError, match="accepted: none, gzip, zstd"):
        compressor("lz4")
