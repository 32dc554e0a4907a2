"""A float chunk copied with statistics of lading's own (``parquetfooter.float_statistics``,
``pages_without_statistics``): the statistics must be, field for field, what pyarrow writes for
the same values (NaN left out, a zero minimum -0.0 and a zero maximum +0.0, none when no value
is a number), and only chunks whose page headers hold no statistics qualify."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs.formats import thrift
from lading_jobs.formats.parquetfooter import (
    CC_META,
    CM_STATISTICS,
    FMD_GROUPS,
    RG_COLUMNS,
    float_statistics,
    footer_bytes,
    pages_without_statistics,
)

SPECIAL = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, None]


def pyarrow_chunk(values: pa.Array, **options: object) -> tuple[thrift.Struct | None, pa.Buffer]:
    """The statistics pyarrow's footer holds for ``values`` as one chunk, and the chunk's bytes."""
    buf = pa.BufferOutputStream()
    pq.write_table(pa.table({"x": values}), buf, **options)  # type: ignore[arg-type]
    data = buf.getvalue()
    cc = thrift.decode(footer_bytes(data)).get(FMD_GROUPS).values[0].get(RG_COLUMNS).values[0]
    md = pq.read_metadata(pa.BufferReader(data)).row_group(0).column(0)
    start = md.dictionary_page_offset or md.data_page_offset
    return cc.get(CC_META).get(CM_STATISTICS), data.slice(start, md.total_compressed_size)


def cases() -> list[tuple[str, list[float | None]]]:
    rng = np.random.default_rng(44)
    out: list[tuple[str, list[float | None]]] = [
        ("nan only", [float("nan")] * 3), ("null only", [None, None]), ("nan and null", [float("nan"), None]),
        ("zeros", [0.0, -0.0]), ("negative zero only", [-0.0]), ("positive zero only", [0.0]),
        ("zero max", [-3.5, 0.0, None]), ("negative zero max", [-2.0, -0.0]), ("zero min", [0.0, 7.25]),
        ("negative zero min", [-0.0, float("nan"), 1.0]), ("infinities", [float("-inf"), float("inf")]),
        ("nan beside numbers", [float("nan"), 2.0, -1.0, float("nan")]), ("one", [1.5]),
    ]
    for k in range(12):
        n = int(rng.integers(1, 400))
        values: list[float | None] = list(rng.normal(scale=10.0 ** int(rng.integers(-3, 9)), size=n))
        for i in rng.integers(0, n, size=int(rng.integers(0, 6))):
            values[int(i)] = SPECIAL[int(rng.integers(0, len(SPECIAL)))]
        out.append((f"random {k}", values))
    return out


@pytest.mark.parametrize("width", ["double", "float"])
@pytest.mark.parametrize(("name", "values"), cases(), ids=[name for name, _ in cases()])
def test_float_statistics_are_what_pyarrow_writes(name: str, values: list[float | None], width: str) -> None:
    arrow = pa.array(values, pa.float64() if width == "double" else pa.float32())
    expected, _ = pyarrow_chunk(arrow, use_dictionary=False)
    ours = float_statistics(arrow)
    assert expected is not None
    assert ours.fields == expected.fields, name
    assert thrift.encode(ours) == thrift.encode(expected)
    # and as chunks of a batch split in pieces (the decoded group may come in several)
    chunked = pa.chunked_array([arrow.slice(0, len(arrow) // 2), arrow.slice(len(arrow) // 2)], arrow.type)
    assert float_statistics(chunked).fields == expected.fields


def test_a_bound_is_never_nan() -> None:
    stats = float_statistics(pa.array([float("nan"), 1.0, float("nan")]))
    for fid in (1, 2, 5, 6):
        assert not math.isnan(float(np.frombuffer(stats.get(fid), "<f8")[0]))


def test_pages_with_statistics_do_not_qualify_and_pages_without_do() -> None:
    values = pa.array([i / 3 if i % 5 else None for i in range(50_000)])
    _, plain = pyarrow_chunk(values, use_dictionary=False)
    _, dictionary = pyarrow_chunk(pa.array([float(i % 7) for i in range(50_000)]))
    _, v2 = pyarrow_chunk(values, data_page_version="2.0")
    assert not pages_without_statistics(plain)  # pyarrow writes page statistics
    assert not pages_without_statistics(dictionary)
    assert not pages_without_statistics(v2)
    _, bare = pyarrow_chunk(values, use_dictionary=False, write_statistics=False)
    _, bare_dictionary = pyarrow_chunk(pa.array([float(i % 7) for i in range(50_000)]), write_statistics=False)
    _, bare_v2 = pyarrow_chunk(values, data_page_version="2.0", write_statistics=False)
    assert pages_without_statistics(bare) and pages_without_statistics(bare_dictionary)
    assert pages_without_statistics(bare_v2)
    # anything not read as pages to the chunk's end does not qualify
    raw = bare.to_pybytes()
    assert not pages_without_statistics(raw[:-1])
    assert not pages_without_statistics(raw + b"\x00")
    assert not pages_without_statistics(b"\xff" * 16)
    assert pages_without_statistics(b"")
