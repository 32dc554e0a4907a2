"""Retention's decision (pure): only unreferenced objects under data/ older than the grace period."""

from __future__ import annotations

from lading_jobs.compact.retention import choose
from lading_jobs.storage import ObjectInfo, PendingUpload

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
