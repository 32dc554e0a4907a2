"""The engine interface every kind's Spark app implements, and the one ``Cancelled``.

An engine is a module-level object with::

    kind                                  "CopyJob", "Compaction", ...
    validate(doc) -> spec                 parse the spec before Spark starts (SpecError names the field)
    run(spark, doc, ctx) -> JobResult     do the work; ctx carries the cancel signal and progress

``main.run_job`` picks the engine by the job document's kind (``ENGINES``: module
names, imported lazily so an image without an engine still reports cleanly).

``RunContext`` is what a run may consult while it works, short or long-running:
``ctx.cancelled()`` / ``ctx.check()`` (raises :class:`Cancelled`) between steps,
``ctx.wait(seconds)`` to sleep between micro-batches but wake on cancel, and
``ctx.report(**fields)`` to publish driver-side progress (``lading run`` prints
it; tasks add to ``ctx.progress`` Spark accumulators). Every result is a
:class:`JobResult`: exactly one of ``rows``, ``error``, ``cancelled``, plus the
kind's summary fields (the CopyResponse of the job contract).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from lading_spec.job import JobDocument


class Cancelled(Exception):
    """The run was cancelled (SIGTERM, ``lading run`` interrupted, or ``spec.cancel``)."""


class Progress:
    """Counters tasks add to (Spark accumulators), read by ``lading run``'s progress bar."""

    def __init__(self, spark: Any) -> None:
        sc = spark.sparkContext
        self.rows, self.bytes, self.files = sc.accumulator(0), sc.accumulator(0), sc.accumulator(0)


ProgressListener = Callable[[Mapping[str, Any]], None]


@dataclass
class RunContext:
    """The cancel signal and progress channels of one run (see the module doc)."""

    cancel: threading.Event = field(default_factory=threading.Event)
    progress: Progress | None = None
    listener: ProgressListener | None = None
    reported: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    """The engine's own run options from the caller (``lading run --once`` → ``{"once": True}``)."""

    def cancelled(self) -> bool:
        return self.cancel.is_set()

    def check(self) -> None:
        """Raise :class:`Cancelled` when the run was asked to stop."""
        if self.cancel.is_set():
            raise Cancelled()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when woken by a cancel (for long-running engines)."""
        return self.cancel.wait(seconds)

    def report(self, **fields: Any) -> None:
        """Driver-side progress: merged into ``reported`` and handed to the listener, if any."""
        self.reported.update(fields)
        if self.listener is not None:
            with contextlib.suppress(Exception):  # a progress display never fails a run
                self.listener(dict(self.reported))


@dataclass(frozen=True)
class JobResult:
    """One run's result: exactly one of rows / error / cancelled, plus summary fields."""

    rows: int | None = None
    error: str | None = None
    cancelled: bool = False
    summary: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.summary)
        for key in ("rows", "error", "cancelled"):
            out.pop(key, None)
        if self.cancelled:
            out["cancelled"] = True
        elif self.error is not None:
            out["error"] = self.error
        else:
            out["rows"] = self.rows if self.rows is not None else 0
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JobResult:
        """An engine's plain result dict (``{"rows": N, ...}`` or ``{"error": ...}``) as a JobResult."""
        summary = {k: v for k, v in d.items() if k not in ("rows", "error", "cancelled")}
        if d.get("cancelled"):
            return cls(cancelled=True, summary=summary)
        if d.get("error") is not None:
            return cls(error=str(d["error"]), summary=summary)
        return cls(rows=int(d.get("rows") or 0), summary=summary)


class Engine(Protocol):
    kind: str

    def validate(self, doc: JobDocument) -> Any:
        """Parse and check ``doc.spec``; raise SpecError naming the field."""
        ...

    def run(self, spark: Any, doc: JobDocument, ctx: RunContext) -> JobResult:
        ...


ENGINES: dict[str, str] = {
    "CopyJob": "lading_jobs.copyjob",
    "Compaction": "lading_jobs.compact.engine",
    "StreamCopy": "lading_jobs.stream.engine",
}
"""Kind → the module whose ``ENGINE`` runs it (imported only when a job of that kind runs)."""
