"""How output files are named: pure functions, no I/O.

``part-<task:05d>-<seq:05d>[-<token>].<ext>``: zero-padded, so name order is
task-then-sequence order (the order of a top-level ``ORDER BY``). Appends add a
short run token so they never collide with earlier runs. ``partitionBy`` adds
Hive-style ``col=value/`` directories, values escaped as Hive's
``FileUtils.escapePathName`` does, NULL as ``__HIVE_DEFAULT_PARTITION__``.
"""

from __future__ import annotations

import hashlib
import re

from lading_spec.formats import CsvOptions, FormatOptions, JsonOptions, ParquetOptions

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
MANIFEST_NAME = "_lading_manifest.json"
# Characters Hive escapes in partition path components (FileUtils.charToEscape), and NUL,
# which no path can hold.
_HIVE_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x00, 0x20)}
_PART = re.compile(r"part-\d{5}-\d{5}(?:-([0-9a-f]{8}))?\.[a-z.]+$")


def run_token(run_id: str) -> str:
    """Eight hex digits that identify a run inside file names."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:8]


def extension(fmt: str, options: FormatOptions | None) -> str:
    """``csv``, ``csv.gz``, ``jsonl.zst``, ``parquet`` ..."""
    if fmt == "parquet" or isinstance(options, ParquetOptions):
        return "parquet"
    base = "csv" if fmt == "csv" else "jsonl"
    compression = options.compression if isinstance(options, CsvOptions | JsonOptions) else "none"
    return base + {"none": "", "gzip": ".gz", "zstd": ".zst"}[compression]


def file_name(task: int, seq: int, ext: str, token: str | None = None) -> str:
    suffix = f"-{token}" if token else ""
    return f"part-{task:05d}-{seq:05d}{suffix}.{ext}"


def is_part_of_run(key: str, token: str | None) -> bool:
    """Whether ``key`` (a URI or key) is a part file lading writes for this run's naming."""
    match = _PART.search(key.rsplit("/", 1)[-1])
    if match is None:
        return False
    return match.group(1) == token


def manifest_name(token: str | None) -> str:
    """``_lading_manifest.json``, or ``_lading_manifest-<token>.json`` for appends."""
    return MANIFEST_NAME if token is None else f"_lading_manifest-{token}.json"


def escape_path_name(value: str) -> str:
    """Hive's ``FileUtils.escapePathName``: ``%XX`` for characters unsafe in paths."""
    if value == "":
        return HIVE_NULL
    return "".join(f"%{ord(c):02X}" if c in _HIVE_ESCAPE else c for c in value)


def partition_dir(columns: tuple[str, ...], values: tuple[str | None, ...]) -> str:
    """``region=eu/day=2024-01-01/`` for the given (already stringified) values."""
    return "".join(
        f"{escape_path_name(c)}={HIVE_NULL if v is None else escape_path_name(v)}/"
        for c, v in zip(columns, values, strict=True)
    )
