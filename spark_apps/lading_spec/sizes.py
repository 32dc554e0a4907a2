"""Byte sizes as PostgreSQL settings write them: ``256MB``, ``'5 GB'``, or plain bytes.

Units are ``B``, ``kB``, ``MB``, ``GB``, ``TB``, case-sensitive, multiplier 1024
(seed 000: the same rule as PostgreSQL's memory settings). Whitespace between the
number and the unit is allowed; fractions are not (an exact byte count is).
"""

from __future__ import annotations

import re

from lading_spec.errors import SpecError

UNITS: dict[str, int] = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
ACCEPTED_FORMS = "a whole number of bytes, or a number with a unit B, kB, MB, GB or TB (multiplier 1024, case-sensitive), e.g. 256MB or '5 GB'"
_SIZE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")


def parse_size(value: int | str, field: str) -> int:
    """Return ``value`` in bytes, or raise :class:`SpecError` naming ``field``."""
    if isinstance(value, bool):
        raise SpecError(field, f"expected a size, got {value!r}; use {ACCEPTED_FORMS}")
    if isinstance(value, int):
        if value <= 0:
            raise SpecError(field, f"must be positive, got {value}")
        return value
    if not isinstance(value, str):
        raise SpecError(field, f"expected a size, got {value!r}; use {ACCEPTED_FORMS}")
    match = _SIZE.match(value)
    if match is None:
        raise SpecError(field, f"cannot read {value!r} as a size; use {ACCEPTED_FORMS}")
    number, unit = int(match.group(1)), match.group(2) or "B"
    if unit not in UNITS:
        hint = next((u for u in UNITS if u.lower() == unit.lower()), None)
        did_you_mean = f" (did you mean {hint}?)" if hint else ""
        raise SpecError(field, f"unknown unit {unit!r} in {value!r}{did_you_mean}; use {ACCEPTED_FORMS}")
    size = number * UNITS[unit]
    if size <= 0:
        raise SpecError(field, f"must be positive, got {value!r}")
    return size


def format_size(size: int) -> str:
    """The largest unit that writes ``size`` exactly (``268435456`` → ``256MB``)."""
    for unit in ("TB", "GB", "MB", "kB"):
        if size % UNITS[unit] == 0:
            return f"{size // UNITS[unit]}{unit}"
    return f"{size}B"


def human_size(n: float) -> str:
    """Bytes for people, multiplier 1024, one decimal: ``900 B``, ``61.2 MB`` (not parseable back)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
