"""One description per lading kind: everything kind-specific the operator needs.

The controller, the planner, the kopf registration, the metrics and
``lading render`` are written once and parameterised by a :class:`Kind`; a kind
registers by being listed in :data:`ALL`. A description says

- who it is: ``name`` (``CopyJob``), ``plural`` (``copyjobs``), the
  ``phases`` its CRD's ``status.phase`` accepts;
- how to check a spec: ``parse`` (the ``lading_spec`` parser, raising
  ``SpecError`` naming the field) and ``uris`` (every storage URI with its field
  path, for the storage policy, and a StreamCopy's Kafka brokers under
  ``spec.source.kafka.bootstrapServers[i]``, for the policy's ``brokers``);
- how to render a run: ``operator_fields``, the spec fields that stay out of the
  job document (the rest goes to the Spark app, whose ``main.py`` picks the
  engine by the document's ``kind``);
- how to read a run's result: ``read_result`` (the driver's CopyResponse →
  status.response, status.output, the kind's own status fields, the lastRuns
  entry, the success message);
- how it is triggered: ``trigger`` — ``"runs"`` (one-shot, or one run per slot
  with ``spec.schedule``) or ``"continuous"`` (StreamCopy: kept running, its
  application rendered for a long run: :mod:`lading_operator.render_stream`);
- ``engine_available``: the one switch. ``False`` parks the kind: a valid spec
  stays ``Pending`` (reason ``EngineNotAvailable``) and nothing runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lading_operator import status as st
from lading_spec import compaction, copyjob, streamcopy
from lading_spec import compaction_result as compaction_result_text

ResultReader = Callable[[Mapping[str, Any] | None], "RunResult"]


@dataclass(frozen=True)
class RunResult:
    """What the operator takes from one run's result (the driver's termination message)."""

    response: dict[str, Any] = field(default_factory=dict)  # status.response: rows | error | cancelled
    output: dict[str, Any] = field(default_factory=dict)    # status.output
    fields: dict[str, Any] = field(default_factory=dict)    # other status fields of the kind's CRD
    history: dict[str, Any] = field(default_factory=dict)   # extra fields of its status.lastRuns entry
    summary: str = ""                                       # the Event/condition message on success
    bytes: int = 0                                          # bytes written (lading_bytes_total)


@dataclass(frozen=True)
class Kind:
    name: str
    plural: str
    phases: tuple[str, ...]
    parse: Callable[[dict[str, Any]], object]
    uris: Callable[[Mapping[str, Any]], list[tuple[str, str]]]
    operator_fields: tuple[str, ...]
    read_result: ResultReader
    trigger: str = "runs"                 # "runs" | "continuous"
    engine_available: bool = True
    default_concurrency: str = "Allow"    # concurrencyPolicy when the spec has none


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    """A count for a status field whose schema says ``minimum: 0`` (anything else is left out, not refused)."""
    number = _int(value)
    return number if number is not None and number >= 0 else None


def _history(result: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if result and result.get("rows") is not None:
        out["rows"] = int(result["rows"])
    if isinstance((result or {}).get("destination"), str):
        out["destination"] = result["destination"]  # type: ignore[index]
    return out


COPY_COUNTS = ("rowsRejected", "rowsFiltered")
"""A CopyJob's ``status.response`` counts beside ``rows``; always written (``None`` when the result has
none), so a run without them clears the figures of the run before (status is merge-patched)."""


def copy_result(result: Mapping[str, Any] | None) -> RunResult:
    """A CopyJob's CopyResponse: rows, files, bytes, manifest, destination."""
    rows = (result or {}).get("rows")
    summary = f"copied {rows} rows" if rows is not None else "completed (the driver left no result)"
    if result and result.get("destination"):
        summary += f" to {result['destination']}"
    response = st.response_from_result(result)
    for key in COPY_COUNTS:  # a load's rejected and filtered records (docs/copyjob-load.md#the-result)
        response[key] = _count((result or {}).get(key))
    return RunResult(response=response, output=st.output_from_result(result),
                     history=_history(result), summary=summary, bytes=_int((result or {}).get("bytes")) or 0)


# A Compaction's own status fields: the last run's figures (docs/compaction.md#status).
COMPACTION_COUNTS = ("partsBefore", "partsAfter", "bytesBefore", "bytesAfter", "rowsRead", "rowsWritten",
                     "rowsConsolidated", "sinceBefore", "since", "tableVersion")
COMPACTION_FIELDS = (*COMPACTION_COUNTS, "partsSummary", "nothingToDo", "retention")
RETENTION_COUNTS = ("partsDeleted", "orphansDeleted", "bytesDeleted", "uploadsAborted")
RETENTION_LISTED = 20  # paths a retention summary names (the engine lists at most that many)
COMPACTION_HISTORY = ("partsBefore", "partsAfter", "rowsConsolidated", "since")


def _retention(raw: Any) -> dict[str, Any] | None:
    """The result's ``retention`` as its status field: dryRun, the counts, the paths it names.

    Every key is present (``None`` where absent): status is merge-patched, and a
    dry run after a real one must not keep the real one's ``deleted`` list.
    """
    if not isinstance(raw, Mapping):
        return None
    dry = bool(raw.get("dryRun"))
    out: dict[str, Any] = {"dryRun": dry, **{key: _count(raw.get(key)) for key in RETENTION_COUNTS},
                           "deleted": None, "wouldDelete": None}
    listed = raw.get("wouldDelete" if dry else "deleted")
    if isinstance(listed, list):
        out["wouldDelete" if dry else "deleted"] = [str(p) for p in listed[:RETENTION_LISTED]]
    return out


def compaction_result(result: Mapping[str, Any] | None) -> RunResult:
    """A Compaction's result: rows written, and what the run did to the table (its status fields).

    Every field of :data:`COMPACTION_FIELDS` is written (``None`` where the result
    lacks it), so a run that failed or was cancelled clears the figures of the run
    before it instead of leaving them under a new ``completionTime``.
    """
    result = result or {}
    fields: dict[str, Any] = {k: _count(result.get(k)) for k in COMPACTION_COUNTS}
    before, after = fields["partsBefore"], fields["partsAfter"]
    fields["partsSummary"] = f"{before} → {after}" if before is not None and after is not None else None
    nothing = result.get("nothingToDo")
    fields["nothingToDo"] = str(nothing)[:1000] if isinstance(nothing, str) and nothing else None
    fields["retention"] = _retention(result.get("retention"))
    history = _history(result)
    history.update({k: fields[k] for k in COMPACTION_HISTORY if fields[k] is not None})
    if result.get("rows") is not None:
        summary = "compacted " + compaction_result_text.describe(result)
    else:
        summary = "completed (the driver left no result)"
    return RunResult(response=st.response_from_result(result), output=st.output_from_result(result),
                     fields=fields, history=history, summary=summary,
                     bytes=fields["bytesAfter"] or _int(result.get("bytes")) or 0)


def stream_result(result: Mapping[str, Any] | None) -> RunResult:
    """A StreamCopy driver's result: it stopped (error, reason), was stopped (cancelled), or loaded
    what there was (``rows``, ``--once``); with the stream's counters (rowsTotal, batches)."""
    fields = {k: v for k in ("rowsTotal", "batches") if (v := _int((result or {}).get(k))) is not None}
    response = st.response_from_result(result)
    if response.get("error"):
        summary = f"stopped: {response['error']}"
    else:
        summary = f"stopped after {fields.get('batches', 0)} batches ({fields.get('rowsTotal', 0)} rows in all)"
    output = {k: v for k, v in st.output_from_result(result).items() if k == "icebergMetadata"}  # as while running
    return RunResult(response=response, output=output, fields=fields, summary=summary)


def copyjob_uris(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every storage URI in a CopyJob spec, with its field path (for the policy check)."""
    out: list[tuple[str, str]] = []
    source = spec.get("from") or {}
    target = spec.get("to") or {}
    for key in ("files", "table"):
        if isinstance(source.get(key), str):
            out.append((f"spec.from.{key}", source[key]))
        if isinstance(target.get(key), str):
            out.append((f"spec.to.{key}", target[key]))
    for i, uri in enumerate(source.get("fileList") or []):
        out.append((f"spec.from.fileList[{i}]", str(uri)))
    for i, item in enumerate(source.get("inputs") or []):
        if not isinstance(item, dict):
            continue
        for key in ("files", "table"):
            if isinstance(item.get(key), str):
                out.append((f"spec.from.inputs[{i}].{key}", item[key]))
        for j, uri in enumerate(item.get("fileList") or []):
            out.append((f"spec.from.inputs[{i}].fileList[{j}]", str(uri)))
        metadata = item.get("iceberg", {}).get("metadata") if isinstance(item.get("iceberg"), dict) else None
        if isinstance(metadata, str):  # the job reads only under the table's directory (sources.iceberg)
            out.append((f"spec.from.inputs[{i}].iceberg.metadata", copyjob.iceberg_table_root(metadata)))
        table = item.get("delta", {}).get("table") if isinstance(item.get("delta"), dict) else None
        if isinstance(table, str):  # the job reads only under the table's directory (sources.delta)
            out.append((f"spec.from.inputs[{i}].delta.table", table if table.endswith("/") else table + "/"))
        catalog = item.get("iceberg", {}).get("catalog") if isinstance(item.get("iceberg"), dict) else None
        if isinstance(catalog, str):  # a name, checked by the policy's catalogs section
            out.append((f"spec.from.inputs[{i}].iceberg.catalog", catalog))
    bound = target.get("catalog")
    if isinstance(bound, dict) and isinstance(bound.get("name"), str):
        out.append(("spec.to.catalog.name", bound["name"]))
    if isinstance(spec.get("rejectedRows"), str):
        out.append(("spec.rejectedRows", spec["rejectedRows"]))
    return out


def compaction_uris(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [("spec.table", spec["table"])] if isinstance(spec.get("table"), str) else []


def streamcopy_uris(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    kafka = (spec.get("source") or {}).get("kafka") or {}
    servers = kafka.get("bootstrapServers")
    for i, server in enumerate(servers if isinstance(servers, list) else []):
        if isinstance(server, str):
            out.append((f"spec.source.kafka.bootstrapServers[{i}]", server))
    files = (spec.get("source") or {}).get("files") or {}
    if isinstance(files.get("uri"), str):
        out.append(("spec.source.files.uri", files["uri"]))
    if isinstance((spec.get("target") or {}).get("table"), str):
        out.append(("spec.target.table", spec["target"]["table"]))
    if isinstance(spec.get("deadLetter"), str):
        out.append(("spec.deadLetter", spec["deadLetter"]))
    return out


# The phases of a kind run one-shot or scheduled (its CRD's status.phase enum).
RUN_PHASES = ("Pending", "Submitted", "Running", "Cancelling", "Succeeded", "Failed", "Cancelled",
              "Scheduled", "Suspended")

COPYJOB = Kind(
    name="CopyJob", plural="copyjobs", phases=RUN_PHASES,
    parse=copyjob.parse_copyjob, uris=copyjob_uris, operator_fields=copyjob.OPERATOR_FIELDS,
    read_result=copy_result,
)
COMPACTION = Kind(
    name="Compaction", plural="compactions", phases=RUN_PHASES,
    parse=compaction.parse_compaction, uris=compaction_uris, operator_fields=compaction.OPERATOR_FIELDS,
    read_result=compaction_result,
    # Two compactions of one table only race each other: a slot due while one runs waits.
    default_concurrency="Forbid",
)
STREAMCOPY = Kind(
    name="StreamCopy", plural="streamcopies",
    phases=("Pending", "Submitted", "Running", "Suspended", "Failed"),
    parse=streamcopy.parse_streamcopy, uris=streamcopy_uris, operator_fields=("spark",),
    read_result=stream_result,
    trigger="continuous",
)

ALL: tuple[Kind, ...] = (COPYJOB, STREAMCOPY, COMPACTION)
BY_NAME: dict[str, Kind] = {k.name: k for k in ALL}
NAMES: tuple[str, ...] = tuple(BY_NAME)


def of(resource: Mapping[str, Any]) -> Kind:
    """The description of ``resource``'s kind (``KeyError`` for a kind not ours)."""
    return BY_NAME[str(resource.get("kind") or "")]
