"""The commit log: a table's state is the replay of its commits, each created atomically.

Commit ``v`` is the object ``_lading_log/<v>.json``, written with create-if-absent
(S3 ``If-None-Match: *``, ``link`` for file://), so exactly one writer wins each
version. A writer that loses re-reads the commits it missed and *rebases*: its
change is re-validated against the new state and retried at the next version.
Appends never conflict (with appends, or with a rewrite of other parts); a change
conflicts only when it removes a part that is already gone, changes the schema
that someone else just changed, loads a file another commit just loaded, moves
a stream source that another commit just moved, or adds rows below a ``since``
that another commit just advanced. Conflicts raise ``ConflictError`` naming the
commit that caused them.

Opening reads ``_last_checkpoint``, the checkpoint it names (the full state every
``CHECKPOINT_INTERVAL`` commits) and the few commits after it: O(1) objects. The checkpoint
names the ledger's index instead of holding the ledger (``lading_jobs.table.log.ledger``): a lookup
reads the shard of its URI, so neither opening nor a checkpoint grows with the files loaded.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import pyarrow as pa

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table.errors import TableError
from lading_jobs.table.log import ledger as ledger_mod
from lading_jobs.table.log.ledger import Ledger, LedgerEntry
from lading_jobs.table.schema import SchemaError, TableSchema, arrow_type
from lading_jobs.table.stats.part import PartStats

__all__ = ["LedgerEntry", "TableError"]  # defined beside the ledger and the errors, imported from here


class TableNotFoundError(TableError):
    pass


class TableExistsError(TableError):
    pass


class ConflictError(TableError):
    """A concurrent commit made this change invalid; re-plan it against the new state."""


class CommitStateUnknown(TableError):
    """A commit may or may not have landed and the log could not tell which: nothing may be
    cleaned up (its parts could be referenced). ``nonce`` identifies the attempt in the log."""

    def __init__(self, message: str, nonce: str) -> None:
        super().__init__(message)
        self.nonce = nonce


class ConditionalWritesUnsupported(TableError):
    """The store accepted a second create-if-absent of the same key."""


@dataclass(frozen=True)
class Part:
    """One Parquet part: its path relative to the table, size and statistics.

    ``seq`` is the version of the commit that added it (assigned when the commit
    wins) and ``index`` its place in that commit's list of added parts; with the
    row's position inside the part they order rows of equal logical time in
    upsert tables (``order`` is the two as one number).
    """

    path: str
    size: int
    stats: PartStats
    seq: int = -1
    schema_id: int = 0
    index: int = 0
    nested_ids: bool = False
    """Its nested columns' fields carry Parquet field ids (``Column.field_ids``); parts written
    before lading gave nested fields ids have none (``"nestedIds"`` absent)."""

    @property
    def order(self) -> int:
        return self.seq * fmt.MAX_PARTS_PER_COMMIT + self.index

    @property
    def rows(self) -> int:
        return self.stats.rows

    def to_dict(self) -> dict[str, Any]:
        out = {"path": self.path, "size": self.size, "seq": self.seq, "index": self.index,
               "schemaId": self.schema_id, "stats": self.stats.to_dict()}
        return {**out, "nestedIds": True} if self.nested_ids else out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Part:
        return cls(d["path"], int(d["size"]), PartStats.from_dict(d["stats"]), int(d.get("seq", -1)),
                   int(d.get("schemaId", 0)), int(d.get("index", 0)), d.get("nestedIds") is True)


@dataclass(frozen=True)
class TableMeta:
    table_id: str
    envelope: str = "append"
    key_columns: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    created_at: int = 0
    iceberg_mirror: bool = True  # publish Iceberg metadata after each commit (an observer's setting)
    catalog: tuple[str, str] | None = None  # (catalog name, namespace.name): its pointer follows the mirror

    def to_dict(self) -> dict[str, Any]:
        return {"tableId": self.table_id, "envelope": self.envelope, "keyColumns": list(self.key_columns),
                "sortBy": list(self.sort_by), "createdAt": self.created_at,
                "formatVersion": fmt.FORMAT_VERSION, **({} if self.iceberg_mirror else {"icebergMirror": False}),
                **({"catalog": {"name": self.catalog[0], "table": self.catalog[1]}} if self.catalog else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableMeta:
        version = int(d.get("formatVersion", 1))
        if version > fmt.FORMAT_VERSION:
            raise TableError(f"table format version {version} is newer than this reader's "
                             f"{fmt.FORMAT_VERSION}; upgrade lading")
        return cls(d["tableId"], d.get("envelope", "append"), tuple(d.get("keyColumns", ())),
                   tuple(d.get("sortBy", ())), int(d.get("createdAt", 0)), d.get("icebergMirror") is not False,
                   _catalog(d.get("catalog")))


def _catalog(value: Any) -> tuple[str, str] | None:
    """``metadata.catalog``: ``{name, table}`` (a table's catalog binding, table/iceberg/catalog_pointer.py)."""
    if isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("table"), str):
        return (value["name"], value["table"])
    return None


@dataclass(frozen=True)
class Change:
    """What one commit does. Empty fields change nothing."""

    operation: str = "append"
    add: tuple[Part, ...] = ()
    remove: tuple[str, ...] = ()
    schema: TableSchema | None = None
    ledger: Mapping[str, LedgerEntry] = field(default_factory=dict)
    source_progress: Mapping[str, Any] = field(default_factory=dict)
    upper: int | None = None
    since: int | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    meta: TableMeta | None = None  # new table settings (only the Iceberg mirror's switch changes)


@dataclass(frozen=True)
class Snapshot:
    """The table as of one commit ``version`` (and, for reads, logical time ``as_of``)."""

    uri: str
    version: int
    meta: TableMeta
    schema: TableSchema
    parts: tuple[Part, ...]
    ledger: Mapping[str, LedgerEntry]
    source_progress: Mapping[str, Any]
    upper: int
    since: int
    as_of: int | None = None
    removed: Mapping[str, int] = field(default_factory=dict)
    """Parts removed in the last ``fmt.TOMBSTONE_MS`` before the latest commit: path → the removing
    commit's timestamp (epoch ms). Retention reads them instead of every commit."""
    removed_from: int | None = None
    """``removed`` holds every removal whose commit's timestamp is at or after this (None: unknown)."""

    @property
    def envelope(self) -> str:
        return self.meta.envelope

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self.meta.key_columns

    @property
    def sort_by(self) -> tuple[str, ...]:
        return self.meta.sort_by

    @property
    def table_id(self) -> str:
        return self.meta.table_id

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.parts)

    def part_uri(self, part: Part) -> str:
        return fmt.part_uri(self.uri, part.path)

    def loaded(self, uri: str, etag: str, size: int) -> bool:
        """True when the ledger says this exact file was already loaded."""
        entry = self.ledger.get(uri)
        return entry is not None and entry.same_file(etag, size)

    def prefetch_ledger(self, uris: Iterable[str]) -> None:
        """Read, several at once, the ledger shards that lookups of ``uris`` will read."""
        if isinstance(self.ledger, Ledger):
            self.ledger.prefetch(uris)


@dataclass
class _State:
    version: int
    meta: TableMeta
    schema: TableSchema
    parts: dict[str, Part]
    ledger: Ledger
    source_progress: dict[str, Any]
    upper: int = 0
    since: int = 0
    removed: dict[str, int] = field(default_factory=dict)  # tombstones (see Snapshot.removed)
    removed_from: int | None = None

    def apply(self, entry: dict[str, Any]) -> None:
        v = int(entry["version"])
        ts = int(entry.get("timestamp", 0))
        if self.removed_from is None:  # replaying from commit 0 every removal is known; after a
            self.removed_from = 0 if v == 0 else ts  # checkpoint without tombstones, those from here on
        if "metadata" in entry:
            self.meta = TableMeta.from_dict(entry["metadata"])
        if "schema" in entry:
            self.schema = TableSchema.from_dict(entry["schema"])
        if entry.get("remove"):
            cut = ts - fmt.TOMBSTONE_MS
            if self.removed and min(self.removed.values()) < cut:
                self.removed = {path: t for path, t in self.removed.items() if t >= cut}
                self.removed_from = max(self.removed_from, cut)
        for path in entry.get("remove", ()):
            if self.parts.pop(path, None) is not None:
                self.removed[path] = ts
        for raw in entry.get("add", ()):
            part = Part.from_dict(raw)
            self.parts[part.path] = part
        for uri, raw in (entry.get("ledger") or {}).items():
            self.ledger.put(uri, LedgerEntry.from_dict(raw))
        self.source_progress.update(entry.get("sourceProgress") or {})
        self.upper = max(self.upper, int(entry.get("upper", self.upper)))
        self.since = max(self.since, int(entry.get("since", self.since)))
        self.version = v

    def to_dict(self, ledger_index: str | None) -> dict[str, Any]:
        """The checkpoint of this state, whose ledger is written as the index ``ledger_index``
        (``ledger.write``; None: the ledger is empty, written as ``"ledger": {}``, which readers
        from before the index read too)."""
        return {"formatVersion": fmt.FORMAT_VERSION, "version": self.version, "metadata": self.meta.to_dict(),
                "schema": self.schema.to_dict(), "parts": [p.to_dict() for p in self.parts.values()],
                **({"ledger": {}} if ledger_index is None else {"ledgerIndex": ledger_index}),
                "sourceProgress": self.source_progress, "upper": self.upper, "since": self.since,
                **({} if self.removed_from is None else {"removed": self.removed, "removedFrom": self.removed_from})}

    @classmethod
    def from_checkpoint(cls, d: dict[str, Any], storage: st.Storage, uri: str) -> _State:
        parts = [Part.from_dict(p) for p in d["parts"]]
        removed_from = d.get("removedFrom")  # absent in checkpoints written before tombstones
        if "ledgerIndex" in d:
            ledger = ledger_mod.open_index(storage, uri, d["ledgerIndex"])
        else:  # checkpoints written before the index hold the ledger inline
            ledger = Ledger(None, {k: LedgerEntry.from_dict(v) for k, v in d["ledger"].items()})
        return cls(int(d["version"]), TableMeta.from_dict(d["metadata"]), TableSchema.from_dict(d["schema"]),
                   {p.path: p for p in parts}, ledger,
                   dict(d.get("sourceProgress") or {}), int(d.get("upper", 0)), int(d.get("since", 0)),
                   {str(k): int(t) for k, t in (d.get("removed") or {}).items()},
                   None if removed_from is None else int(removed_from))

    def copy(self) -> _State:
        return _State(self.version, self.meta, self.schema, dict(self.parts), self.ledger.copy(),
                      dict(self.source_progress), self.upper, self.since, dict(self.removed), self.removed_from)

    def snapshot(self, uri: str, as_of: int | None = None) -> Snapshot:
        return Snapshot(uri, self.version, self.meta, self.schema, tuple(self.parts.values()), self.ledger.copy(),
                        dict(self.source_progress), self.upper, self.since, as_of, dict(self.removed),
                        self.removed_from)


class DamagedObject(TableError):
    """A log object that exists but is not the JSON object it should be (truncated, overwritten)."""


def _read_json(storage: st.Storage, uri: str) -> dict[str, Any] | None:
    """The JSON object at ``uri``, or None when there is none; ``DamagedObject`` naming ``uri``
    when it is not a JSON object."""
    try:
        data = storage.read(uri)
    except (st.StorageError, FileNotFoundError):
        if storage.head(uri) is None:
            return None
        data = storage.read(uri)  # created between the two calls (log objects are immutable)
    try:
        obj = json.loads(data)
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise DamagedObject(f"{uri} is damaged: not JSON ({e})") from e
    if not isinstance(obj, dict):
        raise DamagedObject(f"{uri} is damaged: a JSON {type(obj).__name__}, not an object")
    return _paths_inside(uri, obj)


def _paths_inside(uri: str, obj: Any) -> Any:
    """``obj``, read from the log object ``uri``, once every part path it carries (a commit's
    ``add`` and ``remove``, a checkpoint's ``parts``) is a path inside the table's ``data/``
    (``fmt.path_problem``); else a TableError naming the object and the path. Every log object
    is read through ``_read_json``, so no reader or writer sees a path that points elsewhere."""
    if not isinstance(obj, dict):
        return obj
    found: list[tuple[str, object]] = []
    for key in ("add", "parts"):
        found += [(f"{key}[{i}].path", p.get("path") if isinstance(p, dict) else p)
                  for i, p in enumerate(obj.get(key) or ())]
    found += [(f"remove[{i}]", p) for i, p in enumerate(obj.get("remove") or ())]
    if "ledgerIndex" in obj and (problem := fmt.ledger_name_problem(obj["ledgerIndex"])) is not None:
        raise TableError(f"{uri}: ledgerIndex {obj['ledgerIndex']!r} {problem}: lading never writes another, so "
                         "this log object was written or changed by something else. No ledger object it names is "
                         "read; restore the object from a copy or recreate the table")
    for where, path in found:
        problem = fmt.path_problem(path)
        if problem is not None:
            raise TableError(f"{uri}: {where} {path!r} {problem}. A part path is relative to the table, "
                             f"under {fmt.DATA_DIR}/, made of {fmt.PATH_CHARACTERS} (no . or .. segment, no "
                             "percent-encoding): lading never writes another, so this log object was written "
                             "or changed by something else. No part it names is read or deleted; restore "
                             "the object from a copy or recreate the table")
    return obj


def _read_commit(storage: st.Storage, uri: str) -> dict[str, Any] | None:
    """Commit ``uri``, or None when there is none; a damaged commit is a ``TableError`` naming it
    (a commit is the table's history: unlike a checkpoint, nothing can stand in for it)."""
    try:
        entry = _read_json(storage, uri)
    except DamagedObject as e:
        raise DamagedObject(f"{e}; the table cannot be read at or after this commit. Nothing was changed: "
                            "restore the object from a copy (bucket versioning, a backup) and retry") from e
    if entry is not None and not isinstance(entry.get("version"), int):
        raise DamagedObject(f"{uri} is damaged: it has no integer \"version\"; the table cannot be read at or "
                            "after this commit. Nothing was changed: restore the object from a copy and retry")
    return entry


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- commit observers ---------------------------------------------------------------------------
# What the rest of the product does around a commit, without the log knowing it. An observer is
# told twice about each commit made through a handle: ``prepare``, just before the conditional
# write, may start work beside it (the Iceberg mirror starts its manifests there) and returns a
# ``Prepared``, or None; ``after_commit`` runs once the commit landed, with what ``prepare``
# returned (the log abandons it instead when that attempt lost). A handle's observers are given
# when the table is opened (``TableLog.open(..., observers=...)``); a handle opened without saying
# gets the process's registered defaults (``lading_jobs.table`` registers the Iceberg mirror).
# The log names no observer, so a handle opened with ``observers=()`` publishes nothing beside it.

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


def register_observer(observer: CommitObserver) -> None:
    """Make ``observer`` one of the defaults of every table handle opened from now on (once)."""
    if observer not in _DEFAULTS:
        _DEFAULTS.append(observer)


def registered_observers() -> tuple[CommitObserver, ...]:
    """The defaults a handle opened now gets."""
    return tuple(_DEFAULTS)


class TableLog:
    """A handle on one table's log; cheap to open, safe to use from one thread at a time.

    ``observers`` (``CommitObserver``, above) are told about each commit made through this handle; None
    (the default of every way to open one) takes the process's registered defaults."""

    def __init__(self, uri: str, storage: st.Storage, state: _State,
                 observers: Sequence[CommitObserver] | None = None) -> None:
        self.uri = fmt.table_root(uri)
        self.storage = storage
        self._state = state
        self._proven = False  # conditional writes proven for this handle (first commit)
        self.observers: tuple[CommitObserver, ...] = registered_observers() if observers is None else tuple(observers)

    # -- opening ----------------------------------------------------------------------
    @classmethod
    def open(cls, uri: str, storage: st.Storage | None = None, *,
             observers: Sequence[CommitObserver] | None = None) -> TableLog | None:
        """The table at ``uri``, or None when no table exists there."""
        storage = storage or st.open_storage(uri)
        state = _load_latest(fmt.table_root(uri), storage)
        return None if state is None else cls(uri, storage, state, observers)

    @classmethod
    def open_existing(cls, uri: str, storage: st.Storage | None = None, *,
                      observers: Sequence[CommitObserver] | None = None) -> TableLog:
        log = cls.open(uri, storage, observers=observers)
        if log is None:
            raise TableNotFoundError(f"no lading table at {uri} (no {fmt.LOG_DIR}/{fmt.commit_name(0)}); "
                                     "create it first or fix the URI")
        return log

    @classmethod
    def create(cls, uri: str, schema: TableSchema, envelope: str = "append",
               key_columns: Iterable[str] = (), sort_by: Iterable[str] = (), *,
               storage: st.Storage | None = None, exist_ok: bool = False,
               table_id: str | None = None, change: Change | None = None,
               nonce: str | None = None, iceberg_mirror: bool = True,
               observers: Sequence[CommitObserver] | None = None) -> TableLog:
        """Create the table with commit 0; ``exist_ok`` returns an existing table instead of failing.

        ``change`` (parts, ledger, progress) goes into commit 0 itself, so a table
        that a first write creates exists only if that write commits. ``nonce``
        identifies the attempt (see ``commit``); an existing commit 0 carrying it
        is this call's own (a retried request whose first attempt landed).
        ``iceberg_mirror=False`` switches the table's Iceberg mirror off (table/iceberg/mirror.py).
        ``observers``: as for ``open``; told about commit 0 too.
        """
        storage = storage or st.open_storage(uri)
        keys, sort = tuple(key_columns), tuple(sort_by)
        validate_meta(schema, envelope, keys, sort)
        prove_conditional_writes(storage, uri)
        nonce = nonce or new_nonce()
        meta = TableMeta(table_id or uuid.uuid4().hex, envelope, keys, sort, _now_ms(), iceberg_mirror)
        empty = _State(-1, meta, schema, {}, Ledger(), {}, 0, 0)
        entry = _validate(change, empty, empty) if change is not None else {}
        entry.update({"formatVersion": fmt.FORMAT_VERSION, "version": 0, "timestamp": meta.created_at,
                      "operation": "create", "metadata": meta.to_dict(), "schema": schema.to_dict(),
                      "nonce": nonce})
        entry.setdefault("upper", 0)
        entry.setdefault("since", 0)
        _assign_version(entry)
        try:
            created = storage.put_if_absent(fmt.commit_uri(uri, 0), _encode(entry))
        except Exception as e:  # noqa: BLE001 - the request may have landed: look before deciding
            created = _carries(storage, fmt.commit_uri(uri, 0), nonce, e)
        if not created and _carries(storage, fmt.commit_uri(uri, 0), nonce, None):
            created = True
        if not created:
            if exist_ok and change is None:
                return cls.open_existing(uri, storage, observers=observers)
            raise TableExistsError(f"a lading table already exists at {uri}; load into it or choose another URI")
        state = _State(0, meta, schema, {}, Ledger(), {}, 0, 0)
        state.apply(entry)
        log = cls(uri, storage, state, observers)
        log._proven = True
        if log.observers:
            snap = state.snapshot(log.uri)
            for observer in log.observers:
                observer.after_commit(log, entry, snap, None)
        return log

    # -- reading ----------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self._state.version

    @property
    def meta(self) -> TableMeta:
        """The table's settings as of this handle's state (as ``version``: no refresh)."""
        return self._state.meta

    def refresh(self) -> None:
        """Catch up with commits made since this handle last looked."""
        self._state = _replay_forward(self.uri, self.storage, self._state)

    def snapshot(self, as_of: int | None = None, *, version: int | None = None) -> Snapshot:
        """The latest state (or the state at commit ``version``), for reading as of ``as_of``."""
        if version is None:
            self.refresh()
            state = self._state
        else:
            state = _load_version(self.uri, self.storage, version)
        if as_of is not None and as_of < state.since:
            raise TableError(f"asOf {as_of} is before the table's since frontier {state.since}: history before "
                             f"it is consolidated; read as of a time ≥ {state.since}")
        return state.snapshot(self.uri, as_of)

    # -- committing -------------------------------------------------------------------
    def commit(self, change: Change, *, max_attempts: int = 1000, nonce: str | None = None) -> Snapshot:
        """Append ``change`` as the next commit, rebasing over concurrent commits; the commit's snapshot.

        Every attempt carries ``nonce`` (fresh if not given). An attempt whose
        conditional PUT answers "already there" (412), or fails with an answer that
        may hide success (a timeout, a dropped connection, a retried request whose
        first try landed), is not retried blindly: the writer first reads the
        commits it missed and, if one carries its nonce, that commit is its own.
        Only a version held by another writer's commit proves an attempt lost; an
        attempt whose outcome stays undecidable raises ``CommitStateUnknown``. The
        checkpoint after a commit is best effort: the commit stands whatever
        happens to it.
        """
        if not self._proven:
            prove_conditional_writes(self.storage, self.uri)
            self._proven = True
        nonce = nonce or new_nonce()
        base = self._state
        unsettled: Exception | None = None  # an attempt whose version slot is still empty
        for _ in range(max_attempts):
            entry = _validate(change, self._state, base)
            entry["version"] = self._state.version + 1
            entry["timestamp"] = _now_ms()
            entry["nonce"] = nonce
            _assign_version(entry)
            target = fmt.commit_uri(self.uri, entry["version"])
            new = self._state.copy()
            new.apply(entry)
            snap = _Once(new, self.uri)
            prepared = [_prepare(o, self, entry, snap) for o in self.observers]  # beside the commit
            try:
                won: bool | None = self.storage.put_if_absent(target, _encode(entry))
            except Exception as e:  # noqa: BLE001 - the request may have landed: look before deciding
                won, unsettled = None, e
            if won:
                return self._won(entry, new, snap, prepared)
            for p in prepared:
                if p is not None:
                    p.abandon()  # not this version's (or not known to be): its work is undone
            try:
                mine = self._catch_up(nonce)
            except Exception as e:  # noqa: BLE001 - cannot read the log: cannot decide
                raise CommitStateUnknown(
                    f"commit state unknown: committing version {entry['version']} of {self.uri} "
                    f"{'failed ambiguously' if won is None else 'lost a race'} and the log cannot be read "
                    f"({e}); look for nonce {nonce} in {self.uri}{fmt.LOG_DIR}/ before retrying "
                    "(nothing was cleaned up)", nonce) from e
            if mine is not None:
                return mine
            if self._state.version >= entry["version"]:
                unsettled = None  # the slot went to another writer: that attempt can never land
        if unsettled is not None:
            raise CommitStateUnknown(
                f"commit state unknown: the last attempt to commit to {self.uri} failed with "
                f"{unsettled} and its version is still free, so it may yet land; look for nonce {nonce} "
                f"in {self.uri}{fmt.LOG_DIR}/ before retrying (nothing was cleaned up)", nonce)
        raise ConflictError(f"gave up committing to {self.uri} after {max_attempts} lost races; retry later")

    def _won(self, entry: dict[str, Any], new: _State, once: _Once, prepared: list[Prepared | None]) -> Snapshot:
        """After ``entry`` landed: the state it makes, ``new``, becomes this handle's; checkpoint, then
        the observers (each with what its ``prepare`` started, if anything). ``once``: ``new``'s
        snapshot, if taken already (taken again after a checkpoint, which rewrites the ledger)."""
        self._state = new
        if new.version % fmt.CHECKPOINT_INTERVAL == 0:
            once.taken = None
            try:
                self._checkpoint(new)
            except Exception as e:  # noqa: BLE001 - a checkpoint is an optimisation, the commit stands
                print(f"lading: checkpoint {new.version} of {self.uri} not written ({e}); "
                      "opening replays a few more commits until the next one", file=sys.stderr)
        snap = once()
        for observer, started in zip(self.observers, prepared, strict=True):
            observer.after_commit(self, entry, snap, started)
        return snap

    def _catch_up(self, nonce: str) -> Snapshot | None:
        """Read the commits missed since this handle's state; the snapshot of the one carrying
        ``nonce``, if any (the state moves to the latest either way)."""
        found: list[Snapshot] = []
        self._state = _replay_forward(self.uri, self.storage, self._state, nonce=nonce, found=found)
        return found[0] if found else None

    def find_commit(self, nonce: str, after: int = -1) -> Snapshot | None:
        """The snapshot of the commit after version ``after`` carrying ``nonce`` (see ``find_commit``)."""
        return find_commit(self.uri, self.storage, nonce, after)

    def _checkpoint(self, state: _State) -> None:
        """Ledger shards and index first (``ledger.write``), then the checkpoint naming them, then
        the hint: a writer stopped anywhere before the checkpoint leaves only objects nothing names."""
        index, state.ledger = ledger_mod.write(self.storage, self.uri, state.ledger)
        self.storage.put(fmt.checkpoint_uri(self.uri, state.version), _encode(state.to_dict(index)))
        self.storage.put(fmt.last_checkpoint_uri(self.uri), _encode({"version": state.version}))


class _Once:
    """The snapshot of state ``state``, taken on the first call (by an observer before the write, or
    after the commit landed) and kept; ``taken = None`` takes it again."""

    def __init__(self, state: _State, uri: str) -> None:
        self.state, self.uri = state, uri
        self.taken: Snapshot | None = None

    def __call__(self) -> Snapshot:
        if self.taken is None:
            self.taken = self.state.snapshot(self.uri)
        return self.taken


def _prepare(observer: CommitObserver, log: TableLog, entry: dict[str, Any], snapshot: _Once) -> Prepared | None:
    """``observer``'s work started beside the commit of ``entry``; None when it starts none or fails."""
    try:
        return observer.prepare(log, entry, snapshot)
    except Exception:  # noqa: BLE001 - an optimisation: the observer's step after the commit does it all
        return None


def snapshot_at(uri: str, storage: st.Storage, version: int, as_of: int | None = None) -> Snapshot:
    """The table as of commit ``version`` (for reading as of ``as_of``), without reading past it:
    a reader pinned to one version reads the same state however many times it opens it."""
    root = fmt.table_root(uri)
    state = _load_version(root, storage, version)
    if as_of is not None and as_of < state.since:
        raise TableError(f"asOf {as_of} is before the table's since frontier {state.since}: history before "
                         f"it is consolidated; read as of a time ≥ {state.since}")
    return state.snapshot(root, as_of)


def find_commit(uri: str, storage: st.Storage, nonce: str, after: int = -1) -> Snapshot | None:
    """The snapshot of the commit after version ``after`` carrying ``nonce``, or None: a retry
    asking whether an earlier attempt of its own landed. Reads commits ``after + 1`` onward."""
    uri = fmt.table_root(uri)
    if after >= 0:
        start = _load_version(uri, storage, after)
    else:
        first = _read_commit(storage, fmt.commit_uri(uri, 0))
        if first is None:
            return None
        start = _State(0, TableMeta.from_dict(first["metadata"]), TableSchema.from_dict(first["schema"]), {}, Ledger(), {})
        start.apply(first)
        if first.get("nonce") == nonce:
            return start.snapshot(uri)
    found: list[Snapshot] = []
    _replay_forward(uri, storage, start, nonce=nonce, found=found)
    return found[0] if found else None


def read_commit(uri: str, storage: st.Storage, version: int) -> dict[str, Any]:
    """Commit ``version`` of the table at ``uri`` as written (its part paths checked, as every
    log object's are); a TableError when it does not exist."""
    entry = _read_json(storage, fmt.commit_uri(uri, version))
    if entry is None:
        raise TableError(f"commit {version} of {fmt.table_root(uri)} does not exist")
    return entry


def new_nonce() -> str:
    """A fresh commit nonce: names one attempt to commit, so its writer can recognise it in the log."""
    return uuid.uuid4().hex


def _carries(storage: st.Storage, uri: str, nonce: str, error: Exception | None) -> bool:
    """Whether the commit at ``uri`` exists and carries ``nonce`` (after an ambiguous PUT)."""
    try:
        entry = _read_json(storage, uri)
    except Exception as e:  # noqa: BLE001
        if error is None:
            raise
        raise CommitStateUnknown(f"commit state unknown: creating {uri} failed with {error} and it cannot be "
                                 f"read back ({e}); look for nonce {nonce} in it before retrying", nonce) from e
    if entry is None and error is not None:
        raise CommitStateUnknown(f"commit state unknown: creating {uri} failed with {error} and it is not there "
                                 f"yet; the request may still land. Look for nonce {nonce} in it before retrying",
                                 nonce) from error
    return entry is not None and entry.get("nonce") == nonce


_PROVEN: set[tuple[type, str]] = set()


def prove_conditional_writes(storage: st.Storage, uri: str) -> None:
    """Refuse a store that ignores create-if-absent (S3 ``If-None-Match: *``): a second
    conditional PUT of a scratch key must answer "already there". Once per store and
    bucket per process; three requests."""
    root = fmt.table_root(uri)
    key = (type(storage), storage.describe(root))
    if key in _PROVEN:
        return
    probe = f"{root}{fmt.LOG_DIR}/_probe-{uuid.uuid4().hex}"
    try:
        first = storage.put_if_absent(probe, b"1")
        second = storage.put_if_absent(probe, b"2")
    finally:
        with contextlib.suppress(Exception):
            storage.delete([probe])
    if not first or second:
        raise ConditionalWritesUnsupported(
            f"{storage.describe(root)} does not honour conditional writes: a second create-if-absent "
            f"(If-None-Match: *) of {probe} {'succeeded' if second else 'was refused although the key was new'}. "
            "lading commits need them to keep concurrent writers from overwriting each other's commits; "
            "use a store that supports them (AWS S3, or a MinIO/Ceph release that implements "
            "If-None-Match on PutObject) or upgrade this one")
    _PROVEN.add(key)


def _encode(obj: dict[str, Any]) -> bytes:
    """A commit, checkpoint or hint as strict RFC 8259 JSON: no ``Infinity`` or ``NaN`` (statistics
    leave infinite bounds out, ``ColumnStats.to_dict``); anything else non-finite is refused."""
    try:
        return json.dumps(obj, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()
    except ValueError as e:
        raise TableError(f"a log entry holds a non-finite number, which JSON cannot carry ({e}); "
                         "write it as a string or leave it out") from e


def validate_meta(schema: TableSchema, envelope: str, keys: tuple[str, ...], sort: tuple[str, ...]) -> None:
    if envelope not in fmt.ENVELOPES:
        raise TableError(f"envelope {envelope!r} is not one of {', '.join(fmt.ENVELOPES)}")
    if envelope == "upsert" and not keys:
        raise TableError("keyColumns: an upsert table needs key columns")
    for what, names in (("keyColumns", keys), ("sortBy", sort)):
        for name in names:
            if schema.find(name) is None:
                raise SchemaError(f"{what}: no column {name!r}; columns: {', '.join(schema.names)}")
    validate_identity_types(schema, envelope, keys)


def validate_identity_types(schema: TableSchema, envelope: str, keys: tuple[str, ...]) -> None:
    """Columns that identify rows (upsert keys; every column of a diff table) are grouped on
    read, which nested types (arrays, structs, maps, variant) do not support: refuse them."""
    names = keys if envelope == "upsert" else tuple(schema.names) if envelope == "diff" else ()
    for name in names:
        c = schema.find(name)
        if c is not None and pa.types.is_nested(arrow_type(c.type)):
            what = "key column" if envelope == "upsert" else "column of a diff table"
            raise SchemaError(f"{what} {c.name!r} has the nested type {c.type}, which cannot identify rows; "
                              "use scalar key columns" + (" or envelope append" if envelope == "diff" else ""))


def _assign_version(entry: dict[str, Any]) -> None:
    v = entry["version"]
    if len(entry.get("add", ())) > fmt.MAX_PARTS_PER_COMMIT:
        raise TableError(f"a commit can add at most {fmt.MAX_PARTS_PER_COMMIT} parts; split the write")
    for i, raw in enumerate(entry.get("add", ())):
        if raw.get("seq", -1) < 0:
            raw["seq"], raw["index"] = v, i
    for raw in (entry.get("ledger") or {}).values():
        raw["version"] = v


def _validate(change: Change, state: _State, base: _State) -> dict[str, Any]:
    """Check ``change`` against the current state; build its log entry or raise ConflictError.

    ``base`` is the state the writer planned against: anything that differs between
    base and state was done by concurrent commits.
    """
    raced = state.version != base.version
    who = f" (changed concurrently: the table moved from version {base.version} to {state.version})" if raced else ""
    for path in change.remove:
        if path not in state.parts:
            raise ConflictError(f"cannot remove part {path}: it is not in the table at version {state.version}; "
                                f"it was already removed{who}. Re-plan against the current version")
    schema = change.schema
    if schema is not None and state.schema.schema_id != base.schema.schema_id:
        if not _covers(base.schema, state.schema, schema):
            raise ConflictError(f"the schema changed concurrently (schema {base.schema.schema_id} → "
                                f"{state.schema.schema_id}){who}: {_schema_difference(base.schema, state.schema, schema)}; "
                                "re-apply the schema change (a load or stream batch: run it again, it evolves "
                                "the new schema)")
        schema = None  # another writer already made exactly this change: ours adds nothing
    state.ledger.prefetch(change.ledger)
    for uri in change.ledger:
        prior = state.ledger.get(uri)
        if prior is not None and prior.version > base.version:
            raise ConflictError(f"file {uri} was loaded concurrently by commit {prior.version}; "
                                "re-plan the load (the ledger skips it now)")
    for source in change.source_progress:
        if raced and state.source_progress.get(source) != base.source_progress.get(source):
            raise ConflictError(f"source {source!r} progressed concurrently{who}; "
                                "two writers are consuming it, stop one")
    min_time = min((p.stats.min_time for p in change.add if p.stats.min_time is not None), default=None)
    if min_time is not None and min_time < state.since and not change.remove:  # rewrites may consolidate
        raise ConflictError(f"rows at logical time {min_time} are below the table's since frontier "
                            f"{state.since}{who}; write at a time ≥ {state.since}")
    max_time = max((p.stats.max_time for p in change.add if p.stats.max_time is not None), default=None)
    upper = max(state.upper, change.upper or 0, (max_time + 1) if max_time is not None else 0)
    since = max(state.since, change.since or 0)
    if since > upper:
        raise TableError(f"since {since} would pass upper {upper}; compaction can only consolidate "
                         "times that are already written")
    entry: dict[str, Any] = {"formatVersion": fmt.FORMAT_VERSION, "operation": change.operation,
                             "upper": upper, "since": since}
    if change.add:
        entry["add"] = [p.to_dict() for p in change.add]
    if change.remove:
        entry["remove"] = list(change.remove)
    if schema is not None:
        validate_identity_types(schema, state.meta.envelope, tuple(state.meta.key_columns))
        entry["schema"] = replace(schema, schema_id=state.schema.schema_id + 1).to_dict()
    if change.ledger:
        entry["ledger"] = {k: v.to_dict() for k, v in change.ledger.items()}
    if change.source_progress:
        entry["sourceProgress"] = dict(change.source_progress)
    if change.info:
        entry["info"] = dict(change.info)
    if change.meta is not None:  # only the mirror switch and the catalog binding may change
        entry["metadata"] = replace(state.meta, iceberg_mirror=change.meta.iceberg_mirror,
                                    catalog=change.meta.catalog).to_dict()
    return entry


def _covers(base: TableSchema, current: TableSchema, wanted: TableSchema) -> bool:
    """Whether the concurrent commits already made the change ``base`` → ``wanted``: ``current``
    holds every column of ``wanted`` under the same id, name and type, and none that ``wanted``
    dropped from ``base``. Then parts written with ``wanted`` read correctly under ``current``
    (columns it added besides read NULL in them) and the writer commits without a schema change
    of its own: two loads adding the same column from the same base (same id, same type) both
    commit, and no second column of that name appears."""
    kept = {c.id for c in wanted.columns}
    if any(current.by_id(c.id) is not None for c in base.columns if c.id not in kept):
        return False
    for c in wanted.columns:
        now = current.by_id(c.id)
        if now is None or now.name.lower() != c.name.lower() or now.type != c.type:
            return False
    return True


def _schema_difference(base: TableSchema, current: TableSchema, wanted: TableSchema) -> str:
    """What stands between a writer's schema and the table's, column by column, for a conflict."""
    notes = []
    for c in wanted.columns:
        now = current.by_id(c.id)
        same_name = current.find(c.name)
        if now is None:
            if base.by_id(c.id) is not None:
                notes.append(f"column {c.name!r} (id {c.id}) was dropped concurrently")
            elif same_name is not None:
                notes.append(f"column {c.name!r} was added concurrently as id {same_name.id} ({same_name.type}), "
                             f"this commit adds it as id {c.id}")
        elif now.name.lower() != c.name.lower():
            other = f", and {c.name!r} is id {same_name.id} ({same_name.type})" if same_name is not None else ""
            notes.append(f"column {c.name!r}: id {c.id} is now {now.name!r}{other}")
        elif now.type != c.type:
            notes.append(f"column {c.name!r} is {now.type} in the table, {c.type} in this commit")
    for c in current.columns:
        if wanted.by_id(c.id) is None and base.by_id(c.id) is None:
            notes.append(f"column {c.name!r} (id {c.id}) was added concurrently")
    return "; ".join(notes) or "the columns differ"


def _replay_forward(uri: str, storage: st.Storage, state: _State, *, nonce: str | None = None,
                    found: list[Snapshot] | None = None) -> _State:
    """``state`` advanced by every commit after it (probing version by version); the
    snapshot right after a commit carrying ``nonce`` is appended to ``found``."""
    new: _State | None = None
    while True:
        entry = _read_commit(storage, fmt.commit_uri(uri, (new or state).version + 1))
        if entry is None:
            return new or state
        if new is None:
            new = state.copy()
        new.apply(entry)
        if nonce is not None and found is not None and entry.get("nonce") == nonce:
            found.append(new.copy().snapshot(uri))


_REPORTED: set[str] = set()
"""Damaged checkpoints and hints already reported by this process (each is reported once)."""


def _skip_damaged(uri: str, why: Exception | str) -> None:
    """Report once per process that a checkpoint or hint at ``uri`` is unusable."""
    if uri not in _REPORTED:
        _REPORTED.add(uri)
        text = str(why) if str(why).startswith(uri) else f"{uri} is damaged ({why})"
        print(f"lading: ignoring {text}; opening uses an older checkpoint or the commits instead "
              "(it is only an optimisation and is left as it is)", file=sys.stderr)


def _checkpoint_state(uri: str, storage: st.Storage, version: int) -> _State | None:
    """The state in checkpoint ``version``, or None when it is missing or damaged (reported once)."""
    cp_uri = fmt.checkpoint_uri(uri, version)
    try:
        cp = _read_json(storage, cp_uri)
        if cp is None:
            return None
        state = _State.from_checkpoint(cp, storage, uri)
    except (DamagedObject, KeyError, TypeError, ValueError, AttributeError) as e:
        _skip_damaged(cp_uri, e)
        return None
    if state.version != version:
        _skip_damaged(cp_uri, f"it says version {state.version}")
        return None
    return state


def _hinted(uri: str, storage: st.Storage) -> int | None:
    """The version ``_last_checkpoint`` names, or None when it is missing or damaged (reported once)."""
    hint_uri = fmt.last_checkpoint_uri(uri)
    try:
        hint = _read_json(storage, hint_uri)
        if hint is None:
            return None
        v = hint["version"]
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"version {v!r}")
    except (DamagedObject, KeyError, ValueError) as e:
        _skip_damaged(hint_uri, e)
        return None
    return v


def _initial_state(uri: str, storage: st.Storage, upto: int | None) -> _State | None:
    """The state from the newest usable checkpoint (≤ ``upto``), else from commit 0.

    Tried in turn, each at most once: (for ``upto``) the checkpoint the interval puts at or below
    it, the one ``_last_checkpoint`` names, then every listed checkpoint newest first. A missing
    or damaged one is skipped; commit 0 is the start only when no checkpoint is usable. Nothing
    is rewritten."""
    tried: set[int] = set()

    def attempt(v: int | None) -> _State | None:
        if v is None or v <= 0 or v in tried or (upto is not None and v > upto):
            return None
        tried.add(v)
        return _checkpoint_state(uri, storage, v)

    if upto is not None and (state := attempt(upto - upto % fmt.CHECKPOINT_INTERVAL)) is not None:
        return state
    if (state := attempt(_hinted(uri, storage))) is not None:
        return state
    for v in sorted(_listed_checkpoints(uri, storage), reverse=True):
        if (state := attempt(v)) is not None:
            return state
    first = _read_commit(storage, fmt.commit_uri(uri, 0))
    if first is None:
        return None
    state = _State(0, TableMeta.from_dict(first["metadata"]), TableSchema.from_dict(first["schema"]), {}, Ledger(), {})
    state.apply(first)
    return state


def _listed_checkpoints(uri: str, storage: st.Storage) -> list[int]:
    out = []
    for obj in storage.list_objects(f"{uri}{fmt.LOG_DIR}/"):
        name = obj.uri.rsplit("/", 1)[-1]
        head = name.split(".", 1)[0]
        if name.endswith(".checkpoint.json") and head.isdigit():
            out.append(int(head))
    return out


def _load_latest(uri: str, storage: st.Storage) -> _State | None:
    state = _initial_state(uri, storage, None)
    return None if state is None else _replay_forward(uri, storage, state)


def _load_version(uri: str, storage: st.Storage, version: int) -> _State:
    state = _initial_state(uri, storage, version)
    if state is None:
        raise TableNotFoundError(f"no lading table at {uri}")
    while state.version < version:
        entry = _read_commit(storage, fmt.commit_uri(uri, state.version + 1))
        if entry is None:
            raise TableError(f"version {version} of {uri} does not exist; the latest is {state.version}")
        state.apply(entry)
    return state


def superseded_at(uri: str, storage: st.Storage, version: int) -> int | None:
    """When state ``version`` stopped being the latest: commit ``version + 1``'s timestamp (epoch
    ms), or None while no commit follows it. One read."""
    entry = _read_commit(storage, fmt.commit_uri(fmt.table_root(uri), version + 1))
    return None if entry is None else int(entry.get("timestamp", 0))
