"""Per-file column statistics of the unload (pure pyarrow, no Spark)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from lading_jobs.unload.stats import FileStats


def test_durations_have_bounds_in_seconds() -> None:
    # INTERVAL DAY TO SECOND columns are Arrow durations; pyarrow has no min_max kernel for them
    batch = pa.RecordBatch.from_pydict({"dti": pa.array(
        [dt.timedelta(days=1, microseconds=5), None, dt.timedelta(microseconds=-1)], pa.duration("us"))})
    stats = FileStats(batch.schema)
    stats.update(batch)
    stats.update(batch.slice(0, 1))
    assert stats.to_dict() == {"dti": {"nullCount": 1, "min": -1e-06, "max": 86400.000005}}
