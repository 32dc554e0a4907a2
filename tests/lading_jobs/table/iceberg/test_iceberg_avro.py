"""The mirror's Avro writers (``table/iceberg/avro.py``): pyiceberg's own writers, their Avro set-up
built once per process instead of once per file (issue 31, the mirror's cost per commit).

A manifest and a manifest list written through them are byte for byte what pyiceberg writes (but
for the random sync marker every Avro file draws), and a run of commits builds the Avro schemas at
most once, where pyiceberg builds two per commit.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg import manifest as pm
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

from lading_jobs.table import format as fmt
from lading_jobs.table import writer
from lading_jobs.table.iceberg import avro as iceberg_avro
from lading_jobs.table.iceberg import mirror
from lading_jobs.table.iceberg import view as ice
from lading_jobs.table.log.commits import Part
from lading_jobs.table.schema import TableSchema
from lading_jobs.table.stats.part import ColumnStats, PartStats

SCHEMA = TableSchema.of([("id", "bigint"), ("name", "string"), ("amount", "decimal(12,2)")])


def _part(n: int) -> Part:
    cols = {1: ColumnStats(0, n, n + 9), 2: ColumnStats(1, f"a{n}", f"z{n}"), 3: ColumnStats(0, "-1.50", "2.25")}
    return Part(f"data/w-{n:04d}/part-00000-00000.parquet", 1000 + n, PartStats(10, 1000 + n, n, n, 1, 1, cols))


def _same_but_sync(ours: mirror._Output, theirs: mirror._Output, sync_ours: bytes, sync_theirs: bytes) -> None:
    a, b = ours.buffer.getvalue(), theirs.buffer.getvalue()
    assert sync_ours in a and sync_theirs in b
    assert a.replace(sync_ours, sync_theirs) == b


def test_a_manifest_and_a_manifest_list_are_pyicebergs_bytes() -> None:
    schema = ice.iceberg_schema(SCHEMA)
    outs = {}
    for name, write in (("ours", iceberg_avro.write_manifest), ("theirs", pm.write_manifest)):
        out = mirror._Output(f"file:///t/metadata/{name}-m0.avro")
        with write(2, PartitionSpec(spec_id=0), schema, out, 7, "deflate") as w:
            for n in range(3):
                w.add_entry(pm.ManifestEntry.from_args(status=pm.ManifestEntryStatus.ADDED, snapshot_id=7,
                                                       sequence_number=7, file_sequence_number=7,
                                                       data_file=ice.data_file("file:///t/", _part(n), SCHEMA)))
        outs[name] = (out, w._writer.sync_bytes, w.to_manifest_file())
    assert type(outs["ours"][2]) is type(outs["theirs"][2])
    _same_but_sync(outs["ours"][0], outs["theirs"][0], outs["ours"][1], outs["theirs"][1])
    older = pm.ManifestFile.from_args(**{**{k: getattr(outs["ours"][2], k) for k in (
        "manifest_path", "manifest_length", "partition_spec_id", "content", "added_snapshot_id", "added_files_count",
        "existing_files_count", "deleted_files_count", "added_rows_count", "existing_rows_count",
        "deleted_rows_count", "partitions", "key_metadata")}, "sequence_number": 3, "min_sequence_number": 2})
    lists = {}
    for name, write_list in (("ours", iceberg_avro.write_manifest_list), ("theirs", pm.write_manifest_list),
                             ("ours again", iceberg_avro.write_manifest_list)):  # its records from the cache
        out = mirror._Output(f"file:///t/metadata/snap-7-{name.replace(' ', '-')}.avro")
        with write_list(2, out, 7, 6, 7, "deflate") as lw:
            lw.add_manifests([older, outs["theirs"][2]])
        lists[name] = (out, lw._writer.sync_bytes)
    for name in ("ours", "ours again"):
        _same_but_sync(lists[name][0], lists["theirs"][0], lists[name][1], lists["theirs"][1])


def test_a_run_of_commits_builds_the_avro_schemas_at_most_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyiceberg converts a manifest's and a manifest list's schema to Avro for every file it writes
    (two per commit); the mirror's writers convert each once per process, whatever the commits."""
    calls = []
    convert = AvroSchemaConversion.iceberg_to_avro

    def counted(self: AvroSchemaConversion, *args: object, **kwargs: object) -> object:
        calls.append(kwargs.get("schema_name"))
        return convert(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(AvroSchemaConversion, "iceberg_to_avro", counted)
    uri = f"file://{tmp_path}/t/"
    for i in range(5):
        data = pa.table({"id": pa.array([i], pa.int64()), "name": [f"n{i}"]})
        written = writer.write_parts(uri, [data], SCHEMA, write_id=fmt.new_write_id())
        writer.commit_parts(uri, written, create=writer.NewTable(SCHEMA) if i == 0 else None)
    assert mirror.describe(uri)["snapshotVersion"] == 4
    assert len(calls) <= 2, calls  # pyiceberg's own writers: 10 (a manifest and a manifest list per commit)
