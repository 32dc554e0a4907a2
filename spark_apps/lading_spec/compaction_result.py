"""What one Compaction run reports, in words: one line shared by ``lading run`` and the operator.

The engine's result (docs/compaction.md#the-result) carries parts and bytes
before and after, rows read, written and consolidated away, the ``since``
frontier before and after, and what retention deleted (or would delete, on a
dry run). ``describe`` turns it into the line ``lading run`` prints after
``COMPACT`` and the operator writes into the Succeeded Event and condition
message, so both say the same thing. Pure: a mapping in, a string out; a field
the result lacks is left out of the line rather than guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lading_spec.sizes import human_size


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def describe_retention(retention: Mapping[str, Any]) -> str:
    """``retention deleted 118 parts and 2 orphans (60.1 MB), aborted 1 upload`` (``would delete`` on a dry run)."""
    dry = bool(retention.get("dryRun"))
    parts = _int(retention.get("partsDeleted")) or 0
    orphans = _int(retention.get("orphansDeleted")) or 0
    uploads = _int(retention.get("uploadsAborted")) or 0
    size = human_size(_int(retention.get("bytesDeleted")) or 0)
    what = f"{_plural(parts, 'part')} and {_plural(orphans, 'orphan')} ({size})"
    if dry:
        return f"retention (dry run) would delete {what} and abort {_plural(uploads, 'upload')}"
    return f"retention deleted {what}, aborted {_plural(uploads, 'upload')}"


def describe(result: Mapping[str, Any]) -> str:
    """One line: ``20 → 1 parts, 61.2 MB → 58.9 MB, 1,200 rows read, 1,150 written (50 consolidated), since 6 → 10``.

    Followed by ``; nothing to rewrite: <why>`` when nothing was, and by the
    retention summary when the run had ``retention``.
    """
    get = {k: _int(result.get(k)) for k in ("partsBefore", "partsAfter", "bytesBefore", "bytesAfter", "rowsRead",
                                            "rowsWritten", "rowsConsolidated", "sinceBefore", "since")}
    pieces = []
    if get["partsBefore"] is not None and get["partsAfter"] is not None:
        pieces.append(f"{get['partsBefore']:,} → {get['partsAfter']:,} parts")
    if get["bytesBefore"] is not None and get["bytesAfter"] is not None:
        pieces.append(f"{human_size(get['bytesBefore'])} → {human_size(get['bytesAfter'])}")
    if get["rowsRead"] is not None and get["rowsWritten"] is not None:
        consolidated = get["rowsConsolidated"] if get["rowsConsolidated"] is not None \
            else get["rowsRead"] - get["rowsWritten"]
        pieces.append(f"{get['rowsRead']:,} rows read, {get['rowsWritten']:,} written ({consolidated:,} consolidated)")
    if get["since"] is not None:
        moved = get["sinceBefore"] is not None and get["sinceBefore"] != get["since"]
        pieces.append(f"since {get['sinceBefore']} → {get['since']}" if moved else f"since {get['since']}")
    line = ", ".join(pieces) or "no figures in the result"
    if isinstance(result.get("nothingToDo"), str) and result["nothingToDo"]:
        line += f"; nothing to rewrite: {result['nothingToDo']}"
    retention = result.get("retention")
    if isinstance(retention, Mapping) and retention:
        line += "; " + describe_retention(retention)
    return line
