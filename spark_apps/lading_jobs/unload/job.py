"""``run_unload``: one CopyJob run from a query or a table to files, start to commit.

  resolve destination ─► recover an earlier attempt of this run (roll forward: done; or back)
      ─► ifExists check (one list call) ─► source schema (files, tables: read directly) or
         DataFrame (a query; and whatever takes the Spark path)
      ─► path (unload.arrowpath.choose): Arrow-only tasks, or the Spark plan's mapInArrow tasks;
         either way tasks write pending uploads (an ORDER BY the Arrow tasks find unsorted:
         their uploads aborted, the Spark plan's tasks run instead)
      ─► publish (unload.commit): intent, complete every upload, manifest (the commit point),
         replace: drop old objects
      ─► sweep pending uploads of this run that no manifest names
  any failure or cancellation before publishing ─► wait for the run's tasks to end,
      abort every upload of the run, sweep, re-raise
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lading_jobs.engine import Cancelled, Progress
from lading_jobs.formats import spark as spark_formats
from lading_jobs.session import wait_for_tasks
from lading_jobs.storage import S3Settings, Storage, StorageError, join, open_storage
from lading_jobs.unload import arrowpath, commit, formatting, naming, sortedness
from lading_jobs.unload.manifest import build_manifest
from lading_jobs.unload.task import OUTPUT_SCHEMA, SEQ_COLUMN, TaskPlan, write_partition
from lading_spec.copyjob import CopyJobSpec
from lading_spec.errors import SpecError
from lading_spec.job import JobDocument
from lading_spec.templates import resolve_destination


def source_frame(spark: SparkSession, spec: CopyJobSpec) -> DataFrame:
    """The DataFrame to unload: the query over its inputs, the table as of a time, or the files."""
    sort = bool(spec.target.partition_by)  # tasks sort their rows: smaller splits
    if spec.source.query is not None:
        from lading_jobs.sources import files as sources_files

        return sources_files.query_frame(spark, spec.source.query, spec.source.inputs, sort=sort)
    if spec.source.table is not None:
        from lading_jobs.table import reader

        return reader.read_table(spark, spec.source.table, spec.source.as_of)  # type: ignore[no-any-return]
    if spec.source.files is not None:
        from lading_jobs.sources import files as sources_files

        return sources_files.read_fileset(spark, spec.source.files, sort=sort)
    raise SpecError("from", "an unload reads from.query, from.table or from.files")


def open_source(spec: CopyJobSpec) -> arrowpath.Opened | None:
    """``from.files`` listed with its schema inferred, or ``from.table``'s snapshot, read the
    way :func:`source_frame`'s data sources read them; ``None`` for a query, whose schema
    only Spark's analyser knows. The Arrow-only path plans over what this found, and its
    ``schema()`` is the schema :func:`source_frame`'s DataFrame has, without making one.

    Making the DataFrame starts Spark SQL: Python data source lookup and planning
    processes, and the analyser's first run in the JVM, about 4 CPU-s and 3 s of wall
    clock in a fresh JVM (which every SparkApplication is). The Arrow-only path needs
    the schema only."""
    if spec.source.files is not None:
        from lading_jobs.sources import files as sources_files

        fs = spec.source.files
        listed = sources_files.list_files(fs)
        return arrowpath.Opened(listed=tuple(listed), files_schema=sources_files.infer_schema(fs, listed))
    if spec.source.table is not None:
        from lading_jobs.table import format as table_format
        from lading_jobs.table.log.commits import TableLog

        log = TableLog.open_existing(table_format.table_root(spec.source.table))
        return arrowpath.Opened(snapshot=log.snapshot(spec.source.as_of))
    return None


def _source_summary(spec: CopyJobSpec) -> dict[str, Any]:
    s = spec.source
    if s.query is not None:
        return {"query": s.query, "inputs": [
            {"name": i.name, **({"files": i.files.uri, "fileList": list(i.files.file_list), "format": i.files.format}
                                if i.files is not None else
                                {"iceberg": i.iceberg.metadata or f"{i.iceberg.catalog}:{i.iceberg.table}", "snapshotId": i.iceberg.snapshot_id,
                                 "asOfMs": i.iceberg.as_of_ms} if i.iceberg is not None
                                else {"delta": i.delta.table, "version": i.delta.version,
                                      "timestampMs": i.delta.timestamp_ms} if i.delta is not None
                                else {"table": i.table, "asOf": i.as_of})}
            for i in s.inputs]}
    if s.files is not None:
        return {"files": s.files.uri, "fileList": list(s.files.file_list), "format": s.files.format}
    return {"table": s.table, "asOf": s.as_of}


def _output_summary(spec: CopyJobSpec) -> dict[str, Any]:
    t = spec.target
    options = asdict(t.options) if t.options is not None else {}
    return {"format": t.format, "options": options, "maxFileSize": t.max_file_size, "bufferSize": t.buffer_size,
            "partitionBy": list(t.partition_by), "keepPartitionColumns": t.keep_partition_columns,
            "ifExists": t.if_exists}


def _check_partitioning(columns: list[str], spec: CopyJobSpec) -> None:
    cols = spec.target.partition_by
    missing = [c for c in cols if c not in columns]
    if missing:
        raise SpecError("to.partitionBy", f"column {missing[0]!r} is not in the output; columns: {', '.join(columns)}")
    if cols and not spec.target.keep_partition_columns and len(cols) == len(columns):
        raise SpecError("to.partitionBy", "every column is a partition column; files would be empty "
                        "(set to.keepPartitionColumns: true or partition by fewer columns)")


def _prepare_partitioning(df: DataFrame, spec: CopyJobSpec) -> DataFrame:
    cols = spec.target.partition_by
    _check_partitioning(df.columns, spec)
    if not cols:
        return df
    # Sort each task's rows by partition values, keeping the query's order within each value.
    return df.withColumn(SEQ_COLUMN, F.monotonically_increasing_id()).sortWithinPartitions(
        *(F.col(spark_formats.quote(c)) for c in cols), SEQ_COLUMN)  # quoted: 'a.b' is one column


def run_unload(spark: SparkSession, doc: JobDocument, spec: CopyJobSpec, *,
               cancel: threading.Event | None = None, progress: Progress | None = None,
               storage: Storage | None = None, path: str | None = None) -> dict[str, Any]:
    """Run the unload; return the result fields (``rows``, ``files``, ``bytes``, ``manifest``, ``destination``).

    ``storage`` (tests: a fault-injecting wrapper) is the driver's; tasks open their own.
    ``path`` (``auto``, ``arrow``, ``spark``) overrides the ``spark.lading.unload.path`` setting.
    """
    start = dt.datetime.now(dt.UTC)
    target = spec.target
    assert target.files is not None
    destination = resolve_destination(target.files, run_time=doc.run_time, run_id=doc.run_id,
                                      name=doc.name, namespace=doc.namespace)
    if not destination.endswith("/"):
        destination += "/"
    settings = S3Settings.from_env(endpoint=spec.connection.endpoint, region=spec.connection.region)
    storage = storage or open_storage(destination, settings)
    mode = target.if_exists
    token = naming.run_token(doc.run_id) if mode != "error" else None
    done = commit.recover(storage, destination, mode, doc.run_id, token)
    if done is not None:  # an earlier attempt of this run committed: report it, write nothing
        commit.sweep(storage, destination, token, target.partition_by, keep=())
        return _result(done, destination, naming.manifest_name(token if mode == "append" else None))
    if mode == "error":
        commit.check_destination(storage, destination)

    requested = path or arrowpath.requested_path(spark)
    # files and tables: the schema alone decides, and the Arrow-only path never makes the DataFrame
    frame: DataFrame | None = None
    opened = open_source(spec) if requested != arrowpath.SPARK else None  # listed / read once, planned over
    schema = opened.schema() if opened is not None else None
    if schema is None:
        frame = source_frame(spark, spec)
        schema = frame.schema
    _check_partitioning(schema.names, spec)  # before the path: its error is the one to fix, whatever the path
    choice = arrowpath.choose(spark, spec, schema, frame, requested=requested, opened=opened)
    if choice.job is None:
        frame = frame if frame is not None else source_frame(spark, spec)
        df = _prepare_partitioning(frame, spec)
        schema = df.drop(SEQ_COLUMN).schema if SEQ_COLUMN in df.columns else df.schema
    spark_schema_json = schema.json()
    plan = TaskPlan(destination=destination, format=target.format, options=target.options,  # type: ignore[arg-type]
                    max_file_size=target.max_file_size, buffer_size=target.buffer_size,
                    partition_by=target.partition_by, keep_partition_columns=target.keep_partition_columns,
                    token=token, spark_schema_json=spark_schema_json, settings=settings)
    counters = (progress.rows, progress.bytes, progress.files) if progress is not None else None

    def body(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx is not None else 0
        for out in write_partition(plan, batches, task):
            if counters is not None:
                files = [json.loads(s) for s in out.column(0).to_pylist()]
                counters[0].add(sum(f["rows"] for f in files))
                counters[1].add(sum(f["bytes"] for f in files))
                counters[2].add(len(files))
            yield out

    sc = spark.sparkContext
    sc.setJobGroup(doc.run_id, f"lading unload {doc.namespace}/{doc.name}", interruptOnCancel=True)
    files: list[dict[str, Any]] = []
    try:
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        if choice.job is not None:
            try:
                files = arrowpath.run(spark, choice.job, plan, counters)
            except sortedness.NotSorted as e:
                choice = _unsorted(spark, storage, destination, token, target.partition_by, choice, e, counters,
                                   path)
                assert frame is not None  # only a query's ORDER BY can prove unsorted, and a query has its frame
                df = _prepare_partitioning(frame, spec)
        if choice.job is None:
            rows = spark_formats.map_in_arrow(spark_formats.to_transfer(df), body, OUTPUT_SCHEMA).collect()
            files = sorted((json.loads(r[0]) for r in rows), key=lambda f: (f["task"], f["seq"]))
        if cancel is not None and cancel.is_set():
            raise Cancelled()  # the last point where a cancel undoes the run; publishing runs to its end
        arrow_schema = _arrow_schema(spark_schema_json, spec)
        end = dt.datetime.now(dt.UTC)
        manifest = build_manifest(
            run_id=doc.run_id,
            job={"kind": doc.kind, "namespace": doc.namespace, "name": doc.name, "uid": doc.uid,
                 "generation": doc.generation},
            destination=destination, source=_source_summary(spec), output=_output_summary(spec),
            spark_schema=json.loads(spark_schema_json), arrow_schema=arrow_schema,
            type_mapping=formatting.type_mapping_version(), files=files, start=start, end=end,
            path=choice.marker())
    except BaseException as e:
        wait_for_tasks(sc, doc.run_id)  # killed tasks' workers may still be starting uploads
        commit.abort_run(storage, destination, files, token, target.partition_by)
        if cancel is not None and cancel.is_set():
            raise Cancelled() from e
        raise
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    commit.publish(storage, destination, files, manifest, mode=mode, run_id=doc.run_id, token=token)
    # uploads of lost or duplicate task attempts carry this run's naming but no manifest names them
    with contextlib.suppress(StorageError, OSError):
        commit.sweep(storage, destination, token, target.partition_by,
                     keep={f["upload"]["upload_id"] for f in files})
    return _result(manifest, destination, naming.manifest_name(token if mode == "append" else None))


def _unsorted(spark: SparkSession, storage: Storage, destination: str, token: str | None,
              partition_by: tuple[str, ...], choice: arrowpath.Choice,
              e: sortedness.NotSorted, counters: tuple[Any, Any, Any] | None, path: str | None) -> arrowpath.Choice:
    """The Arrow tasks found the input out of the ORDER BY's order: abort what they wrote
    (and take it off the progress counters); the Spark SQL path sorts instead."""
    commit.abort_run(storage, destination, e.files, token, partition_by)
    if counters is not None:
        counters[0].add(-sum(f["rows"] for f in e.files))
        counters[1].add(-sum(f["bytes"] for f in e.files))
        counters[2].add(-len(e.files))
    if (path or arrowpath.requested_path(spark)) == arrowpath.ARROW:
        raise SpecError(f"spark.sparkConf.{arrowpath.CONF}",
                        f"is arrow, but the input is not sorted as the ORDER BY asks ({e.reason}); remove the setting")
    return arrowpath.Choice(arrowpath.SPARK, f"{choice.reason}, until the rows proved unsorted: {e.reason}")


def _result(manifest: dict[str, Any], destination: str, manifest_name: str) -> dict[str, Any]:
    totals = manifest["totals"]
    return {"rows": totals["rows"], "files": totals["files"], "bytes": totals["bytes"],
            "manifest": join(destination, manifest_name), "destination": destination}


def _arrow_schema(spark_schema_json: str, spec: CopyJobSpec) -> pa.Schema | None:
    schema, _ = formatting.arrow_target(spark_schema_json)
    return schema


CancelHook = Callable[[], None]
