"""The load ledger at any size: which source files a table has loaded, in immutable hashed shards.

A ledger entry lives in the shard whose *prefix* (a string of bits) starts the SHA-256 of its
URI. The prefixes of one ledger cover every hash exactly once; a shard that would hold more than
``fmt.LEDGER_SHARD_ENTRIES`` entries is split in two by the next bit. An *index* names the shard
of every prefix. Shards and indexes are gzip-compressed JSON objects under ``_lading_ledger/``,
each named by the hash of its bytes (``fmt.ledger_object_name``): written once, never changed, and
a second write of the same name writes the same bytes.

A checkpoint names its index (``ledgerIndex``) instead of holding the entries; the commits after
it carry their own entries, as they always did. So opening a table reads no ledger at all, and a
lookup reads the index and the one shard of its URI (``Ledger``: a lazy mapping, every object read
once per process and counted in ``bytes_read``). Writing a checkpoint rewrites only the shards
that the entries since the previous one change (``write``), before the checkpoint that names
them: a writer killed in between leaves the old checkpoint whole and objects no checkpoint names.

docs/table-format.md ("The ledger") is the spec.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from lading_jobs import storage as st
from lading_jobs.table import format as fmt
from lading_jobs.table.errors import TableError

MAX_BITS = 64
"""The longest prefix: a shard is never split past it (2^64 shards)."""
IO_THREADS = 16
"""Ledger objects read or written at once."""

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class LedgerEntry:
    """A source file already loaded: identified by URI plus ETag (or size)."""

    etag: str
    size: int
    rows: int = 0
    version: int = -1  # the commit that loaded it (assigned when the commit wins)
    loaded_at: int = 0  # epoch milliseconds

    def to_dict(self) -> dict[str, Any]:
        return {"etag": self.etag, "size": self.size, "rows": self.rows, "version": self.version,
                "loadedAt": self.loaded_at}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LedgerEntry:
        return cls(str(d.get("etag", "")), int(d.get("size", 0)), int(d.get("rows", 0)),
                   int(d.get("version", -1)), int(d.get("loadedAt", 0)))

    def same_file(self, etag: str, size: int) -> bool:
        return (bool(etag) and etag == self.etag) or (not etag and size == self.size)


# -- the layout: pure -----------------------------------------------------------------------
def uri_bits(uri: str) -> str:
    """The first ``MAX_BITS`` bits of the SHA-256 of ``uri`` (UTF-8), as '0'/'1': where its entry lives."""
    return format(int.from_bytes(hashlib.sha256(uri.encode()).digest()[:MAX_BITS // 8], "big"), f"0{MAX_BITS}b")


def prefix_of(bits: str, prefixes: Mapping[str, Any], lengths: Iterable[int]) -> str:
    """The one prefix of ``prefixes`` (whose lengths are ``lengths``) that starts ``bits``."""
    for n in lengths:
        if bits[:n] in prefixes:
            return bits[:n]
    raise TableError("the ledger index does not cover every hash")  # checked when an index is read


def coverage_problem(prefixes: Iterable[str]) -> str | None:
    """Why ``prefixes`` are not a ledger index's prefixes (bit strings of at most ``MAX_BITS``,
    none the start of another, together covering every hash); None when they are. Pure."""
    ordered = sorted(prefixes)
    if not ordered:
        return "it names no shard"
    total = 0
    for p in ordered:
        if len(p) > MAX_BITS or p.strip("01"):
            return f"the prefix {p!r} is not a string of at most {MAX_BITS} bits"
        total += 1 << (MAX_BITS - len(p))
    for a, b in zip(ordered, ordered[1:], strict=False):
        if b.startswith(a):
            return f"the prefix {a!r} starts the prefix {b!r}"
    if total != 1 << MAX_BITS:
        return "its prefixes leave some hashes without a shard"
    return None


def split(prefix: str, entries: list[tuple[str, str, LedgerEntry]],
          capacity: int = fmt.LEDGER_SHARD_ENTRIES) -> dict[str, list[tuple[str, str, LedgerEntry]]]:
    """``entries`` (bits, URI, entry), all under ``prefix``, as shards of at most ``capacity``
    entries: a shard over capacity is cut in two by its next bit, again until each fits. Pure."""
    if len(entries) <= capacity or len(prefix) >= MAX_BITS:
        return {prefix: entries}
    n = len(prefix)
    zero = [e for e in entries if e[0][n] == "0"]
    one = [e for e in entries if e[0][n] == "1"]
    return {**split(prefix + "0", zero, capacity), **split(prefix + "1", one, capacity)}


def encode_shard(prefix: str, entries: Mapping[str, LedgerEntry]) -> bytes:
    """A shard's bytes: the same entries always make the same bytes (so the same name). Pure."""
    doc = {"formatVersion": 1, "prefix": prefix, "entries": {u: e.to_dict() for u, e in entries.items()}}
    return _gzip(doc)


def encode_index(shards: Mapping[str, str], count: int) -> bytes:
    """An index's bytes: ``shards`` (prefix → shard name) and the number of entries. Pure."""
    return _gzip({"formatVersion": 1, "entries": count, "shards": dict(shards)})


def _gzip(doc: dict[str, Any]) -> bytes:
    text = json.dumps(doc, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()
    return gzip.compress(text, compresslevel=6, mtime=0)


def decode(uri: str, data: bytes) -> dict[str, Any]:
    """The JSON object in the ledger object ``uri``; a TableError naming it when its bytes are not
    the ones its name is the hash of (truncated, overwritten) or not a gzip-compressed JSON object."""
    name = uri.rsplit("/", 1)[-1]
    if fmt.ledger_object_name(data) != name:
        raise TableError(f"{uri} is damaged: its bytes are not the ones its name is the hash of")
    try:
        obj = json.loads(gzip.decompress(data))
    except (OSError, EOFError, ValueError) as e:
        raise TableError(f"{uri} is damaged: not gzip-compressed JSON ({e})") from e
    if not isinstance(obj, dict):
        raise TableError(f"{uri} is damaged: a JSON {type(obj).__name__}, not an object")
    return obj


def _parallel(fn: Callable[[T], R], items: list[T]) -> list[R]:
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(IO_THREADS, len(items))) as pool:
        return list(pool.map(fn, items))


# -- reading ---------------------------------------------------------------------------------
class _Shards:
    """The shards of one index of one table, read lazily, each at most once, the bytes counted.
    Shared by every copy of a ledger (the objects never change)."""

    def __init__(self, storage: st.Storage, root: str, name: str) -> None:
        problem = fmt.ledger_name_problem(name)
        if problem is not None:
            raise TableError(f"the ledger index {name!r} named by a checkpoint of {root} {problem}; lading never "
                             "writes another, so the checkpoint was written or changed by something else")
        self.storage, self.root, self.name = storage, fmt.table_root(root), name
        self.bytes_read = 0
        self._index: dict[str, str] | None = None
        self._lengths: tuple[int, ...] = ()
        self.count = 0
        self._loaded: dict[str, dict[str, LedgerEntry]] = {}

    def _read(self, name: str, what: str) -> dict[str, Any]:
        uri = fmt.ledger_uri(self.root, name)
        try:
            data = self.storage.read(uri)
        except (st.StorageError, FileNotFoundError) as e:
            if self.storage.head(uri) is not None:
                raise
            raise TableError(f"{uri}, {what} of the ledger index {self.name}, is missing ({e}); the table's "
                             "ledger cannot be read. Restore the object from a copy, or delete the checkpoint "
                             "naming the index (opening then starts from an older one)") from e
        self.bytes_read += len(data)
        return decode(uri, data)

    def index(self) -> dict[str, str]:
        if self._index is None:
            doc = self._read(self.name, "the index")
            shards = doc.get("shards")
            where = fmt.ledger_uri(self.root, self.name)
            if not isinstance(shards, dict):
                raise TableError(f"{where} is damaged: it has no \"shards\" object")
            for prefix, name in shards.items():
                problem = fmt.ledger_name_problem(name)
                if problem is not None:
                    raise TableError(f"{where}: shard {prefix!r} {name!r} {problem}; lading never writes another")
            problem = coverage_problem(shards)
            if problem is not None:
                raise TableError(f"{where} is damaged: {problem}")
            self.count = int(doc.get("entries", 0))
            self._lengths = tuple(sorted({len(p) for p in shards}))
            self._index = {str(p): str(n) for p, n in shards.items()}
        return self._index

    def prefix(self, uri: str) -> str:
        return prefix_of(uri_bits(uri), self.index(), self._lengths)

    def shard(self, prefix: str) -> dict[str, LedgerEntry]:
        if prefix not in self._loaded:
            self._loaded[prefix] = self._decode_shard(prefix, self._read(self.index()[prefix], f"shard {prefix!r}"))
        return self._loaded[prefix]

    def _decode_shard(self, prefix: str, doc: dict[str, Any]) -> dict[str, LedgerEntry]:
        where = fmt.ledger_uri(self.root, self.index()[prefix])
        entries = doc.get("entries")
        if doc.get("prefix") != prefix or not isinstance(entries, dict):
            raise TableError(f"{where} is damaged: it is not the shard of prefix {prefix!r}")
        return {str(u): LedgerEntry.from_dict(raw) for u, raw in entries.items()}

    def prefetch(self, uris: Iterable[str]) -> None:
        """Read the shards of ``uris`` not read yet, several at once."""
        index = self.index()
        wanted = sorted({self.prefix(u) for u in uris} - self._loaded.keys())

        def fetch(prefix: str) -> tuple[str, bytes | None]:
            try:
                return prefix, self.storage.read(fmt.ledger_uri(self.root, index[prefix]))
            except (st.StorageError, OSError):
                return prefix, None  # read again, one by one, by ``shard``: it explains what is wrong

        for prefix, data in _parallel(fetch, wanted):
            if data is None:
                self.shard(prefix)
                continue
            self.bytes_read += len(data)
            uri = fmt.ledger_uri(self.root, index[prefix])
            self._loaded[prefix] = self._decode_shard(prefix, decode(uri, data))

    def seed(self, index: dict[str, str], count: int, shards: Mapping[str, dict[str, LedgerEntry]]) -> None:
        """What a writer just wrote: known without reading it back."""
        self._index, self.count = index, count
        self._lengths = tuple(sorted({len(p) for p in index}))
        self._loaded.update(shards)


class Ledger(Mapping[str, LedgerEntry]):
    """A table's ledger: URI → entry. The entries of the checkpoint's index are read lazily (the
    shard of each URI looked up); ``pending`` holds those of the commits replayed since."""

    def __init__(self, base: _Shards | None = None, pending: Mapping[str, LedgerEntry] | None = None) -> None:
        self._base = base
        self._pending: dict[str, LedgerEntry] = dict(pending or {})

    @property
    def index_name(self) -> str | None:
        """The index holding the entries before ``pending`` (None: none)."""
        return None if self._base is None else self._base.name

    @property
    def pending(self) -> Mapping[str, LedgerEntry]:
        return self._pending

    @property
    def bytes_read(self) -> int:
        """Bytes of ledger objects this ledger (and every copy of it) has read."""
        return 0 if self._base is None else self._base.bytes_read

    def put(self, uri: str, entry: LedgerEntry) -> None:
        self._pending[uri] = entry

    def copy(self) -> Ledger:
        return Ledger(self._base, self._pending)

    def prefetch(self, uris: Iterable[str]) -> None:
        """Read, several at once, the shards that lookups of ``uris`` will need."""
        if self._base is not None:
            self._base.prefetch(u for u in uris if u not in self._pending)

    def get(self, uri: str, default: Any = None) -> Any:
        entry = self._pending.get(uri)
        if entry is None and self._base is not None:
            entry = self._base.shard(self._base.prefix(uri)).get(uri)
        return default if entry is None else entry

    def __getitem__(self, uri: str) -> LedgerEntry:
        entry = self.get(uri)
        if entry is None:
            raise KeyError(uri)
        return entry  # type: ignore[no-any-return]

    def __contains__(self, uri: object) -> bool:
        return isinstance(uri, str) and self.get(uri) is not None

    def __iter__(self) -> Iterator[str]:
        """Every URI: reads every shard (for tools and tests; lookups read one)."""
        yield from self._pending
        if self._base is not None:
            index = self._base.index()
            for prefix in index:
                yield from (u for u in self._base.shard(prefix) if u not in self._pending)

    def __len__(self) -> int:
        if self._base is None:
            return len(self._pending)
        self._base.index()
        base = self._base
        return base.count + sum(1 for u in self._pending if base.shard(base.prefix(u)).get(u) is None)


def open_index(storage: st.Storage, root: str, name: str) -> Ledger:
    """The ledger of the index ``name`` (from a checkpoint), read when it is first looked in."""
    return Ledger(_Shards(storage, root, name))


# -- writing ---------------------------------------------------------------------------------
def write(storage: st.Storage, root: str, ledger: Ledger) -> tuple[str | None, Ledger]:
    """Write ``ledger`` as an index and shards: the name of the index (None when the ledger is
    empty) and the same ledger with nothing pending.

    Only the shards that ``ledger.pending`` changes are read and written (a shard that grows past
    ``fmt.LEDGER_SHARD_ENTRIES`` is split), then the index naming every shard. Every object is
    written under the hash of its bytes, so its content never changes: one already there holds
    exactly these bytes (``_create``). Nothing refers to any of them until the caller writes the checkpoint naming
    the index."""
    root = fmt.table_root(root)
    base = ledger._base  # noqa: SLF001 - the writer of this module's own structure
    if not ledger.pending:
        return ledger.index_name, ledger
    old_index: dict[str, str] = {"": ""} if base is None else dict(base.index())
    lengths = tuple(sorted({len(p) for p in old_index}))
    touched: dict[str, list[tuple[str, str, LedgerEntry]]] = {}
    for uri, entry in ledger.pending.items():
        bits = uri_bits(uri)
        touched.setdefault(prefix_of(bits, old_index, lengths), []).append((bits, uri, entry))
    if base is not None:
        base.prefetch(u for u in ledger.pending)
    count = 0 if base is None else base.count
    new_index = dict(old_index)
    new_shards: dict[str, dict[str, LedgerEntry]] = {}
    for prefix, changes in touched.items():
        old = {} if base is None else base.shard(prefix)
        count -= len(old)
        merged = {u: (uri_bits(u), e) for u, e in old.items()}
        merged.update({u: (b, e) for b, u, e in changes})
        del new_index[prefix]
        for p, rows in split(prefix, [(b, u, e) for u, (b, e) in merged.items()]).items():
            new_shards[p] = {u: e for _, u, e in sorted(rows, key=lambda r: r[1])}
            count += len(rows)
    encoded = {p: encode_shard(p, entries) for p, entries in new_shards.items()}
    names = {p: fmt.ledger_object_name(data) for p, data in encoded.items()}
    _parallel(lambda p: _create(storage, fmt.ledger_uri(root, names[p]), encoded[p]), list(encoded))
    new_index.update(names)
    index_data = encode_index(new_index, count)
    index_name = fmt.ledger_object_name(index_data)
    _create(storage, fmt.ledger_uri(root, index_name), index_data)
    shards = _Shards(storage, root, index_name)
    shards.bytes_read = 0 if base is None else base.bytes_read
    shards.seed(new_index, count, new_shards)  # what it wrote; older shards are read again if needed,
    # so a long-running writer (a stream) holds one checkpoint's worth of shards, not the whole ledger
    return index_name, Ledger(shards)


def _create(storage: st.Storage, uri: str, data: bytes) -> None:
    """Write ``data`` at ``uri``, its name being their hash: an object already there holds the same
    bytes. A plain PUT, not create-if-absent, so that an object a new index names was stamped
    (S3 ``LastModified``) while that index was written, even one an earlier writer left: a vacuum
    removing unnamed objects older than its grace period cannot remove one a checkpoint is about
    to name."""
    storage.put(uri, data)
