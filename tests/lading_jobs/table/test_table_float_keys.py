"""Float upsert keys are equal as SQL finds them: -0.0 is the key 0.0, every NaN one key.

Arrow's group-by compares floats bit by bit, and every grouping by key (reads of upsert
tables, compaction, a load's and a stream's last row per key) used it: an upsert of key
-0.0 over key 0.0 left both rows, a delete of -0.0 did not delete 0.0, and a compaction
that dropped a -0.0 delete marker brought its 0.0 row back. Spark's GROUP BY (checked
here) merges them. Rows of diff and append tables stay identical only bit for bit (a row
reads back as written). Fails on dd6ccbf."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lading_jobs.compact import rewrite
from lading_jobs.ingest.task import sort_rows
from lading_jobs.stream.records import POS, last_per_key
from lading_jobs.table import consolidate as cons
from lading_jobs.table import format as fmt
from lading_jobs.table import reader, writer
from lading_jobs.table.log.commits import TableLog
from lading_jobs.table.schema import TableSchema

NAN = float("nan")
OTHER_NAN = float(np.frombuffer(np.uint64(0x7FF8000000000123).tobytes(), dtype=np.float64)[0])
SCHEMA = TableSchema.of([("k", "double"), ("v", "bigint")])


def rows(k: list[float], v: list[int | None], t: list[int], d: list[int]) -> pa.Table:
    return pa.table({"k": pa.array(k, pa.float64()), "v": pa.array(v, pa.int64()),
                     fmt.TIME_COLUMN: pa.array(t, pa.int64()), fmt.DIFF_COLUMN: pa.array(d, pa.int64())})


@pytest.fixture
def table_of(file_uri: Callable[[str], str]) -> Callable[[str, list[pa.Table]], str]:
    def make(envelope: str, commits: list[pa.Table]) -> str:
        uri = file_uri(f"t-{envelope}/")
        log = TableLog.create(uri, SCHEMA, envelope, ["k"] if envelope == "upsert" else ())
        for t in commits:
            written = writer.write_parts(uri, [t], SCHEMA, write_id=fmt.new_write_id())
            writer.commit_parts(uri, written, log=log)
        return uri
    return make


def test_the_nan_used_here_has_other_bits() -> None:
    assert np.float64(NAN).view(np.uint64) != np.float64(OTHER_NAN).view(np.uint64)


@pytest.mark.parametrize(("first", "second"), [(0.0, -0.0), (-0.0, 0.0), (NAN, OTHER_NAN)])
def test_an_upsert_of_an_equal_float_key_replaces_the_row(table_of: Any, first: float, second: float) -> None:
    uri = table_of("upsert", [rows([first, 1.5], [1, 7], [1, 1], [1, 1]), rows([second], [2], [2], [1])])
    got = reader.scan(uri).sort_by("v")
    assert got.column("v").to_pylist() == [2, 7]
    assert reader.scan(uri, as_of=1).sort_by("v").column("v").to_pylist() == [1, 7]


@pytest.mark.parametrize(("first", "second"), [(0.0, -0.0), (NAN, OTHER_NAN)])
def test_a_delete_of_an_equal_float_key_deletes_the_row(table_of: Any, first: float, second: float) -> None:
    uri = table_of("upsert", [rows([first, 1.5], [1, 7], [1, 1], [1, 1]), rows([second], [None], [2], [-1])])
    assert reader.scan(uri).column("v").to_pylist() == [7]


def test_diff_rows_stay_as_written_bit_for_bit(table_of: Any) -> None:
    uri = table_of("diff", [rows([0.0, -0.0, 0.0], [1, 1, 1], [1, 1, 1], [1, 1, 1])])
    signs = sorted(str(k) for k in reader.scan(uri).column("k").to_pylist())
    assert signs == ["-0.0", "0.0", "0.0"]


def test_a_compaction_that_drops_a_negative_zero_delete_drops_its_zero_row() -> None:
    group = rows([0.0, -0.0, 1.5], [1, None, 7], [1, 2, 1], [1, -1, 1])
    group = group.append_column(cons.SEQ_COLUMN, pa.array([1, 2, 1], pa.int64()))
    group = group.append_column(cons.POS_COLUMN, pa.array([0, 0, 1], pa.int64()))
    out = rewrite.consolidate(group, "upsert", ["k"], since=3, drop_deletes=True).rows
    assert out.column("v").to_pylist() == [7]  # before: the 0.0 row stayed and came back to life


def test_a_compaction_keeps_diff_rows_of_other_bits_apart() -> None:
    group = rows([0.0, -0.0, 0.0], [1, 1, 1], [1, 2, 1], [1, 1, -1])
    out = rewrite.consolidate(group, "diff", [], since=3).rows
    assert [str(k) for k in out.column("k").to_pylist()] == ["-0.0"]


def test_a_load_keeps_the_last_row_of_an_equal_float_key_before_sorting() -> None:
    t = pa.table({"k": pa.array([0.0, 1.5, -0.0], pa.float64()), "v": pa.array([1, 7, 2], pa.int64())})
    got = sort_rows(t, ("k",), "upsert", ("k",))
    assert got.column("v").to_pylist() == [2, 7]


def test_a_stream_keeps_the_last_message_of_an_equal_float_key() -> None:
    t = pa.table({"k": pa.array([NAN, -0.0, OTHER_NAN, 0.0], pa.float64()), POS: pa.array([1, 2, 3, 4], pa.int64())})
    assert sorted(last_per_key(t, ("k",)).column(POS).to_pylist()) == [3, 4]


def test_grouping_view_leaves_other_types_and_keeps_distinct_floats_apart() -> None:
    view = cons.grouping_view(pa.array([1.0, -1.0, 0.0, -0.0, None, NAN], pa.float64()))
    assert view is not None
    values = view.to_pylist()
    assert len({values[0], values[1], values[2]}) == 3 and values[2] == values[3] and values[4] is None
    bits = cons.grouping_view(pa.array([0.0, -0.0], pa.float64()), sql=False)
    assert bits is not None and bits[0] != bits[1]
    strings = pa.array(["a", None])
    assert cons.grouping_view(strings) is strings
    assert cons.grouping_view(pa.array([[1]])) is None
    f32 = cons.grouping_view(pa.array([0.0, -0.0], pa.float32()))
    assert f32 is not None and f32.type == pa.int32() and f32[0] == f32[1]


@pytest.mark.spark
def test_spark_groups_these_floats_the_same_way(spark: Any, table_of: Any) -> None:
    keys = [0.0, -0.0, NAN, OTHER_NAN, 1.5]
    df = spark.createDataFrame([(k,) for k in keys], "k double")
    spark_keys = df.groupBy("k").count().count()
    uri = table_of("upsert", [rows(keys, [1, 2, 3, 4, 5], [1] * 5, [1] * 5)])
    assert reader.scan(uri).num_rows == spark_keys == 3
