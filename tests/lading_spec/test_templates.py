import datetime as dt

import pytest

from lading_spec.errors import SpecError
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
