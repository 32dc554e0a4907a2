"""The load manifest: one JSON document per run with every file's result.

Where it goes (pure functions, so docs and tests agree):

* with ``rejectedRows: <prefix>``: ``<prefix>/<runId>/manifest.json``, beside the
  rejected-rows files ``<prefix>/<runId>/rejected-<n>.jsonl``;
* without: ``<table>/_lading_loads/<runId>.json`` (outside the table's log and
  data, so readers never see it).

Per file: ``status`` (``loaded``, ``partial`` = loaded with rows rejected,
``skipped`` = left out by ``onError: skipFile``, ``failed`` = unreadable,
``alreadyLoaded`` = skipped by the ledger, ``notLoaded`` = the load failed or
only validated), rows read, loaded and rejected, the first error, the first few
rejected records, and the file's rejected-rows file.
"""

from __future__ import annotations

from typing import Any

from lading_jobs import storage as st
from lading_jobs.ingest.policy import Decision, FileOutcome
from lading_jobs.table import format as fmt
from lading_jobs.uploadset import LOADS_DIR


def run_prefix(rejected_rows: str | None, run_id: str) -> str | None:
    """Where this run's rejected-rows files go (None: no rejected-rows location)."""
    return None if rejected_rows is None else st.join(rejected_rows, run_id) + "/"


def manifest_uri(table_uri: str, rejected_rows: str | None, run_id: str) -> str:
    prefix = run_prefix(rejected_rows, run_id)
    if prefix is not None:
        return st.join(prefix, "manifest.json")
    return f"{fmt.table_root(table_uri)}{LOADS_DIR}/{run_id}.json"


def intent_uri(table_uri: str, rejected_rows: str | None, run_id: str) -> str:
    """The run's commit intent (``lading_jobs.uploadset``), beside its manifest."""
    prefix = run_prefix(rejected_rows, run_id)
    if prefix is not None:
        return st.join(prefix, "_intent.json")
    return f"{fmt.table_root(table_uri)}{LOADS_DIR}/{run_id}.intent.json"


def file_status(o: FileOutcome, decision: Decision, committed: bool) -> str:
    if o.file_error:
        return "failed"
    if not committed:
        return "notLoaded"
    if o.index in decision.skipped_set:
        return "skipped"
    return "partial" if o.rows_rejected else "loaded"


def file_entry(o: FileOutcome, decision: Decision, committed: bool) -> dict[str, Any]:
    status = file_status(o, decision, committed)
    entry: dict[str, Any] = {
        "file": o.uri, "etag": o.etag, "size": o.size, "status": status,
        "rowsRead": o.rows_read,
        "rowsLoaded": o.rows_good if status in ("loaded", "partial") else 0,
        "rowsRejected": o.rows_rejected,
    }
    if o.rows_filtered:
        entry["rowsFiltered"] = o.rows_filtered
    if o.file_error or o.first_error:
        entry["firstError"] = o.file_error or o.first_error
    if o.errors:
        entry["errors"] = o.errors
    if o.rejects_uris:
        entry["rejectedRows"] = o.rejects_uris
    return entry


def build_manifest(*, run_id: str, table_uri: str, fmt_name: str, on_error: str, validate_only: bool,
                   outcomes: list[FileOutcome], already_loaded: list[st.ObjectInfo], decision: Decision,
                   committed: bool, table_version: int | None, rows: int, error: str | None,
                   rejected_rows: str | None) -> dict[str, Any]:
    files = [file_entry(o, decision, committed) for o in sorted(outcomes, key=lambda o: o.index)]
    files += [{"file": o.uri, "etag": o.etag, "size": o.size, "status": "alreadyLoaded", "rowsRead": 0,
               "rowsLoaded": 0, "rowsRejected": 0} for o in already_loaded]
    return {
        "kind": "load", "runId": run_id, "table": table_uri, "format": fmt_name, "onError": on_error,
        "validateOnly": validate_only, "committed": committed, "tableVersion": table_version,
        "rows": rows, "rowsRejected": sum(o.rows_rejected for o in outcomes),
        "rowsFiltered": sum(o.rows_filtered for o in outcomes),
        "filesLoaded": sum(1 for f in files if f["status"] in ("loaded", "partial")),
        "filesAlreadyLoaded": len(already_loaded), "filesSkipped": len(decision.skipped), "error": error,
        "rejectedRows": rejected_rows, "files": files,
    }


def result(manifest: dict[str, Any], manifest_uri: str) -> dict[str, Any]:
    """The run's CopyResponse fields, from its manifest (also for a retry that finds the run done)."""
    files = manifest["files"]
    committed = bool(manifest["committed"])
    out: dict[str, Any] = {
        "runId": manifest["runId"], "destination": manifest["table"], "manifest": manifest_uri,
        "files": manifest["filesLoaded"], "filesAlreadyLoaded": manifest["filesAlreadyLoaded"],
        "filesSkipped": manifest["filesSkipped"],
        "bytes": sum(f["size"] for f in files if f["status"] in ("loaded", "partial")) if committed else 0,
        "rowsRejected": manifest["rowsRejected"], "rowsFiltered": manifest.get("rowsFiltered", 0),
        "tableVersion": manifest["tableVersion"],
        "fileResults": [{k: f[k] for k in ("file", "status", "rowsLoaded", "rowsRejected", "firstError") if k in f}
                        for f in files[:20]],
    }
    if manifest.get("rejectedRows"):
        out["rejectedRows"] = manifest["rejectedRows"]
    if manifest.get("columnsAdded") and committed:
        out["columnsAdded"] = manifest["columnsAdded"][:20]
    if manifest["validateOnly"]:
        out["validateOnly"] = True
    if manifest.get("error") is not None:
        return {**out, "error": manifest["error"]}
    return {**out, "rows": manifest["rows"]}
