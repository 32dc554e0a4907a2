"""Progress of a running job, from Spark's REST API at the driver's web UI.

``status.driverInfo.webUIAddress`` (host:port or URL) serves
``/api/v1/applications/<id>/jobs`` and ``/stages``; tasks done/total come from the
jobs, rows and bytes from the stages' metrics. Like ``pg_stat_progress_copy``
it is best effort: a driver without a reachable UI yields ``None``, never an error.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

TIMEOUT_SECONDS = 5.0


def base_url(web_ui_address: str) -> str:
    address = web_ui_address.strip().rstrip("/")
    return address if address.startswith(("http://", "https://")) else f"http://{address}"


def summarize(jobs: Sequence[Mapping[str, Any]], stages: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Tasks done/total over all jobs; rows and bytes written (else read) over all stages."""
    done = sum(int(j.get("numCompletedTasks") or 0) for j in jobs)
    total = sum(int(j.get("numTasks") or 0) for j in jobs)
    rows = sum(int(s.get("outputRecords") or 0) for s in stages)
    written = sum(int(s.get("outputBytes") or 0) for s in stages)
    if not rows:
        rows = sum(int(s.get("inputRecords") or 0) for s in stages)
    if not written:
        written = sum(int(s.get("inputBytes") or 0) for s in stages)
    return {"tasksDone": done, "tasksTotal": total, "rows": rows, "bytes": written}


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310 (http only)
        return json.loads(response.read())


def fetch(web_ui_address: str | None) -> dict[str, int] | None:
    """Progress of the (first) application at ``web_ui_address``; ``None`` if unavailable."""
    if not web_ui_address:
        return None
    root = base_url(web_ui_address) + "/api/v1/applications"
    try:
        apps = _get(root)
        if not apps:
            return None
        app_id = apps[0]["id"]
        jobs = _get(f"{root}/{app_id}/jobs")
        stages = _get(f"{root}/{app_id}/stages")
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    return summarize(jobs, stages)
