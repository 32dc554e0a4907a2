"""The Compaction engine: plan → rewrite groups in Spark tasks → one commit → retention.

  open the table ─► new since (frontier) ─► plan (pure) ─► one Spark task per group:
      read parts, consolidate, write pending parts ─► complete + ONE compact commit
      (re-plan if another compaction took a group's parts) ─► retention (grace period)
  any failure or cancellation before the commit ─► abort every pending upload of the run
      (and delete its staging files)

A sorted rewrite of an append or diff table sorts all its groups as one, cut
into ranges of the first sort column (``compact.rangesort``: two stages of
tasks), and lands them as one unit: all of its groups commit, or none.

A run that finds nothing to rewrite still moves ``since`` forward (a commit
with no parts) when the spec asks for a later frontier.

A cancel (SIGTERM) that arrives once the commit has begun waits for it (the
commit is a commit section, see ``compact.commit``); the run then reports what
it committed and leaves retention (and any re-plan) to the next run.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from lading_jobs import storage as st
from lading_jobs.compact import commit as landing
from lading_jobs.compact import frontier, rangesort, retention
from lading_jobs.compact import plan as planner
from lading_jobs.compact import task as compact_task
from lading_jobs.compact.scope import scope_filters
from lading_jobs.compact.task import GroupOutcome, RewritePlan
from lading_jobs.engine import Cancelled, JobResult, RunContext
from lading_jobs.table import format as fmt
from lading_jobs.table import writer as table_writer
from lading_jobs.table.filters import interp
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg import retention as mirror_retention
from lading_jobs.table.log.commits import Snapshot, TableLog
from lading_jobs.table.schema import arrow_type
from lading_spec.compaction import CompactionSpec, parse_compaction
from lading_spec.errors import SpecError
from lading_spec.job import JobDocument

MAX_PLANS = 3
"""Plans one run tries when another compaction takes its groups' parts."""


@dataclass
class Totals:
    """What a run did, summed over its plans (the result's fields)."""

    parts_before: int = 0
    parts_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    rows_read: int = 0
    rows_written: int = 0
    groups: int = 0
    groups_lost: int = 0
    version: int | None = None
    since_before: int = 0
    since: int = 0
    reason: str = ""
    retention: dict[str, Any] = field(default_factory=dict)
    iceberg_metadata: str | None = None  # the table's Iceberg mirror after the run (table/iceberg/mirror.py)

    def to_summary(self, table: str, run_id: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "destination": table, "runId": run_id,
            "partsBefore": self.parts_before, "partsAfter": self.parts_after,
            "bytesBefore": self.bytes_before, "bytesAfter": self.bytes_after,
            "rowsRead": self.rows_read, "rowsWritten": self.rows_written,
            "rowsConsolidated": self.rows_read - self.rows_written,
            "files": self.parts_after, "bytes": self.bytes_after,
            "groups": self.groups, "sinceBefore": self.since_before, "since": self.since,
            "tableVersion": self.version,
        }
        if self.groups_lost:
            out["groupsReplanned"] = self.groups_lost
        if self.reason and not self.groups:
            out["nothingToDo"] = self.reason
        if self.retention:
            out["retention"] = self.retention
        if self.iceberg_metadata:
            out["icebergMetadata"] = self.iceberg_metadata
        return out


def _check_sort_by(snapshot: Snapshot, sort_by: tuple[str, ...]) -> None:
    import pyarrow as pa

    for i, name in enumerate(sort_by):
        column = snapshot.schema.find(name)
        if column is None:
            raise SpecError(f"sortBy[{i}]", f"no column {name!r} in the table; columns: "
                                            f"{', '.join(snapshot.schema.names)}")
        if pa.types.is_nested(arrow_type(column.type)):
            raise SpecError(f"sortBy[{i}]", f"column {name!r} has the nested type {column.type}, which has no order; "
                                            "sort by scalar columns")


def _spark_runner(spark: Any, ctx: RunContext) -> compact_task.Runner:
    """Runs a stage as one Spark job of one task per index, in the run's job group: an RDD stage
    (``parallelize(range(n), n).mapPartitions``), not ``mapInArrow``: no SQL plan, no Arrow batches
    for an index in and a line out."""
    import pyarrow as pa  # noqa: F401 - the task body needs it on executors

    counters = (ctx.progress.rows, ctx.progress.bytes, ctx.progress.files) if ctx.progress is not None else None

    def run(stage: compact_task.Stage) -> list[str]:
        n = stage.count
        sc = spark.sparkContext
        sc.setJobGroup(stage.plan.write_id, f"lading compaction of {stage.plan.snapshot.uri}: {stage.name} "
                                            f"({n} tasks)", interruptOnCancel=True)
        try:
            return sc.parallelize(range(n), n).mapPartitions(compact_task.stage_body(stage, counters)).collect()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

    return run


def _sweep_run(uri: str, storage: st.Storage, write_id: str, outcomes: list[GroupOutcome],
               spark: Any) -> None:
    """Abort every pending upload of this run (tasks killed mid-write included) and delete its
    staging files (a sorted rewrite's first stage)."""
    if spark is not None:
        with contextlib.suppress(Exception):
            table_writer._wait_for_tasks(spark.sparkContext, write_id)
    table_writer.abort_parts(uri, [w for o in outcomes for w in o.written], [write_id], storage=storage)
    rangesort.discard_staging(uri, write_id, storage)


def compact(spark: Any, spec: CompactionSpec, ctx: RunContext, *, run_id: str = "",
            storage: st.Storage | None = None, now_ms: int | None = None,
            runner: compact_task.Runner | None = None) -> Totals:
    """One run over ``spec.table``.

    ``now_ms`` is the clock for ``since`` and retention; ``runner`` runs the rewrite's
    tasks (default: one Spark job per stage, a task per group or range; tests pass
    ``task.in_process(storage)`` to drive thousands of plans without a Spark job each).
    """
    settings = st.S3Settings.from_env(endpoint=spec.connection.endpoint, region=spec.connection.region)
    storage = storage or st.open_storage(spec.table, settings)
    log = TableLog.open_existing(spec.table, storage)
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    totals = Totals()
    first = True
    committed = False
    for _ in range(MAX_PLANS):
        ctx.check()
        snap = log.snapshot()
        if first:
            totals.since_before = snap.since
            first = False
        _check_sort_by(snap, spec.sort_by)
        since = frontier.advance(snap.since, snap.upper, frontier.requested(spec.since, now))
        scope, scope_tree = scope_filters(spark, spec.scope_filter, snap.schema) if spec.scope_filter else (None, None)
        # the filter's current_timestamp() is the wall clock when it is bound (as Spark evaluates it
        # for scope_filters' predicates), within a second; its time zone is the session's
        # (only a scope filter needs it: without one there may be no session, as in-process tests run)
        env = None
        if scope_tree is not None:
            wall = time.time_ns() // 1000
            env = interp.Env(now_lo=wall - 1_000_000, now_hi=wall + 1_000_000,
                             time_zone=str(spark.conf.get("spark.sql.session.timeZone")))
        sort_by = spec.sort_by or snap.sort_by
        cluster = snap.schema.column(sort_by[0]).id if sort_by else None
        options = planner.Options(spec.target_file_size, spec.min_input_files, since, spec.max_bytes_per_run, scope,
                                  cluster, None if scope_tree is None or env is None else (scope_tree, env))
        the_plan = planner.plan(snap, options)
        totals.reason = the_plan.reason
        ctx.report(phase="rewriting", groups=len(the_plan.groups), parts=len(the_plan.parts))
        write_id = planner.WRITE_ID_PREFIX + uuid.uuid4().hex
        outcomes: list[GroupOutcome] = []
        shipped = replace(snap, parts=(), ledger={}, source_progress={}, removed={})
        rewrite = RewritePlan(shipped, the_plan.groups, since, sort_by, write_id, spec.target_file_size, settings)
        # a sorted append or diff rewrite sorts its groups as one and lands them as one unit
        as_one = bool(the_plan.groups) and rangesort.applies(rewrite)
        units = (planner.Group(the_plan.parts),) if as_one else the_plan.groups
        try:
            run_tasks = runner if runner is not None else _spark_runner(spark, ctx)
            if as_one:
                outcomes = [rangesort.run(rewrite, run_tasks, storage, ctx.check)]
            elif the_plan.groups:
                outcomes = compact_task.rewrite_groups(rewrite, run_tasks)
            ctx.check()
        except BaseException as e:
            _sweep_run(spec.table, storage, write_id, outcomes, spark if runner is None else None)
            if ctx.cancelled():
                raise Cancelled() from e
            raise
        info = {"runId": run_id, "groups": len(the_plan.groups), "planVersion": snap.version}
        landed = landing.land(log, snap, units, [o.written for o in outcomes], since, info)
        per_unit = len(the_plan.groups) if as_one else 1
        for i in landed.kept:
            group, outcome = units[i], outcomes[i]
            totals.parts_before += len(group.parts)
            totals.bytes_before += group.bytes
            totals.parts_after += len(outcome.written)
            totals.bytes_after += sum(w.part.size for w in outcome.written)
            totals.rows_read += outcome.rows_in
            totals.rows_written += outcome.rows_out
            totals.groups += per_unit
        totals.groups_lost += len(landed.lost) * per_unit
        committed = committed or landed.snapshot is not None
        final = landed.snapshot or log.snapshot()
        totals.version, totals.since = final.version, final.since
        if not landed.lost or ctx.cancelled():
            break
    if ctx.cancelled():
        if not committed:
            raise Cancelled()
        return totals  # the commit stands and is reported; retention is the next run's
    if spec.retention is not None:
        ctx.report(phase="retention")
        grace_ms = int(spec.retention.grace_period * 1000)
        # the store's clock ages objects, unless the caller fixed the time (now_ms: tests, replays)
        clock = now_ms if now_ms is not None else retention.store_now_ms(storage, spec.table)
        sweep = retention.plan_sweep(log, now, grace_ms, store_now=clock)
        if not spec.retention.dry_run:
            # the Iceberg mirror drops the snapshots that reference these parts first; it keeps the parts of
            # the snapshot it still shows when it is behind the log (table/iceberg/mirror.py, expire)
            keep = mirror.expire(spec.table, storage, [o.uri for o in sweep.removed])
            sweep = replace(sweep, removed=tuple(o for o in sweep.removed if o.uri not in keep))
            retention.apply(storage, sweep)
            # then the mirror's own files no kept metadata file references (table/iceberg/retention.py)
            mirror_retention.apply(storage, mirror_retention.plan(spec.table, storage, clock, grace_ms))
        totals.retention = sweep.summary(spec.table, spec.retention.dry_run)
    totals.iceberg_metadata = mirror.current_metadata(spec.table, storage) if committed or spec.retention else None
    return totals


class CompactionEngine:
    kind = "Compaction"

    def validate(self, doc: JobDocument) -> CompactionSpec:
        return parse_compaction(doc.spec)

    def run(self, spark: Any, doc: JobDocument, ctx: RunContext) -> JobResult:
        spec = self.validate(doc)
        totals = compact(spark, spec, ctx, run_id=doc.run_id)
        return JobResult(rows=totals.rows_written, summary=totals.to_summary(fmt.table_root(spec.table), doc.run_id))


ENGINE = CompactionEngine()
