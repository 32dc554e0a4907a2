"""Landing a compaction: one ``compact`` commit (remove + add, new ``since``) through the table log.

The log rebases over concurrent commits: appends and stream commits never
conflict with a compaction (they add parts; they remove none). Before each
attempt the groups are checked against the latest state:

- a group whose input parts another compaction removed is *lost*: its outputs
  are deleted (its commit never landed) and the engine re-plans;
- a group that drops deleted keys (upsert) is lost too when a concurrent
  commit added rows older than ``since`` (they could be older versions of a
  deleted key).

The outputs' uploads are completed once, before the first attempt. Each attempt
is one ``log.commit(max_attempts=1)`` with a fresh nonce; its ``ConflictError``
means the attempt provably did not land (the change was invalid against the
state, or another writer's commit holds its version, checked by the log's
nonce catch-up), so it is retried against the new state and only then may a
group's outputs be deleted. An attempt whose answer was lost but which landed
is returned by the log as this writer's own commit. ``CommitStateUnknown`` and
every other failure propagate and leave the completed parts in place (the
commit may have landed; retention removes them after the grace period if it
did not); tests/lading_jobs/compact/test_compact_commit.py.

The whole of ``land`` is a commit section (``lading_jobs.critical``, as
``table.writer.commit_parts``): a SIGTERM waits for it instead of cutting it
between completing the outputs and the commit, so a cancelled run's commit
either never started or is whole and reported;
tests/lading_jobs/compact/test_compact_crash.py (SIGTERM at each step).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from lading_jobs import critical
from lading_jobs import storage as st
from lading_jobs.compact.plan import Group, may_hold_rows_below
from lading_jobs.table import format as fmt
from lading_jobs.table.log.commits import Change, ConflictError, Snapshot, TableLog
from lading_jobs.table.writer import WrittenPart, abort_parts

MAX_ATTEMPTS = 1000


@dataclass(frozen=True)
class Landed:
    snapshot: Snapshot | None  # the state after the commit (None: nothing to commit)
    kept: tuple[int, ...]  # indexes of the groups committed
    lost: tuple[int, ...]  # groups dropped: their inputs changed under them


def _still_valid(group: Group, base: Snapshot, latest: Snapshot, since: int) -> bool:
    live = {p.path for p in latest.parts}
    if not all(p.path in live for p in group.parts):
        return False
    if group.drop_deletes:
        planned = {p.path for p in base.parts}
        if any(may_hold_rows_below(p, since) for p in latest.parts if p.path not in planned):
            return False
    return True


def land(log: TableLog, base: Snapshot, groups: Sequence[Group], written: Sequence[Sequence[WrittenPart]],
         since: int, info: dict[str, object]) -> Landed:
    """Complete the outputs and commit every group still valid (see the module doc).

    A commit section: a SIGTERM waits for it (``lading_jobs.critical``)."""
    with critical.commit_section():
        return _land(log, base, groups, written, since, info)


def _land(log: TableLog, base: Snapshot, groups: Sequence[Group], written: Sequence[Sequence[WrittenPart]],
          since: int, info: dict[str, object]) -> Landed:
    storage = log.storage
    completed: dict[int, bool] = {}
    lost: list[int] = []
    for _ in range(MAX_ATTEMPTS):
        latest = log.snapshot()
        keep = [i for i in range(len(groups)) if i not in lost and _still_valid(groups[i], base, latest, since)]
        for i in range(len(groups)):
            if i not in keep and i not in lost:
                lost.append(i)
                _discard(log.uri, storage, written[i], completed.get(i, False))
        if not keep and since <= latest.since:
            return Landed(None, (), tuple(lost))
        for i in keep:
            if not completed.get(i):
                for w in written[i]:
                    storage.complete_upload(st.PendingUpload.from_dict(w.upload))
                completed[i] = True
        change = Change(operation="compact",
                        add=tuple(w.part for i in keep for w in written[i]),
                        remove=tuple(p.path for i in keep for p in groups[i].parts),
                        since=since, info=info)
        try:
            snap = log.commit(change, max_attempts=1)
        except ConflictError:
            continue  # lost the race or a part just went: re-check against the new state
        return Landed(snap, tuple(keep), tuple(lost))
    raise ConflictError(f"gave up committing the compaction of {log.uri} after {MAX_ATTEMPTS} lost races; "
                        "the table is written to very often: run the compaction again")


def _discard(uri: str, storage: st.Storage, written: Sequence[WrittenPart], completed: bool) -> None:
    """Outputs of a group whose commit never landed: abort or delete them."""
    if not completed:
        abort_parts(uri, written, storage=storage)
        return
    with contextlib.suppress(st.StorageError, OSError):  # retention removes them otherwise
        storage.delete([fmt.part_uri(uri, w.part.path) for w in written])
