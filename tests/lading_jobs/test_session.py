"""The session lading's apps run in: the settings it starts with, and what its Python workers get."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lading_jobs.session import DEFAULT_CONF, session_settings
from lading_spec.sparkconf import SANDBOX_CONF

POOL = "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL"


def test_python_workers_allocate_arrow_memory_with_jemalloc(spark: Any) -> None:
    """pyarrow's default pool (mimalloc) costs a compaction group 1.4 s of page zeroing
    (session.py's docstring); the workers of a lading session must not use it."""

    def pool_of_worker(batches):  # type: ignore[no-untyped-def]
        import pyarrow as pa

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"pool": [pa.default_memory_pool().backend_name]})

    pools = {r.pool for r in spark.range(0, 2, 1, numPartitions=2).mapInArrow(pool_of_worker, "pool string")
             .collect()}
    assert pools == {"jemalloc"}


def test_this_pyarrow_has_the_pool_the_session_names() -> None:
    """An Arrow built without jemalloc would warn and fall back to mimalloc: the default must exist."""
    assert pa.jemalloc_memory_pool().backend_name == DEFAULT_CONF[POOL] == "jemalloc"


def test_a_conf_may_choose_another_pool_but_never_the_sandbox_settings() -> None:
    sandboxed = next(iter(SANDBOX_CONF))
    settings = session_settings(local=False, conf={POOL: "system", sandboxed: "something else"})
    assert settings[POOL] == "system"
    assert settings[sandboxed] == SANDBOX_CONF[sandboxed]
    assert "spark.driver.bindAddress" not in settings
    assert session_settings(local=True)["spark.driver.bindAddress"] == "127.0.0.1"
