"""What the text formats write for floats and decimals, read back by readers lading did not write.

JSON lines: ``-0.0`` (``-0`` is the integer 0 to every JSON reader), whole doubles as ``100.0``
(``100`` made lading's own JSON → Parquet conversion infer ``int64``). CSV: the same spellings,
which PostgreSQL's ``COPY`` reads as float8; decimals in plain digits at every scale, as
PostgreSQL writes ``numeric`` (Arrow wrote ``0E-10``).
"""

from __future__ import annotations

import decimal
import json
import math
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from lading_jobs.formats import csv as lading_csv
from lading_jobs.formats import jsonl

DOUBLES = [-0.0, 100.0, 1e16, 1.5, -3.0, 0.0]
DECIMALS = ["0E-10", "-1.000E-7", "9999999999999999999999999999.9999999999", "12.5000000000"]
TABLE = pa.table({"x": pa.array(DOUBLES, pa.float64()), "f": pa.array(DOUBLES, pa.float32()),
                  "d": pa.array([decimal.Decimal(v) for v in [*DECIMALS, "0", "1"]], pa.decimal128(38, 10))})


def same(a: float, b: float) -> bool:
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def json_lines() -> bytes:
    return jsonl.JsonEncoder(TABLE.schema).encode(TABLE.to_batches()[0])


def test_json_lines_keep_negative_zero_and_doubles_for_every_reader(tmp_path: Path) -> None:
    data = json_lines()
    rows = [json.loads(line) for line in data.decode().splitlines()]
    assert all(isinstance(r["x"], float) and same(r["x"], v) for r, v in zip(rows, DOUBLES, strict=True))
    assert [decimal.Decimal(r["d"]) for r in rows[:4]] == [decimal.Decimal(v) for v in DECIMALS]
    assert rows[0]["d"] == "0.0000000000" and rows[1]["d"] == "-0.0000001000"
    inferred = jsonl.read_jsonl(data)  # lading's own JSON → Parquet conversion infers this schema
    assert inferred.schema.field("x").type == pa.float64() and inferred.schema.field("f").type == pa.float64()
    assert all(same(a, b) for a, b in zip(inferred.column("x").to_pylist(), DOUBLES, strict=True))
    path = tmp_path / "rows.jsonl"
    path.write_bytes(data)
    duck = duckdb.connect()
    got = duck.execute("SELECT x FROM read_json(?, format='newline_delimited')",
                       [str(path)]).fetchall()
    assert all(same(r[0], v) for r, v in zip(got, DOUBLES, strict=True))
    assert duck.execute("SELECT typeof(x) FROM read_json(?, format='newline_delimited') LIMIT 1",
                        [str(path)]).fetchone() == ("DOUBLE",)


def test_csv_writes_floats_as_floats_and_decimals_in_plain_digits() -> None:
    data = lading_csv.CsvEncoder(TABLE.schema).encode(TABLE.to_batches()[0])
    lines = data.decode().splitlines()
    assert lines[0] == "-0.0,-0.0,0.0000000000" and lines[1] == "100.0,100.0,-0.0000001000"
    assert "E" not in data.decode()
    read = pacsv.read_csv(pa.BufferReader(data), read_options=pacsv.ReadOptions(column_names=["x", "f", "d"]))
    assert read.schema.field("x").type == pa.float64()  # inferred a double, as written
    assert all(same(a, b) for a, b in zip(read.column("x").to_pylist(), DOUBLES, strict=True))


@pytest.mark.postgres
def test_postgresql_copy_reads_the_csv_and_writes_the_same_decimals(postgres_dsn: str) -> None:
    import psycopg

    data = lading_csv.CsvEncoder(TABLE.schema).encode(TABLE.to_batches()[0])
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS lading_floats")
        conn.execute("CREATE TABLE lading_floats (x float8, f float4, d numeric(38,10))")
        with conn.cursor().copy("COPY lading_floats FROM STDIN (FORMAT csv)") as copy:
            copy.write(data)
        got = conn.execute("SELECT x, x::text, d::text FROM lading_floats").fetchall()
    assert [g[1] for g in got][:2] == ["-0", "100"]  # PostgreSQL read -0.0 as -0 (and writes it so)
    assert all(same(g[0], v) for g, v in zip(got, DOUBLES, strict=True))
    ours = [line.split(",")[2] for line in data.decode().splitlines()]
    assert [g[2] for g in got] == ours  # numeric: PostgreSQL's own text, digit for digit
