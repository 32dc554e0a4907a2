"""Driver and executor memory strings are accepted exactly when Spark accepts them.

spark-operator passes ``driver.memory`` / ``executor.memory`` to Spark as
``spark.driver.memory`` / ``spark.executor.memory``, which Spark reads with
``JavaUtils.byteStringAsMb``: an integer with an optional unit, b or k/m/g/t/p alone or
followed by b, i or ib (Spark 4; any case), so ``512m``, ``2g`` and ``4Gi``, but no
fraction (``2.5g``). The CRD pattern (admission, crd-check) and the operator's check
(``lading_operator.render``) must agree with that JVM function, asked directly.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.admission import Admission
from harness.fixtures import load_crds
from lading_operator import render
from lading_spec.errors import SpecError

CRD_FILES = sorted((Path(__file__).resolve().parents[2] / "crds").glob("*.yaml"))
UNLOAD = {"from": {"query": "SELECT 1"}, "to": {"files": "s3://bkt/out/"}}

pytestmark = pytest.mark.spark

VALUES = ["512m", "1g", "2G", "4g", "1024", "10gb", "1Gb", "3t", "2k", "1p", "512mb", "01g",
          "2.5g", "4Gi", "512Mi", "1GiB", "2ti", "1bi", "1gbi", "1.0g", "g", "", "1 g", "-1g", "1e3m", "0x10m", "1gib", "5x"]


@pytest.fixture(scope="module")
def admission() -> Any:
    with Admission(load_crds(CRD_FILES)) as adm:
        yield adm


def spark_accepts(spark: Any, value: str) -> bool:
    utils = spark.sparkContext._jvm.org.apache.spark.network.util.JavaUtils
    try:
        utils.byteStringAsMb(value)
        return True
    except Exception:  # py4j wraps Spark's NumberFormatException
        return False


@pytest.mark.parametrize("role", ["driver", "executor"])
def test_memory_is_admitted_and_rendered_exactly_when_spark_parses_it(spark: Any, admission: Admission,
                                                                      role: str) -> None:
    disagree = []
    for value in VALUES:
        expected = spark_accepts(spark, value)
        spec = copy.deepcopy(UNLOAD)
        spec["spark"] = {role: {"memory": value}}
        obj = {"apiVersion": "lading.io/v1alpha1", "kind": "CopyJob", "metadata": {"name": "m", "namespace": "n"},
               "spec": spec}
        admitted = admission.create(obj).allowed
        try:
            render.parse_spark_options(spec["spark"], render.Installation())
            rendered = True
        except SpecError as exc:
            assert exc.field == f"spark.{role}.memory"
            rendered = False
        if not (admitted == rendered == expected):
            disagree.append((value, {"spark": expected, "crd": admitted, "operator": rendered}))
    assert disagree == []


def test_the_defaults_agree_with_the_crd_and_the_docs() -> None:
    """Executor and driver memory default to 1g everywhere (CRD description, docs, render)."""
    options = render.parse_spark_options(None, render.Installation())
    assert options.driver.memory == options.executor.memory == "1g"
    for path in CRD_FILES:
        crd = yaml.safe_load(path.read_text().partition("---\n")[2])
        spark = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["spark"]
        for role in ("driver", "executor"):
            assert "Default: 1g." in spark["properties"][role]["properties"]["memory"]["description"], path
