"""Compaction parts fed part by part (the streamed bin-pack): whole row groups, fresh statistics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lading_jobs import storage as st
from lading_jobs.compact.parts import CeilingPartWriter
from lading_jobs.table import format as fmt
from lading_jobs.table.schema import TableSchema

SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string")])


def test_small_pieces_make_whole_row_groups_and_the_parts_statistics_come_from_their_rows(
        file_uri: Callable[[str], str]) -> None:
    uri = file_uri("t/")
    storage = st.open_storage(uri)
    writer = CeilingPartWriter(uri, SCHEMA, "c-test", 0, table_id="tid", envelope="append", storage=storage,
                               max_size=64 * 1024**2, row_group_rows=1000)
    for piece in range(10):  # ten input parts of 300 rows each, as a streamed group hands them over
        ks = range(piece * 300, piece * 300 + 300)
        writer.write(pa.table({"k": pa.array(ks, pa.int64()), "v": [f"v{k}" for k in ks],
                               fmt.TIME_COLUMN: pa.array([piece] * 300, pa.int64()),
                               fmt.DIFF_COLUMN: pa.array([1] * 300, pa.int64())}))
    (written,) = writer.finish()
    storage.complete_upload(st.PendingUpload.from_dict(written.upload))
    md = pq.ParquetFile(storage.open_input(fmt.part_uri(uri, written.part.path))).metadata
    # no runt row group after every flush (1000, 200, 1000, 200, ... before)
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups)] == [1000, 1000, 1000]
    stats = written.part.stats
    assert stats.rows == 3000 and stats.min_time == 0
    k = stats.columns[SCHEMA.column("k").id]
    assert (k.min, k.max, k.nulls) == (0, 2999, 0)


def test_a_group_over_the_ceiling_fills_parts_to_95_percent_never_above_and_keeps_every_row(
        file_uri: Callable[[str], str]) -> None:
    uri = file_uri("t/")
    storage = st.open_storage(uri)
    limit = 256 * 1024
    writer = CeilingPartWriter(uri, SCHEMA, "c-test", 0, table_id="tid", envelope="append", storage=storage,
                               max_size=limit, row_group_rows=4096)
    rng = np.random.default_rng(7)
    pieces = []
    for piece in range(40):  # incompressible keys, strings of varied length: about 1.2 MB of Parquet
        ks = rng.integers(-2**62, 2**62, 2000)
        pieces.append(pa.table({"k": pa.array(ks, pa.int64()),
                                "v": [f"{k:x}"[: 1 + int(k) % 13] for k in ks],
                                fmt.TIME_COLUMN: pa.array([piece] * 2000, pa.int64()),
                                fmt.DIFF_COLUMN: pa.array([1] * 2000, pa.int64())}))
        writer.write(pieces[-1])
    written = writer.finish()
    sizes = [w.part.size for w in written]
    assert len(sizes) >= 3 and max(sizes) <= limit, sizes
    assert min(sizes[:-1]) >= 0.95 * limit, sizes
    parts = []
    for w in written:
        storage.complete_upload(st.PendingUpload.from_dict(w.upload))
        data = pq.read_table(storage.open_input(fmt.part_uri(uri, w.part.path)))
        assert data.num_rows == w.part.stats.rows and storage.head(fmt.part_uri(uri, w.part.path)).size == w.part.size
        k = w.part.stats.columns[SCHEMA.column("k").id]
        assert (k.min, k.max) == (min(data.column("k").to_pylist()), max(data.column("k").to_pylist()))
        assert (w.part.stats.min_time, w.part.stats.max_time) == (min(data.column(fmt.TIME_COLUMN).to_pylist()),
                                                                  max(data.column(fmt.TIME_COLUMN).to_pylist()))
        parts.append(data.select(["k", "v", fmt.TIME_COLUMN]))
    got, handed = pa.concat_tables(parts), pa.concat_tables(pieces)
    assert all(got.column(c).equals(handed.column(c)) for c in ("k", "v", fmt.TIME_COLUMN)), \
        "every row, in the order handed over"


def test_a_part_s_rows_are_not_held_until_it_closes(file_uri: Callable[[str], str]) -> None:
    """The statistics are gathered per row group as it is written, so the writer holds at most
    about a row group of Arrow data, however many the part takes (before, it kept every row
    handed to the open part, a whole ``targetFileSize`` decoded, to compute them at close)."""
    uri = file_uri("t/")
    storage = st.open_storage(uri)
    rows = 100_000
    writer = CeilingPartWriter(uri, SCHEMA, "c-test", 0, table_id="tid", envelope="append", storage=storage,
                               max_size=256 * 1024**2, row_group_rows=rows)
    piece_bytes, held = 0, []
    for piece in range(12):
        # every buffer in Arrow's pool (numpy's memory would not be counted)
        table = pa.table({"k": pc.add(pa.array(np.arange(piece * rows, (piece + 1) * rows, dtype=np.int64)), 0),
                          "v": pa.array(["x"] * rows),
                          fmt.TIME_COLUMN: pa.repeat(pa.scalar(piece, pa.int64()), rows),
                          fmt.DIFF_COLUMN: pa.repeat(pa.scalar(1, pa.int64()), rows)})
        piece_bytes = table.nbytes
        writer.write(table)
        del table
        held.append(pa.total_allocated_bytes())
    (written,) = writer.finish()
    assert written.part.stats.rows == 12 * rows
    k = written.part.stats.columns[SCHEMA.column("k").id]
    assert (k.min, k.max, k.nulls) == (0, 12 * rows - 1, 0)
    assert max(held) < 4 * piece_bytes, (held, piece_bytes)


def _pieces_with_strings(dictionary: bool) -> list[pa.Table]:
    """Ten input parts of 300 rows: a string column of four values and NULLs, each part's own
    dictionary order (as ``read_part(dictionary=...)`` hands them over) or plain strings. Parts 3
    and 6 straddle row groups of 1000 rows, with a value only on one side ("aaa" before row 1000,
    "zzz" after row 2000): a row group's statistics must not take the other side's values."""
    rng = np.random.default_rng(11)
    values = pa.array(["eu", "us", "apac", "latam", None])
    pieces = []
    for piece in range(10):
        v = values.take(pa.array(rng.integers(0, 5, 300)))
        if piece == 3:  # rows 900-1199
            v = pa.concat_arrays([pa.array(["aaa"] * 100), v.slice(100)])
        if piece == 6:  # rows 1800-2099
            v = pa.concat_arrays([v.slice(0, 200), pa.array(["zzz"] * 100)])
        pieces.append(pa.table({"k": pa.array(rng.integers(-2**62, 2**62, 300)),
                                "v": v.dictionary_encode() if dictionary else v,
                                fmt.TIME_COLUMN: pa.array([piece] * 300, pa.int64()),
                                fmt.DIFF_COLUMN: pa.array([1] * 300, pa.int64())}))
    return pieces


def test_string_columns_handed_over_as_dictionaries_are_written_as_such_into_the_same_file(
        file_uri: Callable[[str], str]) -> None:
    """A streamed bin-pack reads string columns as dictionary arrays; the writer writes their
    dictionaries as they are (unified per row group), not one string per row hashed again, and
    the file is what the plain strings give: the plain Arrow schema stored, the same Parquet
    schema and metadata, dictionary-encoded chunks, the same rows and statistics."""
    uri = file_uri("t/")
    storage = st.open_storage(uri)
    out = {}
    for dictionary in (True, False):
        writer = CeilingPartWriter(uri, SCHEMA, "c-test", int(dictionary), table_id="tid", envelope="append",
                                   storage=storage, max_size=64 * 1024**2, row_group_rows=1000,
                                   dictionary=("v",) if dictionary else ())
        for piece in _pieces_with_strings(dictionary):
            writer.write(piece)
        (written,) = writer.finish()
        assert pa.types.is_dictionary(writer.write_schema.field("v").type) is dictionary, "the path taken"
        storage.complete_upload(st.PendingUpload.from_dict(written.upload))
        out[dictionary] = (written.part.stats, pq.ParquetFile(storage.open_input(fmt.part_uri(uri, written.part.path))))
    (stats, pf), (plain_stats, plain_pf) = out[True], out[False]
    assert pf.schema_arrow.field("v").type == pa.string()
    assert pf.schema_arrow.equals(plain_pf.schema_arrow, check_metadata=True)
    assert pf.metadata.metadata == plain_pf.metadata.metadata  # the stored Arrow schema and table metadata
    assert pf.metadata.schema.equals(plain_pf.metadata.schema)
    assert [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)] == [1000, 1000, 1000]
    for i in range(pf.metadata.num_row_groups):
        chunk = pf.metadata.row_group(i).column(1)
        assert "RLE_DICTIONARY" in chunk.encodings or "PLAIN_DICTIONARY" in chunk.encodings
        plain_chunk = plain_pf.metadata.row_group(i).column(1).statistics
        assert (chunk.statistics.min, chunk.statistics.max, chunk.statistics.null_count) == \
            (plain_chunk.min, plain_chunk.max, plain_chunk.null_count)
    assert pf.read().equals(plain_pf.read())
    assert pa.concat_tables(_pieces_with_strings(False)).select(["k", "v"]).equals(pf.read().select(["k", "v"]))
    # the same statistics; the size may differ: a row group's dictionary page may also hold a value of a
    # part only the neighbouring row group uses ("aaa", "zzz" here)
    assert replace(stats, bytes=0) == replace(plain_stats, bytes=0)
    v = stats.columns[SCHEMA.column("v").id]
    assert (v.min, v.max) == ("aaa", "zzz") and v.nulls == pc.sum(pc.is_null(pf.read().column("v"))).as_py()
    bounds = [(c.statistics.min, c.statistics.max) for c in (pf.metadata.row_group(i).column(1) for i in range(3))]
    assert bounds[0][0] == "aaa" and bounds[1] == ("apac", "us") and bounds[2][1] == "zzz", bounds


def test_a_part_read_with_dictionaries_keeps_them_only_for_its_own_schema_s_columns(
        file_uri: Callable[[str], str]) -> None:
    """``read_part(dictionary=...)`` hands string columns over as dictionary arrays in parts of the
    current schema (whose names it knows) and decodes them in parts of an older one."""
    from lading_jobs.table import reader, writer
    from lading_jobs.table.log.commits import TableLog

    uri = file_uri("t2/")
    log = TableLog.create(uri, SCHEMA, "append")
    writer.commit_parts(uri, writer.write_parts(uri, [pa.table({"k": [1, 2], "v": ["a", None]})], SCHEMA,
                                                write_id=fmt.new_write_id()), log=log)
    snap = log.snapshot()
    (part,) = snap.parts
    storage = st.open_storage(uri)
    got = reader.read_part(storage, snap, part, order=False, dictionary=("v",))
    assert got.schema.field("v").type == pa.dictionary(pa.int32(), pa.string())
    assert got.column("v").to_pylist() == ["a", None] and got.column("k").to_pylist() == [1, 2]
    plain = reader.read_part(storage, snap, part, order=False)
    assert plain.schema.field("v").type == pa.string()
    older = reader.read_part(storage, snap, replace(part, schema_id=part.schema_id + 1), order=False,
                             dictionary=("v",))
    assert older.schema.field("v").type == pa.string() and older.column("v").to_pylist() == ["a", None]
