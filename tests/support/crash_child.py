"""A child process for crash-matrix tests: publish (unload) or commit (table) through a faulty storage.

``python crash_child.py '<json>'`` with ``{"kind": "unload"|"table", "fault": {...}, ...}``.
It installs the SIGTERM handling the Spark app uses (``lading_jobs.result.Cancellation``,
with no grace: the watchdog acts at once unless a commit is in progress), runs the step
with a ``FaultyStorage`` that kills or signals the process at the chosen call, and
reports like the app does (``LADING_RESULT {...}``).
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(_ROOT / "spark_apps"), str(_ROOT / "tests")]  # as pytest's pythonpath orders them

from lading_jobs import result as results  # noqa: E402
from lading_jobs.storage import open_storage  # noqa: E402
from support.faults import Fault, FaultyStorage  # noqa: E402


def main() -> int:
    args = json.loads(sys.argv[1])
    cancellation = results.Cancellation(grace_seconds=0, report_seconds=60)
    cancellation.install()
    root = args.get("destination") or args["table"]
    storage = FaultyStorage(open_storage(root), Fault(**args["fault"]))
    if args["kind"] == "unload":
        from lading_jobs.unload import commit

        manifest = args["manifest"]
        uri = commit.publish(storage, args["destination"], args["files"], manifest, mode=args["mode"],
                             run_id=args["run_id"], token=args["token"])
        out = {"rows": manifest["totals"]["rows"], "manifest": uri}
    else:
        from lading_jobs.table import writer
        from lading_jobs.table.log.commits import TableLog
        from lading_jobs.table.schema import TableSchema

        if args.get("first"):  # committed first, unfaulted: this process then published the version before
            from lading_jobs.table.iceberg import mirror

            real_prepare = mirror.prepare

            def traced(*a: object) -> object:  # says on stderr which versions' manifests start early
                out = real_prepare(*a)  # type: ignore[arg-type]
                if out is not None:
                    print(f"prepared version {out.version}", file=sys.stderr, flush=True)
                return out

            mirror.prepare = traced  # type: ignore[assignment]
            writer.commit_parts(args["table"], [writer.WrittenPart.from_json(w) for w in args["first"]],
                                log=TableLog.open_existing(args["table"]))
        log = TableLog.open_existing(args["table"])
        log.storage = storage
        written = [writer.WrittenPart.from_json(w) for w in args["written"]]
        schema = TableSchema.from_json(args["schema"]) if args.get("schema") else None  # schema evolution
        from lading_jobs.table.iceberg import publisher as mirror_publisher

        with mirror_publisher.background() if args.get("background") else contextlib.nullcontext():
            snap = writer.commit_parts(args["table"], written, log=log, nonce=args.get("nonce"), schema=schema,
                                       ledger=args.get("ledger"))  # {uri: {etag, size, rows}}: the ledger matrix
        out = {"rows": snap.rows, "version": snap.version}
    if cancellation.event.is_set():
        out["sawSigterm"] = True
    return results.emit(out)


if __name__ == "__main__":
    sys.exit(main())
