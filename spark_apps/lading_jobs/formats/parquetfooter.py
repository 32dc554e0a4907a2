"""Parquet footers for files assembled from column chunks as stored, with lading's ``thrift`` codec.

A file built from other files' column chunks (``unload.chunkcopy``: an unload's
Parquet sources; ``compact.groupcopy``: a compaction's parts) needs a footer that
says where each chunk now lies. The schema, key-value metadata and column orders
come from what pyarrow writes for the output's Arrow schema (``Reference``), each
row group's metadata from where its chunks came (offsets moved), lading as the
writer. ``FooterSize`` measures a footer before it is written, so a size ceiling
holds. Field ids are named after parquet.thrift.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lading_jobs.formats import thrift
from lading_spec.version import VERSION

MAGIC = b"PAR1"
CODECS = {"none": 0, "snappy": 1, "gzip": 2, "zstd": 6}
CREATED_BY = f"lading version {VERSION}".encode()

# parquet.thrift field ids
FMD_VERSION, FMD_SCHEMA, FMD_ROWS, FMD_GROUPS, FMD_KV, FMD_CREATED_BY, FMD_ORDERS = 1, 2, 3, 4, 5, 6, 7
FMD_ENCRYPTION, FMD_SIGNING_KEY = 8, 9
SE_TYPE_FIELDS = (1, 2, 3, 6, 7, 8, 10)  # type, type_length, repetition, converted type, scale, precision, logical
SE_NAME, SE_CHILDREN = 4, 5
RG_COLUMNS, RG_BYTES, RG_ROWS, RG_SORTING, RG_OFFSET, RG_STORED, RG_ORDINAL = 1, 2, 3, 4, 5, 6, 7
CM_VALUES = 5
CC_PATH, CC_OFFSET, CC_META = 1, 2, 3
CC_INDEXES = (4, 5, 6, 7)  # offset and column index offsets and lengths
CC_CRYPTO = (8, 9)
CM_PATH, CM_CODEC, CM_BYTES, CM_STORED = 3, 4, 6, 7
CM_DATA_PAGE, CM_INDEX_PAGE, CM_DICTIONARY_PAGE, CM_STATISTICS, CM_BLOOM = 9, 10, 11, 12, (14, 15)
PH_TYPE, PH_STORED, PH_DATA, PH_DATA_V2 = 1, 3, 5, 8  # PageHeader: type, compressed size, the data page headers
DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 2, 3  # PageType
DPH_STATISTICS, DPH2_STATISTICS = 5, 8  # DataPageHeader's and DataPageHeaderV2's statistics
ST_MAX, ST_MIN, ST_NULLS, ST_MAX_VALUE, ST_MIN_VALUE, ST_MAX_EXACT, ST_MIN_EXACT = 1, 2, 3, 5, 6, 7, 8
BOUNDS = (ST_MAX, ST_MIN, ST_MAX_VALUE, ST_MIN_VALUE)


_WRITERS = (re.compile(rb"parquet-mr version (\d+)\.(\d+)"), re.compile(rb"parquet-cpp-arrow version (\d+)"))


def trusted_writer(created_by: bytes | None) -> bool:
    """parquet-mr 1.10 and later, parquet-cpp-arrow: statistics in the type's order."""
    if not created_by:
        return False
    mr = _WRITERS[0].match(created_by)
    if mr is not None:
        return (int(mr.group(1)), int(mr.group(2))) >= (1, 10)
    return _WRITERS[1].match(created_by) is not None


# -- the output's footer, from what pyarrow would write -------------------------------------
@dataclass
class Reference:
    """What pyarrow writes for the output schema and options: its footer's schema elements
    (one per top-level column, after the root), key-value metadata and column orders."""

    footer: thrift.Struct
    leaves: list[thrift.Struct]
    codec: int

    @classmethod
    def of(cls, schema: pa.Schema, options: dict[str, Any], compression: str) -> Reference:
        buf = pa.BufferOutputStream()
        pq.ParquetWriter(buf, schema, **options).close()
        footer = thrift.decode(footer_bytes(buf.getvalue()))
        elements = footer.get(FMD_SCHEMA).values
        return cls(footer, elements[1:], CODECS[compression])

    def flat(self) -> bool:
        return all(e.get(SE_CHILDREN) is None for e in self.leaves)


def footer_bytes(data: bytes | pa.Buffer) -> bytes:
    """The encoded footer of a whole Parquet file in memory (only the footer is copied out)."""
    view = memoryview(data)
    if len(view) < 12 or view[:4] != MAGIC or view[-4:] != MAGIC:
        raise ValueError("not a Parquet file")
    n = int.from_bytes(view[-8:-4], "little")
    return bytes(view[-8 - n:-8])


def read_footer(f: Any, size: int) -> thrift.Struct | None:
    """The footer of an open Parquet file, or None when it is not plain Parquet (encrypted)."""
    f.seek(size - 8)
    tail = f.read(8)
    if tail[4:] != MAGIC:
        return None
    n = int.from_bytes(tail[:4], "little")
    f.seek(size - 8 - n)
    return thrift.decode(f.read(n))


# -- files assembled from column chunks ------------------------------------------------------
@dataclass
class Chunk:
    data: bytes | pa.Buffer
    meta: thrift.Struct  # a ColumnChunk, offsets relative to the chunk's first byte


def chunk_start(meta: thrift.Struct) -> int:
    md = meta.get(CC_META)
    dictionary = md.get(CM_DICTIONARY_PAGE)
    data = md.get(CM_DATA_PAGE)
    return dictionary if dictionary is not None and 0 < dictionary < data else data


def edited(cc: thrift.Struct) -> tuple[thrift.Struct, thrift.Struct]:
    """A ColumnChunk and its ColumnMetaData to edit (set and drop their own fields) without
    changing ``cc``: copied one level deep, everything below shared (a deep copy of every
    chunk's statistics and lists, per row group written, was a tenth of a copy's CPU)."""
    out, md = cc.shallow(), cc.get(CC_META).shallow()
    out.set(CC_META, thrift.STRUCT, md)
    return out, md


def placed(chunk: Chunk, at: int) -> thrift.Struct:
    cc, md = edited(chunk.meta)
    cc.set(CC_OFFSET, thrift.I64, at)
    for fid in (CM_DATA_PAGE, CM_DICTIONARY_PAGE):
        if md.get(fid) is not None:
            md.set(fid, thrift.I64, md.get(fid) + at)
    return cc


def footer(reference: Reference, groups: Sequence[thrift.Struct | thrift.Encoded], rows: int) -> bytes:
    """The encoded footer of a file of ``groups`` holding ``rows`` rows: pyarrow's schema,
    key-value metadata and column orders for the output, lading as the writer."""
    out = thrift.Struct()
    for fid in (FMD_VERSION, FMD_SCHEMA, FMD_KV, FMD_ORDERS):
        if fid in reference.footer.fields:
            out.fields[fid] = reference.footer.fields[fid]
    out.set(FMD_ROWS, thrift.I64, rows)
    out.set(FMD_GROUPS, thrift.LIST, thrift.List(thrift.STRUCT, list(groups)))
    out.set(FMD_CREATED_BY, thrift.BINARY, CREATED_BY)
    return thrift.encode(out)


class FooterSize:
    """The size of ``footer`` from its parts' sizes, without encoding it: what it holds beside
    the row count and the row groups is the same in every file of a task, and each row group
    is encoded on its own (a compact-protocol struct in a list does not depend on its
    neighbours). Checking the ceiling before each row group then costs that row group's
    encoding, not the whole footer's again."""

    def __init__(self, reference: Reference) -> None:
        empty = len(footer(reference, [], 0))
        self.base = empty - thrift.size_i64(0) - thrift.size_list_header(0)

    def of(self, rows: int, groups: int, group_bytes: int) -> int:
        return self.base + thrift.size_i64(rows) + thrift.size_list_header(groups) + group_bytes

    def closing(self, at: int, chunks: list[Chunk], rows: int, rows_before: int = 0, groups_before: int = 0,
                bytes_before: int = 0) -> tuple[thrift.Encoded, int]:
        """The row group of ``chunks`` placed at ``at``, encoded, and the size of the file it ends
        once closed (after ``groups_before`` row groups of ``bytes_before`` encoded bytes holding
        ``rows_before`` rows)."""
        group = thrift.Encoded(thrift.encode(row_group(chunks, rows, at)))
        size = self.of(rows_before + rows, groups_before + 1, bytes_before + len(group.data))
        return group, at + sum(len(c.data) for c in chunks) + size + 8


def row_group(chunks: list[Chunk], rows: int, at: int) -> thrift.Struct:
    """The RowGroup of ``chunks`` written one after another from offset ``at`` (no ``ordinal``: a
    Thrift i16 only encrypted files use; pyarrow writes none either)."""
    columns = []
    pos = at
    for c in chunks:
        columns.append(placed(c, pos))
        pos += len(c.data)
    g = thrift.Struct()
    g.set(RG_COLUMNS, thrift.LIST, thrift.List(thrift.STRUCT, columns))
    g.set(RG_BYTES, thrift.I64, sum(cc.get(CC_META).get(CM_BYTES) for cc in columns))
    g.set(RG_ROWS, thrift.I64, rows)
    g.set(RG_OFFSET, thrift.I64, at)
    g.set(RG_STORED, thrift.I64, pos - at)
    return g


# -- a float chunk copied with statistics of lading's own --------------------------------------
def pages_without_statistics(data: bytes | pa.Buffer) -> bool:
    """Whether the column chunk ``data`` (its pages as stored) is dictionary and data pages
    only, none of whose headers carries bounds (parquet-mr ≥ 1.11 writes no page statistics:
    page bounds went to the column index; pyarrow without statistics an empty struct), and
    nothing else: then the chunk's statistics in the footer are the only bounds a reader
    finds, and a writer may put its own there. Anything it cannot read as such is False."""
    view = memoryview(data)
    pos = 0
    try:
        while pos < len(view):
            header, size = thrift.decode_prefix(view[pos:])
            kind, stored = header.get(PH_TYPE), header.get(PH_STORED)
            if not isinstance(stored, int) or stored < 0:
                return False
            if kind in (DATA_PAGE, DATA_PAGE_V2):
                page = header.get(PH_DATA if kind == DATA_PAGE else PH_DATA_V2)
                if not isinstance(page, thrift.Struct):
                    return False
                stats = page.get(DPH_STATISTICS if kind == DATA_PAGE else DPH2_STATISTICS)
                if stats is not None and (not isinstance(stats, thrift.Struct)
                                          or any(stats.get(f) is not None for f in BOUNDS)):
                    return False
            elif kind != DICTIONARY_PAGE:
                return False
            pos += size + stored
    except thrift.ThriftError:
        return False
    return pos == len(view)


def float_statistics(column: pa.Array | pa.ChunkedArray) -> thrift.Struct:
    """The column chunk statistics pyarrow writes for float or double ``column``: the null
    count; bounds of the values that are not NaN, none if there are none; a zero minimum as
    -0.0 and a zero maximum as +0.0 (parquet.thrift's rule for floats); in the deprecated
    fields too, both marked exact."""
    out = thrift.Struct()
    packing = "<d" if pa.types.is_float64(column.type) else "<f"
    if column.null_count < len(column):
        mm = pc.min_max(column)  # NaN is skipped unless every value is NaN
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if not math.isnan(lo):
            lo, hi = -0.0 if lo == 0 else lo, 0.0 if hi == 0 else hi
            out.set(ST_MAX, thrift.BINARY, struct.pack(packing, hi))
            out.set(ST_MIN, thrift.BINARY, struct.pack(packing, lo))
            out.set(ST_MAX_VALUE, thrift.BINARY, struct.pack(packing, hi))
            out.set(ST_MIN_VALUE, thrift.BINARY, struct.pack(packing, lo))
            out.set(ST_MAX_EXACT, thrift.TRUE, True)
            out.set(ST_MIN_EXACT, thrift.TRUE, True)
    out.set(ST_NULLS, thrift.I64, column.null_count)
    return out
