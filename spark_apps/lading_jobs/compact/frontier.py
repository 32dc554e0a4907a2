"""The new ``since`` of a run: a pure function of the spec, the clock and the table's frontiers.

Logical times are integers; writers that give none write the wall clock in
epoch milliseconds, so ``retainFor`` and ``time`` are read in that unit and
``version`` is a logical time as it is. The frontier never moves back and never
passes ``upper`` (only written times can be consolidated).
"""

from __future__ import annotations

from lading_spec.compaction import Since


def requested(since: Since, now_ms: int) -> int:
    """The logical time ``since`` asks for (before clamping to the table)."""
    if since.version is not None:
        return since.version
    if since.time is not None:
        return int(since.time.timestamp() * 1000)
    assert since.retain_for is not None
    return now_ms - int(since.retain_for * 1000)


def advance(current: int, upper: int, wanted: int) -> int:
    """``wanted`` clamped to [current since, upper]."""
    return max(current, min(wanted, upper))
