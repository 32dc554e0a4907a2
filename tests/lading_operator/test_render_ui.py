"""Every rendered SparkApplication has the Spark UI's kill switch off, and no spec turns it on."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lading_operator import kinds, reconcile, render
from lading_spec.errors import SpecError
from lading_spec.sparkconf import parse_spark_conf

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SPECS: dict[str, dict[str, Any]] = {
    "CopyJob": {"from": {"query": "SELECT 1 AS x"}, "to": {"files": "s3://bucket/x/", "format": "csv"}},
    "StreamCopy": {"source": {"kafka": {"bootstrapServers": ["kafka:9092"], "topics": ["t"]}},
                   "target": {"table": "s3://bucket/t/"}},
    "Compaction": {"table": "s3://bucket/t/"},
}


@pytest.mark.parametrize("kind", kinds.ALL, ids=lambda k: k.name)
@pytest.mark.parametrize("conf", [None, {"spark.sql.shuffle.partitions": "4"}])
def test_every_kind_renders_kill_disabled(kind: kinds.Kind, conf: dict[str, str] | None) -> None:
    spec = dict(SPECS[kind.name])
    if conf:
        spec["spark"] = {"sparkConf": conf}
    run = render.RunIdentity(kind.name, "ns", "r", "uid", 1, "r1", NOW)
    app = render.build_sparkapplication(spec, run, operator_fields=kind.operator_fields,
                                        continuous=kind.trigger == "continuous")
    assert app["spec"]["sparkConf"]["spark.ui.killEnabled"] == "false"


@pytest.mark.parametrize("key", ["spark.ui.killEnabled", "spark.UI.KillEnabled", "spark.ui.killenabled"])
@pytest.mark.parametrize("value", ["true", " TRUE ", "yes"])
def test_a_tenant_cannot_turn_it_back_on(key: str, value: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_spark_conf({key: value})
    assert e.value.field == f"spark.sparkConf.{key}" and "spark.ui.killEnabled=false" in e.value.message
    refused = reconcile.validate(kinds.COPYJOB, {**SPECS["CopyJob"], "spark": {"sparkConf": {key: value}}}, "ns",
                                 None, NOW)
    assert refused is not None and refused[0] == "InvalidSpec"
