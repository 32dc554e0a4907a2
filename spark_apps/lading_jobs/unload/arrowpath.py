"""The Arrow-only unload path: copies that need no Spark SQL stay in Arrow end to end.

On the Spark SQL path every row crosses from the JVM to Python as Arrow, about
half of an export's CPU. A copy that computes nothing does not need that:

* ``from.files`` → ``to.files`` (a format conversion),
* ``from.table`` (read with the table's own reader: envelopes consolidated,
  ``asOf`` honoured),
* ``from.query`` whose analysed plan is only a projection (columns, renamed or
  not) of one input, optionally filtered where ``predicate`` evaluates the
  condition exactly as Spark does (``lading_jobs.sqlshape``).

``choose`` decides (``CONF`` forces a path); everything else stays on the
Spark SQL path. On this path the driver plans splits with the same planners
the Spark path's data sources use (``lading_jobs.splits`` for files,
``table.reader.plan_tasks`` for tables, with the filter the query's analysed plan
puts on the table's scan: ``table_scan``), so both paths split the rows into the
same tasks; ``sc.parallelize(splits).mapPartitionsWithIndex`` then reads each
split with pyarrow, filters and projects it, regroups the rows into batches of
``spark.sql.execution.arrow.maxRecordsPerBatch`` rows as Spark's Arrow transfer
does, and feeds them to the same task writer (``task.write_partition``), which
returns the same pending uploads to the same commit. Same rows, same batches,
same writer: the same files, byte for byte. The exception is a Parquet-to-Parquet
copy of every column as it is (``Job.copy_chunks``): its tasks copy the column
chunks already stored as lading writes them (``chunkcopy``), so its files hold
the same rows and schema in other bytes.

A top-level ``ORDER BY`` (over one Parquet input, without ``partitionBy``) takes
this path only when the rows already are in its order: proven from the footers
before the run, checked row by row while reading; if the check fails the run's
uploads are aborted and it runs on the Spark SQL path instead (``sortedness``).

``partitionBy``: Spark sorts each task's rows by the partition columns, keeping
their order within a value; here each split is read whole and sorted stably
with Spark's ordering (NULLs first, NaN above every number, -0.0 = 0.0), so
splits are planned with a smaller budget (``sources.files.SORT_SPLIT_BYTES``) to
bound the memory a task holds. Partition columns of other types keep the Spark path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from lading_jobs import sqlshape
from lading_jobs.formats import spark as spark_formats
from lading_jobs.unload import predicate, sortedness, sparkplan
from lading_jobs.unload.task import TaskPlan, write_partition
from lading_spec import sparkconf
from lading_spec.copyjob import CopyJobSpec, Input
from lading_spec.errors import SpecError
from lading_spec.formats import FileSet

ARROW, SPARK = "arrow", "spark"
CONF = sparkconf.UNLOAD_PATH
BATCH_ROWS_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"


# -- what tasks read -------------------------------------------------------------------------
@dataclass(frozen=True)
class FilesInput:
    fileset: FileSet
    schema_json: str  # the file set's Spark schema (what read_split decodes to)


@dataclass(frozen=True)
class TableInput:
    snapshot: Any  # lading_jobs.table.log.commits.Snapshot (imported lazily: tables are optional)
    skip: Any = None  # lading_jobs.table.filters.expr.Expr: the filter's part that may skip row groups


@dataclass(frozen=True)
class Opened:
    """``from.files`` or ``from.table`` read once for its schema (``unload.job.open_source``) and
    kept, so planning neither lists the files nor reads the table's log again, and plans over
    the very files or snapshot the schema came from: the files listed with their inferred
    schema, or the table's snapshot."""

    listed: tuple[Any, ...] = ()  # sources.files ObjectInfo, listing order (from.files)
    files_schema: T.StructType | None = None  # inferred from the files (from.files)
    snapshot: Any = None  # lading_jobs.table.log.commits.Snapshot (from.table)

    def schema(self) -> T.StructType | None:
        """The Spark schema the source's DataFrame has (char/varchar as string), or ``None``
        when only that DataFrame can tell it: a year-month interval, restored with SQL whose
        nullability is the analyser's."""
        found = self.snapshot.schema.spark_schema() if self.snapshot is not None else self.files_schema
        assert found is not None
        return None if spark_formats.has_ym(found) else spark_formats.transfer_schema(found)


@dataclass(frozen=True)
class Job:
    """An Arrow-only run: its input, one unit per task, and what each task does to the rows."""

    input: FilesInput | TableInput
    units: tuple[Any, ...]  # splits.Split (files) or table.reader.ReadTask (tables), one per task
    columns: tuple[int, ...]  # input column positions, in output order
    names: tuple[str, ...]  # output names
    condition: sqlshape.Expr | None
    sort_by: tuple[int, ...]  # output positions to sort each split by (partitionBy)
    batch_rows: int
    order: tuple[tuple[int, bool], ...] = ()  # ORDER BY the rows are proven in: (input position, descending)
    copy_chunks: bool = False  # Parquet to Parquet, every column as it is: chunks copied (``chunkcopy``)


@dataclass(frozen=True)
class Choice:
    path: str  # ARROW or SPARK
    reason: str
    job: Job | None = None

    def marker(self) -> dict[str, str]:
        """The manifest's record of the path that ran."""
        return {"name": self.path, "reason": self.reason}


# -- deciding ----------------------------------------------------------------------------------
_SORTABLE = ("tinyint", "smallint", "int", "bigint", "float", "double", "string", "boolean", "date", "timestamp",
             "timestamp_ntz", "binary")


def sortable(dt: T.DataType) -> bool:
    """Types whose Spark ordering ``_sort_keys`` reproduces exactly."""
    s = dt.simpleString()
    return s in _SORTABLE or s.startswith("decimal(")


def requested_path(spark: SparkSession) -> str:
    value = sparkconf.unload_path_value(spark.conf.get(CONF, "auto"))
    if value not in ("auto", ARROW, SPARK):
        raise SpecError(f"spark.sparkConf.{CONF}", f"got {value!r}; accepted: auto, arrow, spark")
    return value


def _partition_positions(spec: CopyJobSpec, schema: T.StructType) -> tuple[int, ...] | str:
    """Output positions of the partition columns, or why they keep the Spark path."""
    out = []
    for name in spec.target.partition_by:
        if name not in schema.names:
            return f"partition column {name!r} is not in the output"  # the Spark path names the error
        field = schema[name]
        if not sortable(field.dataType):
            return f"partition column {name!r} of type {field.dataType.simpleString()} is sorted by Spark"
        out.append(schema.names.index(name))
    return tuple(out)


def choose(spark: SparkSession, spec: CopyJobSpec, schema: T.StructType, frame: DataFrame | None, *,
           requested: str | None = None, opened: Opened | None = None) -> Choice:
    """Which path runs ``spec`` (whose source has ``schema``), and why. ``frame``, the source
    DataFrame, is needed for ``from.query`` only (its analysed plan); files and tables are
    judged without one, so an Arrow-only run never starts Spark SQL. ``opened``: what reading
    ``from.files`` or ``from.table`` for ``schema`` found, planned over instead of read again."""
    requested = requested or requested_path(spark)
    if requested == SPARK:
        return Choice(SPARK, f"{CONF}=spark")
    choice = _arrow_choice(spark, spec, schema, frame, opened)
    if requested == ARROW and choice.job is None:
        raise SpecError(f"spark.sparkConf.{CONF}",
                        f"is arrow, but this copy needs Spark SQL: {choice.reason}; remove the setting")
    return choice


def _arrow_choice(spark: SparkSession, spec: CopyJobSpec, schema: T.StructType, frame: DataFrame | None,
                  opened: Opened | None) -> Choice:
    source = spec.source
    if source.query is not None:
        assert frame is not None, "from.query: the path is chosen from the query's DataFrame"
        plan = sparkplan.describe(frame)
        if plan is None:
            return Choice(SPARK, "from.query: the plan is large")
        shape = sqlshape.recognise(plan, {i.name for i in source.inputs})
        if isinstance(shape, sqlshape.Refusal):
            return Choice(SPARK, f"from.query: {shape.reason}")
        item = next(i for i in source.inputs if i.name == shape.input)
        why = "from.query: " + ("a filtered projection" if shape.condition is not None else "a projection") + \
              f" of input {item.name!r}" + (", in order" if shape.order else "")
        return _job(spark, spec, schema, item, [c for c, _ in shape.columns], shape.condition, why, shape.order,
                    frame=frame)
    if source.table is not None:
        return _job(spark, spec, schema, Input(name="table", table=source.table, as_of=source.as_of),
                    list(schema.names), None, "from.table: a copy of the table", opened=opened)
    assert source.files is not None
    return _job(spark, spec, schema, Input(name="files", files=source.files), list(schema.names), None,
                "from.files: a format conversion", opened=opened)


def _job(spark: SparkSession, spec: CopyJobSpec, schema: T.StructType, item: Input, columns: list[str],
         condition: sqlshape.Expr | None, why: str, order: tuple[tuple[str, bool], ...] = (), *,
         opened: Opened | None = None, frame: DataFrame | None = None) -> Choice:
    """``opened``: ``item`` (the copy's own ``from.files`` or ``from.table``) as already read;
    ``frame``: the query's DataFrame (``from.query``), whose analysed plan holds the filter on
    a table input's scan (``table_scan``)."""
    if item.iceberg is not None:
        return Choice(SPARK, f"from.query: input {item.name!r} is an Iceberg table (read by Spark tasks)")
    if item.delta is not None:
        return Choice(SPARK, f"from.query: input {item.name!r} is a Delta table (read by Spark tasks)")
    if item.files is not None and item.files.partitioning == "hive":
        return Choice(SPARK, f"input {item.name!r} is Hive-partitioned: its directories' columns, and their "
                             "pruning, are the Spark SQL path's")
    if order:
        if item.files is None or item.files.format != "parquet":
            return Choice(SPARK, f"from.query: ORDER BY over input {item.name!r}, which is not Parquet files "
                                 "(only their footers can show the rows are in order)")
        if spec.target.partition_by:
            return Choice(SPARK, "from.query: ORDER BY with to.partitionBy")
    positions = _partition_positions(spec, schema)
    if isinstance(positions, str):
        return Choice(SPARK, positions)
    batch_rows = int(spark.conf.get(BATCH_ROWS_CONF, "10000") or "10000")
    if batch_rows <= 0:
        return Choice(SPARK, f"{BATCH_ROWS_CONF} is not positive")
    read: FilesInput | TableInput
    if item.files is not None:
        from lading_jobs.sources import files as sources_files

        if opened is not None and opened.files_schema is not None:
            listed, full = list(opened.listed), opened.files_schema
        else:
            listed = sources_files.list_files(item.files, field=f"from.inputs[{spec.source.inputs.index(item)}]")
            full = sources_files.infer_schema(item.files, listed)
        budget, open_cost = sources_files.split_sizes(spark, listed, sort=bool(spec.target.partition_by))
        units: tuple[Any, ...] = tuple(sources_files.plan_splits(item.files, listed, budget, open_cost))
        read = FilesInput(item.files, full.json())
        input_names = full.names
        if order:
            unproven = _footer_order(listed, order)
            if unproven is not None:
                return Choice(SPARK, f"from.query: ORDER BY over input {item.name!r}: the input is not provably "
                                     f"sorted ({unproven})")
    else:
        from lading_jobs.storage import open_storage
        from lading_jobs.table import format as table_format
        from lading_jobs.table import reader
        from lading_jobs.table.log.commits import TableLog, snapshot_at

        assert item.table is not None
        scan_filter = table_scan(frame, item.name) if frame is not None and condition is not None else None
        if opened is not None and opened.snapshot is not None:
            snapshot = opened.snapshot
        elif scan_filter is not None and scan_filter.version is not None:  # the commit the query's frame reads
            root = table_format.table_root(item.table)
            snapshot = snapshot_at(root, open_storage(root), scan_filter.version, item.as_of)
        else:
            snapshot = TableLog.open_existing(table_format.table_root(item.table)).snapshot(item.as_of)
        skip = table_filter(condition, snapshot.schema) if condition is not None else None
        units = tuple(reader.plan_tasks(snapshot, skip, scan_filter))
        read = TableInput(snapshot, skip)
        input_names = snapshot.schema.names
    missing = [c for c in columns if c not in input_names]
    if missing:
        return Choice(SPARK, f"column {missing[0]!r} is not one of the input's columns")
    copy = (item.files is not None and item.files.format == "parquet" and spec.target.format == "parquet"
            and condition is None and not positions and not order and list(columns) == list(input_names)
            and list(schema.names) == list(input_names))
    if copy:
        why += "; Parquet column chunks copied where they qualify"
    return Choice(ARROW, why, Job(read, units, tuple(input_names.index(c) for c in columns), tuple(schema.names),
                                  condition, positions, batch_rows,
                                  tuple((input_names.index(c), desc) for c, desc in order), copy))


def _footer_order(listed: list[Any], order: tuple[tuple[str, bool], ...]) -> str | None:
    """None when the files' footers show their row groups, in reading order, are in ``order``
    (``sortedness``), else why not."""
    import pyarrow.parquet as pq

    from lading_jobs.storage import open_storage

    keys, descending = [c for c, _ in order], [d for _, d in order]
    groups: list[tuple[str, sortedness.Key, sortedness.Key]] = []
    for o in listed:
        with open_storage(o.uri).open_input(o.uri, o.size, etag=o.etag or None) as f:
            found = sortedness.footer_groups(pq.read_metadata(f), keys, descending, o.uri.rsplit("/", 1)[-1])
        if isinstance(found, str):
            return found
        groups += found
    return sortedness.unproven(groups, descending)


def table_scan(frame: DataFrame, view: str) -> Any:
    """The filter the query's analysed plan puts on the scan of table input ``view``
    (``table.reader.scan_filters``: the whole condition, for the ResultSpec interpreter, with
    the query's settings and the commit the frame reads), or None. The Arrow-only run plans its
    tasks with it as the Spark SQL path's data source would: a part is fetched only where the
    whole filter might hold, ``NOT``, floats and casts included, not only where the pushed
    *column op literal* conjuncts (``table_filter``) might."""
    from lading_jobs.table import reader

    return reader.scan_filters(frame).get(view.lower())


_TABLE_OPS = {"EqualTo": "eq", "EqualNullSafe": "eq", "LessThan": "lt", "LessThanOrEqual": "le",
              "GreaterThan": "gt", "GreaterThanOrEqual": "ge"}


def table_filter(condition: sqlshape.Expr, schema: Any) -> Any:
    """The part of ``condition`` a table read may skip parts and row groups by (``table.filters.expr``,
    bound to ``schema``): comparisons of non-float columns with non-NULL constants, IN, IS
    [NOT] NULL, under AND and OR; anything else counts as TRUE, so it skips nothing."""
    from lading_jobs.table.filters import expr as ex

    def conv(e: sqlshape.Expr) -> Any:
        if not isinstance(e, sqlshape.Op):
            return ex.AlwaysTrue()
        if e.name in ("And", "Or"):
            left, right = conv(e.args[0]), conv(e.args[1])
            if e.name == "And":
                return ex.and_all([x for x in (left, right) if x != ex.TRUE])
            if ex.TRUE in (left, right):
                return ex.AlwaysTrue()
            return ex.Or(left, right)
        col = e.args[0] if e.args else None
        if not isinstance(col, sqlshape.Col) or col.type in ("float", "double"):
            return ex.AlwaysTrue()
        if e.name in ("IsNull", "IsNotNull"):
            pred = ex.Pred("isnull" if e.name == "IsNull" else "notnull", col.name)
        elif e.name == "In":
            values = tuple(a.value for a in e.args[1:] if isinstance(a, sqlshape.Lit) and a.value is not None)
            pred = ex.Pred("in", col.name, values)
        elif e.name in _TABLE_OPS and isinstance(e.args[1], sqlshape.Lit) and e.args[1].value is not None:
            pred = ex.Pred(_TABLE_OPS[e.name], col.name, e.args[1].value)
        else:
            return ex.AlwaysTrue()
        try:
            return ex.bind(pred, schema)
        except ex.NotPushable:
            return ex.AlwaysTrue()

    return conv(condition)


# -- running -----------------------------------------------------------------------------------
def _read(job: Job, unit: Any) -> Iterator[pa.RecordBatch]:
    """The unit's rows in lading's Arrow types of the input's columns."""
    if isinstance(job.input, FilesInput):
        from lading_jobs.sources import files as sources_files

        schema = T.StructType.fromJson(json.loads(job.input.schema_json))
        yield from sources_files.read_split(unit, job.input.fileset, schema)
        return
    from lading_jobs.storage import open_storage
    from lading_jobs.table import reader

    snapshot = job.input.snapshot
    rows = reader.read_parts(open_storage(snapshot.uri), snapshot, unit.parts, job.input.skip, bucket=unit.bucket,
                             buckets=unit.buckets)  # rows are filtered by ``predicate``, exactly
    yield from rows.to_batches()


def _project(job: Job, batch: pa.RecordBatch, check: sortedness.Check | None = None) -> pa.RecordBatch:
    batch = predicate.apply(job.condition, batch)
    if check is not None:
        check(batch)
    return pa.RecordBatch.from_arrays([batch.column(i) for i in job.columns], names=list(job.names))


def _sort_keys(table: pa.Table, positions: tuple[int, ...]) -> tuple[pa.Table, list[tuple[str, str, str]]]:
    """Key columns (and sort keys) ordering rows as Spark's ascending sort does: NULL first,
    then numbers with -0.0 = 0.0, then NaN."""
    keys: dict[str, pa.Array] = {}
    order = []
    for n, i in enumerate(positions):
        col = table.column(i)
        if pa.types.is_floating(col.type):
            nan = pc.fill_null(pc.is_nan(col), False)
            keys[f"v{n}"] = pc.is_valid(col)
            keys[f"n{n}"] = nan
            keys[f"x{n}"] = pc.if_else(nan, pa.scalar(None, col.type), col)
            order += [(f"v{n}", "ascending", "at_start"), (f"n{n}", "ascending", "at_start"),
                      (f"x{n}", "ascending", "at_start")]
        else:
            keys[f"x{n}"] = col
            order.append((f"x{n}", "ascending", "at_start"))
    return pa.table(keys), order


def sort_split(batches: Iterator[pa.RecordBatch], positions: tuple[int, ...]) -> Iterator[pa.RecordBatch]:
    """Every row of the split, stably sorted by the columns at ``positions`` (Spark's order)."""
    items = list(batches)
    if not items:
        return
    table = pa.Table.from_batches(items)
    keys, order = _sort_keys(table, positions)
    indices = pc.sort_indices(keys, sort_keys=order)
    yield from table.take(indices).combine_chunks().to_batches()


def rebatch(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches`` in batches of exactly ``rows`` (the last may be shorter), as
    Spark's Arrow transfer groups a task's rows; whole slices pass without a copy."""
    held: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        while batch.num_rows:
            if not held and batch.num_rows >= rows:
                yield batch.slice(0, rows)
                batch = batch.slice(rows)
                continue
            take = min(rows - count, batch.num_rows)
            held.append(batch.slice(0, take))
            count += take
            batch = batch.slice(take)
            if count == rows:
                yield pa.concat_batches(held)
                held, count = [], 0
    if held:
        yield pa.concat_batches(held) if len(held) > 1 else held[0]


def task_rows(job: Job, unit: Any, check: sortedness.Check | None = None) -> Iterator[pa.RecordBatch]:
    """What one task feeds the writer: read, filter, (check the order), project, (sort), regroup."""
    batches: Iterator[pa.RecordBatch] = (_project(job, b, check) for b in _read(job, unit))
    if job.sort_by:
        batches = sort_split(batches, job.sort_by)
    return (b for b in rebatch(batches, job.batch_rows) if b.num_rows)


def _copy_split(job: Job, plan: TaskPlan, unit: Any, index: int) -> Iterator[pa.RecordBatch]:
    """A task of a Parquet-to-Parquet copy: ``chunkcopy`` over the split's pieces."""
    from lading_jobs.formats import types
    from lading_jobs.sources import files as sources_files
    from lading_jobs.unload import chunkcopy

    assert isinstance(job.input, FilesInput)
    schema = T.StructType.fromJson(json.loads(job.input.schema_json))
    pieces = [(p.uri, p.size, p.etag or None, p.row_groups) for p in unit.pieces]
    return chunkcopy.write_split(plan, pieces, types.arrow_schema(schema),
                                 lambda uri, pf: sources_files.check_parquet_schema(
                                     uri, sources_files.parquet_schema(pf), schema), index)


def run(spark: SparkSession, job: Job, plan: TaskPlan, counters: tuple[Any, Any, Any] | None) -> list[dict[str, Any]]:
    """Run every task; return the finished files (pending uploads) in task-then-sequence order.

    With ``job.order``: raises ``sortedness.NotSorted`` (carrying the files written) when a
    task found its rows out of order (it aborted its own uploads) or the tasks' bounds are."""
    positions, descending = [p for p, _ in job.order], [d for _, d in job.order]

    def body(index: int, units: Iterable[Any]) -> Iterator[str]:
        for unit in units:
            check = sortedness.Check(positions, descending) if job.order else None
            try:
                for out in (_copy_split(job, plan, unit, index) if job.copy_chunks
                            else write_partition(plan, task_rows(job, unit, check), index)):
                    files = out.column(0).to_pylist()
                    if counters is not None:
                        parsed = [json.loads(s) for s in files]
                        counters[0].add(sum(f["rows"] for f in parsed))
                        counters[1].add(sum(f["bytes"] for f in parsed))
                        counters[2].add(len(parsed))
                    yield from files
            except sortedness.NotSorted as e:
                yield json.dumps({"task": index, "unsorted": e.reason})
                continue
            report = check.report() if check is not None else None
            if report is not None:
                yield json.dumps({"task": index, "keys": report})

    sc = spark.sparkContext
    units = list(job.units)
    rows = [json.loads(r) for r in sc.parallelize(units, len(units)).mapPartitionsWithIndex(body).collect()]
    files = sorted((r for r in rows if "upload" in r), key=lambda f: (f["task"], f["seq"]))
    if job.order:
        marks = sorted((r for r in rows if "upload" not in r), key=lambda r: r["task"])
        unsorted = [m["unsorted"] for m in marks if "unsorted" in m]
        reason = unsorted[0] if unsorted else sortedness.across_tasks([m["keys"] for m in marks], descending)
        if reason is not None:
            raise sortedness.NotSorted(reason, files)
    return files
