"""Casting with per-value failures (pure, no Spark but for one comparison with Spark's own
CAST): ANSI semantics, never a silent NULL."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from lading_jobs.ingest.cast import cast_column


def test_good_values_cast_in_one_go_and_nulls_stay_null() -> None:
    out, failures = cast_column(pa.array(["1", " 2 ", None]), pa.int64())
    assert out.to_pylist() == [1, 2, None]
    assert failures == []


def test_bad_values_are_found_by_position_among_many() -> None:
    values = [str(i) for i in range(1000)]
    values[17], values[640], values[999] = "x", "99999999999999999999", "1.5"
    out, failures = cast_column(pa.array(values), pa.int64(), "bigint")
    assert [i for i, _ in failures] == [17, 640, 999]
    assert "'x' is not a valid bigint" in failures[0][1]
    assert out.null_count == 3 and out[18].as_py() == 18


def test_invalid_utf8_is_reported_as_such() -> None:
    out, failures = cast_column(pa.array([b"ok", b"\xff\xfe", b"fine"]), pa.string())
    assert out.to_pylist() == ["ok", None, "fine"]
    assert failures == [(1, "invalid UTF-8")]


@pytest.mark.parametrize(("typ", "text", "value"), [
    (pa.bool_(), "Yes", True),
    (pa.bool_(), "f", False),
    (pa.timestamp("us", "UTC"), "2024-01-02 03:04:05", dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)),
    (pa.timestamp("us", "UTC"), "2024-01-02T05:04:05+02:00", dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)),
    (pa.date32(), " 2024-01-02", dt.date(2024, 1, 2)),
    (pa.decimal128(5, 2), "12.5", decimal.Decimal("12.50")),
])
def test_text_conversions_follow_spark(typ: pa.DataType, text: str, value: object) -> None:
    out, failures = cast_column(pa.array([text]), typ)
    assert failures == []
    assert out[0].as_py() == value


@pytest.mark.parametrize(("typ", "good", "text"), [
    (pa.bool_(), "1", "maybe"), (pa.int32(), "1", "3000000000"), (pa.decimal128(5, 2), "1", "1.234"),
    (pa.decimal128(5, 2), "1", "123456"), (pa.date32(), "2024-12-01", "2024-13-01"),
])
def test_values_that_do_not_fit_are_failures(typ: pa.DataType, good: str, text: str) -> None:
    out, failures = cast_column(pa.array([good, text]), typ)
    assert [i for i, _ in failures] == [1]
    assert out[1].as_py() is None


def test_float_to_int_truncates_but_overflow_fails() -> None:
    out, failures = cast_column(pa.array([1.9, -2.5, 1e30, float("nan")]), pa.int64())
    assert out.to_pylist()[:2] == [1, -2]
    assert [i for i, _ in failures] == [2, 3]


def test_integers_into_a_decimal_check_its_precision() -> None:
    out, failures = cast_column(pa.array([12, 10**12]), pa.decimal128(10, 2))
    assert out[0].as_py() == decimal.Decimal("12.00")
    assert [i for i, _ in failures] == [1]


def test_a_date_alone_is_midnight_utc_not_a_date_with_an_offset() -> None:
    # The offset pattern read the "-02" of 2024-01-02 as a zone offset: every date-only value of a
    # timestamp column was rejected ("expected a zone offset"), though timestamp_ntz took it.
    utc = dt.UTC
    values = ["2024-01-02", "2024-01-02 10:00:00+02", "2024-01-02T10:00:00.5-05:30", "2024-01-02 10:00"]
    out, failures = cast_column(pa.array(values), pa.timestamp("us", "UTC"))
    assert failures == []
    assert out.to_pylist() == [dt.datetime(2024, 1, 2, tzinfo=utc), dt.datetime(2024, 1, 2, 8, tzinfo=utc),
                               dt.datetime(2024, 1, 2, 15, 30, 0, 500000, tzinfo=utc),
                               dt.datetime(2024, 1, 2, 10, tzinfo=utc)]


def test_integers_read_as_postgresql_reads_them() -> None:
    # '+5' was rejected (PostgreSQL takes it) and '0x10' loaded as 16 (PostgreSQL refuses it).
    out, failures = cast_column(pa.array(["+5", " 7 ", "-3", "+-5", "0x10", None]), pa.int64())
    assert out.to_pylist() == [5, 7, -3, None, None, None]
    assert [i for i, _ in failures] == [3, 4]


def test_a_float_out_of_its_range_is_an_error_not_infinity_or_zero() -> None:
    out, failures = cast_column(pa.array(["1e400", "1e-400", "inf", "-Infinity", "0.000", "1.5", "1e39", None]),
                                pa.float32())
    assert [i for i, _ in failures] == [0, 1, 6]
    assert "out of range for float" in failures[0][1]
    assert out.to_pylist()[2:6] == [float("inf"), float("-inf"), 0.0, 1.5]


def test_a_float_into_a_decimal_rounds_its_shortest_text_half_away_from_zero() -> None:
    # As Spark's CAST (Double.toString, HALF_UP) and PostgreSQL's float8 to numeric give them; Arrow's
    # cast rounded the binary value (2.675 is 2.67499999...): 2.67, 1.00, -2.67, 123456789.12.
    values = [2.675, 1.005, 0.1, -2.675, 123456789.125, 1e-30, 0.1 + 0.2, -0.005, None]
    out, failures = cast_column(pa.array(values), pa.decimal128(12, 2), "decimal(12,2)")
    assert failures == []
    assert out.to_pylist() == [decimal.Decimal(v) for v in ("2.68", "1.01", "0.10", "-2.68", "123456789.13", "0.00",
                                                             "0.30", "-0.01")] + [None]
    # a float is the double it is, as in Spark: 2.675f is 2.6749999523162842
    floats, _ = cast_column(pa.array([0.1, 2.675], pa.float32()), pa.decimal128(5, 2), "decimal(5,2)")
    assert floats.to_pylist() == [decimal.Decimal("0.10"), decimal.Decimal("2.67")]
    out, failures = cast_column(pa.array([1.5, float("nan"), 1e10, float("inf")]), pa.decimal128(12, 2),
                                "decimal(12,2)")
    assert out.to_pylist()[0] == decimal.Decimal("1.50") and [i for i, _ in failures] == [1, 2, 3]
    assert "is not a valid decimal(12,2)" in failures[1][1]


VALID_JSON = ['{"a": [1, 2.5, null], "b": {"c": "x,\\"y\\":2"}}', "[]", "5", "-0.5e3", '"text"', "null", "true",
              ' {"a":\n 1} ', '"NaN"', '{"Infinity": "-Infinity"}', '"\\u00e9"']
INVALID_JSON = ["", "  ", "not json", "{bad", '{"a":1}}', "1,2", '1,"w":2', '1} {"v":2', "NaN", "[1, Infinity]",
                "-Infinity", "01", "'x'", '{"a":1,}', '"a\nb"', '"tab\there"']


def test_a_json_column_takes_one_json_text_per_value_as_postgresql_does() -> None:
    # Any text loaded: 'not json', '{bad' and '1,"w":2' were json values.
    values = VALID_JSON + INVALID_JSON + [None]
    out, failures = cast_column(pa.array(values), pa.string(), "json")
    assert [i for i, _ in failures] == list(range(len(VALID_JSON), len(VALID_JSON) + len(INVALID_JSON)))
    assert out.to_pylist() == VALID_JSON + [None] * (len(INVALID_JSON) + 1)
    assert failures[2][1] == "'not json' is not a valid json: not a JSON text"
    assert "NaN and Infinity are no JSON numbers" in failures[8][1]


def test_json_values_of_any_type_one_after_another_check_in_one_go(monkeypatch: pytest.MonkeyPatch) -> None:
    # Values whose types differ (an object, then a number, then an object with another type under
    # the same key) would stop a reader that builds columns, and halving would then parse the 4,000
    # values one by one; the check builds none: one read per layout.
    from lading_jobs.ingest import cast

    reads: list[int] = []
    read = cast._json_lines_read
    monkeypatch.setattr(cast, "_json_lines_read", lambda lines: reads.append(len(lines)) or read(lines))
    values = pa.array(['{"a": 1}', "5", '{"a": "s"}', "[true]"] * 1000)
    out, failures = cast_column(values, pa.string(), "json")
    assert failures == [] and out.equals(values)
    assert reads == [4000, 4000]


SECONDS = [1_700_000_000, -1, 0, 253_402_300_799, -62_135_596_800]
FRACTIONS = [1.5, -1.5, 1_700_000_000.0000019, 0.0000019]
DECIMALS = [decimal.Decimal("1700000000.1234567"), decimal.Decimal("-0.0000019")]
OUT_OF_RANGE = [253_402_300_800, -62_135_596_801, 9_223_372_036_854, 9_223_372_036_854_775_807]


def _micros(arr: pa.Array, typ: pa.DataType, type_name: str) -> tuple[list[int | None], list[int]]:
    out, failures = cast_column(arr, typ, type_name)
    return pc_micros(out), [i for i, _ in failures]


def pc_micros(out: pa.Array) -> list[int | None]:
    return out.cast(pa.timestamp("us")).cast(pa.int64()).to_pylist()


@pytest.mark.parametrize("typ, type_name", [(pa.timestamp("us", tz="UTC"), "timestamp"),
                                            (pa.timestamp("us"), "timestamp_ntz")])
def test_numbers_cast_to_timestamps_are_seconds_since_the_epoch(typ: pa.DataType, type_name: str) -> None:
    # 1700000000 was 1970-01-01 00:28:20 (Arrow's cast: microseconds); Spark's CAST says 2023-11-14 22:13:20
    micros, failed = _micros(pa.array(SECONDS + [None]), typ, type_name)
    assert micros == [s * 1_000_000 for s in SECONDS] + [None] and failed == []
    out, _ = cast_column(pa.array([1_700_000_000]), typ, type_name)
    assert out.cast(pa.timestamp("us")).to_pylist() == [dt.datetime(2023, 11, 14, 22, 13, 20)]
    # fractions truncated toward zero to the microsecond (a float as a double, a decimal exactly)
    assert _micros(pa.array(FRACTIONS), typ, type_name) == (
        [1_500_000, -1_500_000, 1_700_000_000_000_002, 1], [])
    assert _micros(pa.array(DECIMALS, pa.decimal128(20, 7)), typ, type_name) == ([1_700_000_000_123_456, -1], [])


def test_numbers_outside_the_timestamp_range_are_rejected_naming_why_not_wrapped() -> None:
    values = [1, *OUT_OF_RANGE, 2]
    out, failures = cast_column(pa.array(values), pa.timestamp("us", tz="UTC"), "timestamp")
    assert [i for i, _ in failures] == [1, 2, 3, 4] and pc_micros(out) == [1_000_000, None, None, None, None,
                                                                            2_000_000]
    assert failures[0][1] == ("253402300800 is not a valid timestamp: seconds since 1970 out of the timestamp "
                              "range (years 1 to 9999)")
    out, failures = cast_column(pa.array([float("nan"), float("inf"), 1e300, 2.0**64], pa.float64()),
                                pa.timestamp("us", tz="UTC"), "timestamp")
    assert [i for i, _ in failures] == [0, 1, 2, 3] and out.null_count == 4
    assert "NaN and infinities are no time" in failures[0][1]
    _, failures = cast_column(pa.array([2**63 + 5], pa.uint64()), pa.timestamp("us", tz="UTC"), "timestamp")
    assert [i for i, _ in failures] == [0]


@pytest.mark.spark
def test_numbers_cast_to_timestamps_as_spark_sql_casts_them(spark: object) -> None:
    literals = [f"{s}L" for s in SECONDS] + [f"{f!r}D" for f in FRACTIONS] + [f"{d}BD" for d in DECIMALS]
    row = spark.sql("SELECT " + ", ".join(f"unix_micros(CAST({x} AS TIMESTAMP))"  # type: ignore[attr-defined]
                                          for x in literals)).collect()[0]
    expected = list(row)
    ours = (_micros(pa.array(SECONDS), pa.timestamp("us", tz="UTC"), "timestamp")[0]
            + _micros(pa.array(FRACTIONS), pa.timestamp("us", tz="UTC"), "timestamp")[0]
            + _micros(pa.array(DECIMALS, pa.decimal128(20, 7)), pa.timestamp("us", tz="UTC"), "timestamp")[0])
    assert ours == expected
