"""Per-format options (``to.options``, ``from.options``, ``inputs[].options``), validated.

Defaults follow PostgreSQL ``COPY ... (FORMAT csv)`` for CSV; Parquet defaults to
snappy; compression for CSV and JSON lines is ``none``, ``gzip`` or ``zstd``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from lading_spec.errors import SpecError

FileFormat = Literal["csv", "parquet", "json"]
FORMATS: tuple[str, ...] = ("csv", "parquet", "json")
TEXT_COMPRESSIONS: tuple[str, ...] = ("none", "gzip", "zstd")
PARQUET_COMPRESSIONS: tuple[str, ...] = ("snappy", "zstd", "gzip", "none")


@dataclass(frozen=True)
class CsvOptions:
    """PostgreSQL-compatible CSV: NULL is an unquoted empty field, '' is ``""``."""

    header: bool = False
    delimiter: str = ","
    quote: str = '"'
    escape: str = '"'
    null: str = ""
    force_quote: tuple[str, ...] | Literal["*"] = ()
    compression: str = "none"


@dataclass(frozen=True)
class ParquetOptions:
    compression: str = "snappy"
    row_group_rows: int = 1_000_000


@dataclass(frozen=True)
class JsonOptions:
    compression: str = "none"


FormatOptions = CsvOptions | ParquetOptions | JsonOptions

_KNOWN: dict[str, tuple[str, ...]] = {
    "csv": ("header", "delimiter", "quote", "escape", "null", "forceQuote", "forceQuoteAll", "compression"),
    "parquet": ("compression", "rowGroupSize"),
    "json": ("compression",),
}


def parse_format(value: Any, field_path: str) -> FileFormat:
    if value not in FORMATS:
        raise SpecError(field_path, f"unknown format {value!r}; accepted: {', '.join(FORMATS)}")
    return value  # type: ignore[no-any-return]


def _one_char(options: dict[str, Any], key: str, default: str, path: str) -> str:
    value = options.get(key, default)
    if not isinstance(value, str) or len(value) != 1:
        raise SpecError(f"{path}.{key}", f"must be a single character, got {value!r}")
    if not "\x01" <= value <= "\x7f":
        # Arrow's CSV reader and writer, and PostgreSQL's COPY, take a one-byte character
        raise SpecError(f"{path}.{key}", f"must be a single ASCII character (U+0001 to U+007F), got {value!r}")
    return value


def _choice(options: dict[str, Any], key: str, choices: tuple[str, ...], path: str) -> str:
    value = options.get(key, choices[0])
    if value not in choices:
        raise SpecError(f"{path}.{key}", f"got {value!r}; accepted: {', '.join(choices)}")
    return str(value)


def _force_quote(options: dict[str, Any], path: str) -> tuple[str, ...] | Literal["*"]:
    """``forceQuote: [col, ...]`` (those columns) or ``forceQuoteAll: true`` (every column, ``"*"``)."""
    force: Any = options.get("forceQuote")
    every = options.get("forceQuoteAll", False)
    if not isinstance(every, bool):
        raise SpecError(f"{path}.forceQuoteAll", f"must be true or false, got {every!r}")
    if force == "*":
        raise SpecError(f"{path}.forceQuote", "takes a list of column names; to quote every column "
                        "write forceQuoteAll: true")
    if force is not None and not (isinstance(force, list) and all(isinstance(c, str) and c for c in force)):
        raise SpecError(f"{path}.forceQuote", f"must be a list of column names, got {force!r}")
    if every and force:
        raise SpecError(f"{path}.forceQuote", "give forceQuote (a list of columns) or forceQuoteAll: true "
                        "(every column), not both")
    return "*" if every else tuple(force or ())


def parse_options(fmt: FileFormat, options: dict[str, Any] | None, path: str) -> FormatOptions:
    """Validate ``options`` for ``fmt``; ``path`` is the dotted field (``to.options``)."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(_KNOWN[fmt]))
    if unknown:
        raise SpecError(
            f"{path}.{unknown[0]}",
            f"unknown {fmt} option; accepted: {', '.join(_KNOWN[fmt])}",
        )
    if fmt == "csv":
        header = options.get("header", False)
        if not isinstance(header, bool):
            raise SpecError(f"{path}.header", f"must be true or false, got {header!r}")
        null = options.get("null", "")
        if not isinstance(null, str):
            raise SpecError(f"{path}.null", f"must be a string, got {null!r}")
        force_quote = _force_quote(options, path)
        csv = CsvOptions(
            header=header,
            delimiter=_one_char(options, "delimiter", ",", path),
            quote=_one_char(options, "quote", '"', path),
            escape=_one_char(options, "escape", options.get("quote", '"'), path),
            null=null,
            force_quote=force_quote,
            compression=_choice(options, "compression", TEXT_COMPRESSIONS, path),
        )
        if csv.delimiter in (csv.quote, "\n", "\r"):
            raise SpecError(f"{path}.delimiter", "must differ from quote and from newline characters")
        if csv.delimiter in csv.null or csv.quote in csv.null:
            raise SpecError(f"{path}.null", "must not contain the delimiter or the quote character")
        return csv
    if fmt == "parquet":
        rows = options.get("rowGroupSize", 1_000_000)
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise SpecError(f"{path}.rowGroupSize", f"must be a positive number of rows, got {rows!r}")
        return ParquetOptions(
            compression=_choice(options, "compression", PARQUET_COMPRESSIONS, path),
            row_group_rows=rows,
        )
    return JsonOptions(compression=_choice(options, "compression", TEXT_COMPRESSIONS, path))


@dataclass(frozen=True)
class FileSet:
    """Files read by a job: a prefix (or glob), optionally filtered, or an explicit list."""

    uri: str | None
    pattern: str | None = None
    file_list: tuple[str, ...] = ()
    format: FileFormat = "parquet"
    options: FormatOptions = field(default_factory=ParquetOptions)
    partitioning: Literal["hive"] | None = None
    """``hive``: the ``col=value/`` directories under the prefix are columns (``sources.hive``)."""
    partition_columns: tuple[tuple[str, str], ...] = ()
    """(name, type) of each partition column, outermost first; empty: found and inferred."""
