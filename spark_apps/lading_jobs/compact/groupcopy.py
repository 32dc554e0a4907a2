"""A plain bin-pack without decoding: the parts' row groups copied into the outputs as stored.

A streamed group (``task.streams``: an append or diff table, no ``sortBy``, no row to
consolidate) only concatenates its parts' rows, in part order; decoding and encoding
them again was about 80 % of such a group's CPU. When every part is a file whose
Parquet schema is exactly the one a rewrite would write (names, types, repetition,
field ids: ``parquetfooter.Reference`` of the part schema), with the rewrite's codec,
written by a writer whose statistics use the type's order (parquet-cpp-arrow, or lading
itself), neither encrypted nor carrying page indexes or bloom filters, its bytes from
the first column chunk to the footer are copied into an output part unchanged: each
input row group becomes one output row group, its column chunks' metadata (statistics,
encodings, page offsets moved) kept. The output's footer is lading's (``parquetfooter``):
the schema, key-value metadata and column orders pyarrow writes for the part schema.

Whole parts go into each output, in order, as many as its ``targetFileSize`` ceiling
holds (measured exactly, footer included), so an output's table statistics are its
parts' log statistics merged (``stats.merge``, which gives what the rows would give),
with its own size. Row groups stay the size the parts' writers made them, so a group is
copied only if they average at least ``MIN_ROW_GROUP_BYTES`` stored bytes: tiny parts
(a stream's small commits) are rewritten into full row groups as before.

Anything else (a part of an older schema, another codec, a runt, a part that would not fit
an output alone) sends the whole group back to the rewrite (``copy_parts`` returns None,
having aborted what it began); the decision is taken as parts arrive, so a group given up
late has read some parts twice.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa

from lading_jobs import storage as st
from lading_jobs.formats import thrift
from lading_jobs.formats.parquetfile import writer_options
from lading_jobs.formats.parquetfooter import (
    CC_CRYPTO,
    CC_INDEXES,
    CC_META,
    CC_OFFSET,
    CC_PATH,
    CM_BLOOM,
    CM_CODEC,
    CM_DATA_PAGE,
    CM_DICTIONARY_PAGE,
    CM_INDEX_PAGE,
    CM_STORED,
    CREATED_BY,
    FMD_CREATED_BY,
    FMD_ENCRYPTION,
    FMD_GROUPS,
    FMD_ORDERS,
    FMD_ROWS,
    FMD_SCHEMA,
    FMD_SIGNING_KEY,
    MAGIC,
    RG_COLUMNS,
    RG_OFFSET,
    RG_ORDINAL,
    RG_ROWS,
    SE_CHILDREN,
    FooterSize,
    Reference,
    chunk_start,
    footer,
    footer_bytes,
    trusted_writer,
)
from lading_jobs.sink import PartSink
from lading_jobs.table import format as fmt
from lading_jobs.table.log.commits import Part, Snapshot
from lading_jobs.table.stats import part as stx
from lading_jobs.table.writer import WrittenPart

MIN_ROW_GROUP_BYTES = 256 * 1024
"""Least mean stored bytes of the row groups a copy keeps: below it, an output of ``targetFileSize``
would hold thousands of row groups (a footer of megabytes, a page header and statistics per column
per few rows) and the rewrite's full row groups are worth their CPU."""
READ_AHEAD = 4
"""Parts read on helper threads ahead of the one being copied (an S3 part is one GET each)."""


class CannotCopy(Exception):
    """This part (so this group) is not copied: the reason, for tests and logs."""


@dataclass
class _Output:
    path: str
    sink: PartSink
    groups: list[thrift.Encoded]
    group_bytes: int = 0
    rows: int = 0
    stats: stx.PartStats | None = None


def reference(snap: Snapshot, compression: str) -> Reference:
    """What a rewrite's part writer writes for ``snap``'s part schema (its footer's schema, metadata
    and column orders: dictionary choices do not show there)."""
    schema = snap.schema.arrow_schema(table_id=snap.table_id, envelope=snap.envelope)
    return Reference.of(schema, writer_options(compression), compression)


def _moved(group: thrift.Struct, delta: int) -> thrift.Struct:
    """A RowGroup whose chunks moved ``delta`` bytes (no ``ordinal``: it is the file's, not the group's)."""
    out = group.copy()
    out.drop(RG_ORDINAL)
    if out.get(RG_OFFSET) is not None:
        out.set(RG_OFFSET, thrift.I64, out.get(RG_OFFSET) + delta)
    for cc in out.get(RG_COLUMNS).values:
        cc.set(CC_OFFSET, thrift.I64, cc.get(CC_OFFSET) + delta)
        md = cc.get(CC_META)
        for fid in (CM_DATA_PAGE, CM_DICTIONARY_PAGE):
            if md.get(fid):  # a dictionary page offset of 0 (some writers) means none
                md.set(fid, thrift.I64, md.get(fid) + delta)
    return out


def leaf_count(ref: Reference) -> int:
    """The column chunks of each row group: one per leaf of the schema (nested columns have several)."""
    return sum(1 for e in ref.footer.get(FMD_SCHEMA).values[1:] if e.get(SE_CHILDREN) is None)


def body(part: Part, data: bytes, ref: Reference, leaves: int) -> tuple[list[thrift.Struct], pa.Buffer]:
    """The row groups of a part file (``data``) and the bytes their chunks fill, from the magic to
    the footer; ``CannotCopy`` unless they are exactly what the rewrite would store for them
    (``leaves``: ``leaf_count(ref)``)."""
    try:
        meta = thrift.decode(footer_bytes(data))
    except (ValueError, thrift.ThriftError) as e:
        raise CannotCopy(f"{part.path}: {e}") from e
    created_by = meta.get(FMD_CREATED_BY)
    if not (created_by == CREATED_BY or (trusted_writer(created_by) and created_by.startswith(b"parquet-cpp-arrow"))):
        raise CannotCopy(f"{part.path}: written by {created_by!r}")
    if meta.get(FMD_ENCRYPTION) is not None or meta.get(FMD_SIGNING_KEY) is not None:
        raise CannotCopy(f"{part.path}: encrypted")
    if meta.get(FMD_SCHEMA) != ref.footer.get(FMD_SCHEMA) or meta.get(FMD_ORDERS) != ref.footer.get(FMD_ORDERS):
        raise CannotCopy(f"{part.path}: not the part schema a rewrite writes")
    if meta.get(FMD_ROWS) != part.rows:
        raise CannotCopy(f"{part.path}: {meta.get(FMD_ROWS)} rows, the log says {part.rows}")
    groups = meta.get(FMD_GROUPS).values
    spans = []
    for g in groups:
        columns = g.get(RG_COLUMNS).values
        if len(columns) != leaves:
            raise CannotCopy(f"{part.path}: {len(columns)} column chunks in a row group")
        for cc in columns:
            md = cc.get(CC_META)
            if (md is None or cc.get(CC_PATH) is not None or any(cc.get(k) is not None for k in (*CC_INDEXES, *CC_CRYPTO))
                    or md.get(CM_INDEX_PAGE) is not None or any(md.get(k) is not None for k in CM_BLOOM)):
                raise CannotCopy(f"{part.path}: a column chunk with page indexes, bloom filters or elsewhere")
            if md.get(CM_CODEC) != ref.codec:
                raise CannotCopy(f"{part.path}: codec {md.get(CM_CODEC)}, the rewrite writes {ref.codec}")
            start = chunk_start(cc)
            spans.append((start, start + md.get(CM_STORED)))
    end = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    at = len(MAGIC)
    for start, stop in sorted(spans):  # the chunks fill the file between magic and footer, nothing else
        if start != at:
            raise CannotCopy(f"{part.path}: bytes between column chunks")
        at = stop
    if at != end:
        raise CannotCopy(f"{part.path}: bytes between the last column chunk and the footer")
    return groups, pa.py_buffer(data).slice(len(MAGIC), end - len(MAGIC))  # no copy: the sink keeps it


def _read(storage: st.Storage, snap: Snapshot, parts: Sequence[Part]) -> Iterator[tuple[Part, bytes]]:
    """Each part's bytes, in order, ``READ_AHEAD`` parts read ahead on helper threads."""
    todo = iter(parts)
    with concurrent.futures.ThreadPoolExecutor(READ_AHEAD, thread_name_prefix="lading-copy") as pool:
        pending = collections.deque((p, pool.submit(storage.read, snap.part_uri(p)))
                                    for p in itertools.islice(todo, READ_AHEAD))
        while pending:
            part, data = pending.popleft()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append((nxt, pool.submit(storage.read, snap.part_uri(nxt))))
            yield part, data.result()


class GroupCopier:
    """One group's outputs of copied row groups (``copy``), as pending uploads."""

    def __init__(self, snap: Snapshot, write_id: str, task: int, storage: st.Storage, max_size: int, *,
                 keep_order: tuple[int, int] | None = None, compression: str = "zstd",
                 buffer_size: int = 16 * 1024**2) -> None:
        self.snap, self.write_id, self.task, self.storage = snap, write_id, task, storage
        self.max_size, self.keep_order, self.buffer_size = max_size, keep_order, buffer_size
        self.ref = reference(snap, compression)
        self.footer_size = FooterSize(self.ref)
        self.leaves = leaf_count(self.ref)
        self.decimal_ids = frozenset(c.id for c in snap.schema.columns if c.type.startswith("decimal"))
        self.done: list[WrittenPart] = []
        self.begun: list[PartSink] = []
        self.out: _Output | None = None

    def copy(self, parts: Sequence[Part]) -> list[WrittenPart]:
        """``parts`` copied, in order, into outputs (pending uploads); ``CannotCopy`` if any one cannot be."""
        stored = sum(p.size for p in parts)
        if any(p.schema_id != self.snap.schema.schema_id for p in parts):
            raise CannotCopy("a part of an older schema")
        if any(p.size >= self.max_size for p in parts):
            raise CannotCopy("a part as large as targetFileSize")
        seen = 0
        for part, data in _read(self.storage, self.snap, parts):
            groups, chunks = body(part, data, self.ref, self.leaves)
            seen += len(groups)
            if seen * MIN_ROW_GROUP_BYTES > stored:  # the group's row groups, counted as they come
                raise CannotCopy(f"row groups of less than {MIN_ROW_GROUP_BYTES} bytes on average")
            self._add(part, groups, chunks)
        self._close()
        return self.done

    def _placed(self, out: _Output, groups: list[thrift.Struct], chunks: pa.Buffer) -> tuple[list[thrift.Encoded], int]:
        """``groups`` placed at the end of ``out``, encoded, and the size of ``out`` closed after them."""
        delta = out.sink.size - len(MAGIC)
        encoded = [thrift.Encoded(thrift.encode(_moved(g, delta))) for g in groups]
        rows = out.rows + sum(g.get(RG_ROWS) for g in groups)
        size = self.footer_size.of(rows, len(out.groups) + len(encoded), out.group_bytes + sum(len(e.data) for e in encoded))
        return encoded, out.sink.size + len(chunks) + size + 8

    def _add(self, part: Part, groups: list[thrift.Struct], chunks: pa.Buffer) -> None:
        out = self.out or self._open()
        encoded, size = self._placed(out, groups, chunks)
        if size > self.max_size and out.stats is not None:
            self._close()
            out = self._open()
            encoded, size = self._placed(out, groups, chunks)
        if size > self.max_size:
            raise CannotCopy(f"{part.path} does not fit an output of targetFileSize alone")
        out.sink.write(chunks)
        out.groups += encoded
        out.group_bytes += sum(len(e.data) for e in encoded)
        out.rows += part.rows
        out.stats = part.stats if out.stats is None else stx.merge(out.stats, part.stats, self.decimal_ids)

    def _open(self) -> _Output:
        path = fmt.part_path(self.write_id, self.task, len(self.begun))
        sink = PartSink(self.storage, fmt.part_uri(self.snap.uri, path), self.buffer_size)
        self.begun.append(sink)
        sink.write(MAGIC)
        self.out = _Output(path, sink, [])
        return self.out

    def _close(self) -> None:
        out, self.out = self.out, None
        if out is None or out.stats is None:
            return
        encoded = footer(self.ref, out.groups, out.rows)
        out.sink.write(encoded)
        out.sink.write(len(encoded).to_bytes(4, "little") + MAGIC)
        upload = out.sink.finish()
        if out.sink.size > self.max_size or out.stats.rows != out.rows:
            raise RuntimeError(f"internal: a copied part of {out.sink.size} bytes and {out.rows} rows "
                               f"(statistics of {out.stats.rows}, ceiling {self.max_size}); please report this")
        stats = replace(out.stats, bytes=out.sink.size)
        seq, index = self.keep_order if self.keep_order is not None else (-1, 0)
        schema = self.snap.schema
        self.done.append(WrittenPart(upload.to_dict(), Part(out.path, out.sink.size, stats, seq=seq,
                                                            schema_id=schema.schema_id, index=index,
                                                            nested_ids=schema.nested)))

    def abort(self) -> None:
        for sink in self.begun:
            with contextlib.suppress(Exception):  # best effort; retention sweeps stale uploads
                sink.abort()
        self.done = []


def copy_parts(snap: Snapshot, parts: Sequence[Part], write_id: str, task: int, storage: st.Storage, max_size: int,
               keep_order: tuple[int, int] | None = None) -> list[WrittenPart] | None:
    """``parts`` copied into outputs (pending uploads), or None when they cannot all be (nothing is
    left begun then: the caller rewrites them). Any other error aborts what was begun and propagates."""
    copier = GroupCopier(snap, write_id, task, storage, max_size, keep_order=keep_order)
    try:
        return copier.copy(parts)
    except CannotCopy:
        copier.abort()
        return None
    except BaseException:
        copier.abort()
        raise
