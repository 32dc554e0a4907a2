"""Destination templates: ``{run_time:%Y%m%dT%H%M%SZ}`` and ``{run_id}`` resolved once per run.

The seed's ``'s3://prefix/' || mz_now()``: a scheduled export writes to a new
prefix every run without editing the spec.
"""

from __future__ import annotations

import datetime as dt
import re

from lading_spec.errors import SpecError

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
KNOWN = "{run_time:<strftime format>} (UTC), {run_id}, {name}, {namespace}"
# A placeholder lading fills, spelled where it is not filled (any URI but to.files).
FILLED_ONLY_IN_TO_FILES = re.compile(r"\{(?:run_time(?::[^{}]*)?|run_id|name|namespace)\}")


def resolve_destination(
    template: str,
    *,
    run_time: dt.datetime,
    run_id: str,
    name: str = "",
    namespace: str = "",
    field: str = "to.files",
) -> str:
    """Fill every placeholder of ``template``; unknown ones are a :class:`SpecError`."""
    run_time = run_time.astimezone(dt.UTC)

    def fill(match: re.Match[str]) -> str:
        body = match.group(1)
        key, _, fmt = body.partition(":")
        if key == "run_time":
            return run_time.strftime(fmt or "%Y%m%dT%H%M%SZ")
        if fmt:
            raise SpecError(field, f"placeholder {{{body}}} takes no format; known: {KNOWN}")
        values = {"run_id": run_id, "name": name, "namespace": namespace}
        if key not in values:
            raise SpecError(field, f"unknown placeholder {{{body}}}; known: {KNOWN}")
        return values[key]

    return _PLACEHOLDER.sub(fill, template)


def check_template(template: str, field: str = "to.files") -> None:
    """Raise :class:`SpecError` if ``template`` has a placeholder lading cannot fill."""
    resolve_destination(template, run_time=dt.datetime(2000, 1, 1, tzinfo=dt.UTC), run_id="x", field=field)
