"""The compact-protocol codec Parquet footers are read and written with (chunkcopy's footers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs.formats import thrift
from lading_jobs.unload import chunkcopy


def rows(n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "s": [f"s{i}" if i % 3 else None for i in range(n)],
                     "f": pa.array([i / 7 for i in range(n)]), "b": [i % 2 == 0 for i in range(n)]})


@pytest.mark.parametrize("options", [{}, {"compression": "zstd", "use_dictionary": False},
                                     {"write_page_index": True, "row_group_size": 700}])
def test_footers_decode_and_encode_to_the_same_bytes(tmp_path: Path, options: dict[str, Any]) -> None:
    table = rows(3000).append_column("nested", pa.array([[i, None] for i in range(3000)]))
    pq.write_table(table, tmp_path / "f.parquet", **options)
    data = (tmp_path / "f.parquet").read_bytes()
    footer = chunkcopy._footer_bytes(data)
    decoded = thrift.decode(footer)
    assert thrift.encode(decoded) == footer
    assert decoded.get(chunkcopy.FMD_ROWS) == 3000
    assert len(decoded.get(chunkcopy.FMD_GROUPS).values) == pq.read_metadata(tmp_path / "f.parquet").num_row_groups


def test_a_truncated_footer_is_an_error() -> None:
    table = rows(10)
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    footer = chunkcopy._footer_bytes(buf.getvalue().to_pybytes())
    with pytest.raises(thrift.ThriftError):
        thrift.decode(footer[:-3])
    with pytest.raises(thrift.ThriftError):
        thrift.decode(footer + b"\x00")




def test_an_edited_footer_is_read_by_pyarrow(tmp_path: Path) -> None:
    pq.write_table(rows(100), tmp_path / "f.parquet")
    data = (tmp_path / "f.parquet").read_bytes()
    footer = thrift.decode(chunkcopy._footer_bytes(data))
    footer.set(chunkcopy.FMD_CREATED_BY, thrift.BINARY, b"x" * 300)  # a length past one varint byte
    footer.set(1000, thrift.I32, -5)  # a field id past the short form, as a newer writer's
    new = thrift.encode(footer)
    assert thrift.decode(new).get(1000) == -5
    n = int.from_bytes(data[-8:-4], "little")
    (tmp_path / "g.parquet").write_bytes(data[:-8 - n] + new + len(new).to_bytes(4, "little") + b"PAR1")
    assert pq.read_metadata(tmp_path / "g.parquet").created_by == "x" * 300
    assert pq.read_table(tmp_path / "g.parquet").equals(rows(100))


@pytest.mark.parametrize("n", [0, 1, 63, 64, 127, 128, 2**14, 2**31 - 1, 2**40, 2**63 - 1, -1, -64, -65, -(2**63)])
def test_sizes_are_those_of_the_encoding(n: int) -> None:
    s = thrift.Struct()
    s.set(1, thrift.I64, n)
    assert thrift.size_i64(n) == len(thrift.encode(s)) - 2  # field header and stop
    for size in (0, 1, 14, 15, 127, 128, 20000):
        lst = thrift.Struct()
        lst.set(1, thrift.LIST, thrift.List(thrift.I32, [0] * size))
        assert thrift.size_list_header(size) == len(thrift.encode(lst)) - 2 - size


def test_an_encoded_struct_is_written_as_the_struct_it_holds(tmp_path: Path) -> None:
    pq.write_table(pa.table({"a": list(range(50)), "s": [str(i) for i in range(50)]}), tmp_path / "f.parquet",
                   row_group_size=10)
    footer = thrift.decode(chunkcopy._footer_bytes((tmp_path / "f.parquet").read_bytes()))
    groups = footer.get(chunkcopy.FMD_GROUPS).values
    spliced = footer.copy()
    spliced.set(chunkcopy.FMD_GROUPS, thrift.LIST,
                thrift.List(thrift.STRUCT, [thrift.Encoded(thrift.encode(g)) for g in groups]))
    assert thrift.encode(spliced) == thrift.encode(footer)


def test_a_buffer_of_signed_bytes_decodes_as_bytes_do() -> None:
    # pyarrow's buffers show as signed chars to a memoryview: a header byte of 0x80 or more must
    # still be read as 0–255 (a field id delta above 7, a varint's continuation)
    s = thrift.Struct()
    s.set(9, thrift.I64, 1 << 40)
    s.set(17, thrift.BINARY, b"\xff" * 200)
    data = thrift.encode(s)
    assert any(b >= 0x80 for b in data)
    view = memoryview(pa.py_buffer(data))
    assert view.format == "b"
    assert thrift.decode(view) == thrift.decode(data) == s
    assert thrift.decode_prefix(memoryview(pa.py_buffer(data + b"rest"))) == (s, len(data))
