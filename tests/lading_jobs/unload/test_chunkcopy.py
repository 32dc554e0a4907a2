"""Parquet to Parquet by copied column chunks, without Spark (file:// storage; the path in a run:
test_chunkcopy_run.py).

What must hold: the output reads back as exactly the rows the task writer would have
written (same schema, same values bit for bit, same order, same manifest statistics);
chunks are copied only where that is provable, and everything else goes through
the task writer; ``maxFileSize`` stays a ceiling; a failure at any storage call
leaves nothing behind and a rerun succeeds.
"""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

from lading_jobs.formats import thrift, types
from lading_jobs.sources import files as sources_files
from lading_jobs.storage import LocalStorage, PendingUpload
from lading_jobs.unload import arrowpath, chunkcopy
from lading_jobs.unload.task import TaskPlan
from lading_spec.formats import ParquetOptions

MB = 1024 * 1024


def rows(first: int, n: int, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed + first)
    ids = np.arange(first, first + n, dtype=np.int64)
    return pa.table({
        "id": pa.array(ids),
        "qty": pa.array((ids % 1000).astype(np.int32), mask=ids % 11 == 0),
        "amount": pa.array(rng.normal(size=n)).to_numpy() * np.where(ids % 5 == 0, np.nan, 1.0),
        "flag": pa.array(ids % 3 == 0),
        "note": pa.array([None if i % 7 == 0 else f"n{i}-" + rng.bytes(12).hex() for i in ids], pa.string()),
        "customer": pa.array([f"customer-{i % 500}" for i in ids], pa.string()),
    })


SPARK_SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("qty", T.IntegerType()),
                             T.StructField("amount", T.DoubleType()), T.StructField("flag", T.BooleanType()),
                             T.StructField("note", T.StringType()), T.StructField("customer", T.StringType())])


def _plan(dest: Path, max_size: int = 1 << 40, **options: Any) -> TaskPlan:
    return TaskPlan(destination=f"file://{dest}/", format="parquet", options=ParquetOptions(**options),
                    max_file_size=max_size, buffer_size=5 * MB, partition_by=(), keep_partition_columns=False,
                    token=None, spark_schema_json=SPARK_SCHEMA.json())


def _check(uri: str, pf: pq.ParquetFile) -> None:
    sources_files.check_parquet_schema(uri, sources_files.parquet_schema(pf), SPARK_SCHEMA)


def copy(sources: list[Path], dest: Path, plan: TaskPlan | None = None) -> list[dict[str, Any]]:
    """Copy ``sources`` (whole files) in one task; complete its uploads; the manifest's file entries."""
    plan = plan or _plan(dest)
    pieces = [(f"file://{p}", p.stat().st_size, None, None) for p in sources]
    out = list(chunkcopy.write_split(plan, pieces, types.arrow_schema(SPARK_SCHEMA), _check, 0))
    files = [json.loads(s) for s in out[0].column(0).to_pylist()]
    storage = LocalStorage()
    for f in files:
        storage.complete_upload(PendingUpload.from_dict(f["upload"]))
    return files


def task_writer(sources: list[Path], dest: Path, plan: TaskPlan | None = None) -> list[dict[str, Any]]:
    """The same copy as the rest of the Arrow-only path writes it (decoded, re-encoded)."""
    from lading_jobs import splits
    from lading_jobs.unload.task import write_partition

    plan = plan or _plan(dest)
    unit = splits.Split(0, tuple(splits.Piece(f"file://{p}", p.stat().st_size, "", i) for i, p in enumerate(sources)))
    fs = sources_files.FileSet(uri=f"file://{sources[0].parent}/", pattern=None, file_list=(), format="parquet",
                               options=ParquetOptions())
    job = arrowpath.Job(arrowpath.FilesInput(fs, SPARK_SCHEMA.json()), (unit,), tuple(range(6)),
                        tuple(SPARK_SCHEMA.names), None, (), 10_000)
    out = list(write_partition(plan, arrowpath.task_rows(job, unit), 0))
    files = [json.loads(s) for s in out[0].column(0).to_pylist()]
    storage = LocalStorage()
    for f in files:
        storage.complete_upload(PendingUpload.from_dict(f["upload"]))
    return files


def bits(table: pa.Table) -> pa.Table:
    """``table`` with floats as their bit patterns: equal means equal bit for bit (NaN, -0.0)."""
    cols = [c.combine_chunks().view(pa.int64()) if pa.types.is_float64(c.type) else c.combine_chunks()
            for c in table.columns]
    return pa.table(cols, names=table.column_names)


def read(dest: Path, files: list[dict[str, Any]]) -> pa.Table:
    return pa.concat_tables([pq.read_table(dest / f["path"]) for f in files])


def entries(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a manifest entry says about the rows (not the bytes that hold them)."""
    return [{k: v for k, v in f.items() if k not in ("upload", "bytes", "crc32")} for f in files]


@pytest.mark.parametrize(("created_by", "trusted"), [
    (b"parquet-mr version 1.17.0 (build fac0c746)", True), (b"parquet-mr version 1.10.1", True),
    (b"parquet-mr version 1.9.0 (build 38262e2c)", False), (b"parquet-mr version 1.8.1", False),
    (b"parquet-cpp-arrow version 26.0.1", True), (b"parquet-cpp version 1.5.1-SNAPSHOT", False),
    (b"DuckDB version v1.1.3", False), (b"", False), (None, False),
])
def test_only_writers_with_ordered_statistics_are_copied_from(created_by: bytes | None, trusted: bool) -> None:
    assert chunkcopy.trusted_writer(created_by) is trusted


# -- what is copied ----------------------------------------------------------------------------
def test_copied_files_hold_the_task_writers_rows_and_statistics(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for k in range(3):
        pq.write_table(rows(k * 20_000, 20_000), src / f"{k}.parquet", row_group_size=10_000)
    sources = sorted(src.iterdir())
    copied = copy(sources, tmp_path / "copy", _plan(tmp_path / "copy", row_group_rows=20_000))
    written = task_writer(sources, tmp_path / "tw", _plan(tmp_path / "tw", row_group_rows=20_000))
    assert entries(copied) == entries(written)
    out, expected = read(tmp_path / "copy", copied), read(tmp_path / "tw", written)
    assert out.schema.equals(expected.schema, check_metadata=True)
    assert bits(out).equals(bits(expected))

    md = pq.read_metadata(tmp_path / "copy" / copied[0]["path"])
    assert md.created_by == chunkcopy.CREATED_BY.decode() and md.num_row_groups == 6
    first = pq.read_metadata(sources[0]).row_group(0)
    group = md.row_group(0)
    raw_in, raw_out = sources[0].read_bytes(), (tmp_path / "copy" / copied[0]["path"]).read_bytes()
    kinds = {}
    for i, name in enumerate(out.column_names):
        a, b = first.column(i), group.column(i)
        start_a = a.dictionary_page_offset or a.data_page_offset
        start_b = b.dictionary_page_offset or b.data_page_offset
        same = raw_in[start_a:start_a + a.total_compressed_size] == raw_out[start_b:start_b + b.total_compressed_size]
        kinds[name] = same
    # copied; the double is encoded again, plain: its first rows are (NaN apart) distinct, while the
    # source's writer tried a dictionary (pyarrow's default)
    assert kinds == {**dict.fromkeys(out.column_names, True), "amount": False}, kinds
    assert group.column(2).has_dictionary_page is False and first.column(2).has_dictionary_page is True
    # pyarrow writes the source nullable (OPTIONAL), as lading does: every column qualifies by its
    # element; the double is encoded again all the same, as pyarrow's pages hold statistics (a float
    # chunk is copied only with lading's own: test_a_spark_written_input_copies_to_the_same_rows_on_both_paths)
    writer = chunkcopy.CopyWriter(_plan(tmp_path / "x", row_group_rows=20_000), 0, LocalStorage())
    footer = thrift.decode(chunkcopy._footer_bytes(sources[0].read_bytes()))
    assert writer._plan(footer, 0) == [True] * 6


@pytest.mark.parametrize("statistics", ["all", "none", "some", "inexact"])
def test_copied_chunks_take_their_statistics_from_the_footer_only_where_it_gives_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, statistics: str) -> None:
    """A copied integer, boolean or string chunk whose footer statistics give its null count and
    bounds is not decoded (those statistics are the manifest's); without them (a writer that
    wrote none, or none for that column), or with a bound its writer marked inexact, it is
    decoded and its statistics computed. The double encoded again is decoded either way. The
    manifest is the task writer's every way, a column that is NULL in every row of a group (no
    bounds in the footer) included."""
    src = tmp_path / "in"
    src.mkdir()
    table = rows(0, 16_000)
    table = table.set_column(1, "qty", pa.array([None] * 8000 + list(range(8000)), pa.int32()))  # group 0: NULLs only
    written_stats: bool | list[str] = {"all": True, "none": False, "some": ["id", "note"], "inexact": True}[statistics]
    pq.write_table(table, src / "0.parquet", row_group_size=8000, write_statistics=written_stats)
    if statistics == "inexact":  # the strings' maximum marked inexact (is_max_value_exact false), as a truncating writer does
        data = (src / "0.parquet").read_bytes()
        footer = thrift.decode(chunkcopy._footer_bytes(data))
        for group in footer.get(chunkcopy.FMD_GROUPS).values:
            for i in (4, 5):
                stats = group.get(chunkcopy.RG_COLUMNS).values[i].get(chunkcopy.CC_META).get(chunkcopy.CM_STATISTICS)
                assert stats.get(chunkcopy.ST_MAX_EXACT) is True
                stats.set(chunkcopy.ST_MAX_EXACT, thrift.FALSE, False)
        new = thrift.encode(footer)
        n = int.from_bytes(data[-8:-4], "little")
        (src / "0.parquet").write_bytes(data[:-8 - n] + new + len(new).to_bytes(4, "little") + b"PAR1")
    decoded: list[list[str]] = []
    real = chunkcopy._decode

    def spy(uri: str, pf: pq.ParquetFile, g: int, lading: pa.Schema, whole: bool = False) -> list[pa.RecordBatch]:
        decoded.append(lading.names)
        return real(uri, pf, g, lading, whole)

    monkeypatch.setattr(chunkcopy, "_decode", spy)
    plan = _plan(tmp_path / "copy", row_group_rows=8000)
    copied = copy([src / "0.parquet"], tmp_path / "copy", plan)
    monkeypatch.undo()
    written = task_writer([src / "0.parquet"], tmp_path / "tw", _plan(tmp_path / "tw", row_group_rows=8000))
    assert entries(copied) == entries(written)
    assert copied[0]["columns"]["qty"] == {"nullCount": 8000, "min": 0, "max": 7999}
    from_footer = {"all": {"id", "qty", "flag", "note", "customer"}, "none": set(), "some": {"id", "note"},
                   "inexact": {"id", "qty", "flag"}}[statistics]
    assert decoded == [[n for n in SPARK_SCHEMA.names if n not in from_footer]] * 2, decoded
    assert bits(read(tmp_path / "copy", copied)).equals(bits(read(tmp_path / "tw", written)))


def test_files_from_writers_whose_statistics_are_not_trusted_are_written_by_the_task_writer(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(rows(0, 8000), src / "0.parquet")
    data = (src / "0.parquet").read_bytes()
    footer = thrift.decode(chunkcopy._footer_bytes(data))
    footer.set(chunkcopy.FMD_CREATED_BY, thrift.BINARY, b"parquet-mr version 1.8.1 (build 4aba4dae)")
    new = thrift.encode(footer)
    n = int.from_bytes(data[-8:-4], "little")
    (src / "0.parquet").write_bytes(data[:-8 - n] + new + len(new).to_bytes(4, "little") + b"PAR1")
    assert pq.read_metadata(src / "0.parquet").created_by.startswith("parquet-mr version 1.8.1")

    files = copy([src / "0.parquet"], tmp_path / "out", _plan(tmp_path / "out", row_group_rows=8000))
    assert pq.read_metadata(tmp_path / "out" / files[0]["path"]).created_by.startswith("parquet-cpp-arrow")
    assert bits(read(tmp_path / "out", files)).equals(bits(rows(0, 8000).cast(read(tmp_path / "out", files).schema)))


@pytest.mark.parametrize(("source_rows", "row_group_rows", "compression"), [
    (8000, 8000, "snappy"),
    (8000, 64_000, "snappy"),  # an eighth of rowGroupSize: kept
    (8000, 64_001, "snappy"),  # smaller: a runt, merged by the task writer
    (8000, 7999, "snappy"),  # larger than asked: the task writer splits it
    (8000, 8000, "zstd"),  # another codec: the row group is kept, its chunks encoded again
])
def test_row_groups_are_copied_only_within_the_asked_size_and_codec(tmp_path: Path, source_rows: int,
                                                                   row_group_rows: int, compression: str) -> None:
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(rows(0, source_rows), src / "0.parquet", compression="snappy")
    plan = _plan(tmp_path / "out", row_group_rows=row_group_rows, compression=compression)
    files = copy([src / "0.parquet"], tmp_path / "out", plan)
    written = task_writer([src / "0.parquet"], tmp_path / "tw", _plan(tmp_path / "tw", row_group_rows=row_group_rows,
                                                                      compression=compression))
    assert entries(files) == entries(written)
    assert bits(read(tmp_path / "out", files)).equals(bits(read(tmp_path / "tw", written)))
    md = pq.read_metadata(tmp_path / "out" / files[0]["path"])
    in_ceiling = source_rows <= row_group_rows <= 8 * source_rows
    assert (md.created_by == chunkcopy.CREATED_BY.decode()) is in_ceiling
    assert md.num_row_groups == (1 if in_ceiling or row_group_rows > source_rows else 2)
    assert all(md.row_group(0).column(i).compression == compression.upper() for i in range(6))


def test_max_file_size_is_a_ceiling_for_copied_row_groups(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(rows(0, 60_000), src / "0.parquet", row_group_size=10_000)  # row groups of ~0.5 MB
    pq.write_table(rows(60_000, 60_000), src / "1.parquet", row_group_size=60_000)  # one of ~3 MB: over half the limit
    limit = int(1.6 * MB)
    sources = sorted(src.iterdir())
    plan = _plan(tmp_path / "out", max_size=limit, row_group_rows=60_000)
    files = copy(sources, tmp_path / "out", plan)
    sizes = [(tmp_path / "out" / f["path"]).stat().st_size for f in files]
    assert all(size == f["bytes"] <= limit for size, f in zip(sizes, files, strict=True)), sizes
    assert len(files) >= 4
    makers = [pq.read_metadata(tmp_path / "out" / f["path"]).created_by for f in files]
    assert makers[0] == chunkcopy.CREATED_BY.decode() and makers[-1].startswith("parquet-cpp-arrow"), makers
    assert sizes[0] >= 0.6 * limit  # several row groups share a file
    assert [f["seq"] for f in files] == list(range(len(files)))
    out = read(tmp_path / "out", files)
    expected = pa.concat_tables([rows(0, 60_000), rows(60_000, 60_000)]).cast(out.schema)
    assert bits(out).equals(bits(expected))


class Failing(LocalStorage):
    """File storage whose ``calls``-th upload call (begin, part, put) raises."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.fail_at, self.calls = fail_at, 0

    def _tick(self) -> None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise OSError(f"injected failure at upload call {self.calls}")

    def begin_upload(self, uri: str) -> Any:
        self._tick()
        return super().begin_upload(uri)

    def upload_part(self, upload: Any, data: bytes) -> None:
        self._tick()
        super().upload_part(upload, data)


def test_a_failure_at_any_upload_call_leaves_nothing_and_a_rerun_succeeds(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(rows(0, 60_000), src / "0.parquet", row_group_size=10_000)
    pq.write_table(rows(60_000, 60_000), src / "1.parquet", row_group_size=60_000)
    sources = sorted(src.iterdir())
    dest = tmp_path / "out"
    plan = _plan(dest, max_size=int(1.6 * MB), row_group_rows=60_000)
    counting = Failing(0)
    monkeypatch.setattr(chunkcopy, "open_storage", lambda uri, settings=None: counting)
    copy(sources, dest, plan)
    total = counting.calls
    assert total >= 8
    for fail_at in range(1, total + 1):
        for p in list(dest.rglob("*")):
            if p.is_file():
                p.unlink()
        failing = Failing(fail_at)
        monkeypatch.setattr(chunkcopy, "open_storage", lambda uri, settings=None, s=failing: s)
        with pytest.raises(OSError, match="injected failure"):
            copy(sources, dest, plan)
        assert [p for p in dest.rglob("*") if p.is_file()] == [], fail_at
    monkeypatch.setattr(chunkcopy, "open_storage", lambda uri, settings=None: LocalStorage())
    files = copy(sources, dest, plan)
    assert sum(f["rows"] for f in files) == 120_000
    assert bits(read(dest, files)).equals(bits(pa.concat_tables([rows(0, 60_000), rows(60_000, 60_000)])
                                               .cast(read(dest, files).schema)))


def test_a_file_that_is_not_parquet_is_named(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "0.parquet").write_bytes(b"PAR1" + b"\x00" * 100)
    with pytest.raises(ValueError, match=r"reading file://.*0\.parquet"):
        copy([src / "0.parquet"], tmp_path / "out")
    assert not (tmp_path / "out").exists() or not [p for p in (tmp_path / "out").rglob("*") if p.is_file()]



def test_the_ceiling_is_exact_footer_included(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(rows(0, 40_000), src / "0.parquet", row_group_size=10_000)
    whole = copy([src / "0.parquet"], tmp_path / "whole", _plan(tmp_path / "whole", row_group_rows=10_000))
    assert len(whole) == 1
    size = whole[0]["bytes"]
    exact = copy([src / "0.parquet"], tmp_path / "exact", _plan(tmp_path / "exact", max_size=size,
                                                                 row_group_rows=10_000))
    assert [f["bytes"] for f in exact] == [size]  # exactly at the ceiling still fits
    under = copy([src / "0.parquet"], tmp_path / "under", _plan(tmp_path / "under", max_size=size - 1,
                                                                 row_group_rows=10_000))
    assert len(under) == 2 and all(f["bytes"] <= size - 1 for f in under)
    assert [pq.read_metadata(tmp_path / "under" / f["path"]).num_row_groups for f in under] == [3, 1]
    assert bits(read(tmp_path / "under", under)).equals(bits(read(tmp_path / "whole", whole)))


def test_a_column_stored_otherwise_than_lading_writes_it_is_encoded_again(tmp_path: Path) -> None:
    # a REQUIRED id (no definition levels) cannot stand for lading's OPTIONAL one: encoded again
    src = tmp_path / "in"
    src.mkdir()
    table = rows(0, 8000)
    schema = table.schema.set(0, pa.field("id", pa.int64(), nullable=False))
    pq.write_table(table.cast(schema), src / "0.parquet")
    files = copy([src / "0.parquet"], tmp_path / "out", _plan(tmp_path / "out", row_group_rows=8000))
    written = task_writer([src / "0.parquet"], tmp_path / "tw", _plan(tmp_path / "tw", row_group_rows=8000))
    assert entries(files) == entries(written)
    assert bits(read(tmp_path / "out", files)).equals(bits(read(tmp_path / "tw", written)))
    out = pq.read_metadata(tmp_path / "out" / files[0]["path"])
    assert out.created_by == chunkcopy.CREATED_BY.decode()
    assert out.schema.column(0).max_definition_level == 1


class CountingReads(LocalStorage):
    """File storage counting the bytes read through ``open_input`` (as S3 GETs would be)."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes_read = 0

    def open_input(self, uri: str, size: int | None = None, etag: str | None = None) -> pa.NativeFile:
        storage = self

        class Reader(io.RawIOBase):
            def __init__(self) -> None:
                self.f = open(uri.removeprefix("file://"), "rb")  # noqa: SIM115 - closed by close()

            def readable(self) -> bool:
                return True

            def seekable(self) -> bool:
                return True

            def seek(self, pos: int, whence: int = 0) -> int:
                return self.f.seek(pos, whence)

            def tell(self) -> int:
                return self.f.tell()

            def read(self, n: int = -1) -> bytes:
                data = self.f.read(n)
                storage.bytes_read += len(data)
                return data

            def close(self) -> None:
                self.f.close()
                super().close()

        return pa.PythonFile(Reader(), mode="r")


def test_a_copied_row_group_is_read_from_storage_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(rows(0, 40_000), src / "0.parquet", row_group_size=10_000)
    counting = CountingReads()
    monkeypatch.setattr(chunkcopy, "open_storage", lambda uri, settings=None: counting)
    files = copy([src / "0.parquet"], tmp_path / "out", _plan(tmp_path / "out", row_group_rows=10_000))
    assert pq.read_metadata(tmp_path / "out" / files[0]["path"]).created_by == chunkcopy.CREATED_BY.decode()
    size = (src / "0.parquet").stat().st_size
    assert size <= counting.bytes_read < 1.1 * size, (counting.bytes_read, size)


def test_the_work_per_row_group_does_not_grow_with_the_row_groups_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Copying a file of G row groups once copied the whole source footer (every group's
    # metadata) and encoded the whole output footer again for every group: G² work, minutes for
    # a few thousand groups. Counted, not timed: the footer bytes encoded and the Thrift structs
    # copied per row group must stay the same whatever G is.
    src = tmp_path / "in"
    src.mkdir()
    per_group: dict[int, tuple[float, float]] = {}
    real_encode, real_copy, real_shallow = thrift.encode, thrift.Struct.copy, thrift.Struct.shallow
    for groups in (100, 400):
        path = src / f"{groups}.parquet"
        pq.write_table(rows(0, groups * 8), path, row_group_size=8)
        assert pq.read_metadata(path).num_row_groups == groups
        counts = {"encoded": 0, "copies": 0}

        def counting_encode(value: thrift.Struct, counts: dict[str, int] = counts) -> bytes:
            out = real_encode(value)
            counts["encoded"] += len(out)
            return out

        def counting_copy(self: thrift.Struct, counts: dict[str, int] = counts) -> thrift.Struct:
            counts["copies"] += 1
            return real_copy(self)

        def counting_shallow(self: thrift.Struct, counts: dict[str, int] = counts) -> thrift.Struct:
            counts["copies"] += 1
            return real_shallow(self)

        monkeypatch.setattr(thrift, "encode", counting_encode)
        monkeypatch.setattr(thrift.Struct, "copy", counting_copy)
        monkeypatch.setattr(thrift.Struct, "shallow", counting_shallow)
        files = copy([path], tmp_path / f"out{groups}", _plan(tmp_path / f"out{groups}", row_group_rows=8))
        monkeypatch.undo()
        assert sum(f["rows"] for f in files) == groups * 8
        assert pq.read_metadata(tmp_path / f"out{groups}" / files[0]["path"]).num_row_groups == groups
        per_group[groups] = (counts["encoded"] / groups, counts["copies"] / groups)
    (bytes_100, copies_100), (bytes_400, copies_400) = per_group[100], per_group[400]
    assert 0 < bytes_400 < 1.5 * bytes_100 and 0 < copies_400 < 1.5 * copies_100, per_group


def test_copied_row_groups_carry_no_ordinal_as_pyarrow_writes_none(tmp_path: Path) -> None:
    # RowGroup.ordinal is a Thrift i16 used only by encrypted files; pyarrow writes none, and a
    # file of more than 32,767 row groups would overflow it.
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(rows(0, 40), src / "a.parquet", row_group_size=8)
    files = copy([src / "a.parquet"], tmp_path / "out", _plan(tmp_path / "out", row_group_rows=8))
    data = (tmp_path / "out" / files[0]["path"]).read_bytes()
    groups = thrift.decode(chunkcopy._footer_bytes(data)).get(chunkcopy.FMD_GROUPS).values
    assert len(groups) == 5 and all(g.get(chunkcopy.RG_ORDINAL) is None for g in groups)


def test_the_footer_size_is_computed_as_encoding_the_footer_gives_it(tmp_path: Path) -> None:
    # The ceiling check adds sizes instead of encoding the footer before every row group; it must
    # give the encoded footer's size exactly, across the list header's and the row count's widths.
    pq.write_table(rows(0, 64), tmp_path / "a.parquet", row_group_size=8)
    footer = thrift.decode(chunkcopy._footer_bytes((tmp_path / "a.parquet").read_bytes()))
    group = footer.get(chunkcopy.FMD_GROUPS).values[0]
    schema = types.arrow_schema(SPARK_SCHEMA)
    for compression in ("snappy", "zstd", "none"):
        from lading_jobs.formats.parquetfile import writer_options

        reference = chunkcopy.Reference.of(schema, writer_options(compression), compression)
        size = chunkcopy.FooterSize(reference)
        for n in (0, 1, 14, 15, 16, 200):
            for total in (0, 8 * n, 2**31 + 5, 2**62):
                groups = [group] * n
                expected = len(chunkcopy._footer(reference, groups, total))
                assert size.of(total, n, sum(len(thrift.encode(g)) for g in groups)) == expected, (n, total)


def _one_row_group(source: Path, target: Path) -> None:
    """``source``'s row groups made one (each column's chunks joined, pages as they are): a row
    group of more rows than pyarrow writes in one, as parquet-mr writes low-entropy columns."""
    data = source.read_bytes()
    footer = thrift.decode(chunkcopy._footer_bytes(data))
    groups = footer.get(chunkcopy.FMD_GROUPS).values
    body, columns = bytearray(chunkcopy.MAGIC), []
    for i, first in enumerate(groups[0].get(chunkcopy.RG_COLUMNS).values):
        parts = [g.get(chunkcopy.RG_COLUMNS).values[i].get(chunkcopy.CC_META) for g in groups]
        assert all(m.get(chunkcopy.CM_DICTIONARY_PAGE) is None for m in parts)  # booleans: data pages only
        at = len(body)
        for m in parts:
            start = m.get(chunkcopy.CM_DATA_PAGE)
            body += data[start:start + m.get(chunkcopy.CM_STORED)]
        cc = first.copy()
        md = cc.get(chunkcopy.CC_META)
        md.drop(12, 13)  # statistics, encoding statistics: of the first group only
        for fid in (chunkcopy.CM_VALUES, chunkcopy.CM_BYTES, chunkcopy.CM_STORED):
            md.set(fid, thrift.I64, sum(m.get(fid) for m in parts))
        md.set(chunkcopy.CM_DATA_PAGE, thrift.I64, at)
        cc.set(chunkcopy.CC_OFFSET, thrift.I64, at)
        columns.append(cc)
    group = thrift.Struct()
    group.set(chunkcopy.RG_COLUMNS, thrift.LIST, thrift.List(thrift.STRUCT, columns))
    group.set(chunkcopy.RG_BYTES, thrift.I64, sum(g.get(chunkcopy.RG_BYTES) for g in groups))
    group.set(chunkcopy.RG_ROWS, thrift.I64, sum(g.get(chunkcopy.RG_ROWS) for g in groups))
    group.set(chunkcopy.RG_OFFSET, thrift.I64, len(chunkcopy.MAGIC))
    group.set(chunkcopy.RG_STORED, thrift.I64, len(body) - len(chunkcopy.MAGIC))
    footer.set(chunkcopy.FMD_GROUPS, thrift.LIST, thrift.List(thrift.STRUCT, [group]))
    encoded = thrift.encode(footer)
    target.write_bytes(bytes(body) + encoded + len(encoded).to_bytes(4, "little") + chunkcopy.MAGIC)


def test_a_row_group_of_more_rows_than_pyarrow_writes_in_one_keeps_every_row(tmp_path: Path) -> None:
    # parquet-mr puts 67.2 M booleans (a few MB) in one row group; pyarrow never writes more than
    # 64 Mi rows in one. The copy encoded the REQUIRED column again in memory, got two row groups
    # and kept the first one's chunk: a row group saying 67.2 M rows over a chunk of 64 Mi values
    # (DuckDB: "metadata is corrupt"; pyarrow: rows missing, or an error).
    n = 67_200_000
    ids = np.arange(n, dtype=np.int64)
    table = pa.table({"b": pa.array(ids % 3 == 0), "f": pa.array(ids % 2 == 0, mask=ids % 1000 == 0)},
                     schema=pa.schema([pa.field("b", pa.bool_(), nullable=False), pa.field("f", pa.bool_())]))
    del ids
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "two.parquet", row_group_size=n)
    assert pq.read_metadata(tmp_path / "two.parquet").num_row_groups == 2  # pyarrow's limit
    _one_row_group(tmp_path / "two.parquet", tmp_path / "in" / "one.parquet")
    assert pq.read_metadata(tmp_path / "in" / "one.parquet").num_row_groups == 1
    schema = T.StructType([T.StructField("b", T.BooleanType()), T.StructField("f", T.BooleanType())])
    plan = TaskPlan(destination=f"file://{tmp_path / 'out'}/", format="parquet",
                    options=ParquetOptions(row_group_rows=100_000_000), max_file_size=1 << 40, buffer_size=5 * MB,
                    partition_by=(), keep_partition_columns=False, token=None, spark_schema_json=schema.json())
    source = tmp_path / "in" / "one.parquet"

    def check(uri: str, pf: pq.ParquetFile) -> None:
        sources_files.check_parquet_schema(uri, sources_files.parquet_schema(pf), schema)

    out = list(chunkcopy.write_split(plan, [(f"file://{source}", source.stat().st_size, None, None)],
                                     types.arrow_schema(schema), check, 0))
    files = [json.loads(s) for s in out[0].column(0).to_pylist()]
    for f in files:
        LocalStorage().complete_upload(PendingUpload.from_dict(f["upload"]))
    paths = [tmp_path / "out" / f["path"] for f in files]
    assert sum(f["rows"] for f in files) == n
    assert all(pq.read_metadata(p).row_group(g).num_rows <= chunkcopy.MAX_GROUP_ROWS
               for p in paths for g in range(pq.read_metadata(p).num_row_groups))
    import duckdb

    counts = duckdb.sql(f"SELECT count(*), count_if(b), count(f), count_if(f) FROM read_parquet({[str(p) for p in paths]})"
                        ).fetchall()
    evens, thousands = (n + 1) // 2, (n + 999) // 1000
    assert counts == [(n, (n + 2) // 3, n - thousands, evens - thousands)]
    copied = pa.concat_tables([pq.read_table(p) for p in paths])
    assert copied.num_rows == n and copied.column("b").equals(table.column("b"))
    assert copied.column("f").equals(table.column("f"))


DECIMALS = T.StructType([T.StructField("id", T.LongType()), T.StructField("small", T.DecimalType(12, 2)),
                         T.StructField("wide", T.DecimalType(38, 10))])


@pytest.mark.parametrize("as_integer", [False, True])
def test_decimals_stored_as_lading_stores_them_are_copied_with_signed_bounds(tmp_path: Path, as_integer: bool) -> None:
    """A decimal chunk stored as an unload stores it, as Spark does (an integer up to precision
    18, fixed-length bytes beyond), is copied, its footer bounds ordered as signed numbers (a
    negative value's bytes start 0xFF: in byte order it would be the maximum) and taken for the
    manifest without decoding it; a decimal(12,2) in fixed-length bytes (pyarrow's default) is
    encoded again. Either way the rows and the manifest entries are the task writer's."""
    n = 12_000
    ids = np.arange(n, dtype=np.int64)
    unscaled = (ids * 104_729) % 10**9 - 5 * 10**8
    table = pa.table({
        "id": pa.array(ids),
        "small": pa.array([None if i % 9 == 0 else Decimal(int(u)).scaleb(-2) for i, u in zip(ids, unscaled, strict=True)],
                          pa.decimal128(12, 2)),
        "wide": pa.array([None if i % 8 == 0 else Decimal(int(u)).scaleb(-1) for i, u in zip(ids, unscaled, strict=True)],
                         pa.decimal128(38, 10)),
    })
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(table, src / "0.parquet", row_group_size=6000, store_decimal_as_integer=as_integer)
    lading = types.arrow_schema(DECIMALS)

    def plan(dest: Path) -> TaskPlan:
        return TaskPlan(destination=f"file://{dest}/", format="parquet", options=ParquetOptions(row_group_rows=6000),
                        max_file_size=1 << 40, buffer_size=5 * MB, partition_by=(), keep_partition_columns=False,
                        token=None, spark_schema_json=DECIMALS.json())

    def check(uri: str, pf: pq.ParquetFile) -> None:
        sources_files.check_parquet_schema(uri, sources_files.parquet_schema(pf), DECIMALS)

    out = list(chunkcopy.write_split(plan(tmp_path / "out"), [(f"file://{src / '0.parquet'}", (src / "0.parquet").stat().st_size,
                                                                None, None)], lading, check, 0))
    files = [json.loads(s) for s in out[0].column(0).to_pylist()]
    for f in files:
        LocalStorage().complete_upload(PendingUpload.from_dict(f["upload"]))
    [f] = files
    path = tmp_path / "out" / f["path"]
    assert pq.read_metadata(path).created_by == chunkcopy.CREATED_BY.decode()
    back = pq.read_table(path)
    assert back.equals(table.cast(back.schema))
    assert f["columns"]["wide"]["min"].startswith("-") and f["columns"]["small"]["min"].startswith("-")

    # the task writer's manifest entry for the same rows
    from lading_jobs.storage import LocalStorage as Storage
    from lading_jobs.unload import formatting
    from lading_jobs.unload.task import TaskWriter

    tw_plan = plan(tmp_path / "tw")
    schema, conform = formatting.arrow_target(tw_plan.spark_schema_json)
    writer = TaskWriter(tw_plan, 0, Storage(), conform, schema, formatting.encoder_factory("parquet", tw_plan.options))
    for b in table.cast(lading).to_batches(max_chunksize=5000):
        writer.write(b)
    [written] = writer.finish()
    assert f["columns"] == written["columns"] and f["rows"] == written["rows"] == n

    raw_in, raw_out = (src / "0.parquet").read_bytes(), path.read_bytes()
    md_in, md_out = pq.read_metadata(src / "0.parquet"), pq.read_metadata(path)
    for g in range(2):
        for i, name in ((1, "small"), (2, "wide")):
            a, b = md_in.row_group(g).column(i), md_out.row_group(g).column(i)
            start_a, start_b = a.dictionary_page_offset or a.data_page_offset, b.dictionary_page_offset or b.data_page_offset
            copied = raw_in[start_a:start_a + a.total_compressed_size] == raw_out[start_b:start_b + b.total_compressed_size]
            assert copied is not (not as_integer and name == "small"), (g, name)
            values = back.column(name).slice(g * 6000, 6000)
            bounds = pc.min_max(values)
            assert (b.statistics.min, b.statistics.max) == (bounds["min"].as_py(), bounds["max"].as_py()), (g, name)
            assert b.statistics.min < 0 < b.statistics.max
