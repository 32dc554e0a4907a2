"""A tenant's ``from.query`` may read its ``from.inputs`` and compute; nothing else.

``spark.sql(text)`` would run whatever the text says: a ``SET`` or ``INSERT
OVERWRITE DIRECTORY`` at once, ``java_method('java.lang.System', 'getenv', ...)``
for every row, ``csv.`file:///proc/self/environ``` as a table. So the query is
checked as Spark's own trees, never as text, in two steps, before anything runs:

1. the **parsed** plan (nothing resolved or run yet): every operator must be a
   query operator (``SELECT``, ``VALUES``, ``TABLE``, ``WITH``, joins, set
   operations, windows, ``PIVOT``...), never a command, ``EXECUTE IMMEDIATE`` or
   a script; no function that calls into the JVM or reads files
   (``java_method``, ``reflect``, ``try_reflect``, ``from_protobuf``,
   ``to_protobuf``), no table function outside a list of pure ones, no
   ``IDENTIFIER(<expression>)``. This step matters because analysis itself
   evaluates some expressions (table-function arguments, ``IDENTIFIER``) and runs
   ``EXECUTE IMMEDIATE``;
2. the **analysed** plan: no command anywhere, no reflection expression, and every
   relation it reads is a temporary view (``from.inputs``: only lading registers
   them, a query cannot) or data written in the query itself (``VALUES``,
   ``range``, a ``WITH`` reference): a path read with ``csv.`...```, a catalog
   table or a persistent view is refused.

The DataFrame is then built from the checked parsed plan (the text is not parsed
again). The session also sets ``spark.sql.runSQLOnFiles=false`` and
``spark.sql.variable.substitute=false`` (``${env:AWS_SECRET_ACCESS_KEY}`` would
otherwise be replaced by the secret before parsing), see :mod:`lading_jobs.session`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from lading_spec.errors import SpecError

FIELD = "from.query"
# Functions that reach the JVM (reflection) or read files named by the query.
DENIED_FUNCTIONS = frozenset({"java_method", "reflect", "try_reflect", "from_protobuf", "to_protobuf"})
# Table functions that only compute from their arguments.
TABLE_FUNCTIONS = frozenset({
    "range", "explode", "explode_outer", "inline", "inline_outer", "posexplode", "posexplode_outer",
    "stack", "json_tuple", "variant_explode", "variant_explode_outer", "sql_keywords",
})
# Operators a parsed query may hold (catalyst simple class names). Anything else is refused.
QUERY_OPERATORS = frozenset({
    "Project", "Filter", "Aggregate", "Join", "LateralJoin", "Sort", "GlobalLimit", "LocalLimit", "LimitAll",
    "Offset", "Tail", "Distinct", "Deduplicate", "Union", "Intersect", "Except", "SubqueryAlias",
    "LocalRelation", "OneRowRelation", "Range", "Window", "WithWindowDefinition", "UnresolvedWith",
    "Generate", "Pivot", "Unpivot", "Sample", "Repartition", "RepartitionByExpression",
    "RebalancePartitions", "UnresolvedRelation", "UnresolvedHaving", "UnresolvedHint",
    "UnresolvedTableValuedFunction", "UnresolvedInlineTable", "UnresolvedSubqueryColumnAliases",
    "UnresolvedTVFAliases", "PipeOperator", "CTERelationDef", "CTERelationRef", "WithCTE", "UnionLoop",
    "UnionLoopRef",
})
# Leaves an analysed query may read besides from.inputs: data written in the query itself.
QUERY_LEAVES = frozenset({"OneRowRelation", "LocalRelation", "Range", "CTERelationRef", "UnionLoopRef",
                          "ResolvedInlineTable"})
DENIED_EXPRESSIONS = frozenset({"CallMethodViaReflection", "ProtobufDataToCatalyst", "CatalystDataToProtobuf"})
UNRESOLVED_IDENTIFIERS = frozenset({"PlanWithUnresolvedIdentifier", "ExpressionWithUnresolvedIdentifier"})
_CATALYST = "org.apache.spark.sql.catalyst."
_COMMAND = "org.apache.spark.sql.catalyst.plans.logical.Command"


def query_frame(spark: SparkSession, query: str, inputs: Iterable[str]) -> DataFrame:
    """The DataFrame of ``query`` once both checks pass; :class:`SpecError` on ``from.query`` otherwise."""
    jss = spark._jsparkSession  # type: ignore[attr-defined]
    parsed = jss.sessionState().sqlParser().parsePlan(query)
    check_parsed(parsed)
    analysed = jss.sessionState().executePlan(parsed, _mode(spark)).analyzed()
    check_analysed(spark, analysed, {name.lower() for name in inputs})
    jdf = spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(jss, parsed)  # type: ignore[union-attr]
    return DataFrame(jdf, spark)


def _mode(spark: SparkSession) -> Any:
    """``CommandExecutionMode.SKIP``: analysing never runs a command (belt and braces: none is left)."""
    return spark._jvm.org.apache.spark.sql.execution.CommandExecutionMode.SKIP()  # type: ignore[union-attr]


def _seq(value: Any) -> list[Any]:
    return [value.apply(i) for i in range(value.size())]


def _plans(root: Any, stop: Any = None) -> Iterator[Any]:
    """Every plan node: children, CTE definitions and subquery plans; ``stop(node)`` prunes a subtree."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if stop is not None and stop(node):
            continue
        stack.extend(_seq(node.children()))
        stack.extend(_seq(node.innerChildren()))


def _expressions(plan: Any) -> Iterator[Any]:
    stack = _seq(plan.expressions())
    while stack:
        expr = stack.pop()
        yield expr
        stack.extend(_seq(expr.children()))


def _function_name(expr: Any, kind: str) -> str | None:
    if kind == "UnresolvedFunction":
        return str(_seq(expr.nameParts())[-1]).lower()
    if kind == "UnresolvedGenerator":
        return str(expr.name().funcName()).lower()
    return None


def check_parsed(parsed: Any) -> None:
    """Step 1 (before analysis): query operators only, no denied function, no IDENTIFIER(expression)."""
    for plan in _plans(parsed):
        kind = str(plan.nodeName())
        if kind in UNRESOLVED_IDENTIFIERS:
            raise SpecError(FIELD, "IDENTIFIER(<expression>) is not allowed; write the name itself")
        if kind not in QUERY_OPERATORS or not str(plan.getClass().getName()).startswith(_CATALYST):
            raise SpecError(FIELD, f"{kind} is not allowed: from.query is one query (SELECT, VALUES, TABLE or "
                                   "WITH ... SELECT) over from.inputs; statements such as SET, INSERT, CREATE, "
                                   "CACHE, EXECUTE IMMEDIATE or BEGIN ... END scripts are never run")
        if kind == "UnresolvedTableValuedFunction":
            table_function = str(_seq(plan.name())[-1]).lower()
            if table_function not in TABLE_FUNCTIONS:
                raise SpecError(FIELD, f"table function {table_function}() is not allowed; accepted: "
                                       f"{', '.join(sorted(TABLE_FUNCTIONS))}")
        for expr in _expressions(plan):
            ekind = str(expr.nodeName())
            if ekind in UNRESOLVED_IDENTIFIERS:
                raise SpecError(FIELD, "IDENTIFIER(<expression>) is not allowed; write the name itself")
            function = _function_name(expr, ekind)
            if function in DENIED_FUNCTIONS:
                raise SpecError(FIELD, f"{function}() is not allowed: it calls Java code or reads files inside the "
                                       "Spark pods; compute the value with SQL functions instead")


def check_analysed(spark: SparkSession, analysed: Any, inputs: set[str]) -> None:
    """Step 2: no command, no reflection, and every relation read is one of ``inputs`` or the query's own data."""
    command = spark._jvm.java.lang.Class.forName(  # type: ignore[union-attr]
        _COMMAND, False, analysed.getClass().getClassLoader())

    def trusted_view(node: Any) -> bool:
        """A temporary view: lading registered it (from.inputs; a query cannot create one)."""
        if str(node.nodeName()) != "View":
            return False
        if not node.isTempView():
            raise SpecError(FIELD, f"reads the view {node.desc().identifier().unquotedString()}, which is not "
                                   f"one of from.inputs ({', '.join(sorted(inputs)) or 'none'})")
        return True

    for plan in _plans(analysed, stop=trusted_view):
        kind = str(plan.nodeName())
        if command.isInstance(plan):
            raise SpecError(FIELD, f"{kind} is a command, not a query; from.query is never run as a statement")
        if kind == "View":
            continue
        if plan.children().isEmpty() and kind not in QUERY_LEAVES:
            raise SpecError(FIELD, f"reads {kind} ({_describe(plan)}), which is not one of from.inputs "
                                   f"({', '.join(sorted(inputs)) or 'none'}); name every source in from.inputs")
        for expr in _expressions(plan):
            if str(expr.nodeName()) in DENIED_EXPRESSIONS:
                raise SpecError(FIELD, f"{expr.prettyName()}() is not allowed: it calls Java code or reads files "
                                       "inside the Spark pods")


def filter_column(spark: SparkSession, text: str, field: str) -> Any:
    """A tenant's SQL expression (a Compaction's ``scope.filter``) as a Column, checked like a query.

    No denied function, no ``IDENTIFIER(<expression>)``, and no subquery (a filter
    compares the row's own columns): :class:`SpecError` on ``field`` otherwise.
    """
    from pyspark.sql import functions as F

    check_expression(spark._jsparkSession.sessionState().sqlParser().parseExpression(text), field)  # type: ignore[attr-defined]
    return F.expr(text)


def check_expression(expression: Any, field: str) -> None:
    """A parsed tenant expression (``filter_column``; a load's ``transform.select`` items): no denied
    function, no ``IDENTIFIER(<expression>)``, no subquery; :class:`SpecError` on ``field`` otherwise."""
    stack = [expression]
    while stack:
        expr = stack.pop()
        kind = str(expr.nodeName())
        if kind in UNRESOLVED_IDENTIFIERS:
            raise SpecError(field, "IDENTIFIER(<expression>) is not allowed; write the name itself")
        if kind in ("ScalarSubquery", "Exists", "ListQuery", "InSubquery", "LateralSubquery"):
            raise SpecError(field, "a subquery is not allowed here; compare the table's own columns")
        function = _function_name(expr, kind)
        if function in DENIED_FUNCTIONS:
            raise SpecError(field, f"{function}() is not allowed: it calls Java code or reads files inside the "
                                   "Spark pods")
        stack.extend(_seq(expr.children()))


def _describe(plan: Any) -> str:
    text = str(plan.simpleString(1))
    return text if len(text) <= 120 else text[:117] + "..."
