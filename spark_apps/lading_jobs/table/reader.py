"""Reading a table: the ``lading`` Spark data source, plus the same path in pure Arrow.

``spark.read.format("lading").option("asOf", T).load(uri)`` (after ``register``)
or ``read_table(spark, uri, as_of=T)``. Planning (driver) opens the log once,
binds the pushed filters to column ids and drops every part whose statistics
prove no row can match (``plan_scan``); tasks (``parts.read_part``) fetch only the
remaining parts, skip row groups by their Parquet statistics, map columns to the
current schema by id and consolidate per envelope (``consolidate``).

Skipping must never change answers, so it is gated per envelope: in an append or
diff table a row's identity is its content, so any filter may skip; in an upsert
table an older version of a row must not win because its newer version was
skipped, so only conjuncts over key columns skip. Filters are applied to rows
after consolidation; those this module evaluates exactly as Spark does are not
returned to Spark, the rest are.

Upsert and diff tables need all rows of a key together: the plan splits the key
space into ``n`` hash buckets, each task reads the planned parts and keeps its
bucket (n = 1 for tables under ``BUCKET_BYTES``), so the answer is the same for
any compaction state. A key's bucket depends only on its values in the table's
column types (``table.bucket``), never on the part that holds the row.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from lading_jobs import pushed
from lading_jobs import storage as st
from lading_jobs.formats import spark as spark_formats
from lading_jobs.table import bucket as kb
from lading_jobs.table import consolidate as cons
from lading_jobs.table import format as fmt
from lading_jobs.table.filters import catalyst, interp
from lading_jobs.table.filters import expr as ex
from lading_jobs.table.log.commits import (
    Part,
    Snapshot,
    TableError,
    TableLog,
    snapshot_at,
    superseded_at,
)
from lading_jobs.table.parts import read_part, skipping_predicate

BUCKET_BYTES = 256 * 1024**2
"""Compressed part bytes one consolidating task reads before the plan adds a bucket."""
APPEND_TASK_BYTES = 64 * 1024**2
"""Append tables: parts are grouped into tasks of about this many bytes."""


# -- planning ----------------------------------------------------------------------------
def part_might_match(part: Part, predicate: ex.Expr, as_of: int | None) -> bool:
    if as_of is not None and part.stats.min_time is not None and part.stats.min_time > as_of:
        return False
    return interp.might_match(predicate, part.stats)


@dataclass(frozen=True)
class ScanFilter:
    """The filter Spark's plan puts on a table's scan (``table.filters.catalyst.scan_filters``), for the
    ResultSpec interpreter (``table.filters.interp``), with the query's settings."""

    tree: ex.Node
    env: interp.Env
    version: int | None = None
    """The commit whose column ids ``tree`` names: the read is pinned to it."""

    def to_options(self) -> dict[str, str]:
        out = {"scanFilter": ex.to_json(self.tree), "scanFilterZone": self.env.time_zone}
        if self.env.now_lo is not None:
            out["scanFilterNow"] = str(self.env.now_lo)
        return out

    @classmethod
    def from_options(cls, options: dict[str, str]) -> ScanFilter | None:
        tree = options.get("scanFilter") or options.get("scanfilter")
        if not tree:
            return None
        now = options.get("scanFilterNow") or options.get("scanfilternow")
        zone = options.get("scanFilterZone") or options.get("scanfilterzone") or "UTC"
        return cls(ex.from_json(tree), interp.Env(now_lo=int(now) if now else None, time_zone=zone))


def skipping_tree(snapshot: Snapshot, scan_filter: ScanFilter | None) -> ex.Node | None:
    """The part of ``scan_filter`` that may skip parts: in an upsert table, its conjuncts over
    key columns only (see the module doc)."""
    if scan_filter is None:
        return None
    tree = scan_filter.tree
    if snapshot.envelope == "upsert":
        key_ids = {snapshot.schema.column(k).id for k in snapshot.key_columns}
        tree = ex.and_all([c for c in ex.conjuncts(tree) if ex.column_ids(c) <= key_ids])
    return None if ex.is_trivial(tree) else tree


def plan_scan(snapshot: Snapshot, predicate: ex.Expr | None = None,
              scan_filter: ScanFilter | None = None) -> list[Part]:
    """The parts a read of ``snapshot`` (as of ``snapshot.as_of``) with ``predicate`` (pushed
    conjuncts) and ``scan_filter`` (the plan's filter on the scan) must fetch."""
    skip = skipping_predicate(snapshot, predicate)
    tree = skipping_tree(snapshot, scan_filter)
    return [p for p in snapshot.parts if part_might_match(p, skip, snapshot.as_of)
            and (tree is None or scan_filter is None or interp.might_match(tree, p.stats, scan_filter.env))]


def _bucket_filter(table: pa.Table, snapshot: Snapshot, keys: Sequence[str], bucket: int,
                   buckets: int) -> pa.Table:
    """The rows of ``table`` whose key is in ``bucket``: a function of the key's values in the
    table's column types only, so every part sends a key to the same task (``table.bucket``)."""
    if buckets <= 1 or table.num_rows == 0:
        return table
    types = [snapshot.schema.arrow_schema(internal=False).field(k).type for k in keys]
    in_bucket = kb.bucket_of([table.column(k) for k in keys], types, buckets) == bucket
    return table.filter(pa.array(in_bucket))


def read_parts(storage: st.Storage, snapshot: Snapshot, parts: Sequence[Part], predicate: ex.Expr | None = None,
               *, bucket: int = 0, buckets: int = 1, row_filter: ex.Expr | None = None) -> pa.Table:
    """Read, consolidate and filter ``parts`` (one task's share): the table's user columns."""
    keys = _consolidation_keys(snapshot)
    pieces = [_bucket_filter(read_part(storage, snapshot, p, predicate), snapshot, keys, bucket, buckets)
              for p in parts]
    if not pieces:
        return snapshot.schema.arrow_schema(internal=False).empty_table()
    table = pa.concat_tables(pieces)
    out = cons.consolidate(table, snapshot.envelope, snapshot.key_columns, snapshot.as_of)
    if row_filter is not None and out.num_rows:
        out = out.filter(ex.to_arrow(row_filter))
    return out


def _consolidation_keys(snapshot: Snapshot) -> list[str]:
    if snapshot.envelope == "upsert":
        return list(snapshot.key_columns)
    return snapshot.schema.names


def scan(uri: str, as_of: int | None = None, predicate: ex.Expr | None = None, *,
         storage: st.Storage | None = None, snapshot: Snapshot | None = None) -> pa.Table:
    """The whole read in pure Arrow (no Spark): consolidated rows as of ``as_of`` matching ``predicate``."""
    storage = storage or st.open_storage(uri)
    if snapshot is None:
        snapshot = TableLog.open_existing(uri, storage).snapshot(as_of)
    bound = ex.bind(predicate, snapshot.schema) if predicate is not None else None
    return read_parts(storage, snapshot, plan_scan(snapshot, bound), bound, row_filter=bound)


# -- tasks: planned once, read by the Spark data source and by the Arrow-only unload -----------------
@dataclass(frozen=True)
class ReadTask:
    """One task's share of a read: parts to fetch, and (upsert, diff) the key bucket it keeps."""

    parts: tuple[Part, ...]
    bucket: int
    buckets: int


def plan_tasks(snapshot: Snapshot, predicate: ex.Expr | None = None,
               scan_filter: ScanFilter | None = None) -> list[ReadTask]:
    """The read's tasks: append tables in groups of parts of about ``APPEND_TASK_BYTES``;
    upsert and diff tables as ``n`` key buckets over every planned part (see the module doc)."""
    parts = plan_scan(snapshot, predicate, scan_filter)
    if not parts:
        return [ReadTask((), 0, 1)]
    if snapshot.envelope == "append":
        groups: list[list[Part]] = [[]]
        size = 0
        for p in parts:
            if groups[-1] and size + p.size > APPEND_TASK_BYTES:
                groups.append([])
                size = 0
            groups[-1].append(p)
            size += p.size
        return [ReadTask(tuple(g), 0, 1) for g in groups]
    total = sum(p.size for p in parts)
    buckets = max(1, min(200, math.ceil(total / BUCKET_BYTES)))
    return [ReadTask(tuple(parts), b, buckets) for b in range(buckets)]


def read_task(storage: st.Storage, snapshot: Snapshot, task: ReadTask, predicate: ex.Expr | None = None) -> pa.Table:
    """One task's rows: its parts read, its bucket kept, consolidated, filtered (user columns)."""
    return read_parts(storage, snapshot, task.parts, predicate, bucket=task.bucket, buckets=task.buckets,
                      row_filter=predicate)


# -- the Spark data source ------------------------------------------------------------------------
class LadingPartition(InputPartition):
    def __init__(self, task: ReadTask) -> None:
        super().__init__(task)
        self.task = task


def _open_snapshot(options: dict[str, str]) -> tuple[Snapshot, st.Storage]:
    uri = options.get("path")
    if not uri:
        raise ValueError("lading: give the table URI: spark.read.format('lading').load('s3://bucket/table/')")
    storage = _storage(uri, options)
    raw_as_of = options.get("asOf") or options.get("asof")
    as_of = int(raw_as_of) if raw_as_of not in (None, "") else None
    version = options.get("version")
    if version not in (None, ""):
        assert version is not None
        snapshot = snapshot_at(uri, storage, int(version), as_of)
        check_retained(snapshot, storage)
        return snapshot, storage
    return TableLog.open_existing(uri, storage).snapshot(as_of), storage


def check_retained(snapshot: Snapshot, storage: st.Storage, now_ms: int | None = None) -> None:
    """Refuse, when the read is planned, a version whose parts retention has deleted.

    Retention deletes parts of a state once it stopped being the latest more than its grace
    period ago (at least ``MIN_GRACE_PERIOD``, 24 h, unless ``allowShortGracePeriod``). A state
    still the latest, or superseded more recently than that, is read as it is (one read: the
    next commit). An older one is read only if every part it holds beyond the latest state's
    is still there (one HEAD each); otherwise the read is refused naming the grace period."""
    # here, not with the module: a compaction task imports this module but never needs the spec's
    from lading_spec.compaction import MIN_GRACE_PERIOD

    superseded = superseded_at(snapshot.uri, storage, snapshot.version)
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    if superseded is None or superseded >= now - int(MIN_GRACE_PERIOD * 1000):
        return
    latest = {p.path for p in TableLog.open_existing(snapshot.uri, storage).snapshot().parts}
    for part in snapshot.parts:
        if part.path not in latest and storage.head(snapshot.part_uri(part)) is None:
            hours = (now - superseded) / 3_600_000
            raise TableError(
                f"version {snapshot.version} of {snapshot.uri} cannot be read: it stopped being the latest "
                f"{hours:.1f} h ago, longer than retention's grace period (retention.gracePeriod, at least "
                f"24h unless allowShortGracePeriod), and retention has deleted its part {part.path}. Reads of "
                "a version are limited to the grace period: read a later version, or the latest")


def _storage(uri: str, options: dict[str, str]) -> st.Storage:
    endpoint = options.get("endpoint")
    if uri.startswith("s3://"):
        return st.S3Storage(st.S3Settings.from_env(endpoint=endpoint or None))
    return st.open_storage(uri)


class LadingDataSource(DataSource):
    """``format("lading")``: options ``asOf`` (logical time), ``version`` (commit), ``endpoint`` (S3)."""

    @classmethod
    def name(cls) -> str:
        return "lading"

    def schema(self) -> T.StructType:
        snapshot, _ = _open_snapshot(dict(self.options))
        return spark_formats.transfer_schema(snapshot.schema.spark_schema())

    def reader(self, schema: Any) -> DataSourceReader:
        pushed.guard_literals()  # first: before the worker reads the filters
        return LadingReader(dict(self.options))


class LadingReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.snapshot, _ = _open_snapshot(options)
        self.predicates: list[ex.Expr] = []

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        if self.options.get("pushdown") == "false":  # a relation several scans share: see ``shared_scans``
            yield from filters
            return
        for f in filters:
            e = ex.from_spark(f)
            if e is None:
                yield f
                continue
            try:
                bound = ex.bind(e, self.snapshot.schema)
            except ex.NotPushable:
                yield f
                continue
            self.predicates.append(bound)
            if not ex.row_exact(bound):
                yield f

    def predicate(self) -> ex.Expr | None:
        return ex.and_all(self.predicates) if self.predicates else None

    def partitions(self) -> Sequence[InputPartition]:
        scan_filter = ScanFilter.from_options(self.options)
        return [LadingPartition(t) for t in plan_tasks(self.snapshot, self.predicate(), scan_filter)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        task: ReadTask = partition.value
        out = read_task(_storage(self.snapshot.uri, self.options), self.snapshot, task, self.predicate())
        yield from spark_formats.to_wire(out, wire_schema(self.snapshot)).to_batches()


def wire_schema(snapshot: Snapshot) -> pa.Schema:
    """The Arrow schema Spark expects from this source: the transfer form of the table's types."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_formats.transfer_schema(snapshot.schema.spark_schema()), timezone="UTC")


_REGISTERED: set[int] = set()


def register(spark: Any) -> None:
    """Make ``format("lading")`` available in this session (idempotent)."""
    if id(spark) not in _REGISTERED:
        spark.dataSource.register(LadingDataSource)
        _REGISTERED.add(id(spark))


def read_table(spark: Any, uri: str, as_of: int | None = None, *, version: int | None = None,
               endpoint: str | None = None, view: str | None = None, pushdown: bool = True,
               scan_filter: ScanFilter | None = None, where: str | None = None) -> Any:
    """The table as a DataFrame, consolidated as of logical time ``as_of``, in the table's own types.

    ``where`` (Spark SQL over the table's columns) filters it, skipping the parts where the
    filter cannot hold (its analysed form, ``scan_filters``), filters over expressions too.

    The table is opened once: the DataFrame reads that commit's state (``version``)
    however late it is evaluated, and its schema and data always agree.

    ``view`` names the temporary view the DataFrame backs (``shared_scans`` reports it);
    ``pushdown=False`` makes the source take no filter, so Spark evaluates them all and
    every part is read (for a relation several scans share, see ``shared_scans``).
    ``scan_filter`` skips parts where the query's filter on this scan cannot hold
    (``scan_filters``); Spark still applies the filter to the rows.

    (``format("lading")`` alone shows year-month intervals as int months: a Python
    data source cannot return them; this restores them in Spark SQL.)"""
    register(spark)
    if where is not None:
        name = view or FILTERED_VIEW
        first = read_table(spark, uri, as_of, version=version, endpoint=endpoint, view=name, pushdown=pushdown,
                           scan_filter=scan_filter).where(where)
        found = scan_filters(first).get(name.lower()) if scan_filter is None else None
        if found is None:
            return first
        return read_table(spark, uri, as_of, version=version, endpoint=endpoint, view=name, pushdown=pushdown,
                          scan_filter=found).where(where)
    options = {"path": fmt.table_root(uri)}
    if as_of is not None:
        options["asOf"] = str(as_of)
    if version is not None:
        options["version"] = str(version)
    if endpoint:
        options["endpoint"] = endpoint
    if view is not None:
        options["view"] = view
    if not pushdown:
        options["pushdown"] = "false"
    if scan_filter is not None:
        options.update(scan_filter.to_options())
        if scan_filter.version is not None:
            options["version"] = str(scan_filter.version)
    snapshot, _ = _open_snapshot(options)
    options["version"] = str(snapshot.version)  # one snapshot: Spark's schema and scan open this version
    options[catalyst.COLUMNS_OPTION] = _columns_option(snapshot)
    df = spark.read.format("lading").options(**options).load()
    return spark_formats.from_transfer(df, snapshot.schema.spark_schema())


FILTERED_VIEW = "_lading_read_table"
"""The ``view`` option ``read_table(where=...)`` gives its relation, to find its filter."""


def _columns_option(snapshot: Snapshot) -> str:
    spark_schema = spark_formats.transfer_schema(snapshot.schema.spark_schema())
    return json.dumps({c.name.lower(): [c.id, f.dataType.simpleString()]
                       for c, f in zip(snapshot.schema.columns, spark_schema.fields, strict=True)})


def register_table_view(spark: Any, name: str, uri: str, as_of: int | None = None, *,
                        pushdown: bool = True, scan_filter: ScanFilter | None = None) -> Any:
    """A temporary view ``name`` over the table, for SQL (``from.query`` inputs)."""
    df = read_table(spark, uri, as_of, view=name, pushdown=pushdown, scan_filter=scan_filter)
    df.createOrReplaceTempView(name)
    return df


# -- several scans of one relation ------------------------------------------------------------
# This Spark keeps one planned read (partitions and read function, with the reader's pushed
# filters inside) per Python data source *relation*, and a view's every reference, a CTE's every
# use and a self-join share that relation: every scan would read with the filters the last scan
# pushed, and Spark, told they were applied, would not check them again. So a relation
# several scans share must take no filter (``pushdown=False``): each scan then reads every row
# and Spark applies each scan's own filters. A relation scanned once keeps its skipping.
def shared_scans(df: Any) -> set[str]:
    """The views (``read_table(view=...)``) whose relation more than one scan of ``df``'s
    optimised plan reads, subqueries and CTEs included (lower case)."""
    jvm = df.sparkSession._jvm
    plan = df._jdf.queryExecution().optimizedPlan()
    scans: dict[int, tuple[str, int]] = {}
    stack = [plan]
    while stack:
        node = stack.pop()
        stack.extend(_seq(node.children()))
        stack.extend(_seq(node.innerChildren()))
        if node.getClass().getSimpleName() not in ("DataSourceV2ScanRelation", "DataSourceV2Relation"):
            continue
        relation = node.relation() if node.getClass().getSimpleName() == "DataSourceV2ScanRelation" else node
        view = relation.options().get("view")
        if view is None:
            continue
        key = jvm.java.lang.System.identityHashCode(relation.table())
        name, count = scans.get(key, (str(view).lower(), 0))
        scans[key] = (name, count + 1)
    return {name for name, count in scans.values() if count > 1}


def _seq(value: Any) -> list[Any]:
    return [value.apply(i) for i in range(value.size())]


# -- the plan's filter on each scan ------------------------------------------------------------
NOW_MARGIN_MICROS = 1_000_000
"""Taken off the instant a scan filter records as the earliest the query can run at."""


def scan_filters(df: Any) -> dict[str, ScanFilter]:
    """Per view (``read_table(view=...)``, lower case) that ``df``'s analysed plan scans once:
    the filter Spark applies to its rows (``table.filters.catalyst.scan_filters``), with the session
    time zone and, as the query's current time, an instant no later than any query that is
    planned after this call runs at (the instant itself is the optimiser's, later)."""
    plan = df._jdf.queryExecution().analyzed()
    trees = catalyst.scan_filters(plan)
    if not trees:
        return {}
    zone = str(df.sparkSession.conf.get("spark.sql.session.timeZone"))
    env = interp.Env(now_lo=time.time_ns() // 1000 - NOW_MARGIN_MICROS, time_zone=zone)
    return {view: ScanFilter(tree, env, None if version is None else int(version))
            for view, (tree, version) in trees.items()}
