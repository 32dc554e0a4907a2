"""The job contract between the operator and the Spark apps.

The operator renders one *job document* per run and passes it to the Spark app
as ``--job <JSON>`` (or ``--job-file PATH``); ``lading run FILE.yaml`` builds the
same document from a manifest. The app answers with one *result* (CopyResponse):
``{"rows": N, ...}`` or ``{"error": "...", ...}`` or ``{"cancelled": true, ...}``,
printed on its last stdout line after ``RESULT_MARKER`` and written to the
termination log (``/dev/termination-log``; ``LADING_TERMINATION_LOG`` overrides),
which Kubernetes caps at 4 KiB.

Identity (namespace, name, uid, generation, run id, run time) travels with the
spec, so a run's output is traceable to the resource that asked for it.
Credentials never do: they reach the pods as environment from a Secret.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any

from lading_spec.errors import SpecError

API_VERSION = "lading.io/v1alpha1"
KINDS = ("CopyJob", "StreamCopy", "Compaction")
RESULT_MARKER = "LADING_RESULT "
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_LOG_LIMIT = 4096


RUN_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,253}[A-Za-z0-9])?")


def check_run_id(run_id: object, field: str = "runId") -> str:
    """``run_id`` if it may name a run: it goes into object keys and file names (a destination's
    ``{run_id}``, a run's token), manifests, intents and SparkApplication names. 1 to 255 letters,
    digits, ``.``, ``_`` and ``-``, starting and ending with a letter or digit, without ``..``
    (no path separator, no relative path, nothing a shell or a URL would read otherwise)."""
    if not isinstance(run_id, str) or not run_id:
        raise SpecError(field, "missing")
    if RUN_ID.fullmatch(run_id) is None or ".." in run_id:
        raise SpecError(field, f"{run_id[:80]!r} cannot name a run: use 1 to 255 letters, digits, '.', '_' or '-', "
                               "starting and ending with a letter or digit (no '/', no '..')")
    return run_id


@dataclass(frozen=True)
class JobDocument:
    kind: str
    namespace: str
    name: str
    uid: str
    generation: int
    run_id: str
    run_time: dt.datetime
    spec: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps(
            {
                "apiVersion": API_VERSION,
                "kind": self.kind,
                "metadata": {"namespace": self.namespace, "name": self.name, "uid": self.uid,
                             "generation": self.generation},
                "runId": self.run_id,
                "runTime": self.run_time.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "spec": self.spec,
            },
            separators=(",", ":"),
            sort_keys=True,
        )


def parse_job_document(text: str) -> JobDocument:
    """Read a job document; a malformed one is a :class:`SpecError` naming the field."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError("job", f"not valid JSON: {e}") from e
    if not isinstance(doc, dict):
        raise SpecError("job", "expected a JSON object")
    if doc.get("apiVersion") != API_VERSION:
        raise SpecError("apiVersion", f"expected {API_VERSION}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") not in KINDS:
        raise SpecError("kind", f"expected one of {', '.join(KINDS)}, got {doc.get('kind')!r}")
    meta = doc.get("metadata") or {}
    run_time_text = doc.get("runTime")
    try:
        run_time = dt.datetime.fromisoformat(str(run_time_text).replace("Z", "+00:00"))
    except ValueError as e:
        raise SpecError("runTime", f"expected an RFC 3339 time, got {run_time_text!r}") from e
    if run_time.tzinfo is None:
        run_time = run_time.replace(tzinfo=dt.UTC)
    if not isinstance(doc.get("spec"), dict):
        raise SpecError("spec", "missing or not a mapping")
    check_run_id(doc.get("runId"))
    return JobDocument(
        kind=doc["kind"],
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        generation=int(meta.get("generation", 0) or 0),
        run_id=doc["runId"],
        run_time=run_time,
        spec=doc["spec"],
    )


ESSENTIAL = ("rows", "error", "cancelled", "files", "bytes", "manifest", "destination", "runId", "reason",
             "rowsTotal", "batches", "rowsRejected", "rowsFiltered")
"""What a result keeps whatever its size: the CopyResponse, and a stream's reason and totals."""
SHORT_STRING = 1000


def encode_result(result: dict[str, Any]) -> str:
    """The result as compact JSON that fits the termination log, trimming details first.

    Tried in turn until one fits: the whole result; without lists (lists of
    paths, per-file details), keeping every count; the top-level numbers, flags
    and short strings, with the error cut to 2,000 characters; only the
    CopyResponse fields and what the operator needs to say why a run stopped.
    """
    error = result.get("error")
    short_error = error[:2000] + ("…" if len(error) > 2000 else "") if isinstance(error, str) else error
    candidates = (
        result,
        _without_lists(result),
        {k: (short_error if k == "error" else v) for k, v in result.items()
         if k == "error" or v is None or isinstance(v, int | float | bool)
         or (isinstance(v, str) and len(v) <= SHORT_STRING)},
        {k: (short_error if k == "error" else v) for k, v in result.items() if k in ESSENTIAL},
    )
    text = ""
    for candidate in candidates:
        text = json.dumps(candidate, separators=(",", ":"), sort_keys=True, default=str)
        if len(text.encode()) <= TERMINATION_LOG_LIMIT - 64:
            break
    return text


def _without_lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_lists(v) for k, v in value.items() if not isinstance(v, list | tuple)}
    return value


def parse_result(text: str) -> dict[str, Any] | None:
    """Read a result from a termination message or a log line; ``None`` if there is none."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith(RESULT_MARKER):
            line = line[len(RESULT_MARKER):]
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict) and ("rows" in value or "error" in value or "cancelled" in value):
                return value
    return None
