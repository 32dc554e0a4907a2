"""``to.inferSchema``: a new table's schema taken from the first file of the load.

Parquet gives its own schema; JSON lines and CSV use pyarrow's inference over the
first file (CSV column names come from the header, else ``_c0``, ``_c1``, ...).
Columns that are NULL throughout become ``string``. The other files are then
cast to this schema like any load, so a later file that does not fit is
reported row by row, not silently widened.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from lading_jobs.formats import jsonl
from lading_jobs.formats.compressed import compression_of, decompress
from lading_jobs.formats.csv import pg_escapes
from lading_jobs.table.schema import SchemaError, TableSchema, type_from_arrow
from lading_spec.formats import CsvOptions, FormatOptions


def _read_sample(data: bytes, fmt: str, options: FormatOptions, uri: str) -> pa.Schema:
    if fmt == "parquet":
        return pq.read_schema(pa.BufferReader(data))
    data = decompress(data, compression_of(options), uri)
    if fmt == "json":
        import pyarrow.json as pajson

        # a line that is no object is rejected when loaded: not a source of columns
        return pajson.read_json(io.BytesIO(jsonl.blanked(data, jsonl.non_object_lines(data)))).schema
    csv = options if isinstance(options, CsvOptions) else CsvOptions()
    data = pg_escapes(data, csv)  # the escape honoured inside quotes only, as PostgreSQL does
    parse = pacsv.ParseOptions(delimiter=csv.delimiter, quote_char=csv.quote, double_quote=True, escape_char=False,
                               newlines_in_values=True, invalid_row_handler=lambda row: "skip")
    read = pacsv.ReadOptions(autogenerate_column_names=not csv.header, use_threads=False)
    convert = pacsv.ConvertOptions(null_values=[csv.null], strings_can_be_null=True)
    table = pacsv.read_csv(io.BytesIO(data), read_options=read, parse_options=parse, convert_options=convert)
    if not csv.header:
        table = table.rename_columns([f"_c{i}" for i in range(table.num_columns)])
    return table.schema


def infer_schema(data: bytes, fmt: str, options: FormatOptions, uri: str,
                 extra: Sequence[pa.Field] = ()) -> TableSchema:
    """The table schema the file ``uri`` (its bytes ``data``) suggests, ``extra`` columns (a
    Hive-partitioned set's directories) after its own; errors name the file."""
    try:
        schema = _read_sample(data, fmt, options, uri)
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as e:
        raise SchemaError(f"to.inferSchema: cannot infer a schema from {uri}: {e}; give to.schema instead") from e
    if not len(schema):
        raise SchemaError(f"to.inferSchema: {uri} holds no columns to infer a schema from (no JSON object, no "
                          "CSV field); give to.schema instead, or put a file with rows first")
    fields = []
    for f in schema:
        if pa.types.is_null(f.type):
            f = f.with_type(pa.string())
        try:
            type_from_arrow(f)
        except SchemaError as e:
            raise SchemaError(f"to.inferSchema: column {f.name!r} of {uri}: {e}; give to.schema instead") from e
        fields.append(f.with_nullable(True))
    fields += [f.with_nullable(True) for f in extra if f.name not in schema.names]
    return TableSchema.from_arrow(pa.schema(fields))
