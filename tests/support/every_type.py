"""A DataFrame with a column of every type lading's one mapping supports, nested and intervals
included, and the table schema (type names) that holds it; shared by table and load tests."""

from __future__ import annotations

from typing import Any

# (column, table type name). Spark SQL here cannot make TIME values; tests cover time(6) in Arrow.
COLUMNS: list[tuple[str, str]] = [
    ("id", "int"), ("b", "boolean"), ("i8", "tinyint"), ("i16", "smallint"), ("i64", "bigint"),
    ("f32", "float"), ("f64", "double"), ("dec", "decimal(38,10)"), ("s", "string"), ("vc", "varchar(10)"),
    ("ch", "char(3)"), ("js", "json"), ("u", "uuid"), ("bin", "binary"), ("d", "date"), ("ts", "timestamp"),
    ("ntz", "timestamp_ntz"), ("dti", "interval day to second"), ("hour", "interval hour"),
    ("ymi", "interval year to month"), ("mo", "interval month"), ("arr", "array<int>"),
    ("ymarr", "array<interval year to month>"), ("st", "struct<a:int,t:string,ts:timestamp>"),
    ("m", "map<string,double>"), ("deep", "array<struct<x:bigint,y:array<string>>>"),
    ("mst", "map<int,struct<d:decimal(10,2),i:interval day to second>>"), ("n", "void"), ("v", "variant"),
]

QUERY = """
SELECT * FROM VALUES
 (1, true, 1Y, 2S, 9223372036854775807L, CAST(1.5 AS FLOAT), 0.1D,
  CAST('12345678901234567890.0123456789' AS DECIMAL(38,10)), 'a,"b"\n☃', 'vc', 'chr', '{"a": [1, 2]}',
  '0b5e5c1e-6f6e-4d0a-9a39-8e1f4f3f6c2a', X'00FF2C', DATE'0001-01-01', TIMESTAMP'2024-01-02 03:04:05.123456',
  TIMESTAMP_NTZ'9999-12-31 23:59:59.999999', INTERVAL '1 02:03:04.000005' DAY TO SECOND, INTERVAL '30' HOUR,
  INTERVAL '-1-2' YEAR TO MONTH, INTERVAL '7' MONTH, array(1, null), array(INTERVAL '3' MONTH, null),
  named_struct('a', 1, 't', 'x', 'ts', TIMESTAMP'2020-01-01 00:00:00'), map('k', 2.5D, 'z', null),
  array(named_struct('x', 1L, 'y', array('p', null)), null),
  map(1, named_struct('d', CAST(1.25 AS DECIMAL(10,2)), 'i', INTERVAL '2' SECOND)), null, parse_json('{"a":[1,2]}')),
 (2, false, -128Y, -32768S, -9223372036854775808L, CAST('NaN' AS FLOAT), CAST('-Infinity' AS DOUBLE),
  CAST('-0.0000000001' AS DECIMAL(38,10)), '', 'v', 'c  ', 'null', '00000000-0000-0000-0000-000000000000', X'',
  DATE'9999-12-31', TIMESTAMP'1970-01-01 00:00:00', TIMESTAMP_NTZ'0001-01-01 00:00:00',
  INTERVAL '-0 00:00:00.000001' DAY TO SECOND, INTERVAL '-2' HOUR, INTERVAL '100-11' YEAR TO MONTH,
  INTERVAL '-1' MONTH, array(), array(), named_struct('a', null, 't', null, 'ts', null), map(),
  array(), map(2, null), null, parse_json('null')),
 (3, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null,
  null, null, null, null, null, null, null, null, null, null)
 AS t(id, b, i8, i16, i64, f32, f64, dec, s, vc, ch, js, u, bin, d, ts, ntz, dti, hour, ymi, mo, arr, ymarr, st,
      m, deep, mst, n, v)
"""


def source(spark: Any) -> Any:
    return spark.sql(QUERY)


def rows(df: Any) -> list[dict[str, Any]]:
    """Collected rows as plain Python, sorted by id: variants as JSON text, year-month intervals
    as int months (PySpark cannot collect them), NaN made comparable."""
    from lading_jobs.formats.spark import to_transfer

    exprs = [f"to_json({c}) AS {c}" if c == "v" else c for c in df.columns]
    out = []
    for r in to_transfer(df).selectExpr(*exprs).collect():
        d = r.asDict(recursive=True)
        for k, v in d.items():
            if isinstance(v, float) and v != v:
                d[k] = "NaN"
        out.append(d)
    return sorted(out, key=lambda d: d["id"])
