"""What ``deltalake`` does not write, written into a Delta log by hand for the Delta inputs' tests:
a deletion vector (delta-rs rewrites files on DELETE instead) and a protocol that asks for a
reader feature. Both follow PROTOCOL.md: a deletion vector is a ``RoaringBitmapArray`` (magic
1681511377, its 32-bit roaring bitmaps in the portable serialization) in a file of its own
(version byte, then per vector its size, the data and its CRC-32, big-endian), named by an
``add`` action's ``deletionVector`` with ``storageType: u`` (a UUID in Z85, the file
``deletion_vector_<uuid>.bin`` in the table's directory: what Delta Spark writes)."""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

ROARING_ARRAY_MAGIC = 1681511377
Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    """ZeroMQ's Z85 encoding (``len(data)`` a multiple of 4)."""
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i:i + 4], "big")
        out.append("".join(Z85[value // 85 ** k % 85] for k in range(4, -1, -1)))
    return "".join(out)
SERIAL_COOKIE_NO_RUNCONTAINER = 12346


def _roaring32(values: list[int]) -> bytes:
    """A 32-bit roaring bitmap in the portable format (array and bitmap containers, no runs)."""
    by_key: dict[int, list[int]] = {}
    for v in sorted(set(values)):
        by_key.setdefault(v >> 16, []).append(v & 0xFFFF)
    keys = sorted(by_key)
    header = struct.pack("<II", SERIAL_COOKIE_NO_RUNCONTAINER, len(keys))
    header += b"".join(struct.pack("<HH", k, len(by_key[k]) - 1) for k in keys)
    bodies = []
    for k in keys:
        lows = by_key[k]
        if len(lows) <= 4096:
            bodies.append(struct.pack(f"<{len(lows)}H", *lows))
        else:
            bits = bytearray(8192)
            for low in lows:
                bits[low >> 3] |= 1 << (low & 7)
            bodies.append(bytes(bits))
    offset, offsets = len(header) + 4 * len(keys), b""
    for body in bodies:
        offsets += struct.pack("<I", offset)
        offset += len(body)
    return header + offsets + b"".join(bodies)


def roaring_array(positions: list[int]) -> bytes:
    """Delta's ``RoaringBitmapArray`` serialization of a set of 64-bit row positions."""
    high: dict[int, list[int]] = {}
    for p in sorted(set(positions)):
        high.setdefault(p >> 32, []).append(p & 0xFFFFFFFF)
    out = struct.pack("<iq", ROARING_ARRAY_MAGIC, len(high))
    for k in sorted(high):
        out += struct.pack("<i", k) + _roaring32(high[k])
    return out


def _next_version(table: Path) -> int:
    return max(int(p.name.split(".")[0]) for p in (table / "_delta_log").glob("*.json")) + 1


def _commit(table: Path, actions: list[dict[str, Any]], operation: str) -> int:
    version = _next_version(table)
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": operation}}
    lines = [json.dumps(info), *(json.dumps(a) for a in actions)]
    with open(table / "_delta_log" / f"{version:020d}.json", "x") as f:
        f.write("\n".join(lines) + "\n")
    return version


def delete_rows(table: Path, add: dict[str, Any], positions: list[int]) -> int:
    """Commit a deletion vector over the data file of ``add`` (an add action of the newest
    version, as the log has it) that deletes the rows at ``positions``; the new version."""
    data = roaring_array(positions)
    name = uuid.uuid4()
    path = table / f"deletion_vector_{name}.bin"
    path.write_bytes(b"\x01" + struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data)))
    remove = {"path": add["path"], "deletionTimestamp": int(time.time() * 1000), "dataChange": True,
              "extendedFileMetadata": True, "partitionValues": add["partitionValues"], "size": add["size"]}
    new = {**add, "dataChange": True, "deletionVector": {
        "storageType": "u", "pathOrInlineDv": z85(name.bytes), "offset": 1, "sizeInBytes": len(data),
        "cardinality": len(set(positions))}}
    return _commit(table, [{"remove": remove}, {"add": new}], "DELETE")


def live_adds(table: Path) -> list[dict[str, Any]]:
    """The add actions of the newest version, from the JSON commits alone (no checkpoint read)."""
    live: dict[str, dict[str, Any]] = {}
    for p in sorted((table / "_delta_log").glob("*.json")):
        for line in p.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return list(live.values())


def require_reader_feature(table: Path, feature: str) -> int:
    """Commit a protocol that asks readers for ``feature``; the new version."""
    return _commit(table, [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [feature],
                                         "writerFeatures": [feature]}}], "SET TBLPROPERTIES")
