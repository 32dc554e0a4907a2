"""Iceberg tables written by pyiceberg itself, for the Iceberg input's tests: the smallest
catalog pyiceberg can commit through (its SQL catalog needs SQLAlchemy, which the project
does not ship). The catalog keeps each table's current metadata location in memory; every
commit writes a new ``metadata/NNNNN-….metadata.json`` with pyiceberg's own code
(``MetastoreCatalog._update_and_stage_table`` and ``_write_metadata``, as its SQL catalog)."""

from __future__ import annotations

from typing import Any

from pyiceberg.catalog import Catalog, MetastoreCatalog, PropertiesUpdateSummary
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties


class FileCatalog(MetastoreCatalog):
    """Tables under ``warehouse`` (a ``file://`` URI); pointers in memory."""

    def __init__(self, warehouse: str) -> None:
        super().__init__("files", warehouse=warehouse)
        self.pointers: dict[Identifier, str] = {}

    def create_table(self, identifier: str | Identifier, schema: Schema | Any, location: str | None = None,
                     partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
                     sort_order: SortOrder = UNSORTED_SORT_ORDER, properties: Properties = EMPTY_DICT) -> Table:
        staged = self._create_staged_table(identifier, schema, location, partition_spec, sort_order, properties)
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        self.pointers[staged.name()] = staged.metadata_location
        return self.load_table(staged.name())

    def load_table(self, identifier: str | Identifier) -> Table:
        key = Catalog.identifier_to_tuple(identifier)
        if key not in self.pointers:
            raise NoSuchTableError(str(identifier))
        location = self.pointers[key]
        io = self._load_file_io(location=location)
        metadata = FromInputFile.table_metadata(io.new_input(location))
        return Table(key, metadata, location, self._load_file_io(metadata.properties, location), self)

    def commit_table(self, table: Table, requirements: tuple[Any, ...], updates: tuple[Any, ...]
                     ) -> CommitTableResponse:
        current = self.load_table(table.name())
        staged = self._update_and_stage_table(current, table.name(), requirements, updates)
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        self.pointers[table.name()] = staged.metadata_location
        return CommitTableResponse(metadata=staged.metadata, metadata_location=staged.metadata_location)

    # -- what these tests never call ------------------------------------------------------------
    def _unsupported(self, *_: Any, **__: Any) -> Any:
        raise NotImplementedError("FileCatalog: tables only")

    register_table = drop_table = rename_table = drop_namespace = list_views = load_view = _unsupported
    drop_view = view_exists = register_view = _unsupported

    def create_namespace(self, namespace: str | Identifier, properties: Properties = EMPTY_DICT) -> None:
        pass

    def list_tables(self, namespace: str | Identifier) -> list[Identifier]:
        return list(self.pointers)

    def list_namespaces(self, namespace: str | Identifier = ()) -> list[Identifier]:
        return []

    def load_namespace_properties(self, namespace: str | Identifier) -> Properties:
        return {}

    def update_namespace_properties(self, namespace: str | Identifier, removals: set[str] | None = None,
                                    updates: Properties = EMPTY_DICT) -> PropertiesUpdateSummary:
        return PropertiesUpdateSummary(removed=[], updated=[], missing=[])
