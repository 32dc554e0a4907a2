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
 "rewrittenFiles": 0, "dataLossSkipped": [], "updatedAt": "2026-01-02T03:04:05.200Z"}
```

``state`` is ``starting``, ``running``, ``stopping``, ``stopped`` or ``failed``
(then ``error`` and ``reason``: ``TooManyErrors``, ``DataLoss``, ``SourceConflict``).
For a files source ``lag`` is ``{"total": n, "filesPending": n, "atLeast": bool}``
and ``offsets`` is ``{"files": loaded}``. ``status_fields`` maps a document onto the
StreamCopy status fields; pure, so the operator can use it without Spark.
"""

from __future__ import annotations

import json
from typing import Any

PROGRESS_PORT = 8090
PROGRESS_PORT_ENV = "LADING_PROGRESS_PORT"
PROGRESS_PATH = "/progress"
STATES = ("starting", "running", "stopping", "stopped", "failed")
REASONS = ("TooManyErrors", "DataLoss", "SourceConflict")


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


def status_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """The StreamCopy status fields a progress document fills (``lag``, ``rowsTotal``, ``batches``,
    ``lastBatchTime``, ``offsets``); fields the document lacks are left out."""
    out: dict[str, Any] = {"rowsTotal": int(doc["rowsTotal"]), "batches": int(doc["batches"])}
    lag = doc.get("lag") or {}
    if isinstance(lag.get("total"), int):
        out["lag"] = max(0, lag["total"])
    last = doc.get("lastBatch") or {}
    if isinstance(last.get("time"), str):
        out["lastBatchTime"] = last["time"]
    offsets = doc.get("offsets")
    if isinstance(offsets, dict):
        out["offsets"] = {str(k): int(v) for k, v in offsets.items() if isinstance(v, int)}
    return out
