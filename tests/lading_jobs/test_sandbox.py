"""A tenant's query reads its inputs and computes, nothing else: checked on Spark's plans, not the text."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lading_jobs import sandbox
from lading_jobs.session import build_session
from lading_spec.errors import SpecError
from lading_spec.sparkconf import SANDBOX_CONF

pytestmark = pytest.mark.spark


@pytest.fixture
def src(spark: Any) -> Iterator[Any]:
    """``src``: an input, a temporary view as lading registers it."""
    spark.range(5).createOrReplaceTempView("src")
    yield spark
    spark.catalog.dropTempView("src")


ACCEPTED = [
    ("SELECT id FROM src WHERE id > 2 ORDER BY id", [3, 4]),
    ("SELECT a.id FROM src a JOIN src b ON a.id = b.id LEFT JOIN src c USING (id) WHERE a.id < 2 ORDER BY 1", [0, 1]),
    ("WITH t AS (SELECT id FROM src WHERE id % 2 = 0) SELECT id FROM t ORDER BY id", [0, 2, 4]),
    ("SELECT id FROM src WHERE id IN (SELECT max(id) FROM src)", [4]),
    ("SELECT id FROM src WHERE EXISTS (SELECT 1 FROM src s WHERE s.id = src.id + 4)", [0]),
    ("SELECT (SELECT count(*) FROM src) AS id", [5]),
    ("SELECT x AS id FROM VALUES (7), (8) AS t(x)", [7, 8]),
    ("SELECT id FROM range(2)", [0, 1]),
    ("SELECT col AS id FROM explode(array(5, 6))", [5, 6]),
    ("SELECT sum(id) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) AS id FROM src ORDER BY id LIMIT 2", [0, 1]),
    ("SELECT id FROM src UNION SELECT id + 10 FROM src EXCEPT SELECT id FROM src WHERE id > 0 ORDER BY id",
     [0, 10, 11, 12, 13, 14]),
    ("SELECT transform(array(id), x -> x * 2)[0] AS id FROM src ORDER BY id LIMIT 2", [0, 2]),
    ("TABLE src", [0, 1, 2, 3, 4]),
    ("SELECT id FROM src |> WHERE id = 3", [3]),
    # ${...} is text, not the environment: substitution is off.
    ("SELECT length('${env:HOME}') AS id", [len("${env:HOME}")]),
]


@pytest.mark.parametrize(("query", "ids"), ACCEPTED, ids=[q for q, _ in ACCEPTED])
def test_queries_over_inputs_run(src: Any, query: str, ids: list[int]) -> None:
    rows = sandbox.query_frame(src, query, ["src"]).collect()
    assert sorted(r[0] for r in rows) == sorted(ids)


REFUSED = [
    # reflection: calls any Java method, e.g. System.getenv("AWS_SECRET_ACCESS_KEY")
    ("SELECT java_method('java.lang.System', 'getenv', 'HOME')", "java_method() is not allowed"),
    ("SELECT reflect('java.lang.System', 'getenv', 'HOME')", "reflect() is not allowed"),
    ("SELECT try_reflect('java.lang.System', 'getenv', 'HOME')", "try_reflect() is not allowed"),
    ("SELECT system.builtin.JAVA_METHOD('java.lang.System', 'getenv', 'HOME')", "java_method() is not allowed"),
    ("SELECT id FROM src WHERE id IN (SELECT length(reflect('java.lang.System', 'getenv', 'HOME')))",
     "reflect() is not allowed"),
    ("SELECT transform(array(1), x -> java_method('java.lang.System', 'getenv', 'HOME'))",
     "java_method() is not allowed"),
    # evaluated during analysis: must be refused before it
    ("SELECT * FROM range(length(reflect('java.lang.System', 'getenv', 'HOME')))", "reflect() is not allowed"),
    ("SELECT IDENTIFIER('java_' || 'method')('java.lang.System', 'getenv', 'HOME')", "IDENTIFIER"),
    # caught on the analysed plan (window definitions are not expressions of the parsed operator)
    ("SELECT row_number() OVER w FROM src WINDOW w AS (ORDER BY reflect('java.lang.System', 'getenv', 'HOME'))",
     "reflect() is not allowed"),
    ("SELECT from_protobuf(X'00', 'M', '/etc/hostname')", "from_protobuf() is not allowed"),
    # statements, not queries
    ("SET spark.sql.runSQLOnFiles=true", "SetCommand is not allowed"),
    ("EXECUTE IMMEDIATE 'SET spark.sql.runSQLOnFiles=true'", "is not allowed"),
    ("BEGIN SELECT 1; END", "is not allowed"),
    ("CREATE TEMPORARY VIEW v AS SELECT 1", "is not allowed"),
    ("CACHE TABLE src", "is not allowed"),
    ("ADD JAR /tmp/x.jar", "is not allowed"),
    ("DECLARE v INT", "is not allowed"),
    ("EXPLAIN SELECT 1", "is not allowed"),
    # other sources than from.inputs
    ("SELECT * FROM python_worker_logs()", "python_worker_logs() is not allowed"),
    ("SELECT * FROM csv.`file:///etc/hostname`", "TABLE_OR_VIEW_NOT_FOUND"),
    ("SELECT * FROM text.`/proc/self/environ`", "TABLE_OR_VIEW_NOT_FOUND"),
]


@pytest.mark.parametrize(("query", "needle"), REFUSED, ids=[q for q, _ in REFUSED])
def test_refused_before_anything_runs(src: Any, query: str, needle: str) -> None:
    with pytest.raises(Exception) as info:  # noqa: B017 - SpecError, or Spark's own analysis error
        sandbox.query_frame(src, query, ["src"])
    assert needle in str(info.value)
    if isinstance(info.value, SpecError):
        assert info.value.field == "from.query"
    assert src.conf.get("spark.sql.runSQLOnFiles") == "false"  # EXECUTE IMMEDIATE 'SET ...' did not run


def test_insert_overwrite_directory_writes_nothing(src: Any, tmp_path: Path) -> None:
    target = tmp_path / "stolen"
    with pytest.raises(SpecError, match="is not allowed"):
        sandbox.query_frame(src, f"INSERT OVERWRITE DIRECTORY '{target}' USING csv SELECT * FROM src", ["src"])
    assert not target.exists()


def test_catalog_views_are_not_inputs(src: Any) -> None:
    src.sql("CREATE OR REPLACE VIEW lading_catalog_view AS SELECT 1 AS id")  # the test's session, not a query
    try:
        with pytest.raises(SpecError, match="lading_catalog_view, which is not one of from.inputs"):
            sandbox.query_frame(src, "SELECT id FROM lading_catalog_view", ["src"])
    finally:
        src.sql("DROP VIEW lading_catalog_view")


def test_sql_on_files_is_refused_even_if_the_setting_were_back_on(src: Any, tmp_path: Path) -> None:
    """The second line of defence: a relation that is not an input is refused on the analysed plan."""
    secret = tmp_path / "secret.txt"
    secret.write_text("do-not-read\n")
    src.conf.set("spark.sql.runSQLOnFiles", "true")
    try:
        with pytest.raises(SpecError, match="not one of from.inputs") as info:
            sandbox.query_frame(src, f"SELECT * FROM text.`file://{secret}`", ["src"])
        assert "do-not-read" not in str(info.value)
    finally:
        src.conf.set("spark.sql.runSQLOnFiles", "false")


def test_session_keeps_the_sandbox_settings_whatever_conf_says(spark: Any) -> None:
    session = build_session(conf={"spark.sql.runSQLOnFiles": "true", "spark.sql.variable.substitute": "true"})
    for key, value in SANDBOX_CONF.items():
        assert session.conf.get(key) == value
    assert SANDBOX_CONF == {"spark.sql.runSQLOnFiles": "false", "spark.sql.variable.substitute": "false"}
    os.environ.setdefault("HOME", "/root")
    assert session.sql("SELECT '${env:HOME}' AS x").collect()[0][0] == "${env:HOME}"


@pytest.mark.parametrize(("text", "needle"), [
    ("day >= '2024-01-01' AND length(java_method('java.lang.System', 'getenv', 'HOME')) > 0", "java_method()"),
    ("reflect('java.lang.System', 'getenv', 'HOME') IS NOT NULL", "reflect()"),
    ("id IN (SELECT 1)", "subquery"),
    ("EXISTS (SELECT 1)", "subquery"),
    ("IDENTIFIER('i' || 'd') > 1", "IDENTIFIER"),
])
def test_filter_expressions_are_checked_too(spark: Any, text: str, needle: str) -> None:
    """A Compaction's scope.filter is tenant SQL as well."""
    with pytest.raises(SpecError) as info:
        sandbox.filter_column(spark, text, "scope.filter")
    assert info.value.field == "scope.filter" and needle in info.value.message


def test_a_plain_filter_expression_works(spark: Any) -> None:
    column = sandbox.filter_column(spark, "id % 2 = 0 AND id < 4", "scope.filter")
    assert [r[0] for r in spark.range(6).where(column).collect()] == [0, 2]
