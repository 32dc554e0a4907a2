"""The Spark app's entry point for every kind: ``main.py --job <JSON> | --job-file PATH``.

Reads the job document (lading_spec.job), validates the spec, runs the kind's
engine on the Spark session spark-submit gave it (``--master`` for local runs),
and reports one result (lading_jobs.result). Exit code 0 only for ``rows``.
Engines (lading_jobs.engine: one interface, one ``Cancelled``) are imported
lazily by kind, so this file works whichever of them are installed.
Nothing it prints or reports carries the pod's secrets (lading_jobs.scrub), and a
query reads only its inputs (lading_jobs.sandbox).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
import time
from typing import Any

if __package__ in (None, ""):  # run as a file: make lading_jobs / lading_spec importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lading_jobs import result as results  # noqa: E402
from lading_jobs import scrub  # noqa: E402
from lading_jobs.engine import ENGINES, Cancelled, Engine, ProgressListener, RunContext  # noqa: E402
from lading_spec.errors import SpecError  # noqa: E402
from lading_spec.job import JobDocument, parse_job_document  # noqa: E402

STOP_ON_INVALID_SPEC = frozenset({"StreamCopy"})
"""Kinds whose driver runs under ``restartPolicy: OnFailure``: a spec error is reported as a
deliberate stop (reason ``InvalidSpec``, exit 0), since a rerun of the same spec fails the same way."""


def engine_for(kind: str) -> Engine | None:
    """The engine of ``kind`` (``engine.ENGINES``), or None when this image does not ship it."""
    module = ENGINES.get(kind)
    if module is None:
        return None
    try:
        return importlib.import_module(module).ENGINE  # type: ignore[no-any-return]
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            return None
        raise


def run_job(spark: Any, doc: JobDocument, cancellation: results.Cancellation | None = None,
            progress: Any = None, listener: ProgressListener | None = None,
            options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Dispatch ``doc`` to its kind's engine; return the result (without timing). ``options``
    reach the engine as ``ctx.options`` (``lading run``'s ``once`` for a StreamCopy)."""
    engine = engine_for(doc.kind)
    if engine is None:
        return {"error": f"{doc.kind} is not implemented in this version of the lading image"}
    ctx = RunContext(cancel=cancellation.event if cancellation is not None else threading.Event(),
                     progress=progress, listener=listener, options=dict(options or {}))
    return engine.run(spark, doc, ctx).to_dict()


def execute(doc: JobDocument, spark_factory: Any, cancellation: results.Cancellation,
            progress_factory: Any = None, listener: ProgressListener | None = None,
            options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run ``doc`` and always return a result dict (errors and cancellation included)."""
    started = time.monotonic()
    extra = {"runId": doc.run_id}
    cancellation.extra = extra
    try:
        engine = engine_for(doc.kind)
        if engine is not None:
            engine.validate(doc)  # fail fast on a bad spec, before Spark starts
        spark = spark_factory()
        sc = spark.sparkContext
        cancellation.add_hook(sc.cancelAllJobs)
        progress = progress_factory(spark) if progress_factory is not None else None
        out = run_job(spark, doc, cancellation, progress, listener, options)
    except SpecError as e:
        out = {"error": str(e), **({"reason": "InvalidSpec"} if doc.kind in STOP_ON_INVALID_SPEC else {})}
    except BaseException as e:  # noqa: BLE001 - every failure becomes a result
        if cancellation.event.is_set() or isinstance(e, Cancelled | KeyboardInterrupt):
            out = {"cancelled": True}
        else:
            out = {"error": results.describe_error(e)}
    if cancellation.event.is_set() and "rows" not in out and not out.get("cancelled"):
        out = {"cancelled": True}  # an engine's own cancelled result keeps its summary
    out.update(extra)
    out["durationSeconds"] = round(time.monotonic() - started, 3)
    return scrub.result(out)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="main.py", description="Run one lading job (the job contract).")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--job", help="the job document as JSON")
    g.add_argument("--job-file", help="a file holding the job document")
    p.add_argument("--master", default=None, help="Spark master for local runs (default: spark-submit's)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one job. Every exit path is inside the scrubbing filter (stdout, stderr, the JVM's
    included) and reports through ``results.emit``, which scrubs the result."""
    with scrub.protected_output():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    args = _parse_args(argv)
    cancellation = results.Cancellation()
    cancellation.install()
    try:
        if args.job is not None:
            text = args.job
        else:
            with open(args.job_file) as f:
                text = f.read()
        doc = parse_job_document(text)
    except (SpecError, OSError) as e:
        return results.emit({"error": str(e)})

    def spark_factory() -> Any:
        from lading_jobs.session import build_session

        return build_session(master=args.master or os.environ.get("LADING_SPARK_MASTER"),
                             app_name=f"lading-{doc.kind.lower()}-{doc.name or doc.run_id}", kind=doc.kind)

    return results.emit(execute(doc, spark_factory, cancellation))


if __name__ == "__main__":
    sys.exit(main())
