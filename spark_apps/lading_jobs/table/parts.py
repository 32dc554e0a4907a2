"""Reading one part in pure Arrow: its rows in the current schema, row groups skipped by statistics.

``read_part`` opens a part, skips the row groups whose Parquet statistics prove no row matches
the pushed conjuncts that may skip (``skipping_predicate``: in an upsert table only those over
key columns, see ``table.reader``), maps columns to the current schema by id and adds what orders
rows of equal time (seq and pos) for consolidation. The reader's tasks, compaction and the Iceberg
mirror's copy and delete files all read parts through it, so it lives below the reader: it
imports neither Spark nor the reader or writer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lading_jobs import storage as st
from lading_jobs.formats import types as format_types
from lading_jobs.table import consolidate as cons
from lading_jobs.table import format as fmt
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.filters import interp
from lading_jobs.table.log.commits import Part, Snapshot
from lading_jobs.table.schema import conform, field_id
from lading_jobs.table.stats.part import ColumnStats, PartStats, to_stats_domain


def skipping_predicate(snapshot: Snapshot, predicate: ex.Expr | None) -> ex.Expr:
    """The part of ``predicate`` that may skip parts without changing answers (see module doc)."""
    if predicate is None:
        return ex.AlwaysTrue()
    if snapshot.envelope != "upsert":
        return predicate
    key_ids = {snapshot.schema.column(k).id for k in snapshot.key_columns}
    return ex.and_all([c for c in ex.conjuncts(predicate) if ex.column_ids(c) <= key_ids])


def _leaf_fields(arrow_schema: pa.Schema) -> list[tuple[int | None, bool]]:
    """Per Parquet leaf column: (field id of its top-level column, naive timestamp?), or
    (None, False) for leaves inside nested columns, whose statistics say nothing about it,
    and for floats, whose Parquet bounds ignore NaN."""
    out: list[tuple[int | None, bool]] = []
    for fld in arrow_schema:
        if pa.types.is_nested(fld.type):
            out += [(None, False)] * format_types.parquet_leaves(fld.type)
        elif pa.types.is_floating(fld.type):
            out.append((None, False))  # Parquet leaves NaN out of float bounds; Spark orders it highest
        else:
            out.append((field_id(fld), pa.types.is_timestamp(fld.type) and fld.type.tz is None))
    return out


def _row_group_stats(md: pq.FileMetaData, rg_index: int,
                     leaves: list[tuple[int | None, bool]]) -> tuple[PartStats, int | None]:
    rg = md.row_group(rg_index)
    cols: dict[int, ColumnStats] = {}
    min_time = None
    for j in range(rg.num_columns):
        fid, naive = leaves[j] if j < len(leaves) else (None, False)
        s = rg.column(j).statistics
        if fid is None or s is None:
            continue
        nulls = s.null_count if s.has_null_count else None
        lo = to_stats_domain(s.min, naive_utc=naive) if s.has_min_max else None
        hi = to_stats_domain(s.max, naive_utc=naive) if s.has_min_max else None
        if fid == fmt.TIME_FIELD_ID:
            min_time = lo
        cols[fid] = ColumnStats(nulls, lo, hi)
    return PartStats(rows=rg.num_rows, columns=cols), min_time


def read_part(storage: st.Storage, snapshot: Snapshot, part: Part, predicate: ex.Expr | None = None, *,
              order: bool = True, dictionary: Sequence[str] = ()) -> pa.Table:
    """One part's rows in the current schema, with time, diff, seq and pos; row groups skipped.

    ``order=False`` leaves out seq and pos (what orders rows of equal time in an
    upsert table), for callers that never rank rows. ``dictionary``: string or binary
    columns of the current schema to read as dictionary arrays (not decoded value by
    value; a compaction writes them as they are) in parts written with that schema.
    """
    skip = skipping_predicate(snapshot, predicate)
    # a part of the current schema holds these columns under these names (another's may not)
    as_dictionary = list(dictionary) if dictionary and part.schema_id == snapshot.schema.schema_id else []
    with storage.open_input(snapshot.part_uri(part), part.size) as f:
        try:
            pf = pq.ParquetFile(f, read_dictionary=as_dictionary or None)
        except KeyError:  # not written by lading under these names after all: decode as usual
            as_dictionary = []
            pf = pq.ParquetFile(f)
        arrow_schema = pf.schema_arrow
        ids = [field_id(fld) for fld in arrow_schema]
        keep_ids = {c.id for c in snapshot.schema.columns} | {fmt.TIME_FIELD_ID, fmt.DIFF_FIELD_ID}
        columns = [fld.name for fld, fid in zip(arrow_schema, ids, strict=True) if fid in keep_ids]
        md = pf.metadata
        wanted, starts, offset = [], [], 0
        if skip == ex.TRUE and snapshot.as_of is None:
            # nothing to skip by: every row group, without turning their statistics into Python
            for i in range(md.num_row_groups):
                wanted.append(i)
                starts.append(offset)
                offset += md.row_group(i).num_rows
        else:
            leaves = _leaf_fields(arrow_schema)
            for i in range(md.num_row_groups):
                rg_stats, rg_min_time = _row_group_stats(md, i, leaves)
                if not (snapshot.as_of is not None and rg_min_time is not None and rg_min_time > snapshot.as_of) \
                        and interp.might_match(skip, rg_stats):
                    wanted.append(i)
                    starts.append(offset)
                offset += md.row_group(i).num_rows
        if not wanted:
            table = arrow_schema.empty_table().select(columns)
            positions = pa.array([], pa.int64())
        else:
            table = pf.read_row_groups(wanted, columns=columns, use_threads=False)
            positions = pa.concat_arrays([
                pa.array(np.arange(start, start + md.row_group(i).num_rows, dtype=np.int64))
                for i, start in zip(wanted, starts, strict=True)]) if order else None
    out = conform(table, snapshot.schema, dictionaries=bool(as_dictionary))
    if not order:
        return out
    out = out.append_column(cons.SEQ_COLUMN, pa.repeat(pa.scalar(part.order, pa.int64()), out.num_rows))
    return out.append_column(cons.POS_COLUMN, positions)
