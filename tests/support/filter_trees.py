"""Random filter trees for the interpreter's property tests: AND, OR and NOT over drawn leaves."""

from __future__ import annotations

from hypothesis import strategies as st

from lading_jobs.table.filters import expr as vx


def boolean_trees(leaves: st.SearchStrategy[vx.Node], max_leaves: int) -> st.SearchStrategy[vx.Node]:
    """Trees of ``and``/``or``/``not`` calls over ``leaves``, at most ``max_leaves`` leaves each."""
    return st.recursive(leaves, lambda inner: st.one_of(
        st.builds(lambda a, b: vx.call("and", a, b), inner, inner),
        st.builds(lambda a, b: vx.call("or", a, b), inner, inner),
        st.builds(lambda a: vx.call("not", a), inner)), max_leaves=max_leaves)
