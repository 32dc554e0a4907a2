"""Statistics read from the Parquet footer equal the ones computed from the rows (pure pyarrow, no Spark).

The Parquet writer takes integer, decimal and temporal bounds from the footer it wrote
(``stats.FileStats.add_footer``) and string bounds from its footer reserve; these tests
write a column of every type lading maps (tests/support/every_type.py) through the task
writer, with NaN, -0.0, infinities, negative decimals, long strings, a row group of NULLs
only and a column of NULLs only, then read every file's row groups back and compute the
statistics the way they were computed before (``FileStats.update`` per row group). The
manifest entries must be equal as JSON text (-0.0 and 0.0 differ there).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from support import every_type

from lading_jobs.formats.filestats import FileStats, footer_physicals
from lading_jobs.formats.parquetfile import FooterModel, ParquetFile, writer_options
from lading_jobs.formats.types import arrow_type_of
from lading_jobs.sink import PartSink
from lading_jobs.storage import LocalStorage, PendingUpload, join
from lading_jobs.unload import formatting
from lading_jobs.unload.task import TaskPlan, TaskWriter
from lading_spec.formats import ParquetOptions

ROWS, GROUP = 3000, 400


def _values(t: pa.DataType, n: int, rng: np.random.Generator) -> pa.Array:
    """``n`` values of Arrow type ``t``: extremes, NaN and signed zeros where the type has them,
    every 7th NULL, and the first row group NULL only."""
    mask = np.array([i < GROUP or i % 7 == 0 for i in range(n)])
    if pa.types.is_floating(t):
        special = [float("nan"), -0.0, 0.0, float("inf"), -float("inf")]
        data = [special[i % 5] if i % 3 == 0 else float(rng.normal()) for i in range(n)]
        return pa.array(data, t, mask=mask)
    if pa.types.is_integer(t):
        info = np.iinfo(t.to_pandas_dtype())
        data = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=t.to_pandas_dtype())
        data[GROUP + 1], data[GROUP + 2] = info.min, info.max
        return pa.array(data, t, mask=mask)
    if pa.types.is_boolean(t):
        return pa.array(rng.integers(0, 2, size=n).astype(bool), t, mask=mask)
    if pa.types.is_decimal(t):
        digits = t.precision
        data = [decimal.Decimal((int(rng.integers(0, 2)), tuple(int(d) for d in rng.integers(0, 10, digits)),
                                 -t.scale)) for _ in range(n)]
        return pa.array(data, t, mask=mask)
    if pa.types.is_string(t):
        data = [("é☃" * int(rng.integers(0, 3000))) if i % 50 == 1 else f"s{rng.integers(0, 10**9)}"
                for i in range(n)]  # some over 4 KiB (the writer drops their footer bounds) and 256 chars
        return pa.array(data, t, mask=mask)
    if pa.types.is_binary(t):
        return pa.array([rng.bytes(int(rng.integers(0, 40))) for _ in range(n)], t, mask=mask)
    if pa.types.is_null(t):
        return pa.nulls(n)
    if (pa.types.is_temporal(t) and not pa.types.is_date64(t)) or pa.types.is_duration(t):
        storage = pa.int32() if t.bit_width == 32 else pa.int64()
        lo, hi = (-700_000, 2_900_000) if storage == pa.int32() else (-(6 * 10**16), 2 * 10**17)  # years 68 to 8307
        if pa.types.is_time(t):
            lo, hi = 0, 86_400_000_000 - 1
        return pa.array(rng.integers(lo, hi, size=n), storage, mask=mask).view(t)
    return pa.nulls(n, t)  # nested: a null count only, from the rows either way


def _table() -> pa.Table:
    rng = np.random.default_rng(13)
    fields = [pa.field(name, arrow_type_of(type_)) for name, type_ in every_type.COLUMNS]
    fields += [pa.field("dec_small", pa.decimal128(10, 2)), pa.field("tm", pa.time64("us")),
               pa.field("big", pa.string())]
    fields += [pa.field(f"none_{f.name}", f.type) for f in list(fields) if footer_physicals(f.type)]
    columns = [_values(f.type, ROWS, rng) if not f.name.startswith("none_") else pa.nulls(ROWS, f.type)
               for f in fields]
    columns[[f.name for f in fields].index("big")] = pa.array(["x" * 5000] * ROWS)  # bounds over 4 KiB only
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def test_footer_bounds_equal_computed_bounds_for_every_mapped_type(file_uri: Callable[[str], str]) -> None:
    table = _table()
    schema = table.schema
    options = writer_options("snappy")
    footer = FooterModel(schema, options)
    assert {p for p, _ in footer.footer_columns} == {i for i, f in enumerate(schema) if footer_physicals(f.type)}
    assert any(pa.types.is_decimal(schema.field(p).type) for p, _ in footer.footer_columns)
    dest = file_uri("out/")
    plan = TaskPlan(destination=dest, format="parquet", options=ParquetOptions(row_group_rows=GROUP),
                    max_file_size=1024 * 1024, buffer_size=5 * 1024 * 1024, partition_by=(),
                    keep_partition_columns=False, token=None, spark_schema_json="{}")
    writer = TaskWriter(plan, 0, LocalStorage(), lambda b: b, schema, formatting.encoder_factory("parquet", plan.options))
    for batch in table.to_batches(max_chunksize=250):
        writer.write(batch)
    files = writer.finish()
    assert len(files) >= 2  # rolled: bounds per file
    storage = LocalStorage()
    for f in files:
        storage.complete_upload(PendingUpload.from_dict(f["upload"]))
        pf = pq.ParquetFile(join(dest, f["path"]).removeprefix("file://"))
        assert pf.metadata.num_row_groups >= 2
        computed = FileStats(schema)
        for g in range(pf.metadata.num_row_groups):
            computed.update(pf.read_row_group(g))
        assert json.dumps(f["columns"], sort_keys=True) == json.dumps(computed.to_dict(), sort_keys=True)
    first = files[0]["columns"]
    assert first["none_i64"] == {"nullCount": files[0]["rows"]}  # a column of NULLs only: no bounds
    assert "max" not in first["big"] and len(first["big"]["min"]) == 256  # truncated min, no max
    assert first["dec"]["min"].startswith("-")


def test_an_empty_parquet_file_and_missing_footer_bounds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    schema = pa.schema([("i", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("d", pa.decimal128(38, 10))])
    options = writer_options("snappy")
    footer = FooterModel(schema, options)

    sink = PartSink(LocalStorage(), (tmp_path / "empty.parquet").as_uri(), 1 << 20)
    empty = ParquetFile(sink, schema, options, footer, 1 << 20, 100, [1.0])
    empty.close()
    sink.abort()
    assert empty.stats.to_dict() == FileStats(schema).to_dict() == {n: {"nullCount": 0} for n in schema.names}

    # A writer that left chunk statistics out: bounds are lost, never made up (conservative).
    rows = pa.table({"i": [1, None], "ts": pa.array([dt.datetime(2020, 1, 1, tzinfo=dt.UTC), None],
                                                    schema.field("ts").type),
                     "d": pa.array([decimal.Decimal("-1.5"), None], schema.field("d").type)})
    pq.write_table(rows, tmp_path / "f.parquet", write_statistics=False)
    stats = FileStats(schema)
    stats.update(rows, later=frozenset(range(3)))
    stats.add_footer(pq.read_metadata(tmp_path / "f.parquet"), footer.footer_columns)
    assert stats.to_dict() == {n: {"nullCount": 1} for n in schema.names}
    pq.write_table(rows, tmp_path / "g.parquet")
    stats = FileStats(schema)
    stats.update(rows, later=frozenset(range(3)))
    stats.add_footer(pq.read_metadata(tmp_path / "g.parquet"), footer.footer_columns)
    assert stats.to_dict() == {"i": {"nullCount": 1, "min": 1, "max": 1},
                               "ts": {"nullCount": 1, "min": "2020-01-01T00:00:00+00:00",
                                      "max": "2020-01-01T00:00:00+00:00"},
                               "d": {"nullCount": 1, "min": "-1.5000000000", "max": "-1.5000000000"}}
