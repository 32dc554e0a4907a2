"""Thrift's compact protocol, generically: a Parquet footer read into plain values and written back.

A Parquet footer (``FileMetaData``) is a Thrift struct in the compact protocol.
``decode`` turns one into nested Python values without knowing its schema: a
struct is a ``Struct`` (field id → ``(type, value)``), a list a ``List`` (element
type, values); ``encode`` writes them back. Unknown fields (a newer writer's)
travel unchanged, so a footer edited here (offsets moved, fields dropped) keeps
everything it does not touch, and ``encode(decode(b)) == b`` for the canonical
encoding every Parquet writer uses (fields in ascending id order).

Used by ``chunkcopy`` to read a source file's footer and write the footer of a
file assembled from copied column chunks; the field ids it edits are named
there, after parquet.thrift.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)


class ThriftError(ValueError):
    """Bytes that are not a compact-protocol struct."""


@dataclass
class List:
    elem: int
    values: list[Any] = field(default_factory=list)


@dataclass
class Struct:
    fields: dict[int, tuple[int, Any]] = field(default_factory=dict)

    def get(self, fid: int, default: Any = None) -> Any:
        found = self.fields.get(fid)
        return default if found is None else found[1]

    def set(self, fid: int, ttype: int, value: Any) -> None:
        self.fields[fid] = (ttype, value)

    def drop(self, *fids: int) -> None:
        for fid in fids:
            self.fields.pop(fid, None)

    def copy(self) -> Struct:
        """A copy deep enough to edit: nested structs and lists are copied, leaves shared."""
        return Struct({k: (t, _copy(v)) for k, (t, v) in self.fields.items()})

    def shallow(self) -> Struct:
        """A copy whose own fields may be set and dropped; what they hold is shared, not to be edited."""
        return Struct(dict(self.fields))


@dataclass(frozen=True)
class Encoded:
    """A struct already encoded (``encode``'s bytes), written as it is where a ``Struct`` may be."""

    data: bytes


def _copy(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.copy()
    if isinstance(value, List):
        return List(value.elem, [_copy(v) for v in value.values])
    return value


# -- reading -----------------------------------------------------------------------------------
class _Reader:
    def __init__(self, data: bytes | memoryview) -> None:
        self.data = memoryview(data).cast("B")  # bytes as 0–255 whatever the buffer's format (pyarrow's: signed)
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ThriftError("truncated")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        data, pos = self.data, self.pos
        if pos < len(data) and data[pos] < 0x80:  # one byte: most field values and lengths
            self.pos = pos + 1
            return data[pos]
        shift = result = 0
        while True:
            if pos >= len(data):
                raise ThriftError("truncated")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos
                return result
            shift += 7
            if shift > 70:
                raise ThriftError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ThriftError("truncated")
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def value(self, ttype: int, depth: int) -> Any:
        if depth > 64:
            raise ThriftError("nested too deeply")
        if ttype in (TRUE, FALSE):  # a bool inside a list or map: one byte (1 true; writers differ on false)
            return self.byte() == TRUE
        if ttype == BYTE:
            b = self.byte()
            return b - 256 if b > 127 else b
        if ttype in (I16, I32, I64):
            return self.zigzag()
        if ttype == DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if ttype == BINARY:
            return self.take(self.varint())
        if ttype in (LIST, SET):
            head = self.byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            return List(elem, [self.value(elem, depth + 1) for _ in range(size)])
        if ttype == MAP:
            raise ThriftError("maps do not occur in Parquet footers")
        if ttype == STRUCT:
            return self.struct(depth + 1)
        raise ThriftError(f"unknown type {ttype}")

    def struct(self, depth: int = 0) -> Struct:
        out = Struct()
        last = 0
        while True:
            head = self.byte()
            ttype = head & 0x0F
            if ttype == STOP:
                return out
            delta = head >> 4
            fid = last + delta if delta else self.zigzag()
            if ttype in (TRUE, FALSE):
                out.fields[fid] = (ttype, ttype == TRUE)
            else:
                out.fields[fid] = (ttype, self.value(ttype, depth))
            last = fid


def decode(data: bytes | memoryview) -> Struct:
    """The struct at the start of ``data`` (trailing bytes are an error: a footer is exact)."""
    reader = _Reader(data)
    out = reader.struct()
    if reader.pos != len(reader.data):
        raise ThriftError(f"{len(reader.data) - reader.pos} bytes after the struct")
    return out


def decode_prefix(data: bytes | memoryview) -> tuple[Struct, int]:
    """The struct at the start of ``data`` and the bytes it takes (a Parquet page header, say,
    which its page's bytes follow)."""
    reader = _Reader(data)
    out = reader.struct()
    return out, reader.pos


# -- writing -----------------------------------------------------------------------------------
def _varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(out: bytearray, n: int) -> None:
    _varint(out, (n << 1) ^ (n >> 63) if n < 0 else n << 1)


def _value(out: bytearray, ttype: int, value: Any) -> None:
    if ttype in (TRUE, FALSE):
        out.append(TRUE if value else FALSE)
    elif ttype == BYTE:
        out.append(value & 0xFF)
    elif ttype in (I16, I32, I64):
        _zigzag(out, int(value))
    elif ttype == DOUBLE:
        out += struct.pack("<d", value)
    elif ttype == BINARY:
        _varint(out, len(value))
        out += value
    elif ttype in (LIST, SET):
        size = len(value.values)
        if size < 15:
            out.append(size << 4 | value.elem)
        else:
            out.append(0xF0 | value.elem)
            _varint(out, size)
        for v in value.values:
            _value(out, value.elem, v)
    elif ttype == STRUCT:
        if isinstance(value, Encoded):
            out += value.data
        else:
            _struct(out, value)
    else:
        raise ThriftError(f"cannot write type {ttype}")


def _struct(out: bytearray, value: Struct) -> None:
    last = 0
    for fid in sorted(value.fields):
        ttype, v = value.fields[fid]
        wire = (TRUE if v else FALSE) if ttype in (TRUE, FALSE) else ttype
        if 0 < fid - last <= 15:
            out.append((fid - last) << 4 | wire)
        else:
            out.append(wire)
            _zigzag(out, fid)
        if ttype not in (TRUE, FALSE):
            _value(out, ttype, v)
        last = fid
    out.append(STOP)


def _varint_size(n: int) -> int:
    size = 1
    while n > 0x7F:
        n >>= 7
        size += 1
    return size


def size_i64(n: int) -> int:
    """The bytes an I16/I32/I64 value ``n`` takes (its field header apart)."""
    return _varint_size((n << 1) ^ (n >> 63) if n < 0 else n << 1)


def size_list_header(size: int) -> int:
    """The bytes the header of a list of ``size`` elements takes."""
    return 1 if size < 15 else 1 + _varint_size(size)


def encode(value: Struct) -> bytes:
    out = bytearray()
    _struct(out, value)
    return bytes(out)
