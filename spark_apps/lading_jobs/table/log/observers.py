"""Commit observers: what the rest of the product does around a commit, without the log knowing it.

An observer is told twice about each commit of a ``TableLog`` handle: ``prepare``, just before the
conditional write of a commit, may start work beside it (the Iceberg mirror starts its manifests
there) and returns a ``Prepared`` it may take back later, or None; ``after_commit`` runs once the
commit landed, with what ``prepare`` returned (abandoned by the log instead when that attempt lost).

The log holds a tuple of observers per handle, given when the table is opened
(``TableLog.open(..., observers=...)``); a handle opened without saying gets the process's
defaults, which the table package registers (``lading_jobs.table``: the Iceberg mirror). The log
itself names no observer, so a commit with ``observers=()`` publishes nothing beside the log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from lading_jobs.table.log.commits import Snapshot, TableLog


class Prepared(Protocol):
    """Work an observer started beside a commit's conditional write."""

    def abandon(self) -> None:
        """The commit did not land as the version it was started for: undo it (idempotent)."""


class CommitObserver(Protocol):
    def prepare(self, log: TableLog, entry: dict[str, Any], snapshot: Callable[[], Snapshot]) -> Prepared | None:
        """Before the conditional write of commit ``entry``: start work beside it, or None.
        ``snapshot()`` is the state the commit makes (computed on first call, once). Best effort:
        an exception counts as None and never fails the commit."""

    def after_commit(self, log: TableLog, entry: dict[str, Any], snapshot: Snapshot,
                     prepared: Prepared | None) -> None:
        """After commit ``entry`` landed (``snapshot``: the state it made); ``prepared``: what
        ``prepare`` returned for this attempt. Must not raise: the commit stands whatever happens."""


_DEFAULTS: list[CommitObserver] = []


def register(observer: CommitObserver) -> None:
    """Make ``observer`` one of the defaults of every table handle opened from now on (once)."""
    if observer not in _DEFAULTS:
        _DEFAULTS.append(observer)


def registered() -> tuple[CommitObserver, ...]:
    """The defaults a handle opened now gets."""
    return tuple(_DEFAULTS)
