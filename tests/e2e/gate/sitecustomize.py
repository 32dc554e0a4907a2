"""Test-only fault injection, never shipped: hold a compaction's part uploads at a gate.

``tests/e2e/test_compaction.py`` starts its spark-operator stand-in with this
directory first on ``PYTHONPATH`` (so the driver and Spark's Python workers,
which inherit it, import this ``sitecustomize`` at start-up), with
``LADING_TEST_GATE=<dir>`` and ``LADING_TEST_GATE_TABLE=<text>``. It wraps
``S3Storage.upload_part``: an upload of a compaction output (a key under
``data/c-``) of a table whose URI contains ``<text>`` touches ``<dir>/holding``
and waits until ``<dir>/release`` exists. The test cancels the run while its
uploads are pending, knowing that they are; every other upload passes through.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def _install(gate: Path, table: str) -> None:
    from lading_jobs import storage

    original = storage.S3Storage.upload_part

    def upload_part(self: Any, upload: Any, data: bytes) -> None:
        if table in upload.uri and "/data/c-" in upload.uri:
            (gate / "holding").touch()
            deadline = time.monotonic() + 600
            while not (gate / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.05)  # polling a file the test writes, not waiting out a time
        original(self, upload, data)

    storage.S3Storage.upload_part = upload_part  # type: ignore[method-assign]


if os.environ.get("LADING_TEST_GATE"):
    _install(Path(os.environ["LADING_TEST_GATE"]), os.environ.get("LADING_TEST_GATE_TABLE") or "\0")
