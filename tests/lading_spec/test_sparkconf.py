"""``spec.spark.sparkConf``: what a tenant may set."""

from __future__ import annotations

import pytest

from lading_spec.errors import SpecError
from lading_spec.sparkconf import SANDBOX_CONF, parse_spark_conf


def test_values_become_strings_sorted() -> None:
    assert parse_spark_conf({"spark.sql.shuffle.partitions": 8, "spark.sql.adaptive.enabled": "true"}) == \
        {"spark.sql.adaptive.enabled": "true", "spark.sql.shuffle.partitions": "8"}
    assert parse_spark_conf(None) == {}


@pytest.mark.parametrize("key", sorted(SANDBOX_CONF))
def test_sandbox_settings_cannot_be_turned_back_on(key: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spark_conf({key: " True "})
    assert info.value.field == f"spark.sparkConf.{key}" and "remove the key" in info.value.message
    assert parse_spark_conf({key: "false"}) == {key: "false"}


def test_not_a_mapping() -> None:
    with pytest.raises(SpecError, match="spark.sparkConf"):
        parse_spark_conf(["spark.x=1"])
