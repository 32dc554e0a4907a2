"""Retention of the Iceberg mirror's own files: what no kept metadata file references goes.

The mirror writes, under ``<table>/metadata/``, metadata files (``v<n>.metadata.json``), manifest
lists (``snap-*.avro``), manifests (``*-m0.avro``, delete manifests ``*-d0.avro``), position delete
files (``<uuid>-deletes.parquet``) and copy files (``<hash>-copies.parquet``). After retention has
expired snapshots in the metadata (``mirror.expire``: a new newest metadata file without them) and
deleted their parts, this sweeps the rest, with the grace period parts have:

* **kept** metadata files: the newest, and every one last modified within the grace period (a
  reader may have opened it; the store's clock, as for parts);
* **referenced**: the kept metadata files, their snapshots' manifest lists, those lists'
  manifests, and the delete and copy files those manifests list; and the copy file of every part
  live in the log (a publisher that found it there may be about to list it);
* **deleted**: every other file of the mirror's own names last modified before the grace period
  began (a publisher writes manifests before the metadata file that references them: the grace
  period covers it, as it covers a writer's parts before its commit). ``version-hint.text`` and
  anything not of the mirror's names are never touched.

Metadata files go first, then manifest lists, manifests, then delete and copy files: a reader
(or a run killed midway) never finds a remaining metadata file naming a deleted file, and the next
run deletes what a killed one left. ``choose`` is the pure decision; ``plan`` reads; ``apply`` deletes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyiceberg.manifest import read_manifest_list

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table.iceberg import copies, mirror
from lading_jobs.table.iceberg import publisher as mirror_publisher
from lading_jobs.table.log.commits import TableError, TableLog

_KINDS = (  # the mirror's own names, in the order they are deleted
    re.compile(r"v\d+\.metadata\.json"),
    re.compile(r"snap-\d+-[0-9a-f]{32}\.avro"),
    re.compile(r"[0-9a-f]{32}-[md]0\.avro"),
    re.compile(r"[0-9a-f]{32}-(deletes|copies)\.parquet"),
)


def kind(name: str) -> int | None:
    """The deletion rank of a file name directly under ``metadata/`` (0: metadata file, 1: manifest
    list, 2: manifest, 3: delete or copy file), or None when the mirror does not write such a name. Pure."""
    for i, pattern in enumerate(_KINDS):
        if pattern.fullmatch(name):
            return i
    return None


@dataclass(frozen=True)
class MirrorSweep:
    deleted: tuple[st.ObjectInfo, ...]  # in deletion order

    @property
    def bytes(self) -> int:
        return sum(o.size for o in self.deleted)


def choose(root: str, objects: Iterable[st.ObjectInfo], referenced: set[str], cutoff_s: float) -> MirrorSweep:
    """The mirror's files under ``metadata/`` that nothing ``referenced`` (full URIs) names and that were
    last modified before ``cutoff_s`` (store seconds), in deletion order. Pure."""
    prefix = f"{fmt.table_root(root)}{mirror.METADATA_DIR}/"
    out: list[tuple[int, st.ObjectInfo]] = []
    for o in objects:
        if not o.uri.startswith(prefix):
            continue
        rank = kind(o.uri[len(prefix):])
        if rank is None or o.uri in referenced or o.modified is None or o.modified >= cutoff_s:
            continue
        out.append((rank, o))
    return MirrorSweep(tuple(o for _, o in sorted(out, key=lambda t: (t[0], t[1].uri))))


def _metadata_number(prefix: str, uri: str) -> int | None:
    name = uri[len(prefix):]
    return int(name[1:-14]) if kind(name) == 0 else None


_SNAP_LIST = re.compile(r"snap-(\d+)-[0-9a-f]{32}\.avro")


def between(lo: int, hi: int, listed: Iterable[str]) -> set[str]:
    """The manifest lists among ``listed`` (full URIs) of snapshots with ids in ``(lo, hi]``. Pure."""
    out = set()
    for uri in listed:
        m = _SNAP_LIST.fullmatch(uri.rsplit("/", 1)[-1])
        if m is not None and lo < int(m.group(1)) <= hi:
            out.add(uri)
    return out


def referenced(root: str, storage: st.Storage, numbers: Iterable[int], listed: Iterable[str] | None = None) -> set[str]:
    """Every file the metadata files ``numbers`` reference, themselves included (full URIs). A file
    that cannot be read or names a path outside the mirror's own is a ``TableError``: what it
    protects is unknown, so nothing is deleted.

    With ``listed`` (the URIs under ``metadata/``) and every number from the lowest to the highest
    there, only the first and the last metadata file are read: a metadata file lists its predecessor's
    snapshots (some expired) plus at most its own new one, and snapshot ids only grow, so the snapshots
    of those in between are the first's, or have ids above the first's newest and up to the last's
    newest: their manifest lists are found by name (``snap-<id>-<uuid>.avro``; a killed writer's
    unreferenced one of such an id is kept too, until its id falls behind every kept file)."""
    out: set[str] = set()
    lists: set[str] = set()
    numbers = sorted(set(numbers))
    if listed is not None and len(numbers) > 2:
        listed = list(listed)
        present = {n for u in listed if (n := _metadata_number(f"{fmt.table_root(root)}{mirror.METADATA_DIR}/", u))
                   is not None}
        if set(range(numbers[0], numbers[-1] + 1)) <= present:
            out.update(mirror.metadata_uri(root, n) for n in numbers)
            ends = [numbers[0], numbers[-1]]
            newest_ids = [max((snap.snapshot_id for snap in _parse(root, storage, n, lists)), default=0) for n in ends]
            named = between(newest_ids[0], newest_ids[1], listed) - lists
            return out | _listed_files(root, storage, lists) | _listed_files(root, storage, named, optional=True)
    for n in numbers:
        uri = mirror.metadata_uri(root, n)
        out.add(uri)
        _parse(root, storage, n, lists)
    return out | _listed_files(root, storage, lists)


def _parse(root: str, storage: st.Storage, n: int, lists: set[str]) -> list[Any]:
    """Metadata file ``n``'s snapshots (none: deleted since the listing); their manifest lists go to ``lists``."""
    uri = mirror.metadata_uri(root, n)
    try:
        meta = mirror.read_metadata(root, storage, n)
    except (st.StorageError, FileNotFoundError):
        _raise_unless_gone(storage, uri)
        return []  # deleted since the listing (by another retention run): it protects nothing
    except ValueError as e:
        raise TableError(f"retention cannot read the Iceberg mirror's {uri} ({e}); deleting none of the "
                         "mirror's files") from e
    for snap in meta.snapshots:
        mirror._check_inside(root, snap.manifest_list, f"{uri}: snapshot {snap.snapshot_id}'s manifest-list")  # noqa: SLF001
        lists.add(snap.manifest_list)
    return list(meta.snapshots)


def _raise_unless_gone(storage: st.Storage, uri: str) -> None:
    """After reading ``uri`` failed: return when the file is gone (deleted since it was listed or
    named: it protects nothing); otherwise raise (a transient error, a denied read: what it protects
    is unknown, so retention deletes none of the mirror's files). ``head`` failing raises too."""
    if storage.head(uri) is not None:
        raise st.StorageError(f"retention could not read the Iceberg mirror's {uri}, which exists; deleting none "
                              "of the mirror's files (the next run tries again)")


def _listed_files(root: str, storage: st.Storage, lists: set[str], *, optional: bool = False) -> set[str]:
    """The manifest lists ``lists``, their manifests and every file those name. ``optional``: lists
    found by name, perhaps a killed writer's whose manifests are gone: a file that is gone is skipped;
    one that exists but cannot be read raises, as without ``optional``."""
    out: set[str] = set()
    io = mirror._StorageIO(root, storage)  # noqa: SLF001 - the mirror's own reader, paths checked
    manifests = {}
    for ml in sorted(lists):
        out.add(ml)
        try:
            for m in read_manifest_list(mirror._Bytes(ml, storage.read(ml))):  # noqa: SLF001
                manifests[m.manifest_path] = m
        except (st.StorageError, OSError):
            if not optional:
                raise
            _raise_unless_gone(storage, ml)
    for path, m in manifests.items():
        out.add(path)
        try:
            out.update(e.data_file.file_path for e in m.fetch_manifest_entry(io))
        except (st.StorageError, OSError):
            if not optional:
                raise
            _raise_unless_gone(storage, path)
    return out


def plan(uri: str, storage: st.Storage, store_now_ms: int, grace_ms: int) -> MirrorSweep:
    """What to delete of the mirror's files, after ``mirror.expire`` and the parts' deletion: ages on
    the store's clock (``store_now_ms``), ``grace_ms`` the retention's grace period. Nothing (said on
    stderr; the parts' retention stands) when a kept metadata file cannot be read or names a path
    that is not the mirror's own."""
    root = fmt.table_root(uri)
    mirror_publisher.wait(root)  # no metadata file of this process still on its way
    prefix = f"{root}{mirror.METADATA_DIR}/"
    objects = list(storage.list_objects(prefix))
    cutoff_s = (store_now_ms - grace_ms) / 1000.0
    numbers = {n for o in objects if (n := _metadata_number(prefix, o.uri)) is not None}
    if not numbers:
        return MirrorSweep(())
    newest = mirror.latest_number(root, storage)
    kept = {newest} | {n for o in objects if (n := _metadata_number(prefix, o.uri)) is not None
                       and (o.modified is None or o.modified >= cutoff_s)}
    try:
        refs = referenced(root, storage, sorted(kept), [o.uri for o in objects])
    except (TableError, st.StorageError, FileNotFoundError, ValueError) as e:  # e.g. a table copied with its
        # metadata (which names the original's files), or a manifest list gone: what it protects is unknown
        print(f"lading: retention deletes none of the Iceberg mirror's files of {root}: {e}", file=sys.stderr)
        return MirrorSweep(())
    log = TableLog.open(root, storage)
    if log is not None:  # a publisher may be about to list the copy file of a live part it found there
        refs |= {copies.copies_uri(root, p.path) for p in log.snapshot().parts}
    return choose(root, objects, refs, cutoff_s)


def apply(storage: st.Storage, sweep: MirrorSweep) -> None:
    """Delete in ``sweep``'s order: metadata files, manifest lists, manifests, delete and copy files."""
    ranks = [kind(o.uri.rsplit("/", 1)[-1]) for o in sweep.deleted]
    for rank in range(len(_KINDS)):
        batch = [o.uri for o, r in zip(sweep.deleted, ranks, strict=True) if r == rank]
        if batch:
            storage.delete(batch)
