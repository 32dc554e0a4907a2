"""How many examples a costly Hypothesis property runs: its ``ci`` count by default (``scripts/test``),
its ``thorough`` count with ``LADING_HYPOTHESIS_PROFILE=thorough`` (a longer search, run by hand or
nightly). Only for properties whose examples cost enough to weigh on the suite's time; the rest keep
their fixed ``max_examples``."""

from __future__ import annotations

import os

PROFILE = "LADING_HYPOTHESIS_PROFILE"


def examples(ci: int, thorough: int) -> int:
    return thorough if os.environ.get(PROFILE) == "thorough" else ci
