"""The ResultSpec interpreter over part statistics: each case is a part a wrong interpreter
would skip (a missing row) or one it must skip to be of any use. No Spark: the trees are
written as ``table.filters.catalyst`` builds them from Spark's plans (casts and eval modes included)."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from lading_jobs.table.filters import expr as vx
from lading_jobs.table.filters import interp as ip
from lading_jobs.table.stats.part import ColumnStats, PartStats

UTC_ENV = ip.Env(time_zone="UTC")
DAY = ip.MICROS_PER_DAY
HOUR = 3_600_000_000


def micros(*args: int, tz: dt.tzinfo = dt.UTC) -> int:
    t = dt.datetime(*args, tzinfo=tz)  # type: ignore[misc]
    return (t - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)


def days(y: int, m: int, d: int) -> int:
    return (dt.date(y, m, d) - dt.date(1970, 1, 1)).days


def part(rows: int = 10, **cols: ColumnStats) -> PartStats:
    return PartStats(rows=rows, columns={int(k[1:]): v for k, v in cols.items()})


def col(type_: str, cid: int = 1) -> vx.Col:
    return vx.Col(type_, cid)


def lit(type_: str, value: object) -> vx.Lit:
    return vx.Lit(type_, value)


def cmp(op: str, a: vx.Node, b: vx.Node) -> vx.Call:
    return vx.call(op, a, b)


def may(node: vx.Node, stats: PartStats, env: ip.Env = UTC_ENV) -> bool:
    return ip.might_match(node, stats, env)


# -- columns from statistics -----------------------------------------------------------------
def test_null_only_part_never_matches_a_comparison_but_matches_is_null() -> None:
    stats = part(rows=5, c1=ColumnStats(nulls=5))
    x = col("bigint")
    assert not may(cmp("eq", x, lit("bigint", 1)), stats)
    assert not may(vx.call("not", cmp("eq", x, lit("bigint", 1))), stats)  # NOT NULL is NULL
    assert may(vx.call("isnull", x), stats)
    assert not may(vx.call("isnotnull", x), stats)
    assert may(cmp("eqns", x, lit("bigint", None)), stats)  # NULL <=> NULL is TRUE


def test_missing_statistics_and_empty_parts() -> None:
    x = col("bigint")
    assert may(cmp("eq", x, lit("bigint", 1)), part())  # no statistics: anything
    assert not may(vx.call("isnull", x), part(rows=0))  # no rows: nothing matches
    assert may(vx.call("not", cmp("gt", x, lit("bigint", 1))), part(c1=ColumnStats(nulls=0, max=5)))


def test_null_literal_and_three_valued_logic() -> None:
    stats = part(c1=ColumnStats(nulls=0, min=1, max=5))
    x = col("bigint")
    null_cmp = cmp("eq", x, lit("bigint", None))
    assert not may(null_cmp, stats)
    assert not may(vx.call("not", null_cmp), stats)
    assert may(vx.call("or", null_cmp, cmp("eq", x, lit("bigint", 3))), stats)
    assert not may(vx.call("and", null_cmp, cmp("eq", x, lit("bigint", 3))), stats)
    # x NOT IN (1, NULL) is never TRUE
    assert not may(vx.call("not", vx.call("in", x, lit("bigint", 9), lit("bigint", None))), stats)
    assert may(vx.call("in", x, lit("bigint", 9), lit("bigint", 4)), stats)
    assert not may(vx.call("in", x, lit("bigint", 9), lit("bigint", None)), stats)


def test_nan_and_infinities_follow_spark_order() -> None:
    x = col("double")
    nan = float("nan")
    no_bounds = part(c1=ColumnStats(nulls=0))  # what a part holding NaN or ±inf records
    bounded = part(c1=ColumnStats(nulls=0, min=-1.0, max=2.0))
    assert may(cmp("eq", x, lit("double", nan)), no_bounds)
    assert not may(cmp("eq", x, lit("double", nan)), bounded)
    assert may(cmp("lt", x, lit("double", nan)), bounded)  # every number is below NaN
    assert not may(cmp("gt", x, lit("double", nan)), bounded)
    assert may(cmp("gt", x, lit("double", 1e308)), no_bounds)  # +inf may be there
    assert may(cmp("lt", x, lit("double", -1e308)), no_bounds)
    assert may(cmp("eq", x, lit("double", -0.0)), part(c1=ColumnStats(nulls=0, min=0.0, max=1.0)))


def test_truncated_string_bounds_are_bounds_not_values() -> None:
    x = col("string")
    stats = part(c1=ColumnStats(nulls=0, min="abc", max="abd", min_truncated=True, max_truncated=True))
    assert may(cmp("eq", x, lit("string", "abc" + "z" * 80)), stats)
    assert may(cmp("gt", x, lit("string", "abc")), stats)
    assert not may(cmp("gt", x, lit("string", "abd")), stats)
    assert not may(cmp("lt", x, lit("string", "abc")), stats)
    only_lower = part(c1=ColumnStats(nulls=0, min="\U0010ffff" * 64, min_truncated=True))
    assert may(cmp("gt", x, lit("string", "\U0010ffff" * 65)), only_lower)


def test_mistyped_bounds_are_open() -> None:
    stats = part(c1=ColumnStats(nulls=0, min="x", max="y"))
    assert may(cmp("eq", col("bigint"), lit("bigint", 1)), stats)


# -- arithmetic and overflow -----------------------------------------------------------------
def id_times_two_plus_one(mode: str = "ANSI") -> vx.Node:
    x = col("bigint")
    times = vx.call("mul", x, lit("bigint", 2), type="bigint", params=(mode,))
    return vx.call("add", times, lit("bigint", 1), type="bigint", params=(mode,))


def test_arithmetic_with_literals() -> None:
    f = cmp("lt", id_times_two_plus_one(), lit("bigint", 100))
    assert not may(f, part(c1=ColumnStats(nulls=0, min=50, max=70)))  # 101 … 141
    assert may(f, part(c1=ColumnStats(nulls=0, min=49, max=70)))  # 99
    neg = cmp("gt", vx.call("sub", lit("int", 10), col("int"), type="int", params=("ANSI",)), lit("int", 5))
    assert may(neg, part(c1=ColumnStats(nulls=0, min=0, max=4)))  # 10 - 4 = 6 > 5
    assert not may(neg, part(c1=ColumnStats(nulls=0, min=5, max=9)))
    by_negative = cmp("gt", vx.call("mul", col("int"), lit("int", -3), type="int", params=("ANSI",)), lit("int", 0))
    assert may(by_negative, part(c1=ColumnStats(nulls=0, min=-1, max=9)))
    assert not may(by_negative, part(c1=ColumnStats(nulls=0, min=0, max=9)))


def test_overflow_may_fail_under_ansi_so_the_part_is_kept() -> None:
    big = 2**62
    f = cmp("lt", id_times_two_plus_one(), lit("bigint", 100))
    stats = part(c1=ColumnStats(nulls=0, min=big, max=big + 5))  # id * 2 overflows: Spark raises
    assert may(f, stats)
    assert may(cmp("lt", id_times_two_plus_one("LEGACY"), lit("bigint", 100)), stats)  # wraps: anything
    assert not may(cmp("lt", id_times_two_plus_one("TRY"), lit("bigint", 100)), stats)  # NULL: never TRUE
    narrowing = cmp("gt", vx.call("cast", col("bigint"), type="int", params=("ANSI",)), lit("int", 0))
    assert may(narrowing, part(c1=ColumnStats(nulls=0, min=-(2**40), max=-1)))


def idiv(x: vx.Node, c: int | None, mode: str = "ANSI") -> vx.Call:
    return vx.call("idiv", x, lit("bigint", c), type="bigint", params=(mode,))


def test_integral_division_by_a_literal() -> None:
    n = col("bigint")
    per_thousand = cmp("eq", vx.call("add", idiv(n, 1000), lit("bigint", 1), type="bigint", params=("ANSI",)),
                       lit("bigint", 101))  # n DIV 1000 + 1 = 101
    assert may(per_thousand, part(c1=ColumnStats(nulls=0, min=100_000, max=100_999)))
    assert not may(per_thousand, part(c1=ColumnStats(nulls=0, min=101_000, max=101_999)))
    assert not may(per_thousand, part(c1=ColumnStats(nulls=3, min=99_000, max=99_999)))
    # truncation toward zero: -999 DIV 1000 is 0 (floor would say -1)
    zero = cmp("eq", idiv(n, 1000), lit("bigint", 0))
    assert may(zero, part(c1=ColumnStats(nulls=0, min=-1999, max=-999)))
    assert not may(zero, part(c1=ColumnStats(nulls=0, min=-1999, max=-1000)))
    # a negative divisor reverses the order
    assert may(cmp("gt", idiv(n, -10), lit("bigint", 2)), part(c1=ColumnStats(nulls=0, min=-30, max=0)))
    assert not may(cmp("gt", idiv(n, -10), lit("bigint", 2)), part(c1=ColumnStats(nulls=0, min=-29, max=100)))
    # DIV 0: an error for any non-NULL row under ANSI (read: Spark raises), NULL otherwise; a NULL divisor: NULL
    rows = part(c1=ColumnStats(nulls=0, min=1, max=5))
    assert may(cmp("eq", idiv(n, 0), lit("bigint", 7)), rows)
    assert not may(cmp("eq", idiv(n, 0, "LEGACY"), lit("bigint", 7)), rows)
    assert may(vx.call("isnull", idiv(n, 0, "TRY")), rows)
    assert not may(cmp("eq", idiv(n, 0), lit("bigint", 7)), part(rows=4, c1=ColumnStats(nulls=4)))
    assert not may(cmp("eq", idiv(n, None), lit("bigint", 7)), rows)
    # only -1 overflows (the smallest bigint): ANSI raises, legacy and TRY wrap to it
    smallest = part(c1=ColumnStats(nulls=0, min=-(2**63), max=-(2**63) + 3))
    assert may(cmp("lt", idiv(n, -1), lit("bigint", 0)), smallest)
    assert may(cmp("lt", idiv(n, -1, "TRY"), lit("bigint", 0)), smallest)
    assert not may(cmp("lt", idiv(n, 2), lit("bigint", -(2**62) - 2)), smallest)
    # the literal on the left, or a decimal: not monotone here, anything
    assert may(cmp("eq", vx.call("idiv", lit("bigint", 7), n, type="bigint", params=("ANSI",)), lit("bigint", 99)),
               rows)
    assert may(cmp("eq", idiv(col("decimal(10,2)"), 10), lit("bigint", 99)),
               part(c1=ColumnStats(nulls=0, min="1.00", max="5.00")))


def test_casts() -> None:
    amount = col("decimal(38,2)")
    to_long = cmp("gt", vx.call("cast", amount, type="bigint", params=("ANSI",)), lit("bigint", 10))
    assert not may(to_long, part(c1=ColumnStats(nulls=0, min="-5.00", max="10.99")))  # truncates to 10
    assert may(to_long, part(c1=ColumnStats(nulls=0, min="-5.00", max="11.00")))
    huge = "9" * 36 + ".99"
    assert may(to_long, part(c1=ColumnStats(nulls=0, min="0.00", max=huge)))  # overflow: fails
    to_double = cmp("gt", vx.call("cast", col("bigint"), type="double", params=("ANSI",)), lit("double", 9.007199254740992e15))
    assert not may(to_double, part(c1=ColumnStats(nulls=0, min=0, max=2**53 + 1)))  # rounds to 2^53, as Spark
    assert may(to_double, part(c1=ColumnStats(nulls=0, min=0, max=2**53 + 2)))
    dbl = vx.call("cast", col("double"), type="int", params=("ANSI",))
    assert may(cmp("gt", dbl, lit("int", 0)), part(c1=ColumnStats(nulls=0)))  # NaN or inf: fails
    narrow = vx.call("cast", col("decimal(38,10)"), type="decimal(10,2)", params=("ANSI",))
    d = decimal.Decimal
    assert not may(cmp("gt", narrow, lit("decimal(10,2)", d("1.00"))), part(c1=ColumnStats(nulls=0, min="0", max="0.994")))
    assert may(cmp("gt", narrow, lit("decimal(10,2)", d("0.99"))), part(c1=ColumnStats(nulls=0, min="0", max="0.995")))


def dec_op(fn: str, x: vx.Node, c: str, c_type: str, type_: str, mode: str = "ANSI", left: bool = False) -> vx.Call:
    """``x fn c`` (``c fn x`` when ``left``) in Spark's result type ``type_`` (what its analyser gives)."""
    literal = lit(c_type, decimal.Decimal(c))
    return vx.call(fn, *((literal, x) if left else (x, literal)), type=type_, params=(mode,))


def test_decimal_arithmetic_with_literals() -> None:
    d = decimal.Decimal
    amount = col("decimal(10,2)")
    times = cmp("gt", dec_op("mul", amount, "1.5", "decimal(2,1)", "decimal(13,3)"), lit("decimal(13,3)", d("16")))
    assert not may(times, part(c1=ColumnStats(nulls=0, min="10.00", max="10.66")))  # 15.990
    assert may(times, part(c1=ColumnStats(nulls=0, min="10.00", max="10.67")))  # 16.005
    minus = cmp("lt", dec_op("sub", amount, "7.5", "decimal(2,1)", "decimal(11,2)", left=True), lit("decimal(11,2)", d("0")))
    assert not may(minus, part(c1=ColumnStats(nulls=0, min="-3.00", max="7.50")))  # 7.5 - x ≥ 0
    assert may(minus, part(c1=ColumnStats(nulls=0, min="-3.00", max="7.51")))
    # x / 3 in decimal(14,6): 0.02 / 3 = 0.0066666… rounds half up to 0.006667, as Spark
    third = dec_op("div", amount, "3", "decimal(1,0)", "decimal(14,6)")
    small = part(c1=ColumnStats(nulls=0, min="0.00", max="0.02"))
    assert may(cmp("ge", third, lit("decimal(14,6)", d("0.006667"))), small)
    assert not may(cmp("gt", third, lit("decimal(14,6)", d("0.006667"))), small)
    by_negative = dec_op("div", amount, "-0.3", "decimal(1,1)", "decimal(15,6)")
    assert not may(cmp("gt", by_negative, lit("decimal(15,6)", d("-1"))), part(c1=ColumnStats(nulls=0, min="0.30", max="5.00")))
    assert may(cmp("ge", by_negative, lit("decimal(15,6)", d("-1"))), part(c1=ColumnStats(nulls=0, min="0.30", max="5.00")))
    assert may(cmp("gt", dec_op("div", amount, "2", "decimal(1,0)", "decimal(14,6)"), lit("decimal(14,6)", d("0"))),
               part(c1=ColumnStats(nulls=0)))  # no bounds: anything
    assert may(cmp("gt", vx.call("div", lit("decimal(1,0)", d(1)), amount, type="decimal(14,11)", params=("ANSI",)),
                   lit("decimal(14,11)", d("100"))), part(c1=ColumnStats(nulls=0, min="1.00", max="2.00")))  # c / x: anything


def test_decimal_results_are_rounded_once_from_the_exact_value() -> None:
    """Spark rounds the exact product or quotient half up once to the result's scale (checked
    against this Spark): rounding first to 38 digits or places would give the next value up."""
    d = decimal.Decimal
    x = col("decimal(20,19)")
    one = part(c1=ColumnStats(nulls=0, min="1.2080080960592049287", max="1.2080080960592049287"))
    product = dec_op("mul", x, "1.3769495163238368054", "decimal(20,19)", "decimal(38,35)")
    spark = d("1.66336616358400121664342876257414277")  # exactly ...277498: 38 digits first gives ...278
    assert may(cmp("eq", product, lit("decimal(38,35)", spark)), one)
    assert not may(cmp("gt", product, lit("decimal(38,35)", spark)), one)
    wide = col("decimal(38,2)")
    big = part(c1=ColumnStats(nulls=0, min="1500000000000000000000000000", max="1500000000000000000000000000"))
    quotient = dec_op("div", wide, "1000000000000000000000000000000002", "decimal(34,0)", "decimal(38,6)")
    # 0.0000014999…(31 nines)…97…: 38 places first gives 0.000002
    assert may(cmp("eq", quotient, lit("decimal(38,6)", d("0.000001"))), big)
    assert not may(cmp("gt", quotient, lit("decimal(38,6)", d("0.000001"))), big)


def test_decimal_overflow_and_division_by_zero() -> None:
    d = decimal.Decimal
    wide = col("decimal(38,2)")
    huge = part(c1=ColumnStats(nulls=0, min="1" + "0" * 30, max="9" * 36 + ".99"))  # every product overflows
    for mode, kept in (("ANSI", True), ("TRY", False), ("LEGACY", False)):  # fails; NULL; NULL (not wrapped)
        f = cmp("lt", dec_op("mul", wide, "10000000000", "decimal(11,0)", "decimal(38,2)", mode), lit("decimal(38,2)", d(0)))
        assert may(f, huge) is kept, mode
        g = cmp("gt", dec_op("div", wide, "0", "decimal(1,0)", "decimal(38,6)", mode), lit("decimal(38,6)", d(0)))
        assert may(g, part(c1=ColumnStats(nulls=0, min="1.00", max="2.00"))) is kept, mode
    assert not may(cmp("gt", dec_op("div", wide, "0", "decimal(1,0)", "decimal(38,6)"), lit("decimal(38,6)", d(0))),
                   part(rows=3, c1=ColumnStats(nulls=3)))  # every row NULL: NULL / 0 is NULL, no error
    # one quantum past the largest value overflows: Spark raises (the limit is exact, not 28 digits)
    top = part(c1=ColumnStats(nulls=0, min="9" * 36 + ".99", max="9" * 36 + ".99"))
    assert may(cmp("eq", dec_op("add", wide, "0.01", "decimal(2,2)", "decimal(38,2)"), lit("decimal(38,2)", d(5))), top)
    narrow = vx.call("cast", col("decimal(38,3)"), type="decimal(37,2)", params=("ANSI",))
    assert may(cmp("eq", narrow, lit("decimal(37,2)", d(5))),
               part(c1=ColumnStats(nulls=0, min="9" * 35 + ".995", max="9" * 35 + ".995")))  # rounds to 10^35
    fits = part(c1=ColumnStats(nulls=0, min="1.00", max="2.00"))
    assert not may(cmp("gt", dec_op("mul", wide, "10000000000", "decimal(11,0)", "decimal(38,2)"),
                       lit("decimal(38,2)", d("20000000000"))), fits)


# -- time --------------------------------------------------------------------------------------
def test_current_timestamp_minus_thirty_days() -> None:
    now = micros(2026, 11, 27, 12)
    env = ip.Env(now_lo=now, now_hi=None, time_zone="UTC")
    ts = col("timestamp")
    month_ago = vx.call("time_add", vx.Now("timestamp"), lit("interval day", -30 * DAY), type="timestamp")
    f = cmp("gt", ts, month_ago)
    old = part(c1=ColumnStats(nulls=0, min=micros(2026, 10, 1), max=micros(2026, 10, 28, 11)))
    recent = part(c1=ColumnStats(nulls=0, min=micros(2026, 10, 1), max=micros(2026, 10, 28, 12, 0, 1)))
    assert not may(f, old, env)
    assert may(f, recent, env)
    assert may(f, old, ip.Env(time_zone="UTC"))  # an unknown instant: anything
    # ts + INTERVAL 1 HOUR >= now()
    g = cmp("ge", vx.call("time_add", ts, lit("interval hour", HOUR), type="timestamp"), vx.Now("timestamp"))
    assert not may(g, part(c1=ColumnStats(nulls=0, min=0, max=now - HOUR - 1)), env)
    assert may(g, part(c1=ColumnStats(nulls=0, min=0, max=now - HOUR)), env)
    assert may(g, part(c1=ColumnStats(nulls=0, max=now - HOUR - 1)), env)  # no lower bound: may overflow


def test_date_trunc_day_in_utc_and_in_a_zone_with_dst() -> None:
    ts = col("timestamp")
    nov1 = vx.call("cast", lit("date", days(2026, 11, 1)), type="timestamp", params=("ANSI",))
    f = cmp("eq", vx.call("date_trunc", ts, type="timestamp", params=("DAY",)), nov1)
    oct31 = part(c1=ColumnStats(nulls=0, min=micros(2026, 10, 31), max=micros(2026, 10, 31, 23, 59, 59)))
    nov1_part = part(c1=ColumnStats(nulls=0, min=micros(2026, 11, 1), max=micros(2026, 11, 1, 23)))
    assert not may(f, oct31)
    assert may(f, nov1_part)
    # America/New_York leaves DST on 2026-11-01: a row at 2026-11-01T03:30Z is Oct 31 23:30 local
    # and 2026-11-02T04:30Z is Nov 1 23:30 local; both days' rows must be kept
    ny = ip.Env(time_zone="America/New_York")
    tz = dt.timezone(dt.timedelta(hours=-4))
    late_local_nov1 = part(c1=ColumnStats(nulls=0, min=micros(2026, 11, 2, 4, 30), max=micros(2026, 11, 2, 4, 31)))
    assert may(f, late_local_nov1, ny)
    assert may(f, part(c1=ColumnStats(nulls=0, min=micros(2026, 11, 1, 0, 30, tz=tz), max=micros(2026, 11, 1, 1, tz=tz))), ny)
    far = part(c1=ColumnStats(nulls=0, min=micros(2026, 10, 20), max=micros(2026, 10, 25)))
    assert not may(f, far, ny)


def test_cast_to_date_between_and_year_month_day_piecewise() -> None:
    to_date = vx.call("cast", col("timestamp"), type="date", params=("ANSI",))
    between = vx.call("and", cmp("ge", to_date, lit("date", days(2026, 1, 1))), cmp("le", to_date, lit("date", days(2026, 2, 1))))
    assert not may(between, part(c1=ColumnStats(nulls=0, min=micros(2026, 2, 2), max=micros(2026, 3, 1))))
    assert may(between, part(c1=ColumnStats(nulls=0, min=micros(2026, 2, 1, 23), max=micros(2026, 3, 1))))
    # Kiritimati (+14): a UTC instant on Feb 1 at 11:00 is Feb 2 locally
    assert not may(between, part(c1=ColumnStats(nulls=0, min=micros(2026, 2, 1, 11), max=micros(2026, 3, 1))),
                   ip.Env(time_zone="+14:00"))
    year = cmp("eq", vx.call("year", to_date, type="int"), lit("int", 2026))
    month = cmp("eq", vx.call("month", to_date, type="int"), lit("int", 11))
    f = vx.call("and", year, month)
    assert not may(f, part(c1=ColumnStats(nulls=0, min=micros(2026, 9, 1), max=micros(2026, 10, 31, 23))))
    assert may(f, part(c1=ColumnStats(nulls=0, min=micros(2025, 12, 1), max=micros(2026, 1, 31))))  # years 2025 … 2026: months 1 … 12
    assert may(f, part(c1=ColumnStats(nulls=0, min=micros(2025, 12, 1), max=micros(2027, 1, 2))))
    day = cmp("eq", vx.call("day", to_date, type="int"), lit("int", 15))
    assert not may(day, part(c1=ColumnStats(nulls=0, min=micros(2026, 3, 1), max=micros(2026, 3, 14))))
    assert may(day, part(c1=ColumnStats(nulls=0, min=micros(2026, 3, 20), max=micros(2026, 4, 2))))  # two months: days 1 … 31


def test_trunc_date_add_unix_timestamp_and_coalesce() -> None:
    d = col("date")
    month_start = cmp("eq", vx.call("trunc", d, type="date", params=("MM",)), lit("date", days(2026, 1, 1)))
    assert not may(month_start, part(c1=ColumnStats(nulls=0, min=days(2026, 2, 1), max=days(2026, 2, 9))))
    assert may(month_start, part(c1=ColumnStats(nulls=0, min=days(2026, 1, 31), max=days(2026, 2, 9))))
    plus3 = cmp("gt", vx.call("date_add", d, lit("int", 3), type="date"), lit("date", days(2026, 1, 1)))
    assert not may(plus3, part(c1=ColumnStats(nulls=0, min=0, max=days(2025, 12, 29))))
    assert may(plus3, part(c1=ColumnStats(nulls=0, min=0, max=days(2025, 12, 30))))
    unix = cmp("gt", vx.call("unix_timestamp", col("timestamp"), type="bigint"), lit("bigint", 5))
    assert not may(unix, part(c1=ColumnStats(nulls=0, max=5_999_999)))
    assert may(unix, part(c1=ColumnStats(nulls=0, max=6_000_000)))
    assert not may(unix, part(c1=ColumnStats(nulls=0, min=-10, max=-1)))
    coalesced = cmp("eq", vx.call("coalesce", col("bigint"), lit("bigint", 3), type="bigint"), lit("bigint", 3))
    assert may(coalesced, part(c1=ColumnStats(nulls=1, min=10, max=20)))  # the NULL row reads 3
    assert not may(coalesced, part(c1=ColumnStats(nulls=0, min=10, max=20)))


def test_unannotated_function_may_return_anything() -> None:
    f = cmp("eq", vx.Opaque("string"), lit("string", "x"))
    assert may(f, part(c1=ColumnStats(nulls=0, min=1, max=2)))
    g = vx.call("and", cmp("eq", col("bigint"), lit("bigint", 99)), vx.call("isnull", vx.Opaque("string")))
    assert may(g, part(c1=ColumnStats(nulls=0, min=1, max=2)))  # may fail: Spark would raise


def test_json_round_trip() -> None:
    tree = vx.call("and", cmp("gt", col("double"), lit("double", float("-inf"))),
                   cmp("eq", col("decimal(38,2)", 2), lit("decimal(38,2)", decimal.Decimal("1.25"))),
                   vx.Now("timestamp"))
    assert vx.from_json(vx.to_json(tree)) == tree


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Australia/Lord_Howe", "America/Asuncion", "-03:30"])
def test_date_trunc_hour_never_loses_a_row_around_transitions(zone: str) -> None:
    """Every hour of 2026 in steps of 17 minutes, against Python's own local truncation:
    a part of one row is kept whenever its row's truncated hour is the literal."""
    ts = col("timestamp")
    env = ip.Env(time_zone=zone)
    z, _ = ip.zone(zone)
    start = micros(2026, 3, 1)
    for step in range(0, 60 * 24 * 40, 17 * 7):
        m = start + step * 60_000_000
        local = (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=m)).astimezone(z)
        trunc = local.replace(minute=0, second=0, microsecond=0)
        target = (trunc - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
        f = cmp("eq", vx.call("date_trunc", ts, type="timestamp", params=("HOUR",)), lit("timestamp", target))
        assert may(f, part(rows=1, c1=ColumnStats(nulls=0, min=m, max=m)), env)


def test_add_months_clamps_the_day_and_stays_monotone() -> None:
    """``ts - INTERVAL 1 MONTH < TIMESTAMP'2026-02-28 12:00'``: Mar 29 … 31 all land on Feb 28."""
    ts = col("timestamp")
    back = vx.call("add_months", ts, lit("interval month", -1), type="timestamp")
    f = cmp("lt", back, lit("timestamp", micros(2026, 2, 28, 12)))
    assert may(f, part(c1=ColumnStats(nulls=0, min=micros(2026, 3, 31), max=micros(2026, 4, 5))))  # Mar 31 - 1 month
    assert not may(f, part(c1=ColumnStats(nulls=0, min=micros(2026, 3, 31, 12), max=micros(2026, 4, 5))))
    assert may(f, part(c1=ColumnStats(nulls=0, max=micros(2026, 4, 5))))  # no lower bound: may fail
