"""Where the unload gets its type mapping and encoders: ``lading_jobs.formats``.

The formats package (owned apart from the unload) maps Spark types to Arrow and
Parquet (``types.arrow_schema``, ``types.conform_batch``) and encodes CSV and
JSON lines (``csv.CsvEncoder``, ``jsonl.JsonEncoder``). This module is the one
place the unload touches it. Until it is importable, batches keep the Arrow
types Spark sends and text encoding uses pyarrow's CSV writer / ``to_pylist``
(a stop-gap that is not PostgreSQL-exact; it is never chosen once the formats
package is present).
"""

from __future__ import annotations

import importlib
import io
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from lading_spec.formats import FormatOptions

TYPE_MAPPING_FALLBACK = "spark-arrow-default"


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def type_mapping_version() -> str:
    types = _module("lading_jobs.formats.types")
    return str(getattr(types, "TYPE_MAPPING_VERSION", getattr(types, "FORMAT_VERSION", TYPE_MAPPING_FALLBACK))) \
        if types else TYPE_MAPPING_FALLBACK


def arrow_target(spark_schema_json: str, batch_schema: pa.Schema) -> tuple[pa.Schema, Callable[[pa.RecordBatch], pa.RecordBatch]]:
    """The Arrow schema files are written with, and the function that conforms batches to it."""
    types = _module("lading_jobs.formats.types")
    if types is None or not hasattr(types, "arrow_schema"):
        return batch_schema, lambda b: b
    from pyspark.sql.types import StructType

    schema = types.arrow_schema(StructType.fromJson(json.loads(spark_schema_json)))

    def conform(batch: pa.RecordBatch) -> pa.RecordBatch:
        return types.conform_batch(batch, schema)  # type: ignore[no-any-return]

    return schema, conform


class _InterimCsv:
    def __init__(self, schema: pa.Schema, options: Any) -> None:
        self.schema, self.options = schema, options

    def header(self) -> bytes:
        return (self.options.delimiter.join(self.schema.names) + "\n").encode()

    def encode(self, batch: pa.RecordBatch) -> bytes:
        import pyarrow.csv as pacsv

        out = io.BytesIO()
        pacsv.write_csv(batch, out, pacsv.WriteOptions(include_header=False, delimiter=self.options.delimiter))
        return out.getvalue()


class _InterimJson:
    def __init__(self, schema: pa.Schema, options: Any) -> None:
        self.schema = schema

    def encode(self, batch: pa.RecordBatch) -> bytes:
        return "".join(json.dumps(r, default=str) + "\n" for r in batch.to_pylist()).encode()


def encoder_factory(fmt: str, options: FormatOptions) -> Callable[[pa.Schema], Any]:
    """``factory(arrow_schema) -> encoder`` with ``.encode(batch) -> bytes`` (and CSV ``.header()``)."""
    if fmt == "csv":
        csv = _module("lading_jobs.formats.csv")
        cls = csv.CsvEncoder if csv is not None and hasattr(csv, "CsvEncoder") else _InterimCsv
        return lambda schema: cls(schema, options)
    if fmt == "json":
        jsonl = _module("lading_jobs.formats.jsonl")
        jcls = jsonl.JsonEncoder if jsonl is not None and hasattr(jsonl, "JsonEncoder") else _InterimJson
        return lambda schema: jcls(schema, options)
    return lambda schema: None
