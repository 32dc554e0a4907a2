"""Pushed predicates are leaves of the one expression tree: the interpreter's three-valued
``not`` over a ``Pred`` answers as the pushed rule for its negation (``expr.negate``), so a
pushed tree skips the same parts whether its NOTs are pushed to the leaves first or not, and
a pushed tree skips a part only when the old leaf-by-leaf reading (AND: both may hold, OR:
either) says no row can match."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lading_jobs.table.filters import expr as ex
from lading_jobs.table.filters import interp
from lading_jobs.table.stats.part import ColumnStats, PartStats

TYPES = ["bigint", "int", "double", "float", "string", "boolean", "decimal(10,2)", "date", "timestamp",
         "timestamp_ntz"]
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([float("nan"), float("inf"), -0.0, 2.5]),
    st.sampled_from(["", "a", "ab", "b", "abc"]), st.decimals(min_value=-5, max_value=5, places=2),
    st.dates(dt.date(1969, 12, 25), dt.date(1970, 1, 5)),
    st.datetimes(dt.datetime(1969, 12, 31), dt.datetime(1970, 1, 2), timezones=st.just(dt.UTC)),
)
BOUNDS = st.one_of(st.none(), st.integers(-5, 5), st.floats(-5, 5), st.sampled_from(["", "a", "ab", "b", "abc", "1.50"]),
                   st.booleans())


@st.composite
def leaves(draw: Any) -> ex.Pred:
    op = draw(st.sampled_from(sorted(ex._NEGATED)))
    if op in ("in", "notin"):
        value: Any = tuple(draw(st.lists(VALUES, max_size=3)))
    else:
        value = None if op in ("isnull", "notnull") else draw(VALUES)
    return ex.Pred(op, "c", value, draw(st.integers(1, 2)), draw(st.sampled_from(TYPES)))


TREES = st.recursive(
    st.one_of(leaves(), st.sampled_from([ex.TRUE, ex.FALSE])),
    lambda inner: st.one_of(st.builds(ex.And, inner, inner), st.builds(ex.Or, inner, inner), st.builds(ex.Not, inner)),
    max_leaves=5)
STATS = st.builds(lambda rows, cols: PartStats(rows=rows, columns=cols), st.integers(0, 4),
                  st.dictionaries(st.integers(1, 2), st.builds(ColumnStats, st.one_of(st.none(), st.integers(0, 4)),
                                                               BOUNDS, BOUNDS, st.booleans(), st.booleans()),
                              max_size=2))


def leafwise(e: ex.Expr, stats: PartStats) -> bool:
    """Might ``e`` hold, read leaf by leaf after its NOTs are pushed down."""
    e = ex.push_not(e)
    if isinstance(e, ex.Call):
        answers = [leafwise(a, stats) for a in e.args]
        return all(answers) if e.fn == "and" else any(answers)
    if isinstance(e, ex.Lit):
        return bool(e.value)
    assert isinstance(e, ex.Pred)
    return interp.may_be_true(interp.pushed_spec(e, stats))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(tree=TREES, stats=STATS)
def test_a_pushed_tree_skips_as_its_leaves_say(tree: ex.Expr, stats: PartStats) -> None:
    might = interp.might_match(tree, stats)
    assert might == interp.might_match(ex.push_not(tree), stats)
    assert might == leafwise(tree, stats)


def test_not_of_a_leaf_is_the_rule_for_its_negation() -> None:
    constant = PartStats(rows=3, columns={1: ColumnStats(0, 4, 4)})
    eq4 = ex.Pred("eq", "c", 4, 1, "bigint")
    assert interp.might_match(eq4, constant)
    assert not interp.might_match(ex.Not(eq4), constant)  # ne 4: every value is 4
    assert interp.might_match(ex.Not(ex.Not(eq4)), constant)
    spec = interp.pushed_spec(eq4, constant)
    assert not spec.fallible and interp.may_be_true(spec) and not interp.may_be_false(spec)
