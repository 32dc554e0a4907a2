"""Fitting decoded pieces to the table's schema: match columns, cast, check NOT NULL.

Columns are matched by name (exactly, else ignoring case) or, for headerless CSV,
by position. The rule holds per row: where a piece has several spellings of one
column (JSON lines or Kafka messages with ``id`` in some rows and ``ID`` in others:
the decoder makes both columns), each row takes the value under the exact name, else
the first non-NULL value under another spelling, so what loads never depends on
which rows were decoded together. File columns the table lacks are ignored (with ``discover``, they are
reported as ``found`` for schema evolution, ``lading_jobs.table.evolve``); table columns the file
lacks get their default (or NULL), and a NOT NULL column without a default that
the file lacks makes the whole file an error. Each value is cast to its column's
type (``cast``); a row with any value that does not cast, or a NULL in a NOT NULL
column, is rejected with the first such column and reason. The good rows stay
Arrow, filtered by one mask.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lading_jobs.ingest.cast import cast_column
from lading_jobs.ingest.decode import Decoded, Piece, Reject
from lading_jobs.table import evolve
from lading_jobs.table.format import RESERVED_PREFIX
from lading_jobs.table.schema import SchemaError, TableSchema, arrow_type, default_scalar


class FileError(ValueError):
    """The whole file cannot load (its columns do not fit the table)."""


@dataclass
class Conformed:
    table: pa.Table  # the good rows, in the table's schema
    rejects: list[Reject] = field(default_factory=list)


def match_columns(file_columns: list[str], schema: TableSchema, by_position: bool) -> dict[str, list[str]]:
    """Table column name → the file columns that supply it, in order of precedence: the exact
    name first, then other spellings in file order (empty when the file lacks it)."""
    if by_position:
        return {c.name: file_columns[i:i + 1] for i, c in enumerate(schema.columns)}
    folded: dict[str, list[str]] = {}
    for name in file_columns:
        folded.setdefault(name.lower(), []).append(name)
    out: dict[str, list[str]] = {}
    for c in schema.columns:
        same = folded.get(c.name.lower(), [])
        out[c.name] = sorted(same, key=lambda n: n != c.name)  # stable: the exact name first
    if file_columns and not any(out.values()):
        raise FileError(f"none of its columns ({', '.join(file_columns[:10])}) matches a table column "
                        f"({', '.join(schema.names)}); check the header or set header: false to match by position")
    for c in schema.columns:
        if not out[c.name] and not c.nullable and c.default is None:
            raise FileError(f"it has no column {c.name!r}, which the table declares NOT NULL without a default")
    return out


def _as_bytes_if_text(arr: pa.Array) -> pa.Array:
    """Strings are re-validated as UTF-8 (JSON decoding does not check them)."""
    if pa.types.is_string(arr.type):
        return arr.view(pa.binary())
    if pa.types.is_large_string(arr.type):
        return arr.view(pa.large_binary())
    return arr


class Conformer:
    """Streams a decoded file's good rows in the table's schema; ``rejects`` fills as it goes."""

    def __init__(self, decoded: Decoded, schema: TableSchema, *, discover: str | None = None) -> None:
        """``discover``: where the rows come from (a file URI, a Kafka range); given, columns the
        table lacks are reported in ``found`` (once per name) instead of silently ignored."""
        self.decoded, self.schema, self.discover = decoded, schema, discover
        self.found: list[evolve.Found] = []
        self.rejects: list[Reject] = list(decoded.rejects)
        self._seen = len(decoded.rejects)
        self.rows_good = 0
        self.target = pa.schema([pa.field(c.name, arrow_type(c.type)) for c in schema.columns])

    def tables(self) -> Iterator[pa.Table]:
        for piece in self.decoded.iter_pieces():
            table = self._piece(piece)
            self.rows_good += table.num_rows
            yield table
        self.rejects += self.decoded.rejects[self._seen:]  # found while decoding lazily (row groups)
        self.rejects.sort(key=lambda r: r.position)

    def _piece(self, piece: Piece) -> pa.Table:
        n = piece.table.num_rows
        mapping = match_columns(piece.table.column_names, self.schema, self.decoded.by_position)
        if self.discover is not None:
            self._discover(piece.table.schema, [n for names in mapping.values() for n in names])
        bad_reason: dict[int, tuple[str, str]] = {}
        arrays = []
        for c in self.schema.columns:
            typ = arrow_type(c.type)
            sources = mapping[c.name]
            if not sources:
                value = default_scalar(c.default, c.type) if c.default is not None else pa.scalar(None, typ)
                arrays.append(pa.repeat(value, n) if value.is_valid else pa.nulls(n, typ))
                continue
            arr, failures = self._column(piece.table, sources, typ, c.type)
            for index, reason in failures:
                bad_reason.setdefault(index, (c.name, reason))
            if not c.nullable and arr.null_count:
                for index in np.flatnonzero(pc.is_null(arr).to_numpy(zero_copy_only=False)).tolist():
                    bad_reason.setdefault(int(index), (c.name, f"NULL in column {c.name!r}, which is NOT NULL"))
            arrays.append(arr)
        table = pa.Table.from_arrays(arrays, schema=self.target)
        if not bad_reason:
            return table
        keep = np.ones(n, dtype=bool)
        for index in sorted(bad_reason):
            keep[index] = False
            column, reason = bad_reason[index]
            position = int(piece.positions[index])
            self.rejects.append(Reject(position, reason, column=column,
                                       record=self.decoded.record(piece.table, index, position)))
        return table.filter(pa.array(keep))


    def _column(self, table: pa.Table, sources: list[str], typ: pa.DataType,
                type_name: str) -> tuple[pa.Array, list[tuple[int, str]]]:
        """One table column from its file columns (``match_columns``), cast: each row's value from
        the first source that holds one, and only that source's cast failures."""
        raws = [_as_bytes_if_text(table.column(s).combine_chunks()) for s in sources]
        cast = [cast_column(raw, typ, type_name, self.decoded.binary_text) for raw in raws]
        if len(cast) == 1:
            return cast[0]
        failures: list[tuple[int, str]] = []
        taken = pa.repeat(pa.scalar(False), len(raws[0]))  # rows an earlier source supplies
        for raw, (_, fails) in zip(raws, cast, strict=True):
            if fails:
                mine = pc.and_(pc.is_valid(raw), pc.invert(taken)).to_numpy(zero_copy_only=False)
                failures += [f for f in fails if mine[f[0]]]
            taken = pc.or_(taken, pc.is_valid(raw))
        return pc.coalesce(*(arr for arr, _ in cast)), sorted(failures)

    def _discover(self, schema: pa.Schema, matched: Iterable[str | None]) -> None:
        """Report the columns of ``schema`` that no table column took (a later piece may type a
        column that an earlier one saw only as NULL)."""
        assert self.discover is not None
        if self.decoded.by_position:
            return  # headerless CSV: extra fields have no names
        known = {f.name: i for i, f in enumerate(self.found)}
        used = {m for m in matched if m is not None}
        for f in schema:
            if f.name in used or f.name.startswith(RESERVED_PREFIX):
                continue
            at = known.get(f.name)
            if at is not None and self.found[at].type != evolve.NULL_TYPE:
                continue
            try:
                type_name = evolve.type_of(f, self.decoded.text)
            except SchemaError as e:
                raise FileError(f"schemaEvolution: column {f.name!r}: {e}") from e
            report = evolve.Found(f.name, type_name, self.discover)
            if at is None:
                self.found.append(report)
            else:
                self.found[at] = report


def conform(decoded: Decoded, schema: TableSchema) -> Conformed:
    """Every good row of ``decoded`` in the table's schema, at once, and the rows rejected on the way."""
    conformer = Conformer(decoded, schema)
    tables = list(conformer.tables())
    good = pa.concat_tables(tables) if tables else conformer.target.empty_table()
    return Conformed(good, conformer.rejects)
