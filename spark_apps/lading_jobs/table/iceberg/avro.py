"""pyiceberg's manifest and manifest-list writers, with their Avro set-up done once per process.

pyiceberg (0.12) builds, for every Avro file it writes, the file's Avro schema from Iceberg's
(``AvroSchemaConversion``), its JSON, a writer tree resolved against the record schema
(``resolve_writer``) and the header's writer; and it encodes every record of a manifest list
anew, although a snapshot's list repeats its parent's manifests (up to ``mirror.MERGE_AT``):
most of the Iceberg mirror's CPU per commit (docs/benchmarks.md, "Iceberg mirror"). None of the
set-up depends on the file: the mirror writes v2 manifests of one unpartitioned spec (the manifest
entry's schema is the same whatever the table's) and v2 manifest lists; and a manifest's record in
a list never changes once its sequence numbers are assigned, so its encoding is kept
(``_ENCODED``, by path, length and sequence numbers) and each list encodes only its new manifest.

``write_manifest`` and ``write_manifest_list`` take pyiceberg's arguments and return its writers
(the same classes, the same bytes but for the random sync marker every Avro file draws); they
only hand the writers a container whose schema, writer tree and header were built the first
time. Anything else (another format version, a partitioned spec) goes to pyiceberg unchanged.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic_core import to_json
from pyiceberg import manifest as pm
from pyiceberg.avro.codecs import (
    AVRO_CODEC_KEY,
    CODEC_MAPPING_ICEBERG_TO_AVRO,
    AvroCompressionCodec,
)
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.file import MAGIC, META_SCHEMA, SYNC_SIZE, AvroFileHeader, AvroOutputFile
from pyiceberg.avro.resolver import construct_writer, resolve_writer
from pyiceberg.avro.writer import Writer
from pyiceberg.io import OutputFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.typedef import TableVersion
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

_SCHEMA_KEY = "avro.schema"  # pyiceberg.avro.file._SCHEMA_KEY


@dataclass(frozen=True)
class _Layout:
    """What an Avro container of one record schema needs, built once: pyiceberg's writer tree and
    the Avro schema's JSON for the header."""

    file_schema: Schema
    name: str
    writer: Writer
    schema_json: str


def _layout(file_schema: Schema, record_schema: Schema, name: str) -> _Layout:
    return _Layout(file_schema, name, resolve_writer(record_schema=record_schema, file_schema=file_schema),
                   json.dumps(AvroSchemaConversion().iceberg_to_avro(file_schema, schema_name=name)))


@lru_cache(maxsize=1)
def _header_writer() -> Writer:
    return construct_writer(META_SCHEMA)


@lru_cache(maxsize=1)
def _entry_layout() -> _Layout:
    """A v2 manifest entry of an unpartitioned spec (the partition struct is empty whatever the schema)."""
    spec = PartitionSpec(spec_id=0)
    data_file = pm.data_file_with_partition(format_version=2, partition_type=spec.partition_type(Schema()))
    schema = pm.manifest_entry_schema_with_data_file(format_version=2, data_file=data_file)
    return _layout(schema, schema, "manifest_entry")


@lru_cache(maxsize=1)
def _list_layout() -> _Layout:
    return _layout(pm.MANIFEST_LIST_FILE_SCHEMAS[2], pm.MANIFEST_LIST_FILE_SCHEMAS[pm.DEFAULT_READ_VERSION],
                   "manifest_file")


class _Container(AvroOutputFile[Any]):
    """pyiceberg's Avro container writer, given its layout instead of building it."""

    def __init__(self, output_file: OutputFile, layout: _Layout, metadata: dict[str, str]) -> None:
        # AvroOutputFile.__init__ without resolve_writer: the same attributes, from the layout
        self.output_file = output_file
        self.file_schema = layout.file_schema
        self.schema_name = layout.name
        self.sync_bytes = os.urandom(SYNC_SIZE)
        self.writer = layout.writer
        self.metadata = metadata
        self._schema_json = layout.schema_json

    def _write_header(self) -> None:
        # AvroOutputFile._write_header with the Avro schema's JSON from the layout
        codec = self.metadata.get(AVRO_CODEC_KEY, "gzip")  # pyiceberg's default (write.avro.compression-codec)
        codec = CODEC_MAPPING_ICEBERG_TO_AVRO.get(codec, codec)
        meta = {**self.metadata, _SCHEMA_KEY: self._schema_json, AVRO_CODEC_KEY: codec}
        _header_writer().write(self.encoder, AvroFileHeader(MAGIC, meta, self.sync_bytes))


class _ManifestWriter(pm.ManifestWriterV2):
    """pyiceberg's v2 manifest writer with the layout built once."""

    @property
    def _meta(self) -> dict[str, str]:
        return {"schema": self._schema.model_dump_json(), "partition-spec": to_json(self._spec.fields).decode("utf-8"),
                "partition-spec-id": str(self._spec.spec_id), "format-version": "2",
                AVRO_CODEC_KEY: self._compression, "content": "data"}

    def new_writer(self) -> AvroOutputFile[pm.ManifestEntry]:
        return _Container(self._output_file, _entry_layout(), self._meta)


_ENCODED: OrderedDict[tuple[str, int, int, int], bytes] = OrderedDict()
_ENCODED_MAX = 4096
_ENCODED_LOCK = threading.Lock()


def _encoded(writer: Writer, manifest: pm.ManifestFile) -> bytes:
    """A manifest's record in a manifest list, encoded once (records of a path never change once
    its sequence numbers are assigned; the key holds them, and the length, anyway)."""
    key = (manifest.manifest_path, manifest.manifest_length, manifest.sequence_number,
           manifest.min_sequence_number)
    with _ENCODED_LOCK:  # publishes of several tables (and early rounds) run on several threads
        data = _ENCODED.get(key)
        if data is not None:
            _ENCODED.move_to_end(key)
            return data
    out = io.BytesIO()
    writer.write(BinaryEncoder(out), manifest)
    data = out.getvalue()
    with _ENCODED_LOCK:
        _ENCODED[key] = data
        if len(_ENCODED) > _ENCODED_MAX:
            _ENCODED.popitem(last=False)
    return data


class _ManifestListWriter(pm.ManifestListWriterV2):
    """pyiceberg's v2 manifest-list writer with the layout built once and each manifest's record
    encoded once."""

    def __enter__(self) -> pm.ManifestListWriter:
        self._writer = _Container(self._output_file, _list_layout(), self._meta)
        self._writer.__enter__()
        return self

    def add_manifests(self, manifest_files: list[pm.ManifestFile]) -> pm.ManifestListWriter:
        # AvroOutputFile.write_block of the prepared manifests, their records from _encoded
        w = self._writer
        prepared = [self.prepare_manifest(m) for m in manifest_files]
        block = b"".join(_encoded(w.writer, m) for m in prepared)
        w.encoder.write_int(len(prepared))
        if codec := w.compression_codec():
            content, length = codec.compress(block)
            w.encoder.write_int(length)
            w.encoder.write(content)
        else:
            w.encoder.write_int(len(block))
            w.encoder.write(block)
        w.encoder.write(w.sync_bytes)
        return self


def write_manifest(format_version: TableVersion, spec: PartitionSpec, schema: Schema, output_file: OutputFile,
                   snapshot_id: int, avro_compression: AvroCompressionCodec) -> pm.ManifestWriter:
    """``pyiceberg.manifest.write_manifest``, its Avro set-up cached (v2, unpartitioned)."""
    if format_version != 2 or spec.fields:
        return pm.write_manifest(format_version, spec, schema, output_file, snapshot_id, avro_compression)
    return _ManifestWriter(spec, schema, output_file, snapshot_id, avro_compression)


def write_manifest_list(format_version: TableVersion, output_file: OutputFile, snapshot_id: int,
                        parent_snapshot_id: int | None, sequence_number: int | None,
                        avro_compression: AvroCompressionCodec) -> pm.ManifestListWriter:
    """``pyiceberg.manifest.write_manifest_list``, its Avro set-up cached (v2)."""
    if format_version != 2 or sequence_number is None:
        return pm.write_manifest_list(format_version, output_file, snapshot_id, parent_snapshot_id,
                                      sequence_number, avro_compression)
    return _ManifestListWriter(output_file, snapshot_id, parent_snapshot_id, sequence_number, avro_compression)
