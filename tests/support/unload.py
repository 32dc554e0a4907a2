"""Helpers for unload tests: job documents and S3 listings."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from lading_spec.job import JobDocument


def job_doc(spec: dict[str, Any], run_id: str | None = None, name: str = "export") -> JobDocument:
    return JobDocument(kind="CopyJob", namespace="test", name=name, uid="uid-1", generation=1,
                       run_id=run_id or f"run-{uuid.uuid4().hex[:8]}",
                       run_time=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), spec=spec)


def s3_keys(s3_client: Any, bucket: str, prefix: str = "") -> list[str]:
    out: list[str] = []
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return out


def s3_pending(s3_client: Any, bucket: str, prefix: str = "") -> list[str]:
    r = s3_client.list_multipart_uploads(Bucket=bucket, Prefix=prefix)
    return [u["Key"] for u in r.get("Uploads", [])]
