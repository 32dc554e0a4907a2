"""The Iceberg mirror's delete files: upsert and diff tables read exactly by Iceberg readers.

An Iceberg reader returns every row of every data file once, minus the rows that delete files
name. lading's answer at version *v* is its consolidated rows (``consolidate``). So at each
version the mirror names, in Iceberg v2 **position delete** files (Parquet: ``file_path``,
``pos``; both pyiceberg 0.12 and DuckDB 1.5.5 apply them, pyiceberg refuses equality deletes),
every row that is not in lading's answer:

* ``upsert``: every row but each key's winner (``consolidate.latest_per_key``: the greatest
  (time, seq, pos), ties decided as the reader decides them), and the winner too when it is a
  delete marker;
* ``diff``: every row but, per distinct row whose diffs sum to s > 0, its s latest rows of diff 1
  (``consolidate.diff_survivors``); a row counting k > 1 times is the part's row plus k - 1 copies
  in the part's copy file (``table.iceberg.copies``), decided as k rows of diff 1 (``copies.expand``), so
  a retraction deletes one copy per -1.

Both rules are lading's own, applied to the rows' identity (key columns, or every column of a
diff table), time, diff and order; nothing else is read.

A commit that only adds parts, after an exact snapshot of the version before, changes only the
answer for identities its new parts hold: ``plan`` reads the identity columns of the new parts
and of the live parts whose statistics (min/max per identity column) may hold one of them
(``candidates``), decides those identities with the rule, and names only rows that were alive
before (the same rule on the old rows alone says which: the previous snapshot's delete files
named exactly the others). Adding rows never revives a row under either rule, so delete files
only accumulate. An upsert table's compaction changes no row outside its outputs
(``compaction_keeps_the_rest``): its outputs are decided the same way, and the positions the
previous delete files name in live parts are carried over (``read_positions``) into one delete
file that replaces them. Any other commit (a diff table's compaction, a removal, a schema change
of a diff table, a mirror that was behind) is decided in full over every live part: one delete
file replaces the previous ones, which go with the parts they applied to.
"""

from __future__ import annotations

import dataclasses
import io
import re
import uuid
from collections.abc import Collection, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record
from pyiceberg.types import StringType

from lading_jobs import storage as st
from lading_jobs.table import consolidate as cons
from lading_jobs.table import format as fmt
from lading_jobs.table.iceberg import copies
from lading_jobs.table.log import ledger
from lading_jobs.table.log.commits import Part, Snapshot
from lading_jobs.table.parts import read_part
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats.part import ColumnStats

PATH_FIELD_ID = 2147483546
"""Iceberg's reserved field id of a position delete file's ``file_path``."""
POS_FIELD_ID = 2147483545
"""... and of its ``pos`` (the row's 0-based position in the data file)."""
PART_COLUMN = copies.PART_COLUMN
_FLOATING = ("float", "double")


def needed(snapshot: Snapshot) -> bool:
    """Whether an Iceberg reader of this table's parts needs delete files to read lading's rows."""
    return snapshot.envelope in ("upsert", "diff")


def identity_columns(snapshot: Snapshot) -> list[str]:
    """The columns that decide which rows consolidate together: an upsert table's keys, or every
    column of a diff table."""
    return list(snapshot.key_columns) if snapshot.envelope == "upsert" else snapshot.schema.names


# -- statistics first ---------------------------------------------------------------------------
def _overlap(a: ColumnStats | None, b: ColumnStats | None, floating: bool) -> bool:
    """Whether two parts may hold an equal value of a column, by their statistics (conservative:
    missing bounds, floats (NaN and -0.0 have no place in bounds), both holding NULLs, or bounds
    that do not compare mean they may)."""
    if a is None or b is None or floating:
        return True
    if a.nulls is None or b.nulls is None or (a.nulls and b.nulls):
        return True
    if a.min is None or a.max is None or b.min is None or b.max is None:
        return True
    try:
        return bool(a.min <= b.max and b.min <= a.max)
    except TypeError:
        return True


def candidates(parts: Sequence[Part], touched: Sequence[Part], ids: Sequence[int],
               floating: Collection[int] = ()) -> list[Part]:
    """The parts of ``parts`` (in their order, ``touched`` ones included) that may hold a row whose
    identity columns ``ids`` equal those of a row of a ``touched`` part: for some touched part,
    every identity column's range overlaps. Pure; from statistics alone."""
    touched_paths = {p.path for p in touched}
    out = []
    for p in parts:
        if p.path in touched_paths or any(
                all(_overlap(p.stats.columns.get(i), t.stats.columns.get(i), i in floating) for i in ids)
                for t in touched):
            out.append(p)
    return out


# -- the rule -----------------------------------------------------------------------------------
def alive(table: pa.Table, envelope: str, identity: Sequence[str]) -> np.ndarray:
    """Which rows of ``table`` (identity columns, time, diff, seq, pos; in the reader's part order)
    are in lading's answer, each once. Pure."""
    n = table.num_rows
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    if envelope == "upsert":
        winners = np.asarray(cons.latest_per_key(table, identity).to_numpy(zero_copy_only=False), dtype=np.int64)
        diffs = np.asarray(table.column(fmt.DIFF_COLUMN).to_numpy(zero_copy_only=False), dtype=np.int64)
        keep[winners[diffs[winners] > 0]] = True
        return keep
    if envelope == "diff":
        return cons.diff_survivors(table, identity)
    keep[:] = True
    return keep


def decide(table: pa.Table, envelope: str, identity: Sequence[str],
           new: np.ndarray | None = None) -> np.ndarray:
    """The rows of ``table`` a delete file must name now. ``new`` (a mask of the rows of the
    commit's new parts) decides incrementally: only identities a new row holds, and only rows
    the previous version's delete files did not name already (the rule on the rows without the
    new ones). None: every row not alive. Pure."""
    if new is None:
        return ~alive(table, envelope, identity)
    if not new.any():
        return np.zeros(table.num_rows, dtype=bool)
    group = cons.group_of(table, identity, sql=envelope == "upsert")
    relevant = np.isin(group, np.unique(group[new]))
    sub = table.filter(pa.array(relevant))
    dead_now = ~alive(sub, envelope, identity)
    sub_new = new[relevant]
    old = sub.filter(pa.array(~sub_new))
    dead_before = np.zeros(sub.num_rows, dtype=bool)
    dead_before[np.flatnonzero(~sub_new)] = ~alive(old, envelope, identity)
    out = np.zeros(table.num_rows, dtype=bool)
    out[np.flatnonzero(relevant)] = dead_now & ~dead_before
    return out


# -- reading the identity -----------------------------------------------------------------------
def read_identity(storage: st.Storage, snapshot: Snapshot, parts: Sequence[Part]) -> pa.Table:
    """The identity columns, time, diff, seq and pos of every row of ``parts`` (in that order),
    with ``PART_COLUMN`` (the part's place in ``parts``); no other column is read. Parts are read
    on the ledger's I/O threads."""
    names = identity_columns(snapshot)
    schema = TableSchema(tuple(snapshot.schema.column(n) for n in names), snapshot.schema.last_column_id,
                         snapshot.schema.schema_id)
    narrow = dataclasses.replace(snapshot, schema=schema, as_of=None)
    read = ledger._parallel(lambda p: read_part(storage, narrow, p), list(parts))  # noqa: SLF001 - its reads
    pieces = [t.append_column(PART_COLUMN, pa.repeat(pa.scalar(i, pa.int32()), t.num_rows))
              for i, t in enumerate(read)]
    if not pieces:
        return schema.arrow_schema().empty_table()
    return pa.concat_tables(pieces)


def plan(storage: st.Storage, snapshot: Snapshot, added: Collection[str] | None) -> dict[str, np.ndarray]:
    """The row positions, per part path, that a delete file of this version must name: for the
    parts ``added`` by a commit after an exact snapshot of the version before (incrementally), or
    (None) for every live part."""
    parts = list(snapshot.parts)
    identity = identity_columns(snapshot)
    if added is None:
        chosen = parts
    else:
        touched = [p for p in parts if p.path in added and p.rows]
        if not touched:
            return {}
        ids = [snapshot.schema.column(n).id for n in identity]
        floating = {snapshot.schema.column(n).id for n in identity if snapshot.schema.column(n).type in _FLOATING}
        chosen = candidates(parts, touched, ids, floating)
    if not chosen:
        return {}
    table = read_identity(storage, snapshot, chosen)
    if any(copies.needed(snapshot.envelope, p) for p in chosen):
        table = copies.expand(table)  # a row counting k times: the part's row and its k - 1 copies
    where = table.column(PART_COLUMN)
    new = None
    if added is not None:
        new = np.isin(np.asarray(where.to_numpy(zero_copy_only=False)),
                      [i for i, p in enumerate(chosen) if p.path in added])
    doomed = decide(table, snapshot.envelope, identity, new)
    return copies.positions(table, doomed, [p.path for p in chosen])


# -- a compaction ---------------------------------------------------------------------------------
def compaction_keeps_the_rest(snapshot: Snapshot, entry: dict[str, object]) -> bool:
    """Whether a commit leaves the status of every row of the parts it did not remove as it was:
    an upsert table's compaction does (its groups are runs of consecutive parts whose outputs keep
    the run's order and each key's winner, so no row outside them wins or loses), so only its
    outputs need deciding. A diff table's compaction can move which equal rows survive, and
    other removals change answers: those are decided in full. Pure."""
    return snapshot.envelope == "upsert" and entry.get("operation") == "compact"


_DELETE_NAME = re.compile(r"[0-9a-f]{32}-deletes\.parquet")


def read_positions(storage: st.Storage, root: str, files: Sequence[str],
                   live: dict[str, str]) -> dict[str, np.ndarray]:
    """The positions the mirror's delete ``files`` name in the data files ``live`` (full path → part
    path), by part path. A file that is not one of the mirror's own delete files is a ValueError."""
    prefix = f"{fmt.table_root(root)}metadata/"
    for f in files:
        if not f.startswith(prefix) or not _DELETE_NAME.fullmatch(f[len(prefix):]):
            raise ValueError(f"{f} is not one of the mirror's delete files")
    tables = ledger._parallel(lambda f: pq.read_table(io.BytesIO(storage.read(f))), list(files))  # noqa: SLF001
    found: dict[str, list[np.ndarray]] = {}
    for t in tables:
        col = t.column("file_path")
        for path in set(pc.unique(col).to_pylist()) & live.keys():
            pos = t.filter(pc.equal(col, path)).column("pos")
            found.setdefault(live[path], []).append(np.asarray(pos.to_numpy(), dtype=np.int64))
    return {part: np.unique(np.concatenate(chunks)) for part, chunks in found.items()}


# -- writing ------------------------------------------------------------------------------------
def delete_file_uri(root: str) -> str:
    """A fresh name for a position delete file, under the mirror's ``metadata/``."""
    return f"{fmt.table_root(root)}metadata/{uuid.uuid4().hex}-deletes.parquet"


def encode(root: str, positions: dict[str, np.ndarray]) -> pa.Table:
    """A position delete file's rows: the data file's path (as the mirror names it) and the row's
    position, sorted by path then position (as the spec asks). Pure."""
    paths = sorted(positions)
    fields = [pa.field("file_path", pa.string(), nullable=False,
                       metadata={fmt.FIELD_ID_KEY: str(PATH_FIELD_ID).encode()}),
              pa.field("pos", pa.int64(), nullable=False, metadata={fmt.FIELD_ID_KEY: str(POS_FIELD_ID).encode()})]
    file_paths = [fmt.table_root(root) + p for p in paths]
    return pa.table({
        "file_path": pa.array(np.repeat(np.array(file_paths, dtype=object), [len(positions[p]) for p in paths]),
                              pa.string()),
        "pos": pa.array(np.concatenate([positions[p] for p in paths]) if paths else np.zeros(0, np.int64),
                        pa.int64())}, schema=pa.schema(fields))


def write(storage: st.Storage, root: str, positions: dict[str, np.ndarray], written: list[str]) -> DataFile:
    """Write one position delete file naming ``positions`` (its URI appended to ``written``); its
    Iceberg entry, with the path bounds readers use to match it to data files."""
    rows = encode(root, positions)
    buf = io.BytesIO()
    pq.write_table(rows, buf, compression="zstd")
    uri = delete_file_uri(root)
    storage.put(uri, buf.getvalue())
    written.append(uri)
    paths = rows.column("file_path")
    lower, upper = pc.min(paths).as_py(), pc.max(paths).as_py()
    return DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=uri, file_format=FileFormat.PARQUET,
        partition=Record(), record_count=rows.num_rows, file_size_in_bytes=len(buf.getvalue()),
        value_counts={PATH_FIELD_ID: rows.num_rows, POS_FIELD_ID: rows.num_rows},
        null_value_counts={PATH_FIELD_ID: 0, POS_FIELD_ID: 0},
        lower_bounds={PATH_FIELD_ID: to_bytes(StringType(), lower)},
        upper_bounds={PATH_FIELD_ID: to_bytes(StringType(), upper)}, spec_id=0)
