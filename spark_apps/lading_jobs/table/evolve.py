"""Schema evolution on write: columns the data carries that the table lacks become new columns.

A writer with the opt-in (``schemaEvolution: addColumns``) writes its parts with the
table's schema; its tasks report every column they read that the schema lacks
(``Found``: name, type, and where it was seen). ``evolve`` turns those reports into
the next schema — each new column gets a fresh id and is nullable, so rows written
before it existed read NULL — or refuses, naming the column and both places,
when two inputs disagree on a new column's type. ``settle`` is the writer's loop:
tasks whose input carried new columns are run again with the evolved schema (their
first parts are discarded; parts of the other tasks stay valid, since an added id
reads NULL in them), until no task finds anything new. The schema goes into the
same commit as the parts (``Change.schema``), so the new column and the rows that
carry it appear together or not at all.

Only new columns are decided here. A column the table already has keeps its type:
each value is cast to it, and a value that does not cast is a rejected row, as in
any load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from lading_jobs.table.log.commits import validate_identity_types
from lading_jobs.table.schema import SchemaError, TableSchema, arrow_type, type_from_arrow

MODES = ("none", "addColumns")
"""The values of ``schemaEvolution``: ``none`` (extra columns are ignored) and ``addColumns``."""

NULL_TYPE = "null"
"""The type reported for a column whose values were all NULL (JSON): any other report decides it."""

_INTEGERS = ("tinyint", "smallint", "int", "bigint")
_FLOATS = ("float", "double")


class EvolutionConflict(SchemaError):
    """Two inputs carry the same new column with types that do not widen into one."""


@dataclass(frozen=True)
class Found:
    """A column an input carries that the table lacks: its name, its type (a type name of the
    mapping, or ``NULL_TYPE``), and where it was seen (a file URI, a Kafka range)."""

    name: str
    type: str
    where: str

    def to_list(self) -> list[str]:
        return [self.name, self.type, self.where]

    @classmethod
    def from_list(cls, raw: Sequence[str]) -> Found:
        return cls(str(raw[0]), str(raw[1]), str(raw[2]))


def widen(a: str, b: str) -> str | None:
    """The one type both ``a`` and ``b`` fit, as Spark's schema merge widens them, or None.

    Integers widen to the wider integer, integers and floats to ``double`` (a ``bigint``
    beyond 2^53 then rounds to the nearest double, docs/copyjob-load.md); NULL (a column
    seen only as NULL) takes the other type. Anything else must match.
    """
    if a == b or b == NULL_TYPE:
        return a
    if a == NULL_TYPE:
        return b
    if a in _INTEGERS and b in _INTEGERS:
        return max(a, b, key=_INTEGERS.index)
    if a in _INTEGERS + _FLOATS and b in _INTEGERS + _FLOATS:
        return "double"
    return None


def evolve(schema: TableSchema, found: Iterable[Found], *, envelope: str = "append",
           key_columns: Iterable[str] = ()) -> TableSchema:
    """``schema`` plus one nullable column (a fresh id) per new name in ``found``, in the order
    first seen; names match case-insensitively, as loads match columns. Raises
    ``EvolutionConflict`` naming the column and two places that disagree on its type."""
    merged: dict[str, tuple[str, str, Found]] = {}  # folded name → (name, type, first report of that type)
    for f in found:
        if schema.find(f.name) is not None:
            continue  # the table has it (added concurrently, or matched by another file)
        key = f.name.lower()
        if key not in merged:
            merged[key] = (f.name, f.type, f)
            continue
        name, current, first = merged[key]
        wider = widen(current, f.type)
        if wider is None:
            raise EvolutionConflict(
                f"schemaEvolution: column {name!r} is {current} in {first.where} but {f.type} in {f.where}; "
                "make the inputs agree, or add the column to the table first with the type you want (each "
                "input's values are then cast to it)")
        merged[key] = (name, wider, first if wider == current else f)
    out = schema
    for name, type_name, first in merged.values():
        t = "string" if type_name == NULL_TYPE else type_name
        try:
            arrow_type(t)
            out = out.add_column(name, t)
        except SchemaError as e:
            raise SchemaError(f"schemaEvolution: column {name!r} of {first.where}: {e}") from e
    if out is not schema:
        validate_identity_types(out, envelope, tuple(key_columns))
    return out


def type_of(field: pa.Field, text: bool) -> str:
    """The type a new column gets from the field that carried it: ``string`` for fields of a
    text format read as raw bytes (CSV), ``NULL_TYPE`` for an all-NULL column, else the
    mapping's name for the Arrow type (``SchemaError`` if it has none)."""
    if text and (pa.types.is_binary(field.type) or pa.types.is_string(field.type)):
        return "string"
    if pa.types.is_null(field.type):
        return NULL_TYPE
    return type_from_arrow(field)


Outcome = TypeVar("Outcome")


def settle(schema: TableSchema, outcomes: list[Outcome], found: Callable[[Outcome], list[Found]],
           discard: Callable[[list[Outcome]], None], redo: Callable[[TableSchema, list[Outcome], int], list[Outcome]], *,
           envelope: str = "append", key_columns: Iterable[str] = (), rounds: int = 3
           ) -> tuple[TableSchema, list[Outcome]]:
    """Run the writer's tasks to a fixed point: while some outcome found new columns, evolve the
    schema, ``discard`` those outcomes' parts and ``redo`` them (same order, one outcome each;
    the int is the round, for fresh part names). The final schema and outcomes, in place."""
    outcomes = list(outcomes)
    for round_ in range(1, rounds + 1):
        carrying = [i for i, o in enumerate(outcomes) if found(o)]
        if not carrying:
            return schema, outcomes
        if round_ == rounds:
            where = sorted({f.where for i in carrying for f in found(outcomes[i])})
            raise SchemaError(f"schemaEvolution: {', '.join(where[:3])} still carried new columns after "
                              f"{rounds - 1} evolutions of the schema; the input changed while it was read")
        schema = evolve(schema, [f for i in carrying for f in found(outcomes[i])], envelope=envelope,
                        key_columns=key_columns)
        stale = [outcomes[i] for i in carrying]
        discard(stale)
        again = redo(schema, stale, round_)
        if len(again) != len(stale):
            raise RuntimeError(f"redo returned {len(again)} outcomes for {len(stale)}")
        for i, o in zip(carrying, again, strict=True):
            outcomes[i] = o
    return schema, outcomes
