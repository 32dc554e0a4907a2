"""The StreamCopy driver's progress document: what it serves over HTTP, what the operator reads.

A running StreamCopy driver serves ``GET /progress`` on port ``PROGRESS_PORT``
(``$LADING_PROGRESS_PORT`` overrides) with one JSON object:

```json
{"kind": "StreamProgress", "runId": "...", "state": "running", "source": "kafka",
 "rowsTotal": 120000, "batches": 42, "tableVersion": 57, "upper": 1767322800123,
 "lastBatch": {"time": "2026-01-02T03:04:05.123Z", "rows": 3000, "read": 3000, "bytes": 412000,
               "rejected": 0, "durationSeconds": 0.81, "range": "orders/0@100..1099, ...",
               "end": {"orders:0": 1100, "orders:1": 1093}},
 "lag": {"total": 7, "partitions": {"orders:0": 3, "orders:1": 4}},
 "offsets": {"orders:0": 1100, "orders:1": 1093},
 "rewrittenFiles": 0, "dataLossSkipped": [],
 "icebergMetadata": "s3://lake/orders/metadata/v57.metadata.json", "updatedAt": "2026-01-02T03:04:05.200Z"}
```

``state`` is ``starting``, ``running``, ``stopping``, ``stopped`` or ``failed``
(then ``error`` and ``reason``: ``TooManyErrors``, ``DataLoss``, ``SourceConflict``,
``InvalidTransform``). ``lastBatch.filtered`` counts the records a transform's WHERE removed.
For a files source ``lag`` is ``{"total": n, "filesPending": n, "atLeast": bool}``
and ``offsets`` is ``{"files": loaded}``. ``icebergMetadata`` is the newest metadata file of the
table's Iceberg mirror after the last batch (absent when the mirror is off). ``status_fields`` maps
a document onto the StreamCopy status fields; pure, so the operator can use it without Spark.

The document comes from the driver, which runs the tenant's image: the operator
treats it as untrusted input. ``status_fields`` keeps only values the CRD's status
schema accepts (integers within int64, RFC 3339 times, bounded text) and at most
``MAX_ENTRIES`` partitions per map, so a hostile or broken driver can neither make
the status write fail nor bloat the resource.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from lading_spec.controls import escape_controls, has_controls

PROGRESS_PORT = 8090
PROGRESS_PORT_ENV = "LADING_PROGRESS_PORT"
PROGRESS_PATH = "/progress"
STATES = ("starting", "running", "stopping", "stopped", "failed")
REASONS = ("TooManyErrors", "DataLoss", "SourceConflict", "InvalidTransform", "InvalidSpec", "Superseded")
"""Why a stream stopped on purpose (its result's ``reason``): it must not restart until its spec changes.
``InvalidSpec``: the spec cannot run against this table or source (e.g. no ``target.schema`` for a
new table), an error no rerun fixes. ``Superseded``: a newer driver of the same StreamCopy claimed
the table (a higher epoch); a rerun of this one would take the stream from it. ``SourceConflict``
is what drivers before epochs reported for the same."""
MAX_ENTRIES = 1000        # partitions kept per map in status (offsets, lagPartitions, lastBatch.end)
MAX_KEY = 300             # a "topic:partition" key: topic names are at most 249 characters
MAX_TEXT = 1000           # lastBatch.range
MAX_URI = 4096            # output.icebergMetadata
_METADATA_FILE = re.compile(r"^(s3|file)://[^\s]+/metadata/v\d{1,18}\.metadata\.json$")
INT64_MAX = 2**63 - 1


def parse_progress(text: str | bytes) -> dict[str, Any]:
    """A progress document, checked for the fields the operator reads; ``ValueError`` otherwise."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("kind") != "StreamProgress":
        raise ValueError("not a StreamProgress document")
    if doc.get("state") not in STATES:
        raise ValueError(f"state {doc.get('state')!r} is not one of {', '.join(STATES)}")
    for key in ("rowsTotal", "batches"):
        if not isinstance(doc.get(key), int) or doc[key] < 0:
            raise ValueError(f"{key} must be a non-negative integer")
    return doc


def _count(value: Any) -> int | None:
    """A non-negative int64, else None (bools, floats, strings, out of range)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64_MAX:
        return None
    return value


def _time(value: Any) -> str | None:
    """An RFC 3339 time with a zone, as the driver wrote it, else None."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if parsed.tzinfo is not None and "T" in value else None


def _positions(value: Any) -> dict[str, int]:
    """``{"topic:partition": n}`` (or ``{"files": n}``): the first MAX_ENTRIES valid entries in key order."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, int] = {}
    for key in sorted(k for k in value if isinstance(k, str) and 0 < len(k) <= MAX_KEY and not has_controls(k)):
        n = _count(value[key])
        if n is not None:
            out[key] = n
            if len(out) == MAX_ENTRIES:
                break
    return out


_TOPIC_ID = re.compile(r"^[A-Za-z0-9+/_-]{1,62}={0,2}$")
TOPIC_ID_UNAVAILABLE = "unavailable"
"""``topicIds`` of a topic the broker gives no ID for (a recreated topic is then noticed only by its offsets)."""


def _topic_ids(value: Any) -> dict[str, str]:
    """``{"topic": "<topic ID>"}``, ``"unavailable"`` where the driver had none (null): the first
    MAX_ENTRIES topics in name order; an ID is at most 64 characters of base64."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, str] = {}
    for key in sorted(k for k in value if isinstance(k, str) and 0 < len(k) <= MAX_KEY and not has_controls(k)):
        v = value[key]
        if v is None or (isinstance(v, str) and _TOPIC_ID.match(v) is not None):
            out[key] = v if v is not None else TOPIC_ID_UNAVAILABLE
            if len(out) == MAX_ENTRIES:
                break
    return out


def _last_batch(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, Mapping) or _time(value.get("time")) is None:
        return None
    out: dict[str, Any] = {"time": value["time"]}
    for key in ("rows", "bytes", "rejected", "filtered"):
        n = _count(value.get(key))
        if n is not None:
            out[key] = n
    seconds = value.get("durationSeconds")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and math.isfinite(seconds) \
            and 0 <= seconds < 1e9:
        out["durationSeconds"] = round(float(seconds), 3)
    if isinstance(value.get("range"), str) and value["range"]:
        text = escape_controls(value["range"])  # the driver's answer is treated as hostile
        out["range"] = text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"
    end = _positions(value.get("end"))
    if end:
        out["end"] = end
    return out


def status_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The StreamCopy status fields a progress document fills: ``rowsTotal``, ``batches``, ``lag``
    (with ``lagPartitions`` for Kafka, ``lagAtLeast`` when a files listing stopped counting),
    ``lastBatchTime``, ``lastBatch`` (time, rows, bytes, rejected, filtered, durationSeconds, range, end),
    ``offsets`` and ``topicIds`` (Kafka: each topic's ID, or ``unavailable``), ``output.icebergMetadata``
    (a ``<table>/metadata/v<n>.metadata.json`` URI); fields the document lacks, or holds in a shape the
    status schema would refuse, are left out."""
    out: dict[str, Any] = {}
    for key in ("rowsTotal", "batches"):
        n = _count(doc.get(key))
        if n is not None:
            out[key] = n
    raw_lag = doc.get("lag")
    lag: Mapping[str, Any] = raw_lag if isinstance(raw_lag, Mapping) else {}
    total = lag.get("total")
    if isinstance(total, int) and not isinstance(total, bool):
        out["lag"] = min(max(0, total), INT64_MAX)
    partitions = _positions(lag.get("partitions"))
    if partitions:
        out["lagPartitions"] = partitions
    if lag.get("atLeast") is True:
        out["lagAtLeast"] = True
    last = _last_batch(doc.get("lastBatch"))
    if last is not None:
        out["lastBatchTime"] = last["time"]
        if len(last) > 1:  # more than the time a restarted driver knows from the table
            out["lastBatch"] = last
    offsets = doc.get("offsets")
    if isinstance(offsets, Mapping):
        out["offsets"] = _positions(offsets)
    ids = _topic_ids(doc.get("topicIds"))
    if ids:
        out["topicIds"] = ids
    meta = doc.get("icebergMetadata")
    if isinstance(meta, str) and len(meta) <= MAX_URI and _METADATA_FILE.match(meta):
        out["output"] = {"icebergMetadata": meta}
    return out
