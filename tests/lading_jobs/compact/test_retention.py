"""Retention: the decision (pure: only unreferenced objects under data/ older than the grace period), and
what it reads and keeps on a real table."""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa

from lading_jobs import uploadset
from lading_jobs.compact import retention
from lading_jobs.compact.retention import choose
from lading_jobs.load import manifest
from lading_jobs.storage import LocalStorage, ObjectInfo, PendingUpload
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import Change, Part, TableLog
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats.part import PartStats

URI = "s3://b/t/"
NOW_MS = 10_000_000
GRACE_MS = 3_600_000
OLD, YOUNG = (NOW_MS - 2 * GRACE_MS) / 1000, (NOW_MS - GRACE_MS / 2) / 1000


def obj(path: str, modified: float | None) -> ObjectInfo:
    return ObjectInfo(URI + path, 10, "e", modified)


def test_only_old_unreferenced_parts_and_uploads_are_chosen() -> None:
    objects = [obj("data/w-1/live.parquet", OLD), obj("data/w-1/replaced.parquet", OLD),
               obj("data/w-2/orphan.parquet", OLD), obj("data/w-3/young-orphan.parquet", YOUNG),
               obj("data/w-4/unknown-age.parquet", None), obj("_lading_log/00000000000000000001.json", OLD),
               obj("manifest.json", OLD)]
    uploads = [PendingUpload(URI + "data/c-1/a.parquet", "u1", initiated=OLD),
               PendingUpload(URI + "data/c-2/b.parquet", "u2", initiated=YOUNG),
               PendingUpload(URI + "data/c-3/c.parquet", "u3")]
    sweep = choose(URI, objects, uploads, referenced={"data/w-1/live.parquet"},
                   removed_known={"data/w-1/replaced.parquet"}, now_ms=NOW_MS, grace_ms=GRACE_MS)
    assert [o.uri for o in sweep.removed] == [URI + "data/w-1/replaced.parquet"]
    assert [o.uri for o in sweep.orphans] == [URI + "data/w-2/orphan.parquet"]
    assert [u.upload_id for u in sweep.uploads] == ["u1"]
    summary = sweep.summary(URI, dry_run=True)
    assert summary["wouldDelete"] == ["data/w-1/replaced.parquet", "data/w-2/orphan.parquet"]
    assert summary["bytesDeleted"] == 20 and summary["uploadsAborted"] == 1


# -- against a table (file://): what retention reads and what it keeps --------------------------------
SCHEMA = TableSchema.of([("k", "string"), ("v", "bigint")])


class CountingReads(LocalStorage):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def read(self, uri: str, etag: str | None = None) -> bytes:
        self.reads += 1
        return super().read(uri, etag)


def _rows(n: int) -> pa.Table:
    return pa.table({"k": pa.array([f"k{i}" for i in range(n)]), "v": pa.array(range(n), pa.int64())})


def test_completed_parts_a_live_intent_lists_are_never_deleted(file_uri: Callable[[str], str]) -> None:
    """A load completed its parts (its intent lists them) but has not committed: retention with any
    grace period keeps them, and the load's commit then reads. Fails on 3610912: deleted as orphans,
    the commit referenced missing files."""
    uri = file_uri("t/")
    log = TableLog.create(uri, SCHEMA)
    storage = LocalStorage()
    written = writer.write_parts(uri, [_rows(5)], SCHEMA, write_id=fmt.new_write_id(), storage=storage)
    uploads = [PendingUpload.from_dict(w.upload) for w in written]
    publishing = uploadset.UploadSet(storage, manifest.intent_uri(uri, None, "run-1"), "run-1")
    publishing.begin(uploads, {"nonce": "n"})
    publishing.complete_all(uploads)
    sweep = retention.plan_sweep(log, int(time.time() * 1000), 1)  # a 1 ms grace period
    assert sweep.orphans == () and sweep.removed == ()
    retention.apply(storage, sweep)
    log.commit(Change(add=tuple(w.part for w in written)))
    assert reader.scan(uri).num_rows == 5


def test_retention_reads_the_latest_state_not_every_commit_of_the_period(file_uri: Callable[[str], str]) -> None:
    """45 commits within the grace period (an append, then a rewrite that removes it, in turn): the
    parts every live state held are found from the latest state's tombstones, reading the hint, one
    checkpoint and the commits after it. Fails on 3610912: it read every commit of the period."""
    uri = file_uri("t/")
    log = TableLog.create(uri, SCHEMA)
    paths = []
    for i in range(45):
        if i % 3 == 2:  # a rewrite: the two parts before become one
            gone = tuple(paths[-2:])
            paths[-2:] = [f"data/c-{i}/p.parquet"]
            log.commit(Change(operation="compact", remove=gone, add=(_part(paths[-1]),)))
        else:
            paths.append(f"data/w-{i}/p.parquet")
            log.commit(Change(add=(_part(paths[-1]),)))
    every = {f"data/w-{i}/p.parquet" for i in range(45) if i % 3 != 2} | {f"data/c-{i}/p.parquet"
                                                                       for i in range(45) if i % 3 == 2}
    storage = CountingReads()
    now = int(time.time() * 1000)
    referenced, known = retention.live_paths(TableLog.open_existing(uri, storage), now, 3600 * 1000)
    assert referenced == every and known == every  # all live during the hour
    assert storage.reads <= 2 + fmt.CHECKPOINT_INTERVAL + 1, storage.reads
    # a grace period that ends before the rewrites: only the latest state is referenced
    later = now + 2 * 3600 * 1000
    referenced, known = retention.live_paths(TableLog.open_existing(uri), later, 3600 * 1000)
    assert referenced == set(paths) and known == every


def _part(path: str) -> Part:
    return Part(path, 100, PartStats(rows=1, min_time=1, max_time=1))
