"""``to.schemaEvolution`` (CopyJob) and ``target.schemaEvolution`` (StreamCopy): parsing and the errors
that name the field, for every combination the CRD also refuses."""

from __future__ import annotations

from typing import Any

import pytest

from lading_spec.copyjob import parse_copyjob
from lading_spec.errors import SpecError
from lading_spec.streamcopy import parse_streamcopy


def load(fmt: str = "json", options: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    source: dict[str, Any] = {"files": "s3://bkt/in/", "format": fmt}
    if options is not None:
        source["options"] = options
    spec: dict[str, Any] = {"from": source, "to": {"table": "s3://bkt/t/", "schemaEvolution": "addColumns"}}
    spec.update(extra)
    return spec


def test_the_default_is_none_and_add_columns_parses() -> None:
    spec = load()
    del spec["to"]["schemaEvolution"]
    assert parse_copyjob(spec).target.schema_evolution == "none"
    assert parse_copyjob(load()).target.schema_evolution == "addColumns"
    assert parse_copyjob(load("parquet")).target.schema_evolution == "addColumns"
    assert parse_copyjob(load("csv", {"header": True})).target.schema_evolution == "addColumns"


@pytest.mark.parametrize("spec, field, message", [
    ({**load(), "to": {"table": "s3://bkt/t/", "schemaEvolution": "merge"}}, "to.schemaEvolution",
     "accepted: none"),
    (load("csv"), "to.schemaEvolution", "from.options.header: true"),
    (load("csv", {"header": False}), "to.schemaEvolution", "matches fields by position"),
    (load(transform={"select": "SELECT a FROM source"}), "to.schemaEvolution", "add the new columns to the table"),
    ({"from": {"query": "SELECT 1 AS a"}, "to": {"table": "s3://bkt/t/", "schemaEvolution": "addColumns"}},
     "to.schemaEvolution", "applies to loads"),
    ({"from": {"query": "SELECT 1 AS a"}, "to": {"files": "s3://bkt/o/", "schemaEvolution": "addColumns"}},
     "to.schemaEvolution", "table targets"),
])
def test_copyjob_refuses_naming_the_field(spec: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(SpecError, match=message) as exc:
        parse_copyjob(spec)
    assert exc.value.field == field


def stream(source: dict[str, Any], mode: str = "addColumns") -> dict[str, Any]:
    return {"source": source, "target": {"table": "s3://bkt/t/", "schemaEvolution": mode}}


KAFKA = {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["t"]}}


def test_streamcopy_parses_and_refuses_naming_the_field() -> None:
    assert parse_streamcopy(stream(KAFKA)).target.schema_evolution == "addColumns"
    assert parse_streamcopy(stream({"files": {"uri": "s3://bkt/in/"}})).target.schema_evolution == "addColumns"
    assert parse_streamcopy(stream(KAFKA, "none")).target.schema_evolution == "none"
    cases = [
        (stream({"kafka": {**KAFKA["kafka"], "valueFormat": "raw"}}), "valueFormat: raw has fixed columns"),
        (stream({"files": {"uri": "s3://bkt/in/", "format": "csv"}}), "source.files.options.header: true"),
        (stream(KAFKA, "yes"), "accepted: none"),
        ({**stream(KAFKA), "transform": {"select": "SELECT id FROM source"}}, "add the new columns to the table"),
    ]
    for spec, message in cases:
        with pytest.raises(SpecError, match=message) as exc:
            parse_streamcopy(spec)
        assert exc.value.field == "target.schemaEvolution"
