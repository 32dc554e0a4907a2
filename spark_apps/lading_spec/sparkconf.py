"""``spec.spark.sparkConf``: the Spark properties a tenant may set.

Some settings keep a tenant's query inside its inputs: SQL on paths
(``csv.`s3://...```) and ``${...}`` substitution (``${env:AWS_SECRET_ACCESS_KEY}``)
stay off. They are in every rendered SparkApplication and every lading session
(:data:`SANDBOX_CONF`), and a sparkConf that sets them otherwise is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lading_spec.errors import SpecError

FIELD = "spark.sparkConf"
SANDBOX_CONF: dict[str, str] = {
    "spark.sql.runSQLOnFiles": "false",
    "spark.sql.variable.substitute": "false",
}


def parse_spark_conf(raw: Any, field: str = FIELD) -> dict[str, str]:
    """Validate ``sparkConf``; values become strings. Errors name ``spark.sparkConf.<key>`` and the fix."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
        raise SpecError(field, "expected a mapping of Spark properties to values")
    conf = {k: str(v) for k, v in raw.items()}
    for key, value in conf.items():
        if key in SANDBOX_CONF and value.strip().lower() != SANDBOX_CONF[key]:
            raise SpecError(f"{field}.{key}", f"must stay {SANDBOX_CONF[key]}: it keeps queries away from files "
                                              "and the environment; remove the key (lading sets it)")
    return dict(sorted(conf.items()))

