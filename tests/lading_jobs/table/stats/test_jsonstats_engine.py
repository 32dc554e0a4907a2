"""JSON statistics over whole Arrow columns (``table.stats.jsonengine``) equal the per-document reference.

The writer's JSON statistics used to come from Python's ``json``, one document at a time; they
now come from pyarrow's JSON reader (fast path) or DuckDB (general path) over the whole column.
The reference walk is kept in ``support.jsonstats_oracle``. Failure paths first: no document is
decoded by Python, and what each engine accepts beyond RFC 8259 (``NaN``, a trailing comma, a
surrogate pair, a line of ``null`` that crashes pyarrow, two objects in one value, pretty-printed
text, duplicate keys at any depth) is caught. Then a property: random columns (nested objects,
arrays, missing keys, JSON ``null``, mixed kinds per key, big and exotic number tokens, unicode
keys and strings, invalid documents) give the reference's statistics through both engines; the one
allowed difference is ``None`` for a column holding a number token DuckDB does not give back
exactly (``jsonengine._INEXACT``)."""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.jsonstats_oracle import reference_summarize

from lading_jobs.table.stats import jsonengine as je
from lading_jobs.table.stats import jsonstats as js


def same_as_reference(docs: list[str | None]) -> dict[str, Any] | None:
    """``summarize`` of ``docs``, checked against the reference and the general path alone."""
    column = pa.array(docs, pa.string())
    found, expected = je.summarize(column), reference_summarize(column)
    present = column.drop_null()
    general = je.general_stats(present) if len(present) else found
    if found is None:
        assert inexact(docs), docs
        assert general is None
        return None
    assert found == expected, docs
    assert general == expected, docs
    return found


def inexact(docs: list[str | None]) -> bool:
    """Whether a number token outside strings is one DuckDB may not give back as written."""
    outside = [re.sub(je._STRING_TOKEN, '""', d) for d in docs if d is not None]
    return any(re.search(je._INEXACT, o) for o in outside)


def test_no_document_is_decoded_by_python(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a document decoded one at a time by Python's json")

    monkeypatch.setattr(json.JSONDecoder, "decode", refuse)
    monkeypatch.setattr(json.JSONDecoder, "raw_decode", refuse)
    docs = ['{"a": 1, "b": {"c": "x"}}', '{"a": 2.5, "b": {"c": null}}', '[1]', '{"a": NaN}', None]
    found = je.summarize(pa.array(docs, pa.string()))
    assert found is not None and (found["docs"], found["invalid"]) == (3, 1)
    plain = je.summarize(pa.array(['{"a": 1}', '{"a": 2}'], pa.string()))
    assert plain is not None and plain["paths"][0]["number"]["min"] == 1.0


@pytest.mark.parametrize("docs", [
    ["null"], ['{"a": 1}', "null"], ['{"a": 1} null'], ['{"a": 1}{"a": 2}'],  # pyarrow: a crash, extra rows
    ['{"a": NaN}', '{"a": 1}'], ['{"a": Infinity}'], ['{"a": -Inf}'], ['{"a": "NaN and Inf in a string"}'],
    ['{"a": [1,]}', '{"a": 1}'], ['{"a": 1,}'], ['/*c*/ {"a": 1}'],
    ['{"a": "\\ud83d\\ude00"}', '{"a": "x"}'], ['{"a": "\\ud800"}'],  # surrogate escapes: invalid, even a pair
    ['{"a": 1, "a": 2}'], ['{"x": [{"y": 1, "y": 2}]}'], ['{"a": {"b": {"c": {"d": {"e": {"f": 1, "f": 2}}}}}}'],
    ['{"a": 1, "\\u0061": 2}'], ['[{"a": 1, "a": 2}]'],
    ['{\n  "a": 1,\n  "b": {"c": [1, 2]}\n}', '{"a": 2}'], ['\t{"a": 1} '], [""], ["  "], ["bad"], ['"s"', "1", "[]"],
    ['{"a": "x\ty"}'], ['{"a": "x\ny"}', '{\n"a": 1\n}'],  # a raw tab, newline in a string: invalid
])
def test_what_an_engine_accepts_beyond_rfc_8259_is_caught(docs: list[str]) -> None:
    same_as_reference(docs)


@pytest.mark.parametrize("docs", [
    ['{"n": 123456789012345678901234567890}', '{"n": -9223372036854775809}', '{"n": 18446744073709551615}'],
    ['{"n": 1e400}', '{"n": -1e400}', '{"n": 1E2}', '{"n": -0}', '{"n": -0.0}', '{"n": 0.1}', '{"n": 1}'],
    ['{"n": 9007199254740993}', '{"n": 90071992547409.5}', '{"n": 2.5e-7}'],
    ['{"t": "2026-11-01"}', '{"t": "2026-11-01T10:00:00"}', '{"t": null}'],  # pyarrow reads ISO 8601 as timestamps
    ['{"": {"": 1}, "s/t": {"u~v": true}, "q\'r": "\\u0000", "é": "\\u00e9"}'],
    ['{"a": {"b": {"c": {"d": {"e": 1}}}}, "l": [{"x": 1}], "o": {}}', '{"a": null}', "{}"],
    ['{"k": "a"}', '{"k": 5}', '{"k": true}', '{"k": {"x": 1}}', '{"k": [1]}', '{"k": null}', "{}"],
])
def test_numbers_names_and_kinds_match_the_reference(docs: list[str]) -> None:
    assert same_as_reference(docs) is not None


def test_a_number_duckdb_would_not_give_back_exactly_leaves_nothing_known() -> None:
    for token in ("0.10000000000000000001", "1.0000000000000001", "12345678901234567e3", "1e-300"):
        assert same_as_reference(['{"n": 1}', f'{{"n": {token}}}']) is None
    assert same_as_reference(['{"n": "0.10000000000000000001"}']) is not None  # in a string: a string


def test_plain_columns_take_the_fast_path_and_others_the_general_one() -> None:
    plain = pa.array(['{"a": 1, "b": {"c": "x"}, "l": [1]}', '{"a": 2.5, "b": {"c": null}}', '{"d": true}'])
    assert je.arrow_stats(plain) == reference_summarize(plain)
    assert je.arrow_stats(pa.array(['{\n "a": 1,\r\n\t"b": {"c": [1,\n 2]}\n}', '{"a": 2}'])) is not None  # pretty
    for docs in (['{"a": 1}', '{"a": "x"}'], ['{"a": 1, "a": 2}'], ['{"a": 1}', "[1]"], ['{"a": 1} null'],
                 ['{"a": "x\ny"}']):
        assert je.arrow_stats(pa.array(docs)) is None, docs
    wide = pa.array(['{' + ", ".join(f'"k{i}": {i}' for i in range(js.MAX_PATHS + 1)) + '}'])
    assert je.arrow_stats(wide) is None  # past the path cap the first paths met are kept: the general path
    found = same_as_reference(wide.to_pylist())
    assert found is not None and found["complete"] is False and len(found["paths"]) == js.MAX_PATHS


# -- property: random columns ---------------------------------------------------------------------
class Raw(str):
    """A number token, kept as its JSON text."""


KEYS = ["a", "b", "A", "é", "", "x/y", "t~"]
NUMBERS = ["0", "-0", "7", "-5", "0.5", "-2.5", "0.1", "1e20", "1E-7", "2.0", "1.5e3", str(2**53 + 1),
           str(2**63 - 1), str(2**63), str(2**64), str(-(2**63) - 1), "1" + "0" * 30, "1e400", "-1e400",
           "123456789012345.5", "0.30000000000000004"]
STRINGS = ["", "a", "b", "2026-11-01", "2026-11-01T10:00:00", "é", "\U0010ffff", "\u0000", "null", "a" * 70, "1"]
scalars = st.one_of(st.none(), st.booleans(), st.sampled_from(STRINGS), st.text(max_size=3),
                    st.sampled_from(NUMBERS).map(Raw), st.integers(-99, 99).map(lambda i: Raw(str(i))))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.dictionaries(st.sampled_from(KEYS), inner, max_size=3), st.lists(inner, max_size=2)), max_leaves=8)
objects = st.dictionaries(st.sampled_from(KEYS), values, max_size=4)


def encode(v: Any, pretty: bool = False) -> str:
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, dict):
        sep = ",\n  " if pretty else ", "
        return "{" + sep.join(f"{json.dumps(k, ensure_ascii=False)}: {encode(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(encode(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


documents = st.one_of(
    objects.map(encode), objects.map(encode), objects.map(lambda v: encode(v, pretty=True)),
    values.map(encode), st.none(), st.sampled_from(['{"a": NaN}', '{"a": [1,]}', '{"a": 1, "a": 2}', '{"a": 1} null',
                                                    "null", "bad", "", '{"a": "\\ud83d\\ude00"}']))
uniform = st.lists(st.fixed_dictionaries({"a": st.sampled_from(NUMBERS[:12]).map(Raw), "b": st.sampled_from(STRINGS),
                                          "c": st.fixed_dictionaries({"d": st.booleans()})}), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, max_size=8))
def test_random_columns_give_the_reference_statistics(docs: list[str | None]) -> None:
    same_as_reference(docs)


@settings(max_examples=20, deadline=None)
@given(uniform)
def test_random_uniform_columns_take_the_fast_path_with_the_reference_statistics(rows: list[dict[str, Any]]) -> None:
    docs = [encode(r) for r in rows]
    column = pa.array(docs, pa.string())
    fast = je.arrow_stats(column)
    assert fast is not None and fast == reference_summarize(column)
