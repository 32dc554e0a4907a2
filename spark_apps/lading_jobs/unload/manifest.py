"""The run's manifest: the success marker, written last, naming every file the run wrote.

Format (``lading.io/unload-manifest``, version 2) is documented in
docs/copyjob.md; this module only assembles it from what the tasks returned.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from lading_jobs.storage import join

MANIFEST_KIND = "lading.io/unload-manifest"
MANIFEST_VERSION = 2  # 2: per-file crc32 replaced sha256


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def build_manifest(*, run_id: str, job: dict[str, Any], destination: str, source: dict[str, Any],
                   output: dict[str, Any], spark_schema: dict[str, Any], arrow_schema: pa.Schema | None,
                   type_mapping: str, files: list[dict[str, Any]], start: dt.datetime,
                   end: dt.datetime, path: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "kind": MANIFEST_KIND,
        "version": MANIFEST_VERSION,
        "runId": run_id,
        "job": job,
        "destination": destination,
        "startTime": _iso(start),
        "endTime": _iso(end),
        "durationSeconds": round((end - start).total_seconds(), 3),
        "source": source,
        "output": output,
        **({"path": path} if path is not None else {}),
        "schema": {
            "spark": spark_schema,
            "arrow": [{"name": f.name, "type": str(f.type), "nullable": f.nullable}
                      for f in arrow_schema] if arrow_schema is not None else None,
            "typeMapping": type_mapping,
        },
        "totals": {
            "files": len(files),
            "rows": sum(f["rows"] for f in files),
            "bytes": sum(f["bytes"] for f in files),
        },
        "files": [
            {"path": f["path"], "uri": join(destination, f["path"]), "rows": f["rows"], "bytes": f["bytes"],
             "crc32": f["crc32"], "task": f["task"], "seq": f["seq"],
             **({"partition": f["partition"]} if f.get("partition") else {}),
             "columns": f["columns"]}
            for f in files
        ],
    }
