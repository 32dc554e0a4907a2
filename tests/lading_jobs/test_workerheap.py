"""workerheap.settle: imports frozen out of the per-task collections, tasks' garbage still collected."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SPARK_APPS = Path(__file__).resolve().parents[2] / "spark_apps"

# in a fresh interpreter: freezing is process-wide, and the test process's heap is not a worker's
SCRIPT = textwrap.dedent("""
    import gc, json, sys, weakref
    sys.path.insert(0, sys.argv[1])
    import pyarrow, pyarrow.parquet  # what a worker has imported by its first task
    from lading_jobs import workerheap

    class Node:
        pass

    def cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a
        return weakref.ref(a)

    early = cycle()                # garbage made before the first task: collected, not frozen
    tracked = len(gc.get_objects())
    workerheap.settle()
    first = gc.get_freeze_count()
    workerheap.settle()            # a later task: nothing more is frozen
    late = cycle()                 # a task's garbage cycle
    gc.collect()
    print(json.dumps({"tracked": tracked, "frozen": first, "again": gc.get_freeze_count(),
                      "early_alive": early() is not None, "late_alive": late() is not None,
                      "walked_after": len(gc.get_objects())}))
""")


def test_settle_freezes_what_is_alive_once_and_later_garbage_is_still_collected() -> None:
    import json

    out = subprocess.run([sys.executable, "-c", SCRIPT, str(SPARK_APPS)], capture_output=True, text=True,
                         check=True, timeout=60)
    r = json.loads(out.stdout)
    assert r["frozen"] >= 0.9 * r["tracked"] > 10_000  # the imports left the collections' walk
    assert r["again"] == r["frozen"]
    assert not r["early_alive"]  # settle collected before freezing: no garbage kept for ever
    assert not r["late_alive"]   # objects made after settle are collected as before
    assert r["walked_after"] < 0.1 * r["tracked"]  # what a full collection now walks
