"""Keep PySpark's per-task garbage collection cheap in a reused Python worker.

A reused worker's daemon calls ``gc.collect()`` after every task: a full
collection that walks every object the garbage collector tracks. Most of them
are the modules, classes and functions imported once (PySpark, pyarrow, lading:
about 50,000 objects, ~27 ms of CPU per collection here), so an export of a few
hundred tasks spent seconds re-proving that its imports are alive (profiled at
about 4 % of the Arrow-only unload's CPU).

``settle()`` runs once per process at a task's start: one collection (so no
garbage is kept), then ``gc.freeze()``, which moves every object still alive to
the permanent generation that collections skip. Objects made afterwards (the
tasks' own) are collected as before; what stays frozen is only what was alive at
the first task, which a worker keeps until it exits anyway.
"""

from __future__ import annotations

import gc

_settled = False


def settle() -> None:
    """Freeze the objects alive now, once per process (later calls do nothing)."""
    global _settled
    if _settled:
        return
    gc.collect()
    gc.freeze()
    _settled = True
