"""Types of the C module _csvlines.c (CSV lines from Arrow column buffers in one pass)."""

from collections.abc import Sequence
from typing import Any

def encode(out: Any, rows: int, delimiter: int, null: bytes, quote: int, escape: int, specials: bytes,
           columns: Sequence[tuple[int, int, Any, int, Any, Any, int, int, bytes]]) -> int: ...
