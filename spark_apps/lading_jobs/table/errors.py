"""The table package's base error, apart from the log so that every table module can raise it."""

from __future__ import annotations


class TableError(RuntimeError):
    """A table operation cannot proceed; the message says why and what to do."""
