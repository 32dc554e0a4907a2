"""The lading table format's constants and layout: where every object of a table lives.

A table is a prefix. Under it::

    _lading_log/00000000000000000000.json             commit 0 (creates the table)
    _lading_log/00000000000000000001.json             commit 1, ...
    _lading_log/00000000000000000010.checkpoint.json  full state as of commit 10
    _lading_log/_last_checkpoint                      {"version": 10} (a hint)
    _lading_ledger/<32 hex>.json.gz                   ledger shards and indexes (lading_jobs.table.log.ledger)
    data/<write id>/part-<task>-<n>.parquet           parts, named once, never rewritten

Everything here is a pure function of the table URI; docs/table-format.md is the spec.
"""

from __future__ import annotations

import hashlib
import re
import uuid

FORMAT_VERSION = 1
"""Bumped on any change a reader of the previous version would misread."""

LOG_DIR = "_lading_log"
DATA_DIR = "data"
LAST_CHECKPOINT = "_last_checkpoint"
CHECKPOINT_INTERVAL = 10
"""A checkpoint is written after every commit whose version is a multiple of this."""

TOMBSTONE_MS = 24 * 3600 * 1000
"""How long the state (and so every checkpoint) remembers a removed part: retention with a grace
period up to this long reads the removals from the state instead of every commit."""

LEDGER_DIR = "_lading_ledger"
"""The ledger's shards and indexes, each named by the hash of its bytes (beside ``LOG_DIR``, so
listing the log never lists them)."""
LEDGER_SHARD_ENTRIES = 128
"""A ledger shard holding more entries than this is split in two by the next bit of the URIs' hashes."""

VERSION_DIGITS = 20
MAX_PARTS_PER_COMMIT = 1 << 20
"""Parts one commit may add; a part's order is ``seq * MAX_PARTS_PER_COMMIT + index``."""

TIME_COLUMN = "_lading_time"
"""Every row's logical time (int64)."""
DIFF_COLUMN = "_lading_diff"
"""Every row's diff (int64): +1 an insert/upsert, -1 a delete marker, ±n a diff."""
TIME_FIELD_ID = 2_147_483_000
DIFF_FIELD_ID = 2_147_483_001
RESERVED_PREFIX = "_lading_"

# Schema metadata keys written into every part's Arrow schema (and so its Parquet footer).
META_FORMAT_VERSION = b"lading.format_version"
META_TABLE_ID = b"lading.table_id"
META_SCHEMA_ID = b"lading.schema_id"
META_ENVELOPE = b"lading.envelope"
# Field metadata key of a column's id (type metadata: lading_jobs.formats.types, docs/formats.md).
FIELD_ID_KEY = b"PARQUET:field_id"

ENVELOPES = ("append", "upsert", "diff")

STRING_STATS_LENGTH = 64
"""Longest string bound kept in statistics; longer bounds are truncated (and flagged)."""


def table_root(uri: str) -> str:
    """The table's prefix with exactly one trailing slash."""
    return uri.rstrip("/") + "/"


def commit_name(version: int) -> str:
    return f"{version:0{VERSION_DIGITS}d}.json"


def commit_uri(uri: str, version: int) -> str:
    return f"{table_root(uri)}{LOG_DIR}/{commit_name(version)}"


def checkpoint_uri(uri: str, version: int) -> str:
    return f"{table_root(uri)}{LOG_DIR}/{version:0{VERSION_DIGITS}d}.checkpoint.json"


def last_checkpoint_uri(uri: str) -> str:
    return f"{table_root(uri)}{LOG_DIR}/{LAST_CHECKPOINT}"


_LEDGER_NAME = re.compile(r"[0-9a-f]{32}\.json\.gz")


def ledger_object_name(data: bytes) -> str:
    """The name of a ledger shard or index holding ``data``: the first 32 hex digits of its SHA-256."""
    return hashlib.sha256(data).hexdigest()[:32] + ".json.gz"


def ledger_name_problem(name: object) -> str | None:
    """Why ``name``, read from a checkpoint or a ledger index, is not the name of a ledger object
    (32 lowercase hex digits and ``.json.gz``, nothing else: no path reaches outside
    ``_lading_ledger/``); None when it is one. Pure."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    if not _LEDGER_NAME.fullmatch(name):
        return "is not 32 lowercase hex digits followed by .json.gz"
    return None


def ledger_uri(uri: str, name: str) -> str:
    return f"{table_root(uri)}{LEDGER_DIR}/{name}"


_COMMIT_RE = re.compile(r"(\d{" + str(VERSION_DIGITS) + r"})\.json$")


def parse_commit_name(name: str) -> int | None:
    """``00000000000000000007.json`` → 7; anything else → None."""
    m = _COMMIT_RE.fullmatch(name.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def new_write_id() -> str:
    """A fresh directory name for one write's parts (so a failed write is one prefix)."""
    return "w-" + uuid.uuid4().hex


def write_prefix(uri: str, write_id: str) -> str:
    return f"{table_root(uri)}{DATA_DIR}/{write_id}/"


def part_path(write_id: str, task: int, n: int) -> str:
    """A part's path relative to the table root."""
    return f"{DATA_DIR}/{write_id}/part-{task:05d}-{n:05d}.parquet"


_PATH_SEGMENT = re.compile(r"[A-Za-z0-9._=+-]+")
PATH_CHARACTERS = "letters, digits and . _ - = +"
"""What a segment of a path inside a table may hold (an allow-list: lading writes ``w-<hex>``,
``c-<hex>`` and ``part-<task>-<n>.parquet``)."""


def path_problem(path: object) -> str | None:
    """Why ``path``, read from a log or checkpoint as a part's path, is not a path inside the
    table's ``data/``; None when it is one.

    A part path is relative to the table root, starts with ``data/`` and is segments of
    :data:`PATH_CHARACTERS` joined by single slashes, none of them ``.`` or ``..``. So no
    absolute path, scheme, backslash, empty segment or percent-encoding (``%2e%2e`` is ``..``
    to a store that decodes it) can name an object outside the table. Pure.
    """
    if not isinstance(path, str):
        return f"is a {type(path).__name__}, not a string"
    if not path:
        return "is empty"
    if "://" in path or ":" in path.split("/", 1)[0]:
        return "is a URI, not a path relative to the table"
    if path.startswith("/"):
        return "is absolute"
    if "\\" in path:
        return "holds a backslash"
    if "%" in path:
        return "holds percent-encoding (%2e%2e is .. to a store that decodes it)"
    segments = path.split("/")
    if "" in segments:
        return "has an empty segment (//, or a trailing /)"
    if any(s in (".", "..") for s in segments):
        return "has a . or .. segment"
    if segments[0] != DATA_DIR or len(segments) < 2:
        return f"is not under {DATA_DIR}/"
    bad = next((s for s in segments if not _PATH_SEGMENT.fullmatch(s)), None)
    if bad is not None:
        return f"has the segment {bad!r}, which holds a character other than {PATH_CHARACTERS}"
    return None


def part_uri(uri: str, path: str) -> str:
    """A part's full URI from its path relative to the table root."""
    return table_root(uri) + path
