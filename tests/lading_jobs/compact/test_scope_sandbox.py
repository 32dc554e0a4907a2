"""``scope.filter`` is tenant SQL: it is checked by the query sandbox before Spark analyses it."""

from __future__ import annotations

from typing import Any

import pytest

from lading_jobs.compact.scope import bind_filter
from lading_jobs.table.schema import TableSchema
from lading_spec.errors import SpecError

pytestmark = pytest.mark.spark
SCHEMA = TableSchema.of([("k", "bigint"), ("v", "string")])


@pytest.mark.parametrize(("text", "needle"), [
    ("k > 1 AND length(java_method('java.lang.System', 'getenv', 'HOME')) > 0", "java_method() is not allowed"),
    ("raise_error(reflect('java.lang.System', 'getenv', 'HOME')) IS NULL", "reflect() is not allowed"),
    ("k IN (SELECT 1)", "subquery"),
])
def test_scope_filter_goes_through_the_sandbox(spark: Any, text: str, needle: str) -> None:
    with pytest.raises(SpecError) as info:
        bind_filter(spark, text, SCHEMA)
    assert info.value.field == "scope.filter" and needle in info.value.message


def test_a_plain_scope_filter_still_binds(spark: Any) -> None:
    assert bind_filter(spark, "k < 50 AND v IS NOT NULL", SCHEMA) is not None
