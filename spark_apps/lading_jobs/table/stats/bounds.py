"""String bounds kept short: the truncation every statistic of a string uses (the statistics' base).

A lower bound truncated to a prefix is still ≤ every value; an upper bound truncated to a prefix
with its last character incremented is still ≥ every value (None when no such string exists).
Column statistics (``part``), JSON and variant path statistics (``jsonstats``, ``jsonengine``)
all truncate with these, so this module imports no other module of the statistics room.
"""

from __future__ import annotations

from lading_jobs.table import format as fmt

_MAX_CHAR = 0x10FFFF


def truncate_lower(s: str, length: int = fmt.STRING_STATS_LENGTH) -> tuple[str, bool]:
    return (s, False) if len(s) <= length else (s[:length], True)


def truncate_upper(s: str, length: int = fmt.STRING_STATS_LENGTH) -> tuple[str | None, bool]:
    """A string ≥ ``s`` of at most ``length`` characters (None when none exists)."""
    if len(s) <= length:
        return s, False
    prefix = list(s[:length])
    while prefix:
        code = ord(prefix[-1])
        nxt = code + 1
        if 0xD800 <= nxt <= 0xDFFF:
            nxt = 0xE000
        if nxt <= _MAX_CHAR:
            prefix[-1] = chr(nxt)
            return "".join(prefix), True
        prefix.pop()
    return None, True
