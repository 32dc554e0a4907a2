import datetime as dt
import json

import pytest

from lading_spec.compaction import parse_compaction
from lading_spec.copyjob import parse_copyjob
from lading_spec.errors import SpecError
from lading_spec.streamcopy import parse_streamcopy
from lading_spec.templates import resolve_destination

WHEN = dt.datetime(2026, 11, 21, 6, 30, 5, tzinfo=dt.UTC)


def test_run_time_and_identity_placeholders() -> None:
    out = resolve_destination("s3://b/{namespace}/{name}/{run_time:%Y%m%dT%H%M%SZ}/{run_id}/",
                              run_time=WHEN, run_id="r7", name="exp", namespace="ns")
    assert out == "s3://b/ns/exp/20261121T063005Z/r7/"


def test_run_time_is_rendered_in_utc() -> None:
    local = WHEN.astimezone(dt.timezone(dt.timedelta(hours=5)))
    assert resolve_destination("{run_time:%H}", run_time=local, run_id="r") == "06"


@pytest.mark.parametrize("template", ["s3://b/{when}/", "s3://b/{run_id:%Y}/"])
def test_unknown_or_malformed_placeholders_are_rejected(template: str) -> None:
    with pytest.raises(SpecError) as info:
        resolve_destination(template, run_time=WHEN, run_id="r")
    assert info.value.field == "to.files" and "run_time" in str(info.value)


PLACEHOLDERS = ["{namespace}", "{name}", "{run_id}", "{run_time:%Y}", "{run_time}"]


@pytest.mark.parametrize("placeholder", PLACEHOLDERS)
@pytest.mark.parametrize(("spec", "field"), [
    ({"from": {"files": "s3://inbox/@/", "format": "csv"}, "to": {"table": "s3://tables/x/"}}, "from.files"),
    ({"from": {"fileList": ["s3://inbox/@/a.csv"], "format": "csv"}, "to": {"table": "s3://tables/x/"}}, "from.fileList[0]"),
    ({"from": {"table": "s3://tables/@/"}, "to": {"files": "s3://outbox/x/"}}, "from.table"),
    ({"from": {"files": "s3://inbox/x/", "format": "csv"}, "to": {"table": "s3://tables/@/"}}, "to.table"),
    ({"from": {"files": "s3://inbox/x/", "format": "csv"}, "to": {"table": "s3://tables/x/"},
      "onError": "continue", "rejectedRows": "s3://rejects/@/"}, "rejectedRows"),
])
def test_copyjob_placeholders_only_in_to_files(spec: dict, field: str, placeholder: str) -> None:
    # Only to.files is filled; elsewhere {namespace} would be one literal directory all tenants share.
    raw = json.loads(json.dumps(spec).replace("@", placeholder))
    with pytest.raises(SpecError) as info:
        parse_copyjob(raw)
    assert info.value.field == field and placeholder in str(info.value) and "to.files" in str(info.value)
    parsed = parse_copyjob({"from": {"table": "s3://tables/x/"}, "to": {"files": f"s3://outbox/{placeholder}/"}})
    assert parsed.target.files == f"s3://outbox/{placeholder}/"


def test_streamcopy_and_compaction_refuse_placeholders() -> None:
    with pytest.raises(SpecError) as info:
        parse_compaction({"table": "s3://tables/{namespace}/"})
    assert info.value.field == "table"
    with pytest.raises(SpecError) as info:
        parse_streamcopy({"source": {"files": {"uri": "s3://inbox/{namespace}/", "format": "json"}},
                          "target": {"table": "s3://tables/x/"}})
    assert info.value.field == "source.files.uri"
    with pytest.raises(SpecError) as info:
        parse_streamcopy({"source": {"files": {"uri": "s3://inbox/x/", "format": "json"}},
                          "target": {"table": "s3://tables/{namespace}/"}})
    assert info.value.field == "target.table"


def test_other_braces_are_literal() -> None:
    parsed = parse_copyjob({"from": {"table": "s3://tables/{not-a-placeholder}/"}, "to": {"files": "s3://outbox/x/"}})
    assert parsed.source.table == "s3://tables/{not-a-placeholder}/"
