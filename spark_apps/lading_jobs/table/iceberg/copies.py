"""The Iceberg mirror's copy files: rows counting more than once, read that many times.

A lading row carries a count (``_lading_diff``): a row of diff *k* > 1 (identical rows a diff
table's compaction consolidated, or an append table's compaction merged while its mirror was off)
is *k* rows in lading's answer. An Iceberg reader returns each row of a data file once, so beside
such a part the mirror writes a **copy file** — Parquet, the part's user columns under the same
field ids, no lading-only column — holding *k* − 1 more copies of each such row, in the part's
row order, and lists it as a data file of every snapshot that lists the part (same sequence
numbers). Such parts are found from statistics (``_lading_diff``'s max above 1); only they are read.

The copy file of a part has a fixed name (``copies_uri``): it is written once, with a conditional
create, and never rewritten (a snapshot of an older schema may read it), so any publisher finds
it by the part's path. Its row order is fixed by the part alone (``copy_rows``), so a copy's
position is known from the part's diffs without reading the copy file (``expand``): the mirror's
position delete files (``table.iceberg.deletes``) cancel copies as they cancel rows, with lading's own
rule applied to the part's rows expanded to one row per count (``consolidate.diff_survivors``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from lading_jobs import storage as st
from lading_jobs.table import consolidate as cons
from lading_jobs.table import format as fmt
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import Part, Snapshot
from lading_jobs.table.parts import read_part

PART_COLUMN = "_lading_part"
"""The part's place in a list of parts (``deletes.read_identity``)."""
COPY_COLUMN = "_lading_copy"
"""In an expanded table (``expand``): the row's position in its part's copy file; -1 for the part's own row."""


def needed(envelope: str, part: Part) -> bool:
    """Whether ``part`` holds a row counting more than once, by its statistics (append and diff
    tables; an upsert table's row is in or out, once). Pure."""
    return envelope in ("append", "diff") and part.stats.max_diff is not None and part.stats.max_diff > 1


def copies_path(part_path: str) -> str:
    """The copy file of the part at ``part_path``, relative to the table root (under the mirror's
    ``metadata/``): a fixed name per part. Pure."""
    return f"metadata/{hashlib.sha256(part_path.encode()).hexdigest()[:32]}-copies.parquet"


def copies_uri(root: str, part_path: str) -> str:
    return fmt.table_root(root) + copies_path(part_path)


def copy_rows(diffs: np.ndarray) -> np.ndarray:
    """The copy file's rows as indices into the part's rows (in the part's order): each row of diff
    k > 1, k − 1 times. Pure."""
    return np.repeat(np.arange(len(diffs), dtype=np.int64), np.maximum(diffs - 1, 0))


def expand(table: pa.Table) -> pa.Table:
    """Rows of parts (``_lading_diff``, ``PART_COLUMN`` and ``_lading_pos``, every row of each
    part in its order) with each row of diff k > 1 as k rows of diff 1: the part's own row, then its
    k − 1 copies, ``COPY_COLUMN`` their positions in the part's copy file (-1: the part's row). Ties
    on (seq, pos) among them keep this order. Pure."""
    n = table.num_rows
    diffs = np.asarray(table.column(fmt.DIFF_COLUMN).to_numpy(zero_copy_only=False), dtype=np.int64)
    extra = np.maximum(diffs - 1, 0)
    if n == 0 or not extra.any():
        return table.append_column(COPY_COLUMN, pa.array(np.full(n, -1, dtype=np.int64)))
    part = np.asarray(table.column(PART_COLUMN).to_numpy(zero_copy_only=False), dtype=np.int64)
    pos = np.asarray(table.column(cons.POS_COLUMN).to_numpy(zero_copy_only=False), dtype=np.int64)
    starts = np.r_[True, part[1:] != part[:-1]]
    if not (pos[~starts] == pos[np.flatnonzero(~starts) - 1] + 1).all() or not (pos[starts] == 0).all():
        raise ValueError("expand needs every row of each part, in the part's order")
    before = np.cumsum(extra) - extra  # copies of the rows before, over the whole table
    first = before - before[starts][np.cumsum(starts) - 1]  # ... within the row's own part
    reps = 1 + extra
    idx = np.repeat(np.arange(n, dtype=np.int64), reps)
    j = np.arange(len(idx), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)  # 0: the row itself
    out = table.take(pa.array(idx))
    d = diffs[idx]
    out = out.set_column(out.schema.get_field_index(fmt.DIFF_COLUMN), fmt.DIFF_COLUMN,
                         pa.array(np.where(d > 1, 1, d), pa.int64()))
    return out.append_column(COPY_COLUMN, pa.array(np.where(j == 0, -1, first[idx] + j - 1), pa.int64()))


def write(storage: st.Storage, snapshot: Snapshot, part: Part) -> DataFile:
    """The copy file of ``part`` as an Iceberg data file, written first if it is not there (a
    conditional create: never rewritten). Its metrics: record and value counts, and the part's
    bounds (the copies are some of its rows, so never narrower); no null counts (unknown)."""
    root = fmt.table_root(snapshot.uri)
    uri = copies_uri(root, part.path)
    info = storage.head(uri)
    if info is None:
        rows = read_part(storage, dataclasses.replace(snapshot, as_of=None), part, order=False)
        diffs = np.asarray(rows.column(fmt.DIFF_COLUMN).to_numpy(zero_copy_only=False), dtype=np.int64)
        target = snapshot.schema.arrow_schema(internal=False)
        copies = rows.select(target.names).cast(target).take(pa.array(copy_rows(diffs)))
        buf = io.BytesIO()
        pq.write_table(copies, buf, compression="zstd")
        storage.put_if_absent(uri, buf.getvalue())  # another publisher's is the same rows
        info = storage.head(uri)
        if info is None:
            raise st.StorageError(f"{uri} was written but is not there")
    with storage.open_input(uri, info.size) as f:
        count = pq.ParquetFile(f).metadata.num_rows
    m = ice.column_metrics(part, snapshot.schema)
    return DataFile.from_args(
        content=DataFileContent.DATA, file_path=uri, file_format=FileFormat.PARQUET, partition=Record(),
        record_count=count, file_size_in_bytes=info.size, value_counts=dict.fromkeys(m["value_counts"], count),
        null_value_counts={}, lower_bounds=m["lower_bounds"], upper_bounds=m["upper_bounds"], spec_id=0)


def positions(expanded: pa.Table, doomed: np.ndarray, paths: list[str]) -> dict[str, np.ndarray]:
    """The rows ``doomed`` (a mask over ``expand``'s output) as delete positions per file, relative
    to the table root: the part's own rows by part path (``paths``, by ``PART_COLUMN``), its
    copies by its copy file's path. Pure."""
    hit = expanded.filter(pa.array(doomed))
    out: dict[str, np.ndarray] = {}
    if hit.num_rows == 0:
        return out
    part_ix = np.asarray(hit.column(PART_COLUMN).to_numpy(zero_copy_only=False), dtype=np.int64)
    pos = np.asarray(hit.column(cons.POS_COLUMN).to_numpy(zero_copy_only=False), dtype=np.int64)
    copy = np.asarray(hit.column(COPY_COLUMN).to_numpy(zero_copy_only=False), dtype=np.int64) \
        if COPY_COLUMN in hit.column_names else np.full(hit.num_rows, -1, dtype=np.int64)
    for i in np.unique(part_ix):
        mine = part_ix == i
        own, theirs = mine & (copy < 0), mine & (copy >= 0)
        if own.any():
            out[paths[int(i)]] = np.sort(pos[own])
        if theirs.any():
            out[copies_path(paths[int(i)])] = np.sort(copy[theirs])
    return out

