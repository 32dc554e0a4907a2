"""Where the unload gets its type mapping and encoders: ``lading_jobs.formats``.

The formats package maps Spark types to Arrow and Parquet (``types.arrow_schema``
with field ids and lading metadata, ``types.conform_batch``), and encodes CSV
(PostgreSQL ``COPY`` compatible) and JSON lines (lossless). This module is the
one place the unload touches it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from lading_jobs.formats import csv as csv_format
from lading_jobs.formats import jsonl as jsonl_format
from lading_jobs.formats import types as format_types
from lading_spec.formats import CsvOptions, FormatOptions, JsonOptions


def type_mapping_version() -> str:
    return format_types.TYPE_MAPPING_VERSION


def arrow_target(spark_schema_json: str) -> tuple[pa.Schema, Callable[[pa.RecordBatch], pa.RecordBatch]]:
    """The Arrow schema files are written with, and the function that conforms batches to it."""
    from pyspark.sql.types import StructType

    schema = format_types.arrow_schema(StructType.fromJson(json.loads(spark_schema_json)))

    def conform(batch: pa.RecordBatch) -> pa.RecordBatch:
        return format_types.conform_batch(batch, schema)

    return schema, conform


def encoder_factory(fmt: str, options: FormatOptions) -> Callable[[pa.Schema], Any]:
    """``factory(arrow_schema) -> encoder`` with ``.encode(batch) -> bytes`` (and CSV ``.header()``)."""
    if fmt == "csv":
        assert isinstance(options, CsvOptions)
        return lambda schema: csv_format.CsvEncoder(schema, options)
    if fmt == "json":
        assert isinstance(options, JsonOptions)
        return lambda schema: jsonl_format.JsonEncoder(schema, options)
    return lambda schema: None
