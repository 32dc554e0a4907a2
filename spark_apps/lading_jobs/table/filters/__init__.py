"""Filters and skipping: expression trees (``expr``: Spark's pushed conjuncts; ``vexpr``: the
interpreter's tree), their conversion from Spark's analysed plan (``catalyst``), and the ResultSpec
interpreter that decides from statistics whether a part may hold a row (``interp``).

May import the table's base (``table.format``, ``table.errors``, ``table.schema``) and the
statistics (``table.stats``); never the log, the Iceberg mirror, the reader or the writer.
"""
