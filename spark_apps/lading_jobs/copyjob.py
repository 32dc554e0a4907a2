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
            if spec.target.catalog is None:
                return JobResult.from_dict(load.run_load(spark, doc, spec, cancel=ctx.cancel))
            from lading_jobs.table.iceberg import catalog_binding

            assert spec.target.table is not None
            catalog_binding.check(spec.target.table, *spec.target.catalog)  # to.catalog usable: before any write
            out = load.run_load(spark, doc, spec, cancel=ctx.cancel)
            if out.get("error") is None and not out.get("cancelled"):
                catalog_binding.ensure(spec.target.table, *spec.target.catalog)  # registered, the first time
            return JobResult.from_dict(out)
        from lading_jobs.unload import job as unload

        return JobResult.from_dict(unload.run_unload(spark, doc, spec, cancel=ctx.cancel, progress=ctx.progress))


ENGINE = CopyJobEngine()
