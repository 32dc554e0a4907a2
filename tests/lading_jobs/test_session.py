"""The session lading's apps run in: the settings it starts with, and what its Python workers get."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lading_jobs.session import ARROW_POOL as POOL
from lading_jobs.session import arrow_pool, session_settings
from lading_spec.sparkconf import SANDBOX_CONF


def _worker_pools(spark: Any) -> set[str]:
    def pool_of_worker(batches):  # type: ignore[no-untyped-def]
        import pyarrow as pa

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"pool": [pa.default_memory_pool().backend_name]})

    return {r.pool for r in spark.range(0, 2, 1, numPartitions=2).mapInArrow(pool_of_worker, "pool string").collect()}


def test_python_workers_allocate_arrow_memory_with_the_pool_the_settings_name(spark: Any) -> None:
    """The shared session is built for no kind: its workers have the pool session_settings names."""
    assert _worker_pools(spark) == {session_settings(local=True)[POOL]} == {"mimalloc"}


def test_a_compaction_uses_jemalloc_and_every_other_kind_mimalloc() -> None:
    """mimalloc's fresh huge pages cost a compaction group 1.4 s of page zeroing; jemalloc's
    page purging made loads 20-30 % slower (session.py's docstring, docs/benchmarks.md)."""
    assert session_settings(local=False, kind="Compaction")[POOL] == "jemalloc"
    assert {session_settings(local=False, kind=k)[POOL] for k in ("CopyJob", "StreamCopy", None)} == {"mimalloc"}
    assert session_settings(local=False, conf={POOL: "system"}, kind="Compaction")[POOL] == "system"


def test_this_pyarrow_has_the_pools_the_session_names() -> None:
    """An Arrow built without jemalloc would warn and fall back to mimalloc: each pool must exist."""
    assert pa.jemalloc_memory_pool().backend_name == arrow_pool("Compaction") == "jemalloc"
    assert pa.mimalloc_memory_pool().backend_name == arrow_pool("CopyJob") == "mimalloc"


def test_a_conf_may_choose_another_pool_but_never_the_sandbox_settings() -> None:
    sandboxed = next(iter(SANDBOX_CONF))
    settings = session_settings(local=False, conf={POOL: "system", sandboxed: "something else"})
    assert settings[POOL] == "system"
    assert settings[sandboxed] == SANDBOX_CONF[sandboxed]
    assert "spark.driver.bindAddress" not in settings
    assert session_settings(local=True)["spark.driver.bindAddress"] == "127.0.0.1"
