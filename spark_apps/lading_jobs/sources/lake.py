"""What the readers of lake inputs (``sources.iceberg``, ``sources.delta``) share: they plan
data files on the driver, prune them by the pushed filters without deciding any row, and
read one data file per Spark task into lading's Arrow schema, sent to Spark on the wire.

``KeepsFilters`` (a mixin before ``DataSourceReader``) keeps every pushed filter for
planning — none when the ``pushdown`` option is ``false``: a relation several scans share,
``files.query_frame`` — and returns every filter to Spark, which evaluates it on the rows.
``tasks`` makes one ``Task`` per planned file (pyspark wants at least one partition: an
empty plan is one ``Task`` of nothing); ``schemas`` gives the Arrow schemas a read
conforms to and sends."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import InputPartition

from lading_jobs.formats import spark as spark_formats
from lading_jobs.formats import types as format_types


class KeepsFilters:
    options: dict[str, str]
    filters: list[Any]

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:  # noqa: N802 - pyspark's name
        for f in filters:
            if self.options.get("pushdown") != "false":
                self.filters.append(f)
            yield f


class Task(InputPartition):
    """One planned data file (whatever the source plans it as), or None: nothing to read."""

    def __init__(self, index: int, item: Any) -> None:
        super().__init__(index)
        self.item = item


def tasks(items: Sequence[Any]) -> list[InputPartition]:
    return [Task(i, item) for i, item in enumerate(items)] or [Task(0, None)]


def schemas(columns: T.StructType) -> tuple[pa.Schema, pa.Schema]:
    """lading's Arrow schema of ``columns`` (what a read conforms to) and the wire schema Spark takes."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return (format_types.arrow_schema(columns),
            to_arrow_schema(spark_formats.transfer_schema(columns), timezone="UTC"))
