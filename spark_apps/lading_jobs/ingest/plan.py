"""Planning the file tasks of a load or a stream batch: one per file, big Parquet files split.

A task reads one file, or a range of consecutive row groups of a Parquet file bigger than
``CHUNK_BYTES`` (read from its footer); small files are packed several to a Spark task.
The planning itself is ``lading_jobs.splits`` (the one split planner); this module turns
its pieces into ``task.FileTask``s.
"""

from __future__ import annotations

from collections.abc import Iterable

from lading_jobs import splits
from lading_jobs import storage as st
from lading_jobs.ingest.stores import storage_for
from lading_jobs.ingest.task import FileTask

CHUNK_BYTES = 256 * 1024**2
"""A Parquet file bigger than this is read by several tasks, each a range of its row groups."""


def _pieces(files: list[st.ObjectInfo], fmt_name: str, settings: st.S3Settings,
            chunk_bytes: int) -> list[splits.Piece]:
    refs = [splits.FileRef(o.uri, o.size, o.etag) for o in files]
    footers = splits.footer_row_groups(
        lambda f: storage_for(f.uri, settings).open_input(f.uri, f.size, etag=f.etag or None))
    return splits.pieces(refs, fmt_name, chunk_bytes, footers)


def plan_tasks(files: Iterable[st.ObjectInfo], fmt_name: str, settings: st.S3Settings,
               chunk_bytes: int = CHUNK_BYTES) -> list[FileTask]:
    """One task per file; a Parquet file bigger than ``chunk_bytes`` is split into tasks of
    consecutive row groups of about that many (compressed) bytes, read from its footer
    (the one split planner, ``lading_jobs.splits``)."""
    return plan_load(files, fmt_name, settings, 1, chunk_bytes)[0]


def plan_load(files: Iterable[st.ObjectInfo], fmt_name: str, settings: st.S3Settings, cores: int,
              chunk_bytes: int = CHUNK_BYTES) -> tuple[list[FileTask], list[list[int]]]:
    """The file tasks (``plan_tasks``) and their grouping into Spark tasks: small files packed
    under Spark's budget rule over the run's bytes (``splits.budget``, ``splits.pack_indices``),
    so many small files make fewer, larger tasks. ``files`` may be any iterable (a storage
    listing is a generator): it is read once."""
    files = list(files)
    found = _pieces(files, fmt_name, settings, chunk_bytes)
    tasks = [FileTask(i, p.uri, p.etag, p.size, p.file_index, p.row_groups, p.first_row)
             for i, p in enumerate(found)]
    budget = splits.budget(sum(o.size for o in files), cores, chunk_bytes, files=len(files))
    return tasks, splits.pack_indices([p.bytes for p in found], budget)
