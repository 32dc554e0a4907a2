"""Writing a load task's good rows as table parts that stay invisible until the commit.

A part is plain Parquet in the table's part schema (user columns with their ids
as Parquet field ids, then ``_lading_time`` and ``_lading_diff``; see
docs/table-format.md). Each row of a load gets the same logical time (the load
is one transaction) and diff +1. The task uploads the part as a *pending*
upload and hands back its ``Part`` record (path, size, statistics computed from
the Arrow data being written, not by reading back) and the upload, so the
driver can complete every upload and commit them together, or abort them all.
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table.log import Part
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats import table_stats

ROW_GROUP_ROWS = 1_000_000
PART_ROWS = 4_000_000  # a file with more good rows than this is written as several parts


@dataclass
class PendingPart:
    part: Part
    upload: st.PendingUpload

    def to_dict(self) -> dict[str, Any]:
        return {"part": self.part.to_dict(), "upload": self.upload.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PendingPart:
        return cls(Part.from_dict(d["part"]), st.PendingUpload.from_dict(d["upload"]))


def sort_rows(table: pa.Table, sort_by: tuple[str, ...]) -> pa.Table:
    """Rows in the table's sort order (ascending, NULLs last), when it has one."""
    if not sort_by or table.num_rows < 2:
        return table
    names = {n.lower(): n for n in table.column_names}
    keys = [(names[c.lower()], "ascending") for c in sort_by if c.lower() in names]
    return table.sort_by(keys) if keys else table


def part_table(rows: pa.Table, schema: TableSchema, time: int, table_id: str, envelope: str) -> pa.Table:
    """``rows`` (user columns, in schema order) with time and diff, in the part schema."""
    arrow = schema.arrow_schema(internal=True, table_id=table_id, envelope=envelope)
    n = rows.num_rows
    columns = [rows.column(c.name) for c in schema.columns]
    columns += [pa.repeat(pa.scalar(time, pa.int64()), n), pa.repeat(pa.scalar(1, pa.int64()), n)]
    return pa.Table.from_arrays(columns, schema=arrow)


def write_parts(storage: st.Storage, table_uri: str, write_id: str, task: int, rows: pa.Table,
                schema: TableSchema, time: int, table_id: str, envelope: str,
                sort_by: tuple[str, ...] = ()) -> list[PendingPart]:
    """Upload ``rows`` as one or more pending parts; nothing is visible until completed."""
    out: list[PendingPart] = []
    ids = {c.name: c.id for c in schema.columns}
    rows = sort_rows(rows, sort_by)
    for n, start in enumerate(range(0, rows.num_rows, PART_ROWS)):
        chunk = part_table(rows.slice(start, PART_ROWS), schema, time, table_id, envelope)
        buf = io.BytesIO()
        pq.write_table(chunk, buf, row_group_size=ROW_GROUP_ROWS, compression="zstd", store_schema=True)
        data = buf.getvalue()
        path = fmt.part_path(write_id, task, n)
        upload = storage.begin_upload(fmt.part_uri(table_uri, path))
        try:
            storage.upload_part(upload, data)
        except Exception:
            storage.abort_upload(upload)
            raise
        stats = dataclasses.replace(table_stats(chunk, ids), bytes=len(data))
        out.append(PendingPart(Part(path, len(data), stats, schema_id=schema.schema_id), upload))
    return out


def row_count(parts: list[PendingPart]) -> int:
    return sum(p.part.rows for p in parts)
