"""What pyspark's filter-pushdown worker hands lading's Python data sources, made safe to take.

With ``spark.sql.python.filterPushdown.enabled`` (``session.py``), Spark plans every
Python data source's scan in a worker (``pyspark.sql.worker.data_source_pushdown_filters``)
that calls the source's ``reader()`` and then turns each pushed filter's literal into a
Python value, whether or not the reader takes filters. A date or timestamp outside
Python's years 1 … 9999 (``TIMESTAMP'0001-01-01 00:00:00+01:00'`` is year 0 in UTC)
raised ``OverflowError`` there, before any of lading's code saw the filter, and failed
the query. The JVM side sends any filter whose literal fits a variant; it cannot be told
to hold such a filter back.

So every lading source calls ``guard_literals()`` first thing in ``reader()``: in
that worker (and only there) a literal Python cannot hold becomes ``OUT_OF_RANGE``, which
no source takes (``table.filters.expr.from_spark`` refuses it; a source that takes no filter
returns every filter anyway). The filter stays with Spark, which evaluates it on the rows:
the answer is Spark's, and the pushed filter skipped nothing. The decision is per filter,
exactly: ``IN`` with one such value among others is kept by Spark whole; any other filter
of the query is pushed as before.
"""

from __future__ import annotations

import sys
from typing import Any

WORKER = "pyspark.sql.worker.data_source_pushdown_filters"


class _OutOfRange:
    """A pushed literal pyspark could not turn into Python (a date or timestamp outside
    years 1 … 9999): the filter stays with Spark."""

    def __repr__(self) -> str:
        return "OUT_OF_RANGE"


OUT_OF_RANGE = _OutOfRange()


def guard_literals() -> None:
    """In pyspark's filter-pushdown worker (which calls ``reader`` before it reads the
    filters): a pushed literal that Python cannot hold becomes ``OUT_OF_RANGE`` instead of an
    error that fails the query. Other processes (the driver, tasks) are untouched; idempotent."""
    worker = sys.modules.get(WORKER)
    main = sys.modules.get("__main__")
    if worker is None and getattr(getattr(main, "__spec__", None), "name", None) == WORKER:
        worker = main  # started as ``python -m``
    original = getattr(worker, "deserializeVariant", None)
    if worker is None or original is None or getattr(original, "lading_guarded", False):
        return

    def deserialize(variant: dict[str, Any]) -> Any:
        return _GuardedVariant(original(variant))

    deserialize.lading_guarded = True  # type: ignore[attr-defined]
    worker.deserializeVariant = deserialize  # type: ignore[attr-defined]


class _GuardedVariant:
    def __init__(self, variant: Any) -> None:
        self.variant = variant

    def toPython(self) -> Any:  # noqa: N802 - pyspark's name
        try:
            return self.variant.toPython()
        except (OverflowError, ValueError):  # datetime's range: years 1 … 9999
            return OUT_OF_RANGE
