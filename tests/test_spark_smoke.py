"""The shared Spark session runs Python workers with this interpreter's packages."""

import pytest


@pytest.mark.spark
def test_spark_runs_python_udfs(spark) -> None:  # type: ignore[no-untyped-def]
    import pyarrow  # noqa: F401

    df = spark.range(1000).selectExpr("id % 7 AS k")
    rows = df.groupBy("k").count().orderBy("k").collect()
    assert sum(r["count"] for r in rows) == 1000
    out = df.mapInArrow(lambda batches: (b for b in batches), df.schema).count()
    assert out == 1000
