"""``spec.connection`` (every kind): the region is a region name, as the CRDs' pattern says."""

from __future__ import annotations

from typing import Any

import pytest

from lading_spec.compaction import parse_compaction
from lading_spec.copyjob import parse_copyjob
from lading_spec.errors import SpecError
from lading_spec.streamcopy import parse_streamcopy

SPECS: dict[str, tuple[Any, dict[str, Any]]] = {
    "CopyJob": (parse_copyjob, {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://bkt/out/"}}),
    "StreamCopy": (parse_streamcopy, {"source": {"kafka": {"bootstrapServers": ["k:9092"], "topics": ["t"]}},
                                      "target": {"table": "s3://bkt/t/"}}),
    "Compaction": (parse_compaction, {"table": "s3://bkt/t/"}),
}


@pytest.mark.parametrize("kind", sorted(SPECS))
@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "auto", "a" * 63])
def test_region_names_are_accepted(kind: str, region: str) -> None:
    parse, spec = SPECS[kind]
    assert parse({**spec, "connection": {"region": region}}).connection.region == region


@pytest.mark.parametrize("kind", sorted(SPECS))
@pytest.mark.parametrize("region", ["not a region!", "US-EAST-1", "us_east_1", "a" * 64, "", "us-east-1\n",
                                    "us-east-1\nAWS_SECRET_ACCESS_KEY=x", 1, ["us-east-1"]])
def test_other_regions_are_refused(kind: str, region: Any) -> None:
    parse, spec = SPECS[kind]
    with pytest.raises(SpecError) as exc:
        parse({**spec, "connection": {"region": region}})
    assert exc.value.field == "connection.region" and "us-east-1" in exc.value.message


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_no_region_is_fine(kind: str) -> None:
    parse, spec = SPECS[kind]
    assert parse({**spec, "connection": {}}).connection.region is None
