"""A load with a transform (``spec.transform``): decode → Spark SQL → write, one Spark stage.

The one transform code path: a CopyJob load's files and each StreamCopy micro-batch
(files, Kafka ranges) run through ``run_stage``; only the decode step (what the
view ``source`` holds) and the finish step (where good rows and rejects go) are
the caller's.

  range(tasks).mapInArrow(decode)  one partition per file task: its records as Arrow
        │                          (CSV fields as strings, named ``$1``… or transform.fields),
        │                          plus its decode rejects and one summary row
        ▼
  select (Spark SQL, JVM)          per target column TryEval(struct(item)) (nested, interval,
        │                          variant values: TryEval(struct(CAST(item AS type)))), the
        │                          WHERE the same way: a failing expression (a bad cast under
        │                          ANSI, an overflow) gives a NULL struct, not a failed task
        ▼
  mapInArrow(write)                per partition, Arrow only: WHERE false → filtered, a NULL
                                   struct → rejected row (file, line), each value converted to
                                   its column as a plain load converts it (``cast.cast_column``:
                                   exact, never rounded), the rest → pending parts

Every projection is narrow, so partition i of the last step holds exactly task i's
rows and the task finishes its file like ``task.run_file`` (same outcome, same
rejected-rows files, same error policy, ledger and one commit in ``job``).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from lading_jobs import sandbox, workerheap
from lading_jobs.formats import types as ftypes
from lading_jobs.formats.compressed import decompress
from lading_jobs.ingest import decode as dec
from lading_jobs.ingest.cast import bisected, cast_column
from lading_jobs.ingest.decode import Reject
from lading_jobs.ingest.infer import _read_sample
from lading_jobs.ingest.policy import FileOutcome, merge_outcomes
from lading_jobs.ingest.stores import storage_for
from lading_jobs.ingest.task import FileTask, LoadPlan, finish_file, read_task
from lading_jobs.storage import ObjectChanged, ObjectInfo, S3Settings, StorageError
from lading_jobs.table.schema import (
    TableSchema,
    arrow_type,
    default_scalar,
    spark_type,
    type_from_arrow,
)
from lading_spec.errors import SpecError
from lading_spec.formats import CsvOptions, FormatOptions
from lading_spec.transform import Transform, resolve_fields

POS, KIND, INFO, REC, WHERE = "_lading_pos", "_lading_kind", "_lading_info", "_lading_rec", "_lading_where"
DATA, REJECT, SUMMARY = 0, 1, 2


@dataclass(frozen=True)
class TransformPlan:
    """What the tasks need besides the ``LoadPlan``: the source's columns and the targets."""

    source: pa.Schema  # the view ``source``: the files' fields, as the decode step emits them
    targets: tuple[str, ...]  # the table column each item fills, in item order
    items: tuple[str, ...]  # the items' Spark SQL, ``$k`` resolved
    where: str | None
    binary_text: str | None = None  # how the source spells binary values as text (``decode.binary_text``)


def _item_column(i: int) -> str:
    return f"_lading_c{i}"


def _strings_for_nulls(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(pa.string()) if pa.types.is_null(f.type) else f for f in schema])


def source_schema(transform: Transform, fmt_name: str, options: FormatOptions, first: ObjectInfo,
                  settings: S3Settings) -> pa.Schema:
    """The columns of ``source``, from the first file: CSV fields are strings named by the
    header, by ``transform.fields`` or ``$1``, ``$2``…; Parquet keeps its types, JSON its
    numbers and booleans (``bigint``/``double``, as Spark's JSON reader infers them) and
    strings as strings (no timestamps guessed from their text)."""
    data = storage_for(first.uri, settings).read(first.uri)
    header = isinstance(options, CsvOptions) and options.header
    try:
        if fmt_name == "csv":
            opts = options if isinstance(options, CsvOptions) else CsvOptions()
            text = decompress(data, opts.compression, first.uri)
            if opts.header:
                names = dec._header(text, opts)
            elif transform.fields:
                names = list(transform.fields)
            else:
                count = len(_read_sample(data, "csv", opts, first.uri)) if text.strip() else 0
                names = [f"${k}" for k in range(1, (count or transform.field_refs()) + 1)]
            schema = pa.schema([pa.field(n, pa.string()) for n in names])
        elif fmt_name == "json":
            # as the tasks decode it: strings stay strings, as Spark's JSON reader keeps them
            decoded = dec.decode(data, fmt_name, options, [], first.uri)
            if decoded.error:
                raise SpecError("transform", f"cannot read the fields of {first.uri}: {decoded.error}")
            fields: dict[str, pa.Field] = {}  # every key of the file, typed where first seen with a value
            for piece in decoded.iter_pieces():
                for f in piece.table.schema:
                    if f.name not in fields or pa.types.is_null(fields[f.name].type):
                        fields[f.name] = f
            if not fields:
                raise SpecError("transform", f"{first.uri} holds no JSON object to take the source's fields from")
            schema = _strings_for_nulls(pa.schema(list(fields.values())))
        else:
            schema = _strings_for_nulls(_read_sample(data, fmt_name, options, first.uri))
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError, dec.MultilineHeader) as e:
        raise SpecError("transform", f"cannot read the fields of {first.uri}: {e}") from e
    if transform.fields and len(transform.fields) != len(schema):
        if fmt_name == "csv" and not header:
            return schema
        raise SpecError("transform.fields", f"names {len(transform.fields)} field(s) but {first.uri} has "
                        f"{len(schema)}; name them all, in order")
    if transform.fields:
        schema = pa.schema([f.with_name(n) for f, n in zip(schema, transform.fields, strict=True)])
    return schema


def plan_transform(transform: Transform, schema: TableSchema, source: pa.Schema,
                   binary_text: str | None = None) -> TransformPlan:
    """Map the items to table columns and resolve ``$k``; errors name the spec field.
    ``binary_text``: how the files spell a binary value as text (as a plain load of them reads it)."""
    by_name = {c.name.lower(): c for c in schema.columns}
    if transform.columns:
        targets = []
        for i, name in enumerate(transform.columns):
            column = by_name.get(name.lower())
            if column is None:
                raise SpecError(f"transform.columns[{i}]", f"{name!r} is not a column of the table "
                                f"({', '.join(schema.names)})")
            targets.append(column.name)
    else:
        if len(transform.items) != len(schema.columns):
            raise SpecError("transform.select", f"gives {len(transform.items)} item(s) for the table's "
                            f"{len(schema.columns)} column(s) ({', '.join(schema.names)}); give one item per "
                            "column or list the columns it fills in transform.columns")
        targets = schema.names
    for c in schema.columns:
        if c.name not in targets and not c.nullable and c.default is None:
            raise SpecError("transform.columns", f"the table's column {c.name!r} is NOT NULL without a default: "
                            "the transform must fill it")
    names = source.names
    return TransformPlan(source=source, targets=tuple(targets),
                         items=tuple(resolve_fields(t, names) for t in transform.items),
                         where=resolve_fields(transform.where, names) if transform.where else None,
                         binary_text=binary_text)


def _try_struct(spark: SparkSession, sql: str) -> Column:
    """``TryEval(struct(sql))``: NULL where evaluating ``sql`` throws, else a struct holding its value
    (which may itself be NULL). Spark SQL has no generic TRY, so the Catalyst node is built directly."""
    jvm = spark._jvm
    assert jvm is not None
    parsed = spark._jsparkSession.sessionState().sqlParser().parseExpression(f"struct({sql})")
    sandbox.check_expression(parsed, "transform.select")  # a tenant's SQL: allowed functions only, no subquery
    node = jvm.org.apache.spark.sql.classic.ExpressionColumnNode.apply(
        jvm.org.apache.spark.sql.catalyst.expressions.TryEval(parsed))
    return Column(jvm.org.apache.spark.sql.Column(node))


def _spark_error(e: Exception) -> str:
    text = str(getattr(e, "desc", None) or e)
    return text.strip().splitlines()[0] if text.strip() else type(e).__name__


_LOADED = (T.StringType, T.CharType, T.VarcharType, T.BinaryType, T.BooleanType, T.ByteType, T.ShortType,
           T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType, T.DateType, T.TimestampType,
           T.TimestampNTZType)
"""The value types a plain load converts (``cast.cast_column``), as Spark types."""


def converts_as_loaded(item: T.DataType, column: str) -> bool:
    """Whether an item of Spark type ``item`` reaches the table column of type ``column`` through
    the plain load's conversion (``cast.cast_column``, in the write step) rather than Spark's
    ``CAST``: for every flat value, so that an item that only selects a field loads exactly what
    a load without the transform loads (``'2.675'`` into ``decimal(12,2)`` is a rejected row, not
    ``2.68``: Spark's ``CAST`` rounds). Nested, interval and variant values keep Spark's ``CAST``."""
    return isinstance(item, (*_LOADED, T.NullType)) and isinstance(ftypes.parse_type(spark_type(column)), _LOADED)


def transformed(spark: SparkSession, raw: DataFrame, tplan: TransformPlan, schema: TableSchema) -> DataFrame:
    """The decoded rows with, per item, its value (a struct, NULL on error) in its own type when the
    write step converts it as a plain load does (``converts_as_loaded``), else cast to its column's
    type by Spark; the WHERE likewise, and for failing rows only the record as JSON (for the rejects)."""
    types = {c.name: c.type for c in schema.columns}
    computed = [_item_column(i) for i in range(len(tplan.items))] + ([WHERE] if tplan.where else [])
    source = ", ".join(_quote(n) for n in tplan.source.names)
    failed = " OR ".join(f"{c} IS NULL" for c in computed)
    try:
        # Tenant SQL: parsed and analysed only in a tenant session (allowed functions only), checked
        # again once analysed; the result goes back to ``spark`` resolved (lading_jobs.sandbox).
        tenant = sandbox.tenant_session(spark)
        raw = sandbox.in_session(tenant, raw)
        with sandbox.refusals("transform.select"):
            cols = [_try_struct(tenant, f"({item})").alias(_item_column(i))  # the sandbox's check first
                    for i, item in enumerate(tplan.items)]
            item_types = raw.selectExpr(*[f"({item}) AS {_item_column(i)}"
                                          for i, item in enumerate(tplan.items)]).schema if tplan.items else None
            for i, (item, target) in enumerate(zip(tplan.items, tplan.targets, strict=True)):
                assert item_types is not None
                if not converts_as_loaded(item_types[_item_column(i)].dataType, types[target]):
                    cols[i] = _try_struct(tenant, f"CAST(({item}) AS {spark_type(types[target])})").alias(
                        _item_column(i))
            if tplan.where is not None:
                where = _try_struct(tenant, f"({tplan.where})")  # the sandbox's check first
                where_type = raw.selectExpr(f"({tplan.where}) AS w").schema["w"].dataType
                if isinstance(where_type, T.NullType):  # WHERE NULL: a boolean NULL, as Spark takes it
                    where = _try_struct(tenant, f"CAST(({tplan.where}) AS boolean)")
                elif not isinstance(where_type, T.BooleanType):  # Spark's FILTER_NOT_BOOLEAN, not a cast
                    raise SpecError("transform.select", f"the WHERE condition ({tplan.where}) is "
                                    f"{where_type.simpleString()}, not boolean (Spark: FILTER_NOT_BOOLEAN); "
                                    "write a comparison, e.g. WHERE $2 = 'yes'")
                cols.append(where.alias(WHERE))
            step = raw.select(raw[POS], raw[KIND], raw[INFO], *cols, *[raw[_quote(n)] for n in tplan.source.names])
            out = step.selectExpr(POS, KIND, INFO, *computed, f"CASE WHEN {KIND} = {DATA} AND ({failed}) "
                                  f"THEN to_json(struct({source})) END AS {REC}")
        sandbox.check_resolved(tenant, out._jdf.queryExecution().analyzed(), "transform.select")
        return sandbox.in_session(spark, out)
    except SpecError:
        raise
    except Exception as e:  # a parse or analysis error in the user's SQL
        raise SpecError("transform.select", f"Spark cannot evaluate it: {_spark_error(e)}") from e


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


# -- step 1: decode (executor) -------------------------------------------------------

def meta_batch(n: int, kind: int, info: Sequence[str | None], pos: Sequence[int], source: pa.Schema) -> pa.RecordBatch:
    """``n`` rows of ``kind`` (REJECT: ``info`` is {reason, column, record, count} as JSON; SUMMARY:
    {unit, rowsRead, fileError…}) at positions ``pos``, the source's columns NULL."""
    arrays = [pa.nulls(n, f.type) for f in source]
    return pa.RecordBatch.from_arrays(
        [*arrays, pa.array(pos, pa.int64()), pa.array([kind] * n, pa.int8()), pa.array(info, pa.string())],
        schema=decode_schema(source))


def decode_schema(source: pa.Schema) -> pa.Schema:
    return pa.schema([*source, pa.field(POS, pa.int64()), pa.field(KIND, pa.int8()), pa.field(INFO, pa.string())])


def _fit(piece: dec.Piece, source: pa.Schema, decoded: dec.Decoded) -> tuple[pa.Table, np.ndarray, list[Reject]]:
    """A decoded piece in the source's columns (matched by name; missing ones NULL), its
    positions, and its rejects: the view's types are the first file's, and a value that
    does not convert to its column's type exactly (``2.5`` where the first file gave the
    column integers) rejects its record, naming the column, instead of failing the file."""
    table, positions = piece.table, piece.positions
    arrays: list[pa.Array | pa.ChunkedArray] = []
    bad = np.zeros(table.num_rows, dtype=bool)
    rejects: list[Reject] = []
    for f in source:
        if f.name not in table.column_names:
            arrays.append(pa.nulls(table.num_rows, f.type))
            continue
        arr = table.column(f.name)
        if arr.type != f.type:
            type_name = type_from_arrow(f)
            arr, failures = bisected(arr.combine_chunks(), functools.partial(pc.cast, target_type=f.type), f.type,
                                     type_name)
            for i, reason in failures:
                if not bad[i]:
                    rejects.append(Reject(int(positions[i]), f"{reason} (the view source's column {f.name!r} is "
                                          f"{type_name}, as the first file gave it)", f.name,
                                          decoded.record(table, i, int(positions[i]))))
                bad[i] = True
        arrays.append(arr)
    out = pa.Table.from_arrays(arrays, schema=source)
    if rejects:
        out, positions = out.filter(pa.array(~bad)), positions[~bad]
    return out, positions, rejects


def data_batches(table: pa.Table, positions: np.ndarray, source: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Records (``table``, in the source's columns) as DATA rows at ``positions`` (line, row, offset)."""
    offset = 0
    for batch in table.to_batches():
        m = batch.num_rows
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, pa.array(positions[offset:offset + m], pa.int64()),
             pa.array(np.zeros(m, dtype=np.int8)), pa.nulls(m, pa.string())],
            schema=decode_schema(source))
        offset += m


def decode_task(plan: LoadPlan, source: pa.Schema, task: FileTask) -> Iterator[pa.RecordBatch]:
    """One task's records for the view ``source``; its decode rejects; last, one summary row."""
    summary: dict[str, Any] = {"unit": "line"}
    try:
        decoded = dec.decode(read_task(plan, task), plan.format, plan.options, source.names, task.uri,
                             row_groups=task.row_groups, first_row=task.first_row)
    except ObjectChanged as e:
        summary["fileError"] = str(e)
    except (StorageError, OSError) as e:
        summary["fileError"] = f"cannot be read: {e}"
    else:
        summary["unit"] = decoded.unit
        if decoded.error:
            summary["fileError"] = decoded.error
    if "fileError" in summary:
        yield meta_batch(1, SUMMARY, [json.dumps(summary)], [0], source)
        return
    misfits: list[Reject] = []
    try:
        for piece in decoded.iter_pieces():
            table, positions, more = _fit(piece, source, decoded)
            misfits += more
            yield from data_batches(table, positions, source)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        summary["fileError"] = f"its fields do not fit the source's columns ({e})"
    rejects = sorted([*decoded.rejects, *misfits], key=lambda r: r.position)
    if rejects:
        info = [json.dumps({"reason": r.reason, "column": r.column, "record": r.record, "count": r.count})
                for r in rejects]
        yield meta_batch(len(rejects), REJECT, info, [r.position for r in rejects], source)
    summary["rowsRead"] = decoded.rows_read
    yield meta_batch(1, SUMMARY, [json.dumps(summary)], [0], source)


# -- step 3: write (executor) --------------------------------------------------------

class Rows:
    """Splits a task's transformed batches into good rows (table schema) and the rest: ``rejects``
    (by position: a file's line or row, a Kafka offset), ``rows_filtered``, the decode ``summary``."""

    def __init__(self, tplan: TransformPlan, schema: TableSchema) -> None:
        self.tplan, self.schema = tplan, schema
        self.target = pa.schema([pa.field(c.name, arrow_type(c.type)) for c in schema.columns])
        self.rejects: list[Reject] = []
        self.summary: dict[str, Any] = {}
        self.rows_good = self.rows_filtered = 0

    def tables(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
        for batch in batches:
            kind = batch.column(KIND).to_numpy(zero_copy_only=False)
            if (kind != DATA).any():
                self._notes(batch, kind)
            if (kind == DATA).any():
                table = self._data(batch.filter(pa.array(kind == DATA)))
                if table.num_rows:
                    self.rows_good += table.num_rows
                    yield table
        self.rejects.sort(key=lambda r: r.position)

    def _notes(self, batch: pa.RecordBatch, kind: np.ndarray) -> None:
        pos = batch.column(POS).to_pylist()
        info = batch.column(INFO).to_pylist()
        for i in np.flatnonzero(kind != DATA).tolist():
            note = json.loads(info[i])
            if kind[i] == SUMMARY:
                self.summary = note
            else:
                self.rejects.append(Reject(pos[i], note["reason"], note.get("column"), note.get("record"),
                                           note.get("count", 1)))

    def _data(self, batch: pa.RecordBatch) -> pa.Table:
        n = batch.num_rows
        bad = np.zeros(n, dtype=bool)
        reason: dict[int, tuple[str | None, str]] = {}
        keep = np.ones(n, dtype=bool)
        if self.tplan.where is not None:
            where = batch.column(WHERE)
            failed = pc.is_null(where).to_numpy(zero_copy_only=False)
            for i in np.flatnonzero(failed).tolist():
                reason[i] = (None, f"the WHERE condition failed ({self.tplan.where}): an invalid cast, overflow "
                                   "or other error under ANSI SQL")
            value = pc.fill_null(pc.struct_field(where, [0]), False).to_numpy(zero_copy_only=False)
            filtered = ~failed & ~value.astype(bool)
            self.rows_filtered += int(filtered.sum())
            keep &= ~filtered
            bad |= failed
        values: dict[str, pa.Array] = {}
        for i, target in enumerate(self.tplan.targets):
            col = batch.column(_item_column(i))
            failed = pc.is_null(col).to_numpy(zero_copy_only=False) & keep & ~bad
            for r in np.flatnonzero(failed).tolist():
                reason.setdefault(r, (target, f"the expression for column {target!r} ({self.tplan.items[i]}) "
                                              "failed: an invalid cast, overflow or other error under ANSI SQL"))
            bad |= failed
            values[target] = pc.struct_field(col, [0])
        arrays = []
        for c in self.schema.columns:
            typ = arrow_type(c.type)
            if c.name in values:
                # the plain load's conversion and column rules (``cast.cast_column``: exact numbers,
                # varchar/char lengths, the uuid form, one JSON text per json value), on the item's
                # value or (nested types) the value Spark's CAST gave
                arr, failures = cast_column(values[c.name], typ, c.type, self.tplan.binary_text)
                for r, why in failures:
                    if keep[r] and not bad[r]:
                        reason.setdefault(r, (c.name, f"the expression for column {c.name!r} gave {why}"))
                        bad[r] = True
                if not c.nullable and arr.null_count:
                    nulls = pc.is_null(arr).to_numpy(zero_copy_only=False) & keep & ~bad
                    for r in np.flatnonzero(nulls).tolist():
                        reason.setdefault(r, (c.name, f"NULL in column {c.name!r}, which is NOT NULL"))
                    bad |= nulls
            else:
                value = default_scalar(c.default, c.type) if c.default is not None else pa.scalar(None, typ)
                arr = pa.repeat(value, n) if value.is_valid else pa.nulls(n, typ)
            arrays.append(arr)
        if bad.any():
            pos = batch.column(POS).to_pylist()
            records = batch.column(REC).to_pylist()
            for r in np.flatnonzero(bad).tolist():
                column, why = reason[r]
                self.rejects.append(Reject(int(pos[r]), why, column=column, record=records[r]))
        table = pa.Table.from_arrays(arrays, schema=self.target)
        mask = keep & ~bad
        return table if mask.all() else table.filter(pa.array(mask))


def write_task(plan: LoadPlan, tplan: TransformPlan, task: FileTask,
               batches: Iterator[pa.RecordBatch]) -> FileOutcome:
    """Finish one task: its good rows as pending parts, its rejects as a pending file."""
    out = FileOutcome(task.file, task.uri, task.etag, task.size)
    rows = Rows(tplan, plan.schema)

    def result() -> tuple[list[Reject], int, int]:
        out.unit = rows.summary.get("unit", "line")
        out.rows_filtered = rows.rows_filtered
        if rows.summary.get("fileError"):  # before the policy looks at out.clean
            out.file_error = rows.summary["fileError"]
        return rows.rejects, rows.summary.get("rowsRead", 0), rows.rows_good

    return finish_file(plan, task, out, rows.tables(batches), result)


# -- the driver ----------------------------------------------------------------------

def run_stage(spark: SparkSession, tplan: TransformPlan, schema: TableSchema, count: int,
              decode: Callable[[int], Iterator[pa.RecordBatch]],
              finish: Callable[[int, Iterator[pa.RecordBatch]], str], description: str) -> list[str]:
    """``count`` tasks in one Spark stage: task i's ``decode(i)`` (batches of ``decode_schema``),
    the transform, then ``finish(i, batches)`` (its outcome as one string); the outcomes, in
    task order. Every projection is narrow, so partition i of the last step is task i's."""
    source = tplan.source

    def decode_all(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        workerheap.settle()
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield from decode(i)

    raw = (spark.range(0, count, 1, numPartitions=count)
           .mapInArrow(decode_all, from_arrow_schema(decode_schema(source))))
    out = transformed(spark, raw, tplan, schema)

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        yield pa.RecordBatch.from_pydict({"outcome": [finish(context.partitionId(), batches)]})

    spark.sparkContext.setJobDescription(description)
    with _no_subexpression_elimination(spark):
        return [r.outcome for r in out.mapInArrow(write, "outcome string").collect()]


SUBEXPRESSIONS = "spark.sql.subexpressionElimination.enabled"


@contextlib.contextmanager
def _no_subexpression_elimination(spark: SparkSession) -> Iterator[None]:
    """Spark's subexpression elimination would evaluate an expression two items (or an item
    and the WHERE) share once, *before* any ``TryEval``: a record failing it (``$1::int`` over
    ``abc``) would fail the task instead of being rejected. Off while the stage is planned
    and runs (the setting is read then), as it was."""
    old = spark.conf.get(SUBEXPRESSIONS, None)
    spark.conf.set(SUBEXPRESSIONS, "false")
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(SUBEXPRESSIONS)
        else:
            spark.conf.set(SUBEXPRESSIONS, old)


def run_tasks(spark: SparkSession, plan: LoadPlan, tplan: TransformPlan, tasks: list[FileTask]) -> list[FileOutcome]:
    """Decode, transform and write every task in one Spark stage; the files' outcomes."""
    source = tplan.source

    def decode(i: int) -> Iterator[pa.RecordBatch]:
        return decode_task(plan, source, tasks[i])

    def finish(i: int, batches: Iterator[pa.RecordBatch]) -> str:
        return json.dumps(write_task(plan, tplan, tasks[i], batches).to_dict())

    by_file: dict[int, list[FileOutcome]] = {}
    for text in run_stage(spark, tplan, plan.schema, len(tasks), decode, finish,
                          f"lading load with a transform into {plan.table_uri} ({len(tasks)} files)"):
        o = FileOutcome.from_dict(json.loads(text))
        by_file.setdefault(o.index, []).append(o)
    return [merge_outcomes(chunks) for _, chunks in sorted(by_file.items())]
