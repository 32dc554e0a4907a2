"""Compressed text input: the codec from the option or the name, and one error for every failure."""

from __future__ import annotations

import gzip

import pyarrow as pa
import pytest

from lading_jobs.formats.compressed import NotDecompressible, codec, compression_of, decompress
from lading_spec.formats import CsvOptions, JsonOptions, ParquetOptions

BODY = b"".join(b"%d,name-%d\n" % (i, i) for i in range(3000))


@pytest.mark.parametrize(("compression", "uri", "expected"), [
    ("none", "s3://b/x.csv", "none"), ("none", "s3://b/x.csv.gz", "gzip"), ("none", "s3://b/x.CSV.GZ", "gzip"),
    ("none", "s3://b/x.csv.gzip", "gzip"), ("none", "s3://b/x.jsonl.zst", "zstd"), ("none", "s3://b/x.ZSTD", "zstd"),
    ("gzip", "s3://b/x.csv", "gzip"), ("zstd", "s3://b/x.csv.gz", "zstd"),  # the option wins over the name
    ("none", "s3://b/gz/x.csv", "none"), ("none", "s3://b/x.gz.csv", "none"),  # only the name's end counts
])
def test_the_codec_is_the_option_or_else_the_name(compression: str, uri: str, expected: str) -> None:
    assert codec(compression, uri) == expected


def test_only_text_formats_have_a_compression_to_undo() -> None:
    assert compression_of(CsvOptions(compression="gzip")) == "gzip"
    assert compression_of(JsonOptions(compression="zstd")) == "zstd"
    assert compression_of(ParquetOptions(compression="zstd")) == "none"  # Parquet's pages say their own


def test_both_codecs_round_trip_and_every_gzip_member_is_read() -> None:
    assert decompress(gzip.compress(BODY[:100]) + gzip.compress(b"") + gzip.compress(BODY[100:]), "none",
                      "s3://b/x.csv.gz") == BODY
    assert decompress(pa.Codec("zstd").compress(BODY, asbytes=True), "zstd", "s3://b/x") == BODY
    assert decompress(BODY, "none", "s3://b/x.csv") == BODY


def _flipped(data: bytes, start: int, end: int) -> bytes:
    return data[:start] + bytes(b ^ 0xFF for b in data[start:end]) + data[end:]


@pytest.mark.parametrize("case", ["corrupt deflate", "truncated", "bad header", "not gzip at all", "corrupt zstd",
                                  "truncated zstd"])
def test_every_failure_is_not_decompressible_an_os_error(case: str) -> None:
    gz, zst = gzip.compress(BODY), pa.Codec("zstd").compress(BODY, asbytes=True)
    data, compression = {
        "corrupt deflate": (_flipped(gz, 20, 40), "gzip"), "truncated": (gz[:-9], "gzip"),
        "bad header": (b"\x1f\x8b" + b"x" * 30, "gzip"), "not gzip at all": (BODY, "gzip"),
        "corrupt zstd": (_flipped(zst, 20, 40), "zstd"), "truncated zstd": (zst[:-7], "zstd")}[case]
    with pytest.raises(NotDecompressible, match=f"not valid {compression} data") as raised:
        decompress(data, compression, "s3://b/x")
    assert isinstance(raised.value, OSError)
