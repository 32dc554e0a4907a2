"""The StreamCopy engine (``lading_jobs.engine`` interface): ``run_stream`` behind ``validate``/``run``.

``ctx.cancel`` stops the stream (SIGTERM, Ctrl-C, suspend); ``ctx.options`` may say
``once`` (``lading run --once``) and ``progress_port``/``progress_host`` (``lading
run --progress-port``); each committed batch (``event: batch``) and each new lag the
watcher finds (``event: lag``) is reported through ``ctx.report`` (``lading run`` prints a
line for each).
"""

from __future__ import annotations

from typing import Any

from lading_jobs.engine import JobResult, RunContext
from lading_jobs.stream.job import run_stream
from lading_spec.job import JobDocument
from lading_spec.streamcopy import StreamCopySpec, parse_streamcopy


class StreamCopyEngine:
    kind = "StreamCopy"

    def validate(self, doc: JobDocument) -> StreamCopySpec:
        return parse_streamcopy(doc.spec)

    def run(self, spark: Any, doc: JobDocument, ctx: RunContext) -> JobResult:
        options = dict(ctx.options)

        def on_batch(result: Any, progress: dict[str, Any]) -> None:
            ctx.report(event="batch", batch={"rows": result.rows, "rejected": result.rejected,
                                             "filtered": result.filtered, "seconds": round(result.seconds, 3),
                                             "version": result.version}, progress=progress)

        def on_lag(progress: dict[str, Any]) -> None:
            ctx.report(event="lag", progress=progress)

        out = run_stream(spark, doc, self.validate(doc), ctx.cancel, once=bool(options.pop("once", False)),
                         on_batch=on_batch, on_lag=on_lag, **options)
        return JobResult.from_dict(out)


ENGINE = StreamCopyEngine()
