"""A tenant's SQL may read its inputs and compute with allowed functions; nothing else.

``spark.sql(text)`` would run whatever the text says: a ``SET`` or ``INSERT
OVERWRITE DIRECTORY`` at once, ``java_method('java.lang.System', 'getenv', ...)``
for every row, ``from_xml`` with an XSD URL that the JVM fetches (its entities
reading the pod's files), ``csv.`file:///proc/self/environ``` as a table. So tenant
SQL (``from.query``, ``transform.select``, ``scope.filter``) is only ever parsed and
analysed in a **tenant session** (:func:`tenant_session`): a clone of the job's session
whose function registries hold only the allow-list of :mod:`lading_jobs.sqlfunctions`
(every other function is dropped before any tenant text is parsed, so no view, WINDOW
clause, lambda, CTE or qualified name such as ``system.builtin.from_xml`` resolves it),
and it is checked as Spark's own trees, never as text, before anything runs:

1. the **parsed** plan (nothing resolved or run yet): every operator must be a
   query operator (``SELECT``, ``VALUES``, ``TABLE``, ``WITH``, joins, set
   operations, windows, ``PIVOT``...), never a command, ``EXECUTE IMMEDIATE`` or
   a script; every function called (named WINDOW definitions included) is on the
   allow-list, every table function on its own list; no ``IDENTIFIER(<expression>)``.
   This step gives the error its words (the function's name), and matters because
   analysis itself evaluates some expressions and runs ``EXECUTE IMMEDIATE``;
2. the **analysed** plan, a second wall: no command anywhere, no expression that a
   function off the allow-list builds (:func:`refused_classes`: ``XmlToStructs`` for
   ``from_xml``...), JSON options only from :data:`sqlfunctions.JSON_OPTIONS`,
   and every relation it reads is a temporary view named in ``from.inputs`` (only lading
   registers them, a query cannot; another temporary view of the session is refused) or data written in the query itself (``VALUES``,
   ``range``, a ``WITH`` reference): a path read with ``csv.`...```, a catalog table
   or a persistent view is refused.

The checked analysed plan then becomes a DataFrame of the job's own session (the text is
not parsed or resolved again), so lading's own SQL keeps every function. The session also
sets ``spark.sql.runSQLOnFiles=false`` and ``spark.sql.variable.substitute=false``
(``${env:AWS_SECRET_ACCESS_KEY}`` would otherwise be replaced by the secret before
parsing), see :mod:`lading_jobs.session`; the tenant session inherits them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from lading_jobs import sqlfunctions
from lading_spec.errors import SpecError

FIELD = "from.query"
TABLE_FUNCTIONS = sqlfunctions.ALLOWED_TABLE_FUNCTIONS
# Operators a parsed query may hold (catalyst simple class names, not node names). Anything else is refused.
QUERY_OPERATORS = frozenset({
    "Project", "Filter", "Aggregate", "Join", "LateralJoin", "Sort", "GlobalLimit", "LocalLimit", "LimitAll",
    "Offset", "Tail", "Distinct", "Deduplicate", "Union", "Intersect", "Except", "SubqueryAlias",
    "LocalRelation", "OneRowRelation", "Range", "Window", "WithWindowDefinition", "UnresolvedWith",
    "Generate", "Pivot", "Unpivot", "Sample", "Repartition", "RepartitionByExpression",
    "RebalancePartitions", "UnresolvedRelation", "UnresolvedHaving", "UnresolvedQualify", "UnresolvedHint",
    "UnresolvedTableValuedFunction", "UnresolvedInlineTable", "UnresolvedSubqueryColumnAliases",
    "UnresolvedTVFAliases", "PipeOperator", "CTERelationDef", "CTERelationRef", "WithCTE", "UnionLoop",
    "UnionLoopRef",
})
# Leaves an analysed query may read besides from.inputs: data written in the query itself.
QUERY_LEAVES = frozenset({"OneRowRelation", "LocalRelation", "Range", "CTERelationRef", "UnionLoopRef",
                          "ResolvedInlineTable"})
# Second wall, on the analysed plan: expressions that reach Java, read files or fetch URLs, or tell
# where Spark runs. The tenant session cannot resolve them; should one appear anyway, it is refused.
# Besides these, every expression class a function off the allow-list builds (refused_classes).
DENIED_EXPRESSIONS = frozenset({
    "CallMethodViaReflection", "TryReflect", "ProtobufDataToCatalyst", "CatalystDataToProtobuf", "FromProtobuf",
    "ToProtobuf", "AvroDataToCatalyst", "CatalystDataToAvro", "FromAvro", "ToAvro", "SchemaOfAvro", "XmlToStructs",
    "StructsToXml", "SchemaOfXml", "XPathBoolean", "XPathShort", "XPathInt", "XPathLong", "XPathFloat",
    "XPathDouble", "XPathString", "XPathList", "CsvToStructs", "StructsToCsv", "SchemaOfCsv", "InputFileName",
    "InputFileBlockStart", "InputFileBlockLength", "CurrentUser",
})
UNRESOLVED_IDENTIFIERS = frozenset({"PlanWithUnresolvedIdentifier", "ExpressionWithUnresolvedIdentifier"})
_CATALYST = "org.apache.spark.sql.catalyst."
_COMMAND = "org.apache.spark.sql.catalyst.plans.logical.Command"


def query_frame(spark: SparkSession, query: str, inputs: Iterable[str]) -> DataFrame:
    """The DataFrame of ``query`` (in ``spark``) once both checks pass in a tenant session;
    :class:`SpecError` on ``from.query`` otherwise."""
    tenant = tenant_session(spark)
    jss = tenant._jsparkSession  # type: ignore[attr-defined]
    parsed = jss.sessionState().sqlParser().parsePlan(query)
    check_parsed(parsed)
    with refusals(FIELD):
        analysed = jss.sessionState().executePlan(parsed, _mode(tenant)).analyzed()
    check_analysed(tenant, analysed, {name.lower() for name in inputs})
    return _frame(spark, analysed)


def tenant_session(spark: SparkSession) -> SparkSession:
    """A clone of ``spark`` (its settings, temporary views and data sources) whose function
    and table-function registries hold only :mod:`lading_jobs.sqlfunctions`' allow-lists:
    the only session tenant text is parsed and analysed in. ``spark`` keeps every function."""
    jclone = spark._jsparkSession.cloneSession()  # type: ignore[attr-defined]
    state = jclone.sessionState()
    _keep_only(state.functionRegistry(), sqlfunctions.ALLOWED_FUNCTIONS)
    _keep_only(state.tableFunctionRegistry(), sqlfunctions.ALLOWED_TABLE_FUNCTIONS)
    return SparkSession(spark.sparkContext, jclone)


def _registered(registry: Any) -> list[str]:
    """The function names ``registry`` resolves (``system.builtin.abs`` -> ``abs``)."""
    return _names(registry.listFunction())


def _names(identifiers: Any) -> list[str]:
    """The names of a Scala sequence of FunctionIdentifiers, in its order (one JVM call)."""
    text = str(identifiers.mkString("\n"))
    return [name.rsplit(".", 1)[-1].lower() for name in text.split("\n")] if text else []


def _keep_only(registry: Any, allowed: frozenset[str]) -> None:
    """Drop every function of ``registry`` not in ``allowed``; fail closed if any is left."""
    listed = registry.listFunction()
    for i, name in enumerate(_names(listed)):
        if name not in allowed:
            registry.dropFunction(listed.apply(i))
    left = sorted(set(_registered(registry)) - allowed)
    if left:
        raise RuntimeError(f"the tenant session still resolves {', '.join(left)}; refusing to run tenant SQL")


def _frame(spark: SparkSession, analysed: Any) -> DataFrame:
    """A DataFrame of ``spark`` over a plan analysed (and checked) in a tenant session: nothing
    in it is resolved again, so lading's own SQL on it keeps every function."""
    jdf = spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(  # type: ignore[union-attr]
        spark._jsparkSession, analysed)  # type: ignore[attr-defined]
    return DataFrame(jdf, spark)


def in_session(spark: SparkSession, df: DataFrame) -> DataFrame:
    """``df`` (analysed in its own session) as a DataFrame of ``spark``."""
    return _frame(spark, df._jdf.queryExecution().analyzed())


@contextmanager
def refusals(field: str) -> Iterator[None]:
    """Spark's "cannot resolve routine X", for a function the tenant session lacks, as a
    :class:`SpecError` on ``field`` naming it (the registry refused what step 1 did not see)."""
    try:
        yield
    except AnalysisException as e:
        if e.getCondition() == "UNRESOLVED_ROUTINE":
            routine = str((e.getMessageParameters() or {}).get("routineName", ""))
            name = routine.split("`.`")[-1].strip("`").lower()
            if name and name not in sqlfunctions.ALLOWED_FUNCTIONS:
                raise SpecError(field, _not_allowed(name)) from None
        raise


def _not_allowed(name: str) -> str:
    why = sqlfunctions.REFUSED_FUNCTIONS.get(name)
    reason = f"it {why}" if why else "it is not a function tenant SQL may call"
    return (f"{name}() is not allowed: {reason}; tenant SQL may call only the functions listed in "
            "docs/security.md (\"Which functions\")")


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
    """Every expression of ``plan``, also those of named WINDOW definitions (a parsed
    ``WithWindowDefinition`` holds them in a map, not among its expressions)."""
    stack = _seq(plan.expressions())
    if str(plan.nodeName()) == "WithWindowDefinition":
        stack.extend(_seq(plan.windowDefinitions().values().toSeq()))
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
    """Step 1 (before analysis): query operators only, allowed functions only, no IDENTIFIER(expression)."""
    for plan in _plans(parsed):
        kind = str(plan.getClass().getSimpleName())  # not nodeName(): INTERSECT ALL's is "Intersect All"
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
            _check_function(_function_name(expr, ekind), FIELD)


def check_analysed(spark: SparkSession, analysed: Any, inputs: set[str]) -> None:
    """Step 2: no command, no reflection, and every relation read is one of ``inputs`` or the query's own data."""
    command = spark._jvm.java.lang.Class.forName(  # type: ignore[union-attr]
        _COMMAND, False, analysed.getClass().getClassLoader())

    def trusted_view(node: Any) -> bool:
        """A temporary view named in from.inputs: lading registered it (a query cannot create one).
        Any other view (persistent, global, or a temporary view the query was not given) is refused."""
        if str(node.nodeName()) != "View":
            return False
        name = str(node.desc().identifier().unquotedString())
        if not node.isTempView() or name.lower() not in inputs:
            raise SpecError(FIELD, f"reads the view {name}, which is not "
                                   f"one of from.inputs ({', '.join(sorted(inputs)) or 'none'})")
        return True

    refused = refused_classes(spark)
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
            check_resolved_expression(expr, FIELD, refused)


_refused_classes: frozenset[str] | None = None


def refused_classes(spark: SparkSession) -> frozenset[str]:
    """The simple class names of the expressions that Spark's built-in functions off the
    allow-list build (``from_xml`` -> ``XmlToStructs``), with :data:`DENIED_EXPRESSIONS`:
    what the analysed plan may not hold. Looked up once per process."""
    global _refused_classes
    if _refused_classes is None:
        registry = spark._jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()  # type: ignore[union-attr]
        listed = registry.listFunction()
        classes = set(DENIED_EXPRESSIONS)
        for i, name in enumerate(_names(listed)):
            if name not in sqlfunctions.ALLOWED_FUNCTIONS:
                info = registry.lookupFunction(listed.apply(i))
                if not info.isEmpty():
                    classes.add(str(info.get().getClassName()).rsplit(".", 1)[-1])
        _refused_classes = frozenset(classes)
    return _refused_classes


def _check_function(function: str | None, field: str) -> None:
    if function is not None and function not in sqlfunctions.ALLOWED_FUNCTIONS:
        raise SpecError(field, _not_allowed(function))


def check_resolved_expression(expr: Any, field: str, refused: frozenset[str]) -> None:
    """Step 2 for one analysed expression: none of the ``refused`` classes (:func:`refused_classes`);
    a JSON function's options only from :data:`sqlfunctions.JSON_OPTIONS`."""
    kind = str(expr.nodeName())
    if kind in refused:
        raise SpecError(field, _not_allowed(str(expr.prettyName()).lower()))
    if kind in sqlfunctions.JSON_FUNCTIONS:
        keys = expr.options().keys().iterator()
        while keys.hasNext():
            key = str(keys.next())
            if key.lower() not in sqlfunctions.JSON_OPTIONS:
                raise SpecError(field, f"{expr.prettyName()}() option {key!r} is not allowed; accepted: "
                                       f"{', '.join(sorted(sqlfunctions.JSON_OPTIONS))}")


def check_resolved(spark: SparkSession, plan: Any, field: str) -> None:
    """Step 2 for an analysed plan holding a tenant's expressions (``scope.filter``,
    ``transform.select``): every expression of every node, subqueries included."""
    refused = refused_classes(spark)
    for node in _plans(plan):
        for expr in _expressions(node):
            check_resolved_expression(expr, field, refused)


def filter_column(spark: SparkSession, text: str, field: str) -> Any:
    """A tenant's SQL expression (a Compaction's ``scope.filter``) as a Column, checked like a query.

    Allowed functions only, no ``IDENTIFIER(<expression>)``, and no subquery (a filter
    compares the row's own columns): :class:`SpecError` on ``field`` otherwise. ``spark``
    must be a :func:`tenant_session`: the Column resolves in the DataFrame it is used in.
    """
    from pyspark.sql import functions as F

    check_expression(spark._jsparkSession.sessionState().sqlParser().parseExpression(text), field)  # type: ignore[attr-defined]
    return F.expr(text)


def check_expression(expression: Any, field: str) -> None:
    """A parsed tenant expression (``filter_column``; a load's ``transform.select`` items): allowed
    functions only, no ``IDENTIFIER(<expression>)``, no subquery; :class:`SpecError` on ``field`` otherwise."""
    stack = [expression]
    while stack:
        expr = stack.pop()
        kind = str(expr.nodeName())
        if kind in UNRESOLVED_IDENTIFIERS:
            raise SpecError(field, "IDENTIFIER(<expression>) is not allowed; write the name itself")
        if kind in ("ScalarSubquery", "Exists", "ListQuery", "InSubquery", "LateralSubquery"):
            raise SpecError(field, "a subquery is not allowed here; compare the table's own columns")
        _check_function(_function_name(expr, kind), field)
        stack.extend(_seq(expr.children()))


def _describe(plan: Any) -> str:
    text = str(plan.simpleString(1))
    return text if len(text) <= 120 else text[:117] + "..."
