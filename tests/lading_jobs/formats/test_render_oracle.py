"""The float and decimal CSV/JSON renderers against the ones they replaced (issue 44).

``old_render_float`` and ``old_render_decimal`` are main's code before the change, kept
verbatim as the oracle: the new ones (numpy classification, int64 text for whole doubles
and for decimals whose unscaled values fit 64 bits) must give the same text, byte for
byte, on hypothesis-generated arrays with NULLs, NaN, ±inf, -0.0, subnormals, huge and
tiny exponents, whole values around Arrow's plain/exponent boundary, and decimals at
maximum precision; sliced arrays included.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lading_jobs.formats import text
from lading_jobs.formats.text import concat

# --- the oracle: main's renderers before issue 44, verbatim ------------------------------

def old_render_decimal(arr: pa.Array) -> pa.Array:
    """Decimals in plain digits with every fraction digit of the scale (``-12.340000``,
    ``0.0000000000``), as PostgreSQL writes ``numeric``: never an exponent.

    For the decimals whose unscaled value fits in 64 bits (precision ≤ 18) and whose text
    Arrow's cast never writes with an exponent (scale ≤ 6), at about half that cast's cost:
    the unscaled magnitude's integer text, padded to one digit more than the scale, a point
    inserted ``scale`` digits from its end, a ``-`` before the negative ones. A scale of 7 or
    more (where Arrow writes ``1E-7``, ``0E-10``) takes the same steps over the text of the
    unscaled value (``_decimal_plain``); other decimals take Arrow's cast."""
    t = arr.type
    n = len(arr)
    if not pa.types.is_decimal128(t) or t.precision > 18 or not 0 <= t.scale <= 6 or n == arr.null_count:
        if (pa.types.is_decimal128(t) or pa.types.is_decimal256(t)) and t.scale > 6 and n > arr.null_count:
            return text._decimal_plain(arr)  # unchanged by issue 44
        return arr.cast(pa.string())
    # a decimal128 is 16 bytes of little-endian two's complement; under 10**18 the low word holds it
    unscaled = np.frombuffer(arr.buffers()[1], np.int64)[2 * arr.offset: 2 * (arr.offset + n): 2]
    negative = unscaled < 0
    digits = pa.array(np.abs(unscaled)).cast(pa.string())
    if t.scale:
        digits = pc.binary_replace_slice(pc.ascii_lpad(digits, t.scale + 1, "0"), -t.scale, -t.scale, ".")
    if negative.any():
        digits = concat(pc.if_else(pa.array(negative), "-", ""), digits)
    if arr.null_count:
        digits = pc.if_else(arr.is_valid(), digits, pa.scalar(None, digits.type))
    return digits


def old_render_float(arr: pa.Array, nan: str, inf: str, neg_inf: str) -> pa.Array:
    """Floats → shortest round-trip text, always spelled as a float: a whole value Arrow writes
    as an integer (``100``, ``-0``) gets ``.0`` (``100.0``, ``-0.0``), so JSON readers read a
    double (and -0.0 keeps its sign) and CSV readers infer one; ``1e+16`` already is one.
    NaN and ±infinity as the given words."""
    text = arr.cast(pa.string())
    whole = pc.and_(pc.is_finite(arr), pc.equal(arr, pc.floor(arr)))
    if pc.any(whole).as_py():
        integral = pc.and_(whole, pc.invert(pc.match_substring(text, "e")))
        text = pc.if_else(integral, concat(text, ".0"), text)
    special = pc.or_(pc.is_nan(arr), pc.is_inf(arr))
    if not pc.any(special).as_py():
        return text
    return pc.if_else(pc.is_nan(arr), nan,
                      pc.if_else(pc.is_inf(arr), pc.if_else(pc.greater(arr, 0), inf, neg_inf), text))



# --- the properties ------------------------------------------------------------------------

WORDS = ("NaN", "Infinity", "-Infinity")
EDGES = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 5e-324, -5e-324, 2.2250738585072014e-308,
         1.7976931348623157e308, -1.7976931348623157e308, 1e10, 9999999999.0, -9999999999.0, 1e10 - 1,
         np.nextafter(1e10, 0), 1e15, 2.0**53, 2.0**63, -(2.0**63), 1e-7, 1e-6, 0.1, 100.0, -3.0, 1e21, 1e22]


def doubles() -> st.SearchStrategy[float | None]:
    return st.one_of(st.none(), st.sampled_from(EDGES), st.floats(allow_nan=True, allow_infinity=True),
                     st.integers(-10**12, 10**12).map(float), st.integers(-1000, 1000).map(lambda i: i / 8))


def check_float(values: list[float | None], typ: pa.DataType, cut: int) -> None:
    arr = pa.array(values, typ)
    for a in (arr, arr.slice(cut % (len(arr) + 1))):
        new, old = text.render_float(a, *WORDS), old_render_float(a, *WORDS)
        assert new.type == old.type == pa.string()
        assert new.to_pylist() == old.to_pylist()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(doubles(), max_size=60), st.integers(0, 60))
def test_float_matches_the_oracle(values: list[float | None], cut: int) -> None:
    check_float(values, pa.float64(), cut)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(-10**11, 10**11).map(float), min_size=1, max_size=60),
       st.lists(st.one_of(st.none(), st.sampled_from(EDGES), st.floats()), max_size=8), st.integers(0, 60))
def test_mostly_whole_doubles_match_the_oracle(whole: list[float], others: list[float | None], cut: int) -> None:
    """The int64 path (at most an eighth of the values not small and whole), its rest put in place."""
    check_float(whole * 8 + others, pa.float64(), cut)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.none(), st.floats(width=32)), max_size=60), st.integers(0, 60))
def test_float32_matches_the_oracle(values: list[float | None], cut: int) -> None:
    check_float(values, pa.float32(), cut)


def test_plain_whole_boundary_is_arrows() -> None:
    """Arrow writes whole doubles below 1e10 in plain digits, from 1e10 on with an exponent."""
    below = pa.array([9999999999.0, -9999999999.0, 123456789.0]).cast(pa.string()).to_pylist()
    assert all("e" not in v for v in below)
    assert pa.array([1e10, -1e10]).cast(pa.string()).to_pylist() == ["1e+10", "-1e+10"]
    assert text._PLAIN_WHOLE == 1e10


WIDE = decimal.Context(prec=100)


def decimals(precision: int, scale: int) -> st.SearchStrategy[decimal.Decimal | None]:
    limit = 10**precision - 1
    unscaled = st.one_of(st.integers(-limit, limit), st.integers(-(2**63), 2**63 - 1).filter(lambda v: abs(v) <= limit),
                         st.sampled_from([0, 1, -1, limit, -limit, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**18])
                         .filter(lambda v: abs(v) <= limit))
    return st.one_of(st.none(), unscaled.map(lambda v: decimal.Decimal(v).scaleb(-scale, WIDE)))


@st.composite
def decimal_arrays(draw: st.DrawFn) -> tuple[pa.Array, int]:
    wide = draw(st.booleans())
    precision = draw(st.integers(1, 76 if wide else 38))
    scale = draw(st.integers(0, precision))
    values = draw(st.lists(decimals(precision, scale), max_size=40))
    typ = (pa.decimal256 if wide else pa.decimal128)(precision, scale)
    return pa.array(values, typ), draw(st.integers(0, 40))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decimal_arrays())
def test_decimal_matches_the_oracle(case: tuple[pa.Array, int]) -> None:
    arr, cut = case
    for a in (arr, arr.slice(cut % (len(arr) + 1))):
        new, old = text.render_decimal(a), old_render_decimal(a)
        assert new.to_pylist() == old.to_pylist()
        assert pc.all(pc.equal(new, old)).as_py() in (True, None)
