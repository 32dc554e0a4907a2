"""File names, Hive escaping and run tokens (pure)."""

from __future__ import annotations

import pytest

from lading_jobs.unload import naming
from lading_spec.formats import CsvOptions, JsonOptions, ParquetOptions


@pytest.mark.parametrize(("fmt", "options", "ext"), [
    ("csv", CsvOptions(), "csv"),
    ("csv", CsvOptions(compression="gzip"), "csv.gz"),
    ("csv", CsvOptions(compression="zstd"), "csv.zst"),
    ("json", JsonOptions(), "jsonl"),
    ("json", JsonOptions(compression="gzip"), "jsonl.gz"),
    ("parquet", ParquetOptions(compression="zstd"), "parquet"),
])
def test_extension(fmt: str, options: object, ext: str) -> None:
    assert naming.extension(fmt, options) == ext  # type: ignore[arg-type]


def test_names_sort_task_then_sequence() -> None:
    names = [naming.file_name(t, s, "csv") for t in (0, 2, 11) for s in (0, 1, 10, 100)]
    assert sorted(names) == names
    assert naming.file_name(3, 7, "parquet") == "part-00003-00007.parquet"
    assert naming.file_name(3, 7, "csv", "abcd0123") == "part-00003-00007-abcd0123.csv"


def test_run_membership() -> None:
    token = naming.run_token("run-1")
    assert len(token) == 8 and token != naming.run_token("run-2")
    assert naming.is_part_of_run(f"s3://b/p/part-00000-00001-{token}.csv.gz", token)
    assert not naming.is_part_of_run(f"s3://b/p/part-00000-00001-{naming.run_token('run-2')}.csv", token)
    assert naming.is_part_of_run("s3://b/p/region=eu/part-00001-00000.parquet", None)
    assert not naming.is_part_of_run(f"s3://b/p/part-00001-00000-{token}.parquet", None)
    assert not naming.is_part_of_run("s3://b/p/_lading_manifest.json", None)


def test_hive_escaping() -> None:
    assert naming.partition_dir(("region", "day"), ("eu/west", None)) == \
        "region=eu%2Fwest/day=__HIVE_DEFAULT_PARTITION__/"
    assert naming.escape_path_name("a=b:c%") == "a%3Db%3Ac%25"
    assert naming.escape_path_name("") == naming.HIVE_NULL
    assert naming.escape_path_name("héllo world") == "héllo world"


def test_manifest_names() -> None:
    assert naming.manifest_name(None) == "_lading_manifest.json"
    assert naming.manifest_name("abcd0123") == "_lading_manifest-abcd0123.json"
