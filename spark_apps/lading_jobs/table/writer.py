"""Writing a table: tasks write parts into pending uploads, the driver commits them all at once.

``write_parts`` runs wherever the Arrow data is (a Spark task, or the driver):
it adds the logical time and diff columns, streams Parquet into pending
multipart uploads with a bounded buffer, rolls to a new part before
``max_file_size``, and computes each part's statistics from the batches it
writes. It returns ``WrittenPart`` records (plain data) instead of completing
anything; on an exception it aborts its own uploads. ``commit_parts`` (driver)
completes them and commits one log entry; ``abort_parts`` discards them.
``append`` does both for a whole Spark DataFrame: one DataFrame, one commit.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lading_jobs import critical, uploadset, workerheap
from lading_jobs import storage as st
from lading_jobs.formats import spark as spark_formats
from lading_jobs.sink import PartSink
from lading_jobs.table import format as fmt
from lading_jobs.table.log.commits import (
    Change,
    CommitStateUnknown,
    LedgerEntry,
    Part,
    Snapshot,
    TableError,
    TableLog,
    find_commit,
    new_nonce,
    validate_meta,
)
from lading_jobs.table.schema import TableSchema, conform
from lading_jobs.table.stats import part as stx

DEFAULT_MAX_FILE_SIZE = 128 * 1024**2
DEFAULT_BUFFER_SIZE = 8 * 1024**2
DEFAULT_ROW_GROUP_ROWS = 128 * 1024
DEFAULT_ROW_GROUP_BYTES = 64 * 1024**2
"""Arrow bytes a part writer buffers before writing a row group, whatever the row count (wide rows)."""


@dataclass(frozen=True)
class WrittenPart:
    """A part written into a pending upload: what a task hands the driver."""

    upload: dict[str, Any]  # PendingUpload.to_dict()
    part: Part

    def to_json(self) -> str:
        return json.dumps({"upload": self.upload, "part": self.part.to_dict()})

    @classmethod
    def from_json(cls, text: str) -> WrittenPart:
        d = json.loads(text)
        return cls(d["upload"], Part.from_dict(d["part"]))


def prepare(data: pa.Table | pa.RecordBatch, schema: TableSchema, logical_time: int, diff: int = 1) -> pa.Table:
    """User rows → part rows: columns matched to ``schema`` (by id, else name), time and diff added.

    ``data`` may carry its own ``_lading_time`` / ``_lading_diff`` columns (per-row
    times, delete markers, diffs); otherwise every row gets ``logical_time`` / ``diff``.
    """
    table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    n = table.num_rows
    if fmt.TIME_COLUMN not in table.column_names:
        table = table.append_column(fmt.TIME_COLUMN, pa.repeat(pa.scalar(logical_time, pa.int64()), n))
    if fmt.DIFF_COLUMN not in table.column_names:
        table = table.append_column(fmt.DIFF_COLUMN, pa.repeat(pa.scalar(diff, pa.int64()), n))
    for name in (fmt.TIME_COLUMN, fmt.DIFF_COLUMN):
        col = table.column(name)
        if col.null_count:
            raise TableError(f"{name} must not be null")
        if col.type != pa.int64():
            table = table.set_column(table.schema.get_field_index(name), name, col.cast(pa.int64()))
    return conform(table, schema)


class PartWriter:
    """Writes one task's rows into rolling parts under ``data/<write id>/``."""

    def __init__(self, uri: str, schema: TableSchema, write_id: str, task: int = 0, *,
                 table_id: str = "", envelope: str = "", storage: st.Storage | None = None,
                 max_file_size: int = DEFAULT_MAX_FILE_SIZE, buffer_size: int = DEFAULT_BUFFER_SIZE,
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, compression: str = "zstd",
                 single_put: bool = False, row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES) -> None:
        self.uri, self.schema, self.write_id, self.task = fmt.table_root(uri), schema, write_id, task
        self.single_put = single_put
        self.storage = storage or st.open_storage(uri)
        self.arrow_schema = schema.arrow_schema(table_id=table_id, envelope=envelope)
        self.max_file_size, self.buffer_size = max_file_size, buffer_size
        self.row_group_rows, self.compression = row_group_rows, compression
        self.row_group_bytes = max(1, row_group_bytes)
        self.ids = {c.name: c.id for c in schema.columns}
        self.decimal_ids = frozenset(c.id for c in schema.columns if c.type.startswith("decimal"))
        self.json_names = frozenset(f.name for f in self.arrow_schema if stx.has_path_stats(f))
        self.done: list[WrittenPart] = []
        self._n = 0
        self._open: tuple[str, st.PendingUpload, PartSink, pq.ParquetWriter] | None = None
        self._stats: stx.PartStats | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._pending_bytes = 0

    def write(self, part_rows: pa.Table) -> None:
        """Rows already ``prepare``d; buffered into row groups of ``row_group_rows`` rows or
        ``row_group_bytes`` Arrow bytes, whichever comes first (memory stays bounded for wide rows)."""
        if part_rows.num_rows == 0:
            return
        self._pending.append(part_rows)
        self._pending_rows += part_rows.num_rows
        self._pending_bytes += part_rows.nbytes
        while self._pending_rows >= self.row_group_rows or self._pending_bytes >= self.row_group_bytes:
            table = pa.concat_tables(self._pending)
            take = min(self.row_group_rows, self._rows_within_bytes(table))
            self._write_group(table.slice(0, take))
            rest = table.slice(take)
            self._pending = [rest] if rest.num_rows else []
            self._pending_rows, self._pending_bytes = rest.num_rows, rest.nbytes if rest.num_rows else 0

    def _rows_within_bytes(self, table: pa.Table) -> int:
        """Leading rows of ``table`` that hold about ``row_group_bytes`` (at least one)."""
        if table.nbytes <= self.row_group_bytes:
            return table.num_rows
        return max(1, int(table.num_rows * self.row_group_bytes / table.nbytes))

    def _write_group(self, group: pa.Table) -> None:
        if self._open is None:
            path = fmt.part_path(self.write_id, self.task, self._n)
            self._n += 1
            sink = PartSink(self.storage, fmt.part_uri(self.uri, path), self.buffer_size,
                            single_put=self.single_put)
            upload = sink.upload
            writer = pq.ParquetWriter(pa.PythonFile(sink, mode="w"), self.arrow_schema,
                                      compression=self.compression, store_schema=True)
            self._open = (path, upload, sink, writer)
            self._stats = None
        path, upload, sink, writer = self._open
        group = group.cast(self.arrow_schema) if group.schema != self.arrow_schema else group
        writer.write_table(group, row_group_size=len(group))
        group_stats = stx.table_stats(group, self.ids, self.json_names)
        self._stats = group_stats if self._stats is None else stx.merge(self._stats, group_stats, self.decimal_ids)
        if sink.tell() >= self.max_file_size * 0.9:
            self._close_file()

    def _close_file(self) -> None:
        if self._open is None:
            return
        path, upload, sink, writer = self._open
        writer.close()
        sink.finish()  # the tail as the last part; the upload stays pending until commit
        assert self._stats is not None
        stats = stx.PartStats(self._stats.rows, sink.tell(), self._stats.min_time, self._stats.max_time,
                              self._stats.min_diff, self._stats.max_diff, self._stats.columns)
        self.done.append(WrittenPart(upload.to_dict(), Part(path, sink.tell(), stats,
                                                            schema_id=self.schema.schema_id,
                                                            nested_ids=self.schema.nested)))
        self._open = None

    def finish(self) -> list[WrittenPart]:
        if self._pending_rows:
            self._write_group(pa.concat_tables(self._pending))
            self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        self._close_file()
        return self.done

    def abort(self) -> None:
        uploads = [st.PendingUpload.from_dict(w.upload) for w in self.done]
        if self._open is not None:
            uploads.append(self._open[1])
            self._open = None
        for upload in uploads:
            with contextlib.suppress(Exception):
                self.storage.abort_upload(upload)
        self.done = []


def write_parts(uri: str, tables: Iterable[pa.Table | pa.RecordBatch], schema: TableSchema, *,
                write_id: str, task: int = 0, logical_time: int = 0, diff: int = 1,
                table_id: str = "", envelope: str = "", storage: st.Storage | None = None,
                max_file_size: int = DEFAULT_MAX_FILE_SIZE, buffer_size: int = DEFAULT_BUFFER_SIZE,
                row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, one_part_per_table: bool = False,
                single_put: bool = False, row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES) -> list[WrittenPart]:
    """Write Arrow data as pending parts (see the module doc); aborts its own uploads on error.

    ``one_part_per_table`` closes a part after every input table (each table
    becomes exactly one part, with its own statistics). ``single_put`` sends a
    part that fits in the buffer with one PUT (``sink.PartSink``): the object
    exists before the commit, so whoever aborts the write must also delete the
    objects under its write id (a pending-upload sweep does not find them).
    """
    writer = PartWriter(uri, schema, write_id, task, table_id=table_id, envelope=envelope, storage=storage,
                        max_file_size=max_file_size, buffer_size=buffer_size, row_group_rows=row_group_rows,
                        single_put=single_put, row_group_bytes=row_group_bytes)
    try:
        for data in tables:
            writer.write(prepare(data, schema, logical_time, diff))
            if one_part_per_table:
                writer.finish()
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


def abort_parts(uri: str, written: Iterable[WrittenPart], write_ids: Iterable[str] = (),
                storage: st.Storage | None = None) -> None:
    """Discard pending parts, plus anything still pending under the given write ids."""
    storage = storage or st.open_storage(uri)
    for w in written:
        with contextlib.suppress(Exception):
            storage.abort_upload(st.PendingUpload.from_dict(w.upload))
    for write_id in write_ids:
        for upload in storage.list_pending_uploads(fmt.write_prefix(uri, write_id)):
            with contextlib.suppress(Exception):
                storage.abort_upload(upload)


@dataclass(frozen=True)
class NewTable:
    """The table a write creates if none exists: recorded in commit 0 with the write's parts."""

    schema: TableSchema
    envelope: str = "append"
    key_columns: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    table_id: str | None = None
    iceberg_mirror: bool = True


def commit_parts(uri: str, written: Iterable[WrittenPart], *, log: TableLog | None = None,
                 operation: str = "append", remove: Iterable[str] = (),
                 ledger: Mapping[str, LedgerEntry | Mapping[str, Any]] | None = None,
                 source_progress: Mapping[str, Any] | None = None, upper: int | None = None,
                 since: int | None = None, info: Mapping[str, Any] | None = None,
                 storage: st.Storage | None = None, nonce: str | None = None,
                 create: NewTable | None = None, schema: TableSchema | None = None) -> Snapshot:
    """Complete the pending parts and commit them (plus ledger/progress) as one log entry.

    ``schema``: the table's new schema, recorded in that same entry (schema evolution: the
    parts carry columns it adds); with ``create``, give the schema in ``create`` instead.

    ``create``: when no table exists at ``uri``, commit 0 creates it *with* these
    parts (a failed first write leaves no table). ``nonce`` names the attempt in the
    log (fresh if not given; an engine that wrote it into a commit intent passes it,
    so a retry can look for it with ``TableLog.find_commit``). Outcomes:

    * the commit landed (also when the PUT's answer was lost or a retried request
      answered 412 to its own first try): its snapshot; parts are never deleted;
    * it certainly did not (a conflict, a failure before the PUT, a version taken
      by another writer's commit): the completed parts are deleted, the pending
      ones aborted, the error raised;
    * it cannot be decided: ``CommitStateUnknown``, and nothing is cleaned up.

    The whole call is a commit section: a SIGTERM waits for it (``lading_jobs.critical``).
    """
    written = list(written)
    if log is None:
        log = TableLog.open(uri, storage) if create is not None else TableLog.open_existing(uri, storage)
    storage = log.storage if log is not None else (storage or st.open_storage(uri))
    nonce = nonce or new_nonce()
    base = log.version if log is not None else -1
    uploads = [st.PendingUpload.from_dict(w.upload) for w in written]
    put_sent = False
    with critical.commit_section():
        try:
            uploadset.complete_all(storage, uploads)
            entries = {k: v if isinstance(v, LedgerEntry) else LedgerEntry.from_dict(v)
                       for k, v in (ledger or {}).items()}
            now = int(time.time() * 1000)
            entries = {k: LedgerEntry(v.etag, v.size, v.rows, v.version, v.loaded_at or now)
                       for k, v in entries.items()}
            change = Change(operation=operation, add=tuple(w.part for w in written), remove=tuple(remove),
                            schema=schema, ledger=entries, source_progress=dict(source_progress or {}),
                            upper=upper, since=since, info=dict(info or {}))
            put_sent = True
            if log is None:
                assert create is not None
                created = TableLog.create(uri, create.schema, create.envelope, create.key_columns, create.sort_by,
                                          storage=storage, table_id=create.table_id, change=change, nonce=nonce,
                                          iceberg_mirror=create.iceberg_mirror)
                return created.snapshot(version=0)
            return log.commit(change, nonce=nonce)
        except CommitStateUnknown:
            raise
        except BaseException as e:
            if put_sent and not isinstance(e, TableError) and _landed(uri, storage, nonce, base, e):
                raise  # interrupted after the commit landed: it stands, with its parts
            failures = uploadset.discard(storage, uploads)
            if failures:
                print(f"lading: removing the parts of a failed commit to {uri}: {len(failures)} failed, first "
                      f"{failures[0]}", file=sys.stderr)
            raise


def _landed(uri: str, storage: st.Storage, nonce: str, base: int, error: BaseException) -> bool:
    """Whether a commit carrying ``nonce`` is in the log after version ``base``."""
    try:
        return find_commit(uri, storage, nonce, after=base) is not None
    except Exception as e:  # noqa: BLE001
        raise CommitStateUnknown(f"commit state unknown: committing to {uri} was interrupted ({error!r}) and "
                                 f"the log cannot be read ({e}); look for nonce {nonce} before retrying "
                                 "(nothing was cleaned up)", nonce) from e


def default_time(snapshot: Snapshot) -> int:
    """The logical time a write gets when none is given: now (ms), never below ``upper``."""
    return max(snapshot.upper, int(time.time() * 1000))


def append(spark: Any, df: Any, uri: str, *, logical_time: int | None = None,
           ledger: Mapping[str, LedgerEntry | Mapping[str, Any]] | None = None,
           source_progress: Mapping[str, Any] | None = None, envelope: str = "append",
           key_columns: Iterable[str] = (), sort_by: Iterable[str] = (), create: bool = True,
           max_file_size: int = DEFAULT_MAX_FILE_SIZE, buffer_size: int = DEFAULT_BUFFER_SIZE,
           row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, info: Mapping[str, Any] | None = None,
           operation: str = "append", replace: bool = False, nonce: str | None = None,
           before_commit: Callable[[list[WrittenPart], int], None] | None = None,
           iceberg_mirror: bool = True) -> Snapshot:
    """Append a DataFrame as one commit (creating the table from its schema if ``create``).

    ``replace``: the same commit removes every part of the table's version read once the
    tasks have written (appends that commit after that read are rebased over and kept: the
    replace is ordered before them), so readers see the old contents or the new ones, never
    a mix; a part a concurrent compaction already removed makes the commit conflict. ``nonce`` names
    the commit in the log and ``before_commit(written, base)`` runs once the tasks wrote
    their pending parts, before anything completes (an engine records its intent there:
    the uploads, and the version ``base`` after which to look for the nonce).

    The DataFrame's columns are matched to the table's by name; optional
    ``_lading_time`` / ``_lading_diff`` columns give per-row times and diffs
    (delete markers for upsert tables, ±n for diff tables). ``iceberg_mirror``: a table this
    creates gets the Iceberg mirror (or not).
    """
    uri = fmt.table_root(uri)
    storage = st.open_storage(uri)
    log = TableLog.open(uri, storage)
    new_table: NewTable | None = None
    if log is None:
        if not create:
            raise TableError(f"no lading table at {uri}; create it first")
        new_table = NewTable(TableSchema.from_spark(df.schema), envelope, tuple(key_columns), tuple(sort_by),
                             uuid.uuid4().hex, iceberg_mirror)
        validate_meta(new_table.schema, envelope, new_table.key_columns, new_table.sort_by)
        schema, table_id, env, order, upper = (new_table.schema, new_table.table_id or "", envelope,
                                               new_table.sort_by, 0)
    else:
        snapshot = log.snapshot()
        schema, table_id, env, order, upper = (snapshot.schema, snapshot.table_id, snapshot.envelope,
                                               snapshot.sort_by, snapshot.upper)
    time_ = max(upper, int(time.time() * 1000)) if logical_time is None else logical_time
    schema_json = schema.to_json()
    write_id = fmt.new_write_id()
    settings = st.S3Settings.from_env()
    if order:
        from pyspark.sql import functions as F

        df = df.sortWithinPartitions(*(F.col(spark_formats.quote(c)) for c in order))  # 'a.b' is one column
    df = spark_formats.to_transfer(df)  # year-month intervals cross to Python as int months

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        workerheap.settle()
        ctx = TaskContext.get()
        part_id = ctx.partitionId() if ctx is not None else 0
        storage = st.S3Storage(settings) if uri.startswith("s3://") else st.open_storage(uri)
        written = write_parts(uri, batches, TableSchema.from_json(schema_json), write_id=write_id, task=part_id,
                              logical_time=time_, table_id=table_id, envelope=env, storage=storage,
                              max_file_size=max_file_size, buffer_size=buffer_size,
                              row_group_rows=row_group_rows)
        yield pa.RecordBatch.from_pydict({"written": [w.to_json() for w in written]})

    sc = spark.sparkContext
    previous_group = sc.getLocalProperty("spark.jobGroup.id")
    sc.setLocalProperty("spark.jobGroup.id", write_id)
    try:
        rows = spark_formats.map_in_arrow(df, task, "written string").collect()
    except BaseException:
        from lading_jobs.session import wait_for_tasks

        wait_for_tasks(sc, write_id)  # tasks being killed may still begin uploads
        abort_parts(uri, [], [write_id], storage=storage)
        raise
    finally:
        sc.setLocalProperty("spark.jobGroup.id", previous_group)
    written = [WrittenPart.from_json(r["written"]) for r in rows]
    remove = [p.path for p in log.snapshot().parts] if replace and log is not None else []
    if before_commit is not None:
        try:
            before_commit(written, log.version if log is not None else -1)
        except BaseException:
            abort_parts(uri, written, [write_id], storage=storage)
            raise
    snap = commit_parts(uri, written, log=log, operation=operation, remove=remove, ledger=ledger,
                        source_progress=source_progress, info=info, storage=storage, create=new_table, nonce=nonce)
    sweep_write(uri, write_id, written, storage)
    return snap


def sweep_write(uri: str, write_id: str, written: Iterable[WrittenPart], storage: st.Storage) -> int:
    """After a commit: abort uploads still pending under the write's prefix that the commit did not
    take (a lost or speculative task attempt's); the number aborted."""
    committed = {w.upload["upload_id"] for w in written}
    with contextlib.suppress(st.StorageError, OSError):
        return uploadset.sweep(storage, fmt.write_prefix(uri, write_id), lambda u: True, keep=committed)
    return 0


def _wait_for_tasks(sc: Any, group: str, deadline_seconds: float = 120.0) -> None:
    """Kept for engines that call it here; the helper lives in ``lading_jobs.session``."""
    from lading_jobs.session import wait_for_tasks

    wait_for_tasks(sc, group, deadline_seconds)


def delete_where(spark: Any, uri: str, condition: str, *, logical_time: int | None = None) -> Snapshot:
    """``DELETE FROM table WHERE condition`` against the current schema, as one commit.

    Upsert tables get delete markers for the matching keys; diff tables get a
    retraction (diff -1) per matching row. Append tables cannot delete.
    """
    from lading_jobs.table import reader

    log = TableLog.open_existing(uri)
    snapshot = log.snapshot()
    if snapshot.envelope == "append":
        raise TableError(f"{uri} is an append table: rows cannot be deleted; use envelope upsert or diff")
    from pyspark.sql import functions as F

    matching = reader.read_table(spark, uri).where(condition)
    if snapshot.envelope == "upsert":
        keys = list(snapshot.key_columns)
        others = [F.lit(None).cast(_spark_type(snapshot, c.name)).alias(c.name)
                  for c in snapshot.schema.columns if c.name not in keys]
        matching = matching.select(*keys).distinct().select(*keys, *others)
    matching = matching.withColumn(fmt.DIFF_COLUMN, F.lit(-1).cast("bigint"))
    return append(spark, matching, uri, logical_time=logical_time, create=False, operation="delete")


def _spark_type(snapshot: Snapshot, name: str) -> str:
    from lading_jobs.table.schema import spark_type

    return spark_type(snapshot.schema.column(name).type)


def count_rows(table: pa.Table) -> int:
    """Rows a part table stands for (sum of positive diffs); handy in tests and results."""
    diffs = table.column(fmt.DIFF_COLUMN)
    return int(pc.sum(pc.max_element_wise(diffs, 0)).as_py() or 0)
