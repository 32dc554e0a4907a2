"""The error policy of a load, as pure decisions over per-file outcomes.

``onError``:

* ``abort`` (default): any error (a rejected row, an unreadable file) fails the
  whole load; nothing commits; the error names the first file and line.
* ``skipFile``: a file with any error is left out entirely; clean files load.
* ``continue``: every valid row loads; rejected rows and unreadable files are
  reported.

With ``skipFile`` and ``continue``, ``maxErrors`` (a count) and ``maxErrorRatio``
(errors / records read) cap how many errors a load accepts; past either cap the
load fails and nothing commits. An error is one rejected record, or one
unreadable file.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from lading_spec.copyjob import LoadOptions


@dataclass
class FileOutcome:
    """What one task found in one file (plain data: tasks return it as JSON)."""

    index: int
    uri: str
    etag: str
    size: int
    unit: str = "line"
    rows_read: int = 0
    rows_good: int = 0
    rows_rejected: int = 0
    rows_filtered: int = 0  # removed by the transform's WHERE (neither loaded nor rejected)
    file_error: str | None = None
    first_error: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)  # the first few rejects
    parts: list[str] = field(default_factory=list)  # table.writer.WrittenPart JSON
    rejects_uploads: list[dict[str, Any]] = field(default_factory=list)  # pending rejected-rows files
    rejects_uris: list[str] = field(default_factory=list)
    new_columns: list[list[str]] = field(default_factory=list)  # schemaEvolution: evolve.Found.to_list()

    @property
    def error_count(self) -> int:
        return self.rows_rejected + (1 if self.file_error else 0)

    @property
    def clean(self) -> bool:
        return self.error_count == 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FileOutcome:
        return cls(**d)


def merge_outcomes(chunks: list[FileOutcome]) -> FileOutcome:
    """One file's outcome from the outcomes of its chunks (in file order)."""
    first = chunks[0]
    if len(chunks) == 1:
        return first
    errors = [e for c in chunks for e in c.errors][:max(len(c.errors) for c in chunks)]
    return FileOutcome(
        first.index, first.uri, first.etag, first.size, first.unit,
        rows_read=sum(c.rows_read for c in chunks), rows_good=sum(c.rows_good for c in chunks),
        rows_rejected=sum(c.rows_rejected for c in chunks),
        rows_filtered=sum(c.rows_filtered for c in chunks),
        file_error=next((c.file_error for c in chunks if c.file_error), None),
        first_error=next((c.first_error for c in chunks if c.first_error), None),
        errors=errors, parts=[p for c in chunks for p in c.parts],
        rejects_uploads=[u for c in chunks for u in c.rejects_uploads],
        rejects_uris=[u for c in chunks for u in c.rejects_uris],
        new_columns=[f for c in chunks for f in c.new_columns])


@dataclass(frozen=True)
class Decision:
    ok: bool
    error: str | None
    loaded: tuple[int, ...]  # indexes of the files whose rows commit
    skipped: tuple[int, ...]  # indexes of files left out because of their errors

    @functools.cached_property
    def loaded_set(self) -> frozenset[int]:
        return frozenset(self.loaded)

    @functools.cached_property
    def skipped_set(self) -> frozenset[int]:
        return frozenset(self.skipped)


def _where(o: FileOutcome) -> str:
    return f"{o.uri}: {o.file_error or o.first_error}"


def decide(outcomes: list[FileOutcome], options: LoadOptions) -> Decision:
    """Which files commit, or why the load fails."""
    bad = [o for o in outcomes if not o.clean]
    errors = sum(o.error_count for o in outcomes)
    read = sum(o.rows_read for o in outcomes)
    if options.on_error == "abort":
        if bad:
            first = bad[0]
            more = f" ({errors} errors in {len(bad)} files in all)" if errors > 1 else ""
            return Decision(False, f"{_where(first)}{more}; nothing was loaded (onError: abort). "
                            "Fix the file, or set onError: continue or skipFile to load the valid rows",
                            (), ())
        return Decision(True, None, tuple(o.index for o in outcomes), ())
    if options.max_errors is not None and errors > options.max_errors:
        return Decision(False, f"{errors} errors exceed maxErrors {options.max_errors}; nothing was loaded. "
                        f"First: {_where(bad[0])}", (), ())
    # exact: 0.29 * 100 is 28.999999999999996 in floats, which made 29 errors "exceed" 0.29
    if options.max_error_ratio is not None and errors and \
            errors > Fraction(repr(options.max_error_ratio)) * max(read, 1):
        ratio = errors / max(read, 1)
        return Decision(False, f"{errors} errors in {read} records ({ratio:.2%}) exceed maxErrorRatio "
                        f"{options.max_error_ratio}; nothing was loaded. First: {_where(bad[0])}", (), ())
    if options.on_error == "skipFile":
        return Decision(True, None, tuple(o.index for o in outcomes if o.clean),
                        tuple(o.index for o in bad))
    return Decision(True, None, tuple(o.index for o in outcomes if not o.file_error),
                    tuple(o.index for o in outcomes if o.file_error))


def should_write(options: LoadOptions, clean: bool) -> bool:
    """Whether a task uploads a file's good rows: never when validating; for a file with
    errors only under ``continue`` (``abort`` and ``skipFile`` would discard them)."""
    return not options.validate_only and (clean or options.on_error == "continue")
