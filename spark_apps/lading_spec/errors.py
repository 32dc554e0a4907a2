"""Errors that name the field at fault and what it accepts."""

from __future__ import annotations


class SpecError(ValueError):
    """A spec field holds a value lading cannot use.

    ``field`` is the dotted path from the resource's ``spec`` (``to.maxFileSize``),
    so the operator can report it as ``spec.to.maxFileSize`` and the CLI as is.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
