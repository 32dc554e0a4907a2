"""The CopyJob engine: an unload (query or table → files) or a load (files → table), by ``to``.

Both directions keep their own modules (``unload.job``, ``load.job``); this
adapter gives them the engine interface of ``lading_jobs.engine``.
"""

from __future__ import annotations

import importlib
from typing import Any

from lading_jobs.engine import JobResult, RunContext
from lading_spec.copyjob import CopyJobSpec, parse_copyjob
from lading_spec.job import JobDocument


class CopyJobEngine:
    kind = "CopyJob"

    def validate(self, doc: JobDocument) -> CopyJobSpec:
        return parse_copyjob(doc.spec)

    def run(self, spark: Any, doc: JobDocument, ctx: RunContext) -> JobResult:
        spec = self.validate(doc)
        if spec.target.kind == "table":
            try:
                load = importlib.import_module("lading_jobs.load.job")
            except ModuleNotFoundError as e:
                if e.name and "lading_jobs.load.job".startswith(e.name):
                    return JobResult(error="loading into a table (to.table) is not implemented in this version")
                raise
            return JobResult.from_dict(load.run_load(spark, doc, spec, cancel=ctx.cancel))
        from lading_jobs.unload import job as unload

        return JobResult.from_dict(unload.run_unload(spark, doc, spec, cancel=ctx.cancel, progress=ctx.progress))


ENGINE = CopyJobEngine()
