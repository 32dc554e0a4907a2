"""One load task: one input file, read, decoded, cast, written as pending uploads.

Runs on a Spark executor (inside ``mapInArrow``), so everything it needs travels
in a ``LoadPlan`` (plain, picklable data; no credentials: storage reads them from
the executor's environment). It never makes anything visible: good rows become
pending table parts (``lading_jobs.table.writer.write_parts``: the table's part
schema, every row at the load's one logical time with diff +1, statistics
computed while writing, sorted by the table's ``sortBy``) and rejected rows a
pending JSON-lines file, both completed or aborted by the driver. If the task
itself fails, it aborts what it began before re-raising, because nobody else
knows its upload ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lading_jobs import storage as st
from lading_jobs.ingest.conform import Conformer, FileError
from lading_jobs.ingest.decode import Decoded, Piece, Reject, decode
from lading_jobs.ingest.policy import FileOutcome, should_write
from lading_jobs.ingest.stores import storage_for
from lading_jobs.sink import PartSink
from lading_jobs.sources import hive
from lading_jobs.table import consolidate, writer
from lading_jobs.table.schema import TableSchema, arrow_type
from lading_spec.copyjob import LoadOptions
from lading_spec.formats import FormatOptions

ERRORS_IN_RESULT = 5  # rejected records listed per file in the manifest
REJECTS_OBJECT_BYTES = 5 * 1024**3
"""Largest rejected-rows object: S3's largest single part, so any store takes it."""
REJECTS_BUFFER_BYTES = 8 * 1024**2
"""Bytes of rejected-row lines a task buffers before sending a multipart part."""


@dataclass(frozen=True)
class FileTask:
    """One task's input: a whole file, or (big Parquet files) a range of its row groups."""

    index: int  # the task's number: names its parts and rejected-rows file
    uri: str
    etag: str
    size: int
    file_index: int = -1  # the file's number in the run (-1: same as index)
    row_groups: tuple[int, int] | None = None  # [start, stop) of a Parquet file's row groups
    first_row: int = 1  # the file row number of the chunk's first row

    @property
    def file(self) -> int:
        return self.index if self.file_index < 0 else self.file_index


@dataclass(frozen=True)
class LoadPlan:
    table_uri: str
    schema: TableSchema
    table_id: str
    envelope: str
    sort_by: tuple[str, ...]
    time: int
    write_id: str
    format: str
    options: FormatOptions
    load: LoadOptions
    rejects_prefix: str | None
    settings: st.S3Settings
    discover: bool = False  # schemaEvolution: addColumns — report the file's columns the table lacks
    key_columns: tuple[str, ...] = ()  # the table's key (upsert: sorting keeps each key's last row)
    hive_root: str | None = None  # partitioning: hive — the prefix whose col=value/ directories are columns


def reject_entry(uri: str, unit: str, r: Reject) -> dict[str, Any]:
    """One line of the rejected-rows file."""
    entry: dict[str, Any] = {"file": uri, unit: r.position, "column": r.column, "reason": r.reason,
                             "record": r.record}
    if r.count != 1:
        entry["rows"] = r.count
    return entry


def rejects_uri(prefix: str, index: int, k: int = 0) -> str:
    """``rejected-<n>.jsonl``, then ``rejected-<n>-<k>.jsonl`` when one object would pass 5 GiB."""
    return st.join(prefix, f"rejected-{index:05d}.jsonl" if k == 0 else f"rejected-{index:05d}-{k:03d}.jsonl")


def write_rejects(storage: st.Storage, prefix: str, index: int, lines: Iterable[bytes],
                  begun: list[st.PendingUpload], *, max_object: int = REJECTS_OBJECT_BYTES,
                  buffer_size: int = REJECTS_BUFFER_BYTES) -> list[st.PendingUpload]:
    """Stream rejected-row lines into pending uploads: parts of ``buffer_size`` (memory stays
    bounded whatever the count), a new object before one would pass ``max_object``. Every
    upload begun is appended to ``begun`` at once, so the caller can abort it on failure."""
    uploads: list[st.PendingUpload] = []
    sink: PartSink | None = None
    for line in lines:
        if sink is not None and sink.size and sink.size + len(line) > max_object:
            uploads.append(sink.finish())
            sink = None
        if sink is None:
            sink = PartSink(storage, rejects_uri(prefix, index, len(uploads)), buffer_size)
            begun.append(sink.upload)
        sink.write(line)
    if sink is not None:
        uploads.append(sink.finish())
    return uploads


def sort_rows(table: pa.Table, sort_by: tuple[str, ...], envelope: str = "append",
              key_columns: tuple[str, ...] = ()) -> pa.Table:
    """Rows in the table's sort order (ascending), when it has one: tighter part statistics.

    An upsert table's reader lets a key's later row win by its place in the part, which
    sorting would change (a key's earlier row sorting after its later one won); so there
    each key's last row in input order is kept, and only then the rows sorted."""
    names = {n.lower(): n for n in table.column_names}
    keys = [(names[c.lower()], "ascending") for c in sort_by if c.lower() in names]
    if not keys or table.num_rows <= 1:
        return table
    key_names = [names[c.lower()] for c in key_columns if c.lower() in names] if envelope == "upsert" else []
    if key_names:
        last = consolidate.rank_per_key(table, key_names, pa.array(np.arange(table.num_rows, dtype=np.int64)), "max")
        table = table.take(pa.array(np.sort(last.to_numpy())))
    return table.sort_by(keys)


def _first_error(unit: str, r: Reject) -> str:
    column = f", column {r.column}" if r.column else ""
    return f"{unit} {r.position}{column}: {r.reason}"


def exact_number_columns(schema: TableSchema) -> list[str]:
    """The integer and decimal columns: text formats give their values digit by digit."""
    return [c.name for c in schema.columns
            if pa.types.is_integer(arrow_type(c.type)) or pa.types.is_decimal(arrow_type(c.type))]


def verbatim_columns(schema: TableSchema) -> list[str]:
    """The text and json columns: a JSON number or nested value in one keeps its text."""
    return [c.name for c in schema.columns if pa.types.is_string(arrow_type(c.type)) and c.type != "uuid"]


def read_task(plan: LoadPlan, task: FileTask) -> bytes | pa.NativeFile:
    """Parquet through ranged reads (footer, then one row group at a time); text whole. Every
    read is pinned to the listed ETag: the ledger records the version whose rows were read,
    and a file rewritten meanwhile fails (``ObjectChanged``) instead of loading a mix."""
    storage = storage_for(task.uri, plan.settings)
    if plan.format == "parquet":
        return storage.open_input(task.uri, task.size, etag=task.etag or None)
    return storage.read(task.uri, etag=task.etag or None)


UNREADABLE = "cannot be read: "
"""How a file error that is a failed read (not the file's content) begins, unless it is ``ObjectChanged``'s."""


def unreadable(e: BaseException) -> str:
    """The file error of a file that could not be read: it changed since it was listed
    (``ObjectChanged``), or storage failed (``StorageError``, ``OSError``). Not the file's
    fault: reading it again (a stream's next listing) may well succeed."""
    return str(e) if isinstance(e, st.ObjectChanged) else f"{UNREADABLE}{e}"


def is_unreadable(file_error: str | None) -> bool:
    """Whether ``file_error`` says the file could not be read (:func:`unreadable`; the load's
    transform stage spells its read errors the same way) rather than what its bytes hold."""
    if not file_error:
        return False
    return file_error.startswith(UNREADABLE) or " changed after it was listed (listed ETag " in file_error


def with_directories(decoded: Decoded, values: list[tuple[str, str | None]]) -> Decoded:
    """A Hive-partitioned file's records with its directories' values (``sources.hive``) as
    more columns of text (NULL for ``__HIVE_DEFAULT_PARTITION__``), matched and converted to the
    table's columns as a CSV field would be; a column the file holds itself keeps the file's values."""
    pieces = decoded.pieces

    def added() -> Iterator[Piece]:
        for piece in pieces:
            table = piece.table
            for name, value in values:
                if name not in table.column_names:
                    table = table.append_column(name, pa.repeat(pa.scalar(value, pa.string()), table.num_rows))
            yield Piece(table, piece.positions)

    decoded.pieces = added()
    return decoded


def run_file(plan: LoadPlan, task: FileTask) -> FileOutcome:
    """Load one file as far as pending uploads; the outcome says what happened.

    Good rows stream from the decoder through the casts into the part writer, so
    a Parquet file is never held whole in memory. Under ``abort`` and ``skipFile``
    a file with errors has its parts written and then aborted: errors are only
    known at its end, and the clean case should not pay for the rare one.
    """
    out = FileOutcome(task.file, task.uri, task.etag, task.size)
    try:
        directories = hive.path_values(plan.hive_root, task.uri) if plan.hive_root is not None else []
    except hive.PartitionError as e:
        out.file_error = f"its directories are no col=value directories under {plan.hive_root}: {e}"
        return out
    in_file = [n for n in plan.schema.names if n not in {name for name, _ in directories}]  # headerless CSV
    try:
        decoded: Decoded = decode(read_task(plan, task), plan.format, plan.options,
                                  in_file, task.uri, row_groups=task.row_groups,
                                  first_row=task.first_row, exact_numbers=exact_number_columns(plan.schema),
                                  verbatim=verbatim_columns(plan.schema))
    except (st.StorageError, OSError) as e:
        out.file_error = unreadable(e)
        return out
    out.unit = decoded.unit
    if decoded.error:
        out.file_error = decoded.error
        return out
    if directories:
        decoded = with_directories(decoded, directories)
    conformer = Conformer(decoded, plan.schema, discover=task.uri if plan.discover else None)
    out = finish_file(plan, task, out, conformer.tables(),
                      lambda: (conformer.rejects, decoded.rows_read, conformer.rows_good))
    out.new_columns = [f.to_list() for f in conformer.found]
    return out


def finish_file(plan: LoadPlan, task: FileTask, out: FileOutcome, tables: Iterator[pa.Table],
                result: Callable[[], tuple[list[Reject], int, int]]) -> FileOutcome:
    """Write a task's good rows (``tables``, in the table's schema) as pending parts and its
    rejects as a pending rejected-rows file; ``result()``, once ``tables`` is exhausted, gives
    (rejects, rows read, good rows). Whatever it began it aborts if it fails."""
    table_storage = storage_for(plan.table_uri, plan.settings)
    begun: list[st.PendingUpload] = []
    written: list[writer.WrittenPart] = []
    try:
        rows = (sort_rows(t, plan.sort_by, plan.envelope, plan.key_columns) for t in tables)
        try:
            if should_write(plan.load, clean=True):
                written = writer.write_parts(
                    plan.table_uri, rows, plan.schema, write_id=plan.write_id, task=task.index,
                    logical_time=plan.time, table_id=plan.table_id, envelope=plan.envelope,
                    storage=table_storage)
            else:
                for _ in rows:
                    pass
        except (FileError, st.StorageError) as e:  # write_parts aborted what it began
            if isinstance(e, st.StorageError) and not isinstance(e, st.ObjectChanged) and e.uri != task.uri:
                raise  # writing the parts failed: the task's error, not the file's
            # the file itself could not be read on (a Parquet row group read lazily, its retries spent)
            out.file_error = unreadable(e) if isinstance(e, st.StorageError) else str(e)
            out.rows_read = result()[1]
            return out
        begun += [st.PendingUpload.from_dict(w.upload) for w in written]
        rejects, out.rows_read, out.rows_good = result()
        out.rows_rejected = sum(r.count for r in rejects)
        if rejects:
            out.first_error = _first_error(out.unit, rejects[0])
            out.errors = [reject_entry(task.uri, out.unit, r) for r in rejects[:ERRORS_IN_RESULT]]
        if written and not should_write(plan.load, out.clean):
            writer.abort_parts(plan.table_uri, written, storage=table_storage)
            written, begun = [], []
        out.parts = [w.to_json() for w in written]
        if rejects and plan.rejects_prefix:
            lines = (json.dumps(reject_entry(task.uri, out.unit, r), ensure_ascii=False).encode() + b"\n"
                     for r in rejects)
            uploads = write_rejects(storage_for(plan.rejects_prefix, plan.settings), plan.rejects_prefix,
                                    task.index, lines, begun)
            out.rejects_uploads = [u.to_dict() for u in uploads]
            out.rejects_uris = [u.uri for u in uploads]
    except BaseException:
        for upload in begun:
            storage_for(upload.uri, plan.settings).abort_upload(upload)
        raise
    return out
