"""The Iceberg mirror: Iceberg v2 metadata beside the log, one metadata file per lading version.

After commit *v* lands (never before, never instead: the log stays the truth) the writer
publishes, under ``<table>/metadata/``:

1. a manifest (Avro, pyiceberg's writer) of the parts the commit added, or, after a commit
   that removed parts, one manifest of every live part; fresh names, never an existing one's;
   For an upsert or diff table, beside it, a position delete file ``<uuid>-deletes.parquet`` and
   its delete manifest ``<uuid>-d0.avro``, naming the rows that are not in lading's answer
   (``table.iceberg.deletes``; ``_with_deletes``);
2. a manifest list ``snap-<snapshot id>-<uuid>.avro``: the previous snapshot's manifests plus
   the new one;
3. ``v<v>.metadata.json``, created with the same conditional write the log uses: the mirror's
   commit point. A writer that loses it (another one mirrored *v* first) deletes its own
   manifests and keeps the winner's. A lost answer to its own create is no loss:
   ``Storage.put_if_absent`` reads the file back and recognises it; a create whose outcome stays
   undecided deletes nothing (the manifests may yet be named);
4. ``version-hint.text`` (``<v>``), a hint for path-based readers, as ``_last_checkpoint`` is
   for the log; replaced without waiting for durability (``Storage.put_hint``): readers check
   the file it names and probe past it, and ``sync`` repairs it.

The files of steps 1 and 2 are written together (``_Staged``: concurrent requests, one round
trip) and are all durable before step 3 creates the metadata file that names them. A writer
that published version *v - 1* itself starts steps 1 and 2 of an append-only commit on a thread
beside the log's conditional write of *v* (``prepare``, ``Prepared``); after the commit only
steps 3 and 4 are left. Those files are referenced by nothing until step 3: a writer that does
not get version *v* deletes them, and a killed one leaves them to the mirror's retention.

The snapshot of version *v* has id and sequence number *v* + 1 and carries ``lading.version``
and ``lading.operation`` in its summary. A version that Iceberg readers could not read
exactly (``iceberg.inexact``) gets a metadata file without a new snapshot: the current
snapshot stays the last exact one, and the properties ``lading.mirror.behind-since`` and
``lading.mirror.reason`` say which version the mirror could not follow, and why.

A writer killed between its commit and step 3 leaves the mirror behind; ``sync`` (the next
commit, or ``lading table sync URI``) publishes every missing version in order, and
re-publishing a version that exists is a no-op. Manifests a killed writer left without a
metadata file are referenced by nothing: no reader follows them.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile, OutputStream
from pyiceberg.manifest import (
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
    read_manifest_list,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadataUtil, TableMetadataV2
from pyiceberg.table.refs import SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import MetadataLogEntry, Operation, SnapshotLogEntry, Summary
from pyiceberg.table.snapshots import Snapshot as IcebergSnapshot
from pyiceberg.table.sorting import NullOrder, SortDirection, SortField, SortOrder
from pyiceberg.transforms import IdentityTransform

from lading_jobs import storage as st
from lading_jobs import uploadset
from lading_jobs.table import format as fmt
from lading_jobs.table.iceberg import catalog_pointer, copies, deletes
from lading_jobs.table.iceberg import publisher as mirror_publisher
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.iceberg.avro import write_manifest, write_manifest_list
from lading_jobs.table.log.commits import (
    Part,
    Snapshot,
    TableError,
    TableLog,
    read_commit,
    snapshot_at,
)

METADATA_DIR = "metadata"
VERSION_HINT = "version-hint.text"
MERGE_AT = 100
"""A snapshot reuses its parent's manifests until it would hold this many; then one manifest is
rewritten with every live part (as a commit that removes parts always does)."""
METADATA_LOG_MAX = 100
"""Previous metadata files listed in ``metadata-log`` (Iceberg's write.metadata.previous-versions-max)."""
SNAPSHOTS_MAX = 100
"""Snapshots a metadata file lists: the newest ones (and the current one, however old). Older ones
expire from the newest metadata file as Iceberg's snapshot expiry drops them, so a commit's metadata
file stays the same size however long the table's history; each version stays readable by id from
its own ``v<n>.metadata.json`` (listed in ``metadata-log``)."""
PROP_VERSION = "lading.version"
PROP_BEHIND = "lading.mirror.behind-since"
PROP_REASON = "lading.mirror.reason"
PROP_NAME_MAPPING = "schema.name-mapping.default"
PROP_UNREADABLE = "lading.mirror.unreadable-column-ids"
"""Ids of every column of a type Iceberg cannot express that the table ever had (parts may still hold them)."""


def metadata_uri(uri: str, number: int) -> str:
    """Metadata file ``number``: the n-th the mirror published (lading version n until snapshots expire)."""
    return f"{fmt.table_root(uri)}{METADATA_DIR}/v{number}.metadata.json"


def hint_uri(uri: str) -> str:
    return f"{fmt.table_root(uri)}{METADATA_DIR}/{VERSION_HINT}"


# -- pyiceberg's file interface over lading's storage (bytes in memory, one request each) --------
class _Bytes(InputFile):
    def __init__(self, location: str, data: bytes) -> None:
        super().__init__(location)
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(self._data)


class _Buffer(io.BytesIO):
    def close(self) -> None:  # the Avro writer closes its stream; keep the bytes readable
        pass


class _Output(OutputFile):
    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.buffer = _Buffer()

    def __len__(self) -> int:
        return len(self.buffer.getvalue())

    def exists(self) -> bool:
        return False

    def to_input_file(self) -> InputFile:
        return _Bytes(self.location, self.buffer.getvalue())

    def create(self, overwrite: bool = False) -> OutputStream:
        return self.buffer


# -- reading the mirror -------------------------------------------------------------------------
def latest_number(uri: str, storage: st.Storage) -> int:
    """The number of the newest metadata file (-1: none): from ``version-hint.text``, then probing
    the numbers after it; a missing or damaged hint costs one LIST."""
    start = -1
    try:
        text = storage.read(hint_uri(uri)).decode().strip()
        start = int(text) if text.isdigit() else -1
    except (st.StorageError, FileNotFoundError, UnicodeDecodeError):
        start = -1
    if start < 0 or storage.head(metadata_uri(uri, start)) is None:
        start = max(_listed_versions(uri, storage), default=-1)
    while storage.head(metadata_uri(uri, start + 1)) is not None:
        start += 1
    return start


def _listed_versions(uri: str, storage: st.Storage) -> Iterator[int]:
    for obj in storage.list_objects(f"{fmt.table_root(uri)}{METADATA_DIR}/"):
        name = obj.uri.rsplit("/", 1)[-1]
        if name.startswith("v") and name.endswith(".metadata.json") and name[1:-14].isdigit():
            yield int(name[1:-14])


def read_metadata(uri: str, storage: st.Storage, number: int) -> TableMetadataV2:
    """Metadata file ``number``, parsed by pyiceberg."""
    meta = TableMetadataUtil.parse_raw(storage.read(metadata_uri(uri, number)).decode())
    if not isinstance(meta, TableMetadataV2):
        raise TableError(f"{metadata_uri(uri, number)} is not Iceberg v2 metadata")
    return meta


def mirrored_version(meta: TableMetadataV2 | None) -> int:
    """The lading version a metadata file mirrors (-1: none)."""
    if meta is None:
        return -1
    text = meta.properties.get(PROP_VERSION, "")
    if not text.isdigit():
        raise TableError(f"the mirror's metadata has no {PROP_VERSION} property; it was not written by lading. "
                         "Delete the table's metadata/ directory and run `lading table sync` to rebuild it")
    return int(text)


def _latest(uri: str, storage: st.Storage) -> tuple[int, TableMetadataV2 | None]:
    n = latest_number(uri, storage)
    return n, (read_metadata(uri, storage, n) if n >= 0 else None)


# -- publishing ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Published:
    version: int
    metadata: str
    exact: bool
    reason: str | None = None


def _operation(entry: dict[str, Any]) -> Operation:
    if entry.get("remove"):
        if not entry.get("add"):
            return Operation.DELETE
        return Operation.REPLACE if entry.get("operation") == "compact" else Operation.OVERWRITE
    return Operation.APPEND


def _sort_order(snapshot: Snapshot) -> SortOrder | None:
    fields = []
    for name in snapshot.sort_by:
        c = snapshot.schema.find(name)
        if c is None:
            return None
        fields.append(SortField(source_id=c.id, transform=IdentityTransform(), direction=SortDirection.ASC,
                                null_order=NullOrder.NULLS_FIRST))
    return SortOrder(*fields, order_id=1) if fields else None


_AVRO_NAME = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.avro")


def metadata_path_problem(root: str, uri: object) -> str | None:
    """Why ``uri``, read from the mirror's metadata as one of its Avro files, is not a file the mirror
    writes (``<table>/metadata/<name>.avro``, the name of letters, digits, ``_ - .``); None when it
    is one. The mirror reads and re-lists such files, so a metadata file that someone else wrote
    must not lead it outside the table (as ``fmt.path_problem`` guards the log's part paths). Pure."""
    if not isinstance(uri, str):
        return f"is a {type(uri).__name__}, not a string"
    prefix = f"{fmt.table_root(root)}{METADATA_DIR}/"
    if not uri.startswith(prefix):
        return f"is not under {prefix}"
    if not _AVRO_NAME.fullmatch(uri[len(prefix):]):
        return "is not a plain .avro name (letters, digits, _ - .) directly under metadata/"
    return None


def _check_inside(root: str, uri: object, where: str) -> None:
    problem = metadata_path_problem(root, uri)
    if problem is not None:
        raise TableError(f"{where} {uri!r} {problem}. The mirror writes no such path, so this metadata was "
                         "written or changed by something else; nothing it names is read. Delete the mirror's "
                         f"metadata/ directory and run `lading table sync {fmt.table_root(root)}` to rebuild it")


class _Staged(st.Storage):
    """One publish's view of the store: reads go to ``inner``; ``put`` only keeps the object, and
    ``flush`` writes every kept one at once (concurrent requests, one round trip instead of one
    per file), all of them durable when it returns; it raises the first failure once every write
    ended. The files a metadata file will name are written this way, before it is created."""

    def __init__(self, inner: st.Storage) -> None:
        self.inner = inner
        self.pending: list[tuple[str, bytes]] = []

    def describe(self, uri: str) -> str:
        return self.inner.describe(uri)

    def list_objects(self, prefix: str) -> Iterator[st.ObjectInfo]:
        return self.inner.list_objects(prefix)

    def head(self, uri: str) -> st.ObjectInfo | None:
        return self.inner.head(uri)

    def read(self, uri: str, etag: str | None = None) -> bytes:
        return self.inner.read(uri, etag)

    def read_range(self, uri: str, start: int, end: int, etag: str | None = None) -> bytes:
        return self.inner.read_range(uri, start, end, etag)

    def open_input(self, uri: str, size: int | None = None, etag: str | None = None) -> pa.NativeFile:
        return self.inner.open_input(uri, size, etag)

    def put(self, uri: str, data: bytes) -> None:
        self.pending.append((uri, data))

    def put_if_absent(self, uri: str, data: bytes) -> bool:
        """Written at once (a copy file: created once, never rewritten, durable before ``flush``)."""
        return self.inner.put_if_absent(uri, data)

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        uploadset.parallel(lambda item: self.inner.put(*item), pending, _io_pool())


_POOL: ThreadPoolExecutor | None = None
"""The threads a publish writes its files on, kept for the process (starting threads per publish
cost a commit ~1 ms); never nested (a ``put`` submits nothing), so a bounded pool cannot deadlock."""


def _io_pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="lading-mirror-io")
    return _POOL


_PREPARE_POOL: ThreadPoolExecutor | None = None
"""The threads ``prepare`` runs a first round on (which itself writes on ``_POOL``: a pool of its own,
so that the two never wait for each other's threads)."""


def _prepare_pool() -> ThreadPoolExecutor:
    global _PREPARE_POOL
    if _PREPARE_POOL is None:
        _PREPARE_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lading-mirror-prepare")
    return _PREPARE_POOL


def _forget_pool() -> None:  # a forked child has none of the parent's threads: it starts its own
    global _POOL, _PREPARE_POOL
    _POOL = _PREPARE_POOL = None


os.register_at_fork(after_in_child=_forget_pool)


def _write_avro(storage: st.Storage, out: _Output, written: list[str]) -> None:
    storage.put(out.location, out.buffer.getvalue())
    written.append(out.location)


def _manifests(snapshot: Snapshot, entry: dict[str, Any], prev: TableMetadataV2 | None, prev_uri: str | None,
               storage: st.Storage, written: list[str],
               known: list[ManifestFile] | None = None) -> list[ManifestFile]:
    """The manifests of version ``snapshot.version``'s Iceberg snapshot (written as a side effect;
    their URIs appended to ``written``)."""
    root, v = fmt.table_root(snapshot.uri), snapshot.version
    sid = ice.snapshot_id(v)
    schema = ice.iceberg_schema(snapshot.schema)
    parent = prev.current_snapshot() if prev is not None else None
    added = {raw["path"] for raw in entry.get("add", ())}
    reused: list[ManifestFile] = []
    reuse = parent is not None and parent.snapshot_id == ice.snapshot_id(v - 1) and not entry.get("remove")
    if reuse:
        assert parent is not None
        where = prev_uri
        _check_inside(root, parent.manifest_list, f"{where}: snapshot {parent.snapshot_id}'s manifest-list")
        reused = known if known is not None else list(
            read_manifest_list(_Bytes(parent.manifest_list, storage.read(parent.manifest_list))))
        for m in reused:
            _check_inside(root, m.manifest_path, f"{parent.manifest_list}: manifest_path")
        if len(reused) + 1 > MERGE_AT:
            reuse, reused = False, []
    parts = [p for p in snapshot.parts if not reuse or p.path in added]
    if not parts:
        return reused
    out = _Output(f"{root}{METADATA_DIR}/{uuid.uuid4().hex}-m0.avro")
    with write_manifest(2, PartitionSpec(spec_id=0), schema, out, sid, "deflate") as w:
        for p in parts:
            seq = ice.snapshot_id(p.seq) if p.seq >= 0 else sid
            df = ice.data_file(root, p, snapshot.schema)
            files = [df, copies.write(storage, snapshot, p)] if copies.needed(snapshot.envelope, p) else [df]
            for f in files:  # a part counting rows more than once: its copy file beside it
                if p.path in added:
                    w.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=sid,
                                                        sequence_number=seq, file_sequence_number=sid, data_file=f))
                else:
                    w.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.EXISTING,
                                                        snapshot_id=min(seq, sid), sequence_number=seq,
                                                        file_sequence_number=seq, data_file=f))
    _write_avro(storage, out, written)
    return [*reused, w.to_manifest_file()]


class _DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg's v2 manifest writer, for a manifest of delete files (``content: deletes``)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def _with_deletes(snapshot: Snapshot, entry: dict[str, Any], prev: TableMetadataV2 | None,
                  manifests: list[ManifestFile], storage: st.Storage, written: list[str]) -> list[ManifestFile]:
    """Beside the data manifests of an upsert or diff table's version: a position delete file
    naming the rows that are not in lading's answer (``table.iceberg.deletes``), in a delete manifest of
    its own. Incremental after an exact snapshot of the version before when the commit only adds
    parts (the parent's delete manifests stay); for an upsert compaction after one, its outputs
    decided and the parent's positions in live parts carried into one file; otherwise decided
    over every live part. In both latter cases the parent's delete manifests go."""
    root, v = fmt.table_root(snapshot.uri), snapshot.version
    sid = ice.snapshot_id(v)
    parent = prev.current_snapshot() if prev is not None else None
    reused = any(m.manifest_path not in written for m in manifests)
    incremental = (parent is not None and parent.snapshot_id == ice.snapshot_id(v - 1) and reused
                   and not entry.get("remove") and not (snapshot.envelope == "diff" and "schema" in entry))
    kept = manifests if incremental else [m for m in manifests if m.content == ManifestContent.DATA]
    added = {raw["path"] for raw in entry.get("add", ())} if incremental else None
    carried = None
    if (not incremental and parent is not None and parent.snapshot_id == ice.snapshot_id(v - 1)
            and deletes.compaction_keeps_the_rest(snapshot, entry)):
        carried = _carried_deletes(snapshot, parent, storage)
    if carried is not None:  # only the compaction's outputs are decided; the rest is carried over
        outputs = {raw["path"] for raw in entry.get("add", ())}
        planned = deletes.plan(storage, snapshot, outputs)
        positions = {**carried, **{path: pos for path, pos in planned.items() if path in outputs}}
    else:
        positions = deletes.plan(storage, snapshot, added)
    if not positions:
        return kept
    delete_file = deletes.write(storage, root, positions, written)
    out = _Output(f"{root}{METADATA_DIR}/{uuid.uuid4().hex}-d0.avro")
    with _DeleteManifestWriter(PartitionSpec(spec_id=0), ice.iceberg_schema(snapshot.schema), out, sid,
                               "deflate") as w:
        w.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=sid, sequence_number=sid,
                                            file_sequence_number=sid, data_file=delete_file))
    _write_avro(storage, out, written)
    return [*kept, w.to_manifest_file()]


def _carried_deletes(snapshot: Snapshot, parent: IcebergSnapshot, storage: st.Storage) -> dict[str, Any] | None:
    """The positions the parent snapshot's delete files name in parts that are still live (the
    files' rows of removed parts go with them); None when they cannot all be read as the mirror's
    own files (the caller then decides in full)."""
    root = fmt.table_root(snapshot.uri)
    live = {root + p.path: p.path for p in snapshot.parts}
    try:
        _check_inside(root, parent.manifest_list, f"snapshot {parent.snapshot_id}'s manifest-list")
        fio = _StorageIO(root, storage)
        files = [e.data_file.file_path
                 for m in read_manifest_list(_Bytes(parent.manifest_list, storage.read(parent.manifest_list)))
                 if m.content == ManifestContent.DELETES for e in m.fetch_manifest_entry(fio)]
        return deletes.read_positions(storage, root, files, live)
    except (TableError, st.StorageError, OSError, ValueError, KeyError):
        return None


def build_metadata(snapshot: Snapshot, entry: dict[str, Any], prev: TableMetadataV2 | None,
                   prev_uri: str | None, new_snapshot: IcebergSnapshot | None, reason: str | None) -> TableMetadataV2:
    """The metadata of lading version ``snapshot.version``: ``prev``'s plus ``new_snapshot`` (None for
    a version the mirror cannot follow exactly, with ``reason``). Pure."""
    v, ts = snapshot.version, int(entry.get("timestamp", 0))
    schemas = ice.with_lading_columns(prev.schemas if prev is not None else [])  # lading's columns' ids
    current_schema_id = prev.current_schema_id if prev is not None else None
    schema = ice.iceberg_schema(snapshot.schema) if reason is None else _mirrorable(snapshot)
    if all(s.schema_id != schema.schema_id for s in schemas):
        schemas.append(schema)  # also a version without a snapshot: a part may hold a column it alone had
    if new_snapshot is not None or prev is None:
        current_schema_id = schema.schema_id
    snapshots = list(prev.snapshots) if prev is not None else []
    snapshot_log = list(prev.snapshot_log) if prev is not None else []
    current = prev.current_snapshot_id if prev is not None else None
    if new_snapshot is not None:
        snapshots.append(new_snapshot)
        snapshot_log.append(SnapshotLogEntry.model_validate({"snapshot-id": new_snapshot.snapshot_id,
                                                              "timestamp-ms": ts}))
        current = new_snapshot.snapshot_id
    if len(snapshots) > SNAPSHOTS_MAX:  # expire the oldest: the file stays the same size
        kept = {s.snapshot_id for s in snapshots[-SNAPSHOTS_MAX:]} | ({current} if current is not None else set())
        snapshots = [s for s in snapshots if s.snapshot_id in kept]
        snapshot_log = [e for e in snapshot_log if e.snapshot_id in kept]
    metadata_log = list(prev.metadata_log) if prev is not None else []
    if prev is not None and prev_uri is not None:
        metadata_log = [*metadata_log, MetadataLogEntry.model_validate({"metadata-file": prev_uri,
                                                                         "timestamp-ms": prev.last_updated_ms})]
    properties = {"lading.table-id": snapshot.table_id, "lading.envelope": snapshot.envelope, PROP_VERSION: str(v)}
    current_schema = next((s for s in schemas if s.schema_id == current_schema_id), None)
    if current_schema is not None and any(not f.field_type.is_primitive for f in current_schema.fields):
        properties[PROP_NAME_MAPPING] = ice.name_mapping(current_schema)  # nested fields of parts without ids
    if reason is not None:
        behind = prev.properties.get(PROP_BEHIND) if prev is not None else None
        properties.update({PROP_BEHIND: behind or str(v), PROP_REASON: reason})
    orders = [SortOrder(order_id=0)]
    order = _sort_order(snapshot) if reason is None else None
    if order is not None:
        orders.append(order)
    last_seq = max(prev.last_sequence_number if prev is not None else 0,
                   new_snapshot.sequence_number or 0 if new_snapshot is not None else 0)
    return TableMetadataV2.model_validate({
        "location": fmt.table_root(snapshot.uri).rstrip("/"), "table-uuid": ice.table_uuid(snapshot.table_id),
        "last-updated-ms": ts,
        "last-column-id": max(snapshot.schema.last_column_id, prev.last_column_id if prev is not None else 0,
                              ice.LADING_LAST_COLUMN_ID),
        "schemas": schemas, "current-schema-id": current_schema_id, "partition-specs": [PartitionSpec(spec_id=0)],
        "default-spec-id": 0, "last-partition-id": 999, "properties": properties, "current-snapshot-id": current,
        "snapshots": snapshots, "snapshot-log": snapshot_log, "metadata-log": metadata_log[-METADATA_LOG_MAX:],
        "sort-orders": orders, "default-sort-order-id": orders[-1].order_id,
        "refs": {"main": SnapshotRef.model_validate({"snapshot-id": current, "type": SnapshotRefType.BRANCH})}
        if current is not None else {},
        "last-sequence-number": last_seq})


def _mirrorable(snapshot: Snapshot) -> Schema:
    """The columns Iceberg can express (a first metadata file for a table that cannot be mirrored)."""
    from pyiceberg.types import NestedField

    fields = []
    for c in snapshot.schema.columns:
        try:
            fields.append(NestedField(c.id, c.name, ice.iceberg_type(c), required=False))
        except ice.Unmirrorable:
            continue
    return Schema(*fields, schema_id=snapshot.schema.schema_id)


def _totals(manifests: list[ManifestFile]) -> dict[str, str]:
    """The summary's ``total-records`` (the rows an Iceberg reader of the snapshot returns: its data
    files' rows, copy files included, less the positions its delete files name — each row is named
    once) and ``total-position-deletes``, from the manifests' own counts. Pure."""
    counts = {ManifestContent.DATA: 0, ManifestContent.DELETES: 0}
    for m in manifests:
        counts[m.content] += (m.added_rows_count or 0) + (m.existing_rows_count or 0)
    return {"total-records": str(counts[ManifestContent.DATA] - counts[ManifestContent.DELETES]),
            "total-position-deletes": str(counts[ManifestContent.DELETES])}


def _to_check(snapshot: Snapshot, entry: dict[str, Any], prev: TableMetadataV2 | None) -> list[Part] | None:
    """The parts whose exactness decides version ``snapshot.version`` (``ice.inexact``'s ``only``): the
    commit's added parts when ``prev`` mirrors the version before exactly and the commit changes
    neither the schema nor the table's settings (every other live part passed then, under the same
    schema and the same unreadable column ids, which ``prev`` records); None (every live part)
    otherwise. Pure."""
    if (prev is None or "schema" in entry or "metadata" in entry or PROP_REASON in prev.properties
            or mirrored_version(prev) != snapshot.version - 1
            or prev.current_snapshot_id != ice.snapshot_id(snapshot.version - 1)):
        return None
    added = {raw["path"] for raw in entry.get("add", ())}
    return [p for p in snapshot.parts if p.path in added]


def _first_round(snapshot: Snapshot, entry: dict[str, Any], prev: TableMetadataV2 | None, prev_uri: str | None,
                 storage: st.Storage, written: list[str],
                 prev_manifests: list[ManifestFile] | None) -> tuple[list[ManifestFile], str]:
    """Version ``snapshot.version``'s manifests (and delete file), and its manifest list, all written
    and durable (together: one round of requests); the manifests and the list's URI. Their URIs go
    to ``written`` as they are made."""
    uri, v = fmt.table_root(snapshot.uri), snapshot.version
    staged = _Staged(storage)  # manifests, delete file and manifest list: written together below
    manifests = _manifests(snapshot, entry, prev, prev_uri, staged, written, prev_manifests)
    if deletes.needed(snapshot):
        manifests = _with_deletes(snapshot, entry, prev, manifests, staged, written)
    sid = ice.snapshot_id(v)
    out = _Output(f"{uri}{METADATA_DIR}/snap-{sid}-{uuid.uuid4().hex}.avro")
    parent = prev.current_snapshot_id if prev is not None else None
    with write_manifest_list(2, out, sid, parent, sid, "deflate") as lw:
        lw.add_manifests(manifests)
    _write_avro(staged, out, written)
    staged.flush()  # every file the metadata names is durable before the metadata file is created
    return manifests, out.location


class Prepared:
    """The first round of version ``version``'s publish (``_first_round``: manifest and manifest
    list), started on a thread before the log commit of that version (``prepare``), after metadata
    file ``number``. The publish takes it when the commit landed as ``version`` and the mirror is
    still at ``number``; otherwise it is abandoned: its files are deleted (nothing references
    them; a process killed first leaves them to the mirror's retention, as a killed publish does)."""

    def __init__(self, version: int, number: int, storage: st.Storage,
                 future: Future[tuple[list[ManifestFile], str, list[str]]]) -> None:
        self.version, self.number, self.storage, self.future = version, number, storage, future
        self.settled = False

    def take(self, version: int, number: int) -> tuple[list[ManifestFile], str, list[str]] | None:
        """Its manifests, manifest list and files, for the publish of ``version`` after metadata file
        ``number``; None (abandoned) when it is not for that, or failed (its files already deleted)."""
        if self.settled:
            return None
        if (version, number) != (self.version, self.number):
            self.abandon()
            return None
        self.settled = True
        try:
            return self.future.result()
        except Exception:  # noqa: BLE001 - the publish writes them itself
            return None

    def abandon(self) -> None:
        if self.settled:
            return
        self.settled = True
        try:
            _, _, written = self.future.result()
        except Exception:  # noqa: BLE001 - a failed round deleted its own files
            return
        _discard(self.storage, written)


def _first_round_alone(snapshot: Snapshot, entry: dict[str, Any], prev: TableMetadataV2, prev_uri: str,
                       storage: st.Storage, known: list[ManifestFile]) -> tuple[list[ManifestFile], str, list[str]]:
    written: list[str] = []
    try:
        manifests, manifest_list = _first_round(snapshot, entry, prev, prev_uri, storage, written, known)
    except BaseException:
        _discard(storage, written)
        raise
    return manifests, manifest_list, written


def prepare(log: TableLog, entry: dict[str, Any], snapshot: Snapshot) -> Prepared | None:
    """Before the log commit of ``entry`` (whose state would be ``snapshot``): start writing that
    version's manifest and manifest list on a thread, so that after the commit only the metadata
    file and the hint are left. Only for the common case, where it is cheap to be wrong: this process
    published the version before (``_CACHE``), exactly, and the commit only adds parts that need no
    delete or copy file; None otherwise, and inside ``mirror_publisher.background()`` (off the commit
    path already). The caller hands the result to ``after_commit``, or abandons it when the commit
    did not land as that version."""
    root, v = fmt.table_root(log.uri), snapshot.version
    cached = _CACHE.get(root)
    if (not snapshot.meta.iceberg_mirror or cached is None or entry.get("remove") or mirror_publisher.active()
            or deletes.needed(snapshot)):
        return None
    n, prev, known = cached
    only = _to_check(snapshot, entry, prev)
    if (known is None or only is None or any(copies.needed(snapshot.envelope, p) for p in only)
            or ice.inexact(snapshot, _unreadable(prev) | ice.unmirrorable_ids(snapshot.schema), only) is not None):
        return None
    future = _prepare_pool().submit(_first_round_alone, snapshot, entry, prev, metadata_uri(root, n), log.storage,
                                    known)
    return Prepared(v, n, log.storage, future)


def publish(snapshot: Snapshot, entry: dict[str, Any], storage: st.Storage,
            prev: TableMetadataV2 | None, prev_number: int = -1,
            prev_manifests: list[ManifestFile] | None = None, prepared: Prepared | None = None) -> Published | None:
    """Publish the metadata of lading version ``snapshot.version`` (commit ``entry``) as metadata file
    ``prev_number + 1``, after ``prev`` (file ``prev_number``, which mirrors the version before; None
    for the first). None when that file already exists (another writer published it first): this
    attempt's manifests are deleted, and the caller looks again (``sync``). ``prepared``: its first
    round, when it was started before the commit for this version after ``prev_number``."""
    uri, v = fmt.table_root(snapshot.uri), snapshot.version
    unreadable = _unreadable(prev) | ice.unmirrorable_ids(snapshot.schema)
    reason = (ice.inexact(snapshot, unreadable, _to_check(snapshot, entry, prev)) if snapshot.meta.iceberg_mirror
              else f"the mirror was switched off at version {v} (lading table mirror --off); later versions are "
                   "not mirrored")
    written: list[str] = []
    prev_uri = metadata_uri(uri, prev_number) if prev is not None else None
    try:
        new_snapshot = None
        if reason is None:
            taken = prepared.take(v, prev_number) if prepared is not None else None
            if taken is not None:  # written before the log commit, beside it
                manifests, manifest_list, early = taken
                written.extend(early)
            else:
                manifests, manifest_list = _first_round(snapshot, entry, prev, prev_uri, storage, written,
                                                        prev_manifests)
            sid = ice.snapshot_id(v)
            parent = prev.current_snapshot_id if prev is not None else None
            operation = _operation(entry)
            if operation == Operation.APPEND and any(m.content == ManifestContent.DELETES and m.manifest_path in written
                                                     for m in manifests):
                operation = Operation.OVERWRITE  # rows it supersedes are deleted: not an append
            summary = Summary(operation, **{
                "lading.version": str(v), "lading.operation": str(entry.get("operation", "")),
                "added-data-files": str(len(entry.get("add", ()))),
                "deleted-data-files": str(len(entry.get("remove", ()))),
                "total-data-files": str(len(snapshot.parts)), **_totals(manifests)})
            new_snapshot = IcebergSnapshot.model_validate({
                "snapshot-id": sid, "parent-snapshot-id": parent, "sequence-number": sid,
                "timestamp-ms": int(entry.get("timestamp", 0)), "manifest-list": manifest_list, "summary": summary,
                "schema-id": snapshot.schema.schema_id})
        meta = build_metadata(snapshot, entry, prev, prev_uri, new_snapshot, reason)
        if unreadable:
            meta.properties[PROP_UNREADABLE] = ",".join(str(i) for i in sorted(unreadable))
        target = metadata_uri(uri, prev_number + 1)
        if not storage.put_if_absent(target, meta.model_dump_json(exclude_none=True).encode()):
            _discard(storage, written)  # another writer published this number first: its metadata stands
            return None
    except BaseException as e:
        if not st.undecided(e):  # an undecided create may still land, referencing them: keep them
            _discard(storage, written)  # nothing references them: the metadata file was not created
        raise
    storage.put_hint(hint_uri(uri), str(prev_number + 1).encode())
    _remember(uri, prev_number + 1, meta, manifests if reason is None else None)
    catalog_pointer.follow(snapshot.meta.catalog, uri, prev_uri, target)  # the catalog's pointer, after the file
    return Published(v, target, reason is None, reason)


_CACHE: dict[str, tuple[int, TableMetadataV2, list[ManifestFile] | None]] = {}
"""What this process last published per table: the metadata file's number, the metadata and its current
snapshot's manifests. The next commit from this process starts from it instead of reading them back
(five requests). Safe when stale: the conditional create of the next number then fails and ``sync``
reads what is there."""
_CACHE_TABLES = 64


_CACHE_LOCK = threading.Lock()  # publishes, early rounds and warm-ups of several tables on several threads


def _remember(uri: str, number: int, meta: TableMetadataV2, manifests: list[ManifestFile] | None,
              *, unless_held: bool = False) -> None:
    """``unless_held``: only when this process holds nothing of the table (a warm-up: this process's
    own publish, if one came first, is newer)."""
    with _CACHE_LOCK:
        if unless_held and uri in _CACHE:
            return
        if len(_CACHE) >= _CACHE_TABLES and uri not in _CACHE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[uri] = (number, meta, manifests)


def warm(uri: str, storage: st.Storage) -> Future[None] | None:
    """For a writer that will commit to table ``uri`` later (a load, while Spark writes its parts):
    start reading the mirror's newest metadata file and its current snapshot's manifest list into
    this process's memory (``_CACHE``) on a thread, as if this process had published them; its
    commit then starts its manifests beside the log commit (``prepare``) and reads nothing back.
    Nothing when this process already holds the table's. Never raises: a failure leaves the publish
    to read what it needs, and a mirror that moves on meanwhile makes the memory stale, which is
    safe (see ``_CACHE``)."""
    root = fmt.table_root(uri)
    if root in _CACHE:
        return None
    return _prepare_pool().submit(_warm, root, storage)


def _warm(root: str, storage: st.Storage) -> None:
    try:
        n, meta = _latest(root, storage)
        if meta is None:
            return
        current = meta.current_snapshot()
        manifests = None
        if current is not None and PROP_REASON not in meta.properties:
            _check_inside(root, current.manifest_list, f"{metadata_uri(root, n)}: the current snapshot's manifest-list")
            manifests = list(read_manifest_list(_Bytes(current.manifest_list, storage.read(current.manifest_list))))
        _remember(root, n, meta, manifests, unless_held=True)
    except Exception:  # noqa: BLE001 - an optimisation: the publish reads what it needs itself
        return


def current_metadata(uri: str, storage: st.Storage | None = None) -> str | None:
    """The newest metadata file of the table's mirror (None: none, or it cannot be read): what this
    process last published, else one look at the store. For results and status; never raises."""
    root = fmt.table_root(uri)
    cached = _CACHE.get(root)
    try:
        n = latest_number(root, storage or st.open_storage(root)) if cached is None else cached[0]
    except Exception:  # noqa: BLE001 - a status detail: leave it out
        return None
    return metadata_uri(root, n) if n >= 0 else None


def forget(uri: str | None = None) -> None:
    """Drop what this process remembers of a table's mirror (every table's: None), as a process that
    never published it; the next commit reads the metadata back."""
    if uri is None:
        _CACHE.clear()
    else:
        _CACHE.pop(fmt.table_root(uri), None)


def _unreadable(prev: TableMetadataV2 | None) -> frozenset[int]:
    text = prev.properties.get(PROP_UNREADABLE, "") if prev is not None else ""
    return frozenset(int(i) for i in text.split(",") if i.strip().isdigit())


def _discard(storage: st.Storage, uris: list[str]) -> None:
    if uris:
        with contextlib.suppress(Exception):  # unreferenced files: garbage, never read
            storage.delete(uris)


def _repair_hint(uri: str, storage: st.Storage, number: int) -> None:
    """Point ``version-hint.text`` at ``number`` when it names an older file (a writer died between
    creating the metadata file and the hint), a file that does not exist, or nothing readable."""
    try:
        text = storage.read(hint_uri(uri)).decode().strip()
        stale = not text.isdigit() or int(text) < number or storage.head(metadata_uri(uri, int(text))) is None
    except (st.StorageError, FileNotFoundError, UnicodeDecodeError):
        stale = True
    if stale:
        storage.put_hint(hint_uri(uri), str(number).encode())


def sync(uri: str, storage: st.Storage | None = None, *, upto: int | None = None) -> list[Published]:
    """Publish every lading version the mirror lacks, in version order, up to ``upto`` (the latest:
    None); what this call published. Nothing to do when the mirror is current, or switched off.
    A version another writer publishes meanwhile is taken as published (its file stands)."""
    storage = storage or st.open_storage(uri)
    root = fmt.table_root(uri)
    mirror_publisher.wait(root)  # what this process handed to its background publisher goes first
    log = TableLog.open_existing(root, storage)
    if not log.snapshot().meta.iceberg_mirror:
        return []
    latest = log.version if upto is None else min(upto, log.version)
    out: list[Published] = []
    while True:
        n, prev = _latest(root, storage)
        if n >= 0:
            _repair_hint(root, storage, n)
        v = mirrored_version(prev) + 1
        if v > latest:
            if prev is not None and _account_lading_columns(root, storage, n, prev):
                continue  # a metadata file written before lading's columns were recorded: recorded now
            if n >= 0 and not out:  # a pointer left behind (a publish killed before it) moves to the newest file
                catalog_pointer.follow(log.snapshot().meta.catalog, root, None, metadata_uri(root, n))
            return out
        published = publish(snapshot_at(root, storage, v), read_commit(root, storage, v), storage, prev, n)
        if published is not None:
            out.append(published)


def _account_lading_columns(root: str, storage: st.Storage, n: int, meta: TableMetadataV2) -> bool:
    """When metadata file ``n`` (``meta``, the newest) lacks the schema of lading's own columns
    (``ice.with_lading_columns``), create file ``n + 1`` with it (as retention's expiry does: same
    ``lading.version``); True when a file ``n + 1`` exists now (this call's or another writer's)."""
    new = ice.accounting_lading_columns(meta, metadata_uri(root, n), int(time.time() * 1000), METADATA_LOG_MAX)
    if new is None:
        return False
    if storage.put_if_absent(metadata_uri(root, n + 1), new.model_dump_json(exclude_none=True).encode()):
        storage.put_hint(hint_uri(root), str(n + 1).encode())
    return True


def after_commit(log: TableLog, entry: dict[str, Any], snapshot: Snapshot, prepared: Prepared | None = None) -> None:
    """The writer's step after commit ``entry`` landed: mirror it (and any version the mirror
    lacks before it, first). Inside ``mirror_publisher.background()`` the publish runs on the table's
    background publisher, in version order, and this returns at once (``flush`` waits for it).
    Best effort: a failure leaves the mirror behind, says so on stderr (here, or at ``settle``), and
    never fails the commit (the next writer or ``lading table sync`` catches up). ``prepared``: this
    version's first round, started before the commit (``prepare``); abandoned if not used."""
    try:
        switched_off = not snapshot.meta.iceberg_mirror and "metadata" in entry and entry.get("version", 0) > 0
        if not snapshot.meta.iceberg_mirror and not switched_off:
            return
        root = fmt.table_root(log.uri)
        if mirror_publisher.active():
            mirror_publisher.submit(root, snapshot.version,
                                    lambda: _publish_after(log, entry, snapshot, switched_off))
            return
        mirror_publisher.wait(root)  # a publish handed over before, if any, goes first
        try:
            _publish_after(log, entry, snapshot, switched_off, prepared)
        except Exception as e:  # noqa: BLE001 - the commit stands; the mirror catches up later
            print(f"lading: the Iceberg mirror of {log.uri} is behind version {snapshot.version} ({e}); "
                  f"`lading table sync {log.uri}` or the next commit catches it up", file=sys.stderr)
    finally:
        if prepared is not None:
            prepared.abandon()  # not taken (a no-op when it was)


def flush(uri: str) -> None:
    """Wait until every version this process committed to table ``uri`` is mirrored (published in the
    background); ``mirror_publisher.MirrorBehind`` names the table and version when a publish failed."""
    mirror_publisher.flush(fmt.table_root(uri))


def _publish_after(log: TableLog, entry: dict[str, Any], snapshot: Snapshot, switched_off: bool,
                   prepared: Prepared | None = None) -> None:
    root, v = fmt.table_root(log.uri), snapshot.version
    if switched_off:  # one last metadata file says so, if there is a mirror to say it in
        n, prev = _latest(root, log.storage)
        if prev is not None and mirrored_version(prev) == v - 1:
            publish(snapshot, entry, log.storage, prev, n)
        return
    cached = _CACHE.get(root)
    known: list[ManifestFile] | None = None
    if v == 0:
        n, prev = -1, None
    elif cached is not None and mirrored_version(cached[1]) == v - 1:
        n, prev, known = cached  # published by this process just before: no need to read it back
    else:
        n, prev = _latest(root, log.storage)
    done = mirrored_version(prev)
    if done == v - 1 and publish(snapshot, entry, log.storage, prev, n, known, prepared) is not None:
        return
    if done < v:
        sync(root, log.storage, upto=v)


class _StorageIO(FileIO):
    """pyiceberg's FileIO for reading the mirror's own Avro files through lading's storage (paths checked)."""

    def __init__(self, root: str, storage: st.Storage) -> None:
        super().__init__()
        self.root, self.storage = root, storage

    def new_input(self, location: str) -> InputFile:
        _check_inside(self.root, location, "a manifest list's manifest_path")
        return _Bytes(location, self.storage.read(location))

    def new_output(self, location: str) -> OutputFile:
        raise NotImplementedError("the mirror writes through lading's storage")

    def delete(self, location: str | InputFile | OutputFile) -> None:
        raise NotImplementedError("the mirror deletes through lading's storage")


def _data_files(root: str, storage: st.Storage, snap: IcebergSnapshot, where: str) -> set[str]:
    _check_inside(root, snap.manifest_list, f"{where}: snapshot {snap.snapshot_id}'s manifest-list")
    fio = _StorageIO(root, storage)
    manifests = read_manifest_list(_Bytes(snap.manifest_list, storage.read(snap.manifest_list)))
    return {e.data_file.file_path for m in manifests for e in m.fetch_manifest_entry(fio)}


def expire(uri: str, storage: st.Storage, deleting: Iterable[str]) -> set[str]:
    """Before retention deletes the parts ``deleting`` (full URIs): publish a metadata file without
    the snapshots that reference any of them, so no Iceberg reader is ever handed a snapshot whose
    files are gone. The mirror is caught up first. Returns the URIs that must *not* be deleted: the
    files of the current snapshot of a mirror that stays behind the log (its last exact version; an
    Iceberg reader would otherwise lose it). Nothing to do for a table without a mirror."""
    root = fmt.table_root(uri)
    mirror_publisher.wait(root)  # publishes handed over in this process first
    doomed = set(deleting)
    log = TableLog.open(root, storage)
    if log is None or not log.snapshot().meta.iceberg_mirror or not doomed:
        return set()
    sync(root, storage)
    while True:
        n, meta = _latest(root, storage)
        if meta is None:
            return set()
        where = metadata_uri(root, n)
        keep, gone, held = [], [], set()
        for snap in meta.snapshots:
            files = _data_files(root, storage, snap, where) & doomed
            if snap.snapshot_id == meta.current_snapshot_id:
                keep.append(snap)
                held = files
            elif files:
                gone.append(snap.snapshot_id)
            else:
                keep.append(snap)
        if not gone:
            return held
        ids = {s.snapshot_id for s in keep}
        entries = [*meta.metadata_log, MetadataLogEntry.model_validate({"metadata-file": where,
                                                                      "timestamp-ms": meta.last_updated_ms})]
        new = meta.model_copy(update={
            "snapshots": keep, "snapshot_log": [e for e in meta.snapshot_log if e.snapshot_id in ids],
            "metadata_log": entries[-METADATA_LOG_MAX:], "last_updated_ms": max(meta.last_updated_ms,
                                                                               int(time.time() * 1000))})
        new.properties["lading.mirror.expired"] = ",".join(str(i) for i in gone)
        if storage.put_if_absent(metadata_uri(root, n + 1), new.model_dump_json(exclude_none=True).encode()):
            storage.put_hint(hint_uri(root), str(n + 1).encode())
            return held
        # another writer published file n + 1 first: look again


def describe(uri: str, storage: st.Storage | None = None) -> dict[str, Any]:
    """What the mirror holds: its newest metadata file, its current snapshot's lading version, and
    whether (and why) it is behind the log. For ``lading table sync`` and status."""
    storage = storage or st.open_storage(uri)
    root = fmt.table_root(uri)
    mirror_publisher.wait(root)
    n, meta = _latest(root, storage)
    out: dict[str, Any] = {"metadata": metadata_uri(root, n) if n >= 0 else None,
                           "mirroredVersion": mirrored_version(meta)}
    if meta is not None:
        if meta.current_snapshot_id is not None:
            out["snapshotVersion"] = ice.version_of(meta.current_snapshot_id)
        if PROP_REASON in meta.properties:
            out["behindSince"] = int(meta.properties[PROP_BEHIND])
            out["reason"] = meta.properties[PROP_REASON]
    return json.loads(json.dumps(out))
