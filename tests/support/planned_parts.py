"""Proving a read skipped parts: delete every part no plan kept, then each query must still answer."""

from __future__ import annotations

import os
from typing import Any


def answer_from_kept_parts(uri: str, snapshot: Any, plans: list[tuple[Any, list[Any], list[int]]]) -> None:
    """``plans``: (a query's frame selecting ``id``, the parts its scan filter kept, the ids expected).
    The parts no plan kept are deleted from the ``file://`` table first, so a query answering at all
    proves Spark never fetched them."""
    needed = {p.path for _, kept, _ in plans for p in kept}
    root = uri.removeprefix("file://")
    for p in snapshot.parts:
        if p.path not in needed:
            os.remove(os.path.join(root, p.path))
    for df, _, expected in plans:
        assert sorted(r.id for r in df.collect()) == expected
