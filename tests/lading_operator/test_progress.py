"""Progress from Spark's REST API: the real UI of the test session's Spark."""

from __future__ import annotations

import time

import pytest

from lading_operator import progress


def test_summarize() -> None:
    jobs = [{"numCompletedTasks": 3, "numTasks": 4}, {"numCompletedTasks": 2, "numTasks": 2}]
    stages = [{"outputRecords": 10, "outputBytes": 100}, {"outputRecords": 5, "outputBytes": 50}]
    assert progress.summarize(jobs, stages) == {"tasksDone": 5, "tasksTotal": 6, "rows": 15, "bytes": 150}
    assert progress.summarize([], [{"inputRecords": 9, "inputBytes": 90}])["rows"] == 9


def test_unreachable_ui_is_none() -> None:
    assert progress.fetch(None) is None
    assert progress.fetch("127.0.0.1:9") is None


@pytest.mark.spark
def test_fetch_from_a_live_spark_ui(spark) -> None:  # type: ignore[no-untyped-def]
    url = spark.sparkContext.uiWebUrl
    if not url:
        pytest.skip("the shared session runs without a web UI")
    spark.range(0, 1000, numPartitions=2).selectExpr("sum(id)").collect()
    deadline = time.monotonic() + 90
    current = progress.fetch(url)
    while current is None and time.monotonic() < deadline:  # the UI's REST API starts slowly
        current = progress.fetch(url)
    assert current is not None
    assert current["tasksTotal"] >= 2 and current["tasksDone"] >= 2
    assert current["tasksDone"] <= current["tasksTotal"]
