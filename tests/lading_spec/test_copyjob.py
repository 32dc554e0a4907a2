"""CopyJob spec validation: defaults, and errors that name the field and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from lading_spec.copyjob import DEFAULT_BUFFER_SIZE, DEFAULT_MAX_FILE_SIZE, parse_copyjob
from lading_spec.errors import SpecError
from lading_spec.formats import CsvOptions, ParquetOptions


def unload(**to: Any) -> dict[str, Any]:
    return {
        "from": {"query": "SELECT * FROM orders", "inputs": [{"name": "orders", "files": "s3://lake/raw/orders/"}]},
        "to": {"files": "s3://exports/orders/{run_time:%Y%m%d}/", **to},
    }


def test_unload_defaults() -> None:
    spec = parse_copyjob(unload())
    assert spec.source.kind == "query"
    assert spec.source.inputs[0].files is not None
    assert spec.source.inputs[0].files.format == "parquet"
    assert spec.target.kind == "files"
    assert spec.target.format == "csv"
    assert spec.target.options == CsvOptions()
    assert spec.target.max_file_size == DEFAULT_MAX_FILE_SIZE == 256 * 1024**2
    assert spec.target.buffer_size == DEFAULT_BUFFER_SIZE
    assert spec.target.if_exists == "error"


def test_unload_with_all_fields() -> None:
    spec = parse_copyjob(unload(format="parquet", options={"compression": "zstd", "rowGroupSize": 5000},
                                maxFileSize="6MB", bufferSize="8MB", partitionBy=["region"], ifExists="replace"))
    assert spec.target.options == ParquetOptions(compression="zstd", row_group_rows=5000)
    assert spec.target.max_file_size == 6 * 1024**2
    assert spec.target.partition_by == ("region",)
    assert spec.target.if_exists == "replace"


@pytest.mark.parametrize(("options", "expected"), [
    ({"forceQuote": ["id", "note"]}, ("id", "note")),
    ({"forceQuoteAll": True}, "*"),
    ({"forceQuoteAll": False, "forceQuote": ["id"]}, ("id",)),
    ({}, ()),
])
def test_force_quote_columns_or_all(options: dict[str, Any], expected: Any) -> None:
    spec = parse_copyjob(unload(options=options))
    assert isinstance(spec.target.options, CsvOptions)
    assert spec.target.options.force_quote == expected


def test_load_spec() -> None:
    spec = parse_copyjob({
        "from": {"files": "s3://lake/in/", "pattern": "*.csv", "format": "csv", "options": {"header": True}},
        "to": {"table": "s3://lake/tables/orders", "envelope": "upsert", "keyColumns": ["id"],
               "schema": [{"name": "id", "type": "bigint", "nullable": False}]},
        "onError": "continue", "maxErrors": 10, "rejectedRows": "s3://lake/rejected/",
    })
    assert spec.source.kind == "files" and spec.target.kind == "table"
    assert spec.load.on_error == "continue" and spec.load.max_errors == 10
    assert spec.target.key_columns == ("id",)


@pytest.mark.parametrize("given, parsed", [({}, None), ({"icebergMirror": False}, False),
                                           ({"icebergMirror": True}, True)])
def test_the_iceberg_mirror_switch_of_a_table_target(given: dict[str, Any], parsed: bool | None) -> None:
    """to.icebergMirror: unset (None) leaves an existing table's switch alone; a new table then gets the mirror."""
    for source in ({"files": "s3://lake/in/"}, {"query": "SELECT 1 AS x"}):
        spec = parse_copyjob({"from": source, "to": {"table": "s3://lake/t/", **given}})
        assert spec.target.iceberg_mirror is parsed


def test_files_to_files_is_a_format_conversion() -> None:
    spec = parse_copyjob({"from": {"files": "s3://lake/in/", "format": "parquet"},
                          "to": {"files": "s3://lake/out/", "format": "csv", "partitionBy": ["day"]}})
    assert spec.source.kind == "files" and spec.target.kind == "files"
    assert spec.source.files is not None and spec.source.files.format == "parquet"
    assert spec.target.format == "csv" and spec.target.partition_by == ("day",)


@pytest.mark.parametrize(
    ("spec", "field", "needle"),
    [
        ({"to": {"files": "s3://a/b/"}}, "from", "missing"),
        ({"from": {"query": "x", "table": "s3://abc/t"}, "to": {"files": "s3://abc/o/"}}, "from", "exactly one"),
        (unload(format="xml"), "to.format", "csv, parquet, json"),
        (unload(maxFileSize="10mb"), "to.maxFileSize", "did you mean MB"),
        (unload(bufferSize="1MB"), "to.bufferSize", "at least 5MB"),
        # S3 allows 10,000 parts per upload: 100 GB in 5 MB parts would need 20,481 (fails on 1b6c3cc)
        (unload(maxFileSize="100GB", bufferSize="5MB"), "to.bufferSize", "raise to.bufferSize to at least 11MB"),
        (unload(ifExists="overwrite"), "to.ifExists", "error, replace, append"),
        (unload(options={"header": True, "sep": ";"}), "to.options.sep", "accepted: header"),
        (unload(options={"delimiter": ";;"}), "to.options.delimiter", "single character"),
        (unload(options={"delimiter": "\u00e9"}), "to.options.delimiter", "single ASCII character"),
        (unload(options={"quote": "\u00ab"}), "to.options.quote", "single ASCII character"),
        (unload(options={"escape": "\x00"}), "to.options.escape", "single ASCII character"),
        (unload(options={"forceQuote": "*"}), "to.options.forceQuote", "forceQuoteAll: true"),
        (unload(options={"forceQuote": ["a"], "forceQuoteAll": True}), "to.options.forceQuote", "not both"),
        (unload(options={"forceQuote": [3]}), "to.options.forceQuote", "list of column names"),
        (unload(options={"forceQuoteAll": "yes"}), "to.options.forceQuoteAll", "true or false"),
        (unload(format="json", options={"forceQuoteAll": True}), "to.options.forceQuoteAll", "unknown json option"),
        ({**unload(), "to": {"files": "s3://exports/{when}/"}}, "to.files", "unknown placeholder"),
        ({**unload(), "to": {"files": "hdfs://x/y/"}}, "to.files", "s3://bucket/prefix/"),
        ({**unload(), "to": {"files": "s3://ab/y/"}}, "to.files", "bucket"),
        ({"from": {"files": "s3://lake/in/"}, "to": {"files": "s3://lake/out/"}, "force": True}, "force",
         "loads only"),
        ({"from": {"files": "s3://lake/in/"}, "to": {"table": "s3://lake/t", "envelope": "upsert"}},
         "to.keyColumns", "key columns"),
        ({**unload(), "onError": "continue"}, "onError", "loads only"),
        ({**unload(), "to": {"files": "s3://lake/o/", "icebergMirror": False}}, "to.icebergMirror",
         "table targets (to.table) only"),
        ({"from": {"files": "s3://lake/in/"}, "to": {"table": "s3://lake/t", "icebergMirror": "no"}},
         "to.icebergMirror", "true or false"),
        ({**unload(), "colour": "red"}, "colour", "unknown field"),
        ({"from": {"query": "SELECT 1", "inputs": [{"name": "a b", "files": "s3://lake/x/"}]},
          "to": {"files": "s3://lake/o/"}}, "from.inputs[0].name", "identifier"),
    ],
)
def test_invalid_specs_name_the_field(spec: dict[str, Any], field: str, needle: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_copyjob(spec)
    assert info.value.field == field
    assert needle in str(info.value)


@pytest.mark.parametrize("endpoint", [
    "http://minio:9000", "https://s3.eu-west-1.example.com", "http://10.0.0.5:9000/base/", "http://[::1]:9000",
])
def test_endpoint_accepted(endpoint: str) -> None:
    spec = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://bkt/o/"}, "connection": {"endpoint": endpoint}}
    assert parse_copyjob(spec).connection.endpoint == endpoint


@pytest.mark.parametrize("endpoint", [
    "http://169.254.169.254", "http://169.254.169.254:80/latest", "http://169.254.170.2", "http://[fd00:ec2::254]",
    "http://[fe80::a9fe:a9fe]", "http://[::ffff:169.254.169.254]", "http://2852039166", "http://0xa9fea9fe",
    "http://169.254.43518", "http://metadata.google.internal", "http://metadata.google.internal.",
    "https://metadata",
])
def test_the_instance_metadata_service_is_never_an_endpoint(endpoint: str) -> None:
    # An S3 GET there (path style: bucket "latest") answers with the node's credentials.
    spec = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://bkt/o/"}, "connection": {"endpoint": endpoint}}
    with pytest.raises(SpecError) as info:
        parse_copyjob(spec)
    assert info.value.field == "connection.endpoint" and "instance metadata service" in info.value.message


@pytest.mark.parametrize(("endpoint", "needle"), [
    ("http://user:secret@minio:9000", "must not carry credentials"),
    ("http://minio:9000/@x", "must not carry credentials"),
    ("http://evil.example\\@minio:9000", "backslashes"),
    ("http://minio :9000", "whitespace"),
    ("http://minio:9000/?x=1", "query or fragment"),
    ("http://minio:9000#f", "query or fragment"),
    ("http://minio:notaport", "no valid host"),
    ("http://", "no valid host"),
    ("minio:9000", "http:// or https://"),
    ("ftp://minio", "http:// or https://"),
])
def test_endpoint_refused_naming_the_field(endpoint: str, needle: str) -> None:
    spec = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://bkt/o/"}, "connection": {"endpoint": endpoint}}
    with pytest.raises(SpecError) as info:
        parse_copyjob(spec)
    assert info.value.field == "connection.endpoint" and needle in info.value.message
    assert "user:secret" not in str(info.value)  # the message never repeats a password


@pytest.mark.parametrize(("source", "field", "message"), [
    ({"files": "s3://lake/in/", "fileList": ["s3://lake/a.csv"]}, "from.fileList", "not both"),
    ({"fileList": ["s3://lake/a.csv", "s3://lake/b.csv", "s3://lake/a.csv"]}, "from.fileList[2]",
     "s3://lake/a.csv is also fileList[0]; each file is read once"),
    ({"query": "SELECT * FROM t", "inputs": [{"name": "t", "files": "s3://lake/in/", "fileList": ["s3://lake/a"]}]},
     "from.inputs[0].fileList", "not both"),
])
def test_a_file_list_names_each_file_once_and_alone(source: dict[str, Any], field: str, message: str) -> None:
    # Before, duplicates were read twice and files + fileList were read together (the admission
    # rules refuse both too: tests/crds/test_crds.py).
    with pytest.raises(SpecError) as info:
        parse_copyjob({"from": source, "to": {"files": "s3://exports/o/"}})
    assert info.value.field == field and message in info.value.message


def test_hive_partitioning_of_a_file_set() -> None:
    spec = parse_copyjob({"from": {"files": "s3://lake/orders/", "format": "parquet", "partitioning": "hive",
                                   "partitionColumns": [{"name": "dt", "type": "date"},
                                                        {"name": "amount", "type": "DECIMAL(12, 2)"}]},
                          "to": {"table": "s3://lake/t/"}})
    assert spec.source.files is not None and spec.source.files.partitioning == "hive"
    assert spec.source.files.partition_columns == (("dt", "date"), ("amount", "decimal(12,2)"))
    spec = parse_copyjob({"from": {"query": "SELECT * FROM o", "inputs": [
        {"name": "o", "files": "s3://lake/orders/", "partitioning": "hive"}]}, "to": {"files": "s3://exports/o/"}})
    assert spec.source.inputs[0].files is not None and spec.source.inputs[0].files.partition_columns == ()


@pytest.mark.parametrize(("source", "field", "message"), [
    ({"files": "s3://lake/in/", "partitioning": "delta"}, "from.partitioning", "accepted: hive"),
    ({"files": "s3://lake/in/", "partitionColumns": [{"name": "dt", "type": "date"}]}, "from.partitionColumns",
     "partitioning: hive only"),
    ({"files": "s3://lake/in/*/", "partitioning": "hive"}, "from.partitioning", "as a prefix"),
    ({"fileList": ["s3://lake/in/dt=1/a.csv"], "partitioning": "hive"}, "from.partitioning", "as a prefix"),
    ({"files": "s3://lake/in/", "partitioning": "hive", "partitionColumns": [{"name": "dt", "type": "map<int,int>"}]},
     "from.partitionColumns[0].type", "flat Spark SQL type"),
    ({"files": "s3://lake/in/", "partitioning": "hive",
      "partitionColumns": [{"name": "dt", "type": "date"}, {"name": "dt", "type": "int"}]},
     "from.partitionColumns[1].name", "named twice"),
])
def test_hive_partitioning_refused_naming_the_field(source: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_copyjob({"from": source, "to": {"table": "s3://lake/t/"}})
    assert info.value.field == field and message in info.value.message
